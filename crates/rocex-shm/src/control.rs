//! Control-channel framing (`docs/abi.md` §6.1) and the message bodies of §6.2.
//!
//! Frames: [`encode_frame`] and [`decode_header`]. Bodies: [`Request`] and [`Response`],
//! each with `encode` and a hostile-input-safe `decode` that checks every length, enum value
//! and reserved byte and returns a [`BodyError`] (never panics). How many file descriptors
//! a message carries is fixed by its kind ([`Request::fds`], [`response_fds`]); a frame with
//! any other number is refused by the receiver.

use core::fmt;

/// Largest `len` a frame may declare (bytes after the length field).
pub const MAX_FRAME: u32 = 65536;

/// Bytes of the frame header, length field included.
pub const HEADER_LEN: usize = 16;

/// Message kinds (§6.2); a response carries `kind | RESPONSE`.
pub mod kind {
    /// Version handshake.
    pub const HELLO: u16 = 1;
    /// Device attributes.
    pub const QUERY_DEVICE: u16 = 2;
    /// Allocate a PD.
    pub const ALLOC_PD: u16 = 3;
    /// Free a PD.
    pub const DEALLOC_PD: u16 = 4;
    /// Register a memfd-backed MR.
    pub const REG_MR_SHARED: u16 = 5;
    /// Register process memory (process_vm_readv/writev).
    pub const REG_MR_PROCESS: u16 = 6;
    /// Deregister an MR.
    pub const DEREG_MR: u16 = 7;
    /// Create a completion channel.
    pub const CREATE_COMP_CHANNEL: u16 = 8;
    /// Create a CQ.
    pub const CREATE_CQ: u16 = 9;
    /// Destroy a CQ.
    pub const DESTROY_CQ: u16 = 10;
    /// Create a QP.
    pub const CREATE_QP: u16 = 11;
    /// Modify a QP.
    pub const MODIFY_QP: u16 = 12;
    /// Query a QP.
    pub const QUERY_QP: u16 = 13;
    /// Destroy a QP.
    pub const DESTROY_QP: u16 = 14;
    /// Device and QP counters (added in ABI 1 without a version change, §6.4).
    pub const STAT: u16 = 15;
    /// Listen on an rdma_cm port (added in ABI 1 without a version change, §6.5).
    pub const CM_LISTEN: u16 = 16;
    /// Connect a QP through the CM to an address and rdma_cm port.
    pub const CM_CONNECT: u16 = 17;
    /// Accept a connection request with a QP.
    pub const CM_ACCEPT: u16 = 18;
    /// Reject a connection request.
    pub const CM_REJECT: u16 = 19;
    /// Disconnect a CM connection.
    pub const CM_DISCONNECT: u16 = 20;
    /// Take the next CM event.
    pub const CM_POLL: u16 = 21;
    /// Set on responses.
    pub const RESPONSE: u16 = 0x8000;
    /// An error response.
    pub const ERROR: u16 = 0xFFFF;
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Message kind.
    pub kind: u16,
    /// Echoed by the response.
    pub seq: u64,
    /// Bytes of body that follow the header.
    pub body_len: usize,
}

/// A malformed frame; rocexd closes the connection on any of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// `len` is under 12 or over [`MAX_FRAME`].
    Length(u32),
    /// A kind neither defined nor a response to a defined one.
    Kind(u16),
    /// Nonzero flags.
    Flags(u16),
    /// Fewer bytes than a header.
    Short(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length(n) => write!(f, "frame length {n} is out of range"),
            Self::Kind(k) => write!(f, "unknown message kind {k:#x}"),
            Self::Flags(b) => write!(f, "reserved frame flags {b:#x}"),
            Self::Short(n) => write!(f, "{n} bytes is shorter than a frame header"),
        }
    }
}

impl std::error::Error for FrameError {}

fn known(kind: u16) -> bool {
    let base = kind & !kind::RESPONSE;
    kind == kind::ERROR || (kind::HELLO..=kind::CM_POLL).contains(&base)
}

/// One frame: header and body.
pub fn encode_frame(kind: u16, seq: u64, body: &[u8]) -> Result<Vec<u8>, FrameError> {
    let len = u32::try_from(body.len() + 12)
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or(FrameError::Length(u32::MAX))?;
    if !known(kind) {
        return Err(FrameError::Kind(kind));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// Decodes the first [`HEADER_LEN`] bytes of a frame.
pub fn decode_header(b: &[u8]) -> Result<FrameHeader, FrameError> {
    let h: &[u8; HEADER_LEN] = b
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(FrameError::Short(b.len()))?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if !(12..=MAX_FRAME).contains(&len) {
        return Err(FrameError::Length(len));
    }
    let kind = u16::from_le_bytes([h[4], h[5]]);
    if !known(kind) {
        return Err(FrameError::Kind(kind));
    }
    let flags = u16::from_le_bytes([h[6], h[7]]);
    if flags != 0 {
        return Err(FrameError::Flags(flags));
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&h[8..16]);
    Ok(FrameHeader {
        kind,
        seq: u64::from_le_bytes(seq),
        body_len: len as usize - 12,
    })
}

// ---------------------------------------------------------------------------------------
// Message bodies (§6.2)
// ---------------------------------------------------------------------------------------

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rocex_proto::verbs::{Access, AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType};

/// A body that does not decode. The daemon answers `EINVAL` (or closes the connection for
/// a length fault, as §6.1 says of a malformed frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The body ends before the field.
    Short {
        /// Message kind.
        kind: u16,
        /// The field being read.
        field: &'static str,
    },
    /// Bytes after the last field.
    Trailing {
        /// Message kind.
        kind: u16,
        /// Extra bytes.
        extra: usize,
    },
    /// A field holds a value the ABI does not define.
    BadValue {
        /// Message kind.
        kind: u16,
        /// The field.
        field: &'static str,
        /// The value, widened.
        value: u64,
    },
    /// A kind that has no body of this direction (a response kind in a request, ...).
    Kind(u16),
    /// The error detail is not UTF-8.
    Utf8,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { kind, field } => {
                write!(f, "message kind {kind:#x}: body ends before `{field}`")
            }
            Self::Trailing { kind, extra } => {
                write!(
                    f,
                    "message kind {kind:#x}: {extra} bytes after the last field"
                )
            }
            Self::BadValue { kind, field, value } => {
                write!(
                    f,
                    "message kind {kind:#x}: `{field}` = {value} is not defined"
                )
            }
            Self::Kind(k) => write!(f, "message kind {k:#x} has no body in this direction"),
            Self::Utf8 => f.write_str("error detail is not UTF-8"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Little-endian field writer.
#[derive(Debug, Default)]
struct Put(Vec<u8>);

impl Put {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
}

/// Little-endian field reader over a hostile body: every read is bounds-checked.
struct Get<'a> {
    kind: u16,
    b: &'a [u8],
}

impl<'a> Get<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], BodyError> {
        if self.b.len() < n {
            return Err(BodyError::Short {
                kind: self.kind,
                field,
            });
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn arr<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], BodyError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, BodyError> {
        Ok(self.arr::<1>(field)?[0])
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, BodyError> {
        Ok(u16::from_le_bytes(self.arr(field)?))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, BodyError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, BodyError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    fn bad(&self, field: &'static str, value: u64) -> BodyError {
        BodyError::BadValue {
            kind: self.kind,
            field,
            value,
        }
    }
    fn finish(self) -> Result<(), BodyError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(BodyError::Trailing {
                kind: self.kind,
                extra: self.b.len(),
            })
        }
    }
}

/// `enum ibv_qp_type` numbers on the wire: RC 2, UC 3, UD 4.
pub const fn qp_type_to_wire(t: QpType) -> u8 {
    match t {
        QpType::Rc => 2,
        QpType::Uc => 3,
        QpType::Ud => 4,
    }
}

/// The [`QpType`] of an `ibv_qp_type` number.
pub const fn qp_type_from_wire(v: u8) -> Option<QpType> {
    match v {
        2 => Some(QpType::Rc),
        3 => Some(QpType::Uc),
        4 => Some(QpType::Ud),
        _ => None,
    }
}

/// The [`QpState`] of an `ibv_qp_state` number.
pub const fn qp_state_from_wire(v: u8) -> Option<QpState> {
    Some(match v {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

/// Every bit [`AttrMask`] defines (`IBV_QP_STATE` through `IBV_QP_DEST_QPN`).
pub const ATTR_MASK_ALL: u32 = (1 << 21) - 1;

fn put_cap(p: &mut Put, c: &QpCap) {
    p.u32(c.max_send_wr)
        .u32(c.max_recv_wr)
        .u32(c.max_send_sge)
        .u32(c.max_recv_sge)
        .u32(c.max_inline_data);
}

fn get_cap(g: &mut Get<'_>) -> Result<QpCap, BodyError> {
    Ok(QpCap {
        max_send_wr: g.u32("max_send_wr")?,
        max_recv_wr: g.u32("max_recv_wr")?,
        max_send_sge: g.u32("max_send_sge")?,
        max_recv_sge: g.u32("max_recv_sge")?,
        max_inline_data: g.u32("max_inline_data")?,
    })
}

/// Bytes of a [`QpAttr`] in its fixed form.
pub const QP_ATTR_LEN: usize = 1 + 4 + 2 + 1 + 4 + 1 + 16 + 1 + 1 + 1 + 1 + 4 + 4 + 1 + 1 + 1 + 4;

fn put_attr(p: &mut Put, a: &QpAttr) {
    p.u8(a.qp_state as u8)
        .u32(a.qp_access_flags.bits())
        .u16(a.pkey_index)
        .u8(a.port_num)
        .u32(a.qkey);
    match a.ah_attr.map(|av| av.dest) {
        None => p.u8(0).bytes(&[0; 16]),
        Some(IpAddr::V4(v4)) => p.u8(4).bytes(&v4.octets()).bytes(&[0; 12]),
        Some(IpAddr::V6(v6)) => p.u8(6).bytes(&v6.octets()),
    };
    p.u8(a.path_mtu as u8)
        .u8(a.timeout)
        .u8(a.retry_cnt)
        .u8(a.rnr_retry)
        .u32(a.rq_psn)
        .u32(a.sq_psn)
        .u8(a.max_rd_atomic)
        .u8(a.max_dest_rd_atomic)
        .u8(a.min_rnr_timer)
        .u32(a.dest_qp_num);
}

fn get_attr(g: &mut Get<'_>) -> Result<QpAttr, BodyError> {
    let st = g.u8("qp_state")?;
    let qp_state = qp_state_from_wire(st).ok_or_else(|| g.bad("qp_state", st.into()))?;
    let acc = g.u32("qp_access_flags")?;
    let qp_access_flags =
        Access::from_bits(acc).ok_or_else(|| g.bad("qp_access_flags", acc.into()))?;
    let pkey_index = g.u16("pkey_index")?;
    let port_num = g.u8("port_num")?;
    let qkey = g.u32("qkey")?;
    let fam = g.u8("ah_family")?;
    let addr: [u8; 16] = g.arr("ah_addr")?;
    let ah_attr = match fam {
        0 if addr == [0; 16] => None,
        4 if addr[4..] == [0; 12] => Some(IpAddr::V4(Ipv4Addr::new(
            addr[0], addr[1], addr[2], addr[3],
        ))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(addr))),
        _ => return Err(g.bad("ah_family", fam.into())),
    }
    .map(|dest| AddressVector { dest });
    let m = g.u8("path_mtu")?;
    let path_mtu = Mtu::from_ibv(m).ok_or_else(|| g.bad("path_mtu", m.into()))?;
    let timeout = g.u8("timeout")?;
    let retry_cnt = g.u8("retry_cnt")?;
    let rnr_retry = g.u8("rnr_retry")?;
    let rq_psn = g.u32("rq_psn")?;
    let sq_psn = g.u32("sq_psn")?;
    let max_rd_atomic = g.u8("max_rd_atomic")?;
    let max_dest_rd_atomic = g.u8("max_dest_rd_atomic")?;
    let min_rnr_timer = g.u8("min_rnr_timer")?;
    let dest_qp_num = g.u32("dest_qp_num")?;
    Ok(QpAttr {
        qp_state,
        qp_access_flags,
        pkey_index,
        port_num,
        qkey,
        ah_attr,
        path_mtu,
        timeout,
        retry_cnt,
        rnr_retry,
        rq_psn,
        sq_psn,
        max_rd_atomic,
        max_dest_rd_atomic,
        min_rnr_timer,
        dest_qp_num,
    })
}

/// Most private-data bytes a `CmConnect` carries: a REQ's 92 less rdma_cm's 36-byte
/// address header.
pub const CM_PRIVATE_DATA_LEN: usize = 56;

fn put_addr(p: &mut Put, a: IpAddr) {
    match a {
        IpAddr::V4(v4) => p.u8(4).bytes(&v4.octets()).bytes(&[0; 12]),
        IpAddr::V6(v6) => p.u8(6).bytes(&v6.octets()),
    };
}

fn get_addr(g: &mut Get<'_>) -> Result<IpAddr, BodyError> {
    let fam = g.u8("family")?;
    let a: [u8; 16] = g.arr("addr")?;
    match fam {
        4 if a[4..] == [0; 12] => Ok(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
        _ => Err(g.bad("family", fam.into())),
    }
}

fn put_private(p: &mut Put, d: &[u8]) {
    let d = &d[..d.len().min(CM_PRIVATE_DATA_LEN)];
    p.u8(d.len() as u8).bytes(d);
}

fn get_private(g: &mut Get<'_>) -> Result<Vec<u8>, BodyError> {
    let n = g.u8("private_data_len")?;
    if usize::from(n) > CM_PRIVATE_DATA_LEN {
        return Err(g.bad("private_data_len", n.into()));
    }
    Ok(g.take(n.into(), "private_data")?.to_vec())
}

/// What happened to a CM connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEventKind {
    /// A REQ for a port the client listens on: accept or reject it.
    ConnectRequest = 1,
    /// The connection is up: the QP is in RTS.
    Established = 2,
    /// The peer rejected the connection (`reason`, IBTA table 112; 8: nobody listens).
    Rejected = 3,
    /// The peer never answered.
    Unreachable = 4,
    /// The connection ended (either side's DREQ); the QP is in ERROR.
    Disconnected = 5,
}

impl CmEventKind {
    fn from_wire(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::ConnectRequest,
            2 => Self::Established,
            3 => Self::Rejected,
            4 => Self::Unreachable,
            5 => Self::Disconnected,
            _ => return None,
        })
    }
}

/// One CM event (`CmPoll`'s answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    /// What happened.
    pub kind: CmEventKind,
    /// The connection's id.
    pub id: u32,
    /// The peer's address.
    pub peer: IpAddr,
    /// The listening port (a request), or 0.
    pub port: u16,
    /// The REJ reason (`Rejected`), or 0.
    pub reason: u16,
    /// The REQ's private data after rdma_cm's header (`ConnectRequest`), else empty.
    pub private_data: Vec<u8>,
}

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
    /// Receive the connection requests for an rdma_cm port (TCP port space).
    CmListen {
        /// The port.
        port: u16,
    },
    /// Connect the client's RC QP `qpn` (in INIT) to `addr`:`port`; answered with the
    /// connection's id at once, the outcome comes as a [`CmEvent`].
    CmConnect {
        /// The client's QP.
        qpn: u32,
        /// The listener's address.
        addr: IpAddr,
        /// Its rdma_cm port.
        port: u16,
        /// Private data for the listener, at most [`CM_PRIVATE_DATA_LEN`] bytes.
        private_data: Vec<u8>,
    },
    /// Accept the request `id` (a [`CmEventKind::ConnectRequest`]) with QP `qpn` (in INIT).
    CmAccept {
        /// The request's connection id.
        id: u32,
        /// The client's QP.
        qpn: u32,
    },
    /// Reject the request `id`.
    CmReject {
        /// The request's connection id.
        id: u32,
    },
    /// Disconnect `id` (DREQ); its QP goes to ERROR.
    CmDisconnect {
        /// The connection id.
        id: u32,
    },
    /// The next CM event of this client, if any.
    CmPoll,
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
            Self::CreateQp { .. } => kind::CREATE_QP,
            Self::ModifyQp { .. } => kind::MODIFY_QP,
            Self::QueryQp { .. } => kind::QUERY_QP,
            Self::DestroyQp { .. } => kind::DESTROY_QP,
            Self::Stat { .. } => kind::STAT,
            Self::CmListen { .. } => kind::CM_LISTEN,
            Self::CmConnect { .. } => kind::CM_CONNECT,
            Self::CmAccept { .. } => kind::CM_ACCEPT,
            Self::CmReject { .. } => kind::CM_REJECT,
            Self::CmDisconnect { .. } => kind::CM_DISCONNECT,
            Self::CmPoll => kind::CM_POLL,
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
            Self::QueryDevice | Self::AllocPd | Self::CreateCompChannel | Self::CmPoll => {}
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
            Self::CmListen { port } => {
                p.u16(*port);
            }
            Self::CmConnect {
                qpn,
                addr,
                port,
                private_data,
            } => {
                p.u32(*qpn);
                put_addr(&mut p, *addr);
                p.u16(*port);
                put_private(&mut p, private_data);
            }
            Self::CmAccept { id, qpn } => {
                p.u32(*id).u32(*qpn);
            }
            Self::CmReject { id } | Self::CmDisconnect { id } => {
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
            kind::REG_MR_SHARED => Self::RegMrShared {
                pd: g.u32("pd")?,
                iova: g.u64("iova")?,
                offset: g.u64("offset")?,
                len: g.u64("len")?,
                access: g.u32("access")?,
            },
            kind::REG_MR_PROCESS => Self::RegMrProcess {
                pd: g.u32("pd")?,
                addr: g.u64("addr")?,
                len: g.u64("len")?,
                access: g.u32("access")?,
            },
            kind::DEREG_MR => Self::DeregMr {
                lkey: g.u32("lkey")?,
            },
            kind::CREATE_COMP_CHANNEL => Self::CreateCompChannel,
            kind::CREATE_CQ => Self::CreateCq {
                cqe: g.u32("cqe")?,
                channel: g.u32("channel")?,
            },
            kind::DESTROY_CQ => Self::DestroyCq { cq: g.u32("cq")? },
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
            kind::STAT => Self::Stat {
                qpn: g.u32("qpn")?,
                cursor: g.u32("cursor")?,
            },
            kind::CM_LISTEN => Self::CmListen {
                port: g.u16("port")?,
            },
            kind::CM_CONNECT => Self::CmConnect {
                qpn: g.u32("qpn")?,
                addr: get_addr(&mut g)?,
                port: g.u16("port")?,
                private_data: get_private(&mut g)?,
            },
            kind::CM_ACCEPT => Self::CmAccept {
                id: g.u32("id")?,
                qpn: g.u32("qpn")?,
            },
            kind::CM_REJECT => Self::CmReject { id: g.u32("id")? },
            kind::CM_DISCONNECT => Self::CmDisconnect { id: g.u32("id")? },
            kind::CM_POLL => Self::CmPoll,
            k => return Err(BodyError::Kind(k)),
        };
        g.finish()?;
        Ok(r)
    }
}

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

/// Named counters. Names travel with the values, so a daemon may add counters without
/// a new ABI version; a client shows what it gets.
pub type Counters = Vec<(String, u64)>;

/// One group of device counters: `engine` (rxe's hw_counters names), `daemon`,
/// `backend`, `inject`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatGroup {
    /// The group's name.
    pub name: String,
    /// Its counters.
    pub counters: Counters,
}

/// One QP's state and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpStat {
    /// QP number.
    pub qpn: u32,
    /// Transport.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// PSNs, queue depths, retries left, ... by name.
    pub counters: Counters,
}

/// `Stat`'s response: the device's counter groups and one page of QPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Device-wide groups.
    pub groups: Vec<StatGroup>,
    /// QPs in ascending QPN order.
    pub qps: Vec<QpStat>,
    /// The cursor of the next page; 0 when this is the last.
    pub next: u32,
}

/// Bytes a `Stat` response body may take (a frame's body limit).
pub const STAT_BUDGET: usize = MAX_FRAME as usize - 12;

fn put_name(p: &mut Put, name: &str) {
    let b = &name.as_bytes()[..name.len().min(u8::MAX as usize)];
    p.u8(b.len() as u8).bytes(b);
}

fn get_name(g: &mut Get<'_>, field: &'static str) -> Result<String, BodyError> {
    let n = g.u8(field)?;
    let b = g.take(n.into(), field)?;
    core::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| BodyError::Utf8)
}

fn put_counters(p: &mut Put, c: &Counters) {
    let n = c.len().min(u16::MAX as usize);
    p.u16(n as u16);
    for (name, v) in &c[..n] {
        put_name(p, name);
        p.u64(*v);
    }
}

fn get_counters(g: &mut Get<'_>) -> Result<Counters, BodyError> {
    let n = g.u16("counter_count")?;
    // Each counter takes at least 9 bytes: no allocation beyond what the body holds.
    let mut c = Vec::with_capacity(usize::from(n).min(g.b.len() / 9));
    for _ in 0..n {
        let name = get_name(g, "counter_name")?;
        c.push((name, g.u64("counter_value")?));
    }
    Ok(c)
}

impl QpStat {
    fn put(&self, p: &mut Put) {
        p.u32(self.qpn)
            .u8(qp_type_to_wire(self.qp_type))
            .u8(self.state as u8);
        put_counters(p, &self.counters);
    }

    /// Bytes this QP adds to a `Stat` body.
    pub fn encoded_len(&self) -> usize {
        let mut p = Put::default();
        self.put(&mut p);
        p.0.len()
    }
}

impl Stats {
    fn put(&self, p: &mut Put) {
        let groups = self.groups.len().min(u8::MAX as usize);
        p.u8(groups as u8);
        for g in &self.groups[..groups] {
            put_name(p, &g.name);
            put_counters(p, &g.counters);
        }
        let qps = self.qps.len().min(u16::MAX as usize);
        p.u16(qps as u16);
        for q in &self.qps[..qps] {
            q.put(p);
        }
        p.u32(self.next);
    }

    fn get(g: &mut Get<'_>) -> Result<Self, BodyError> {
        let ng = g.u8("group_count")?;
        let mut groups = Vec::with_capacity(ng.into());
        for _ in 0..ng {
            groups.push(StatGroup {
                name: get_name(g, "group_name")?,
                counters: get_counters(g)?,
            });
        }
        let nq = g.u16("qp_count")?;
        let mut qps = Vec::with_capacity(usize::from(nq).min(g.b.len() / 8));
        for _ in 0..nq {
            let qpn = g.u32("qpn")?;
            let t = g.u8("qp_type")?;
            let qp_type = qp_type_from_wire(t).ok_or_else(|| g.bad("qp_type", t.into()))?;
            let s = g.u8("qp_state")?;
            let state = qp_state_from_wire(s).ok_or_else(|| g.bad("qp_state", s.into()))?;
            qps.push(QpStat {
                qpn,
                qp_type,
                state,
                counters: get_counters(g)?,
            });
        }
        Ok(Self {
            groups,
            qps,
            next: g.u32("next")?,
        })
    }

    /// Bytes of the body without QPs; each QP adds [`QpStat::encoded_len`].
    pub fn encoded_len(&self) -> usize {
        let mut p = Put::default();
        self.put(&mut p);
        p.0.len()
    }

    /// The counter `name` of group `group`.
    pub fn get_counter(&self, group: &str, name: &str) -> Option<u64> {
        self.groups
            .iter()
            .find(|g| g.name == group)?
            .counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
    }
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
        kind::CREATE_COMP_CHANNEL | kind::CREATE_CQ => 1,
        kind::CREATE_QP => 2,
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
            Self::CreateQp(_) => kind::CREATE_QP,
            Self::QueryQp { .. } => kind::QUERY_QP,
            Self::Stat(_) => kind::STAT,
            Self::CmConnect { .. } => kind::CM_CONNECT,
            Self::CmPoll(_) => kind::CM_POLL,
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
                put_private(&mut p, &e.private_data);
            }
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
            kind::HELLO => Self::Hello {
                abi_version: g.u32("abi_version")?,
                daemon_pid: g.u32("daemon_pid")?,
            },
            kind::QUERY_DEVICE => Self::QueryDevice(DeviceAttr {
                max_qp: g.u32("max_qp")?,
                max_qp_wr: g.u32("max_qp_wr")?,
                max_sge: g.u32("max_sge")?,
                max_cq: g.u32("max_cq")?,
                max_cqe: g.u32("max_cqe")?,
                max_mr: g.u32("max_mr")?,
                max_pd: g.u32("max_pd")?,
                max_qp_rd_atom: g.u32("max_qp_rd_atom")?,
                max_inline: g.u32("max_inline")?,
                gid: g.arr("gid")?,
                mtu: g.u8("mtu")?,
                port_state: g.u8("port_state")?,
            }),
            kind::ALLOC_PD => Self::AllocPd { pd: g.u32("pd")? },
            k @ (kind::REG_MR_SHARED | kind::REG_MR_PROCESS) => Self::RegMr {
                kind: k,
                lkey: g.u32("lkey")?,
                rkey: g.u32("rkey")?,
            },
            kind::CREATE_COMP_CHANNEL => Self::CreateCompChannel {
                channel: g.u32("channel")?,
            },
            kind::CREATE_CQ => Self::CreateCq {
                cq: g.u32("cq")?,
                slots: g.u32("slots")?,
                ring_offset: g.u64("ring_offset")?,
            },
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
                    private_data: get_private(&mut g)?,
                })),
            },
            k @ (kind::DEALLOC_PD
            | kind::DEREG_MR
            | kind::DESTROY_CQ
            | kind::MODIFY_QP
            | kind::DESTROY_QP
            | kind::CM_LISTEN
            | kind::CM_ACCEPT
            | kind::CM_REJECT
            | kind::CM_DISCONNECT) => Self::Done(k),
            _ => return Err(BodyError::Kind(kind)),
        };
        g.finish()?;
        Ok(r)
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;

    fn attr() -> QpAttr {
        QpAttr {
            qp_state: QpState::Rtr,
            qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_READ,
            pkey_index: 0,
            port_num: 1,
            qkey: 0x1111_1111,
            ah_attr: Some(AddressVector {
                dest: IpAddr::from([198, 18, 0, 2]),
            }),
            path_mtu: Mtu::M4096,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
            rq_psn: 0xabcdef,
            sq_psn: 0x123456,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 8,
            min_rnr_timer: 12,
            dest_qp_num: 0x00fe_dcba,
        }
    }

    fn requests() -> Vec<Request> {
        let cap = QpCap::default();
        vec![
            Request::Hello { abi_version: 1 },
            Request::QueryDevice,
            Request::AllocPd,
            Request::DeallocPd { pd: 3 },
            Request::RegMrShared {
                pd: 1,
                iova: 0x7000_0000,
                offset: 4096,
                len: 1 << 20,
                access: 7,
            },
            Request::RegMrProcess {
                pd: 1,
                addr: 0xdead_0000,
                len: 64,
                access: 1,
            },
            Request::DeregMr { lkey: 0x1234 },
            Request::CreateCompChannel,
            Request::CreateCq {
                cqe: 256,
                channel: 2,
            },
            Request::DestroyCq { cq: 9 },
            Request::CreateQp {
                pd: 1,
                qp_type: QpType::Ud,
                send_cq: 1,
                recv_cq: 2,
                cap,
            },
            Request::ModifyQp {
                qpn: 0x11,
                mask: AttrMask::STATE | AttrMask::AV,
                attr: attr(),
            },
            Request::ModifyQp {
                qpn: 0x11,
                mask: AttrMask::STATE,
                attr: QpAttr {
                    ah_attr: Some(AddressVector {
                        dest: "fd00::1".parse().unwrap(),
                    }),
                    ..QpAttr::default()
                },
            },
            Request::QueryQp { qpn: 0x22 },
            Request::DestroyQp { qpn: 0x33 },
            Request::Stat { qpn: 0, cursor: 0 },
            Request::Stat {
                qpn: 0x44,
                cursor: 7,
            },
            Request::CmListen { port: 7471 },
            Request::CmConnect {
                qpn: 0x12,
                addr: IpAddr::from([198, 18, 0, 2]),
                port: 7471,
                private_data: vec![1, 2, 3],
            },
            Request::CmConnect {
                qpn: 0x12,
                addr: "fd00::2".parse().unwrap(),
                port: 1,
                private_data: vec![0xa5; CM_PRIVATE_DATA_LEN],
            },
            Request::CmAccept { id: 5, qpn: 0x13 },
            Request::CmReject { id: 6 },
            Request::CmDisconnect { id: 7 },
            Request::CmPoll,
        ]
    }

    fn stats() -> Stats {
        Stats {
            groups: vec![
                StatGroup {
                    name: "engine".into(),
                    counters: vec![("sent_pkts".into(), 12), ("rcvd_pkts".into(), u64::MAX)],
                },
                StatGroup {
                    name: "daemon".into(),
                    counters: vec![],
                },
            ],
            qps: vec![QpStat {
                qpn: 0x12_3456,
                qp_type: QpType::Rc,
                state: QpState::Rts,
                counters: vec![("sq_psn".into(), 99)],
            }],
            next: 0x12_3457,
        }
    }

    #[test]
    fn stat_lengths_and_lookup() {
        let s = stats();
        let without = Stats {
            qps: vec![],
            ..s.clone()
        };
        assert_eq!(
            s.encoded_len(),
            without.encoded_len() + s.qps[0].encoded_len()
        );
        assert_eq!(s.encoded_len(), Response::Stat(s.clone()).encode().len());
        assert_eq!(s.get_counter("engine", "rcvd_pkts"), Some(u64::MAX));
        assert_eq!(s.get_counter("daemon", "rcvd_pkts"), None);
        let mut b = Response::Stat(s).encode();
        // The QP's state byte: after the groups, the QP count, the QPN and the type.
        let at = without.encoded_len() - 6 + 2 + 4 + 1;
        b[at] = 9;
        assert!(matches!(
            Response::decode(kind::STAT | kind::RESPONSE, &b),
            Err(BodyError::BadValue {
                field: "qp_state",
                ..
            })
        ));
        // A counter count far beyond the body is refused without allocating for it.
        let huge = [1, 1, b'e', 0xff, 0xff];
        assert!(Response::decode(kind::STAT | kind::RESPONSE, &huge).is_err());
    }

    fn responses() -> Vec<Response> {
        vec![
            Response::Hello {
                abi_version: 1,
                daemon_pid: 42,
            },
            Response::QueryDevice(DeviceAttr {
                max_qp: 1,
                max_qp_wr: 2,
                max_sge: 3,
                max_cq: 4,
                max_cqe: 5,
                max_mr: 6,
                max_pd: 7,
                max_qp_rd_atom: 8,
                max_inline: 9,
                gid: [7; 16],
                mtu: 5,
                port_state: 4,
            }),
            Response::AllocPd { pd: 5 },
            Response::RegMr {
                kind: kind::REG_MR_SHARED,
                lkey: 1,
                rkey: 2,
            },
            Response::RegMr {
                kind: kind::REG_MR_PROCESS,
                lkey: 3,
                rkey: 4,
            },
            Response::CreateCompChannel { channel: 1 },
            Response::CreateCq {
                cq: 1,
                slots: 256,
                ring_offset: 4096,
            },
            Response::CreateQp(QpCreated {
                qpn: 0x99,
                cap: QpCap::default(),
                sq_offset: 4096,
                sq_slots: 256,
                sq_slot_size: 256,
                rq_offset: 8192,
                rq_slots: 256,
                rq_slot_size: 128,
            }),
            Response::QueryQp {
                attr: attr(),
                cap: QpCap::default(),
            },
            Response::Stat(stats()),
            Response::Stat(Stats::default()),
            Response::Done(kind::DESTROY_QP),
            Response::Done(kind::MODIFY_QP),
            Response::Done(kind::CM_LISTEN),
            Response::CmConnect { id: 9 },
            Response::CmPoll(None),
            Response::CmPoll(Some(CmEvent {
                kind: CmEventKind::ConnectRequest,
                id: 3,
                peer: IpAddr::from([198, 18, 0, 1]),
                port: 7471,
                reason: 0,
                private_data: vec![7; 40],
            })),
            Response::CmPoll(Some(CmEvent {
                kind: CmEventKind::Rejected,
                id: 4,
                peer: "fd00::1".parse().unwrap(),
                port: 0,
                reason: 8,
                private_data: vec![],
            })),
            Response::error(22, "bad attribute: path_mtu – ü"),
        ]
    }

    #[test]
    fn requests_round_trip() {
        for r in requests() {
            let b = r.encode();
            assert_eq!(Request::decode(r.kind(), &b), Ok(r.clone()), "{r:?}");
            // Framed and back.
            let f = encode_frame(r.kind(), 9, &b).unwrap();
            let h = decode_header(&f).unwrap();
            assert_eq!(h.body_len, b.len());
            assert_eq!(Request::decode(h.kind, &f[HEADER_LEN..]), Ok(r));
        }
    }

    #[test]
    fn responses_round_trip() {
        for r in responses() {
            let b = r.encode();
            assert_eq!(Response::decode(r.kind(), &b), Ok(r.clone()), "{r:?}");
        }
        assert_eq!(response_fds(kind::CREATE_QP | kind::RESPONSE), 2);
        assert_eq!(response_fds(kind::CREATE_CQ | kind::RESPONSE), 1);
        assert_eq!(Request::fds(kind::REG_MR_SHARED), 1);
        assert_eq!(Request::fds(kind::HELLO), 0);
    }

    #[test]
    fn truncated_and_padded_bodies_are_refused() {
        for r in requests() {
            let b = r.encode();
            for n in 0..b.len() {
                assert!(
                    matches!(
                        Request::decode(r.kind(), &b[..n]),
                        Err(BodyError::Short { .. })
                    ),
                    "{r:?} cut at {n}"
                );
            }
            let mut long = b.clone();
            long.push(0);
            assert!(matches!(
                Request::decode(r.kind(), &long),
                Err(BodyError::Trailing { extra: 1, .. })
            ));
        }
        for r in responses() {
            let b = r.encode();
            for n in 0..b.len() {
                assert!(
                    Response::decode(r.kind(), &b[..n]).is_err(),
                    "{r:?} cut at {n}"
                );
            }
        }
    }

    #[test]
    fn bad_values_are_refused() {
        let mut b = Request::CreateQp {
            pd: 1,
            qp_type: QpType::Rc,
            send_cq: 1,
            recv_cq: 1,
            cap: QpCap::default(),
        }
        .encode();
        b[4] = 9;
        assert!(matches!(
            Request::decode(kind::CREATE_QP, &b),
            Err(BodyError::BadValue {
                field: "qp_type",
                ..
            })
        ));
        let good = Request::ModifyQp {
            qpn: 1,
            mask: AttrMask::STATE,
            attr: attr(),
        }
        .encode();
        let mut b = good.clone();
        b[4..8].copy_from_slice(&(1u32 << 25).to_le_bytes());
        assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
        let mut b = good.clone();
        b[8] = 7; // qp_state
        assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
        let mut b = good.clone();
        b[8 + 12] = 5; // ah family
        assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
        let mut b = good.clone();
        b[8 + 13 + 16] = 0; // path_mtu
        assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
        let mut b = good;
        b[8 + 13 + 15] = 1; // nonzero padding after an IPv4 address
        assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
        assert_eq!(Request::decode(0x8001, &[]), Err(BodyError::Kind(0x8001)));
        assert_eq!(Response::decode(kind::HELLO, &[]), Err(BodyError::Kind(1)));
        let mut e = Response::error(1, "x").encode();
        e[6] = 0xff;
        assert_eq!(Response::decode(kind::ERROR, &e), Err(BodyError::Utf8));
    }

    #[test]
    fn random_bodies_never_panic() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..20_000 {
            let k = rng.u16(0..16);
            let n = rng.usize(0..80);
            let b: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            let _ = Request::decode(k, &b);
            let _ = Response::decode(k | kind::RESPONSE, &b);
            let _ = Response::decode(kind::ERROR, &b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let f = encode_frame(kind::CREATE_QP, 7, &[1, 2, 3]).unwrap();
        assert_eq!(
            decode_header(&f).unwrap(),
            FrameHeader {
                kind: kind::CREATE_QP,
                seq: 7,
                body_len: 3
            }
        );
        assert_eq!(&f[HEADER_LEN..], &[1, 2, 3]);
        let r = encode_frame(kind::CREATE_QP | kind::RESPONSE, 7, &[]).unwrap();
        assert_eq!(decode_header(&r).unwrap().body_len, 0);
    }

    #[test]
    fn hostile_headers_are_refused() {
        let good = encode_frame(kind::HELLO, 1, &[0; 4]).unwrap();
        assert_eq!(decode_header(&good[..10]), Err(FrameError::Short(10)));
        let mut b = good.clone();
        b[..4].copy_from_slice(&11u32.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Length(11)));
        b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Length(u32::MAX)));
        let mut b = good.clone();
        b[4..6].copy_from_slice(&99u16.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Kind(99)));
        let mut b = good;
        b[6] = 1;
        assert_eq!(decode_header(&b), Err(FrameError::Flags(1)));
        assert_eq!(encode_frame(0, 0, &[]), Err(FrameError::Kind(0)));
        assert!(encode_frame(kind::HELLO, 0, &vec![0; MAX_FRAME as usize]).is_err());
    }
}
