# desc: ibv_ud_pingpong, 512-byte datagrams, 5 round trips (UD SEND with DETH); --set SIZE=N ITERS=N
server() { ibv_ud_pingpong -d rxe0 -g "$GID" -s "${SIZE:-512}" -n "${ITERS:-5}"; }
client() { retry ibv_ud_pingpong -d rxe0 -g "$GID" -s "${SIZE:-512}" -n "${ITERS:-5}" "$PEER4"; }
