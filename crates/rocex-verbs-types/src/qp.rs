//! Queue pairs: their transport types, states, path MTUs, attributes and the mask of
//! attributes a modify sets (`struct ibv_qp_attr`, `enum ibv_qp_attr_mask`).

use core::net::IpAddr;

use crate::Access;

/// Queue pair transport type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

impl QpType {
    /// The type as libibverbs and `rdma` print it: `RC`, `UC`, `UD`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rc => "RC",
            Self::Uc => "UC",
            Self::Ud => "UD",
        }
    }
}

/// Queue pair state (IBTA §10.3.1; `enum ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Reset: no work is processed.
    Reset = 0,
    /// Initialized: receives may be posted; nothing is processed.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained.
    Sqd = 4,
    /// Send queue error.
    Sqe = 5,
    /// Error: every work request completes with a flush error.
    Err = 6,
}

impl QpState {
    /// The state as the IBTA and `rdma` print it: `RESET`, `INIT`, `RTR`, `RTS`, `SQD`,
    /// `SQE`, `ERR`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Reset => "RESET",
            Self::Init => "INIT",
            Self::Rtr => "RTR",
            Self::Rts => "RTS",
            Self::Sqd => "SQD",
            Self::Sqe => "SQE",
            Self::Err => "ERR",
        }
    }
}

/// Path MTU (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes.
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128 << self as u32
    }

    /// The MTU of libibverbs' enum value.
    pub const fn from_ibv(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::M256),
            2 => Some(Self::M512),
            3 => Some(Self::M1024),
            4 => Some(Self::M2048),
            5 => Some(Self::M4096),
            _ => None,
        }
    }

    /// The largest IB MTU whose packets fit an Ethernet MTU, as rxe chooses its port MTU
    /// (`eth_mtu_int_to_enum`: the netdev MTU less 80 bytes of headers).
    pub fn for_ethernet(eth_mtu: u32) -> Option<Self> {
        let room = eth_mtu.checked_sub(80)?;
        [
            Self::M4096,
            Self::M2048,
            Self::M1024,
            Self::M512,
            Self::M256,
        ]
        .into_iter()
        .find(|m| m.bytes() <= room)
    }
}

/// Which fields of [`QpAttr`] a modify sets (`enum ibv_qp_attr_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttrMask(pub u32);

impl AttrMask {
    /// `qp_state`.
    pub const STATE: Self = Self(1);
    /// `cur_qp_state`.
    pub const CUR_STATE: Self = Self(1 << 1);
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: Self = Self(1 << 2);
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: Self = Self(1 << 3);
    /// `pkey_index`.
    pub const PKEY_INDEX: Self = Self(1 << 4);
    /// `port_num`.
    pub const PORT: Self = Self(1 << 5);
    /// `qkey`.
    pub const QKEY: Self = Self(1 << 6);
    /// `ah_attr`.
    pub const AV: Self = Self(1 << 7);
    /// `path_mtu`.
    pub const PATH_MTU: Self = Self(1 << 8);
    /// `timeout`.
    pub const TIMEOUT: Self = Self(1 << 9);
    /// `retry_cnt`.
    pub const RETRY_CNT: Self = Self(1 << 10);
    /// `rnr_retry`.
    pub const RNR_RETRY: Self = Self(1 << 11);
    /// `rq_psn`.
    pub const RQ_PSN: Self = Self(1 << 12);
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: Self = Self(1 << 13);
    /// `alt_ah_attr`.
    pub const ALT_PATH: Self = Self(1 << 14);
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: Self = Self(1 << 15);
    /// `sq_psn`.
    pub const SQ_PSN: Self = Self(1 << 16);
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: Self = Self(1 << 17);
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: Self = Self(1 << 18);
    /// `cap`.
    pub const CAP: Self = Self(1 << 19);
    /// `dest_qp_num`.
    pub const DEST_QPN: Self = Self(1 << 20);

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Where a connected QP's packets go: the remote GID as an IP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressVector {
    /// The peer's IP address (its RoCE v2 GID).
    pub dest: IpAddr,
}

/// Queue pair attributes (`struct ibv_qp_attr`); a modify reads those its mask names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// Target state.
    pub qp_state: QpState,
    /// Remote access the QP allows as a responder.
    pub qp_access_flags: Access,
    /// P_Key index (only index 0, P_Key 0xFFFF, exists).
    pub pkey_index: u16,
    /// Port (only port 1 exists).
    pub port_num: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// The peer (RC, UC).
    pub ah_attr: Option<AddressVector>,
    /// The address vector's GRH traffic class (`ah_attr.grh.traffic_class`), set with
    /// [`AttrMask::AV`]: the IP TOS byte of the QP's packets, DSCP in the upper six bits
    /// and ECN in the lower two (rxe `prepare4`/`prepare6`; `docs/congestion.md`).
    pub traffic_class: u8,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent (0 = no timeout).
    pub timeout: u8,
    /// Retries after a timeout or sequence NAK (7 is infinite in rxe).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7 is infinite).
    pub rnr_retry: u8,
    /// First PSN expected by the responder.
    pub rq_psn: u32,
    /// First PSN sent by the requester.
    pub sq_psn: u32,
    /// READ and atomic requests outstanding as requester.
    pub max_rd_atomic: u8,
    /// READ and atomic requests accepted as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code the responder sends.
    pub min_rnr_timer: u8,
    /// The peer QP number.
    pub dest_qp_num: u32,
}

impl QpAttr {
    /// The three `modify_qp` calls that take an RC QP from RESET to RTS with every
    /// attribute of `self`: INIT (access), RTR (the peer, path MTU, receive PSN, responder
    /// resources, RNR timer) and RTS (send PSN, timeout, retries, initiator depth), each
    /// with the mask that state requires (IBTA 11.2.5, libibverbs' `ibv_modify_qp`).
    pub fn rc_steps(&self) -> [(Self, AttrMask); 3] {
        let at = |qp_state| Self { qp_state, ..*self };
        [
            (
                at(QpState::Init),
                AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
            ),
            (
                at(QpState::Rtr),
                AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN
                    | AttrMask::MAX_DEST_RD_ATOMIC
                    | AttrMask::MIN_RNR_TIMER,
            ),
            (
                at(QpState::Rts),
                AttrMask::STATE
                    | AttrMask::SQ_PSN
                    | AttrMask::TIMEOUT
                    | AttrMask::RETRY_CNT
                    | AttrMask::RNR_RETRY
                    | AttrMask::MAX_QP_RD_ATOMIC,
            ),
        ]
    }
}

impl Default for QpAttr {
    fn default() -> Self {
        Self {
            qp_state: QpState::Reset,
            qp_access_flags: Access::empty(),
            pkey_index: 0,
            port_num: 1,
            qkey: 0,
            ah_attr: None,
            traffic_class: 0,
            path_mtu: Mtu::M256,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            rq_psn: 0,
            sq_psn: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            dest_qp_num: 0,
        }
    }
}

/// Queue sizes (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Inline data bytes per send WR.
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        Self {
            max_send_wr: 256,
            max_recv_wr: 256,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 256,
        }
    }
}
