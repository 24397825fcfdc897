# desc: ibv_rc_pingpong, 4 KiB messages, 5 round trips (SEND FIRST/MIDDLE/LAST, coalesced ACKs); --set SIZE=N ITERS=N, EVENTS=1 for -e (completion events)
# data: yes
server() { ibv_rc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s "${SIZE:-4096}" -n "${ITERS:-5}" ${EVENTS:+-e}; }
client() { retry ibv_rc_pingpong -d rxe0 -g "$GID" -m "$MTU" -s "${SIZE:-4096}" -n "${ITERS:-5}" ${EVENTS:+-e} "$PEER4"; }
