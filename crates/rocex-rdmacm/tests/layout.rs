//! The library's `#[repr(C)]` structs have rdma-core's layout: a C program compiled
//! against the system's `<rdma/rdma_cma.h>` (Debian's librdmacm-dev, which brings
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>`) prints the size of every struct the
//! library allocates or fills and the offset of every field it touches, and each must
//! equal the Rust layout. `ibv_srq_init_attr_ex`, of which the library reads only the
//! head, is checked field by field. The verbs structs it shares with rocex's libibverbs
//! (rocex-ibverbs-abi) are checked by rocex-ibverbs' layout test.
//!
//! Needs `cc` and the header: without them the test prints `SKIPPED:`, or fails when
//! `CI` is set.

mod common;

use rdmacm::abi::*;
use rocex_testkit::layout::{self, Row};

fn rows() -> Vec<Row> {
    rocex_testkit::layout_rows! {
        rdma_event_channel { fd }
        rdma_ib_addr { sgid, dgid, pkey }
        rdma_addr { src => "src_addr", dst => "dst_addr", ibaddr => "addr.ibaddr" }
        rdma_route { addr, path_rec, num_paths }
        rdma_cm_id {
            verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel,
            send_cq, recv_cq_channel, recv_cq, srq, pd, qp_type,
        }
        rdma_conn_param {
            private_data, private_data_len, responder_resources, initiator_depth,
            flow_control, retry_count, rnr_retry_count, srq, qp_num,
        }
        rdma_ud_param { private_data, private_data_len, ah_attr, qp_num, qkey }
        rdma_cm_event { id, listen_id, event, status, param }
        rdma_addrinfo {
            ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len,
            ai_src_addr, ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len,
            ai_route, ai_connect_len, ai_connect, ai_next,
        }
        rdma_cm_join_mc_attr_ex { comp_mask, join_flags, addr }
        ibv_srq_init_attr_ex .. head { srq_context, attr, comp_mask, srq_type, pd, xrcd, cq }
        ibv_sa_path_rec {
            dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class,
            reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate,
            packet_life_time_selector, packet_life_time, preference,
        }
    }
}

#[test]
fn structs_have_rdma_cores_layout() {
    if !std::path::Path::new("/usr/include/rdma/rdma_cma.h").exists() {
        rocex_testkit::cannot_run(
            "structs_have_rdma_cores_layout",
            "<rdma/rdma_cma.h> (Debian: librdmacm-dev)",
        );
        return;
    }
    let rows = rows();
    let Some(c) = common::c_layout("rdmacm_layout", "rdma/rdma_cma.h", &rows) else {
        return;
    };
    let wrong = layout::differences(&rows, &c);
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
}
