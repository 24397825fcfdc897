# desc: NVMe-oF target: the kernel's nvmet-rdma on rxe0 exporting a 64 MiB file-backed namespace at port 4420, until the host side says it is done (TCP port 18700)
# lab: host (needs --host-cmd; not run by rxe-lab-all)
# The subsystem's names and size are what proto-tests/storage/scenarios/nvmeof.sh expects
# back from Identify.
NVMET_NQN=nqn.2026-12.org.rocex:lab-nvmet
NVMET_SERIAL=rocexlab0000001
NVMET_MODEL="rocex lab nvmet"
NVMET_MB=64
NVMET_CFG=/sys/kernel/config/nvmet

# nvmet and nvmet-rdma with their dependencies: loaded at boot in images that list them
# there, else from the image's storage module list.
nvmet_modules() {
	[ -d /sys/module/nvmet_rdma ] && return 0
	if type lab_storage_modules >/dev/null 2>&1; then
		lab_storage_modules
	else
		for m in $(cat /etc/rxe-lab-modules-storage 2>/dev/null); do
			insmod "/lib/modules/$(cat /etc/rxe-lab-kver)/$m.ko" 2>/dev/null
		done
	fi
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
client() { echo "nvmet: the guest is the target; run with --host-cmd"; return 1; }
