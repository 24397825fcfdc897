# desc: rping, 5 ping-pongs of 64 bytes over rdma_cm (SEND + RDMA READ/WRITE)
# data: yes
server() { rping -s -a "$SELF" -v -C 5 -S 64; }
client() { retry rping -c -a "$PEER" -v -C 5 -S 64; }
