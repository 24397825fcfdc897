#!/usr/bin/env python3
"""Write a seeded pattern to an iSCSI LUN through Debian's libiscsi and read it back.

libiscsi (libiscsi.so.7, which links libibverbs and librdmacm) is the initiator: an
iser:// URL makes it speak iSER, so under `rocex run` every command and every byte moves
through rocex's drop-in libraries. WRITE(16) covers the region in chunks of --bs bytes
(random order with --random), READ(16) reads it back in the same chunks, and every byte
is compared with what was written. The pattern depends on --seed and each block's address,
so stale data from an earlier run (another seed) fails the check too.

Prints one line per phase (MB/s, IOPS: for docs/storage.md, not checked) and exits 0 only
when every command succeeded and every byte read matched; 1 otherwise, saying where.

Usage: iscsi_verify.py URL [--initiator IQN] [--bs BYTES] [--size BYTES] [--offset BYTES]
                           [--seed N] [--random] [--read-only] [--retries N] [--sha256]
"""

import argparse
import ctypes as C
import hashlib
import os
import random
import sys
import time


# struct scsi_task of libiscsi 1.19 (include/scsi-lowlevel.h), up to sense: ctypes lays it
# out as the compiler does, bit fields included. Read data comes into the caller's buffer
# (the _iov_ calls): libiscsi's iSER path leaves task->datain unset.
SCSI_CDB_MAX_SIZE = 16


class ScsiSense(C.Structure):
    _fields_ = [
        ("error_type", C.c_ubyte),
        ("key", C.c_int),
        ("ascq", C.c_int),
        ("sense_specific", C.c_uint, 1),
        ("ill_param_in_cdb", C.c_uint, 1),
        ("bit_pointer_valid", C.c_uint, 1),
        ("bit_pointer", C.c_ubyte),
        ("field_pointer", C.c_uint16),
    ]


class ScsiIovec(C.Structure):
    _fields_ = [("iov_base", C.c_void_p), ("iov_len", C.c_size_t)]


class ScsiTask(C.Structure):
    _fields_ = [
        ("status", C.c_int),
        ("cdb_size", C.c_int),
        ("xfer_dir", C.c_int),
        ("expxferlen", C.c_int),
        ("cdb", C.c_ubyte * SCSI_CDB_MAX_SIZE),
        ("residual_status", C.c_int),
        ("residual", C.c_size_t),
        ("sense", ScsiSense),
    ]


SCSI_STATUS_GOOD = 0
ISCSI_SESSION_NORMAL = 2
BLOCK = 512


def load():
    lib = C.CDLL("libiscsi.so.7")
    lib.iscsi_create_context.restype = C.c_void_p
    lib.iscsi_create_context.argtypes = [C.c_char_p]
    lib.iscsi_parse_full_url.restype = C.c_void_p
    lib.iscsi_parse_full_url.argtypes = [C.c_void_p, C.c_char_p]
    lib.iscsi_get_error.restype = C.c_char_p
    lib.iscsi_get_error.argtypes = [C.c_void_p]
    lib.iscsi_set_targetname.argtypes = [C.c_void_p, C.c_char_p]
    lib.iscsi_set_session_type.argtypes = [C.c_void_p, C.c_int]
    lib.iscsi_set_timeout.argtypes = [C.c_void_p, C.c_int]
    lib.iscsi_full_connect_sync.argtypes = [C.c_void_p, C.c_char_p, C.c_int]
    lib.iscsi_logout_sync.argtypes = [C.c_void_p]
    lib.iscsi_destroy_url.argtypes = [C.c_void_p]
    lib.scsi_free_scsi_task.argtypes = [C.c_void_p]
    lib.iscsi_write16_sync.restype = C.POINTER(ScsiTask)
    lib.iscsi_write16_sync.argtypes = [C.c_void_p, C.c_int, C.c_uint64, C.c_char_p,
                                       C.c_uint32, C.c_int] + [C.c_int] * 5
    lib.iscsi_read16_iov_sync.restype = C.POINTER(ScsiTask)
    lib.iscsi_read16_iov_sync.argtypes = [C.c_void_p, C.c_int, C.c_uint64, C.c_uint32,
                                          C.c_int] + [C.c_int] * 5 + [C.c_void_p, C.c_int]
    return lib


# struct iscsi_url (include/iscsi.h): portal, target, user, passwd, target_user,
# target_passwd, lun, ...; the strings are fixed arrays.
MAX_STRING_SIZE = 255


class IscsiUrl(C.Structure):
    _fields_ = [
        ("portal", C.c_char * (MAX_STRING_SIZE + 1)),
        ("target", C.c_char * (MAX_STRING_SIZE + 1)),
        ("user", C.c_char * (MAX_STRING_SIZE + 1)),
        ("passwd", C.c_char * (MAX_STRING_SIZE + 1)),
        ("target_user", C.c_char * (MAX_STRING_SIZE + 1)),
        ("target_passwd", C.c_char * (MAX_STRING_SIZE + 1)),
        ("lun", C.c_int),
    ]


def pattern(seed, offset, length):
    """The bytes a run with `seed` writes at `offset`: SHA-256 of (seed, block) per 32 bytes."""
    out = bytearray()
    first = offset // BLOCK
    for blk in range(first, first + length // BLOCK):
        h = hashlib.sha256(f"{seed}:{blk}".encode()).digest()
        out += h * (BLOCK // len(h))
    return bytes(out)


class Session:
    def __init__(self, lib, url, initiator):
        self.lib = lib
        self.ctx = lib.iscsi_create_context(initiator.encode())
        if not self.ctx:
            raise RuntimeError("iscsi_create_context failed")
        u = lib.iscsi_parse_full_url(self.ctx, url.encode())
        if not u:
            raise RuntimeError(f"bad URL {url}: {self.err()}")
        parsed = IscsiUrl.from_address(u)
        self.lun = parsed.lun
        lib.iscsi_set_targetname(self.ctx, parsed.target)
        lib.iscsi_set_session_type(self.ctx, ISCSI_SESSION_NORMAL)
        lib.iscsi_set_timeout(self.ctx, 30)
        if lib.iscsi_full_connect_sync(self.ctx, parsed.portal, parsed.lun) != 0:
            e = self.err()
            lib.iscsi_destroy_url(u)
            raise RuntimeError(f"login to {url} failed: {e}")
        lib.iscsi_destroy_url(u)

    def err(self):
        e = self.lib.iscsi_get_error(self.ctx)
        return e.decode(errors="replace") if e else "?"

    def write(self, offset, data):
        t = self.lib.iscsi_write16_sync(self.ctx, self.lun, offset // BLOCK, data, len(data),
                                        BLOCK, 0, 0, 0, 0, 0)
        self._check(t, "WRITE(16)", offset, len(data))
        self.lib.scsi_free_scsi_task(t)

    def read(self, offset, length):
        buf = C.create_string_buffer(length)
        iov = ScsiIovec(C.cast(buf, C.c_void_p), length)
        t = self.lib.iscsi_read16_iov_sync(self.ctx, self.lun, offset // BLOCK, length, BLOCK,
                                           0, 0, 0, 0, 0, C.byref(iov), 1)
        self._check(t, "READ(16)", offset, length)
        self.lib.scsi_free_scsi_task(t)
        return buf.raw

    def _check(self, t, what, offset, length):
        if not t:
            raise RuntimeError(f"{what} of {length} bytes at {offset}: {self.err()}")
        if t.contents.status != SCSI_STATUS_GOOD:
            s = t.contents.status
            self.lib.scsi_free_scsi_task(t)
            raise RuntimeError(f"{what} of {length} bytes at {offset}: SCSI status {s:#x}: {self.err()}")

    def close(self):
        # Logged out, the context is left to the process's end (main's os._exit):
        # libiscsi 1.19's iSER teardown frees the connection under its own CM thread, which
        # then aborts in a futex on freed memory now and then.
        self.lib.iscsi_logout_sync(self.ctx)


def phase(name, chunks, bs, fn):
    t0 = time.monotonic()
    for off in chunks:
        fn(off)
    dt = max(time.monotonic() - t0, 1e-9)
    total = len(chunks) * bs
    print(f"{name}: {total} bytes in {len(chunks)} commands of {bs}: "
          f"{total / dt / 1e6:.2f} MB/s, {len(chunks) / dt:.0f} IOPS", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--initiator", default="iqn.2026-12.org.rocex:initiator")
    ap.add_argument("--bs", type=int, default=4096)
    ap.add_argument("--size", type=int, default=4 << 20)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--random", action="store_true", help="random chunk order")
    ap.add_argument("--read-only", action="store_true",
                    help="only read back and check what a run with --seed wrote")
    ap.add_argument("--retries", type=int, default=1, help="login attempts, 1 s apart")
    ap.add_argument("--sha256", action="store_true",
                    help="end with 'sha256 BYTES HEX' of what the region should now hold")
    a = ap.parse_args()
    if a.bs % BLOCK or a.size % a.bs or a.offset % BLOCK or a.bs <= 0 or a.size <= 0:
        ap.error(f"--bs, --size and --offset must be multiples of {BLOCK}, --size of --bs")

    # libiscsi 1.19 allocates its iSER connection with malloc and uses list heads in it that
    # it never sets: zero in a fresh C program's heap, garbage in Python's (a crash in its
    # connect). glibc fills each malloc'd byte with the complement of MALLOC_PERTURB_: 255
    # gives zeros.
    if os.environ.get("MALLOC_PERTURB_") != "255":
        os.environ["MALLOC_PERTURB_"] = "255"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    lib = load()
    for attempt in range(a.retries):
        try:
            s = Session(lib, a.url, a.initiator)
            break
        except RuntimeError as e:
            if attempt + 1 == a.retries:
                print(f"iscsi_verify: {e}", file=sys.stderr)
                return 1
            time.sleep(1)
    chunks = [a.offset + i * a.bs for i in range(a.size // a.bs)]
    if a.random:
        random.Random(a.seed).shuffle(chunks)
    bad = []

    def check(off):
        got = s.read(off, a.bs)
        want = pattern(a.seed, off, a.bs)
        if got != want:
            first = next(i for i in range(a.bs) if got[i] != want[i])
            bad.append(off + first)

    try:
        if not a.read_only:
            phase("write", chunks, a.bs, lambda off: s.write(off, pattern(a.seed, off, a.bs)))
        phase("read+verify", chunks, a.bs, check)
    except RuntimeError as e:
        print(f"iscsi_verify: {e}", file=sys.stderr)
        return 1
    finally:
        s.close()
    if bad:
        print(f"iscsi_verify: {len(bad)} of {len(chunks)} chunks differ; first at byte "
              f"{min(bad)}", file=sys.stderr)
        return 1
    print(f"verified {a.size} bytes at {a.offset} (seed {a.seed}, bs {a.bs})")
    if a.sha256:
        print(f"sha256 {a.size} {hashlib.sha256(pattern(a.seed, a.offset, a.size)).hexdigest()}")
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
