//! The BTH opcode table (IBTA Vol. 1 §9.2.1, table 38; annex A17 for CNP; IBTA 1.5
//! memory placement extensions for FLUSH and ATOMIC_WRITE).
//!
//! Parsing is driven by [`Opcode::info`]: which extension headers follow the BTH, whether
//! payload follows them, the packet's place in its message, and whether it is a request.

use core::fmt;

/// An extension transport header that may follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ext {
    /// Datagram ETH (UD).
    Deth,
    /// Flush ETH (FLUSH, before the RETH).
    Feth,
    /// RDMA ETH.
    Reth,
    /// Selective-repeat ETH (rocex's SR opcodes): a packet's message number and offset.
    SrEth,
    /// Atomic ETH.
    AtomicEth,
    /// ACK ETH.
    Aeth,
    /// Selective acknowledgement bitmap (rocex's SR_ACKNOWLEDGE).
    Sack,
    /// Atomic ACK ETH.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH.
    Ieth,
    /// The 16 reserved bytes of a congestion notification packet.
    Cnp,
}

impl Ext {
    /// Every extension header in the order they stand on the wire when several are present
    /// (rxe_opcode.c offsets: FETH before RETH, RETH before ImmDt, AETH before AtomicAckETH,
    /// DETH before ImmDt; rocex's SR headers follow the RETH and the AETH they extend).
    pub const WIRE_ORDER: [Self; 11] = [
        Self::Deth,
        Self::Feth,
        Self::Reth,
        Self::SrEth,
        Self::AtomicEth,
        Self::Aeth,
        Self::Sack,
        Self::AtomicAckEth,
        Self::ImmDt,
        Self::Ieth,
        Self::Cnp,
    ];

    /// Length of the header in bytes.
    pub const fn header_len(self) -> usize {
        match self {
            Self::Deth | Self::AtomicAckEth | Self::SrEth => 8,
            Self::Feth | Self::Aeth | Self::ImmDt | Self::Ieth => 4,
            Self::Reth | Self::Cnp => 16,
            Self::AtomicEth => 28,
            Self::Sack => crate::sack::LEN,
        }
    }

    /// The header's bit in an [`ExtSet`]: its place in wire order, which is the order the
    /// variants are declared in (checked below), so that sets iterate by their bits.
    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

const _: () = {
    let mut i = 0;
    while i < Ext::WIRE_ORDER.len() {
        assert!(
            Ext::WIRE_ORDER[i] as usize == i,
            "Ext is declared in wire order"
        );
        i += 1;
    }
};

/// A set of extension headers, iterated in wire order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtSet(u16);

impl ExtSet {
    /// No extension header.
    pub const EMPTY: Self = Self(0);

    /// The set holding exactly `exts`.
    pub const fn of(exts: &[Ext]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < exts.len() {
            bits |= exts[i].bit();
            i += 1;
        }
        Self(bits)
    }

    /// The set with `ext` added.
    #[must_use]
    pub const fn with(self, ext: Ext) -> Self {
        Self(self.0 | ext.bit())
    }

    /// True when `ext` is in the set.
    pub const fn contains(self, ext: Ext) -> bool {
        self.0 & ext.bit() != 0
    }

    /// Total length of the headers in the set.
    pub const fn header_len(self) -> usize {
        let (mut n, mut bits) = (0, self.0);
        while bits != 0 {
            n += Ext::WIRE_ORDER[bits.trailing_zeros() as usize].header_len();
            bits &= bits - 1;
        }
        n
    }

    /// True when the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The headers of the set in wire order.
    pub fn iter(self) -> impl Iterator<Item = Ext> {
        // A set bit's position is its header's place in wire order (see `Ext::bit`).
        let mut bits = self.0;
        core::iter::from_fn(move || {
            let i = bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            Ext::WIRE_ORDER.get(i).copied()
        })
    }
}

impl fmt::Debug for ExtSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The transport service an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Reliable Connection.
    Rc,
    /// Unreliable Connection.
    Uc,
    /// Unreliable Datagram.
    Ud,
    /// Congestion notification (annex A17).
    Cnp,
}

/// Where a packet stands in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet.
    Only,
}

impl Position {
    /// True for `First` and `Only`: the packet starts a message.
    pub const fn starts(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// True for `Last` and `Only`: the packet ends a message.
    pub const fn ends(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// The operation a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (any variant).
    Send,
    /// RDMA WRITE (any variant).
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Atomic acknowledge.
    AtomicAcknowledge,
    /// Atomic compare and swap.
    CompareSwap,
    /// Atomic fetch and add.
    FetchAdd,
    /// FLUSH (memory placement extension).
    Flush,
    /// ATOMIC WRITE (memory placement extension).
    AtomicWrite,
    /// Congestion notification.
    Cnp,
}

impl Operation {
    /// True for packets a responder sends (READ responses and acknowledgements).
    pub const fn is_response(self) -> bool {
        matches!(
            self,
            Self::ReadResponse | Self::Acknowledge | Self::AtomicAcknowledge
        )
    }
}

/// What the table says of one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The name as rxe and the IBTA spec spell it, e.g. `RC_SEND_FIRST`.
    pub name: &'static str,
    /// Transport service.
    pub service: Service,
    /// Operation.
    pub operation: Operation,
    /// Place in the message.
    pub position: Position,
    /// Extension headers after the BTH.
    pub exts: ExtSet,
    /// Whether payload may follow the headers.
    pub payload: bool,
    /// Whether the message carries immediate data.
    pub immediate: bool,
    /// Whether the message carries an rkey to invalidate.
    pub invalidate: bool,
}

impl OpcodeInfo {
    /// Length of BTH plus extension headers.
    pub const fn header_len(&self) -> usize {
        crate::bth::LEN + self.exts.header_len()
    }
}

/// A BTH opcode: an open set, so unknown codes survive parsing into an error that names them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

macro_rules! opcodes {
    ($( $konst:ident = $code:literal, $service:ident, $op:ident, $pos:ident, [$($ext:ident),*], $payload:literal; )*) => {
        impl Opcode {
            $(
                #[doc = concat!("`", stringify!($konst), "` (", stringify!($code), ").")]
                pub const $konst: Self = Self($code);
            )*

            /// The table entry for this opcode, or `None` for a reserved or unsupported code.
            pub const fn info(self) -> Option<&'static OpcodeInfo> {
                TABLE[self.0 as usize].as_ref()
            }
        }

        static TABLE: [Option<OpcodeInfo>; 256] = {
            let mut t = [None; 256];
            $(
                t[$code] = Some(OpcodeInfo {
                    name: stringify!($konst),
                    service: Service::$service,
                    operation: Operation::$op,
                    position: Position::$pos,
                    exts: ExtSet::of(&[$(Ext::$ext),*]),
                    payload: $payload,
                    immediate: ExtSet::of(&[$(Ext::$ext),*]).contains(Ext::ImmDt),
                    invalidate: ExtSet::of(&[$(Ext::$ext),*]).contains(Ext::Ieth),
                });
            )*
            t
        };
    };
}

opcodes! {
    RC_SEND_FIRST = 0x00, Rc, Send, First, [], true;
    RC_SEND_MIDDLE = 0x01, Rc, Send, Middle, [], true;
    RC_SEND_LAST = 0x02, Rc, Send, Last, [], true;
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, Rc, Send, Last, [ImmDt], true;
    RC_SEND_ONLY = 0x04, Rc, Send, Only, [], true;
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, Rc, Send, Only, [ImmDt], true;
    RC_RDMA_WRITE_FIRST = 0x06, Rc, Write, First, [Reth], true;
    RC_RDMA_WRITE_MIDDLE = 0x07, Rc, Write, Middle, [], true;
    RC_RDMA_WRITE_LAST = 0x08, Rc, Write, Last, [], true;
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, Rc, Write, Last, [ImmDt], true;
    RC_RDMA_WRITE_ONLY = 0x0a, Rc, Write, Only, [Reth], true;
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, Rc, Write, Only, [Reth, ImmDt], true;
    RC_RDMA_READ_REQUEST = 0x0c, Rc, ReadRequest, Only, [Reth], false;
    RC_RDMA_READ_RESPONSE_FIRST = 0x0d, Rc, ReadResponse, First, [Aeth], true;
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e, Rc, ReadResponse, Middle, [], true;
    RC_RDMA_READ_RESPONSE_LAST = 0x0f, Rc, ReadResponse, Last, [Aeth], true;
    RC_RDMA_READ_RESPONSE_ONLY = 0x10, Rc, ReadResponse, Only, [Aeth], true;
    RC_ACKNOWLEDGE = 0x11, Rc, Acknowledge, Only, [Aeth], false;
    RC_ATOMIC_ACKNOWLEDGE = 0x12, Rc, AtomicAcknowledge, Only, [Aeth, AtomicAckEth], false;
    RC_COMPARE_SWAP = 0x13, Rc, CompareSwap, Only, [AtomicEth], false;
    RC_FETCH_ADD = 0x14, Rc, FetchAdd, Only, [AtomicEth], false;
    RC_SEND_LAST_WITH_INVALIDATE = 0x16, Rc, Send, Last, [Ieth], true;
    RC_SEND_ONLY_WITH_INVALIDATE = 0x17, Rc, Send, Only, [Ieth], true;
    RC_FLUSH = 0x1c, Rc, Flush, Only, [Feth, Reth], false;
    RC_ATOMIC_WRITE = 0x1d, Rc, AtomicWrite, Only, [Reth], true;
    UC_SEND_FIRST = 0x20, Uc, Send, First, [], true;
    UC_SEND_MIDDLE = 0x21, Uc, Send, Middle, [], true;
    UC_SEND_LAST = 0x22, Uc, Send, Last, [], true;
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, Uc, Send, Last, [ImmDt], true;
    UC_SEND_ONLY = 0x24, Uc, Send, Only, [], true;
    UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, Uc, Send, Only, [ImmDt], true;
    UC_RDMA_WRITE_FIRST = 0x26, Uc, Write, First, [Reth], true;
    UC_RDMA_WRITE_MIDDLE = 0x27, Uc, Write, Middle, [], true;
    UC_RDMA_WRITE_LAST = 0x28, Uc, Write, Last, [], true;
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, Uc, Write, Last, [ImmDt], true;
    UC_RDMA_WRITE_ONLY = 0x2a, Uc, Write, Only, [Reth], true;
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b, Uc, Write, Only, [Reth, ImmDt], true;
    UD_SEND_ONLY = 0x64, Ud, Send, Only, [Deth], true;
    UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, Ud, Send, Only, [Deth, ImmDt], true;
    CNP = 0x81, Cnp, Cnp, Only, [Cnp], false;
    SR_SEND_FIRST = 0xc0, Rc, Send, First, [SrEth], true;
    SR_SEND_MIDDLE = 0xc1, Rc, Send, Middle, [SrEth], true;
    SR_SEND_LAST = 0xc2, Rc, Send, Last, [SrEth], true;
    SR_SEND_LAST_WITH_IMMEDIATE = 0xc3, Rc, Send, Last, [SrEth, ImmDt], true;
    SR_SEND_ONLY = 0xc4, Rc, Send, Only, [SrEth], true;
    SR_SEND_ONLY_WITH_IMMEDIATE = 0xc5, Rc, Send, Only, [SrEth, ImmDt], true;
    SR_RDMA_WRITE_FIRST = 0xc6, Rc, Write, First, [Reth, SrEth], true;
    SR_RDMA_WRITE_MIDDLE = 0xc7, Rc, Write, Middle, [Reth, SrEth], true;
    SR_RDMA_WRITE_LAST = 0xc8, Rc, Write, Last, [Reth, SrEth], true;
    SR_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0xc9, Rc, Write, Last, [Reth, SrEth, ImmDt], true;
    SR_RDMA_WRITE_ONLY = 0xca, Rc, Write, Only, [Reth, SrEth], true;
    SR_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0xcb, Rc, Write, Only, [Reth, SrEth, ImmDt], true;
    SR_RDMA_READ_REQUEST = 0xcc, Rc, ReadRequest, Only, [Reth, SrEth], false;
    SR_ACKNOWLEDGE = 0xd1, Rc, Acknowledge, Only, [Aeth, Sack], false;
    SR_SEND_LAST_WITH_INVALIDATE = 0xd6, Rc, Send, Last, [SrEth, Ieth], true;
    SR_SEND_ONLY_WITH_INVALIDATE = 0xd7, Rc, Send, Only, [SrEth, Ieth], true;
}

/// The first of the opcodes the IBTA leaves to manufacturers, where rocex's selective
/// repeat lives.
const MANUFACTURER: u8 = 0xc0;

impl Opcode {
    /// Every opcode the table knows, in numeric order.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..=255u8).map(Self).filter(|op| op.info().is_some())
    }

    /// rocex's selective-repeat form of an RC SEND, WRITE, READ request or ACK opcode: the
    /// same code with the top two bits set (`docs/wire.md`, "Selective repeat"); `None` for
    /// the others.
    pub fn selective(self) -> Option<Self> {
        let sr = Self(self.0 | MANUFACTURER);
        (self.0 < 0x20 && sr.info().is_some()).then_some(sr)
    }

    /// Whether this is one of rocex's selective-repeat opcodes.
    pub const fn is_selective(self) -> bool {
        self.0 >= MANUFACTURER
    }

    /// The opcode's name, or `None` when it is not in the table.
    pub fn name(self) -> Option<&'static str> {
        self.info().map(|i| i.name)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Opcode({:#04x})", self.0),
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The opcode table as the Markdown table in `docs/wire.md`.
pub fn markdown_table() -> String {
    let mut s =
        String::from("| code | name | service | message | headers after BTH | payload | kind |\n");
    s.push_str("|---|---|---|---|---|---|---|\n");
    for op in Opcode::all() {
        let i = op.info().expect("all() yields known opcodes");
        let exts: Vec<String> = i.exts.iter().map(|e| format!("{e:?}")).collect();
        let kind = if i.operation == Operation::Cnp {
            "notification"
        } else if i.operation.is_response() {
            "response"
        } else {
            "request"
        };
        s.push_str(&format!(
            "| 0x{:02x} | {} | {:?} | {:?} | {} | {} | {} |\n",
            op.0,
            i.name,
            i.service,
            i.position,
            if exts.is_empty() {
                "-".to_string()
            } else {
                exts.join(", ")
            },
            if i.payload { "yes" } else { "no" },
            kind
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_the_spec_layout() {
        // Spot checks against IBTA table 38 and rxe_opcode.c.
        let w = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.info().unwrap();
        assert_eq!(w.header_len(), 12 + 16 + 4);
        assert!(w.immediate && w.payload && w.position == Position::Only);
        let ack = Opcode::RC_ATOMIC_ACKNOWLEDGE.info().unwrap();
        assert_eq!(
            ack.exts.iter().collect::<Vec<_>>(),
            [Ext::Aeth, Ext::AtomicAckEth]
        );
        assert!(ack.operation.is_response());
        let flush = Opcode::RC_FLUSH.info().unwrap();
        assert_eq!(
            flush.exts.iter().collect::<Vec<_>>(),
            [Ext::Feth, Ext::Reth]
        );
        assert!(!flush.payload);
        assert_eq!(Opcode::RC_COMPARE_SWAP.info().unwrap().header_len(), 40);
        assert_eq!(
            Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
                .info()
                .unwrap()
                .header_len(),
            24
        );
        assert_eq!(Opcode::CNP.info().unwrap().header_len(), 28);
        assert!(
            Opcode::RC_SEND_ONLY_WITH_INVALIDATE
                .info()
                .unwrap()
                .invalidate
        );
    }

    #[test]
    fn service_follows_the_top_bits() {
        for op in Opcode::all() {
            let s = op.info().unwrap().service;
            let expected = match op.0 >> 5 {
                0 => Service::Rc,
                1 => Service::Uc,
                3 => Service::Ud,
                4 => Service::Cnp,
                // rocex's selective repeat, in the manufacturer-specific codes.
                6 => Service::Rc,
                _ => unreachable!("{op:?}"),
            };
            assert_eq!(s, expected, "{op:?}");
        }
    }

    #[test]
    fn reserved_codes_are_unknown() {
        for code in [
            0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x40, 0x60, 0x63, 0x66, 0x80, 0xff,
        ] {
            assert!(Opcode(code).info().is_none(), "{code:#x}");
        }
        assert_eq!(Opcode::all().count(), 56);
    }

    #[test]
    fn selective_forms_mirror_the_rc_codes() {
        let pairs = Opcode::all().filter_map(|op| op.selective().map(|sr| (op, sr)));
        let mut n = 0;
        for (rc, sr) in pairs {
            let (a, b) = (rc.info().unwrap(), sr.info().unwrap());
            assert!(sr.is_selective() && !rc.is_selective());
            assert_eq!(b.name.strip_prefix("SR_"), a.name.strip_prefix("RC_"));
            assert_eq!((a.operation, a.position), (b.operation, b.position));
            assert_eq!(a.immediate, b.immediate);
            assert_eq!(a.invalidate, b.invalidate);
            assert!(b.exts.contains(Ext::SrEth) || b.exts.contains(Ext::Sack));
            // Every WRITE packet carries its RETH, so it can be placed out of order.
            assert_eq!(
                b.exts.contains(Ext::Reth),
                matches!(b.operation, Operation::Write | Operation::ReadRequest)
            );
            n += 1;
        }
        assert_eq!(n, 16);
        assert_eq!(
            Opcode::RC_RDMA_READ_REQUEST.selective(),
            Some(Opcode::SR_RDMA_READ_REQUEST)
        );
        assert_eq!(Opcode::RC_COMPARE_SWAP.selective(), None);
        assert_eq!(Opcode::UC_SEND_ONLY.selective(), None);
    }
}
