# desc: probe: SEND_WITH_INV of the window's rkey (ACK, MSN +1), then a WRITE through that rkey (NAK remote access error 0x62)
# data: yes
server() { probe_server; }
client() { probe_client --ops mw_write,send_inv,mw_write --size 256 --expect rem_access; }
