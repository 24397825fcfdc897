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
