//! The engine's own cost per packet, with no I/O: one engine sends RDMA WRITEs, the other
//! receives them and ACKs, packets handed across in memory.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rocex_proto::verbs::{AddressVector, Mtu, QpAttr, QpCap, QpType, Remote, SendOp, SendWr, Sge};
use rocex_proto::{Access, Config, Engine, IcrcStatus, Instant, Keys, QpInit, VecRegion};

struct End {
    e: Engine,
    qpn: u32,
    cq: u32,
    keys: Keys,
    addr: IpAddr,
}

fn end(i: u8) -> End {
    let addr: IpAddr = [198, 18, 0, i].into();
    let mut c = Config::new(addr, [i; 32]);
    c.port_mtu = Mtu::M4096;
    let mut e = Engine::new(c);
    let pd = e.alloc_pd();
    let cq = e.create_cq(1 << 14).unwrap();
    let cap = QpCap {
        max_send_wr: 4096,
        ..QpCap::default()
    };
    let qpn = e
        .create_qp(QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap,
        })
        .unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let keys = e
        .reg_mr(pd, 0, 1 << 20, access, Arc::new(VecRegion::new(1 << 20)))
        .unwrap();
    End {
        e,
        qpn,
        cq,
        keys,
        addr,
    }
}

fn connect(x: &mut End, peer: (IpAddr, u32), mtu: Mtu) {
    let to_rts = QpAttr {
        qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: mtu,
        dest_qp_num: peer.1,
        timeout: 14,
        retry_cnt: 7,
        ..QpAttr::default()
    };
    for (a, mask) in to_rts.rc_steps() {
        x.e.modify_qp(x.qpn, &a, mask).unwrap();
    }
}

/// Moves every packet from `from` to `to`; returns how many.
fn pump(from: &mut End, to: &mut End, buf: &mut [u8]) -> usize {
    let mut n = 0;
    let src = SocketAddr::new(from.addr, 4791);
    while let Some(t) = from.e.poll_transmit(Instant::ZERO, buf) {
        to.e.handle_packet(
            Instant::ZERO,
            src,
            to.addr,
            &buf[..t.len],
            IcrcStatus::Valid,
        );
        n += 1;
    }
    n
}

fn writes(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine-write");
    for (size, mtu) in [(8u32, Mtu::M4096), (1024, Mtu::M1024), (65536, Mtu::M4096)] {
        let (mut a, mut b) = (end(1), end(2));
        connect(&mut a, (b.addr, b.qpn), mtu);
        connect(&mut b, (a.addr, a.qpn), mtu);
        let packets = size.div_ceil(mtu.bytes()) as u64;
        let remote = Remote {
            addr: 0,
            rkey: b.keys.rkey,
        };
        let sge = Sge {
            addr: 0,
            length: size,
            lkey: a.keys.lkey,
        };
        let mut buf = vec![0u8; 9000];
        g.throughput(Throughput::Elements(packets));
        g.bench_with_input(BenchmarkId::new("packets", size), &size, |bench, _| {
            bench.iter(|| {
                a.e.post_send(
                    Instant::ZERO,
                    a.qpn,
                    SendWr::new(1, SendOp::Write(remote), vec![sge]),
                )
                .unwrap();
                let sent = pump(&mut a, &mut b, &mut buf);
                let acks = pump(&mut b, &mut a, &mut buf);
                black_box((sent, acks, a.e.poll_cq(a.cq).expect("completed")));
            });
        });
    }
    g.finish();
}

criterion_group!(benches, writes);
criterion_main!(benches);
