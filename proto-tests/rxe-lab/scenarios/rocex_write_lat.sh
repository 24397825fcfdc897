# desc: rocex perf write lat between the guests (host-built rocex, its own UDP engine on eth0; rxe unloaded), 8 bytes, 1000 iterations; --set SIZE=N ITERS=N
# lab: host-binary (needs run.sh --rocex FILE; not run by rxe-lab-all)
# The kernel's rxe holds UDP port 4791 on every address; rocex's engine needs it.
rocex_only() {
	[ -x "${ROCEX:-}" ] || { echo "no rocex binary: run.sh --rocex FILE"; return 1; }
	$RDMA link del rxe0 && rmmod rdma_rxe
}
rocex_perf() { "$ROCEX" perf write lat -m "$MTU" -s "${SIZE:-8}" -n "${ITERS:-1000}" --json "$@"; }
server() { rocex_only && rocex_perf; }
client() { rocex_only && retry rocex_perf "$PEER4"; }
