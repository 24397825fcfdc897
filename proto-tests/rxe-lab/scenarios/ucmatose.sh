# desc: ucmatose, 1 rdma_cm connection, 5 messages of 64 bytes
# data: yes
server() { ucmatose -b "$SELF" -c 1 -C 5 -S 64; }
client() { retry ucmatose -s "$PEER" -b "$SELF" -c 1 -C 5 -S 64; }
