# desc: probe: SEND before the receive is posted (server posts after 300 ms): RNR NAKs then success
server() { probe_server; }
client() { probe_client --ops send --size 512 --rnr-delay 300 --min-rnr 20; }
