# desc: probe: one 4 KiB RDMA WRITE (FIRST/MIDDLE/LAST)
# data: yes
server() { probe_server; }
client() { probe_client --ops write --size 4096; }
