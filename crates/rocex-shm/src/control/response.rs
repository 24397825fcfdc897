//! Responses, daemon to client, and the attributes they carry.

use rocex_verbs_types::{QpAttr, QpCap};

use super::cm::{
    CM_REP_PRIVATE_DATA_LEN, CmConn, CmEvent, CmEventKind, get_addr, get_private, put_addr,
    put_private,
};
use super::codec::{BodyError, Get, Put, read_fields};
use super::direct::DirectGrant;
use super::kind;
use super::qp::{get_attr, get_cap, put_attr, put_cap};
use super::stats::Stats;

/// Device, port and GID attributes (`QueryDevice`'s response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAttr {
    /// QPs the device holds.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// CQs.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// MRs.
    pub max_mr: u32,
    /// PDs.
    pub max_pd: u32,
    /// Outstanding READ/atomic requests per QP.
    pub max_qp_rd_atom: u32,
    /// Inline bytes per send.
    pub max_inline: u32,
    /// The port's GID (the IP address, IPv4-mapped for IPv4).
    pub gid: [u8; 16],
    /// The port's active MTU (`enum ibv_mtu`).
    pub mtu: u8,
    /// `enum ibv_port_state` (4 ACTIVE).
    pub port_state: u8,
}

/// What `CreateQp` answers (with the ring memfd and the doorbell eventfd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCreated {
    /// QP number.
    pub qpn: u32,
    /// Capabilities granted.
    pub cap: QpCap,
    /// SQ ring offset in the memfd.
    pub sq_offset: u64,
    /// SQ slots.
    pub sq_slots: u32,
    /// SQ slot size.
    pub sq_slot_size: u32,
    /// RQ ring offset in the memfd.
    pub rq_offset: u64,
    /// RQ slots.
    pub rq_slots: u32,
    /// RQ slot size.
    pub rq_slot_size: u32,
}

/// A response, daemon to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `Hello` accepted.
    Hello {
        /// The daemon's ABI version.
        abi_version: u32,
        /// The daemon's process id.
        daemon_pid: u32,
    },
    /// Device attributes.
    QueryDevice(DeviceAttr),
    /// The new PD.
    AllocPd {
        /// PD handle.
        pd: u32,
    },
    /// The MR's keys (`RegMrShared`, `RegMrProcess`; the kind says which).
    RegMr {
        /// Which request this answers.
        kind: u16,
        /// Local key.
        lkey: u32,
        /// Remote key.
        rkey: u32,
    },
    /// The channel handle (with its eventfd).
    CreateCompChannel {
        /// Channel handle.
        channel: u32,
    },
    /// The CQ (with its ring memfd).
    CreateCq {
        /// CQ handle.
        cq: u32,
        /// Slots in the ring.
        slots: u32,
        /// Ring offset in the memfd.
        ring_offset: u64,
    },
    /// A new memory window.
    AllocMw {
        /// Its rkey.
        rkey: u32,
    },
    /// A bound window's new rkey.
    BindMw {
        /// The rkey.
        rkey: u32,
    },
    /// The CQ's new ring (with its memfd), at the offset and of the geometry a new CQ's.
    ResizeCq {
        /// Slots in the ring.
        slots: u32,
        /// Ring offset in the memfd.
        ring_offset: u64,
    },
    /// The QP (with its ring memfd and doorbell eventfd).
    CreateQp(QpCreated),
    /// The QP's attributes.
    QueryQp {
        /// Attributes.
        attr: QpAttr,
        /// Capabilities.
        cap: QpCap,
    },
    /// Counters (`Stat`).
    Stat(Stats),
    /// The new connection's id (`CmConnect`).
    CmConnect {
        /// Connection id.
        id: u32,
    },
    /// The next CM event, `None` when there is none (`CmPoll`).
    CmPoll(Option<CmEvent>),
    /// A QPN slot granted (`OpenDirect`), with the slot's socket and its QP board.
    Direct(DirectGrant),
    /// A request with an empty response succeeded; the request kind.
    Done(u16),
    /// A request failed.
    Error {
        /// An errno value (`EINVAL`, `ENOENT`, ...).
        errno: u32,
        /// Why, for humans.
        detail: String,
    },
}

/// File descriptors a response of `kind` (response kind, with [`kind::RESPONSE`]) carries.
pub const fn response_fds(kind: u16) -> usize {
    match kind & !kind::RESPONSE {
        kind::CREATE_COMP_CHANNEL | kind::CREATE_CQ | kind::RESIZE_CQ => 1,
        kind::CREATE_QP | kind::OPEN_DIRECT => 2,
        _ => 0,
    }
}

impl Response {
    /// The message kind (the request's kind with [`kind::RESPONSE`], or [`kind::ERROR`]).
    pub const fn kind(&self) -> u16 {
        let req = match self {
            Self::Hello { .. } => kind::HELLO,
            Self::QueryDevice(_) => kind::QUERY_DEVICE,
            Self::AllocPd { .. } => kind::ALLOC_PD,
            Self::RegMr { kind, .. } => *kind,
            Self::CreateCompChannel { .. } => kind::CREATE_COMP_CHANNEL,
            Self::CreateCq { .. } => kind::CREATE_CQ,
            Self::ResizeCq { .. } => kind::RESIZE_CQ,
            Self::AllocMw { .. } => kind::ALLOC_MW,
            Self::BindMw { .. } => kind::BIND_MW,
            Self::CreateQp(_) => kind::CREATE_QP,
            Self::QueryQp { .. } => kind::QUERY_QP,
            Self::Stat(_) => kind::STAT,
            Self::CmConnect { .. } => kind::CM_CONNECT,
            Self::CmPoll(_) => kind::CM_POLL,
            Self::Direct(_) => kind::OPEN_DIRECT,
            Self::Done(k) => *k,
            Self::Error { .. } => return kind::ERROR,
        };
        req | kind::RESPONSE
    }

    /// An error response; the detail is cut to 1024 bytes at a character boundary.
    pub fn error(errno: i32, detail: impl Into<String>) -> Self {
        let mut detail = detail.into();
        if detail.len() > 1024 {
            let mut cut = 1024;
            while !detail.is_char_boundary(cut) {
                cut -= 1;
            }
            detail.truncate(cut);
        }
        Self::Error {
            errno: errno as u32,
            detail,
        }
    }

    /// The body.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Put::default();
        match self {
            Self::Hello {
                abi_version,
                daemon_pid,
            } => {
                p.u32(*abi_version).u32(*daemon_pid);
            }
            Self::QueryDevice(d) => {
                for v in [
                    d.max_qp,
                    d.max_qp_wr,
                    d.max_sge,
                    d.max_cq,
                    d.max_cqe,
                    d.max_mr,
                    d.max_pd,
                    d.max_qp_rd_atom,
                    d.max_inline,
                ] {
                    p.u32(v);
                }
                p.bytes(&d.gid).u8(d.mtu).u8(d.port_state);
            }
            Self::AllocPd { pd } => {
                p.u32(*pd);
            }
            Self::RegMr { lkey, rkey, .. } => {
                p.u32(*lkey).u32(*rkey);
            }
            Self::CreateCompChannel { channel } => {
                p.u32(*channel);
            }
            Self::CreateCq {
                cq,
                slots,
                ring_offset,
            } => {
                p.u32(*cq).u32(*slots).u64(*ring_offset);
            }
            Self::ResizeCq { slots, ring_offset } => {
                p.u32(*slots).u64(*ring_offset);
            }
            Self::AllocMw { rkey } | Self::BindMw { rkey } => {
                p.u32(*rkey);
            }
            Self::CreateQp(q) => {
                p.u32(q.qpn);
                put_cap(&mut p, &q.cap);
                p.u64(q.sq_offset)
                    .u32(q.sq_slots)
                    .u32(q.sq_slot_size)
                    .u64(q.rq_offset)
                    .u32(q.rq_slots)
                    .u32(q.rq_slot_size);
            }
            Self::QueryQp { attr, cap } => {
                put_attr(&mut p, attr);
                put_cap(&mut p, cap);
            }
            Self::Stat(st) => st.put(&mut p),
            Self::CmConnect { id } => {
                p.u32(*id);
            }
            Self::CmPoll(None) => {
                p.u8(0);
            }
            Self::CmPoll(Some(e)) => {
                p.u8(e.kind as u8).u32(e.id);
                put_addr(&mut p, e.peer);
                p.u16(e.port).u16(e.reason);
                put_private(&mut p, &e.private_data, CM_REP_PRIVATE_DATA_LEN);
                p.u16(e.ps).u16(e.peer_port).u32(e.qkey);
                e.conn.put(&mut p);
            }
            Self::Direct(d) => d.put(&mut p),
            Self::Done(_) => {}
            Self::Error { errno, detail } => {
                let d = &detail.as_bytes()[..detail.len().min(u16::MAX as usize)];
                p.u32(*errno).u16(d.len() as u16).bytes(d);
            }
        }
        p.0
    }

    /// Decodes the body of a response of `kind` (a response kind or [`kind::ERROR`]).
    pub fn decode(kind: u16, body: &[u8]) -> Result<Self, BodyError> {
        let mut g = Get { kind, b: body };
        if kind == kind::ERROR {
            let errno = g.u32("errno")?;
            let n = g.u16("detail_len")?;
            let d = g.take(n.into(), "detail")?;
            let detail = core::str::from_utf8(d)
                .map_err(|_| BodyError::Utf8)?
                .to_owned();
            g.finish()?;
            return Ok(Self::Error { errno, detail });
        }
        if kind & kind::RESPONSE == 0 {
            return Err(BodyError::Kind(kind));
        }
        let r = match kind & !kind::RESPONSE {
            kind::HELLO => read_fields!(
                g,
                Self::Hello {
                    abi_version: u32,
                    daemon_pid: u32,
                }
            ),
            kind::QUERY_DEVICE => Self::QueryDevice(read_fields!(
                g,
                DeviceAttr {
                    max_qp: u32,
                    max_qp_wr: u32,
                    max_sge: u32,
                    max_cq: u32,
                    max_cqe: u32,
                    max_mr: u32,
                    max_pd: u32,
                    max_qp_rd_atom: u32,
                    max_inline: u32,
                    gid: arr,
                    mtu: u8,
                    port_state: u8,
                }
            )),
            kind::ALLOC_PD => Self::AllocPd { pd: g.u32("pd")? },
            k @ (kind::REG_MR_SHARED | kind::REG_MR_PROCESS) => Self::RegMr {
                kind: k,
                lkey: g.u32("lkey")?,
                rkey: g.u32("rkey")?,
            },
            kind::CREATE_COMP_CHANNEL => Self::CreateCompChannel {
                channel: g.u32("channel")?,
            },
            kind::CREATE_CQ => read_fields!(
                g,
                Self::CreateCq {
                    cq: u32,
                    slots: u32,
                    ring_offset: u64,
                }
            ),
            kind::ALLOC_MW => Self::AllocMw {
                rkey: g.u32("rkey")?,
            },
            kind::BIND_MW => Self::BindMw {
                rkey: g.u32("rkey")?,
            },
            kind::RESIZE_CQ => read_fields!(
                g,
                Self::ResizeCq {
                    slots: u32,
                    ring_offset: u64,
                }
            ),
            kind::CREATE_QP => Self::CreateQp(QpCreated {
                qpn: g.u32("qpn")?,
                cap: get_cap(&mut g)?,
                sq_offset: g.u64("sq_offset")?,
                sq_slots: g.u32("sq_slots")?,
                sq_slot_size: g.u32("sq_slot_size")?,
                rq_offset: g.u64("rq_offset")?,
                rq_slots: g.u32("rq_slots")?,
                rq_slot_size: g.u32("rq_slot_size")?,
            }),
            kind::QUERY_QP => Self::QueryQp {
                attr: get_attr(&mut g)?,
                cap: get_cap(&mut g)?,
            },
            kind::STAT => Self::Stat(Stats::get(&mut g)?),
            kind::CM_CONNECT => Self::CmConnect { id: g.u32("id")? },
            kind::CM_POLL => match g.u8("event")? {
                0 => Self::CmPoll(None),
                k => Self::CmPoll(Some(CmEvent {
                    kind: CmEventKind::from_wire(k).ok_or_else(|| g.bad("event", k.into()))?,
                    id: g.u32("id")?,
                    peer: get_addr(&mut g)?,
                    port: g.u16("port")?,
                    reason: g.u16("reason")?,
                    private_data: get_private(&mut g, CM_REP_PRIVATE_DATA_LEN)?,
                    ps: g.u16("ps")?,
                    peer_port: g.u16("peer_port")?,
                    qkey: g.u32("qkey")?,
                    conn: CmConn::get(&mut g)?,
                })),
            },
            kind::OPEN_DIRECT => Self::Direct(DirectGrant::get(&mut g)?),
            k @ (kind::DEALLOC_PD
            | kind::DEREG_MR
            | kind::DESTROY_CQ
            | kind::DEALLOC_MW
            | kind::LOCAL_INV
            | kind::MODIFY_QP
            | kind::DESTROY_QP
            | kind::CM_LISTEN
            | kind::CM_UNLISTEN
            | kind::CM_ACCEPT
            | kind::CM_REJECT
            | kind::CM_DISCONNECT
            | kind::CM_ESTABLISH) => Self::Done(k),
            _ => return Err(BodyError::Kind(kind)),
        };
        g.finish()?;
        Ok(r)
    }
}
