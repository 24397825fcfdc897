# desc: ibv_srq_pingpong, 4 QPs sharing an SRQ, 1 KiB messages, 5 round trips
# loss runs: none (a lost final ACK after the peer exits leaves the server retrying until its retry count is exhausted)
server() { ibv_srq_pingpong -d rxe0 -g "$GID" -m "$MTU" -q 4 -s 1024 -n 5; }
client() { retry ibv_srq_pingpong -d rxe0 -g "$GID" -m "$MTU" -q 4 -s 1024 -n 5 "$PEER4"; }
