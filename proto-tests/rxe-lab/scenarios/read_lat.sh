# desc: ib_read_lat, 64-byte messages, 50 iterations
# data: yes
server() { ib_read_lat -d rxe0 -x "$GID" -m "$MTU" -s 64 -n 50 -F; }
client() { retry ib_read_lat -d rxe0 -x "$GID" -m "$MTU" -s 64 -n 50 -F "$PEER4"; }
