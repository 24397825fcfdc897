//! rocex's selective-repeat packets (docs/wire.md, "Selective repeat") decode by name and
//! field, pass `--check` (valid ICRC, re-emitted byte for byte), and a damaged one fails.

use rocex_dump::{Ports, Verdict, analyze};
use rocex_wire::{
    AethRepr, BthRepr, FrameRepr, ImmDtRepr, Opcode, PacketRepr, Psn, RethRepr, SackRepr,
    SrEthRepr, Syndrome,
};

fn frame(p: PacketRepr<'_>) -> Vec<u8> {
    let f = FrameRepr::ipv4(
        ([2; 6], [4; 6]),
        ([198, 18, 0, 1], [198, 18, 0, 2]),
        4791,
        p,
    )
    .unwrap();
    let mut buf = vec![0; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    buf
}

#[test]
fn sr_packets_decode_and_check() {
    let data = [0x5a; 1024];
    let mut w = PacketRepr::new(BthRepr::new(
        Opcode::SR_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        0x12,
        Psn::new(1000),
    ));
    w.reth = Some(RethRepr {
        va: 0x7000,
        rkey: 0x1234,
        dma_len: 3072,
    });
    w.sreth = Some(SrEthRepr {
        msg: 7,
        offset: 2048,
    });
    w.immdt = Some(ImmDtRepr { data: 9 });
    w.payload = &data;
    let mut sack = SackRepr::default();
    for i in [1, 2, 3, 9] {
        sack.set(i);
    }
    let mut a = PacketRepr::new(BthRepr::new(Opcode::SR_ACKNOWLEDGE, 0x11, Psn::new(999)));
    a.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK,
        msn: 4,
    });
    a.sack = Some(sack);
    let ports = Ports::with(&[]);
    let lines: Vec<String> = [frame(w), frame(a)]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let an = analyze(i as u64 + 1, 0.0, f, &ports);
            assert_eq!(an.verdict, Verdict::Ok, "{:?}", an.summary);
            an.summary.line(0.0).to_string()
        })
        .collect();
    assert!(
        lines[0].contains("SR_RDMA_WRITE_LAST_WITH_IMMEDIATE qp=0x000012 psn=1000")
            && lines[0].contains("va=0x7000 rkey=0x1234 len=3072 msg=7 offset=2048")
            && lines[0].contains("imm=0x00000009 payload=1024 icrc=ok"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("SR_ACKNOWLEDGE qp=0x000011 psn=999")
            && lines[1].contains("ACK credits=31 msn=4 sack=1001-1003,1009"),
        "{}",
        lines[1]
    );
    let json = serde_json::to_value(&analyze(2, 0.0, &frame(a), &ports).summary).unwrap();
    assert_eq!(json["sack"], serde_json::json!([1001, 1002, 1003, 1009]));

    // A bit flipped in the SACK: the ICRC no longer checks.
    let mut bad = frame(a);
    let at = bad.len() - 10;
    bad[at] ^= 1;
    assert!(matches!(
        analyze(3, 0.0, &bad, &ports).verdict,
        Verdict::Bad(_)
    ));
}
