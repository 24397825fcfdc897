//! A handed-out socket's eBPF filter, which checks every datagram a coalesced buffer
//! carries: with it the group's sockets may take UDP GRO.
//!
//! With `UDP_GRO` a socket takes a run of datagrams as one buffer: one UDP header, then
//! segments of `gso_size` bytes, the last possibly shorter. The group's program steers the
//! whole run by its first segment's QPN, and a classic filter (`program::slot_filter`)
//! sees only that one. This filter reads `__sk_buff.gso_size` and the destination QPN of
//! every segment (IBA 9.2), and drops the run whole when any is not its slot's (QP1
//! never is): a client then reads only its own slot's packets, coalesced or not. The
//! kernel's GRO joins at most 64 datagrams (`UDP_GRO_CNT_MAX`), and a rocex sender's GSO
//! send holds at most 64 (`udp::batch`), so the check is unrolled that many times and needs
//! no loop; a longer run (another sender's GSO send) is dropped.
//!
//! Loading an eBPF program takes `CAP_BPF` (or `kernel.unprivileged_bpf_disabled=0`):
//! without it a group keeps the classic filters and GRO off (`SteerGroup::open`).

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::program::{DEST_QP_WORD, GSI, QPN_BITS, UDP_HEADER};

/// Most segments a run the filter keeps holds (the kernel's `UDP_GRO_CNT_MAX`).
const MAX_SEGMENTS: usize = 64;
/// `struct __sk_buff` offsets (`include/uapi/linux/bpf.h`).
const SKB_LEN: i16 = 0;
const SKB_GSO_SIZE: i16 = 176;

/// One eBPF instruction (`struct bpf_insn`): the destination register in the low nibble of
/// `regs`, the source in the high one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

// Opcodes (`Documentation/bpf/standardization/instruction-set.rst`).
const LDX_W: u8 = 0x61; // dst = *(u32 *)(src + off)
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const AND64_K: u8 = 0x57;
const ADD64_X: u8 = 0x0f;
const LD_IND_W: u8 = 0x40; // r0 = ntohl(*(u32 *)(skb->data + src + imm)); past the end: return 0
const JGE_X: u8 = 0x3d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JA: u8 = 0x05;
const EXIT: u8 = 0x95;

/// Where a jump of the body goes, patched once both ends are placed.
#[derive(Clone, Copy)]
enum To {
    Keep,
    Drop,
}

/// The filter of `slot` in a group whose slots are the QPNs' low `bits` bits: it keeps a
/// datagram, or a coalesced run, only when every segment's QPN is of `slot`.
pub(crate) fn program(bits: u8, slot: u32) -> Vec<Insn> {
    let (ctx, step, len, at) = (6, 7, 8, 9);
    let mut p = vec![
        // LD_IND reads the packet of the context in r6.
        insn(MOV64_X, ctx, 1, 0, 0),
        insn(LDX_W, step, ctx, SKB_GSO_SIZE, 0),
        insn(LDX_W, len, ctx, SKB_LEN, 0),
        // Not coalesced: one segment, the whole datagram.
        insn(JNE_K, step, 0, 1, 0),
        insn(MOV64_X, step, len, 0, 0),
        insn(MOV64_K, at, 0, 0, UDP_HEADER as i32),
    ];
    let mut jumps = Vec::new();
    for _ in 0..MAX_SEGMENTS {
        jumps.push((p.len(), To::Keep));
        p.push(insn(JGE_X, at, len, 0, 0));
        p.push(insn(LD_IND_W, 0, at, 0, DEST_QP_WORD as i32));
        p.push(insn(AND64_K, 0, 0, 0, QPN_BITS as i32));
        jumps.push((p.len(), To::Drop));
        p.push(insn(JEQ_K, 0, 0, 0, GSI as i32));
        p.push(insn(AND64_K, 0, 0, 0, (1 << bits) - 1));
        jumps.push((p.len(), To::Drop));
        p.push(insn(JNE_K, 0, 0, 0, slot as i32));
        p.push(insn(ADD64_X, at, step, 0, 0));
    }
    // More segments than the kernel coalesces: not a run it made.
    jumps.push((p.len(), To::Keep));
    p.push(insn(JGE_X, at, len, 0, 0));
    jumps.push((p.len(), To::Drop));
    p.push(insn(JA, 0, 0, 0, 0));
    let keep = p.len();
    // A socket filter returns the bytes to keep: all of them.
    p.extend([insn(MOV64_K, 0, 0, 0, -1), insn(EXIT, 0, 0, 0, 0)]);
    let drop = p.len();
    p.extend([insn(MOV64_K, 0, 0, 0, 0), insn(EXIT, 0, 0, 0, 0)]);
    for (at, to) in jumps {
        let target = match to {
            To::Keep => keep,
            To::Drop => drop,
        };
        p[at].off = (target - at - 1) as i16;
    }
    p
}

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it, up to the program's name.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;

/// Loads `prog` as a socket filter. A refusal is asked again with the verifier's log,
/// whose last line then says why.
pub(crate) fn load(prog: &[Insn]) -> io::Result<OwnedFd> {
    bpf_prog_load(prog, None).or_else(|_| {
        let mut log = vec![0u8; 1 << 16];
        bpf_prog_load(prog, Some(&mut log)).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let said = String::from_utf8_lossy(&log[..end]);
            let last = said.lines().rev().find(|l| !l.is_empty()).unwrap_or("");
            io::Error::new(e.kind(), format!("loading the slot filter: {e} {last}"))
        })
    })
}

/// `BPF_PROG_LOAD` of `prog`, the verifier's log into `log` if given.
fn bpf_prog_load(prog: &[Insn], log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"rocex_slots");
    let (log_level, log_size, log_buf) = match log {
        Some(l) => (1, l.len() as u32, l.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_SOCKET_FILTER,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: c"GPL".as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
    };
    // SAFETY: bpf(2) reads `attr` and the program and license it points to, and writes at
    // most `log_size` bytes of log; all live for the call. A descriptor it returns is new
    // and ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &attr as *const ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches the loaded filter `prog` to `sock` (`SO_ATTACH_BPF`); the socket keeps it.
pub(crate) fn attach(sock: &UdpSocket, prog: &OwnedFd) -> io::Result<()> {
    let fd: libc::c_int = prog.as_raw_fd();
    crate::sockopt::set(sock, libc::SOL_SOCKET, libc::SO_ATTACH_BPF, &fd)
}
