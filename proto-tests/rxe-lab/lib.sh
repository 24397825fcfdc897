# Shared settings for the rxe lab scripts (sourced, not executed).

RXE_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RXE_LAB_CACHE=${RXE_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocex/rxe-lab}
RXE_LAB_SUITE=${RXE_LAB_SUITE:-trixie}

# The guest image produced by build.sh.
RXE_LAB_IMAGE=$RXE_LAB_CACHE/image
RXE_LAB_VMLINUX=$RXE_LAB_IMAGE/vmlinux
RXE_LAB_INITRD=$RXE_LAB_IMAGE/base.cpio
RXE_LAB_VERSIONS=$RXE_LAB_IMAGE/versions.txt

log() { printf '[rxe-lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The keyring that verifies Debian's archive (the guests' suite and the host's backports).
RXE_LAB_KEYRING=${RXE_LAB_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

# The version of the host's QEMU, "10.0.2".
qemu_version() { qemu-system-x86_64 --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p'; }

# The Debian mirror is whatever this host's apt already uses.
host_mirror() {
  local f uri=
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    uri=$(awk '/^URIs:/ {for (i=2;i<=NF;i++) print $i}' "$f" | grep -v -- '-security' | grep -v security | head -n1)
    [[ -n $uri ]] && break
  done
  if [[ -z $uri && -r /etc/apt/sources.list ]]; then
    uri=$(awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i ~ /:\/\//) {print $i; break}}' \
            /etc/apt/sources.list | grep -v security | head -n1)
  fi
  [[ -n $uri ]] || die "no Debian mirror found in /etc/apt/sources.list{,.d}"
  echo "${uri%/}"
}

# run.sh's exit status when a guest's kernel crashed (an oops or a panic on its console):
# such a run says nothing about rocex or rxe's protocol.
RXE_LAB_GUEST_CRASH=75
# What marks a kernel crash on a guest console.
RXE_LAB_CRASH_RE='Kernel panic - not syncing|BUG: |Oops: |general protection fault|kernel BUG at'

# lab_run LOG RUN_ARGS...: one run.sh run with its output in LOG. A run whose guest kernel
# crashed runs once more; the crashed run's output is kept in LOG.crash and its tail shown.
lab_run() {
  local out=$1 rc=0
  shift
  timeout 300 bash "$RXE_LAB_DIR/run.sh" "$@" >"$out" 2>&1 || rc=$?
  if ((rc == RXE_LAB_GUEST_CRASH)); then
    mv "$out" "$out.crash"
    log "a guest kernel crashed (console in $out.crash); running once more"
    tail -n 40 "$out.crash" | sed 's/^/  | /' >&2
    rc=0
    timeout 300 bash "$RXE_LAB_DIR/run.sh" "$@" >"$out" 2>&1 || rc=$?
  fi
  return "$rc"
}
