# desc: rocex perf write bw between the guests (host-built rocex, its own UDP engine on eth0; rxe unloaded), 64 KiB, 500 iterations; --set SIZE=N ITERS=N WINDOW=N (rocex perf --window)
# lab: host-binary (needs run.sh --rocex FILE; not run by rxe-lab-all)
# The kernel's rxe holds UDP port 4791 on every address; rocex's engine needs it.
rocex_only() {
	[ -x "${ROCEX:-}" ] || { echo "no rocex binary: run.sh --rocex FILE"; return 1; }
	$RDMA link del rxe0 && rmmod rdma_rxe
}
rocex_perf() {
	"$ROCEX" perf write bw -m "$MTU" -s "${SIZE:-65536}" -n "${ITERS:-500}" \
		${WINDOW:+--window "$WINDOW"} --json "$@"
}
server() { rocex_only && rocex_perf; }
client() { rocex_only && retry rocex_perf "$PEER4"; }
