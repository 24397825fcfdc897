//! Requests, client to daemon.

use core::net::IpAddr;

use rocex_verbs_types::{AttrMask, QpAttr, QpCap, QpType};

#[cfg(doc)]
use super::cm::{CM_PRIVATE_DATA_LEN, CmEvent, CmEventKind};
use super::cm::{CM_REJ_PRIVATE_DATA_LEN, CM_REP_PRIVATE_DATA_LEN, CM_SIDR_PRIVATE_DATA_LEN};
use super::cm::{get_addr, get_private, put_addr, put_private};
use super::codec::{BodyError, Get, Put, read_fields};
use super::kind;
use super::qp::{
    ATTR_MASK_ALL, get_attr, get_cap, put_attr, put_cap, qp_type_from_wire, qp_type_to_wire,
};
#[cfg(doc)]
use rocex_verbs_types::Access;

/// A request, client to daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Version handshake; must come first.
    Hello {
        /// The client's [`ABI_VERSION`](crate::ABI_VERSION).
        abi_version: u32,
    },
    /// Device, port and GID attributes.
    QueryDevice,
    /// Allocate a protection domain.
    AllocPd,
    /// Free a protection domain.
    DeallocPd {
        /// The PD handle.
        pd: u32,
    },
    /// Register `len` bytes at `offset` of the memfd sent with the frame as `iova`.
    RegMrShared {
        /// PD handle.
        pd: u32,
        /// The address the application uses for the MR's first byte.
        iova: u64,
        /// Byte offset in the memfd.
        offset: u64,
        /// Bytes.
        len: u64,
        /// [`Access`] bits.
        access: u32,
    },
    /// Register memory of the calling process (process_vm_readv/writev).
    RegMrProcess {
        /// PD handle.
        pd: u32,
        /// Address in the client.
        addr: u64,
        /// Bytes.
        len: u64,
        /// [`Access`] bits.
        access: u32,
    },
    /// Deregister an MR.
    DeregMr {
        /// Its lkey.
        lkey: u32,
    },
    /// A completion channel (an eventfd the daemon signals).
    CreateCompChannel,
    /// A CQ of at least `cqe` entries.
    CreateCq {
        /// Entries wanted.
        cqe: u32,
        /// Completion channel handle, 0 for none.
        channel: u32,
    },
    /// Destroy a CQ.
    DestroyCq {
        /// CQ handle.
        cq: u32,
    },
    /// Allocate a memory window in PD `pd` (`ibv_alloc_mw`).
    AllocMw {
        /// PD handle.
        pd: u32,
        /// A type-1 window (bound again while bound, never invalidated), else type 2.
        type1: bool,
    },
    /// Free the memory window whose rkey is `rkey`.
    DeallocMw {
        /// Its current rkey.
        rkey: u32,
    },
    /// Bind a window through a QP (a BIND_MW work request, or `ibv_bind_mw`).
    BindMw(BindMw),
    /// Invalidate the window `rkey` through QP `qpn` (a LOCAL_INV work request).
    LocalInv {
        /// The QP whose PD the window is in.
        qpn: u32,
        /// The window's rkey.
        rkey: u32,
    },
    /// Give a CQ a new ring of at least `cqe` entries (`ibv_resize_cq`); the old ring keeps
    /// the completions it holds, later ones go into the new one.
    ResizeCq {
        /// CQ handle.
        cq: u32,
        /// Entries wanted.
        cqe: u32,
    },
    /// Create a QP.
    CreateQp {
        /// PD handle.
        pd: u32,
        /// Transport.
        qp_type: QpType,
        /// Send CQ handle.
        send_cq: u32,
        /// Receive CQ handle.
        recv_cq: u32,
        /// Capabilities asked for.
        cap: QpCap,
    },
    /// Modify a QP.
    ModifyQp {
        /// QP number.
        qpn: u32,
        /// Which fields of `attr` apply.
        mask: AttrMask,
        /// Attributes in fixed form.
        attr: QpAttr,
    },
    /// Query a QP.
    QueryQp {
        /// QP number.
        qpn: u32,
    },
    /// Destroy a QP.
    DestroyQp {
        /// QP number.
        qpn: u32,
    },
    /// The device's counters and one page of its QPs' (every client's).
    Stat {
        /// Only this QP; 0 for every QP.
        qpn: u32,
        /// With `qpn` 0: the first QPN of the page (the last page's `next`; 0 to start).
        cursor: u32,
    },
    /// Receive the connection requests (TCP port space) or SIDR requests (UDP port space)
    /// for an rdma_cm port.
    CmListen {
        /// The port space: rdma_cm's `RDMA_PS_TCP` (0x0106) or `RDMA_PS_UDP` (0x0111).
        ps: u16,
        /// The port.
        port: u16,
    },
    /// Give up an rdma_cm port [`CmListen`](Self::CmListen) claimed: REQs for it are then
    /// rejected as for a port nobody listens on.
    CmUnlisten {
        /// The port space.
        ps: u16,
        /// The port.
        port: u16,
    },
    /// Connect the client's RC QP `qpn` (in INIT) to `addr`:`port` (TCP port space), or
    /// resolve the UD service there for its UD QP (UDP port space, SIDR); answered with the
    /// connection's id at once, the outcome comes as a [`CmEvent`].
    CmConnect {
        /// The client's QP.
        qpn: u32,
        /// The QP is UD: resolve the UD service (SIDR). rocexd reads this of a QP its
        /// engine holds; a direct client's QP is in the client's engine, which says it.
        ud: bool,
        /// The listener's address.
        addr: IpAddr,
        /// Its rdma_cm port.
        port: u16,
        /// The connecting id's own rdma_cm port, which rdma_cm's header carries to the
        /// listener (0: the daemon picks one).
        src_port: u16,
        /// The path's traffic class (`RDMA_OPTION_ID_TOS`): the IP TOS of both QPs' packets.
        tos: u8,
        /// Private data for the listener, at most [`CM_PRIVATE_DATA_LEN`] bytes for a REQ,
        /// [`CM_SIDR_PRIVATE_DATA_LEN`] for a SIDR_REQ.
        private_data: Vec<u8>,
    },
    /// Accept the request `id` (a [`CmEventKind::ConnectRequest`]) with QP `qpn` (in INIT).
    CmAccept {
        /// The request's connection id.
        id: u32,
        /// The client's QP.
        qpn: u32,
        /// A UD QP's Q_Key, which a SIDR request's answer carries (0 for RC). rocexd
        /// reads it of a QP its engine holds; a direct client's QP is the client's to say.
        qkey: u32,
        /// Private data for the REP, at most [`CM_REP_PRIVATE_DATA_LEN`] bytes.
        private_data: Vec<u8>,
    },
    /// A direct client moved its QP to RTR and RTS with a
    /// [`CmEventKind::ConnectResponse`]'s attributes: send the RTU (rdma_cm's own library
    /// answers the kernel so for a QP of its process). `Established` follows.
    CmEstablish {
        /// The connection id.
        id: u32,
    },
    /// Reject the request `id`.
    CmReject {
        /// The request's connection id.
        id: u32,
        /// Private data for the REJ, at most [`CM_REJ_PRIVATE_DATA_LEN`] bytes.
        private_data: Vec<u8>,
    },
    /// Disconnect `id` (DREQ); its QP goes to ERROR.
    CmDisconnect {
        /// The connection id.
        id: u32,
    },
    /// The next CM event of this client, if any.
    CmPoll,
    /// A QPN slot and its steered socket, to run the engine in the client's own process
    /// (answered with [`Response::Direct`](super::Response::Direct)).
    OpenDirect,
}

/// What a [`Request::BindMw`] asks: bind the window `mw_rkey` through QP `qpn`; its new
/// rkey keeps the upper 24 bits and takes `key` as the low 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindMw {
    /// The QP whose PD the window and the region are in.
    pub qpn: u32,
    /// The window's current rkey.
    pub mw_rkey: u32,
    /// The new rkey's low byte.
    pub key: u8,
    /// The region's lkey.
    pub mr_lkey: u32,
    /// First byte of the window.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// [`Access`] bits the window grants.
    pub access: u32,
}

impl Request {
    /// The message kind.
    pub const fn kind(&self) -> u16 {
        match self {
            Self::Hello { .. } => kind::HELLO,
            Self::QueryDevice => kind::QUERY_DEVICE,
            Self::AllocPd => kind::ALLOC_PD,
            Self::DeallocPd { .. } => kind::DEALLOC_PD,
            Self::RegMrShared { .. } => kind::REG_MR_SHARED,
            Self::RegMrProcess { .. } => kind::REG_MR_PROCESS,
            Self::DeregMr { .. } => kind::DEREG_MR,
            Self::CreateCompChannel => kind::CREATE_COMP_CHANNEL,
            Self::CreateCq { .. } => kind::CREATE_CQ,
            Self::DestroyCq { .. } => kind::DESTROY_CQ,
            Self::ResizeCq { .. } => kind::RESIZE_CQ,
            Self::AllocMw { .. } => kind::ALLOC_MW,
            Self::DeallocMw { .. } => kind::DEALLOC_MW,
            Self::BindMw(_) => kind::BIND_MW,
            Self::LocalInv { .. } => kind::LOCAL_INV,
            Self::CreateQp { .. } => kind::CREATE_QP,
            Self::ModifyQp { .. } => kind::MODIFY_QP,
            Self::QueryQp { .. } => kind::QUERY_QP,
            Self::DestroyQp { .. } => kind::DESTROY_QP,
            Self::Stat { .. } => kind::STAT,
            Self::CmListen { .. } => kind::CM_LISTEN,
            Self::CmUnlisten { .. } => kind::CM_UNLISTEN,
            Self::CmConnect { .. } => kind::CM_CONNECT,
            Self::CmAccept { .. } => kind::CM_ACCEPT,
            Self::CmReject { .. } => kind::CM_REJECT,
            Self::CmDisconnect { .. } => kind::CM_DISCONNECT,
            Self::CmEstablish { .. } => kind::CM_ESTABLISH,
            Self::CmPoll => kind::CM_POLL,
            Self::OpenDirect => kind::OPEN_DIRECT,
        }
    }

    /// File descriptors a request of `kind` carries (only `RegMrShared`: its memfd).
    pub const fn fds(kind: u16) -> usize {
        if kind == kind::REG_MR_SHARED { 1 } else { 0 }
    }

    /// The body.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Put::default();
        match self {
            Self::Hello { abi_version } => {
                p.u32(*abi_version);
            }
            Self::QueryDevice
            | Self::AllocPd
            | Self::CreateCompChannel
            | Self::CmPoll
            | Self::OpenDirect => {}
            Self::DeallocPd { pd } => {
                p.u32(*pd);
            }
            Self::RegMrShared {
                pd,
                iova,
                offset,
                len,
                access,
            } => {
                p.u32(*pd).u64(*iova).u64(*offset).u64(*len).u32(*access);
            }
            Self::RegMrProcess {
                pd,
                addr,
                len,
                access,
            } => {
                p.u32(*pd).u64(*addr).u64(*len).u32(*access);
            }
            Self::DeregMr { lkey } => {
                p.u32(*lkey);
            }
            Self::CreateCq { cqe, channel } => {
                p.u32(*cqe).u32(*channel);
            }
            Self::DestroyCq { cq } => {
                p.u32(*cq);
            }
            Self::ResizeCq { cq, cqe } => {
                p.u32(*cq).u32(*cqe);
            }
            Self::AllocMw { pd, type1 } => {
                p.u32(*pd).u8(u8::from(*type1));
            }
            Self::DeallocMw { rkey } => {
                p.u32(*rkey);
            }
            Self::BindMw(BindMw {
                qpn,
                mw_rkey,
                key,
                mr_lkey,
                addr,
                len,
                access,
            }) => {
                p.u32(*qpn)
                    .u32(*mw_rkey)
                    .u8(*key)
                    .u32(*mr_lkey)
                    .u64(*addr)
                    .u64(*len)
                    .u32(*access);
            }
            Self::LocalInv { qpn, rkey } => {
                p.u32(*qpn).u32(*rkey);
            }
            Self::CreateQp {
                pd,
                qp_type,
                send_cq,
                recv_cq,
                cap,
            } => {
                p.u32(*pd)
                    .u8(qp_type_to_wire(*qp_type))
                    .u32(*send_cq)
                    .u32(*recv_cq);
                put_cap(&mut p, cap);
            }
            Self::ModifyQp { qpn, mask, attr } => {
                p.u32(*qpn).u32(mask.0);
                put_attr(&mut p, attr);
            }
            Self::QueryQp { qpn } | Self::DestroyQp { qpn } => {
                p.u32(*qpn);
            }
            Self::Stat { qpn, cursor } => {
                p.u32(*qpn).u32(*cursor);
            }
            Self::CmListen { ps, port } | Self::CmUnlisten { ps, port } => {
                p.u16(*ps).u16(*port);
            }
            Self::CmConnect {
                qpn,
                ud,
                addr,
                port,
                src_port,
                tos,
                private_data,
            } => {
                p.u32(*qpn).u8(u8::from(*ud));
                put_addr(&mut p, *addr);
                p.u16(*port).u16(*src_port).u8(*tos);
                put_private(&mut p, private_data, CM_SIDR_PRIVATE_DATA_LEN);
            }
            Self::CmAccept {
                id,
                qpn,
                qkey,
                private_data,
            } => {
                p.u32(*id).u32(*qpn).u32(*qkey);
                put_private(&mut p, private_data, CM_REP_PRIVATE_DATA_LEN);
            }
            Self::CmReject { id, private_data } => {
                p.u32(*id);
                put_private(&mut p, private_data, CM_REJ_PRIVATE_DATA_LEN);
            }
            Self::CmDisconnect { id } | Self::CmEstablish { id } => {
                p.u32(*id);
            }
        }
        p.0
    }

    /// Decodes the body of a request of `kind`.
    pub fn decode(kind: u16, body: &[u8]) -> Result<Self, BodyError> {
        let mut g = Get { kind, b: body };
        let r = match kind {
            kind::HELLO => Self::Hello {
                abi_version: g.u32("abi_version")?,
            },
            kind::QUERY_DEVICE => Self::QueryDevice,
            kind::ALLOC_PD => Self::AllocPd,
            kind::DEALLOC_PD => Self::DeallocPd { pd: g.u32("pd")? },
            kind::REG_MR_SHARED => read_fields!(
                g,
                Self::RegMrShared {
                    pd: u32,
                    iova: u64,
                    offset: u64,
                    len: u64,
                    access: u32,
                }
            ),
            kind::REG_MR_PROCESS => read_fields!(
                g,
                Self::RegMrProcess {
                    pd: u32,
                    addr: u64,
                    len: u64,
                    access: u32,
                }
            ),
            kind::DEREG_MR => Self::DeregMr {
                lkey: g.u32("lkey")?,
            },
            kind::CREATE_COMP_CHANNEL => Self::CreateCompChannel,
            kind::CREATE_CQ => read_fields!(
                g,
                Self::CreateCq {
                    cqe: u32,
                    channel: u32,
                }
            ),
            kind::DESTROY_CQ => Self::DestroyCq { cq: g.u32("cq")? },
            kind::RESIZE_CQ => read_fields!(g, Self::ResizeCq { cq: u32, cqe: u32 }),
            kind::ALLOC_MW => {
                let pd = g.u32("pd")?;
                let type1 = match g.u8("type1")? {
                    0 => false,
                    1 => true,
                    v => return Err(g.bad("type1", v.into())),
                };
                Self::AllocMw { pd, type1 }
            }
            kind::DEALLOC_MW => Self::DeallocMw {
                rkey: g.u32("rkey")?,
            },
            kind::BIND_MW => Self::BindMw(read_fields!(
                g,
                BindMw {
                    qpn: u32,
                    mw_rkey: u32,
                    key: u8,
                    mr_lkey: u32,
                    addr: u64,
                    len: u64,
                    access: u32,
                }
            )),
            kind::LOCAL_INV => read_fields!(
                g,
                Self::LocalInv {
                    qpn: u32,
                    rkey: u32,
                }
            ),
            kind::CREATE_QP => {
                let pd = g.u32("pd")?;
                let t = g.u8("qp_type")?;
                let qp_type = qp_type_from_wire(t).ok_or_else(|| g.bad("qp_type", t.into()))?;
                Self::CreateQp {
                    pd,
                    qp_type,
                    send_cq: g.u32("send_cq")?,
                    recv_cq: g.u32("recv_cq")?,
                    cap: get_cap(&mut g)?,
                }
            }
            kind::MODIFY_QP => {
                let qpn = g.u32("qpn")?;
                let m = g.u32("attr_mask")?;
                if m & !ATTR_MASK_ALL != 0 {
                    return Err(g.bad("attr_mask", m.into()));
                }
                Self::ModifyQp {
                    qpn,
                    mask: AttrMask(m),
                    attr: get_attr(&mut g)?,
                }
            }
            kind::QUERY_QP => Self::QueryQp { qpn: g.u32("qpn")? },
            kind::DESTROY_QP => Self::DestroyQp { qpn: g.u32("qpn")? },
            kind::STAT => read_fields!(
                g,
                Self::Stat {
                    qpn: u32,
                    cursor: u32,
                }
            ),
            kind::CM_LISTEN => read_fields!(g, Self::CmListen { ps: u16, port: u16 }),
            kind::CM_UNLISTEN => read_fields!(g, Self::CmUnlisten { ps: u16, port: u16 }),
            kind::CM_CONNECT => Self::CmConnect {
                qpn: g.u32("qpn")?,
                ud: g.flag("ud")?,
                addr: get_addr(&mut g)?,
                port: g.u16("port")?,
                src_port: g.u16("src_port")?,
                tos: g.u8("tos")?,
                private_data: get_private(&mut g, CM_SIDR_PRIVATE_DATA_LEN)?,
            },
            kind::CM_ACCEPT => Self::CmAccept {
                id: g.u32("id")?,
                qpn: g.u32("qpn")?,
                qkey: g.u32("qkey")?,
                private_data: get_private(&mut g, CM_REP_PRIVATE_DATA_LEN)?,
            },
            kind::CM_REJECT => Self::CmReject {
                id: g.u32("id")?,
                private_data: get_private(&mut g, CM_REJ_PRIVATE_DATA_LEN)?,
            },
            kind::CM_DISCONNECT => Self::CmDisconnect { id: g.u32("id")? },
            kind::CM_ESTABLISH => Self::CmEstablish { id: g.u32("id")? },
            kind::CM_POLL => Self::CmPoll,
            kind::OPEN_DIRECT => Self::OpenDirect,
            k => return Err(BodyError::Kind(k)),
        };
        g.finish()?;
        Ok(r)
    }
}
