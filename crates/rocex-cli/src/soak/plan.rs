//! What each message is: its operation, size and bytes, all derived from the seed, the
//! lane and the message's index in the lane, so that the checking side can recompute them
//! instead of trusting anything it received.

/// Bytes of the header that starts every message long enough to hold it.
pub(crate) const HEADER: usize = 16;
/// Largest message.
pub(crate) const MAX_LEN: u32 = 64 << 10;
/// Payload bytes after the header come from a fixed pseudo-random pattern, starting at an
/// offset below this; the pattern is `PATTERN_SPAN + MAX_LEN` bytes long.
pub(crate) const PATTERN_SPAN: usize = 64 << 10;
/// Tag of a message header ("SOAK").
const MAGIC: u32 = 0x4b41_4f53;

/// The operations the soak mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// SEND: the header carries the sequence number.
    Send,
    /// SEND_WITH_IMM: the immediate carries the sequence number.
    SendImm,
    /// RDMA WRITE_WITH_IMM: the immediate carries the sequence number; the receiver checks
    /// the written bytes.
    WriteImm,
    /// RDMA READ of the peer's pattern.
    Read,
    /// FETCH_ADD on the peer's shared counter.
    FetchAdd,
    /// CMP_SWAP on the lane's word: each expects the value the previous one stored.
    CmpSwap,
}

impl Kind {
    /// Every kind, in report order.
    pub(crate) const ALL: [Self; 6] = [
        Self::Send,
        Self::SendImm,
        Self::WriteImm,
        Self::Read,
        Self::FetchAdd,
        Self::CmpSwap,
    ];

    /// The name in reports.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::SendImm => "send_imm",
            Self::WriteImm => "write_imm",
            Self::Read => "read",
            Self::FetchAdd => "fetch_add",
            Self::CmpSwap => "cmp_swap",
        }
    }

    /// Whether the message consumes a receive at the peer (and so has a receive sequence
    /// number).
    pub(crate) const fn consumes_recv(self) -> bool {
        matches!(self, Self::Send | Self::SendImm | Self::WriteImm)
    }
}

/// One message of a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg {
    /// The operation.
    pub(crate) kind: Kind,
    /// Bytes moved (8 for atomics).
    pub(crate) len: u32,
    /// A per-message random word (the FETCH_ADD addend, the CMP_SWAP value, the READ
    /// offset).
    pub(crate) word: u64,
}

/// splitmix64's finalizer: a well-mixed 64-bit hash.
pub(crate) const fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Message `k` of `lane`. Mix: 24% SEND, 20% SEND_WITH_IMM, 20% WRITE_WITH_IMM, 16% READ,
/// 10% FETCH_ADD, 10% CMP_SWAP. Sizes: 10% up to 16 B (0 B included), 50% up to 512 B,
/// 25% up to 4 KiB, 10% up to 16 KiB (several packets at a 4096 MTU), 2% up to 64 KiB,
/// and 3% at the edges (1 B, around the 4096 MTU, whole packets, 64 KiB).
pub(crate) fn plan(seed: u64, lane: u32, k: u64) -> Msg {
    let h = mix(seed ^ mix((u64::from(lane) << 40) ^ k));
    let kind = match h % 100 {
        0..24 => Kind::Send,
        24..44 => Kind::SendImm,
        44..64 => Kind::WriteImm,
        64..80 => Kind::Read,
        80..90 => Kind::FetchAdd,
        _ => Kind::CmpSwap,
    };
    let word = mix(h);
    let r = h >> 16;
    let max = u64::from(MAX_LEN);
    let len = match (h >> 8) % 100 {
        0..10 => r % 17,
        10..60 => r % 513,
        60..85 => r % 4097,
        85..95 => r % (16 << 10) + 1,
        95..97 => (16 << 10) + r % (max - (16 << 10)) + 1,
        // The edges: one byte, an MTU exactly and either side of it, whole packets, the
        // largest message.
        _ => [1, 4095, 4096, 4097, 8192, 12288, max - 1, max][(r % 8) as usize],
    } as u32;
    let len = match kind {
        Kind::FetchAdd | Kind::CmpSwap => 8,
        Kind::Send => len.max(HEADER as u32),
        Kind::Read => len.max(1),
        Kind::SendImm | Kind::WriteImm => len,
    };
    Msg { kind, len, word }
}

/// The pattern payloads are cut from.
pub(crate) fn pattern() -> Vec<u8> {
    (0..PATTERN_SPAN + MAX_LEN as usize)
        .map(|i| (mix(i as u64 / 8) >> (8 * (i % 8))) as u8)
        .collect()
}

/// Where in the pattern the bytes of (`lane`, `seq`) after the header start (also the
/// source offset of a READ, from its `word`).
pub(crate) fn offset(word: u64) -> usize {
    (word % PATTERN_SPAN as u64) as usize
}

/// The offset word of a receive-consuming message: a function of the lane and its
/// receive sequence number only, so the receiver can recompute it.
pub(crate) fn payload_word(lane: u32, seq: u32) -> u64 {
    mix((u64::from(lane) << 32) | u64::from(seq))
}

/// The header of message `seq` of `lane`, `len` bytes long.
pub(crate) fn header(lane: u32, seq: u32, len: u32) -> [u8; HEADER] {
    let mut h = [0; HEADER];
    for (i, v) in [MAGIC, lane, seq, len].into_iter().enumerate() {
        h[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    h
}

/// The sequence number a received header names, if it is a header of `lane`.
pub(crate) fn header_seq(lane: u32, bytes: &[u8]) -> Option<u32> {
    let word = |i: usize| {
        bytes
            .get(4 * i..4 * i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    (word(0)? == MAGIC && word(1)? == lane).then_some(word(2)?)
}

/// Whether `got` is exactly the bytes of message `seq` of `lane`: the header (cut to the
/// message's length), then the pattern from the message's offset.
pub(crate) fn payload_matches(pattern: &[u8], lane: u32, seq: u32, got: &[u8]) -> bool {
    let len = got.len();
    let h = header(lane, seq, len as u32);
    let n = len.min(HEADER);
    if got[..n] != h[..n] {
        return false;
    }
    let off = offset(payload_word(lane, seq));
    got[n..] == pattern[off..off + (len - n)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_deterministic_and_mixed() {
        let mut seen = [0u32; 6];
        let (mut zero, mut full, mut multi) = (0, 0, 0);
        for k in 0..20_000 {
            let m = plan(7, 3, k);
            assert_eq!(m, plan(7, 3, k));
            assert!(m.len <= MAX_LEN);
            seen[Kind::ALL.iter().position(|x| *x == m.kind).unwrap()] += 1;
            zero += u32::from(m.len == 0);
            full += u32::from(m.len == MAX_LEN);
            multi += u32::from(m.len > 4096);
            if m.kind == Kind::Send {
                assert!(m.len as usize >= HEADER);
            }
        }
        assert!(seen.iter().all(|&n| n > 1000), "{seen:?}");
        assert!(
            zero > 0 && full > 0 && multi > 1000,
            "{zero} {full} {multi}"
        );
        assert_ne!(plan(7, 3, 1), plan(8, 3, 1));
    }

    #[test]
    fn payload_round_trip() {
        let p = pattern();
        for len in [0usize, 1, 15, 16, 17, 4096, MAX_LEN as usize] {
            let h = header(2, 99, len as u32);
            let off = offset(payload_word(2, 99));
            let mut msg: Vec<u8> = h[..len.min(HEADER)].to_vec();
            msg.extend_from_slice(&p[off..off + len.saturating_sub(HEADER)]);
            assert!(payload_matches(&p, 2, 99, &msg));
            // The sequence number is in the header's third word.
            assert_eq!(payload_matches(&p, 2, 98, &msg), len <= 8);
            if len > 0 {
                msg[len - 1] ^= 1;
                assert!(!payload_matches(&p, 2, 99, &msg));
            }
        }
        assert_eq!(header_seq(2, &header(2, 99, 20)), Some(99));
        assert_eq!(header_seq(3, &header(2, 99, 20)), None);
        assert_eq!(header_seq(2, &[0; 4]), None);
    }
}
