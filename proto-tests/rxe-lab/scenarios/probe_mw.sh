# desc: probe: a type-2 memory window over the MR: WRITE and READ through it, an 8-byte WRITE of the atomic word through it then CAS/FAA through the MR on that word, ATOMIC_WRITE then CAS on one word
# data: yes
server() { probe_server; }
client() { probe_client --ops mw_write,mw_read,mw_set,cas,faa,aw_set,cas --size 2048; }
