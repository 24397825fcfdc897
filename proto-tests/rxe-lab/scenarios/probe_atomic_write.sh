# desc: probe: one ATOMIC_WRITE (opcode 0x1D, answered by zero-length READ_RESPONSE_ONLY)
# data: yes
server() { probe_server; }
client() { probe_client --ops atomic_write; }
