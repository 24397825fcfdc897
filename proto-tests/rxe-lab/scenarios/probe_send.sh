# desc: probe: one 4 KiB SEND (FIRST/MIDDLE/LAST at MTU 1024)
# data: yes
server() { probe_server; }
client() { probe_client --ops send --size 4096; }
