# desc: ib_send_lat, 64-byte messages, 50 iterations; --set SIZE=N ITERS=N
# data: yes
server() { ib_send_lat -d rxe0 -x "$GID" -m "$MTU" -s "${SIZE:-64}" -n "${ITERS:-50}" -F; }
client() { retry ib_send_lat -d rxe0 -x "$GID" -m "$MTU" -s "${SIZE:-64}" -n "${ITERS:-50}" -F "$PEER4"; }
