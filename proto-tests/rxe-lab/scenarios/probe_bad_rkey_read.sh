# desc: probe: RDMA READ with an invalid rkey (NAK remote access error)
server() { probe_server; }
client() { probe_client --ops read --size 1024 --bad-rkey; }
