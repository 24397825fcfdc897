//! What the engine tests share: an engine with one RC QP and a registered buffer, QPs
//! brought to RTS, packets handed from engine to engine in memory, and packets from a
//! peer that the test plays.
#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rocex_proto::verbs::{AddressVector, Mtu, QpAttr, QpCap};
use rocex_proto::{Access, Config, Engine, IcrcStatus, Instant, Keys, PdId, QpInit, VecRegion};
use rocex_wire::PacketRepr;

/// The address of an engine whose peer the test plays.
pub const LOCAL: [u8; 4] = [198, 18, 0, 1];

/// The peer a test plays: its address and rxe's UDP source port.
pub fn peer() -> SocketAddr {
    SocketAddr::new([198, 18, 0, 2].into(), 49458)
}

/// An RC QP with `cap` on `pd`, sending and receiving on `cq`.
pub fn rc_qp(e: &mut Engine, pd: PdId, cq: u32, cap: QpCap) -> u32 {
    let init = QpInit::rc(pd, cq, cap);
    e.create_qp(init).unwrap()
}

/// What a [`Node`] is made with besides its [`Config`].
pub struct Spec {
    /// Entries of the one CQ.
    pub cqes: usize,
    /// The RC QP's capabilities.
    pub cap: QpCap,
    /// Where the buffer is registered, its length and rights.
    pub iova: u64,
    pub len: usize,
    pub access: Access,
}

impl Default for Spec {
    fn default() -> Self {
        Self {
            cqes: 64,
            cap: QpCap::default(),
            iova: 0,
            len: 4096,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        }
    }
}

/// One engine with a PD, a CQ, an RC QP and a zeroed buffer registered on the PD.
pub struct Node {
    pub e: Engine,
    pub addr: IpAddr,
    pub pd: PdId,
    pub cq: u32,
    pub qpn: u32,
    pub keys: Keys,
    pub mem: Arc<VecRegion>,
}

impl Node {
    pub fn new(config: Config, spec: Spec) -> Self {
        let addr = config.local;
        let mut e = Engine::new(config);
        let pd = e.alloc_pd();
        let cq = e.create_cq(spec.cqes).unwrap();
        let qpn = rc_qp(&mut e, pd, cq, spec.cap);
        let mem = Arc::new(VecRegion::new(spec.len));
        let keys = e
            .reg_mr(pd, spec.iova, spec.len as u64, spec.access, mem.clone())
            .unwrap();
        Self {
            e,
            addr,
            pd,
            cq,
            qpn,
            keys,
            mem,
        }
    }

    /// Brings `qpn` from RESET to RTS with every attribute of `attr` (`QpAttr::rc_steps`).
    pub fn bring_up(&mut self, qpn: u32, attr: &QpAttr) {
        for (a, mask) in attr.rc_steps() {
            self.e.modify_qp(qpn, &a, mask).unwrap();
        }
    }

    /// Moves every packet this node has to send to `to`; returns how many.
    pub fn pump(&mut self, to: &mut Self, buf: &mut [u8]) -> usize {
        let src = SocketAddr::new(self.addr, 4791);
        let mut n = 0;
        while let Some(t) = self.e.poll_transmit(Instant::ZERO, buf) {
            to.e.handle_packet(
                Instant::ZERO,
                src,
                to.addr,
                &buf[..t.len],
                IcrcStatus::Valid,
            );
            n += 1;
        }
        n
    }
}

/// The attributes of an RC QP towards `dest_qp_num` at `peer` with local and remote
/// write, path MTU `mtu`, timeout 14 and seven retries.
pub fn rc_attr(peer: IpAddr, dest_qp_num: u32, mtu: Mtu) -> QpAttr {
    QpAttr {
        qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        ah_attr: Some(AddressVector { dest: peer }),
        path_mtu: mtu,
        dest_qp_num,
        timeout: 14,
        retry_cnt: 7,
        ..QpAttr::default()
    }
}

/// Hands `p`, as the [`peer`] emits it with its canonical pad, to `e` at [`LOCAL`], its
/// ICRC taken as checked.
pub fn inject(e: &mut Engine, now: Instant, p: PacketRepr<'_>) {
    let p = p.with_canonical_pad();
    let mut buf = vec![0u8; p.buffer_len()];
    p.emit(&mut buf).unwrap();
    e.handle_packet(now, peer(), LOCAL.into(), &buf, IcrcStatus::Valid);
}
