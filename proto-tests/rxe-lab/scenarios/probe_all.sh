# desc: probe: every RC operation in turn, 2 iterations each, 2 KiB; --set SIZE=N ITERS=N
# data: yes
server() { probe_server; }
client() { probe_client --ops send,send_imm,send_inv,write,write_imm,read,cas,faa,atomic_write,flush --size "${SIZE:-2048}" --iters "${ITERS:-2}"; }
