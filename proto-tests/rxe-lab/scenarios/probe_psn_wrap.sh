# desc: probe: starting PSN 0xfffff0, 8 x 4 KiB WRITE + SEND + READ: the 24-bit PSN wraps
# data: yes
server() { probe_server; }
client() { probe_client --psn 0xfffff0 --ops write,send,read --size 4096 --iters 4; }
