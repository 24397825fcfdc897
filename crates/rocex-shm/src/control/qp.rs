//! QP fields shared by requests and responses: `ibv_qp_type` and `ibv_qp_state` numbers,
//! [`QpCap`] and [`QpAttr`] in their fixed forms.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[cfg(doc)]
use rocex_verbs_types::AttrMask;
use rocex_verbs_types::{Access, AddressVector, Mtu, QpAttr, QpCap, QpState, QpType};

use super::codec::{BodyError, Get, Put, read_fields};

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

pub(super) fn put_cap(p: &mut Put, c: &QpCap) {
    p.u32(c.max_send_wr)
        .u32(c.max_recv_wr)
        .u32(c.max_send_sge)
        .u32(c.max_recv_sge)
        .u32(c.max_inline_data);
}

pub(super) fn get_cap(g: &mut Get<'_>) -> Result<QpCap, BodyError> {
    Ok(read_fields!(
        g,
        QpCap {
            max_send_wr: u32,
            max_recv_wr: u32,
            max_send_sge: u32,
            max_recv_sge: u32,
            max_inline_data: u32,
        }
    ))
}

/// Bytes of a [`QpAttr`] in its fixed form.
pub const QP_ATTR_LEN: usize =
    1 + 4 + 2 + 1 + 4 + 1 + 16 + 1 + 1 + 1 + 1 + 1 + 4 + 4 + 1 + 1 + 1 + 4;

pub(super) fn put_attr(p: &mut Put, a: &QpAttr) {
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
    p.u8(a.traffic_class)
        .u8(a.path_mtu as u8)
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

pub(super) fn get_attr(g: &mut Get<'_>) -> Result<QpAttr, BodyError> {
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
    let traffic_class = g.u8("ah_traffic_class")?;
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
        traffic_class,
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
