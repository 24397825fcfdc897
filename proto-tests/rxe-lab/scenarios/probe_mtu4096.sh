# desc: probe: path MTU 4096 (netdev MTU 9000): 16 KiB WRITE, SEND and READ
# data: yes
# mtu: 4096
server() { probe_server; }
client() { probe_client --ops write,send,read --size 16384; }
