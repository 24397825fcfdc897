# desc: probe: RNR with rnr_retry 0 (RNR_RETRY_EXC_ERR expected)
server() { probe_server; }
client() { probe_client --ops send --size 512 --rnr-delay 300 --rnr-retry 0 --expect rnr_retry_exc; }
