#!/usr/bin/env python3
"""Raw UDP reference points for proto-tests/bench/compare.sh.

  sink  BIND PORT SECONDS            count datagrams (one recvfrom per datagram); JSON on exit
  blast DEST PORT SIZE SECONDS       sendto one datagram per syscall in a loop for SECONDS
  pong  BIND PORT SECONDS            busy-polling echo server (non-blocking socket)
  ping  DEST PORT SIZE ITERS         busy-polling ping-pong client; JSON with RTT p50/p99

Each prints one JSON object on stdout. Python's own per-call cost is reported as well
(`py_call_us`: a non-blocking recv that finds nothing), so readers can judge how much of a
number is the interpreter rather than the kernel.
"""
import json
import socket
import sys
import time


def sink(bind, port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # root: past net.core.rmem_max, so a burst is not dropped at the socket
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 32 << 20)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    s.bind((bind, port))
    s.settimeout(0.5)
    buf = bytearray(65536)
    n = 0
    nbytes = 0
    first = last = None
    deadline = time.monotonic() + seconds
    print("ready", file=sys.stderr, flush=True)
    while time.monotonic() < deadline:
        try:
            k = s.recv_into(buf)
        except socket.timeout:
            if first is not None:
                last = time.monotonic() - 0.5  # the last datagram came before the timeout
                break
            continue
        if first is None:
            first = last = time.monotonic()
            continue  # the window starts at the first datagram
        n += 1
        nbytes += k
        if n & 255 == 0:
            last = time.monotonic()
            if last >= deadline:
                break
    el = (last - first) if (first is not None and last and last > first) else 0.0
    pps = n / el if el else 0.0
    print(json.dumps({"received": n, "seconds": el, "mpps": pps / 1e6,
                      "gbps_payload": nbytes * 8 / el / 1e9 if el else 0.0}))


def blast(dest, port, size, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    payload = bytes(size)
    addr = (dest, port)
    sendto = s.sendto
    n = 0
    errs = 0
    t0 = time.monotonic()
    end = t0 + seconds
    now = time.monotonic
    while True:
        for _ in range(64):
            try:
                sendto(payload, addr)
                n += 1
            except (BlockingIOError, ConnectionRefusedError, OSError):
                errs += 1
        if now() >= end:
            break
    el = time.monotonic() - t0
    print(json.dumps({"sent": n, "errors": errs, "seconds": el, "mpps": n / el / 1e6}))


def py_call_us():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    buf = bytearray(64)
    k = 20000
    t0 = time.perf_counter()
    for _ in range(k):
        try:
            s.recv_into(buf)
        except BlockingIOError:
            pass
    return (time.perf_counter() - t0) / k * 1e6


def pong(bind, port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, port))
    s.setblocking(False)
    buf = bytearray(65536)
    recvfrom_into = s.recvfrom_into
    sendto = s.sendto
    end = time.monotonic() + seconds
    n = 0
    print("ready", file=sys.stderr, flush=True)
    while True:
        try:
            k, src = recvfrom_into(buf)
        except BlockingIOError:
            if (n & 0) == 0 and time.monotonic() > end:
                break
            continue
        if k == 1:  # the client's "stop"
            break
        sendto(memoryview(buf)[:k], src)
        n += 1
    print(json.dumps({"echoed": n}))


def ping(dest, port, size, iters):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((dest, port))
    s.setblocking(False)
    payload = bytes(size)
    buf = bytearray(65536)
    send = s.send
    recv_into = s.recv_into
    clock = time.perf_counter_ns
    warm = min(1000, iters // 10)
    rtt = []
    spins = 0
    for i in range(warm + iters):
        t0 = clock()
        send(payload)
        while True:
            try:
                recv_into(buf)
                break
            except BlockingIOError:
                spins += 1
        t1 = clock()
        if i >= warm:
            rtt.append((t1 - t0) / 1000.0)
    send(b"x")
    rtt.sort()
    q = lambda p: rtt[min(len(rtt) - 1, int(p * len(rtt)))]
    print(json.dumps({"iters": iters, "size": size, "rtt_us_p50": q(0.5), "rtt_us_p99": q(0.99),
                      "rtt_us_p999": q(0.999), "rtt_us_min": rtt[0], "rtt_us_max": rtt[-1],
                      "spins_per_rtt": spins / (warm + iters),
                      "py_call_us": py_call_us()}))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "sink":
        sink(args[0], int(args[1]), float(args[2]))
    elif mode == "blast":
        blast(args[0], int(args[1]), int(args[2]), float(args[3]))
    elif mode == "pong":
        pong(args[0], int(args[1]), float(args[2]))
    elif mode == "ping":
        ping(args[0], int(args[1]), int(args[2]), int(args[3]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
