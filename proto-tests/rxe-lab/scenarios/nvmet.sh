# desc: NVMe-oF over rxe: the kernel's nvmet-rdma target on rxe0 exporting a 64 MiB file-backed namespace at port 4420, until its host says it is done (TCP port 18700); the host is rocex (--host-cmd) or, with two guests, the kernel's nvme-rdma initiator (nvme-cli, fio)
# lab: host (needs --host-cmd, or the storage packages for two guests; not run by rxe-lab-all)
# The subsystem's names and size are what proto-tests/storage/scenarios/nvmeof.sh expects
# back from Identify.
NVMET_NQN=nqn.2026-12.org.rocex:lab-nvmet
NVMET_SERIAL=rocexlab0000001
NVMET_MODEL="rocex lab nvmet"
NVMET_MB=64
NVMET_CFG=/sys/kernel/config/nvmet

# nvmet, nvmet-rdma and nvme-rdma with their dependencies: the image's storage modules.
nvmet_modules() {
	lab_storage_modules || return 1
	[ -d /sys/module/nvmet_rdma ] || { echo "nvmet_rdma is not in this guest image"; return 1; }
}

nvmet_up() {
	grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config || return 1
	dd if=/dev/zero of=/tmp/ns1.img bs=1M count="$NVMET_MB" 2>/dev/null || return 1
	s=$NVMET_CFG/subsystems/$NVMET_NQN
	mkdir "$s" && echo 1 >"$s/attr_allow_any_host" && echo "$NVMET_SERIAL" >"$s/attr_serial" \
		&& echo "$NVMET_MODEL" >"$s/attr_model" || return 1
	mkdir "$s/namespaces/1" && echo /tmp/ns1.img >"$s/namespaces/1/device_path" \
		&& echo 1 >"$s/namespaces/1/buffered_io" && echo 1 >"$s/namespaces/1/enable" || return 1
	p=$NVMET_CFG/ports/1
	mkdir "$p" && echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" \
		&& echo "$SELF" >"$p/addr_traddr" && echo 4420 >"$p/addr_trsvcid" || return 1
	ln -s "$s" "$p/subsystems/$NVMET_NQN" || return 1
	echo "nvmet: $NVMET_NQN on rdma $SELF:4420, namespace 1: ${NVMET_MB} MiB file"
}

server() {
	nvmet_modules && nvmet_up || { dmesg | tail -n 20; return 1; }
	timeout "$((GTIMEOUT - 10))" nc -l -p 18700
	rc=$?
	dmesg | grep -E 'nvmet' | tail -n 8
	return "$rc"
}
# The kernel's own initiator against the other guest's target: nvme connect, Identify's
# serial and model, a verified fio pass at depth 16, then (BENCH_SECS=N) fio's IOPS and
# throughput for 4 KiB and 128 KiB random writes and reads at depths 1 and 16, the
# workload `rocex nvmeof --bench-*` runs.
client() {
	nvmet_modules || return 1
	[ -d /sys/module/nvme_rdma ] || { echo "nvme_rdma is not in this guest image"; return 1; }
	RETRIES=60 retry nvme connect -t rdma -a "$PEER" -s 4420 -n "$NVMET_NQN" || return 1
	dev=
	for _ in $(seq 50); do
		dev=$(ls /dev/nvme*n1 2>/dev/null | head -n1)
		[ -n "$dev" ] && break
		sleep 0.2
	done
	rc=1
	if [ -n "$dev" ]; then
		c=/sys/class/nvme/$(basename "$dev" | sed 's/n1$//')
		echo "kernel host: $dev serial '$(cat "$c/serial")' model '$(cat "$c/model")' $(($(cat "/sys/block/$(basename "$dev")/size") * 512)) bytes"
		fio --name=verify --filename="$dev" --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=4k --iodepth=16 --size=4m --verify=crc32c --do_verify=1 --output-format=terse \
			>/tmp/verify.out 2>&1 && echo "kernel host: fio verify of 4 MiB at depth 16: ok" && rc=0
		[ $rc = 0 ] || cat /tmp/verify.out
		if [ $rc = 0 ] && [ "${BENCH_SECS:-0}" -gt 0 ]; then
			for bs in 4k 128k; do for qd in 1 16; do for rw in randwrite randread; do
				fio --name=b --filename="$dev" --ioengine=libaio --direct=1 --rw="$rw" --bs="$bs" \
					--iodepth="$qd" --size=64m --time_based --runtime="$BENCH_SECS" >/tmp/b.out 2>&1 || rc=1
				echo "kernel bench: $rw $bs qd $qd: $(grep -E '^ *(read|write): IOPS' /tmp/b.out | sed 's/^ *//')"
			done; done; done
		fi
	fi
	nvme disconnect -n "$NVMET_NQN"
	echo done | nc "$PEER" 18700
	return $rc
}
