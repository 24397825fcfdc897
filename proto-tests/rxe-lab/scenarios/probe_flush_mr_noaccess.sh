# desc: probe: FLUSH of the whole MR, global visibility, MR without any FLUSH access flag (NAK remote access error 0x62)
# data: yes
# Under loss a lost NAK leaves the FLUSH unanswered by the errored QP: retry exceeded is accepted then.
server() { probe_server; }
client() { probe_client --ops write,flush_mr --size 4096 --mr-flush none --retry 6 --expect rem_access,retry_exc; }
