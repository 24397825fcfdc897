# desc: ibv_uc_pingpong, 2 KiB messages, 5 round trips (UC SEND, no ACKs)
server() { ibv_uc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s 2048 -n 5; }
client() { retry ibv_uc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s 2048 -n 5 "$PEER4"; }
