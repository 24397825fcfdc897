//! Errors that say which message failed, where, and why.

use core::fmt;

/// The part of a CM MAD in which a parse or emit failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The MAD common header.
    Mad,
    /// ConnectRequest.
    Req,
    /// MessageReceiptAcknowledgement.
    Mra,
    /// ConnectReject.
    Rej,
    /// ConnectReply.
    Rep,
    /// ReadyToUse.
    Rtu,
    /// DisconnectRequest.
    Dreq,
    /// DisconnectReply.
    Drep,
    /// rdma_cm's private-data header in a REQ.
    CmaHdr,
    /// ServiceIDResolutionRequest.
    SidrReq,
    /// ServiceIDResolutionResponse.
    SidrRep,
}

impl Part {
    /// The name the IBTA (or rdma_cm) gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Mad => "MAD header",
            Self::Req => "REQ",
            Self::Mra => "MRA",
            Self::Rej => "REJ",
            Self::Rep => "REP",
            Self::Rtu => "RTU",
            Self::Dreq => "DREQ",
            Self::Drep => "DREP",
            Self::CmaHdr => "rdma_cm header",
            Self::SidrReq => "SIDR_REQ",
            Self::SidrRep => "SIDR_REP",
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The part needs more bytes than there are.
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// A field holds a value this implementation does not speak (an unknown attribute, a
    /// MAD class other than the CM's).
    Unsupported(&'static str),
    /// A field holds a value the spec does not allow, or a value does not fit its field.
    BadValue(&'static str),
}

/// A parse or emit failure: the part, the byte offset in the MAD, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Where.
    pub part: Part,
    /// Byte offset from the start of the MAD.
    pub offset: usize,
    /// Why.
    pub kind: ErrorKind,
}

impl Error {
    pub(crate) const fn new(part: Part, offset: usize, kind: ErrorKind) -> Self {
        Self { part, offset, kind }
    }

    /// The same error, `by` bytes further into the MAD (a part's offset added).
    pub(crate) const fn shifted(self, by: usize) -> Self {
        Self {
            offset: self.offset + by,
            ..self
        }
    }

    pub(crate) const fn truncated(part: Part, offset: usize, need: usize, have: usize) -> Self {
        Self::new(part, offset, ErrorKind::Truncated { need, have })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: ", self.part.name(), self.offset)?;
        match &self.kind {
            ErrorKind::Truncated { need, have } => {
                write!(f, "needs {need} bytes, has {have}")
            }
            ErrorKind::Unsupported(what) => write!(f, "unsupported: {what}"),
            ErrorKind::BadValue(what) => write!(f, "bad value: {what}"),
        }
    }
}

impl std::error::Error for Error {}
