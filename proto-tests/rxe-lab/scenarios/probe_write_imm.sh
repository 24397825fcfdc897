# desc: probe: one 2 KiB RDMA WRITE_WITH_IMM (LAST_WITH_IMMEDIATE consumes a receive)
# data: yes
server() { probe_server; }
client() { probe_client --ops write_imm --size 2048; }
