#!/usr/bin/env bash
# Install the host tools the rxe lab needs (Debian 12 or later). Idempotent:
# when everything is present it only checks and exits.
set -euo pipefail

pkgs=(
  qemu-system-x86   # qemu-system-x86_64 (TCG; KVM is used when it works)
  tcpdump           # capture on the lab bridge
  zstd              # extract vmlinux from the zstd-compressed vmlinuz
  xz-utils          # decompress .ko.xz modules
  cpio              # build the initramfs
  iproute2          # ip netns, bridge, tap
  kmod              # modinfo (module dependency closure)
  gcc libc6-dev     # compile the probe against the guest sysroot
  gpgv              # verify the guest package index
  debian-archive-keyring
  apt               # private apt configuration fetches the guest packages
  python3           # small helpers (manifest, checks)
  ca-certificates
)

missing=()
for p in "${pkgs[@]}"; do
  [[ $p == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
# tshark is optional (used to summarise captures); install it when asked.
if [[ ${RXE_LAB_WITH_TSHARK:-0} == 1 ]] && ! command -v tshark >/dev/null; then
  missing+=(tshark)
fi

if ((${#missing[@]} == 0)); then
  echo "rxe-lab deps: all present"
  exit 0
fi

echo "rxe-lab deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if [[ ${EUID} -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq || $SUDO apt-get update
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "rxe-lab deps: done"
