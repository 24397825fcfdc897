# desc: ibv_ud_pingpong, 512-byte datagrams, 5 round trips (UD SEND with DETH)
server() { ibv_ud_pingpong -d rxe0 -g "$GID" -s 512 -n 5; }
client() { retry ibv_ud_pingpong -d rxe0 -g "$GID" -s 512 -n 5 "$PEER4"; }
