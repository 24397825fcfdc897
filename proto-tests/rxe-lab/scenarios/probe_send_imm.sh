# desc: probe: one 1 KiB SEND_WITH_IMM (SEND_ONLY_WITH_IMMEDIATE)
# data: yes
server() { probe_server; }
client() { probe_client --ops send_imm --size 1024; }
