//! perftest's out-of-band exchange over TCP (no `-R`), byte for byte, so that either side
//! can be a stock `ib_*_bw`/`ib_*_lat` 6.x.
//!
//! The exchange is a strict alternation: for every item the client writes first and then
//! reads, the server reads first and then writes, each item in one `write` because
//! perftest reads each with one `read` of exactly its size. In order:
//!
//! 1. the version string (16 bytes, NUL padded); perftest refuses peers older than 5.70;
//! 2. the cycle buffer (page size) and the cache line size, 4-byte big-endian ints, of
//!    which each side keeps the larger;
//! 3. the IB MTU enum as decimal text with its NUL (2 bytes), of which each keeps the
//!    smaller;
//! 4. a number of "handshakes", each the 108-byte key message of every QP
//!    (`LID:OUT_READS:QPN:PSN:RKEY:VADDR:GID bytes:SRQN:`), the same message repeated:
//!    perftest uses them as barriers (after RTR, before and after the run);
//! 5. for the one-sided bandwidth tests, five 8-byte big-endian fields of the client's
//!    result (size, iterations, peak, average, message rate), then a last handshake.
//!
//! rocex marks itself by text after the version's NUL, which perftest ignores (it reads
//! the version with `atof`); two rocex ends then also exchange a verification verdict at
//! the very end, which a perftest peer never sees.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The perftest version rocex speaks (perftest 25.01's).
const VERSION: &str = "6.24";
/// What follows the version's NUL when the sender is rocex.
const ROCEX_MARK: &[u8] = b"rocex";
/// The version field's size (`MAX_VERSION`).
const VERSION_LEN: usize = 16;
/// The key message with a GID (`KEY_MSG_SIZE_GID`), NUL included.
pub(crate) const KEY_MSG_LEN: usize = 108;
/// How long a peer may stay silent in the middle of the exchange.
const PEER_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the exchange failed. A bad peer message is an error, never a panic.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// The socket failed or the peer closed it.
    Io(io::Error),
    /// The peer said nothing for too long.
    Timeout(&'static str),
    /// A message did not parse.
    Malformed { what: &'static str, why: String },
    /// The peer's perftest is too old for this exchange.
    OldPeer(String),
}

impl std::fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "out-of-band connection: {e}"),
            Self::Timeout(what) => write!(
                f,
                "the peer sent no {what} within {} s",
                PEER_TIMEOUT.as_secs()
            ),
            Self::Malformed { what, why } => write!(f, "bad {what} from the peer: {why}"),
            Self::OldPeer(v) => write!(
                f,
                "the peer's perftest version {v:?} is older than 5.70, which this exchange needs"
            ),
        }
    }
}

impl std::error::Error for ExchangeError {}

impl From<io::Error> for ExchangeError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<ExchangeError> for io::Error {
    fn from(e: ExchangeError) -> Self {
        match e {
            ExchangeError::Io(e) => e,
            other => Self::other(other.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, ExchangeError>;

/// One QP's key message (`struct pingpong_dest` as perftest prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMsg {
    pub(crate) lid: u16,
    /// READs and atomics this side accepts as responder.
    pub(crate) out_reads: u32,
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    pub(crate) rkey: u32,
    pub(crate) vaddr: u64,
    pub(crate) gid: [u8; 16],
    pub(crate) srqn: u32,
}

impl KeyMsg {
    /// `KEY_PRINT_FMT_GID` with its NUL: 107 characters and a 0.
    pub(crate) fn encode(&self) -> [u8; KEY_MSG_LEN] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}:")).collect();
        let text = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{gid}{:08x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr, self.srqn
        );
        let mut out = [0u8; KEY_MSG_LEN];
        let n = text.len().min(KEY_MSG_LEN - 1);
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        out
    }

    /// Parses the fields as perftest does (hexadecimal between colons), but refuses what
    /// perftest would silently misread.
    pub(crate) fn decode(msg: &[u8]) -> Result<Self> {
        let bad = |why: &str| ExchangeError::Malformed {
            what: "key message",
            why: why.to_owned(),
        };
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| bad("not text"))?;
        let fields: Vec<&str> = text.split(':').collect();
        // 6 fields, 16 GID bytes, SRQN, and the empty remainder after the last colon.
        if fields.len() < 23 {
            return Err(bad(&format!("{} fields, expected 23", fields.len())));
        }
        let hex = |i: usize, max_digits: usize| -> Result<u64> {
            let f = fields[i];
            if f.is_empty() || f.len() > max_digits {
                return Err(bad(&format!("field {i} is {f:?}")));
            }
            u64::from_str_radix(f, 16)
                .map_err(|_| bad(&format!("field {i} ({f:?}) is not hexadecimal")))
        };
        let mut gid = [0u8; 16];
        for (k, b) in gid.iter_mut().enumerate() {
            *b = hex(6 + k, 2)? as u8;
        }
        Ok(Self {
            lid: hex(0, 4)? as u16,
            out_reads: hex(1, 8)? as u32,
            qpn: hex(2, 6)? as u32,
            psn: hex(3, 6)? as u32,
            rkey: hex(4, 8)? as u32,
            vaddr: hex(5, 16)?,
            gid,
            srqn: hex(22, 8)? as u32,
        })
    }
}

/// The client's result as `xchg_bw_reports` sends it (without the per-port fields).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct BwReport {
    pub(crate) size: u64,
    pub(crate) iters: u64,
    pub(crate) bw_peak: f64,
    pub(crate) bw_avg: f64,
    pub(crate) msg_rate: f64,
}

/// What two rocex ends tell each other at the end: whether this side checked data, and
/// how many bytes or values it found wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    pub(crate) checked: bool,
    pub(crate) errors: u64,
}

/// What the first three items settled.
#[derive(Debug, Clone)]
pub(crate) struct Prelude {
    /// The peer's version text.
    pub(crate) peer_version: String,
    /// Whether the peer is rocex (so verdicts can be exchanged).
    pub(crate) peer_is_rocex: bool,
    /// The larger of the two page sizes: perftest's remote buffers are at least this.
    pub(crate) cycle_buffer: u32,
    /// The path MTU both accept (the smaller IB MTU enum).
    pub(crate) mtu_enum: u8,
}

/// The TCP connection and which side of the alternation this end is.
pub(crate) struct Oob {
    stream: TcpStream,
    client: bool,
}

impl Oob {
    pub(crate) fn new(stream: TcpStream, client: bool) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Self { stream, client })
    }

    /// Writes one item in one call, as perftest's reader needs.
    fn write_item(&mut self, data: &[u8]) -> Result<()> {
        self.stream.set_nonblocking(false)?;
        let r = self.stream.write_all(data);
        self.stream.set_nonblocking(true)?;
        Ok(r?)
    }

    /// Reads exactly `buf.len()` bytes, calling `pump` between attempts so the engine keeps
    /// answering the peer while we wait for it.
    fn read_item(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        pump: &mut dyn FnMut() -> io::Result<()>,
    ) -> Result<()> {
        let mut got = 0;
        let mut last = Instant::now();
        while got < buf.len() {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(ExchangeError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the peer closed the connection before its {what}"),
                    )));
                }
                Ok(n) => {
                    got += n;
                    last = Instant::now();
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted =>
                {
                    if last.elapsed() > PEER_TIMEOUT {
                        return Err(ExchangeError::Timeout(what));
                    }
                    pump()?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// One item of the alternation (`ctx_xchg_data`).
    fn xchg(
        &mut self,
        mine: &[u8],
        theirs: &mut [u8],
        what: &'static str,
        pump: &mut dyn FnMut() -> io::Result<()>,
    ) -> Result<()> {
        if self.client {
            self.write_item(mine)?;
            self.read_item(theirs, what, pump)?;
        } else {
            self.read_item(theirs, what, pump)?;
            self.write_item(mine)?;
        }
        Ok(())
    }

    /// Versions, page and cache line sizes, MTU (`exchange_versions`, `check_sys_data`,
    /// `check_mtu`).
    pub(crate) fn prelude(&mut self, mtu_enum: u8) -> Result<Prelude> {
        let mut idle = || {
            std::thread::sleep(Duration::from_millis(1));
            Ok(())
        };
        let mut mine = [0u8; VERSION_LEN];
        mine[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
        mine[VERSION.len() + 1..VERSION.len() + 1 + ROCEX_MARK.len()].copy_from_slice(ROCEX_MARK);
        let mut theirs = [0u8; VERSION_LEN];
        self.xchg(&mine, &mut theirs, "version", &mut idle)?;
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        let peer_version = String::from_utf8_lossy(&theirs[..end]).into_owned();
        let peer_is_rocex = theirs[end..]
            .windows(ROCEX_MARK.len())
            .any(|w| w == ROCEX_MARK);
        if leading_number(&peer_version) < 5.70 {
            return Err(ExchangeError::OldPeer(peer_version));
        }
        let page = 4096u32;
        let mut rem = [0u8; 4];
        self.xchg(&page.to_be_bytes(), &mut rem, "page size", &mut idle)?;
        let cycle_buffer = page.max(u32::from_be_bytes(rem));
        self.xchg(&64u32.to_be_bytes(), &mut rem, "cache line size", &mut idle)?;
        let mut mine_mtu = [0u8; 2];
        mine_mtu[0] = b'0' + mtu_enum.min(9);
        let mut rem_mtu = [0u8; 2];
        self.xchg(&mine_mtu, &mut rem_mtu, "MTU", &mut idle)?;
        let peer_mtu = rem_mtu[0].wrapping_sub(b'0');
        // perftest keeps its own MTU when the peer's is not a valid enum.
        let mtu_enum = if (1..=5).contains(&peer_mtu) {
            mtu_enum.min(peer_mtu)
        } else {
            mtu_enum
        };
        Ok(Prelude {
            peer_version,
            peer_is_rocex,
            cycle_buffer,
            mtu_enum,
        })
    }

    /// One handshake: every QP's key message each way (`ctx_hand_shake` per QP).
    pub(crate) fn handshake(
        &mut self,
        mine: &[KeyMsg],
        pump: &mut dyn FnMut() -> io::Result<()>,
    ) -> Result<Vec<KeyMsg>> {
        let mut out = Vec::with_capacity(mine.len());
        for m in mine {
            let mut buf = [0u8; KEY_MSG_LEN];
            self.xchg(&m.encode(), &mut buf, "key message", pump)?;
            out.push(KeyMsg::decode(&buf)?);
        }
        Ok(out)
    }

    /// `xchg_bw_reports` for a peer of version 5.33 or later: five 8-byte fields.
    pub(crate) fn bw_reports(
        &mut self,
        mine: &BwReport,
        pump: &mut dyn FnMut() -> io::Result<()>,
    ) -> Result<BwReport> {
        let mut field = |v: [u8; 8], what: &'static str| -> Result<[u8; 8]> {
            let mut r = [0u8; 8];
            self.xchg(&v, &mut r, what, pump)?;
            Ok(r)
        };
        let size = u64::from_be_bytes(field(mine.size.to_be_bytes(), "report size")?);
        let iters = u64::from_be_bytes(field(mine.iters.to_be_bytes(), "report iterations")?);
        let bw_peak = f64::from_be_bytes(field(mine.bw_peak.to_be_bytes(), "report peak")?);
        let bw_avg = f64::from_be_bytes(field(mine.bw_avg.to_be_bytes(), "report average")?);
        let msg_rate =
            f64::from_be_bytes(field(mine.msg_rate.to_be_bytes(), "report message rate")?);
        Ok(BwReport {
            size,
            iters,
            bw_peak,
            bw_avg,
            msg_rate,
        })
    }

    /// rocex to rocex only: the verification verdicts, `RVFY`, checked, errors.
    pub(crate) fn verdicts(
        &mut self,
        mine: Verdict,
        pump: &mut dyn FnMut() -> io::Result<()>,
    ) -> Result<Verdict> {
        let mut m = [0u8; 16];
        m[..4].copy_from_slice(b"RVFY");
        m[4..8].copy_from_slice(&u32::from(mine.checked).to_be_bytes());
        m[8..].copy_from_slice(&mine.errors.to_be_bytes());
        let mut r = [0u8; 16];
        self.xchg(&m, &mut r, "verdict", pump)?;
        if &r[..4] != b"RVFY" {
            return Err(ExchangeError::Malformed {
                what: "verdict",
                why: "no RVFY tag".into(),
            });
        }
        let checked = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) != 0;
        let mut e = [0u8; 8];
        e.copy_from_slice(&r[8..]);
        Ok(Verdict {
            checked,
            errors: u64::from_be_bytes(e),
        })
    }
}

/// `atof` of a version: the leading decimal number, 0 when there is none.
fn leading_number(s: &str) -> f64 {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..end].parse().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_message_matches_perftest() {
        // As ib_write_bw 6.24 sent it in pcaps/write_bw.pcap.
        let wire = b"0000:0001:000011:276780:00000249:0000558adc75f000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:";
        let k = KeyMsg::decode(wire).unwrap();
        assert_eq!(k.qpn, 0x11);
        assert_eq!(k.psn, 0x276780);
        assert_eq!(k.rkey, 0x249);
        assert_eq!(k.vaddr, 0x558a_dc75_f000);
        assert_eq!(&k.gid[10..], &[0xff, 0xff, 0xc6, 0x12, 0, 0x0c]);
        let enc = k.encode();
        assert_eq!(&enc[..wire.len()], wire);
        assert_eq!(enc[KEY_MSG_LEN - 1], 0);
        assert!(KeyMsg::decode(b"0000:0001:zz").is_err());
        assert!(KeyMsg::decode(&[0xff; KEY_MSG_LEN]).is_err());
    }

    #[test]
    fn versions() {
        assert!((leading_number("6.24") - 6.24).abs() < 1e-9);
        assert_eq!(leading_number("x"), 0.0);
    }
}
