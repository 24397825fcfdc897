//! Frames from pcap and pcapng files, whichever the file is.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

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

/// Why a capture could not be read.
#[derive(Debug)]
pub enum CaptureError {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file is neither pcap nor pcapng, or is corrupt.
    Format(String),
    /// The capture's link type is not Ethernet.
    LinkType(String),
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot read the capture: {e}"),
            Self::Format(e) => write!(f, "not a readable pcap or pcapng file: {e}"),
            Self::LinkType(t) => write!(
                f,
                "link type {t} is not supported: capture on an Ethernet device"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Reads every frame of a pcap or pcapng file.
pub fn read(path: &Path) -> Result<Vec<Captured>, CaptureError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .map_err(CaptureError::Io)?;
    read_bytes(&bytes)
}

/// Reads every frame of a pcap or pcapng image in memory.
pub fn read_bytes(bytes: &[u8]) -> Result<Vec<Captured>, CaptureError> {
    if bytes.starts_with(&PCAPNG_MAGIC) {
        read_pcapng(bytes)
    } else {
        read_pcap(bytes)
    }
}

fn ethernet_only(link: DataLink) -> Result<(), CaptureError> {
    match link {
        DataLink::ETHERNET => Ok(()),
        other => Err(CaptureError::LinkType(format!("{other:?}"))),
    }
}

fn read_pcap(bytes: &[u8]) -> Result<Vec<Captured>, CaptureError> {
    let mut r = PcapReader::new(bytes).map_err(|e| CaptureError::Format(e.to_string()))?;
    ethernet_only(r.header().datalink)?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| CaptureError::Format(e.to_string()))?;
        out.push(Captured {
            ts: p.timestamp.as_secs_f64(),
            orig_len: p.orig_len,
            data: p.data.into_owned(),
        });
    }
    Ok(out)
}

fn read_pcapng(bytes: &[u8]) -> Result<Vec<Captured>, CaptureError> {
    let mut r = PcapNgReader::new(bytes).map_err(|e| CaptureError::Format(e.to_string()))?;
    let mut links = Vec::new();
    let mut out = Vec::new();
    while let Some(b) = r.next_block() {
        match b.map_err(|e| CaptureError::Format(e.to_string()))? {
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
                out.push(Captured {
                    ts: p.timestamp.as_secs_f64(),
                    orig_len: p.original_len,
                    data: p.data.into_owned(),
                });
            }
            Block::SimplePacket(p) => {
                out.push(Captured {
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
