//! The steering group's classic BPF programs (`Documentation/networking/filter.rst`), built
//! from the slots a group routes and nothing else, so they are tested without a socket.
//!
//! Both read the BTH's second word, which holds a reserved byte and the 24-bit destination
//! QP (IBA 9.2). A load past the end of a datagram ends a classic program with 0: a
//! datagram too short for a BTH goes to index 0 (rocexd), and a socket filter drops it.

use libc::sock_filter;

/// Offset of the BTH word holding the destination QPN in the UDP payload, where the
/// reuseport program starts reading (`reuseport_select_sock` pulls the UDP header).
pub(super) const DEST_QP_WORD: u32 = 4;
/// A socket filter on a UDP socket reads from the UDP header (`udp_queue_rcv_one_skb`).
pub(super) const UDP_HEADER: u32 = 8;
pub(super) const QPN_BITS: u32 = 0x00ff_ffff;
/// QP1, the GSI: CM MADs, which rocexd answers for every client.
pub(super) const GSI: u32 = 1;
/// A socket filter's "keep all of it".
const ACCEPT: u32 = u32::MAX;

/// One instruction without jumps.
fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `if A == k` run the next instruction, else skip it.
fn if_eq(k: u32) -> sock_filter {
    sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k,
    }
}

fn ret(k: u32) -> sock_filter {
    stmt(libc::BPF_RET | libc::BPF_K, k)
}

/// A = the destination QPN of the BTH at `at`; QP1 ends the program with `gsi`; then A =
/// its low `bits` bits, its slot.
fn load_slot(at: u32, bits: u8, gsi: u32) -> [sock_filter; 5] {
    [
        stmt(
            libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
            at + DEST_QP_WORD,
        ),
        stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, QPN_BITS),
        if_eq(GSI),
        ret(gsi),
        stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, (1 << bits) - 1),
    ]
}

/// The group's program (`SO_ATTACH_REUSEPORT_CBPF`): the index of the socket that takes a
/// datagram, which is its slot's for each slot of `granted`, and 0 (rocexd's) for QP1 and
/// every other slot.
pub(crate) fn steering(bits: u8, granted: &[u32]) -> Vec<sock_filter> {
    let mut p = load_slot(0, bits, 0).to_vec();
    for &slot in granted {
        p.extend([if_eq(slot), ret(slot)]);
    }
    p.push(ret(0));
    p
}

/// A handed-out socket's own filter (`SO_ATTACH_FILTER`, locked with it): it keeps only
/// the QPNs of `slot`, so that its holder receives no other process's datagram even when
/// the group has no program (which any member may remove, `docs/security.md`).
pub(crate) fn slot_filter(bits: u8, slot: u32) -> Vec<sock_filter> {
    let mut p = load_slot(UDP_HEADER, bits, 0).to_vec();
    p.extend([if_eq(slot), ret(ACCEPT), ret(0)]);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a program of the instructions these builders use, as the kernel does
    /// (`bpf_prog_run` on the classic program): a load past the end returns 0.
    fn run(p: &[sock_filter], data: &[u8]) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = p[pc];
            pc += 1;
            match u32::from(i.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let at = i.k as usize;
                    let Some(w) = data.get(at..at + 4) else {
                        return 0;
                    };
                    a = u32::from_be_bytes(w.try_into().unwrap());
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= i.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += usize::from(if a == i.k { i.jt } else { i.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return i.k,
                c => panic!("instruction {c:#x} is not one the builders emit"),
            }
        }
    }

    /// A BTH (opcode, flags, P_Key, reserved, destination QP, PSN) and 4 payload bytes.
    fn bth(qpn: u32) -> Vec<u8> {
        let mut b = vec![0x04, 0x40, 0xff, 0xff, 0x5a];
        b.extend_from_slice(&qpn.to_be_bytes()[1..]);
        b.extend_from_slice(&[0x80, 0, 0, 7, 1, 2, 3, 4]);
        b
    }

    #[test]
    fn each_granted_slot_goes_to_its_socket_and_the_rest_to_rocexd() {
        let p = steering(5, &[3, 17]);
        assert!(p.len() <= libc::BPF_MAXINSNS as usize);
        // The reserved byte before the QPN is ignored, the QPN's upper 19 bits too.
        for (qpn, index) in [
            (0x00_0003, 3),
            (0xab_cd63, 3),
            (0x7f_ff71, 17),
            (0x00_0011, 17),
            (1, 0),
            (0x00_0021, 0),
            (0x12_3400, 0),
            (0xff_ffe4, 0),
        ] {
            assert_eq!(run(&p, &bth(qpn)), index, "QPN {qpn:#08x}");
        }
        assert_eq!(run(&p, &bth(3)[..7]), 0, "too short for the QPN");
        assert_eq!(run(&steering(5, &[]), &bth(3)), 0, "nothing granted");
    }

    #[test]
    fn qp1_stays_with_rocexd_even_in_slot_1() {
        let p = steering(5, &[1]);
        assert_eq!(run(&p, &bth(1)), 0);
        assert_eq!(run(&p, &bth(0x21)), 1);
        assert_eq!(run(&p, &bth(0x1_0001)), 1);
    }

    #[test]
    fn a_slot_filter_keeps_its_slot_only() {
        let f = slot_filter(5, 9);
        let with_udp = |qpn| [[0x12, 0xb7, 0x12, 0xb7, 0, 28, 0, 0].as_slice(), &bth(qpn)].concat();
        assert_eq!(run(&f, &with_udp(0x00_0009)), ACCEPT);
        assert_eq!(run(&f, &with_udp(0x44_4449)), ACCEPT);
        for qpn in [1, 8, 0x0a, 0x00_0019, 0x44_4448] {
            assert_eq!(run(&f, &with_udp(qpn)), 0, "QPN {qpn:#x}");
        }
        assert_eq!(run(&slot_filter(5, 1), &with_udp(1)), 0, "QP1 is rocexd's");
        assert_eq!(run(&f, &with_udp(9)[..14]), 0, "too short");
        // Bits 3: slot 1 is QPN & 7.
        assert_eq!(run(&slot_filter(3, 1), &with_udp(0x19)), ACCEPT);
    }
}
