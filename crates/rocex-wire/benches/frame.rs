//! Parse + ICRC check and build + ICRC of RoCE v2 frames, and the CRC-32 implementations
//! the ICRC could use.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rocex_wire::frame::Frame;
use rocex_wire::{BthRepr, FrameRepr, Opcode, PacketRepr, Psn, RethRepr};
use std::hint::black_box;

const SIZES: [usize; 2] = [1024, 4096];

fn write_frame(payload: &[u8]) -> FrameRepr<'_> {
    let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x11, Psn::new(42));
    bth.ack_req = true;
    let mut p = PacketRepr::new(bth);
    p.reth = Some(RethRepr {
        va: 0x7f00_0000_0000,
        rkey: 0x1234,
        dma_len: payload.len() as u32,
    });
    p.payload = payload;
    FrameRepr::ipv4(
        ([2; 6], [4; 6]),
        ([198, 18, 0, 1], [198, 18, 0, 2]),
        0xc011,
        p,
    )
    .unwrap()
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    for size in SIZES {
        let payload = vec![0x5a; size];
        let repr = write_frame(&payload);
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        g.throughput(Throughput::Bytes(buf.len() as u64));
        g.bench_with_input(BenchmarkId::new("parse+icrc", size), &buf, |b, buf| {
            b.iter(|| {
                let f = Frame::parse(black_box(buf)).unwrap();
                assert!(f.check_icrc().is_valid());
            });
        });
        let mut out = vec![0u8; buf.len()];
        g.bench_with_input(
            BenchmarkId::new("build+icrc", size),
            &payload,
            |b, payload| {
                b.iter(|| {
                    let f = write_frame(black_box(payload));
                    f.emit(&mut out).unwrap()
                });
            },
        );
    }
    g.finish();
}

fn crc(c: &mut Criterion) {
    const SLICE16: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);
    let mut g = c.benchmark_group("crc");
    for size in SIZES {
        let data = vec![0xa5u8; size];
        assert_eq!(crc32fast::hash(&data), SLICE16.checksum(&data));
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("crc32fast", size), &data, |b, d| {
            b.iter(|| crc32fast::hash(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("crc-slice16", size), &data, |b, d| {
            b.iter(|| SLICE16.checksum(black_box(d)))
        });
    }
    g.finish();
}

criterion_group!(benches, frames, crc);
criterion_main!(benches);
