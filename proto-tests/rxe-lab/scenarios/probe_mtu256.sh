# desc: probe: path MTU 256: 1 KiB WRITE, SEND and READ
# data: yes
# mtu: 256
server() { probe_server; }
client() { probe_client --ops write,send,read --size 1024; }
