# desc: probe: FLUSH with the persistent type to a global-only MR (NAK remote access error expected)
server() { probe_server; }
client() { probe_client --ops flush --size 4096 --flush-type persistent --expect rem_access; }
