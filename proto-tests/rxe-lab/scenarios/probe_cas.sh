# desc: probe: 3 CMP_AND_SWAP (ATOMIC_ACKNOWLEDGE with original value)
# data: yes
server() { probe_server; }
client() { probe_client --ops cas --iters 3; }
