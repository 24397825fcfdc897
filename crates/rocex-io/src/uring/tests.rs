//! The receive ring of a port that only receives, fed by a plain UDP socket on loopback.

use std::net::UdpSocket;

use super::*;

/// Waits at most 10 s for the port's descriptor to become readable, as the daemon sleeps
/// in poll(2) on it; returns whether it did.
fn wakes(port: &UringPort) -> bool {
    crate::poll::wait_readable(port.fd(), std::time::Duration::from_secs(10)).expect("poll")
}

/// Rounds of a full ring of datagrams and then some, received without a single send or
/// flush: a requester taking in ACKs or READ responses, or a daemon draining packets of a
/// QP already destroyed. Every datagram must wake the descriptor and arrive, in order.
/// Before the ring counted the receives still in its submission queue, the first round's
/// re-armed receives all waited there for a flush that never came, and the descriptor
/// never woke again.
#[test]
fn a_port_that_only_receives_keeps_receiving() {
    let (peer, local) = (
        IpAddr::from([127, 0, 202, 1]),
        IpAddr::from([127, 0, 202, 2]),
    );
    let mut port = match UringPort::open(local, BackendOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            let test = "a_port_that_only_receives_keeps_receiving";
            return rocex_testkit::cannot_run(test, &format!("io_uring ({e})"));
        }
    };
    let tx = UdpSocket::bind((peer, 0)).unwrap();
    let per_round = RX_DEPTH + RX_DEPTH / 4;
    let mut sent = Vec::new();
    let mut got = Vec::new();
    for round in 0..3 {
        for i in 0..per_round {
            let p: Vec<u8> = (0..64).map(|j| (round * per_round + i + j) as u8).collect();
            tx.send_to(&p, (local, ROCE_V2_PORT)).unwrap();
            sent.push(p);
        }
        while got.len() < sent.len() {
            assert!(
                wakes(&port),
                "round {round}: {} of {} datagrams received, then the descriptor stayed \
                 quiet ({port:?})",
                got.len(),
                sent.len()
            );
            port.recv(&mut |meta, p| {
                assert_eq!(meta.src.ip(), peer);
                got.push(p.to_vec());
            })
            .unwrap();
        }
    }
    assert!(got == sent, "the datagrams arrived changed or out of order");
    assert_eq!(port.counters().tx_packets, 0);
}

/// Each datagram sent leaves with its own traffic class: its ECN field, as the udp
/// backend's receiver reports it from the kernel, is the packet's where it has one and the
/// port's ECT(0) where it has none.
#[test]
fn each_datagram_leaves_with_its_own_traffic_class() {
    let (local, peer) = (
        IpAddr::from([127, 0, 202, 3]),
        IpAddr::from([127, 0, 202, 4]),
    );
    let opts = BackendOptions {
        ecn: 2,
        ..BackendOptions::default()
    };
    let mut port = match UringPort::open(local, opts) {
        Ok(p) => p,
        Err(e) => {
            let test = "each_datagram_leaves_with_its_own_traffic_class";
            return rocex_testkit::cannot_run(test, &format!("io_uring ({e})"));
        }
    };
    let no_gro = BackendOptions {
        no_gro: true,
        ..BackendOptions::default()
    };
    let mut rx = crate::UdpPort::open(peer, no_gro).unwrap();
    let tclasses = [0x01, 0, 0x68 | 3, 0x68];
    for (i, &t) in tclasses.iter().enumerate() {
        port.send(peer, ROCE_V2_PORT, t, &[i as u8; 64]).unwrap();
    }
    port.flush().unwrap();
    let mut got = Vec::new();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while got.len() < tclasses.len() && std::time::Instant::now() < end {
        rx.recv(&mut |meta, p| got.push((p[0], meta.ecn())))
            .unwrap();
    }
    use rocex_proto::Ecn;
    assert_eq!(
        got,
        [(0, Ecn::Ect1), (1, Ecn::Ect0), (2, Ecn::Ce), (3, Ecn::Ect0)]
    );
}
