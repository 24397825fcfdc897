# desc: probe: UC QP: SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM (no ACKs)
server() { probe_server; }
client() { probe_client --uc --ops send,send_imm,write,write_imm --size 2048; }
