# desc: ib_send_bw over rdma_cm (-R): CM REQ/REP/RTU MADs on QP1, then 4 KiB SENDs, 20 iterations
# data: yes
server() { ib_send_bw -d rxe0 -R -m "$MTU" -s 4096 -n 20 -F; }
# A connect that reaches the server before it listens is rejected, and perftest
# does not recover from that on the server side: give the server time first.
client() { sleep 3; retry ib_send_bw -d rxe0 -R -m "$MTU" -s 4096 -n 20 -F "$PEER"; }
