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

export DEBIAN_FRONTEND=noninteractive
if [[ ${EUID} -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
if ((${#missing[@]} == 0)); then
  echo "rxe-lab deps: all present"
else
  echo "rxe-lab deps: installing ${missing[*]}"
  $SUDO apt-get update -qq || $SUDO apt-get update
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# QEMU 8.1 or later: its virtio-net offers UDP segmentation offload, which the guests turn
# on (docs/rxe-lab.md). Debian 12 ships 7.2 and its backports suite a later one, taken from
# the mirror this host's apt already uses. Without it the lab still runs, without USO.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
IFS=. read -r major minor _ < <(qemu_version)
if ((major < 8 || (major == 8 && minor < 1))); then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [[ $codename == bookworm ]]; then
    list=$(mktemp)
    trap 'rm -f "$list"' EXIT
    # The host's own list (if any) plus backports; the host's sources.list.d still counts.
    { [[ -r /etc/apt/sources.list ]] && cat /etc/apt/sources.list
      echo "deb [signed-by=$RXE_LAB_KEYRING] $(host_mirror) bookworm-backports main"
    } >"$list"
    echo "rxe-lab deps: QEMU $major.$minor has no virtio-net USO; installing bookworm-backports' qemu-system-x86"
    bpo=(-o "Dir::Etc::SourceList=$list")
    if $SUDO apt-get "${bpo[@]}" update -qq && $SUDO apt-get "${bpo[@]}" install -y -qq \
        --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null; then
      echo "rxe-lab deps: $(qemu-system-x86_64 --version | head -n1)"
    else
      echo "rxe-lab deps: WARNING: no QEMU from bookworm-backports; the lab runs on QEMU $major.$minor without USO" >&2
    fi
  else
    echo "rxe-lab deps: WARNING: QEMU $major.$minor has no virtio-net USO (8.1 or later has)" >&2
  fi
fi
echo "rxe-lab deps: done"
