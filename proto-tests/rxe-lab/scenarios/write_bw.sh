# desc: ib_write_bw, 4 KiB messages, 20 iterations
# data: yes
server() { ib_write_bw -d rxe0 -x "$GID" -m "$MTU" -s 4096 -n 20 -F; }
client() { retry ib_write_bw -d rxe0 -x "$GID" -m "$MTU" -s 4096 -n 20 -F "$PEER4"; }
