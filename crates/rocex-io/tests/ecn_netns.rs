//! ECN through a real network: two engines in two namespaces on a veth pair, the sender's
//! packets ECT(0), and an nftables rule on the sender's way out that marks RoCE packets CE
//! above a rate (this kernel has no marking qdisc: no red, fq_codel, codel or gred). The
//! receiver's backend must see the marks, its engine answer with CNPs, and the sender's
//! engine slow down; every WRITE still lands intact. Without the rule nothing is marked.
//! Needs root and nft (fails under CI without).

// The capture helpers are for the other namespace tests.
#[allow(dead_code)]
mod common;

use std::io::{self, Write};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use common::VethPair;
use common::rc::{connect_qp, err, exchange, rc_qp};
use rocex_io::{AfPacketPort, Backend, BackendOptions, Driver, UdpPort};
use rocex_proto::verbs::{Mtu, Remote, SendOp, SendWr, Sge, WcStatus};
use rocex_proto::{Access, Config, Congestion, Counters, DcqcnParams, Engine, Region, VecRegion};

const BUF: usize = 4 << 20;
const BASE: u64 = 0x4000_0000;
/// What the MR and the QP allow the peer: WRITE.
const ACCESS: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const MSG: u32 = 64 << 10;
const MSGS: u64 = 128;

/// What one side tells the other.
#[derive(Debug, Clone, Copy)]
struct Info {
    addr: IpAddr,
    qpn: u32,
    psn: u32,
    rkey: u32,
}

fn have_nft() -> bool {
    rocex_testkit::require_tool(&rocex_testkit::this_test(), "nft").is_some()
}

/// Marks CE every RoCE packet to `dst` beyond 5 MB/s (after a 256 KiB burst), on the way
/// out of namespace `ns`.
fn mark_above_rate(ns: &str, dst: IpAddr) -> io::Result<()> {
    let rules = format!(
        "table ip rocex_ecn {{\n chain out {{\n  type filter hook postrouting priority 0;\n  \
         ip daddr {dst} udp dport 4791 limit rate over 5 mbytes/second burst 256 kbytes ip ecn set ce\n }}\n}}\n"
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(rules.as_bytes())?;
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(err(String::from_utf8_lossy(&out.stderr)))
    }
}

/// An engine that marks ECT(0) on a backend that sends ECT(0), with one RC QP.
struct Side {
    driver: Driver,
    qpn: u32,
    cq: u32,
    lkey: u32,
    rkey: u32,
    buf: Arc<VecRegion>,
}

impl Side {
    fn new(local: IpAddr, afpacket: bool) -> io::Result<Self> {
        let opts = BackendOptions {
            peers_are_rocex: true,
            ecn: 2,
            ..BackendOptions::default()
        };
        let backend: Box<dyn Backend> = if afpacket {
            Box::new(AfPacketPort::open(local, opts)?)
        } else {
            Box::new(UdpPort::open(local, opts)?)
        };
        let seed = match local {
            IpAddr::V4(v4) => v4.octets()[3],
            IpAddr::V6(v6) => v6.octets()[15],
        };
        let mut config = Config::new(local, [seed; 32]);
        config.port_mtu = Mtu::M4096;
        config.udp_source_port = backend.fixed_source_port();
        config.congestion = Congestion {
            ecn: true,
            dcqcn: DcqcnParams {
                line_rate: 10e9,
                ..DcqcnParams::default()
            },
            ..Congestion::default()
        };
        let mut e = Engine::new(config);
        let pd = e.alloc_pd();
        let buf = Arc::new(VecRegion::new(BUF));
        let keys = e
            .reg_mr(pd, BASE, BUF as u64, ACCESS, buf.clone())
            .map_err(err)?;
        let cq = e.create_cq(4096).map_err(err)?;
        let qpn = rc_qp(&mut e, pd, cq, (256, 16))?;
        Ok(Self {
            driver: Driver::with_backend(e, backend),
            qpn,
            cq,
            lkey: keys.lkey,
            rkey: keys.rkey,
            buf,
        })
    }

    fn connect(&mut self, to_peer: &Sender<Info>, from_peer: &Receiver<Info>) -> io::Result<Info> {
        let e = &mut self.driver.engine;
        let psn = e.random_psn();
        let mine = Info {
            addr: e.config().local,
            qpn: self.qpn,
            psn,
            rkey: self.rkey,
        };
        let peer = exchange(mine, to_peer, from_peer)?;
        let to = (peer.addr, peer.qpn, peer.psn);
        connect_qp(e, self.qpn, psn, to, Mtu::M4096, ACCESS)?;
        Ok(peer)
    }
}

/// Bytes of WRITE `i`.
fn pattern(i: u64) -> Vec<u8> {
    rocex_testkit::pattern(i + 1, MSG as usize)
}

/// What a run did: the sender's and the receiver's counters, whether the sender was ever
/// seen rate-limited, and the receiver's buffer.
struct Outcome {
    sender: Counters,
    receiver: Counters,
    limited: bool,
    buf: Arc<VecRegion>,
}

/// Streams `MSGS` 64 KiB WRITEs from side 0 to side 1, 16 in flight, each into the next
/// 64 KiB of the receiver's buffer (wrapping), then lets the receiver linger.
fn stream(pair: &VethPair, afpacket_receiver: bool) -> Outcome {
    let (a_tx, b_rx) = channel();
    let (b_tx, a_rx) = channel();
    let (done_tx, done_rx) = channel::<()>();
    let b_addr = pair.addr(1);
    let receiver = pair.spawn(1, move || -> io::Result<(Counters, Arc<VecRegion>)> {
        let mut s = Side::new(b_addr, afpacket_receiver)?;
        s.connect(&b_tx, &b_rx)?;
        while done_rx.try_recv().is_err() {
            s.driver.wait(Duration::from_millis(5))?;
        }
        s.driver.linger(Duration::from_millis(200))?;
        Ok((s.driver.engine.counters().clone(), s.buf))
    });
    let a_addr = pair.addr(0);
    let sender = pair.spawn(0, move || -> io::Result<(Counters, bool)> {
        let mut s = Side::new(a_addr, false)?;
        let peer = s.connect(&a_tx, &a_rx)?;
        let slots = (BUF as u64) / u64::from(MSG);
        let mut limited = false;
        let (mut posted, mut done) = (0u64, 0u64);
        while done < MSGS {
            while posted < MSGS && posted - done < 16 {
                let off = (posted % slots) * u64::from(MSG);
                s.buf.write(off, &pattern(posted));
                let sge = Sge {
                    addr: BASE + off,
                    length: MSG,
                    lkey: s.lkey,
                };
                let remote = Remote {
                    addr: BASE + off,
                    rkey: peer.rkey,
                };
                let wr = SendWr::new(posted, SendOp::Write(remote), vec![sge]);
                let now = s.driver.now();
                s.driver.engine.post_send(now, s.qpn, wr).map_err(err)?;
                posted += 1;
            }
            let cq = s.cq;
            let wc = s
                .driver
                .run_until(Duration::from_secs(30), |e| e.poll_cq(cq))?
                .ok_or_else(|| err("no completion within 30 s"))?;
            if wc.status != WcStatus::Success {
                return Err(err(format!("{wc:?}")));
            }
            done += 1;
            limited |= s.driver.engine.qp_rate(s.qpn).map_err(err)?.is_some();
        }
        let _ = done_tx.send(());
        s.driver.linger(Duration::from_millis(200))?;
        Ok((s.driver.engine.counters().clone(), limited))
    });
    let (sender, limited) = sender
        .join()
        .expect("sender")
        .expect("namespace")
        .expect("sender ran");
    let (receiver, buf) = receiver
        .join()
        .expect("receiver")
        .expect("namespace")
        .expect("receiver ran");
    Outcome {
        sender,
        receiver,
        limited,
        buf,
    }
}

/// The last write into each 64 KiB slot of the receiver's buffer is there, byte for byte.
fn check_data(buf: &VecRegion) {
    let slots = (BUF as u64) / u64::from(MSG);
    for slot in 0..slots {
        let last = (MSGS - 1 - slot) / slots * slots + slot;
        let mut got = vec![0; MSG as usize];
        buf.read(slot * u64::from(MSG), &mut got);
        assert!(got == pattern(last), "slot {slot} (WRITE {last}) differs");
    }
}

#[test]
fn ce_marks_on_a_real_path_become_cnps_that_slow_the_sender() {
    if !common::have_root() || !have_nft() {
        return;
    }
    for afpacket in [false, true] {
        let pair = VethPair::new("ecn", 91, 9000).expect("veth pair");
        mark_above_rate(&pair.ns(0), pair.addr(1)).expect("nft rule");
        let o = stream(&pair, afpacket);
        let (s, r) = (&o.sender, &o.receiver);
        let backend = if afpacket { "afpacket" } else { "udp" };
        assert!(
            r.np_ecn_marked_roce_packets > 0 && r.np_cnp_sent > 0,
            "{backend}: {} CE packets, {} CNPs",
            r.np_ecn_marked_roce_packets,
            r.np_cnp_sent
        );
        assert!(r.np_cnp_sent <= r.np_ecn_marked_roce_packets);
        assert!(s.rp_cnp_handled > 0 && s.rp_cnp_handled <= r.np_cnp_sent);
        assert!(o.limited, "{backend}: the sender was never limited");
        check_data(&o.buf);
    }
}

#[test]
fn without_marks_no_cnp_and_no_limit() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("noecn", 93, 9000).expect("veth pair");
    let o = stream(&pair, false);
    assert_eq!(o.receiver.np_ecn_marked_roce_packets, 0);
    assert_eq!((o.receiver.np_cnp_sent, o.sender.rp_cnp_handled), (0, 0));
    assert!(!o.limited);
    check_data(&o.buf);
}
