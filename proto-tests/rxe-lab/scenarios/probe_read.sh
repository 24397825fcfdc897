# desc: probe: one 4 KiB RDMA READ (READ_RESPONSE FIRST/MIDDLE/LAST, one PSN per response); --set SIZE=N ITERS=N
# data: yes
server() { probe_server; }
client() { probe_client --ops read --size "${SIZE:-4096}" --iters "${ITERS:-1}"; }
