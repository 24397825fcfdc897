//! rdma_cm for the host-side tools: a rocex engine on the UDP backend with the GSI (QPN 1)
//! carrying CM MADs, and the connection handshake of `rdma_connect` / `rdma_accept` on top
//! of `rocex_cm::conn`, so that `rocex rping` and `rocex ucmatose` meet the stock tools.

pub(crate) mod cmatose;
pub(crate) mod rping;

use std::io;
use std::net::{IpAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use rocex_cm::conn::{self, AcceptParams, Conn, ConnectParams, Event, Local, QpParams};
use rocex_cm::{MAD_LEN, Mad, Message, cma, rej};
use rocex_io::{Driver, UdpPort};
use rocex_proto::verbs::{
    AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendData, SendOp, SendWr, Sge, UdDest,
};
use rocex_proto::{Access, Engine, GRH_LEN, GSI_QPN, PdId, QpInit, Region, VecRegion};

use crate::device::{self, Post, verbs_err};

/// The Q_Key of QP1 (IBTA chapter 13's well-known GSI Q_Key; rxe's `GSI_QKEY`).
const GSI_QKEY: u32 = 0x8001_0000;
/// Receives kept posted on QP1.
const GSI_SLOTS: u32 = 32;
const SLOT: u32 = (GRH_LEN + MAD_LEN) as u32;
const GSI_BASE: u64 = 0x7000_0000;
/// The wr_id of MAD sends, whose completions are dropped.
const GSI_SEND: u64 = u64::MAX;
/// How long a client keeps retrying a server that is not listening yet.
const CONNECT_PATIENCE: Duration = Duration::from_secs(60);

/// An engine with QP1 up, on `local`'s UDP port 4791.
pub(crate) struct CmDevice {
    pub(crate) driver: Driver,
    pub(crate) local: IpAddr,
    pub(crate) pd: PdId,
    gsi_cq: u32,
    gsi_lkey: u32,
    gsi_mem: Arc<VecRegion>,
}

impl CmDevice {
    pub(crate) fn open(local: IpAddr) -> io::Result<Self> {
        let mut e = Engine::new(device::config(local));
        let pd = e.alloc_pd();
        let len = u64::from(GSI_SLOTS * SLOT);
        let gsi_mem = Arc::new(VecRegion::new(len as usize));
        let keys = e
            .reg_mr(pd, GSI_BASE, len, Access::LOCAL_WRITE, gsi_mem.clone())
            .map_err(verbs_err)?;
        let gsi_cq = e
            .create_cq(2 * GSI_SLOTS as usize + 64)
            .map_err(verbs_err)?;
        let cap = QpCap {
            max_send_wr: 64,
            max_recv_wr: GSI_SLOTS,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: MAD_LEN as u32,
        };
        let init = QpInit {
            qp_type: QpType::Ud,
            pd,
            send_cq: gsi_cq,
            recv_cq: gsi_cq,
            cap,
        };
        e.create_gsi_qp(init).map_err(verbs_err)?;
        let mut a = QpAttr {
            qp_state: QpState::Init,
            qkey: GSI_QKEY,
            ..QpAttr::default()
        };
        let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY;
        e.modify_qp(GSI_QPN, &a, m).map_err(verbs_err)?;
        a.qp_state = QpState::Rtr;
        e.modify_qp(GSI_QPN, &a, AttrMask::STATE)
            .map_err(verbs_err)?;
        a.qp_state = QpState::Rts;
        e.modify_qp(GSI_QPN, &a, AttrMask::STATE | AttrMask::SQ_PSN)
            .map_err(verbs_err)?;
        let mut dev = Self {
            driver: Driver::new(e, UdpPort::bind(local)?),
            local,
            pd,
            gsi_cq,
            gsi_lkey: keys.lkey,
            gsi_mem,
        };
        for slot in 0..GSI_SLOTS {
            dev.post_gsi_recv(slot)?;
        }
        Ok(dev)
    }

    fn post_gsi_recv(&mut self, slot: u32) -> io::Result<()> {
        let wr = RecvWr::new(
            u64::from(slot),
            [Sge {
                addr: GSI_BASE + u64::from(slot * SLOT),
                length: SLOT,
                lkey: self.gsi_lkey,
            }],
        );
        self.driver.post_recv(GSI_QPN, wr)
    }

    /// Sends a MAD to `peer`'s QP1.
    pub(crate) fn send_mad(&mut self, peer: IpAddr, mad: &Mad) -> io::Result<()> {
        let mut b = vec![0u8; MAD_LEN];
        mad.emit(&mut b)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let mut wr = SendWr::new(GSI_SEND, SendOp::Send, []);
        wr.data = SendData::Inline(b);
        wr.ud = Some(UdDest {
            dest: peer,
            remote_qpn: GSI_QPN,
            remote_qkey: GSI_QKEY,
        });
        self.driver.post_send(GSI_QPN, wr)
    }

    /// The MADs QP1 received since the last call, with their senders; malformed or
    /// foreign MADs are skipped.
    pub(crate) fn recv_mads(&mut self) -> io::Result<Vec<(IpAddr, Mad)>> {
        let mut out = Vec::new();
        while let Some(wc) = self.driver.engine.poll_cq(self.gsi_cq) {
            if wc.wr_id == GSI_SEND {
                continue;
            }
            let slot = wc.wr_id as u32;
            let at = slot * SLOT;
            let mut bytes = [0u8; SLOT as usize];
            self.gsi_mem.read(at as u64, &mut bytes);
            let grh = bytes[..GRH_LEN].try_into().expect("a slot holds a GRH");
            let src = rocex_proto::grh_source(grh);
            let ok = wc.status == rocex_proto::verbs::WcStatus::Success;
            let mad = &bytes[GRH_LEN..];
            self.post_gsi_recv(slot)?;
            if !ok {
                continue;
            }
            match Mad::parse(mad) {
                Ok(m) => out.push((src, m)),
                Err(e) => eprintln!("rocex: dropped a MAD from {src}: {e}"),
            }
        }
        Ok(out)
    }

    /// Runs the engine for up to `max`, then feeds `conn` what arrived for it and its
    /// timers, and sends what it has to send. MADs for nobody else are answered or dropped.
    pub(crate) fn pump(&mut self, conn: &mut Conn, max: Duration) -> io::Result<()> {
        self.driver.wait(max)?;
        let now = self.driver.now();
        for (src, mad) in self.recv_mads()? {
            if conn.owns(src, &mad) {
                conn.handle(now, &mad);
            } else if let Message::Req(req) = mad.msg {
                // A REQ for a service nobody here offers (REJ reason 8, invalid service ID).
                let rej = conn::reject(mad.tid, &req, rej::REASON_INVALID_SERVICE_ID);
                self.send_mad(src, &rej)?;
            }
        }
        conn.handle_timeout(now);
        self.flush(conn)
    }

    fn flush(&mut self, conn: &mut Conn) -> io::Result<()> {
        while let Some(m) = conn.poll_transmit() {
            self.send_mad(conn.peer(), &m)?;
        }
        Ok(())
    }

    /// An RC QP in INIT with remote READ and WRITE allowed.
    pub(crate) fn create_rc_qp(&mut self, cq: u32, cap: QpCap) -> io::Result<u32> {
        let e = &mut self.driver.engine;
        let qpn = device::create_qp(e, QpType::Rc, self.pd, cq, cap)?;
        let a = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            ..QpAttr::default()
        };
        let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
        e.modify_qp(qpn, &a, m).map_err(verbs_err)?;
        Ok(qpn)
    }

    fn ready_qp(&mut self, qpn: u32, p: &QpParams) -> io::Result<()> {
        let e = &mut self.driver.engine;
        let (a, m) = p.rtr();
        e.modify_qp(qpn, &a, m).map_err(verbs_err)?;
        let (a, m) = p.rts();
        e.modify_qp(qpn, &a, m).map_err(verbs_err)
    }

    fn random_u32(&mut self) -> u32 {
        let e = &mut self.driver.engine;
        e.random_psn() << 8 ^ e.random_psn()
    }

    /// `rdma_connect`: a REQ to `server`'s rdma_cm `port` (TCP port space) for `qpn`,
    /// retried while the server is not listening yet; returns once the RTU is sent.
    pub(crate) fn connect(
        &mut self,
        server: IpAddr,
        port: u16,
        qpn: u32,
        limits: Limits,
    ) -> io::Result<Conn> {
        let start = WallClock::now();
        loop {
            let mut private_data = [0u8; rocex_cm::req::PRIVATE_DATA_LEN];
            let src_port = 0xc000 | (self.random_u32() as u16 & 0x3fff);
            cma::Repr {
                src_port,
                src: self.local,
                dst: server,
            }
            .emit(&mut cma::Hdr::new_unchecked(&mut private_data[..]))
            .map_err(|e| io::Error::other(e.to_string()))?;
            let p = ConnectParams {
                qpn,
                starting_psn: self.driver.engine.random_psn(),
                service_id: cma::service_id(cma::PS_TCP, port),
                responder_resources: limits.responder_resources,
                initiator_depth: limits.initiator_depth,
                retry_count: limits.retry_count,
                rnr_retry_count: limits.rnr_retry_count,
                path_mtu: limits.mtu,
                traffic_class: 0,
                private_data,
            };
            let now = self.driver.now();
            let (tid, id) = (u64::from(self.random_u32()), self.random_u32());
            let mut c = Conn::connect(now, Local::at(self.local), server, &p, tid, id);
            self.flush(&mut c)?;
            loop {
                self.pump(&mut c, Duration::from_millis(5))?;
                match c.poll_event() {
                    Some(Event::Reply(params)) => {
                        self.ready_qp(qpn, &params)?;
                        c.establish();
                        self.flush(&mut c)?;
                        return Ok(c);
                    }
                    Some(Event::Rejected(rej::REASON_INVALID_SERVICE_ID))
                        if start.elapsed() < CONNECT_PATIENCE =>
                    {
                        // Not listening yet, as a stock client's `retry` loop would see.
                        std::thread::sleep(Duration::from_millis(200));
                        break;
                    }
                    Some(Event::Rejected(r)) => {
                        return Err(io::Error::other(format!(
                            "the server rejected the connection (REJ reason {r})"
                        )));
                    }
                    Some(Event::TimedOut) => {
                        return Err(io::Error::other("the server never answered the REQ"));
                    }
                    _ => {}
                }
            }
        }
    }

    /// `rdma_listen` + `rdma_accept`: waits for a REQ to rdma_cm `port` (TCP port space),
    /// creates its QP with `make_qp` (which may post receives), readies it and sends the
    /// REP. Returns the connection (RTU outstanding) and the QP.
    pub(crate) fn accept(
        &mut self,
        port: u16,
        limits: Limits,
        mut make_qp: impl FnMut(&mut Self) -> io::Result<u32>,
    ) -> io::Result<(Conn, u32)> {
        loop {
            self.driver.wait(Duration::from_millis(20))?;
            for (src, mad) in self.recv_mads()? {
                let Message::Req(req) = mad.msg else { continue };
                let ours = conn::rdma_cm_target(&req)
                    .is_some_and(|(ps, p, hdr)| ps == cma::PS_TCP && p == port && hdr.src == src);
                if !ours || req.transport_service_type != 0 {
                    let rej = conn::reject(mad.tid, &req, rej::REASON_INVALID_SERVICE_ID);
                    self.send_mad(src, &rej)?;
                    continue;
                }
                let qpn = make_qp(self)?;
                let p = AcceptParams {
                    qpn,
                    starting_psn: self.driver.engine.random_psn(),
                    responder_resources: limits.responder_resources,
                    initiator_depth: limits.initiator_depth,
                    rnr_retry_count: limits.rnr_retry_count,
                    max_mtu: limits.mtu,
                    private_data: [0; rocex_cm::rep::PRIVATE_DATA_LEN],
                };
                let now = self.driver.now();
                let id = self.random_u32();
                let Some(mut c) =
                    Conn::accept(now, Local::at(self.local), src, mad.tid, &req, &p, id)
                else {
                    let rej = conn::reject(mad.tid, &req, rej::REASON_CONSUMER);
                    self.send_mad(src, &rej)?;
                    continue;
                };
                let params = c
                    .params()
                    .expect("an accepted connection has its parameters");
                self.ready_qp(qpn, &params)?;
                self.flush(&mut c)?;
                return Ok((c, qpn));
            }
        }
    }

    /// Keeps answering the peer for `d`: its retransmissions, and repeats of its DREQ.
    pub(crate) fn linger(&mut self, conn: &mut Conn, d: Duration) -> io::Result<()> {
        let end = WallClock::now() + d;
        while WallClock::now() < end {
            self.pump(conn, Duration::from_millis(5))?;
        }
        Ok(())
    }

    /// `rdma_disconnect` and the wait for its end: DREQ (unless the peer's came first),
    /// then DREP or the DREQ's retries.
    pub(crate) fn disconnect(&mut self, conn: &mut Conn) -> io::Result<()> {
        let now = self.driver.now();
        conn.disconnect(now);
        self.flush(conn)?;
        while !matches!(conn.state(), conn::State::TimeWait | conn::State::Closed) {
            self.pump(conn, Duration::from_millis(5))?;
        }
        Ok(())
    }
}

/// The connection's limits as the tool's `rdma_conn_param` gives them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) mtu: Mtu,
}

impl Limits {
    /// One READ each way, as rping and ucmatose ask, with `retry_count` transport and
    /// `rnr_retry_count` RNR retries at a path MTU of `mtu` bytes.
    pub(crate) fn one_read(mtu: u32, retry_count: u8, rnr_retry_count: u8) -> io::Result<Self> {
        Ok(Self {
            responder_resources: 1,
            initiator_depth: 1,
            retry_count,
            rnr_retry_count,
            mtu: device::mtu_of(mtu)?,
        })
    }
}

/// The local address that reaches `peer` (what rdma_resolve_addr picks without a source).
pub(crate) fn local_for(peer: IpAddr) -> io::Result<IpAddr> {
    let any: IpAddr = if peer.is_ipv4() {
        [0, 0, 0, 0].into()
    } else {
        [0u16; 8].into()
    };
    let s = UdpSocket::bind((any, 0))?;
    s.connect((peer, 4791))?;
    Ok(s.local_addr()?.ip())
}

/// Parses an address argument.
pub(crate) fn parse_ip(s: &str) -> io::Result<IpAddr> {
    s.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an IP address: {s}"),
        )
    })
}
