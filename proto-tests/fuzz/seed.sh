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

# Control-channel seeds: the frames of a real session (rocex-verbs' requests and rocexd's
# answers, docs/abi.md §6), one file per message and one per whole stream.
# Descriptor seeds: a selector byte, then SQ slots (tag 0, 256 bytes) and RQ slots (tag 1,
# 64 bytes) as rocex-verbs writes them, naming the fuzz target's MRs (lkeys 0x11, 0x22).
mkdir -p "$here/corpus/control" "$here/corpus/shm_desc"
python3 - "$here/corpus/control" "$here/corpus/shm_desc" <<'PY'
import os, struct, sys
ctl, desc = sys.argv[1], sys.argv[2]
def frame(kind, seq, body):
    return struct.pack("<IHHQ", 12 + len(body), kind, 0, seq) + body
attr = struct.pack("<BIHBIB16sBBBBIIBBBI", 2, 7, 0, 1, 0, 4, bytes([198, 18, 0, 2]) + bytes(12),
                   3, 14, 7, 7, 0xabcde, 0x1234, 16, 16, 12, 0x123456)
cap = struct.pack("<5I", 128, 128, 8, 8, 128)
stats = (b"\x02" + b"\x06engine" + struct.pack("<H", 2) + b"\x09sent_pkts" + struct.pack("<Q", 40)
         + b"\x09rcvd_pkts" + struct.pack("<Q", 38) + b"\x06daemon" + struct.pack("<H", 1)
         + b"\x07clients" + struct.pack("<Q", 2) + struct.pack("<H", 1)
         + struct.pack("<IBBH", 0x123456, 2, 3, 1) + b"\x06sq_psn" + struct.pack("<Q", 0x1240)
         + struct.pack("<I", 0))
msgs = [
    (1, struct.pack("<I", 1)), (0x8001, struct.pack("<II", 1, 4242)),
    (2, b""), (0x8002, struct.pack("<9I", 4096, 16384, 32, 65536, 65536, 1 << 20, 65536, 16, 1024)
               + bytes(10) + bytes([0xff, 0xff, 198, 18, 0, 1]) + bytes([5, 4])),
    (3, b""), (0x8003, struct.pack("<I", 1)),
    (5, struct.pack("<IQQQI", 1, 1 << 40, 0, 1 << 20, 15)), (0x8005, struct.pack("<II", 0x1111, 0x2222)),
    (8, b""), (0x8008, struct.pack("<I", 1)),
    (9, struct.pack("<II", 256, 1)), (0x8009, struct.pack("<IIQ", 1, 256, 4096)),
    (11, struct.pack("<IBII", 1, 2, 1, 1) + cap),
    (0x800b, struct.pack("<I", 0x123456) + cap + struct.pack("<QIIQII", 4096, 128, 256, 40960, 128, 144)),
    (12, struct.pack("<II", 0x123456, 0x1fffff) + attr), (0x800c, b""),
    (13, struct.pack("<I", 0x123456)), (0x800d, attr + cap),
    (15, struct.pack("<II", 0, 0)), (0x800f, stats),
    (14, struct.pack("<I", 0x123456)), (0x800e, b""),
    (0xffff, struct.pack("<IH", 122, 33) + b"max_qps: per-client limit reached"),
]
stream = b""
for i, (kind, body) in enumerate(msgs):
    f = frame(kind, i // 2 + 1, body)
    open(os.path.join(ctl, f"seed-{i:02}-{kind:04x}"), "wb").write(f)
    stream += f
open(os.path.join(ctl, "seed-session"), "wb").write(stream)

def send(op, sges=(), flags=2, inline=b"", imm=0, rkey=0, raddr=0, cmp=0, swap=0, flush=(0, 0, 0), ud=None):
    fam, addr, qpn, qkey = (0, bytes(16), 0, 0) if ud is None else (4, bytes([198, 18, 0, 2]) + bytes(12), ud, 0x1111)
    d = struct.pack("<QBBHIIIQQQIBBBB16sII48s", 7, op, len(sges), flags | (8 if inline else 0), len(inline),
                    imm, rkey, raddr, cmp, swap, flush[0], flush[1], flush[2], fam, 0, addr, qpn, qkey, bytes(48))
    d += b"".join(struct.pack("<QII", a, n, k) for a, n, k in sges) + inline
    return b"\x00" + d + bytes(256 - len(d))
def recv(sges):
    d = struct.pack("<QII", 9, len(sges), 0) + b"".join(struct.pack("<QII", a, n, k) for a, n, k in sges)
    return b"\x01" + d + bytes(64 - len(d))
sge = (0x1000, 64, 0x11)
cases = {
    "rc-send": (0x04, [recv([sge]), send(2, [sge, (0x10_0000, 100, 0x22)])]),
    "rc-write-imm": (0x04, [send(1, [sge], imm=5, rkey=0x1100, raddr=0x1000)]),
    "rc-read": (0x04, [send(4, [sge], rkey=0x1100, raddr=0x1000)]),
    "rc-atomics": (0x04, [send(5, [(0x1000, 8, 0x11)], rkey=0x1100, raddr=0x1008, cmp=1, swap=2),
                         send(6, [(0x1010, 8, 0x11)], rkey=0x1100, raddr=0x1010, cmp=3)]),
    "rc-flush": (0x04, [send(14, [], rkey=0x1100, raddr=0x1000, flush=(64, 1, 0))]),
    "rc-inline": (0x24, [send(2, [], inline=b"inline payload!!")]),
    "rc-foreign-key": (0x04, [send(2, [(0x1000, 64, 0x33)])]),
    "uc-write": (0x05, [send(0, [sge], rkey=0x1100, raddr=0x1000)]),
    "ud-send": (0x06, [recv([sge]), send(2, [sge], ud=0x11)]),
}
for name, (sel, slots) in cases.items():
    open(os.path.join(desc, "seed-" + name), "wb").write(bytes([sel]) + b"".join(slots))
print(f"{len(msgs) + 1} control seeds, {len(cases)} descriptor seeds")
PY
