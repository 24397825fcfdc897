//! A direct client's QP board (`docs/abi.md` §6.6): the client's engine holds its QPs, so
//! it copies their status and counters here, and rocexd reads them for `rocex stat` as it
//! reads its own QPs'.
//!
//! rocexd creates the memfd with the grant and fixes its shape: how many QPs it holds and
//! how many values each carries (`QpStatus::named`'s, in that order, on both sides).
//! The client is the only writer, under a sequence lock: the word at 0 is odd while it
//! writes. A reader that never finds it even and unchanged across its copy (a client
//! stopped mid-write, or a hostile one) gets nothing, after a few tries; never a wait.
//!
//! | offset | word |
//! |---|---|
//! | 0 | sequence (odd: being written) |
//! | 4 | entries written |
//! | 8 | capacity, in entries (rocexd's) |
//! | 12 | values per entry (rocexd's) |
//! | 16 | entries: QPN (4 bytes), QP type and state (1 byte each, 2 zero), values (8 bytes each) |

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use crate::SharedRegion;
use crate::sync::{Ordering, fence};

const SEQ: usize = 0;
const COUNT: usize = 4;
const CAPACITY: usize = 8;
const VALUES: usize = 12;
const ENTRIES: usize = 16;

/// Reads a reader tries before it gives up on a board being written.
const TRIES: usize = 4;

/// One QP as the board carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardEntry {
    /// QP number.
    pub qpn: u32,
    /// The QP type's code (`QpType`'s on the control socket).
    pub qp_type: u8,
    /// The QP state's code (`QpState`'s on the control socket).
    pub state: u8,
    /// The values, as many as the board's shape says.
    pub values: Vec<u64>,
}

/// A mapped board.
#[derive(Debug)]
pub struct Board {
    region: SharedRegion,
    capacity: usize,
    values: usize,
}

impl Board {
    /// A new board for `capacity` QPs of `values` values each (rocexd, at the grant).
    pub fn create(capacity: usize, values: usize) -> io::Result<Self> {
        let (c, v) = (u32::try_from(capacity), u32::try_from(values));
        let (Ok(c), Ok(v)) = (c, v) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "board too large",
            ));
        };
        let region = SharedRegion::create("rocex-qp-board", len(capacity, values))?;
        let view = region.view();
        for (off, w) in [(CAPACITY, c), (VALUES, v)] {
            view.write(off, &w.to_ne_bytes()).map_err(invalid)?;
        }
        Ok(Self {
            region,
            capacity,
            values,
        })
    }

    /// The board rocexd sent (the client): its shape is read from it and checked against
    /// its size, and its values per entry must be `values`, this side's count.
    pub fn from_fd(fd: OwnedFd, values: usize) -> io::Result<Self> {
        let region = SharedRegion::from_fd(fd)?;
        let view = region.view();
        let word = |off| {
            let mut b = [0u8; 4];
            view.read(off, &mut b)
                .map(|()| u32::from_ne_bytes(b) as usize)
        };
        let (capacity, theirs) = (
            word(CAPACITY).map_err(invalid)?,
            word(VALUES).map_err(invalid)?,
        );
        if theirs != values {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("QP board: {theirs} values per QP, this library has {values}"),
            ));
        }
        if len(capacity, values) > region.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "QP board: {capacity} QPs do not fit in {} bytes",
                    region.len()
                ),
            ));
        }
        Ok(Self {
            region,
            capacity,
            values,
        })
    }

    /// The memfd, to send with the grant.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.region.fd()
    }

    /// QPs the board holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes `qps` (the first [`capacity`](Self::capacity) of them) as the board's whole
    /// content; each entry's values are cut or zero-padded to the board's count.
    pub fn publish(&self, qps: impl IntoIterator<Item = BoardEntry>) {
        let mut buf = Vec::with_capacity(entry_len(self.values) * 8);
        let mut count = 0u32;
        for q in qps.into_iter().take(self.capacity) {
            buf.extend_from_slice(&q.qpn.to_ne_bytes());
            buf.extend_from_slice(&[q.qp_type, q.state, 0, 0]);
            let values = q.values.iter().copied().chain(std::iter::repeat(0));
            for v in values.take(self.values) {
                buf.extend_from_slice(&v.to_ne_bytes());
            }
            count += 1;
        }
        let view = self.region.view();
        let Ok(seq) = view.word(SEQ) else { return };
        let s = seq.load(Ordering::Relaxed) | 1;
        seq.store(s, Ordering::Relaxed);
        fence(Ordering::Release);
        let _ = view.write(COUNT, &count.to_ne_bytes());
        let _ = view.write(ENTRIES, &buf);
        seq.store(s.wrapping_add(1), Ordering::Release);
    }

    /// The board's content, or `None` when no read of it held still.
    pub fn read(&self) -> Option<Vec<BoardEntry>> {
        let view = self.region.view();
        let seq = view.word(SEQ).ok()?;
        let each = entry_len(self.values);
        for _ in 0..TRIES {
            let s = seq.load(Ordering::Acquire);
            if s & 1 == 1 {
                std::thread::yield_now();
                continue;
            }
            let mut c = [0u8; 4];
            view.read(COUNT, &mut c).ok()?;
            let count = (u32::from_ne_bytes(c) as usize).min(self.capacity);
            let mut buf = vec![0u8; count * each];
            view.read(ENTRIES, &mut buf).ok()?;
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) != s {
                continue;
            }
            return Some(buf.chunks_exact(each).map(|e| self.entry(e)).collect());
        }
        None
    }

    fn entry(&self, e: &[u8]) -> BoardEntry {
        let u64_at = |i: usize| u64::from_ne_bytes(e[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        BoardEntry {
            qpn: u32::from_ne_bytes(e[..4].try_into().unwrap()),
            qp_type: e[4],
            state: e[5],
            values: (0..self.values).map(u64_at).collect(),
        }
    }
}

/// Bytes of one entry of `values` values.
fn entry_len(values: usize) -> usize {
    8 + 8 * values
}

/// Bytes of a board.
fn len(capacity: usize, values: usize) -> usize {
    ENTRIES + capacity * entry_len(values)
}

fn invalid(e: crate::MemError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qp(qpn: u32, values: &[u64]) -> BoardEntry {
        BoardEntry {
            qpn,
            qp_type: 2,
            state: 3,
            values: values.to_vec(),
        }
    }

    #[test]
    fn what_the_client_publishes_rocexd_reads_cut_to_the_boards_shape() {
        let board = Board::create(2, 3).unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(board.fd(), 0).unwrap();
        let client = Board::from_fd(fd, 3).unwrap();
        assert_eq!(board.read(), Some(vec![]));
        client.publish([
            qp(0x41, &[1, 2, 3, 4]),
            qp(0x81, &[5]),
            qp(0xc1, &[6, 6, 6]),
        ]);
        assert_eq!(
            board.read(),
            Some(vec![qp(0x41, &[1, 2, 3]), qp(0x81, &[5, 0, 0])])
        );
        client.publish([qp(0x41, &[7, 8, 9])]);
        assert_eq!(board.read(), Some(vec![qp(0x41, &[7, 8, 9])]));
    }

    #[test]
    fn a_board_of_another_shape_or_being_written_gives_nothing() {
        let board = Board::create(2, 3).unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(board.fd(), 0).unwrap();
        let e = Board::from_fd(fd, 4).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 values per QP, this library has 4"),
            "{e}"
        );
        // A writer that stopped mid-write (or a client that keeps the word odd).
        board
            .region
            .view()
            .word(SEQ)
            .unwrap()
            .store(7, Ordering::Relaxed);
        assert_eq!(board.read(), None);
        // A count past the capacity reads as the capacity.
        let seq = board.region.view().word(SEQ).unwrap();
        seq.store(8, Ordering::Relaxed);
        board
            .region
            .view()
            .write(COUNT, &u32::MAX.to_ne_bytes())
            .unwrap();
        assert_eq!(board.read().map(|q| q.len()), Some(2));
    }
}
