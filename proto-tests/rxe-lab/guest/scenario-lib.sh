# Helpers for the guest init and for scenarios (sourced by busybox sh).
# busybox sh runs its own ip/tc applets for bare names: iproute2 by full path.

lab_realbin() { # first non-symlink executable among the arguments
	for p in "$@"; do
		[ -x "$p" ] && [ ! -L "$p" ] && { echo "$p"; return 0; }
	done
	echo "$1"
}
IP=$(lab_realbin /usr/sbin/ip /usr/bin/ip)
TC=$(lab_realbin /usr/sbin/tc /usr/bin/tc)
RDMA=$(lab_realbin /usr/sbin/rdma /usr/bin/rdma)

lab_off() {
	sync
	reboot -f
	sleep 10
}

# lab_run SECS FUNC: run a scenario function with a deadline.
lab_run() {
	secs=$1; shift
	"$@" &
	pid=$!
	( sleep "$secs"; echo "@@RXE-LAB TIMEOUT after ${secs}s"; kill -TERM $pid 2>/dev/null; sleep 2; kill -KILL $pid 2>/dev/null ) &
	wd=$!
	wait $pid
	r=$?
	kill $wd 2>/dev/null
	return $r
}

# retry CMD...: re-run a client until the server answers (up to $RETRIES
# tries, 0.5 s apart). A run that got past the connect and then failed is
# not retried when it ran longer than $RETRY_WINDOW seconds.
retry() {
	n=0
	while :; do
		t0=$(cut -d. -f1 /proc/uptime)
		"$@"
		r=$?
		[ $r -eq 0 ] && return 0
		t1=$(cut -d. -f1 /proc/uptime)
		n=$((n + 1))
		if [ $n -ge "${RETRIES:-40}" ] || [ $((t1 - t0)) -gt "${RETRY_WINDOW:-5}" ]; then
			return $r
		fi
		echo "(retry $n: $1 exited $r)"
		sleep 0.5
	done
}

# lab_netem "loss 5% delay 1ms ...": netem on eth0 egress. RoCE (UDP 4791)
# only, unless NETEM_ALL=1 (then every frame, the out-of-band TCP too).
lab_netem() {
	if [ "$NETEM_ALL" = 1 ]; then
		$TC qdisc add dev eth0 root netem $1
		return
	fi
	$TC qdisc add dev eth0 root handle 1: prio bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 || return 1
	$TC qdisc add dev eth0 parent 1:3 handle 30: netem $1 || return 1
	$TC filter add dev eth0 parent 1: protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:3 || return 1
	$TC filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 \
		match ip6 protocol 17 0xff match ip6 dport 4791 0xffff flowid 1:3 || return 1
}

lab_counters() {
	echo "@@RXE-LAB COUNTERS"
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
		v=$(cat "$f" 2>/dev/null)
		[ -n "$v" ] && [ "$v" != 0 ] && echo "  ${f##*/} $v"
	done
	if [ -n "$NETEM" ]; then
		$TC -s qdisc show dev eth0 | grep -E 'qdisc netem|dropped' | sed 's/^/  /'
	fi
}

# The rxe lab probe (probe/probe.c): the server is the responder, the client
# (requester) tells it the plan over TCP.
probe_server() { rxe-probe server -d rxe0 -g "$GID" "$@"; }
probe_client() { rxe-probe client "$PEER" -d rxe0 -g "$GID" --mtu "$MTU" "$@"; }

# The storage modules (iSER, LIO, NVMe-oF over RDMA, sd, ext4), which the init does not
# load at boot; build.sh writes their load order.
lab_storage_modules() {
	for m in $(cat /etc/rxe-lab-modules-storage); do
		insmod "/lib/modules/$KVER/$m.ko" 2>/tmp/insmod.err \
			|| grep -q 'File exists' /tmp/insmod.err || { cat /tmp/insmod.err; return 1; }
	done
}
