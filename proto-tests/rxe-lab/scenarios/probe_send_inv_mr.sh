# desc: probe: SEND_WITH_INV naming an ordinary MR's rkey (ACK with the MSN unchanged, responder QP to error: the next WRITE is never answered)
# data: yes
server() { probe_server; }
client() { probe_client --ops send_inv,write --size 4096 --inv-mr --retry 1 --expect retry_exc; }
