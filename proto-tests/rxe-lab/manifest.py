#!/usr/bin/env python3
"""Write pcaps/MANIFEST.md from the rxe lab results.

usage: manifest.py RESULTS.tsv VERSIONS.txt SCENARIO_DIR PCAP_DIR
RESULTS.tsv lines: file, scenario, run.sh args, pass|FAIL, seconds, RoCE frames.
"""
import os
import re
import struct
import sys

OPCODES = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST", 0x03: "SEND_LAST_IMM",
    0x04: "SEND_ONLY", 0x05: "SEND_ONLY_IMM", 0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE",
    0x08: "WRITE_LAST", 0x09: "WRITE_LAST_IMM", 0x0A: "WRITE_ONLY", 0x0B: "WRITE_ONLY_IMM",
    0x0C: "READ_REQ", 0x0D: "READ_RESP_FIRST", 0x0E: "READ_RESP_MIDDLE", 0x0F: "READ_RESP_LAST",
    0x10: "READ_RESP_ONLY", 0x11: "ACK", 0x12: "ATOMIC_ACK", 0x13: "CMP_SWAP", 0x14: "FETCH_ADD",
    0x16: "SEND_LAST_INV", 0x17: "SEND_ONLY_INV", 0x1C: "FLUSH", 0x1D: "ATOMIC_WRITE",
    0x64: "UD_SEND_ONLY", 0x65: "UD_SEND_ONLY_IMM",
}
for base, kind in ((0x20, "UC_"),):
    for k in (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B):
        OPCODES[base + k] = kind + OPCODES[k]


def roce_frames(path):
    """Yield (opcode, aeth_syndrome or None) for each RoCE v2 frame."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(e + "IIII", data[off:off + 16])
        off += 16
        f = data[off:off + incl]
        off += incl
        if len(f) < 14:
            continue
        et = struct.unpack(">H", f[12:14])[0]
        p = f[14:]
        if et == 0x0800 and len(p) >= 20 and p[9] == 17:
            ihl = (p[0] & 15) * 4
            u = p[ihl:]
        elif et == 0x86DD and len(p) >= 48 and p[6] == 17:
            u = p[40:]
        else:
            continue
        if len(u) < 20 or struct.unpack(">H", u[2:4])[0] != 4791:
            continue
        bth = u[8:]
        op = bth[0]
        syn = None
        if op in (0x11, 0x12, 0x0D, 0x0F, 0x10) and len(bth) >= 16:
            syn = bth[12]
        yield op, syn


def summarize(path):
    ops = {}
    naks = {}
    for op, syn in roce_frames(path):
        name = OPCODES.get(op, "0x%02x" % op)
        ops[name] = ops.get(name, 0) + 1
        if syn is not None and syn != 0x1F and (syn & 0x60) in (0x20, 0x60):
            if syn & 0x60 == 0x20:
                key = "RNR_NAK(0x%02x)" % syn
            else:
                key = "NAK(0x%02x)" % syn
            naks[key] = naks.get(key, 0) + 1
    parts = ["%s %d" % (k, v) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    parts += ["%s %d" % (k, v) for k, v in sorted(naks.items())]
    return ", ".join(parts)


def meta(path, key):
    for line in open(path):
        m = re.match(r"# %s: (.*)" % key, line)
        if m:
            return m.group(1).strip()
    return ""


def func_body(path, fn):
    for line in open(path):
        m = re.match(r"%s\(\) \{ (.*); \}" % fn, line.strip())
        if m:
            return m.group(1)
    return ""


def netem_dropped(log):
    """Frames netem dropped in the guests, from the run log's counters."""
    try:
        lines = open(log, errors="replace").read().splitlines()
    except OSError:
        return None
    total, seen = 0, False
    for i, l in enumerate(lines):
        if "qdisc netem" in l:
            for nxt in lines[i + 1:i + 3]:
                m = re.search(r"dropped (\d+)", nxt)
                if m:
                    total += int(m.group(1))
                    seen = True
                    break
    return total if seen else None


def main():
    results, versions, scn_dir, pcap_dir = sys.argv[1:5]
    log_dir = sys.argv[5] if len(sys.argv) > 5 else None
    rows = [l.rstrip("\n").split("\t") for l in open(results) if l.strip()]
    ver = [l.strip() for l in open(versions)] if os.path.exists(versions) else []
    kernel = next((l for l in ver if l.startswith("kernel ")), "kernel ?")
    vers = {l.split()[0]: l.split()[1] for l in ver if len(l.split()) == 2}
    out = []
    out.append("# rxe lab captures")
    out.append("")
    out.append("Kernel Soft-RoCE (rdma_rxe) to kernel rxe, two QEMU guests on a bridge, RoCE v2")
    out.append("over IPv4 198.18.0.11 (server) <-> 198.18.0.12 (client) unless noted; made by")
    out.append("`just rxe-lab-all` (proto-tests/rxe-lab, docs/rxe-lab.md). Everything on the bridge")
    out.append("is kept, the out-of-band TCP exchange too; frames are complete (no snaplen), so")
    out.append("the ICRC of every RoCE frame can be checked.")
    out.append("")
    out.append("- %s" % kernel)
    out.append("- rdma-core %s (libibverbs1, ibverbs-providers, librdmacm1t64, ibverbs-utils, rdmacm-utils)"
               % vers.get("libibverbs1", "?"))
    out.append("- perftest %s, iproute2 %s, busybox %s" % (vers.get("perftest", "?"), vers.get("iproute2", "?"),
                                                        vers.get("busybox-static", "?")))
    out.append("- Loss runs: netem on both guests' eth0 egress, RoCE frames (UDP 4791) only; a dropped")
    out.append("  frame never reaches the capture, so loss shows as PSN gaps, NAK PSN sequence error")
    out.append("  (0x60), duplicate ACKs and retransmissions.")
    out.append("- Decode: `tshark -r FILE -d udp.port==4791,infiniband --disable-protocol rpcordma`")
    out.append("")
    out.append("| file | scenario | command line | MTU | loss | RoCE frames | result | what it shows | opcodes seen |")
    out.append("|---|---|---|---:|---:|---:|---|---|---|")
    for r in sorted(rows, key=lambda r: r[0]):
        f, name, args, st, secs, roce = (r + [""] * 6)[:6]
        sf = os.path.join(scn_dir, name + ".sh")
        if not os.path.exists(sf):
            continue
        mtu = meta(sf, "mtu") or "1024"
        m = re.search(r"--mtu (\d+)", args)
        if m:
            mtu = m.group(1)
        loss = re.search(r"--loss (\S+)", args)
        desc = meta(sf, "desc")
        if meta(sf, "ipv6") == "yes" or "--ipv6" in args:
            desc += " (IPv6 fd00:198:18::11/12)"
        if loss:
            desc += "; with %s%% loss" % loss.group(1)
            d = netem_dropped(os.path.join(log_dir, f[:-5] + ".log")) if log_dir else None
            if d is not None:
                desc += " (%d RoCE frames dropped by netem)" % d
        cmd = "`just rxe-lab %s%s`: client `%s`" % (name, (" " + args) if args else "",
                                                    func_body(sf, "client").replace("|", "\\|"))
        ops = summarize(os.path.join(pcap_dir, f))
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            f, name, cmd, mtu, (loss.group(1) + "%") if loss else "0", roce, st, desc, ops))
    listed = {r[0] for r in rows}
    others = sorted(f for f in os.listdir(pcap_dir) if f.endswith(".pcap") and f not in listed)
    if others:
        out.append("")
        out.append("Other captures in this folder, not made by the lab: " + ", ".join(others) + ".")
    out.append("")
    open(os.path.join(pcap_dir, "MANIFEST.md"), "w").write("\n".join(out))


if __name__ == "__main__":
    main()
