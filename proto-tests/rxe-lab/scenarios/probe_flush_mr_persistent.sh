# desc: probe: FLUSH of the whole MR, persistent, MR without IBV_ACCESS_FLUSH_PERSISTENT (NAK remote access error 0x62: the key's rights are checked before the whole-MR range check is skipped)
# data: yes
# Under loss a lost NAK leaves the FLUSH unanswered by the errored QP: retry exceeded is accepted then.
server() { probe_server; }
client() { probe_client --ops write,flush_mr --size 4096 --flush-type persistent --retry 6 --expect rem_access,retry_exc; }
