# desc: probe: every RC operation over IPv6 (ULA) RoCE v2 GIDs
# data: yes
# ipv6: yes
server() { probe_server; }
client() { probe_client --ops send,send_imm,write,write_imm,read,cas,faa,atomic_write,flush --size 2048; }
