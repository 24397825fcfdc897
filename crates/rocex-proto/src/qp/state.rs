//! Queue pair state transitions and the attributes each needs (IBTA §11.2.4.2 table 95;
//! the kernel's `ib_modify_qp_is_ok`).

use crate::verbs::{AttrMask, QpState, QpType};

/// Why a modify was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionError {
    /// The spec has no such transition.
    NotAllowed {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// A required attribute is missing from the mask.
    Missing(AttrMask),
    /// The mask names an attribute this transition does not take.
    Unexpected(AttrMask),
}

impl core::fmt::Display for TransitionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotAllowed { from, to } => write!(f, "a QP cannot move from {from:?} to {to:?}"),
            Self::Missing(m) => write!(f, "the transition needs attribute mask bits {:#x}", m.0),
            Self::Unexpected(m) => write!(
                f,
                "the transition does not take attribute mask bits {:#x}",
                m.0
            ),
        }
    }
}

const fn m(bits: &[AttrMask]) -> AttrMask {
    let mut v = 0;
    let mut i = 0;
    while i < bits.len() {
        v |= bits[i].0;
        i += 1;
    }
    AttrMask(v)
}

use AttrMask as A;

/// Required and optional attributes of `from -> to` for `ty`, or `None` if not allowed.
fn rule(ty: QpType, from: QpState, to: QpState) -> Option<(AttrMask, AttrMask)> {
    use QpState::*;
    let ud = ty == QpType::Ud;
    let rc = ty == QpType::Rc;
    let connected_opt = m(&[
        A::CUR_STATE,
        A::ACCESS_FLAGS,
        A::ALT_PATH,
        A::PATH_MIG_STATE,
        A::MIN_RNR_TIMER,
    ]);
    let ud_opt = m(&[A::CUR_STATE, A::QKEY]);
    let rts_opt = if ud { ud_opt } else { connected_opt };
    Some(match (from, to) {
        (_, Reset) | (_, Err) => (A::STATE, AttrMask(0)),
        (Reset, Init) if ud => (m(&[A::STATE, A::PKEY_INDEX, A::PORT, A::QKEY]), AttrMask(0)),
        (Reset, Init) => (
            m(&[A::STATE, A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS]),
            AttrMask(0),
        ),
        (Init, Init) if ud => (A::STATE, m(&[A::PKEY_INDEX, A::PORT, A::QKEY])),
        (Init, Init) => (A::STATE, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (Init, Rtr) if ud => (A::STATE, m(&[A::PKEY_INDEX, A::QKEY])),
        (Init, Rtr) if rc => (
            m(&[
                A::STATE,
                A::AV,
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER,
            ]),
            m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX]),
        ),
        (Init, Rtr) => (
            m(&[A::STATE, A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN]),
            m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX]),
        ),
        (Rtr, Rts) if rc => (
            m(&[
                A::STATE,
                A::SQ_PSN,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_QP_RD_ATOMIC,
            ]),
            rts_opt,
        ),
        (Rtr, Rts) => (m(&[A::STATE, A::SQ_PSN]), rts_opt),
        (Rts, Rts) | (Sqd, Rts) => (A::STATE, rts_opt),
        (Sqe, Rts) if !rc => (A::STATE, ud_opt),
        (Rts, Sqd) => (A::STATE, A::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => (A::STATE, AttrMask(!0)),
        _ => return None,
    })
}

/// Checks a modify from `from` with `mask` (whose STATE bit names the target `to`).
pub(crate) fn check(
    ty: QpType,
    from: QpState,
    to: QpState,
    mask: AttrMask,
) -> Result<(), TransitionError> {
    let (required, optional) =
        rule(ty, from, to).ok_or(TransitionError::NotAllowed { from, to })?;
    let missing = required.0 & !mask.0;
    if missing != 0 {
        return Err(TransitionError::Missing(AttrMask(missing)));
    }
    let extra = mask.0 & !(required.0 | optional.0);
    if extra != 0 {
        return Err(TransitionError::Unexpected(AttrMask(extra)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::{Init, Reset, Rtr, Rts};

    #[test]
    fn rc_bring_up_needs_the_usual_attributes() {
        let init = m(&[A::STATE, A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS]);
        assert_eq!(check(QpType::Rc, Reset, Init, init), Ok(()));
        let rtr = m(&[
            A::STATE,
            A::AV,
            A::PATH_MTU,
            A::DEST_QPN,
            A::RQ_PSN,
            A::MAX_DEST_RD_ATOMIC,
            A::MIN_RNR_TIMER,
        ]);
        assert_eq!(check(QpType::Rc, Init, Rtr, rtr), Ok(()));
        assert_eq!(
            check(QpType::Rc, Init, Rtr, A::STATE | A::AV),
            Err(TransitionError::Missing(m(&[
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER
            ])))
        );
        let rts = m(&[
            A::STATE,
            A::SQ_PSN,
            A::TIMEOUT,
            A::RETRY_CNT,
            A::RNR_RETRY,
            A::MAX_QP_RD_ATOMIC,
        ]);
        assert_eq!(check(QpType::Rc, Rtr, Rts, rts), Ok(()));
        assert_eq!(
            check(QpType::Rc, Rtr, Rts, rts | A::PATH_MTU),
            Err(TransitionError::Unexpected(A::PATH_MTU))
        );
    }

    #[test]
    fn skipping_states_is_refused() {
        assert_eq!(
            check(QpType::Rc, Reset, Rts, A::STATE),
            Err(TransitionError::NotAllowed {
                from: Reset,
                to: Rts
            })
        );
        assert_eq!(
            check(QpType::Rc, Init, Rts, A::STATE),
            Err(TransitionError::NotAllowed {
                from: Init,
                to: Rts
            })
        );
        assert_eq!(
            check(QpType::Rc, QpState::Err, Rts, A::STATE),
            Err(TransitionError::NotAllowed {
                from: QpState::Err,
                to: Rts
            })
        );
        assert_eq!(check(QpType::Rc, Rts, QpState::Err, A::STATE), Ok(()));
        assert_eq!(check(QpType::Rc, QpState::Err, Reset, A::STATE), Ok(()));
    }

    #[test]
    fn ud_takes_a_qkey() {
        assert_eq!(
            check(
                QpType::Ud,
                Reset,
                Init,
                m(&[A::STATE, A::PKEY_INDEX, A::PORT, A::QKEY])
            ),
            Ok(())
        );
        assert_eq!(check(QpType::Ud, Init, Rtr, A::STATE), Ok(()));
        assert_eq!(check(QpType::Ud, Rtr, Rts, A::STATE | A::SQ_PSN), Ok(()));
    }
}
