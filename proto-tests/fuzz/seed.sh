#!/usr/bin/env bash
# Seeds the fuzz corpus with every RoCE frame of the captures in pcaps/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus="$here/corpus/frame"
mkdir -p "$corpus"
python3 - "$here/../../pcaps" "$corpus" <<'PY'
import hashlib, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
n = 0
for name in sorted(os.listdir(src)):
    if not name.endswith(".pcap"):
        continue
    data = open(os.path.join(src, name), "rb").read()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    at = 24
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        frame = data[at + 16:at + 16 + incl]
        at += 16 + incl
        if len(frame) > 42 and frame[36:38] == b"\x12\xb7":
            path = os.path.join(dst, "seed-" + hashlib.sha1(frame).hexdigest()[:16])
            if not os.path.exists(path):
                open(path, "wb").write(frame)
                n += 1
print(f"{n} new seeds in {dst}")
PY
