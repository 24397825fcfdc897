//! Every CM MAD in the rxe lab's rdma_cm captures (kernel rxe <-> kernel rxe: rping,
//! ucmatose, ib_send_bw -R, with and without loss; rocex <-> rxe: rping, ucmatose) decodes,
//! as do the SIDR_REQ and SIDR_REP of its udaddy capture (rdma_cm over UD),
//! and re-emits byte for byte;
//! the first rping connection's fields are checked against what rping asked for.

use std::net::IpAddr;
use std::path::PathBuf;

use rocex_cm::{Mad, Message, cma, path};
use rocex_wire::frame::Frame;

fn pcap(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcaps")
        .join(name)
}

/// The MADs (UD payloads to QP1) of a capture, with their source and destination.
fn mads(name: &str) -> Vec<(IpAddr, IpAddr, Vec<u8>)> {
    let frames = rocex_dump::capture::read(&pcap(name)).expect("the capture reads");
    let mut out = Vec::new();
    for f in frames {
        let Ok(frame) = Frame::parse(&f.data) else {
            continue;
        };
        let p = &frame.repr.packet;
        if p.bth.dest_qp != 1 {
            continue;
        }
        let deth = p.deth.expect("QP1 packets are UD");
        assert_eq!((deth.qkey, deth.src_qp), (0x8001_0000, 1), "{name}");
        let (src, dst) = match frame.repr.ip {
            rocex_wire::IpRepr::V4(h) => (IpAddr::from(h.source), IpAddr::from(h.destination)),
            rocex_wire::IpRepr::V6(h) => (IpAddr::from(h.source), IpAddr::from(h.destination)),
        };
        out.push((src, dst, p.payload.to_vec()));
    }
    out
}

#[test]
fn every_captured_cm_mad_decodes_and_reemits_exactly() {
    let mut total = 0;
    for name in [
        "rping.pcap",
        "rping-loss5.pcap",
        "ucmatose.pcap",
        "ucmatose-loss5.pcap",
        "send_bw_rdma_cm.pcap",
        "send_bw_rdma_cm-loss5.pcap",
        "interop-rping.pcap",
        "interop-ucmatose.pcap",
    ] {
        let mads = mads(name);
        assert!(mads.len() >= 4, "{name}: {} MADs", mads.len());
        for (_, _, bytes) in &mads {
            let mad = Mad::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut again = [0u8; 256];
            assert_eq!(mad.emit(&mut again), Ok(256));
            assert_eq!(&again[..], &bytes[..256], "{name}: {mad}");
            total += 1;
        }
    }
    assert!(total >= 30, "{total} MADs");
}

#[test]
fn rpings_connection_as_captured() {
    let mads = mads("rping.pcap");
    let kinds: Vec<_> = mads
        .iter()
        .map(|(_, _, b)| Mad::parse(b).unwrap().msg.part().name())
        .collect();
    assert_eq!(kinds, ["REQ", "REP", "RTU", "DREQ", "DREP"]);
    let (client, server, ref bytes) = mads[0];
    let req_mad = Mad::parse(bytes).unwrap();
    let Message::Req(req) = req_mad.msg else {
        panic!("not a REQ")
    };
    // rping -p 7174 in the TCP port space.
    assert_eq!(req.service_id, cma::service_id(cma::PS_TCP, 7174));
    assert_eq!(cma::port_of(req.service_id), Some((cma::PS_TCP, 7174)));
    assert_eq!(req.local_qpn, 0x11);
    assert_eq!((req.responder_resources, req.initiator_depth), (1, 1));
    assert_eq!(req.transport_service_type, 0);
    assert_eq!((req.retry_count, req.rnr_retry_count), (7, 7));
    assert_eq!(req.path_mtu, 3);
    assert_eq!(req.partition_key, 0xffff);
    assert_eq!(req.max_cm_retries, 15);
    assert_eq!(
        (
            req.remote_cm_response_timeout,
            req.local_cm_response_timeout
        ),
        (20, 20)
    );
    let p = req.primary_path;
    assert_eq!((p.local_lid, p.remote_lid), (0xffff, 0xffff));
    assert_eq!(path::ip_of_gid(p.local_gid), client);
    assert_eq!(path::ip_of_gid(p.remote_gid), server);
    assert_eq!(p.hop_limit, 64);
    assert!(!p.subnet_local);
    assert_eq!(p.local_ack_timeout, 17);
    let hdr = cma::Repr::parse(&cma::Hdr::new_unchecked(&req.private_data[..])).unwrap();
    assert_eq!((hdr.src, hdr.dst), (client, server));
    assert_ne!(hdr.src_port, 0);

    let rep_mad = Mad::parse(&mads[1].2).unwrap();
    let Message::Rep(rep) = rep_mad.msg else {
        panic!("not a REP")
    };
    assert_eq!(
        rep_mad.tid, req_mad.tid,
        "the REP answers in the REQ's transaction"
    );
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_eq!(rep.local_qpn, 0x11);
    assert_eq!((rep.responder_resources, rep.initiator_depth), (1, 1));
    assert_eq!(rep.rnr_retry_count, 7);
    assert_eq!(rep.target_ack_delay, 15);

    let Message::Rtu(rtu) = Mad::parse(&mads[2].2).unwrap().msg else {
        panic!("not an RTU")
    };
    assert_eq!(
        (rtu.local_comm_id, rtu.remote_comm_id),
        (req.local_comm_id, rep.local_comm_id)
    );
    let Message::Dreq(dreq) = Mad::parse(&mads[3].2).unwrap().msg else {
        panic!("not a DREQ")
    };
    assert_eq!(dreq.remote_qpn, rep.local_qpn);
    let Message::Drep(drep) = Mad::parse(&mads[4].2).unwrap().msg else {
        panic!("not a DREP")
    };
    assert_eq!(drep.remote_comm_id, dreq.local_comm_id);

    // Each side's QP sends from the Starting PSN of the other side's message.
    let first = |from: IpAddr| {
        rc_packets("rping.pcap")
            .into_iter()
            .find(|(src, qpn, _)| *src == from && *qpn == 0x11)
            .map(|(_, _, psn)| psn)
    };
    assert_eq!(first(client), Some(rep.starting_psn));
    assert_eq!(first(server), Some(req.starting_psn));
}

/// The RC requests of a capture: source, destination QP and PSN.
fn rc_packets(name: &str) -> Vec<(IpAddr, u32, u32)> {
    let frames = rocex_dump::capture::read(&pcap(name)).expect("the capture reads");
    frames
        .iter()
        .filter_map(|f| {
            let frame = Frame::parse(&f.data).ok()?;
            let p = &frame.repr.packet;
            let info = p.info().ok()?;
            if p.deth.is_some() || info.operation.is_response() {
                return None;
            }
            let src = match frame.repr.ip {
                rocex_wire::IpRepr::V4(h) => IpAddr::from(h.source),
                rocex_wire::IpRepr::V6(h) => IpAddr::from(h.source),
            };
            Some((src, p.bth.dest_qp, p.bth.psn.value()))
        })
        .collect()
}

/// Kernel rxe's rdma_cm over UD (udaddy, both ends on rxe): one SIDR_REQ and its SIDR_REP,
/// which decode and re-emit byte for byte with the fields udaddy's exchange sets.
#[test]
fn udaddys_sidr_as_captured() {
    let mads = mads("udaddy.pcap");
    assert_eq!(mads.len(), 2, "one SIDR_REQ and one SIDR_REP");
    for (_, _, bytes) in &mads {
        let mut again = [0u8; 256];
        assert_eq!(Mad::parse(bytes).unwrap().emit(&mut again), Ok(256));
        assert_eq!(&again[..], &bytes[..256]);
    }
    let (client, server, ref bytes) = mads[0];
    let req_mad = Mad::parse(bytes).unwrap();
    let Message::SidrReq(req) = req_mad.msg else {
        panic!("not a SIDR_REQ: {req_mad}")
    };
    // udaddy's port 7174 in the UDP port space.
    assert_eq!(cma::port_of(req.service_id), Some((cma::PS_UDP, 7174)));
    assert_eq!(req.partition_key, 0xffff);
    let hdr = cma::Repr::parse(&cma::Hdr::new_unchecked(&req.private_data[..])).unwrap();
    assert_eq!((hdr.src, hdr.dst), (client, server));
    let (from, to, ref bytes) = mads[1];
    assert_eq!((from, to), (server, client));
    let rep_mad = Mad::parse(bytes).unwrap();
    let Message::SidrRep(rep) = rep_mad.msg else {
        panic!("not a SIDR_REP: {rep_mad}")
    };
    assert_eq!(rep_mad.tid, req_mad.tid, "in the SIDR_REQ's transaction");
    assert_eq!(rep.request_id, req.request_id);
    assert_eq!(rep.status, rocex_cm::sidr::STATUS_OK);
    assert_eq!(rep.service_id, req.service_id);
    assert_eq!(rep.qkey, 0x0123_4567, "rdma_cm's RDMA_UDP_QKEY");
    // The client's datagrams go to the QPN the SIDR_REP named.
    let frames = rocex_dump::capture::read(&pcap("udaddy.pcap")).unwrap();
    let to_service = frames
        .iter()
        .filter_map(|f| Frame::parse(&f.data).ok())
        .filter(|f| f.repr.packet.bth.dest_qp != 1 && f.repr.packet.deth.is_some())
        .filter(
            |f| matches!(&f.repr.ip, rocex_wire::IpRepr::V4(h) if IpAddr::from(h.source) == client),
        )
        .map(|f| (f.repr.packet.bth.dest_qp, f.repr.packet.deth.unwrap().qkey))
        .collect::<Vec<_>>();
    assert!(!to_service.is_empty());
    assert!(
        to_service.iter().all(|&d| d == (rep.qpn, rep.qkey)),
        "{to_service:x?}"
    );
}
