#!/usr/bin/env bash
# Installs rocex under PREFIX (`just install PREFIX`; docs/daemon.md, "Running it as a
# service"):
#   PREFIX/bin/rocex, PREFIX/bin/rocexd
#   PREFIX/lib/rocex/         the drop-in libibverbs.so.1, libmlx5.so.1, libefa.so.1 (and
#                             librdmacm.so.1), where `rocex run` looks for them
#   PREFIX/lib/systemd/system/rocexd@.service
#   PREFIX/share/rocex/rocexd.example.toml
#   PREFIX/share/doc/rocex/   README.md and the docs the unit and the tools point to
# The unit reads SYSCONFDIR/rocex/INSTANCE.toml: SYSCONFDIR is /etc for PREFIX /usr or
# /usr/local, else PREFIX/etc (set SYSCONFDIR to choose). DESTDIR stages the files
# elsewhere, the paths written into the unit staying PREFIX's.
#
# usage: packaging/install.sh [--profile release|debug] [--no-build] PREFIX
set -euo pipefail

profile=release
build=1
while [ $# -gt 1 ]; do
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: packaging/install.sh [--profile release|debug] [--no-build] PREFIX" >&2
    exit 2
fi
case "$profile" in release|debug) ;; *) echo "install.sh: profile $profile is not release or debug" >&2; exit 2 ;; esac
prefix="$1"
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
prefix="${prefix%/}"
case "$prefix" in /usr|/usr/local) sysconfdir="${SYSCONFDIR:-/etc}" ;; *) sysconfdir="${SYSCONFDIR:-$prefix/etc}" ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${DESTDIR:-}"

# The libraries, as cargo builds them and by the soname programs load.
libs=(libibverbs.so:libibverbs.so.1 librdmacm.so:librdmacm.so.1 libmlx5.so:libmlx5.so.1
    libefa.so:libefa.so.1)
packages=(-p rocex-cli -p rocex-daemon -p rocex-ibverbs -p rocex-rdmacm -p rocex-dv-mlx5
    -p rocex-dv-efa)
if [ "$build" = 1 ]; then
    flags=()
    [ "$profile" = release ] && flags+=(--release)
    (cd "$root" && cargo build -q "${flags[@]}" "${packages[@]}")
fi
out="${CARGO_TARGET_DIR:-$root/target}/$profile"
for f in rocex rocexd; do
    [ -x "$out/$f" ] || { echo "install.sh: $out/$f is not built" >&2; exit 1; }
done

install -d "$dest$prefix/bin" "$dest$prefix/lib/rocex" "$dest$prefix/lib/systemd/system" \
    "$dest$prefix/share/rocex" "$dest$prefix/share/doc/rocex"
install -m 755 "$out/rocex" "$out/rocexd" "$dest$prefix/bin/"
for l in "${libs[@]}"; do
    install -m 755 "$out/${l%%:*}" "$dest$prefix/lib/rocex/${l##*:}"
done
sed -e "s|@BINDIR@|$prefix/bin|g" -e "s|@SYSCONFDIR@|$sysconfdir|g" \
    -e "s|@DOCDIR@|$prefix/share/doc/rocex|g" "$root/packaging/systemd/rocexd@.service" \
    > "$dest$prefix/lib/systemd/system/rocexd@.service"
chmod 644 "$dest$prefix/lib/systemd/system/rocexd@.service"
install -m 644 "$root/packaging/rocexd.example.toml" "$dest$prefix/share/rocex/"
install -m 644 "$root/README.md" "$root/docs/daemon.md" "$root/docs/verbs.md" \
    "$root/docs/security.md" "$dest$prefix/share/doc/rocex/"

echo "installed rocex into $dest$prefix (configuration: $sysconfdir/rocex/INSTANCE.toml)"
echo "a service: cp $prefix/share/rocex/rocexd.example.toml $sysconfdir/rocex/NAME.toml, or use the address as NAME;"
echo "  systemctl link $prefix/lib/systemd/system/rocexd@.service"
echo "  systemctl enable --now rocexd@NAME"
