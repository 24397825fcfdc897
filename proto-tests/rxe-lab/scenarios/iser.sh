# desc: iSER: server = LIO target (ib_isert, a file-backed LUN in RAM), client = the kernel initiator (ib_iser, iscsiadm) running fio verify jobs and a filesystem round trip; --set FIO=quick|full|recovery|none FS=0|1 LUN_MB=N
# lab: host (for proto-tests/storage; with --host-cmd one side is rocex, with two guests it is the rxe<->rxe baseline; not run by rxe-lab-all)
# data: yes
# The side that ends first tells its peer on TCP $STORAGE_PORT: the initiator sends "done",
# or "sha256 BYTES HEX" for the target to compare with the first BYTES of its LUN's file.
# FIO=recovery: the initiator says "fio started" first (the host then kills its target and
# starts it again), and afterwards its kernel must have seen the connection fail.

IQN=iqn.2026-12.org.rocex:lun
INITIATOR=iqn.2026-12.org.rocex:initiator
STORAGE_PORT=18701

# LIO through configfs (what targetcli writes): fileio backstore, one LUN, an iSER portal on
# this guest's address, no authentication, any initiator.
lio_target() {
	mb=${LUN_MB:-64}
	mount -t configfs configfs /sys/kernel/config 2>/dev/null
	c=/sys/kernel/config/target
	dd if=/dev/zero of=/tmp/lun.img bs=1M count=0 seek="$mb" 2>/dev/null || return 1
	mkdir -p $c/core/fileio_0/lun0 || return 1
	echo "fd_dev_name=/tmp/lun.img,fd_dev_size=$((mb * 1048576))" >$c/core/fileio_0/lun0/control
	echo 1 >$c/core/fileio_0/lun0/enable || return 1
	t=$c/iscsi/$IQN/tpgt_1
	mkdir -p $t/lun/lun_0 || return 1
	ln -s $c/core/fileio_0/lun0 $t/lun/lun_0/disk || return 1
	mkdir $t/np/$SELF:3260 || return 1
	echo 1 >$t/np/$SELF:3260/iser || { echo "no iSER portal (ib_isert)"; return 1; }
	for a in generate_node_acls=1 authentication=0 demo_mode_write_protect=0 cache_dynamic_acls=1; do
		echo "${a#*=}" >$t/attrib/"${a%=*}" || return 1
	done
	# libiscsi 1.19's iSER writes declare immediate data in the command PDU that they move
	# by RDMA READ instead, which isert refuses (isert_recv_done): no immediate data.
	echo No >$t/param/ImmediateData || return 1
	echo 1 >$t/enable || return 1
	echo "LIO target $IQN on $SELF:3260 (iSER), $mb MiB"
}

server() {
	lab_storage_modules || return 1
	lio_target || return 1
	msg=$(nc -l -p "$STORAGE_PORT")
	echo "initiator says: $msg"
	set -- $msg
	case $1 in
	done)
		[ "$2" = rc=0 ] && return 0
		dmesg | grep -iE 'iser|iscsi|target|rxe' | tail -n 20
		return 1
		;;
	sha256)
		got=$(dd if=/tmp/lun.img bs=512 count=$(($2 / 512)) 2>/dev/null | sha256sum | cut -d' ' -f1)
		echo "LUN file: sha256 of the first $2 bytes $got"
		[ "$got" = "$3" ] || { echo "LUN file differs from what the initiator wrote"; return 1; }
		;;
	*) return 1 ;;
	esac
}

# The SCSI disk of the session (tgtd's LUN 0 is a controller, not a disk): its name.
wait_disk() {
	n=0
	while [ $n -lt 100 ]; do
		for d in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
			[ -e "$d" ] && { echo "${d##*/}"; return 0; }
		done
		n=$((n + 1)); sleep 0.2
	done
	echo "no disk after login" >&2
	return 1
}

iscsi_login() {
	iscsiadm -m node -T "$IQN" -p "$PEER" -I iser --login >/tmp/login.out 2>&1 || { cat /tmp/login.out; return 1; }
	dev=/dev/$(wait_disk) || return 1
}

iscsi_logout() {
	iscsiadm -m node -T "$IQN" -p "$PEER" -I iser --logout >/dev/null || return 1
	n=0
	while [ -e "$dev" ] && [ $n -lt 50 ]; do n=$((n + 1)); sleep 0.2; done
}

# fio_verify BS IODEPTH SIZE: random writes with crc32c headers, then the same offsets read
# back and checked (--verify_only); each phase's IOPS and bandwidth line is printed.
fio_verify() {
	for phase in write verify; do
		extra=--do_verify=0
		[ $phase = verify ] && extra=--verify_only
		fio --name="$phase-$1-qd$2" --filename="$dev" --ioengine=libaio --direct=1 \
			--rw=randwrite --bs="$1" --iodepth="$2" --size="$3" --verify=crc32c \
			--verify_fatal=1 --randseed=$((${#1} * 100 + $2)) $extra >/tmp/fio.out 2>&1
		r=$?
		grep -E 'IOPS=|err=|verify|bad' /tmp/fio.out | sed "s/^/  [$phase bs=$1 qd=$2] /" | head -5
		[ $r -eq 0 ] || { tail -20 /tmp/fio.out; return 1; }
	done
}

fs_round_trip() {
	mke2fs -q "$dev" >/dev/null || mke2fs "$dev" || return 1
	mount -t ext4 "$dev" /mnt || return 1
	mkdir -p /mnt/d
	for f in 1 2 3; do dd if=/dev/urandom of=/mnt/f$f bs=4k count=$((f * f * 64)) 2>/dev/null; done
	for f in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of=/mnt/d/s$f bs=1k count=$f 2>/dev/null; done
	(cd /mnt && sha256sum f* d/*) >/tmp/sums
	umount /mnt || return 1
	iscsi_logout || return 1
	iscsi_login || return 1
	mount -t ext4 "$dev" /mnt || return 1
	(cd /mnt && sha256sum -c /tmp/sums) >/tmp/sums.out 2>&1; r=$?
	echo "  filesystem after logout and login: $(grep -c ': OK' /tmp/sums.out) of $(wc -l </tmp/sums) files match"
	umount /mnt
	return $r
}

client() {
	lab_storage_modules || return 1
	mkdir -p /etc/iscsi/nodes /etc/iscsi/send_targets /etc/iscsi/ifaces /var/lib/iscsi /run/lock/iscsi
	echo "InitiatorName=$INITIATOR" >/etc/iscsi/initiatorname.iscsi
	iscsid || return 1
	RETRIES=60 RETRY_WINDOW=10 retry iscsiadm -m discovery -t sendtargets -p "$PEER" -I iser || return 1
	iscsi_login || return 1
	echo "logged in over iSER: $dev ($(($(cat /sys/block/${dev#/dev/}/size) / 2048)) MiB)"
	rc=0
	if [ "${FIO:-quick}" = recovery ]; then
		n=0
		until echo "fio started" | nc "$PEER" "$STORAGE_PORT"; do
			n=$((n + 1)); [ $n -ge 40 ] && return 1; sleep 0.5
		done
	fi
	case ${FIO:-quick} in
	quick) fio_verify 4k 16 8M && fio_verify 128k 16 32M || rc=1 ;;
	full) { fio_verify 4k 1 4M && fio_verify 4k 16 8M && fio_verify 128k 1 16M && fio_verify 128k 16 32M; } || rc=1 ;;
	recovery)
		fio_verify 128k 16 48M || rc=1
		dmesg | grep -iE 'conn error|recover|iser' | tail -n 8 | sed 's/^/  kernel: /'
		dmesg | grep -q 'detected conn error' || { echo "the kernel saw no connection error"; rc=1; }
		;;
	esac
	[ $rc -eq 0 ] && [ "${FS:-1}" = 1 ] && { fs_round_trip || rc=1; }
	iscsi_logout
	echo "done rc=$rc" | nc "$PEER" "$STORAGE_PORT"
	return $rc
}
