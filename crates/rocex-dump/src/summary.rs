//! One frame's fields, for a tcpdump-like line and for JSON.

use std::fmt;

use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
use rocex_wire::frame::{Frame, IcrcCheck};
use rocex_wire::{IcrcForm, Syndrome};
use serde::Serialize;

/// RETH fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub len: u32,
}

/// rocex's selective-repeat ETH: where a SEND or WRITE packet belongs in its message, or
/// where a READ request's run of READs starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SrEth {
    /// Receive message number; on a READ request, the PSN its run of READs starts at.
    pub msg: u32,
    /// Byte offset in the message (of the range asked, on a READ request).
    pub offset: u32,
}

/// AETH fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Aeth {
    /// The raw syndrome byte.
    pub syndrome: u8,
    /// `ACK`, `RNR-NAK`, `NAK` or `reserved`.
    pub kind: &'static str,
    /// Credit count (ACK), timer code (RNR NAK) or NAK code (NAK).
    pub value: u8,
    /// Message sequence number.
    pub msn: u32,
}

/// AtomicETH fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Atomic {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value or addend.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

/// DETH fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: u32,
}

/// FETH fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Feth {
    /// Placement type bits.
    pub placement: u8,
    /// Selectivity level.
    pub selectivity: u8,
}

/// Everything `rocex dump` says of one frame. Absent headers are `None` and left out of JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FrameSummary {
    /// 1-based frame number in the capture.
    pub frame: u64,
    /// Capture time, seconds since the epoch.
    pub ts: f64,
    /// Whether it is UDP to a RoCE port.
    pub roce: bool,
    /// Frame length.
    pub len: usize,
    /// 802.1Q VLAN ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Source IP address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination IP address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// `UDP`, `TCP`, `ARP`... for what the frame carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proto: Option<String>,
    /// Source port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// IPv4 identification (covered by the ICRC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_id: Option<u16>,
    /// Opcode name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opcode: Option<String>,
    /// Opcode number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opcode_code: Option<u8>,
    /// Destination QP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qpn: Option<u32>,
    /// PSN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psn: Option<u32>,
    /// AckReq.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_req: Option<bool>,
    /// Solicited event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub se: Option<bool>,
    /// MigReq.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_req: Option<bool>,
    /// FECN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fecn: Option<bool>,
    /// BECN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub becn: Option<bool>,
    /// Pad count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pad: Option<u8>,
    /// Transport header version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tver: Option<u8>,
    /// Partition key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey: Option<u16>,
    /// RETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reth: Option<Reth>,
    /// AETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aeth: Option<Aeth>,
    /// rocex's selective-repeat ETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sr: Option<SrEth>,
    /// The PSNs a selective acknowledgement holds past its cumulative PSN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sack: Option<Vec<u32>>,
    /// Immediate data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imm: Option<u32>,
    /// R_Key to invalidate (IETH).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inv_rkey: Option<u32>,
    /// AtomicETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic: Option<Atomic>,
    /// Original value (AtomicAckETH).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_orig: Option<u64>,
    /// DETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deth: Option<Deth>,
    /// FETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feth: Option<Feth>,
    /// Payload length, pad excluded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_len: Option<usize>,
    /// ICRC on the wire, as the little-endian number it is stored as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icrc: Option<u32>,
    /// `ok`, `ok-rxe-flush` (rxe's FLUSH form) or `bad`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icrc_status: Option<&'static str>,
    /// Why the frame did not parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FrameSummary {
    /// The link, network and transport fields of any frame.
    pub fn outer(frame: u64, ts: f64, data: &[u8]) -> Self {
        let mut s = Self {
            frame,
            ts,
            len: data.len(),
            ..Self::default()
        };
        let Ok(p) = LaxSlicedPacket::from_ethernet(data) else {
            s.proto = Some("malformed".into());
            return s;
        };
        s.vlan = p.vlan_ids().first().map(|v| v.value());
        match &p.net {
            Some(LaxNetSlice::Ipv4(ip)) => {
                let h = ip.header();
                s.src = Some(h.source_addr().to_string());
                s.dst = Some(h.destination_addr().to_string());
                s.ip_id = Some(h.identification());
                s.proto = Some(ip_proto(h.protocol()));
            }
            Some(LaxNetSlice::Ipv6(ip)) => {
                let h = ip.header();
                s.src = Some(h.source_addr().to_string());
                s.dst = Some(h.destination_addr().to_string());
                s.proto = Some(ip_proto(ip.payload().ip_number));
            }
            Some(LaxNetSlice::Arp(_)) => s.proto = Some("ARP".into()),
            None => {
                s.proto = p
                    .link
                    .as_ref()
                    .and_then(|l| l.ether_payload())
                    .map(|e| format!("{:?}", e.ether_type));
            }
        }
        match &p.transport {
            Some(TransportSlice::Udp(u)) => {
                s.proto = Some("UDP".into());
                (s.sport, s.dport) = (Some(u.source_port()), Some(u.destination_port()));
            }
            Some(TransportSlice::Tcp(t)) => {
                s.proto = Some("TCP".into());
                (s.sport, s.dport) = (Some(t.source_port()), Some(t.destination_port()));
            }
            _ => {}
        }
        s
    }

    /// The transport fields of a parsed RoCE frame.
    pub fn fill(&mut self, frame: &Frame<'_>, check: IcrcCheck) {
        let p = &frame.repr.packet;
        let b = &p.bth;
        self.opcode = Some(b.opcode.name().unwrap_or("UNKNOWN").to_string());
        self.opcode_code = Some(b.opcode.0);
        self.qpn = Some(b.dest_qp);
        self.psn = Some(b.psn.value());
        self.ack_req = Some(b.ack_req);
        self.se = Some(b.solicited);
        self.mig_req = Some(b.mig_req);
        self.fecn = Some(b.fecn);
        self.becn = Some(b.becn);
        self.pad = Some(b.pad);
        self.tver = Some(b.tver);
        self.pkey = Some(b.pkey);
        self.reth = p.reth.map(|r| Reth {
            va: r.va,
            rkey: r.rkey,
            len: r.dma_len,
        });
        self.aeth = p.aeth.map(|a| {
            let (kind, value) = match a.syndrome {
                Syndrome::Ack { credits } => ("ACK", credits),
                Syndrome::RnrNak { timer } => ("RNR-NAK", timer),
                Syndrome::Nak(code) => ("NAK", code.code()),
                Syndrome::Reserved(b) => ("reserved", b),
            };
            Aeth {
                syndrome: a.syndrome.to_byte(),
                kind,
                value,
                msn: a.msn,
            }
        });
        self.sr = p.sreth.map(|e| SrEth {
            msg: e.msg,
            offset: e.offset,
        });
        self.sack = p
            .sack
            .map(|m| m.psns(b.psn).map(|psn| psn.value()).collect());
        self.imm = p.immdt.map(|i| i.data);
        self.inv_rkey = p.ieth.map(|i| i.rkey);
        self.atomic = p.atomic_eth.map(|a| Atomic {
            va: a.va,
            rkey: a.rkey,
            swap_add: a.swap_add,
            compare: a.compare,
        });
        self.atomic_orig = p.atomic_ack_eth.map(|a| a.orig);
        self.deth = p.deth.map(|d| Deth {
            qkey: d.qkey,
            src_qp: d.src_qp,
        });
        self.feth = p.feth.map(|f| Feth {
            placement: f.placement,
            selectivity: f.selectivity,
        });
        self.payload_len = Some(p.payload.len());
        self.icrc = Some(frame.icrc);
        self.icrc_status = Some(match check {
            IcrcCheck::Valid(IcrcForm::Spec) => "ok",
            IcrcCheck::Valid(IcrcForm::RxeFlush) => "ok-rxe-flush",
            IcrcCheck::Invalid { .. } => "bad",
        });
    }

    /// The line `rocex dump` prints, with the time relative to `t0`.
    pub fn line(&self, t0: f64) -> Line<'_> {
        Line { s: self, t0 }
    }
}

fn ip_proto(n: etherparse::IpNumber) -> String {
    n.keyword_str()
        .map_or_else(|| format!("ip-proto-{}", n.0), str::to_string)
}

/// A frame summary printed like tcpdump.
pub struct Line<'a> {
    s: &'a FrameSummary,
    t0: f64,
}

fn endpoint(addr: Option<&String>, port: Option<u16>) -> String {
    match (addr, port) {
        (Some(a), Some(p)) if a.contains(':') => format!("[{a}].{p}"),
        (Some(a), Some(p)) => format!("{a}.{p}"),
        (Some(a), None) => a.clone(),
        _ => "?".into(),
    }
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.s;
        write!(f, "{:>5} {:.6} ", s.frame, s.ts - self.t0)?;
        if let Some(v) = s.vlan {
            write!(f, "vlan {v} ")?;
        }
        if s.src.is_some() {
            write!(
                f,
                "{} > {} ",
                endpoint(s.src.as_ref(), s.sport),
                endpoint(s.dst.as_ref(), s.dport)
            )?;
        }
        let Some(op) = &s.opcode else {
            write!(f, "{} len={}", s.proto.as_deref().unwrap_or("?"), s.len)?;
            if let Some(e) = &s.error {
                write!(f, " error: {e}")?;
            }
            return Ok(());
        };
        write!(
            f,
            "{op} qp={:#08x} psn={}",
            s.qpn.unwrap_or(0),
            s.psn.unwrap_or(0)
        )?;
        for (on, name) in [
            (s.ack_req, "ack"),
            (s.se, "se"),
            (s.mig_req, "mig"),
            (s.fecn, "fecn"),
            (s.becn, "becn"),
        ] {
            if on == Some(true) {
                write!(f, " {name}")?;
            }
        }
        if let Some(pad) = s.pad.filter(|p| *p != 0) {
            write!(f, " pad={pad}")?;
        }
        if let Some(k) = s.pkey.filter(|k| *k != 0xffff) {
            write!(f, " pkey={k:#06x}")?;
        }
        if let Some(d) = &s.deth {
            write!(f, " qkey={:#x} src_qp={:#x}", d.qkey, d.src_qp)?;
        }
        if let Some(x) = &s.feth {
            write!(
                f,
                " placement={:#x} selectivity={}",
                x.placement, x.selectivity
            )?;
        }
        if let Some(r) = &s.reth {
            write!(f, " va={:#x} rkey={:#x} len={}", r.va, r.rkey, r.len)?;
        }
        if let Some(e) = &s.sr {
            write!(f, " msg={} offset={}", e.msg, e.offset)?;
        }
        if let Some(a) = &s.atomic {
            write!(
                f,
                " va={:#x} rkey={:#x} swap_add={:#x} compare={:#x}",
                a.va, a.rkey, a.swap_add, a.compare
            )?;
        }
        if let Some(a) = &s.aeth {
            write!(
                f,
                " {} {}={} msn={}",
                a.kind,
                aeth_value_name(a.kind),
                a.value,
                a.msn
            )?;
        }
        if let Some(psns) = &s.sack {
            f.write_str(" sack=")?;
            write_runs(f, psns)?;
        }
        if let Some(o) = s.atomic_orig {
            write!(f, " orig={o:#x}")?;
        }
        if let Some(i) = s.imm {
            write!(f, " imm={i:#010x}")?;
        }
        if let Some(r) = s.inv_rkey {
            write!(f, " inv_rkey={r:#x}")?;
        }
        write!(f, " payload={}", s.payload_len.unwrap_or(0))?;
        write!(f, " icrc={}", s.icrc_status.unwrap_or("?"))
    }
}

/// PSNs as runs: `12-15,19`, or `-` for none.
fn write_runs(f: &mut fmt::Formatter<'_>, psns: &[u32]) -> fmt::Result {
    if psns.is_empty() {
        return f.write_str("-");
    }
    let mut i = 0;
    while i < psns.len() {
        let start = psns[i];
        while i + 1 < psns.len() && psns[i + 1] == (psns[i] + 1) & 0xff_ffff {
            i += 1;
        }
        if start != psns[0] {
            f.write_str(",")?;
        }
        if start == psns[i] {
            write!(f, "{start}")?;
        } else {
            write!(f, "{start}-{}", psns[i])?;
        }
        i += 1;
    }
    Ok(())
}

fn aeth_value_name(kind: &str) -> &'static str {
    match kind {
        "ACK" => "credits",
        "RNR-NAK" => "timer",
        "NAK" => "code",
        _ => "value",
    }
}
