#!/usr/bin/env bash
# Seeds the fuzz corpus with every RoCE frame of the captures in pcaps/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus="$here/corpus/frame"
mkdir -p "$corpus" "$here/corpus/responder"
python3 - "$here/../../pcaps" "$corpus" "$here/corpus/responder" <<'PY'
import hashlib, os, struct, sys
src, dst, resp = sys.argv[1], sys.argv[2], sys.argv[3]
streams = {}
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
            # Responder seeds: each capture's first requests as length-prefixed packets.
            body = frame[42:]
            s = streams.setdefault(name, b"")
            if len(s) < 4000 and body and body[0] not in (0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12):
                streams[name] = s + struct.pack("<H", len(body)) + body
for name, s in streams.items():
    open(os.path.join(resp, "seed-" + name), "wb").write(s)
print(f"{n} new frame seeds in {dst}, {len(streams)} request streams in {resp}")
PY
