# desc: probe: RDMA WRITE with an invalid rkey (NAK remote access error 0x62, responder QP to error)
server() { probe_server; }
client() { probe_client --ops write --size 1024 --bad-rkey; }
