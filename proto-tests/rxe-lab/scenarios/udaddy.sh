# desc: udaddy, rdma_cm UD (SIDR REQ/REP) and 5 datagrams of 64 bytes
server() { udaddy -b "$SELF" -c 1 -C 5 -S 64; }
client() { retry udaddy -s "$PEER" -b "$SELF" -c 1 -C 5 -S 64; }
