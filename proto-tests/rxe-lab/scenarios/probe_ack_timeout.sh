# desc: probe: ACK timeout 12 / retry_cnt 7 / rnr_retry 3 with 16 x 2 KiB WRITEs (run with --loss to see retransmission)
# data: yes
server() { probe_server; }
client() { probe_client --ops write --size 2048 --iters 16 --timeout 12 --retry 7 --rnr-retry 3; }
