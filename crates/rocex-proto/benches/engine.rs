//! The engine's own cost per packet, with no I/O: one engine sends RDMA WRITEs, the other
//! receives them and ACKs, packets handed across in memory.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rocex_proto::verbs::{Mtu, QpCap, Remote, SendOp, SendWr, Sge};
use rocex_proto::{Config, Instant};

#[path = "../tests/common/mod.rs"]
mod common;
use common::{Node, Spec, rc_attr};

fn end(i: u8) -> Node {
    let config = Config {
        port_mtu: Mtu::M4096,
        ..Config::new([198, 18, 0, i].into(), [i; 32])
    };
    let spec = Spec {
        cqes: 1 << 14,
        cap: QpCap {
            max_send_wr: 4096,
            ..QpCap::default()
        },
        len: 1 << 20,
        ..Spec::default()
    };
    Node::new(config, spec)
}

fn writes(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine-write");
    for (size, mtu) in [(8u32, Mtu::M4096), (1024, Mtu::M1024), (65536, Mtu::M4096)] {
        let (mut a, mut b) = (end(1), end(2));
        a.bring_up(a.qpn, &rc_attr(b.addr, b.qpn, mtu));
        b.bring_up(b.qpn, &rc_attr(a.addr, a.qpn, mtu));
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
                let sent = a.pump(&mut b, &mut buf);
                let acks = b.pump(&mut a, &mut buf);
                black_box((sent, acks, a.e.poll_cq(a.cq).expect("completed")));
            });
        });
    }
    g.finish();
}

criterion_group!(benches, writes);
criterion_main!(benches);
