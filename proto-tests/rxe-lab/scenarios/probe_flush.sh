# desc: probe: one FLUSH (global visibility, range) of 4 KiB (opcode 0x1C, FETH+RETH)
# data: yes
server() { probe_server; }
client() { probe_client --ops write,flush --size 4096; }
