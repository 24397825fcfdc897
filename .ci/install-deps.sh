#!/usr/bin/env bash
# Installs what rocex's tests need on a fresh Debian machine; quick when all is there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg_cmd in tshark:tshark tcpdump:tcpdump; do
    command -v "${pkg_cmd#*:}" >/dev/null || need+=("${pkg_cmd%%:*}")
done
if ((${#need[@]})); then
    echo "installing ${need[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v just >/dev/null || [ -x "$HOME/.cargo/bin/just" ] || cargo install just --locked
