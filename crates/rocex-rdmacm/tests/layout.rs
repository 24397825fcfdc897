//! The library's `#[repr(C)]` structs have rdma-core's layout: a C program compiled
//! against the system's `<rdma/rdma_cma.h>` (Debian's librdmacm-dev, which brings
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>`) prints the size of every struct the
//! library allocates or fills and the offset of every field it touches, and each must
//! equal the Rust layout. Structs the library only reads the head of (`ibv_qp`,
//! `ibv_port_attr`, `ibv_srq_init_attr_ex`) are checked field by field, and a buffer
//! standing for one must be no smaller than it.
//!
//! Needs `cc` and the header: without them the test prints `SKIPPED:`, or fails when
//! `CI` is set.

mod common;

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use rdmacm::abi::*;

/// `(C designator, C expression, Rust value)` rows: a struct's size under its name
/// (unless it is only a head, marked `..`), then each field as `struct.field` (C member
/// designators may differ: `src => "src_addr"`).
macro_rules! layout {
    ($($t:ident $(.. $head:tt)? { $($f:ident $(=> $c:literal)?),* $(,)? })*) => {{
        let mut v: Vec<(String, String, usize)> = Vec::new();
        $(
            layout!(@size v $t $($head)?);
            $(
                let c = layout!(@c $f $($c)?);
                v.push((
                    format!("{}.{}", stringify!($t), c),
                    format!("offsetof(struct {}, {})", stringify!($t), c),
                    offset_of!($t, $f),
                ));
            )*
        )*
        v
    }};
    (@size $v:ident $t:ident) => {
        $v.push((stringify!($t).into(), format!("sizeof(struct {})", stringify!($t)), size_of::<$t>()));
    };
    (@size $v:ident $t:ident $head:tt) => {};
    (@c $f:ident) => { stringify!($f) };
    (@c $f:ident $c:literal) => { $c };
}

fn rows() -> Vec<(String, String, usize)> {
    let mut v = layout! {
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
        ibv_pd { context, handle }
        ibv_qp .. head { context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_rx_hash_conf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }
        ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
            create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn,
            send_ops_flags,
        }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn,
            dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index,
            alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
            max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit,
        }
        ibv_port_attr .. head { state, max_mtu, active_mtu }
        ibv_srq_attr { max_wr, max_sge, srq_limit }
        ibv_srq_init_attr { srq_context, attr }
        ibv_srq_init_attr_ex .. head { srq_context, attr, comp_mask, srq_type, pd, xrcd, cq }
        ibv_sa_path_rec {
            dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class,
            reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate,
            packet_life_time_selector, packet_life_time, preference,
        }
    };
    v.extend([
        ("ibv_gid".into(), "sizeof(union ibv_gid)".into(), size_of::<ibv_gid>()),
        ("ibv_gid align".into(), "_Alignof(union ibv_gid)".into(), align_of::<ibv_gid>()),
        (
            "verbs_context.create_qp_ex before context".into(),
            "offsetof(struct verbs_context, context) - offsetof(struct verbs_context, create_qp_ex)"
                .into(),
            CREATE_QP_EX_BEFORE_CONTEXT,
        ),
    ]);
    v
}

/// The C side: the same rows, printed by a program built against the system headers.
fn c_layout(rows: &[(String, String, usize)]) -> Option<BTreeMap<String, usize>> {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <rdma/rdma_cma.h>\n\
         int main(void) {\n",
    );
    for (name, expr, _) in rows {
        src.push_str(&format!(
            "  printf(\"%s=%zu\\n\", \"{name}\", (size_t)({expr}));\n"
        ));
    }
    src.push_str(
        "  printf(\"ibv_port_attr=%zu\\n\", sizeof(struct ibv_port_attr));\n  return 0;\n}\n",
    );
    let prog = common::build_c("rdmacm_layout", &src, &[])?;
    let out = Command::new(&prog.exe).output().unwrap();
    assert!(out.status.success());
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (k, v) = l.rsplit_once('=').unwrap();
                (k.to_owned(), v.parse().unwrap())
            })
            .collect(),
    )
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
    let Some(c) = c_layout(&rows) else { return };
    assert_eq!(c.len(), rows.len() + 1, "the C program printed every row");
    let wrong: Vec<String> = rows
        .iter()
        .filter(|(name, _, rust)| c[name] != *rust)
        .map(|(name, _, rust)| format!("{name}: C {} Rust {rust}", c[name]))
        .collect();
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    assert!(
        size_of::<ibv_port_attr>() >= c["ibv_port_attr"],
        "ibv_port_attr: C {} bytes, Rust buffer {}",
        c["ibv_port_attr"],
        size_of::<ibv_port_attr>()
    );
}
