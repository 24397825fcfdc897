#!/usr/bin/env python3
"""Account for the packets rocex corrupted on purpose (`--inject corrupt=P`) in a capture.

usage: faults.py PCAP CHECK_OUTPUT ROCEX_IP CORRUPTED RXE_RCVD_PKTS CLEAN_PCAP REPLAY_PCAP

CHECK_OUTPUT is `rocex dump --check PCAP`'s output: a line "frame N: why: ..." per bad
frame. The injector flips one bit of a packet's UDP payload (BTH through ICRC), so a
corrupted packet reaches the capture either with a bad ICRC (or one that no longer
parses: both are "bad"), or, when the bit lies in the BTH's byte 4 (FECN, BECN and six
reserved bits, which the ICRC masks; rocex sends it zero), with a valid ICRC and that
byte non-zero. A duplicated packet is duplicated after it was corrupted, so both copies
carry the same bytes up to the ICRC (not the ICRC itself: with UDP GSO each copy's ICRC
is fixed for the IPv4 identification the kernel gives it). Hence, with one bit per packet:

- every bad frame is rocex's;
- the distinct packets (UDP payloads less the ICRC) among rocex's bad frames and its
  frames with a non-zero byte 4 number exactly CORRUPTED, rocex's own count;
- rxe dropped the bad frames: its rcvd_pkts (hw_counters, counted after the ICRC check)
  is at most rocex's RoCE frames in the capture less the bad ones (rocex's frames that
  arrive after the guest read its counters make the difference).

Writes the capture without the bad frames to CLEAN_PCAP, for `rocex dump --check` (to it,
as to rxe, those packets were lost), and to REPLAY_PCAP only the connections where rxe is
the responder (rocex's requests, rxe's responses), for `rocex conform replay`: where rocex
answers, its answers went through its own injector after its engine made them (a
duplicated or held-back ACK is not the engine's), and a replay would compare rocex with
itself anyway. Prints one summary line; exits 1 when an account does not balance.
"""
import ipaddress
import re
import struct
import sys

ROCE_PORT = 4791
MASKED_BTH_BYTE = 4
ICRC_LEN = 4
# RC responses: RDMA READ response FIRST/MIDDLE/LAST/ONLY, ACKNOWLEDGE, ATOMIC ACKNOWLEDGE.
RC_RESPONSES = range(0x0D, 0x13)


def frames(data):
    """Yield (record bytes, frame bytes) of each pcap record, in order."""
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    elif struct.unpack(">I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D):
        e = ">"
    else:
        sys.exit("faults.py: not a classic pcap file")
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack(e + "I", data[off + 8:off + 12])[0]
        end = off + 16 + incl
        yield data[off:end], data[off + 16:end]
        off = end


def roce_from(frame):
    """(source address, UDP payload) of an IPv4 RoCE v2 frame, else None."""
    if len(frame) < 14 + 20 or struct.unpack(">H", frame[12:14])[0] != 0x0800:
        return None
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    if ip[9] != 17 or len(ip) < ihl + 8:
        return None
    udp = ip[ihl:]
    if struct.unpack(">H", udp[2:4])[0] != ROCE_PORT:
        return None
    length = struct.unpack(">H", udp[4:6])[0]
    return str(ipaddress.IPv4Address(ip[12:16])), bytes(udp[8:length])


def rxe_answers(roce, rocex_ip):
    """Whether a RoCE frame belongs to a connection where rxe is the responder."""
    src, payload = roce
    op = payload[0]
    if op >= 0x20:  # not RC
        return True
    return (op in RC_RESPONSES) == (src != rocex_ip)


def main():
    pcap, check, rocex_ip, corrupted, rcvd, clean, replay = sys.argv[1:8]
    corrupted, rcvd = int(corrupted), int(rcvd)
    bad = {int(m.group(1)) for m in re.finditer(r"^frame (\d+): ", open(check).read(), re.M)}
    data = open(pcap, "rb").read()
    out = [data[:24]]
    out_replay = [data[:24]]
    problems = []
    sent = 0
    bad_payloads, masked_payloads = set(), set()
    for i, (record, frame) in enumerate(frames(data), start=1):
        roce = roce_from(frame)
        if i in bad:
            if roce is None or roce[0] != rocex_ip:
                problems.append(f"frame {i} failed the check and is not rocex's")
            else:
                bad_payloads.add(roce[1][:-ICRC_LEN])
        else:
            out.append(record)
            if roce is None or rxe_answers(roce, rocex_ip):
                out_replay.append(record)
        if roce is None or roce[0] != rocex_ip:
            continue
        sent += 1
        if i not in bad and len(roce[1]) > MASKED_BTH_BYTE and roce[1][MASKED_BTH_BYTE]:
            masked_payloads.add(roce[1][:-ICRC_LEN])
    accounted = len(bad_payloads) + len(masked_payloads)
    if accounted != corrupted:
        problems.append(
            f"rocex corrupted {corrupted} packets, the capture shows {accounted}"
        )
    if rcvd > sent - len(bad):
        problems.append(
            f"rxe counted {rcvd} packets received of rocex's {sent} less {len(bad)} bad"
        )
    open(clean, "wb").write(b"".join(out))
    open(replay, "wb").write(b"".join(out_replay))
    print(
        f"corrupted={corrupted}: {len(bad)} bad frames ({len(bad_payloads)} packets), "
        f"{len(masked_payloads)} with only the ICRC-masked BTH byte 4 changed; "
        f"rxe rcvd_pkts={rcvd} of rocex's {sent} frames"
        + "".join(f"; {p}" for p in problems)
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
