# desc: ib_read_bw, 4 KiB messages, 20 iterations; --set SIZE=N ITERS=N
# data: yes
server() { ib_read_bw -d rxe0 -x "$GID" -m "$MTU" -s "${SIZE:-4096}" -n "${ITERS:-20}" -F; }
client() { retry ib_read_bw -d rxe0 -x "$GID" -m "$MTU" -s "${SIZE:-4096}" -n "${ITERS:-20}" -F "$PEER4"; }
