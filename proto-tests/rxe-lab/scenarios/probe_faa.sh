# desc: probe: 3 FETCH_AND_ADD
# data: yes
server() { probe_server; }
client() { probe_client --ops faa --iters 3; }
