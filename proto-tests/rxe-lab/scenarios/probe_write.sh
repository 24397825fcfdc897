# desc: probe: one 4 KiB RDMA WRITE (FIRST/MIDDLE/LAST); --set SIZE=N ITERS=N
# data: yes
server() { probe_server; }
client() { probe_client --ops write --size "${SIZE:-4096}" --iters "${ITERS:-1}"; }
