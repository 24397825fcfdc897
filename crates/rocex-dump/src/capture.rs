//! Frames from pcap and pcapng files, whichever the file is.
//!
//! A capture cut short (a copy interrupted, `head -c`, a capture still being written) keeps
//! its intact frames: [`open`] returns them with the number of the last one, as tcpdump
//! prints what it can before "truncated dump file". [`read`] is the strict form for callers
//! that need the whole file.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError};

/// One captured frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    /// Capture time, seconds since the epoch.
    pub ts: f64,
    /// The frame's bytes as captured.
    pub data: Vec<u8>,
    /// Length on the wire (more than `data.len()` when the capture truncated it).
    pub orig_len: u32,
}

/// The frames of a capture file, and whether the file ended inside a record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capture {
    /// Every intact frame, in file order.
    pub frames: Vec<Captured>,
    /// The file ends in the middle of a header or a record after these frames.
    pub truncated: bool,
}

impl Capture {
    /// The number of the last intact frame of a file cut short.
    pub fn truncated_after(&self) -> Option<u64> {
        self.truncated.then_some(self.frames.len() as u64)
    }

    /// "truncated capture after frame N" when the file was cut short.
    pub fn truncation(&self) -> Option<CaptureError> {
        self.truncated_after()
            .map(|after| CaptureError::Truncated { after })
    }
}

/// Why a capture could not be read.
#[derive(Debug)]
pub enum CaptureError {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file has no bytes at all.
    Empty,
    /// The file is neither pcap nor pcapng, or is corrupt.
    Format(String),
    /// The capture's link type is not Ethernet.
    LinkType(String),
    /// The file ends inside a header or a record, after `after` intact frames.
    Truncated {
        /// Intact frames before the cut.
        after: u64,
    },
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot read the capture: {e}"),
            Self::Empty => write!(f, "empty file"),
            Self::Format(e) => write!(f, "not a readable pcap or pcapng file: {e}"),
            Self::LinkType(t) => write!(
                f,
                "link type {t} is not supported: capture on an Ethernet device"
            ),
            Self::Truncated { after } => write!(f, "truncated capture after frame {after}"),
        }
    }
}

impl std::error::Error for CaptureError {}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// The four pcap magic numbers (micro- and nanosecond, either byte order), as stored.
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x4d, 0x3c, 0xb2, 0xa1],
];

/// Reads the capture at `path`, keeping the intact frames of a file cut short.
pub fn open(path: &Path) -> Result<Capture, CaptureError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .map_err(CaptureError::Io)?;
    parse(&bytes)
}

/// Reads every frame of a pcap or pcapng file; a file cut short is an error.
pub fn read(path: &Path) -> Result<Vec<Captured>, CaptureError> {
    whole(open(path)?)
}

/// Reads every frame of a pcap or pcapng image in memory; an image cut short is an error.
pub fn read_bytes(bytes: &[u8]) -> Result<Vec<Captured>, CaptureError> {
    whole(parse(bytes)?)
}

fn whole(c: Capture) -> Result<Vec<Captured>, CaptureError> {
    match c.truncation() {
        Some(e) => Err(e),
        None => Ok(c.frames),
    }
}

/// Parses a pcap or pcapng image, keeping the intact frames of one cut short.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    if bytes.is_empty() {
        return Err(CaptureError::Empty);
    }
    let head = &bytes[..bytes.len().min(4)];
    if PCAPNG_MAGIC.starts_with(head) {
        read_pcapng(bytes)
    } else if PCAP_MAGICS.iter().any(|m| m.starts_with(head)) {
        read_pcap(bytes)
    } else {
        Err(CaptureError::Format(format!(
            "unknown magic number {}",
            head.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )))
    }
}

fn ethernet_only(link: DataLink) -> Result<(), CaptureError> {
    match link {
        DataLink::ETHERNET => Ok(()),
        other => Err(CaptureError::LinkType(format!("{other:?}"))),
    }
}

/// What a parser error means here: the end of a file cut short, or a corrupt one.
fn cut_or_corrupt(e: PcapError, out: &mut Capture) -> Result<(), CaptureError> {
    match e {
        PcapError::IncompleteBuffer => {
            out.truncated = true;
            Ok(())
        }
        e => Err(CaptureError::Format(e.to_string())),
    }
}

fn read_pcap(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let mut out = Capture::default();
    let (mut rest, parser) = match PcapParser::new(bytes) {
        Ok(p) => p,
        Err(e) => return cut_or_corrupt(e, &mut out).map(|()| out),
    };
    ethernet_only(parser.header().datalink)?;
    while !rest.is_empty() {
        match parser.next_packet(rest) {
            Ok((r, p)) => {
                rest = r;
                out.frames.push(Captured {
                    ts: p.timestamp.as_secs_f64(),
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                });
            }
            Err(e) => {
                cut_or_corrupt(e, &mut out)?;
                break;
            }
        }
    }
    Ok(out)
}

fn read_pcapng(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let mut out = Capture::default();
    let (mut rest, mut parser) = match PcapNgParser::new(bytes) {
        Ok(p) => p,
        Err(e) => return cut_or_corrupt(e, &mut out).map(|()| out),
    };
    let mut links = Vec::new();
    while !rest.is_empty() {
        let block = match parser.next_block(rest) {
            Ok((r, b)) => {
                rest = r;
                b
            }
            Err(e) => {
                cut_or_corrupt(e, &mut out)?;
                break;
            }
        };
        match block {
            Block::InterfaceDescription(i) => {
                ethernet_only(i.linktype)?;
                links.push(i.linktype);
            }
            Block::EnhancedPacket(p) => {
                if p.interface_id as usize >= links.len() {
                    return Err(CaptureError::Format(format!(
                        "packet on undeclared interface {}",
                        p.interface_id
                    )));
                }
                out.frames.push(Captured {
                    ts: p.timestamp.as_secs_f64(),
                    orig_len: p.original_len,
                    data: p.data.into_owned(),
                });
            }
            Block::SimplePacket(p) => {
                out.frames.push(Captured {
                    ts: 0.0,
                    orig_len: p.original_len,
                    data: p.data.into_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap image: the global header and one 60-byte frame per entry of `frames`.
    fn pcap(frames: usize) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&65535u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        for i in 0..frames {
            v.extend_from_slice(&(i as u32).to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
            v.extend_from_slice(&60u32.to_le_bytes());
            v.extend_from_slice(&60u32.to_le_bytes());
            v.extend_from_slice(&[i as u8; 60]);
        }
        v
    }

    #[test]
    fn a_cut_keeps_the_frames_before_it() {
        let whole = pcap(3);
        let c = parse(&whole).unwrap();
        assert_eq!((c.frames.len(), c.truncated), (3, false));
        for cut in [whole.len() - 1, whole.len() - 60, 24 + 2 * 76 + 10] {
            let c = parse(&whole[..cut]).unwrap();
            assert_eq!((c.frames.len(), c.truncated), (2, true), "cut at {cut}");
            assert_eq!(c.frames[1].data, vec![1u8; 60]);
            assert_eq!(
                read_bytes(&whole[..cut]).unwrap_err().to_string(),
                "truncated capture after frame 2"
            );
        }
        let c = parse(&whole[..10]).unwrap();
        assert_eq!((c.frames.len(), c.truncated), (0, true));
    }

    #[test]
    fn empty_and_foreign_files_are_errors() {
        assert_eq!(parse(&[]).unwrap_err().to_string(), "empty file");
        assert!(matches!(
            parse(b"not a capture"),
            Err(CaptureError::Format(_))
        ));
        assert!(matches!(parse(&[0xd4, 0x00]), Err(CaptureError::Format(_))));
    }
}
