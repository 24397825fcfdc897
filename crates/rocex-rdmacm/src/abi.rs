//! rdma-core's public structs as `<rdma/rdma_cma.h>` lays them out, and the few of
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>` that rocex's libibverbs does not
//! declare. The layout test (`tests/layout.rs`) checks every size and offset against the
//! system headers. The verbs structs both libraries use are rocex-ibverbs-abi's, whose
//! layout rocex-ibverbs' layout test checks.

#![allow(non_camel_case_types, missing_docs)]

use core::ffi::{c_int, c_uint, c_void};

use libc::{sockaddr, sockaddr_storage, socklen_t};

pub use rocex_ibverbs_abi::{
    ROCEX_CM_PRIVATE_DATA_LEN, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_device,
    ibv_gid, ibv_global_route, ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap,
    ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq, ibv_srq_attr, ibv_srq_init_attr,
    rocex_cm_event, verbs_context,
};

/// A verbs object rocex's libibverbs does not have, which this library only passes along.
macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _p: [u8; 0],
        }
    )*};
}
opaque!(ibv_xrcd, ibv_ece);

/// The head of `struct ibv_srq_init_attr_ex`: what `rdma_create_srq_ex` reads.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
}

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`): the path `rdma_resolve_route` gives.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    pub pkey: u16,
}

/// `struct rdma_addr`: the source and destination sockaddr unions and the GIDs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src: sockaddr_storage,
    pub dst: sockaddr_storage,
    pub ibaddr: rdma_ib_addr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    pub ps: u32,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    pub qp_type: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: u32,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut libc::c_char,
    pub ai_dst_canonname: *mut libc::c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut Self,
}

#[repr(C)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

/// `enum rdma_cm_event_type`.
pub mod event {
    pub const ADDR_RESOLVED: u32 = 0;
    pub const ADDR_ERROR: u32 = 1;
    pub const ROUTE_RESOLVED: u32 = 2;
    pub const ROUTE_ERROR: u32 = 3;
    pub const CONNECT_REQUEST: u32 = 4;
    pub const CONNECT_RESPONSE: u32 = 5;
    pub const CONNECT_ERROR: u32 = 6;
    pub const UNREACHABLE: u32 = 7;
    pub const REJECTED: u32 = 8;
    pub const ESTABLISHED: u32 = 9;
    pub const DISCONNECTED: u32 = 10;
    pub const DEVICE_REMOVAL: u32 = 11;
    pub const MULTICAST_JOIN: u32 = 12;
    pub const MULTICAST_ERROR: u32 = 13;
    pub const ADDR_CHANGE: u32 = 14;
    pub const TIMEWAIT_EXIT: u32 = 15;
}

/// `enum rdma_port_space`.
pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;
pub const RDMA_PS_IB: u32 = 0x013f;
/// The Q_Key of rdma_cm's UD QPs.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

pub const RAI_PASSIVE: c_int = 1;
pub const RAI_NUMERICHOST: c_int = 2;

pub const RDMA_OPTION_ID: c_int = 0;
pub const RDMA_OPTION_IB: c_int = 1;
pub const RDMA_OPTION_ID_TOS: c_int = 0;
pub const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
pub const RDMA_OPTION_ID_AFONLY: c_int = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;
pub const RDMA_OPTION_IB_PATH: c_int = 1;

pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UD: c_int = 4;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;
pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_ACCESS_LOCAL_WRITE: c_uint = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_uint = 2;
pub const IBV_ACCESS_REMOTE_READ: c_uint = 4;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_uint = 8;
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_SRQT_BASIC: u32 = 0;
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 2;
