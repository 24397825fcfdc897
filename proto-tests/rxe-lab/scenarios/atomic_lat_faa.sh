# desc: ib_atomic_lat -A FETCH_AND_ADD, 20 iterations; --set ITERS=N
# data: yes
server() { ib_atomic_lat -d rxe0 -x "$GID" -m "$MTU" -A FETCH_AND_ADD -n "${ITERS:-20}" -F; }
client() { retry ib_atomic_lat -d rxe0 -x "$GID" -m "$MTU" -A FETCH_AND_ADD -n "${ITERS:-20}" -F "$PEER4"; }
