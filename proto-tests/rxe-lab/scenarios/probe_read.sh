# desc: probe: one 4 KiB RDMA READ (READ_RESPONSE FIRST/MIDDLE/LAST, one PSN per response)
# data: yes
server() { probe_server; }
client() { probe_client --ops read --size 4096; }
