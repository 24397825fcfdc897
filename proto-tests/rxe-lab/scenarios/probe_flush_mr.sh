# desc: probe: FLUSH of the whole MR (selectivity memory region, length 0), global visibility, MR with IBV_ACCESS_FLUSH_GLOBAL
# data: yes
server() { probe_server; }
client() { probe_client --ops write,flush_mr --size 4096; }
