# desc: probe: SEND_WITH_INV of a type-2 memory window rkey (IETH), receiver sees the invalidated rkey
# data: yes
server() { probe_server; }
client() { probe_client --ops send_inv --size 256; }
