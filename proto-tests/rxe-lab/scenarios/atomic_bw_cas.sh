# desc: ib_atomic_bw -A CMP_AND_SWAP, 20 iterations; --set ITERS=N
# data: yes
server() { ib_atomic_bw -d rxe0 -x "$GID" -m "$MTU" -A CMP_AND_SWAP -n "${ITERS:-20}" -F; }
client() { retry ib_atomic_bw -d rxe0 -x "$GID" -m "$MTU" -A CMP_AND_SWAP -n "${ITERS:-20}" -F "$PEER4"; }
