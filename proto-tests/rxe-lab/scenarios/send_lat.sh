# desc: ib_send_lat, 64-byte messages, 50 iterations
# data: yes
server() { ib_send_lat -d rxe0 -x "$GID" -m "$MTU" -s 64 -n 50 -F; }
client() { retry ib_send_lat -d rxe0 -x "$GID" -m "$MTU" -s 64 -n 50 -F "$PEER4"; }
