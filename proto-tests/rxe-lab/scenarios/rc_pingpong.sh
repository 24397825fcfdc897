# desc: ibv_rc_pingpong, 4 KiB messages, 5 round trips (SEND FIRST/MIDDLE/LAST, coalesced ACKs)
# data: yes
server() { ibv_rc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s 4096 -n 5; }
client() { retry ibv_rc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s 4096 -n 5 "$PEER4"; }
