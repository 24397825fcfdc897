# desc: probe: FLUSH of a range, global visibility, to a QP whose access flags lack IBV_ACCESS_FLUSH_GLOBAL/_PERSISTENT (MR with IBV_ACCESS_FLUSH_GLOBAL): NAK invalid request 0x61, responder QP to error
# data: yes
# Under loss a lost NAK leaves the FLUSH unanswered by the errored QP: retry exceeded is accepted then.
server() { probe_server; }
client() { probe_client --ops write,flush --size 4096 --qp-flush none --retry 6 --expect rem_inv_req,retry_exc; }
