//! Scatter/gather lists: the bytes `[offset, offset + len)` of a message, spread over a
//! work request's SGEs, each piece checked against its lkey before it is touched.

use core::ops::Range;

use rocex_mem::{Access, MemTable, PdId, Target};

use crate::verbs::Sge;

/// Why a walk over an SGE list failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SgeError {
    /// An lkey, an address or a right did not check out (or an access failed).
    Key,
    /// The SGEs hold fewer bytes than the message needs.
    Short,
}

/// Calls `f` with each checked piece of `[offset, offset + len)` of the list and the range
/// of the message it covers, in order.
pub(crate) fn walk(
    mem: &MemTable,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    len: usize,
    need: Access,
    mut f: impl FnMut(&Target, Range<usize>) -> Result<(), rocex_mem::MemError>,
) -> Result<(), SgeError> {
    let mut skip = offset;
    let mut at = 0usize;
    for sge in sges {
        if at == len {
            break;
        }
        let sl = u64::from(sge.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let n = ((sl - skip) as usize).min(len - at);
        let addr = sge.addr.checked_add(skip).ok_or(SgeError::Key)?;
        let target = mem
            .check_lkey(pd, sge.lkey, addr, n as u64, need)
            .map_err(|_| SgeError::Key)?;
        f(&target, at..at + n).map_err(|_| SgeError::Key)?;
        at += n;
        skip = 0;
    }
    if at == len {
        Ok(())
    } else {
        Err(SgeError::Short)
    }
}
