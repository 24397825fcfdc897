//! The library's `#[repr(C)]` structs have rdma-core's layout: a C program compiled
//! against the system's `<infiniband/verbs.h>` (Debian's libibverbs-dev) prints the size
//! of every struct the library allocates or fills and the offset of every field it
//! touches, and each must equal the Rust layout.
//!
//! Needs `cc` and the header: without them the test prints `SKIPPED:`, or fails when
//! `CI` is set.

mod common;

use std::mem::{align_of, offset_of, size_of};

use ibverbs::abi::*;
use rocex_testkit::layout::{self, Row};

fn rows() -> Vec<Row> {
    let wr = offset_of!(ibv_send_wr, wr);
    let union = [
        ("wr.rdma.remote_addr", wr),
        ("wr.rdma.rkey", wr + 8),
        (
            "wr.atomic.remote_addr",
            wr + offset_of!(ibv_send_wr_atomic, remote_addr),
        ),
        (
            "wr.atomic.compare_add",
            wr + offset_of!(ibv_send_wr_atomic, compare_add),
        ),
        ("wr.atomic.swap", wr + offset_of!(ibv_send_wr_atomic, swap)),
        ("wr.atomic.rkey", wr + offset_of!(ibv_send_wr_atomic, rkey)),
        ("wr.ud.ah", wr),
        ("wr.ud.remote_qpn", wr + 8),
        ("wr.ud.remote_qkey", wr + 12),
    ];
    let mut v: Vec<Row> = union
        .into_iter()
        .map(|(f, off)| {
            Row::new(
                format!("ibv_send_wr.{f}"),
                format!("offsetof(struct ibv_send_wr, {f})"),
                off,
            )
        })
        .collect();
    v.extend([
        Row::new("ibv_gid", "sizeof(union ibv_gid)", size_of::<ibv_gid>()),
        Row::new(
            "ibv_gid align",
            "_Alignof(union ibv_gid)",
            align_of::<ibv_gid>(),
        ),
    ]);
    v.extend(rocex_testkit::layout_rows! {
        ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        ibv_device { node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
            vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd,
            max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
            max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw,
            max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
            max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
            max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }
        ibv_odp_caps {
            general_caps,
            rc_odp_caps => "per_transport_caps.rc_odp_caps",
            uc_odp_caps => "per_transport_caps.uc_odp_caps",
            ud_odp_caps => "per_transport_caps.ud_odp_caps",
        }
        ibv_device_attr_ex {
            orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock,
            device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps,
            raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size, pci_atomic_caps, xrc_odp_caps,
            phys_port_cnt_ex,
        }
        ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz,
            bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl,
            subnet_timeout, init_type_reply, active_width, active_speed, phys_state,
            link_layer, flags, port_cap_flags2,
        }
        ibv_async_event { element, event_type }
        ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
            pkey_index, slid, sl, dlid_path_bits,
        }
        ibv_pd { context, handle }
        ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        ibv_mw { context, pd, rkey, handle, type_ => "type" }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_grh { version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_srq_attr { max_wr, max_sge, srq_limit }
        ibv_srq_init_attr { srq_context, attr }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
            create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn,
            send_ops_flags,
        }
        ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn,
            dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index,
            alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
            max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit,
        }
        ibv_sge { addr, length, lkey }
        ibv_data_buf { addr, length }
        ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type,
            bind_mw,
        }
        ibv_recv_wr { wr_id, next, sg_list, num_sge }
        ibv_mw_bind { wr_id, send_flags, bind_info }
        ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
            mutex, cond, events_completed,
        }
        ibv_qp_ex {
            qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add,
            wr_bind_mw, wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send,
            wr_send_imm, wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn,
            wr_set_inline_data, wr_set_inline_data_list, wr_set_sge, wr_set_sge_list,
            wr_start, wr_complete, wr_abort, wr_atomic_write,
        }
        ibv_comp_channel { context, fd, refcnt }
        ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed,
        }
        ibv_cq_ex {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed, comp_mask, status, wr_id, start_poll, next_poll,
            end_poll, read_opcode, read_vendor_err, read_byte_len, read_imm_data,
            read_qp_num, read_src_qp, read_wc_flags, read_slid, read_sl, read_dlid_path_bits,
            read_completion_ts, read_cvlan, read_flow_tag, read_tm_info,
            read_completion_wallclock_ns,
        }
        ibv_cq_init_attr_ex {
            cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain,
        }
        ibv_ah { context, pd, handle }
        ibv_context_ops {
            alloc_mw, bind_mw, dealloc_mw, poll_cq, req_notify_cq, post_srq_recv, post_send,
            post_recv,
        }
        ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        verbs_context {
            query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
            create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm,
            modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
            modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
            post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
            create_wq, query_rt_values, create_cq_ex, priv_ => "priv", query_device_ex,
            ibv_destroy_flow, ibv_create_flow, open_qp, create_qp_ex, get_srq_num,
            create_srq_ex, open_xrcd, close_xrcd, sz, context,
        }
    });
    v
}

#[test]
fn every_struct_and_field_has_rdma_cores_layout() {
    let rows = rows();
    let Some(c) = common::c_layout("layout", "infiniband/verbs.h", &rows) else {
        return;
    };
    let wrong = layout::differences(&rows, &c);
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    assert!(rows.len() > 300, "{} rows checked", rows.len());
}

/// The atomic variant of the send WR's `wr` union is the largest; `rdma.rkey` and the UD
/// fields sit where the accessors read them.
#[test]
fn send_wr_union_members_are_where_the_accessors_read() {
    // SAFETY: ibv_send_wr is pointers and integers, for which all-zero is valid.
    let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr.remote_addr = 0x1122_3344_5566_7788;
    wr.wr.compare_add = (7u64 << 32) | 0xabcd;
    assert_eq!(wr.rdma(), (0x1122_3344_5566_7788, 0xabcd));
    let (ah, qpn, qkey) = wr.ud();
    assert_eq!(
        (ah as usize as u64, qpn, qkey),
        (0x1122_3344_5566_7788, 0xabcd, 7)
    );
}
