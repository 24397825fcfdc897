#!/usr/bin/env bash
# Build (or refresh) the rxe lab guest image from Debian trixie packages:
#   vmlinux      uncompressed kernel, booted through its PVH note
#   base.cpio    uncompressed initramfs: busybox, rdma-core, perftest, iproute2,
#                the probe, the rxe module closure and the guest init
# Everything lives in $RXE_LAB_CACHE (default ~/.cache/rocex/rxe-lab). A build
# whose inputs (package versions, lab scripts, probe source) did not change is
# a no-op.
#
# Usage: build.sh [--update] [--force]
#   --update   refresh the private package index (otherwise it is refreshed
#              only when missing or older than 7 days)
#   --force    rebuild the image even when the stamp matches
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

update=0 force=0
while (($#)); do
  case $1 in
    --update) update=1 ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown option $1" ;;
  esac
  shift
done

[[ $EUID -eq 0 ]] || die "run as root (dpkg -x ownership, chroot checks)"
for t in apt-get dpkg-deb zstd xz cpio modinfo gcc readelf chroot; do
  command -v "$t" >/dev/null || die "missing $t: run proto-tests/rxe-lab/install-deps.sh"
done




# Packages -------------------------------------------------------------------
# Userland that goes into the guest (plus the shared-library closure).
GUEST_PKGS=(busybox-static iproute2 libibverbs1 ibverbs-providers librdmacm1t64
            ibverbs-utils rdmacm-utils perftest
            open-iscsi targetcli-fb fio nvme-cli ethtool)
# Programs among their dependencies that the guest needs too (targetcli's Python).
GUEST_EXTRA_RE='^(python3(\.[0-9]+)?(-minimal)?|python3-.*|gir1\.2-.*)$'
# Only for compiling the probe (sysroot, not in the guest).
DEV_PKGS=(libibverbs-dev librdmacm-dev libc6-dev)

# Kernel modules the guest loads, in addition to their dependencies. crc32_pclmul: rxe's
# ICRC with PCLMULQDQ, as udev loads it on a real host (crc32_generic is the fallback).
MODULES=(virtio_pci virtio_net crc32_generic crc32_pclmul rdma_rxe rdma_ucm ib_uverbs
         ib_umad sch_netem sch_prio cls_u32)
# Storage over RDMA (iSER initiator and target, NVMe-oF over RDMA, a filesystem on the
# block device): in the image, loaded by the scenarios that use them (lab_storage_modules),
# not at boot.
STORAGE_MODULES=(crc32c_generic sd_mod ext4 ib_iser ib_isert iscsi_target_mod
                 target_core_file nvme_rdma nvmet_rdma)

# Private apt configuration ----------------------------------------------------
APT=$RXE_LAB_CACHE/apt
mkdir -p "$APT"/{etc/apt.conf.d,etc/preferences.d,etc/sources.list.d,etc/trusted.gpg.d,state/lists/partial,cache/archives/partial}
: >"$APT/state/status"

MIRROR=${RXE_LAB_MIRROR:-$(host_mirror)}
KEYRING=$RXE_LAB_KEYRING
[[ -r $KEYRING ]] || die "keyring $KEYRING missing: apt-get install debian-archive-keyring"

echo "deb [signed-by=$KEYRING] $MIRROR $RXE_LAB_SUITE main" >"$APT/etc/sources.list"
{
  echo "Dir::Etc \"$APT/etc\";"
  echo "Dir::Etc::SourceList \"$APT/etc/sources.list\";"
  echo "Dir::Etc::SourceParts \"$APT/etc/sources.list.d\";"
  echo "Dir::Etc::Parts \"$APT/etc/apt.conf.d\";"
  echo "Dir::Etc::Preferences \"$APT/etc/preferences\";"
  echo "Dir::Etc::PreferencesParts \"$APT/etc/preferences.d\";"
  echo "Dir::Etc::TrustedParts \"$APT/etc/trusted.gpg.d\";"
  echo "Dir::State \"$APT/state\";"
  echo "Dir::State::Lists \"$APT/state/lists\";"
  echo "Dir::State::status \"$APT/state/status\";"
  echo "Dir::Cache \"$APT/cache\";"
  echo "Dir::Cache::Archives \"$APT/cache/archives\";"
  echo "APT::Architecture \"amd64\";"
  echo "APT::Architectures { \"amd64\"; };"
  echo "APT::Install-Recommends \"false\";"
  echo "APT::Install-Suggests \"false\";"
  echo "Acquire::Languages \"none\";"
  echo "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";"
  echo "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled \"false\";"
  echo "Debug::NoLocking \"true\";"
  echo "APT::Sandbox::User \"root\";"
  # Keep a proxy the host's apt may need.
  apt-config dump 2>/dev/null | grep -iE '^Acquire::[a-z]+::Proxy ' || true
} >"$APT/apt.conf"
export APT_CONFIG=$APT/apt.conf
aptq() { apt-get -q "$@"; }

lists_fresh() {
  local rel
  rel=$(ls "$APT"/state/lists/*_dists_"${RXE_LAB_SUITE}"_InRelease 2>/dev/null | head -n1)
  [[ -n $rel ]] && [[ -n $(find "$rel" -mtime -7 2>/dev/null) ]]
}
if ((update)) || ! lists_fresh; then
  log "updating private package index ($RXE_LAB_SUITE)"
  # apt verifies the InRelease signature against $KEYRING (signed-by);
  # a verification failure is an error, never ignored.
  if ! aptq update 2>&1 | tee "$APT/update.log" | grep -vE '^(Get|Hit|Ign|Reading)' >&2; then :; fi
  if grep -qE '^(E:|W: GPG|W: .*(NO_PUBKEY|not signed|signature))' "$APT/update.log"; then
    die "private apt update failed (see $APT/update.log)"
  fi
  lists_fresh || die "private apt update produced no $RXE_LAB_SUITE index (see $APT/update.log)"
fi

# Versions -------------------------------------------------------------------
cand() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}'; }
KPKG=$(apt-cache show --no-all-versions linux-image-amd64 | awk -F': ' '/^Depends:/ {print $2}' \
        | tr ',' '\n' | sed 's/ *(.*//; s/^ *//' | grep '^linux-image-' | head -n1)
[[ -n $KPKG ]] || die "cannot resolve linux-image-amd64"
versions=$(for p in "$KPKG" "${GUEST_PKGS[@]}" "${DEV_PKGS[@]}"; do echo "$p $(cand "$p")"; done)
if grep -qE ' (\(none\))?$' <<<"$versions"; then die "some package has no candidate: $versions"; fi

inputs_hash=$( { echo "$versions"; echo "$MIRROR $RXE_LAB_SUITE"; echo "${MODULES[*]} ${STORAGE_MODULES[*]}";
                 cat "$0" "$RXE_LAB_DIR/lib.sh" "$RXE_LAB_DIR/guest/init" \
                     "$RXE_LAB_DIR/guest/scenario-lib.sh" "$RXE_LAB_DIR/probe/probe.c"; } | sha256sum | cut -c1-16)
STAMP=$RXE_LAB_IMAGE/stamp
if ((!force)) && [[ -f $STAMP && $(cat "$STAMP") == "$inputs_hash" && -s $RXE_LAB_VMLINUX && -s $RXE_LAB_INITRD ]]; then
  log "image up to date ($inputs_hash) in $RXE_LAB_IMAGE"
  exit 0
fi
log "building image $inputs_hash"
echo "$versions" | sed 's/^/  /' >&2

# Download -------------------------------------------------------------------
DEBS=$APT/cache/archives
log "downloading packages"
aptq install -y -d "${GUEST_PKGS[@]}" "${DEV_PKGS[@]}" >"$APT/install.log" 2>&1 \
  || { cat "$APT/install.log" >&2; die "download failed"; }
(cd "$DEBS" && aptq download "$KPKG" >>"$APT/install.log" 2>&1) \
  || { cat "$APT/install.log" >&2; die "kernel download failed"; }

# The exact set of .deb files for this build: the resolver's answer.
resolved=$(aptq install -y -s "${GUEST_PKGS[@]}" "${DEV_PKGS[@]}" | awk '/^Inst / {print $2}')
debfile() { # name -> newest matching .deb in the cache
  local v; v=$(cand "$1"); v=${v//:/%3a}
  ls "$DEBS/${1}_${v}_"*.deb 2>/dev/null | head -n1
}

# Guest rootfs ----------------------------------------------------------------
WORK=$RXE_LAB_CACHE/work
rm -rf "$WORK"; mkdir -p "$WORK"
ROOT=$WORK/rootfs SYSROOT=$WORK/sysroot KROOT=$WORK/kernel
mkdir -p "$ROOT" "$SYSROOT" "$KROOT"

usrmerge() { # move /bin /sbin /lib /lib64 into /usr and leave links behind
  local r=$1 d
  mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/usr/lib" "$r/usr/lib64"
  for d in bin sbin lib lib64; do
    if [[ -d $r/$d && ! -L $r/$d ]]; then
      cp -a "$r/$d/." "$r/usr/$d/" && rm -rf "${r:?}/$d"
    fi
    [[ -e $r/$d ]] || ln -s "usr/$d" "$r/$d"
  done
}

# The guest gets the named packages and the libraries among their dependencies.
log "extracting guest userland"
guest_set=()
for p in $resolved; do
  case $p in
    lib*-dev|libc-dev-bin|linux-libc-dev|libcrypt-dev|rpcsvc-proto|libnl-*-dev) continue ;;
    lib*|zlib1g|ibverbs-providers|busybox-static|iproute2|ibverbs-utils|rdmacm-utils|perftest) guest_set+=("$p") ;;
    open-iscsi|targetcli-fb|fio|nvme-cli|ethtool) guest_set+=("$p") ;;
    *) [[ $p =~ $GUEST_EXTRA_RE ]] && guest_set+=("$p") ;;
  esac
done
for p in "${guest_set[@]}"; do
  f=$(debfile "$p"); [[ -n $f ]] || die "no .deb for $p"
  dpkg-deb -x "$f" "$ROOT"
done
usrmerge "$ROOT"
rm -rf "$ROOT"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion,zsh} "$ROOT"/etc/init.d \
       "$ROOT"/usr/lib/x86_64-linux-gnu/gconv "$ROOT"/usr/share/misc/pci.ids

# Sysroot for the probe: the same libraries plus the -dev packages.
log "extracting probe sysroot"
for p in $resolved; do
  f=$(debfile "$p"); [[ -n $f ]] || die "no .deb for $p"
  case $p in lib*|zlib1g|linux-libc-dev) dpkg-deb -x "$f" "$SYSROOT" ;; esac
done
usrmerge "$SYSROOT"

# Kernel and modules -----------------------------------------------------------
log "extracting kernel $KPKG"
kdeb=$(debfile "$KPKG"); [[ -n $kdeb ]] || die "no .deb for $KPKG"
dpkg-deb -x "$kdeb" "$KROOT"
KMOD=$(ls -d "$KROOT"/lib/modules/* "$KROOT"/usr/lib/modules/* 2>/dev/null | head -n1 || true)
[[ -d $KMOD ]] || die "no modules in $KPKG"
KVER=${KMOD##*/}
vmlinuz=$(ls "$KROOT"/boot/vmlinuz-*)

mkdir -p "$RXE_LAB_IMAGE.new"
# extract-vmlinux: find a compressed stream that decompresses to an ELF.
extract_vmlinux() {
  local in=$1 out=$2 off
  for off in $(LC_ALL=C grep -aboP '\x28\xb5\x2f\xfd' "$in" | cut -d: -f1); do
    tail -c +"$((off + 1))" "$in" | zstd -dcq 2>/dev/null >"$out" || true
    [[ $(head -c4 "$out" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] && return 0
  done
  for off in $(LC_ALL=C grep -aboP '\xfd\x37\x7a\x58\x5a\x00' "$in" | cut -d: -f1); do
    tail -c +"$((off + 1))" "$in" | xz -dcq 2>/dev/null >"$out" || true
    [[ $(head -c4 "$out" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] && return 0
  done
  return 1
}
extract_vmlinux "$vmlinuz" "$RXE_LAB_IMAGE.new/vmlinux" || die "could not extract vmlinux from $vmlinuz"
readelf -n "$RXE_LAB_IMAGE.new/vmlinux" | grep -q 'Xen' || log "warning: vmlinux has no Xen/PVH note"

# Module closure.
declare -A modfile=() seen=()
while IFS= read -r f; do
  b=$(basename "$f"); b=${b%%.ko*}; modfile[${b//-/_}]=$f
done < <(find "$KMOD/kernel" -name '*.ko*')
builtin=$(sed 's#.*/##; s/\.ko$//; s/-/_/g' "$KMOD/modules.builtin")
order=()
MODDIR=$WORK/modules
mkdir -p "$MODDIR"
addmod() {
  local m=${1//-/_} f dep tmp
  [[ -n ${seen[$m]:-} ]] && return 0
  seen[$m]=1
  if grep -qx "$m" <<<"$builtin"; then return 0; fi
  f=${modfile[$m]:-}; [[ -n $f ]] || die "module $m not found"
  tmp=$MODDIR/$m.ko
  case $f in
    *.xz) xz -dc "$f" >"$tmp" ;;
    *.zst) zstd -dcq "$f" >"$tmp" ;;
    *) cp "$f" "$tmp" ;;
  esac
  for dep in $(modinfo -F depends "$tmp" | tr ',' ' '); do addmod "$dep"; done
  order+=("$m")
}
for m in "${MODULES[@]}"; do addmod "$m"; done
boot_order=("${order[@]}")
order=()
for m in "${STORAGE_MODULES[@]}"; do addmod "$m"; done
storage_order=("${order[@]}")

# Probe ----------------------------------------------------------------------
log "compiling probe against the guest libraries"
PROBE=$WORK/probe
probe_cc() {
  gcc --sysroot="$SYSROOT" -O2 -g0 -Wall -Wextra -Wno-unused-parameter -std=gnu11 \
    -o "$PROBE" "$RXE_LAB_DIR/probe/probe.c" \
    -L"$SYSROOT/usr/lib/x86_64-linux-gnu" -Wl,-rpath-link="$SYSROOT/usr/lib/x86_64-linux-gnu" \
    "$@" -libverbs -lrdmacm -lpthread
}
if ! probe_cc 2>"$WORK/probe-cc.log"; then
  cat "$WORK/probe-cc.log" >&2
  log "sysroot link failed; retrying with --allow-shlib-undefined (checked below with the guest loader)"
  probe_cc -Wl,--allow-shlib-undefined || die "probe does not compile"
fi
install -m 0755 "$PROBE" "$ROOT/usr/bin/rxe-probe"

# Guest init -------------------------------------------------------------------
log "assembling initramfs"
install -m 0755 "$RXE_LAB_DIR/guest/init" "$ROOT/init"
install -m 0644 "$RXE_LAB_DIR/guest/scenario-lib.sh" "$ROOT/etc/rxe-lab.sh"
mkdir -p "$ROOT/lib/modules/$KVER" "$ROOT"/{dev,proc,sys,tmp,run,root,scenario,mnt}
cp "$MODDIR"/*.ko "$ROOT/lib/modules/$KVER/"
printf '%s\n' "${boot_order[@]}" >"$ROOT/etc/rxe-lab-modules"
printf '%s\n' "${storage_order[@]}" >"$ROOT/etc/rxe-lab-modules-storage"
mkdir -p "$ROOT"/etc/iscsi "$ROOT"/var/lib/iscsi "$ROOT"/run/lock/iscsi "$ROOT"/etc/nvme
echo "$KVER" >"$ROOT/etc/rxe-lab-kver"
# busybox applets as links where no real program exists.
for a in $("$ROOT/usr/bin/busybox" --list-full); do
  [[ -e $ROOT/$a || -L $ROOT/$a ]] || ln -s /usr/bin/busybox "$ROOT/$a"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$ROOT/etc/passwd"
echo 'root:x:0:' >"$ROOT/etc/group"
printf '127.0.0.1 localhost\n' >"$ROOT/etc/hosts"
mkdir -p "$ROOT/etc/libibverbs.d"

# Every program and library must resolve with the guest's own loader.
log "checking shared libraries with the guest loader"
bad=0
while IFS= read -r f; do
  head -c4 "$f" 2>/dev/null | grep -q 'ELF' || continue
  readelf -d "$f" 2>/dev/null | grep -q NEEDED || continue
  rel=${f#"$ROOT"}
  out=$(chroot "$ROOT" /lib64/ld-linux-x86-64.so.2 --list "$rel" 2>&1) || true
  if grep -qE 'not found|No such file|error' <<<"$out"; then
    echo "  $rel:"; grep -E 'not found|No such|error' <<<"$out" | sed 's/^/    /'; bad=1
  fi
done < <(find "$ROOT/usr/bin" "$ROOT/usr/sbin" "$ROOT/usr/lib/x86_64-linux-gnu/libibverbs" -type f)
((bad == 0)) || die "unresolved libraries in the guest image"

# Record versions for the manifest.
{
  echo "kernel $KVER ($KPKG $(cand "$KPKG"))"
  echo "$versions"
  echo "image $inputs_hash"
} >"$RXE_LAB_IMAGE.new/versions.txt"

(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$RXE_LAB_IMAGE.new/base.cpio"
# Pad to 512 bytes so a scenario cpio can be appended.
sz=$(stat -c %s "$RXE_LAB_IMAGE.new/base.cpio")
pad=$(( (512 - sz % 512) % 512 ))
((pad)) && head -c "$pad" /dev/zero >>"$RXE_LAB_IMAGE.new/base.cpio"
echo "$inputs_hash" >"$RXE_LAB_IMAGE.new/stamp"

rm -rf "$RXE_LAB_IMAGE"
mv "$RXE_LAB_IMAGE.new" "$RXE_LAB_IMAGE"
log "image ready: $(du -sh "$RXE_LAB_IMAGE/base.cpio" | cut -f1) initramfs, kernel $KVER, modules: ${boot_order[*]}; storage: ${storage_order[*]}"
