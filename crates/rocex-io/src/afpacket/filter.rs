//! Classic BPF socket filters: the packet socket takes only what may be RoCE v2, and the
//! UDP socket that holds port 4791 takes nothing.

use socket2::SockFilter;

const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
const LD_H_IND: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_IND) as u16;
const LDX_B_MSH: u16 = (libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Bytes of an accepted frame the ring keeps: all of it.
const WHOLE: u32 = 1 << 18;

/// Untagged IPv4 (not a fragment) or IPv6 UDP to port 4791, and every 802.1Q-tagged
/// frame (its offsets differ; the receive path parses those). Jump offsets count the
/// instructions skipped.
pub(super) fn roce_only() -> [SockFilter; 17] {
    let port = u32::from(rocex_wire::ROCE_V2_PORT);
    [
        /* 0 */ SockFilter::new(LD_H_ABS, 0, 0, 12), // EtherType
        /* 1 */ SockFilter::new(JEQ, 13, 0, 0x8100), // -> 15 accept
        /* 2 */ SockFilter::new(JEQ, 0, 7, 0x0800), // else -> 10 (IPv6?)
        /* 3 */ SockFilter::new(LD_B_ABS, 0, 0, 14 + 9), // IPv4 protocol
        /* 4 */ SockFilter::new(JEQ, 0, 11, 17), // else -> 16 drop
        /* 5 */ SockFilter::new(LD_H_ABS, 0, 0, 14 + 6), // flags and fragment offset
        /* 6 */ SockFilter::new(JSET, 9, 0, 0x3fff), // MF or an offset -> 16 drop
        /* 7 */ SockFilter::new(LDX_B_MSH, 0, 0, 14), // X = IPv4 header length
        /* 8 */ SockFilter::new(LD_H_IND, 0, 0, 14 + 2), // UDP destination port
        /* 9 */ SockFilter::new(JEQ, 5, 6, port), // -> 15 accept, else 16 drop
        /* 10 */ SockFilter::new(JEQ, 0, 5, 0x86dd), // else -> 16 drop
        /* 11 */ SockFilter::new(LD_B_ABS, 0, 0, 14 + 6), // IPv6 next header
        /* 12 */ SockFilter::new(JEQ, 0, 3, 17), // else -> 16 drop
        /* 13 */ SockFilter::new(LD_H_ABS, 0, 0, 14 + 40 + 2), // UDP destination port
        /* 14 */ SockFilter::new(JEQ, 0, 1, port), // else -> 16 drop
        /* 15 */ SockFilter::new(RET, 0, 0, WHOLE),
        /* 16 */ SockFilter::new(RET, 0, 0, 0),
    ]
}

/// Drops everything.
pub(super) fn nothing() -> [SockFilter; 1] {
    [SockFilter::new(RET, 0, 0, 0)]
}
