//! The rules a work request meets whoever posts it: `ibv_post_send`'s checks that depend
//! on the request and its QP's type alone. The engine applies them to an in-process
//! caller's requests and rocexd's descriptor reader (rocex-shm) to a client's, so each
//! rule is written once. What else a poster checks is its own: the QP's state and caps
//! (the engine), a descriptor's encoding and its slot's bounds (rocex-shm).

use core::fmt;

use crate::{QpType, SendData, SendOp, Sge};

/// The largest message (IBTA: 2^31 bytes).
pub const MAX_MESSAGE: u64 = 1 << 31;

/// Why a work request cannot be posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrError {
    /// The operation does not exist on the QP's transport (UC: SEND and WRITE; UD: SEND).
    NotOnQpType,
    /// A UD send names no destination.
    UdWithoutDest,
    /// A send on a connected QP names a UD destination.
    DestOnConnectedQp,
    /// READ, FLUSH and the atomics cannot carry inline data.
    InlineNotAllowed,
    /// An atomic's remote address (this one) is not 8-byte aligned.
    MisalignedAtomic(u64),
    /// Compare-and-swap and fetch-and-add need exactly one local SGE of 8 bytes: `num`
    /// SGEs, `len` the one SGE's length (0 unless there is exactly one).
    AtomicSge {
        /// SGEs given.
        num: u32,
        /// Length of the one SGE.
        len: u32,
    },
    /// The message (this many bytes) is longer than [`MAX_MESSAGE`].
    TooLong(u64),
}

impl WrError {
    /// The reason in a few words.
    pub const fn why(&self) -> &'static str {
        match self {
            Self::NotOnQpType => "the operation is not available on this QP type",
            Self::UdWithoutDest => "a UD send needs a destination",
            Self::DestOnConnectedQp => "a UD destination on a connected QP",
            Self::InlineNotAllowed => "READ, FLUSH and atomics cannot carry inline data",
            Self::MisalignedAtomic(_) => "an atomic's remote address must be 8-byte aligned",
            Self::AtomicSge { .. } => "an atomic needs one 8-byte local SGE",
            Self::TooLong(_) => "the message is longer than 2^31 bytes",
        }
    }
}

impl fmt::Display for WrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MisalignedAtomic(a) => write!(f, "atomic address {a:#x} is not 8-byte aligned"),
            Self::AtomicSge { num, len } => {
                write!(
                    f,
                    "an atomic needs one 8-byte SGE, got {num} (first {len} bytes)"
                )
            }
            Self::TooLong(n) => write!(f, "message of {n} bytes exceeds 2^31"),
            e => f.write_str(e.why()),
        }
    }
}

impl core::error::Error for WrError {}

/// The checks of the operation itself: whether the QP's transport has it, its destination
/// (`has_dest`: a UD address is given), whether it may carry inline data (`inline`), and
/// the alignment of an atomic's target.
pub fn check_op(qp_type: QpType, op: &SendOp, inline: bool, has_dest: bool) -> Result<(), WrError> {
    let allowed = match qp_type {
        QpType::Rc => true,
        QpType::Uc => matches!(
            op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write(_) | SendOp::WriteWithImm(..)
        ),
        QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm(_)),
    };
    if !allowed {
        return Err(WrError::NotOnQpType);
    }
    match (qp_type, has_dest) {
        (QpType::Ud, false) => return Err(WrError::UdWithoutDest),
        (QpType::Rc | QpType::Uc, true) => return Err(WrError::DestOnConnectedQp),
        _ => {}
    }
    let (fetching, remote) = match *op {
        SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } => {
            (true, Some(remote))
        }
        SendOp::AtomicWrite { remote, .. } => (false, Some(remote)),
        _ => (false, None),
    };
    if inline && (fetching || matches!(op, SendOp::Read(_) | SendOp::Flush { .. })) {
        return Err(WrError::InlineNotAllowed);
    }
    if let Some(r) = remote.filter(|r| r.addr % 8 != 0) {
        return Err(WrError::MisalignedAtomic(r.addr));
    }
    Ok(())
}

/// The length of a message gathered from (or scattered to) `sges`, at most
/// [`MAX_MESSAGE`].
pub fn message_len(sges: &[Sge]) -> Result<u64, WrError> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total > MAX_MESSAGE {
        return Err(WrError::TooLong(total));
    }
    Ok(total)
}

/// The checks of a send's data: its length, and an atomic's one 8-byte SGE.
pub fn check_data(op: &SendOp, data: &SendData) -> Result<(), WrError> {
    let SendData::Sges(sges) = data else {
        // Inline data is bounded by the QP's max_inline_data, far below 2^31.
        return Ok(());
    };
    message_len(sges)?;
    if matches!(op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
        && !matches!(sges.as_slice(), [s] if s.length == 8)
    {
        let len = match sges.as_slice() {
            [s] => s.length,
            _ => 0,
        };
        return Err(WrError::AtomicSge {
            num: sges.len() as u32,
            len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Remote;

    const R: Remote = Remote { addr: 8, rkey: 1 };

    fn sge(length: u32) -> Sge {
        Sge {
            addr: 0,
            length,
            lkey: 1,
        }
    }

    #[test]
    fn each_transport_takes_only_its_operations() {
        let read = SendOp::Read(R);
        let write = SendOp::Write(R);
        let fetch = SendOp::FetchAdd { remote: R, add: 1 };
        assert_eq!(check_op(QpType::Rc, &fetch, false, false), Ok(()));
        assert_eq!(check_op(QpType::Uc, &write, false, false), Ok(()));
        assert_eq!(
            check_op(QpType::Uc, &read, false, false),
            Err(WrError::NotOnQpType)
        );
        assert_eq!(
            check_op(QpType::Ud, &write, false, true),
            Err(WrError::NotOnQpType)
        );
        assert_eq!(check_op(QpType::Ud, &SendOp::Send, false, true), Ok(()));
        assert_eq!(
            check_op(QpType::Ud, &SendOp::Send, false, false),
            Err(WrError::UdWithoutDest)
        );
        assert_eq!(
            check_op(QpType::Rc, &SendOp::Send, false, true),
            Err(WrError::DestOnConnectedQp)
        );
    }

    #[test]
    fn inline_data_and_atomic_targets() {
        for op in [
            SendOp::Read(R),
            SendOp::FetchAdd { remote: R, add: 1 },
            SendOp::Flush {
                remote: R,
                len: 8,
                placement: 1,
                selectivity: 0,
            },
        ] {
            assert_eq!(
                check_op(QpType::Rc, &op, true, false),
                Err(WrError::InlineNotAllowed),
                "{op:?}"
            );
        }
        assert_eq!(check_op(QpType::Rc, &SendOp::Send, true, false), Ok(()));
        let odd = Remote { addr: 12, rkey: 1 };
        for op in [
            SendOp::CompareSwap {
                remote: odd,
                compare: 0,
                swap: 1,
            },
            SendOp::AtomicWrite {
                remote: odd,
                value: 1,
            },
        ] {
            assert_eq!(
                check_op(QpType::Rc, &op, false, false),
                Err(WrError::MisalignedAtomic(12))
            );
        }
    }

    #[test]
    fn lengths_and_the_atomic_sge() {
        let fetch = SendOp::FetchAdd { remote: R, add: 1 };
        let data = |sges: &[Sge]| SendData::Sges(sges.iter().copied().collect());
        assert_eq!(check_data(&fetch, &data(&[sge(8)])), Ok(()));
        assert_eq!(
            check_data(&fetch, &data(&[sge(4)])),
            Err(WrError::AtomicSge { num: 1, len: 4 })
        );
        assert_eq!(
            check_data(&fetch, &data(&[sge(4), sge(4)])),
            Err(WrError::AtomicSge { num: 2, len: 0 })
        );
        assert_eq!(
            check_data(&fetch, &data(&[])),
            Err(WrError::AtomicSge { num: 0, len: 0 })
        );
        let big = [sge(1 << 31), sge(1)];
        assert_eq!(message_len(&big[..1]), Ok(MAX_MESSAGE));
        assert_eq!(
            check_data(&SendOp::Send, &data(&big)),
            Err(WrError::TooLong(MAX_MESSAGE + 1))
        );
        assert!(!WrError::TooLong(1).to_string().is_empty());
    }
}
