//! Objects under numbers and keys the caller chooses, for reproducing captures: real
//! objects get unpredictable ones. The memory calls exist only with the `replay` feature
//! (rocex-conform turns it on), so that no program that serves real peers can choose the
//! keys an attacker would have to guess. A chosen QPN is also how the GSI QP
//! ([`Engine::create_gsi_qp`]) is made.

#[cfg(feature = "replay")]
use std::sync::Arc;

#[cfg(feature = "replay")]
use rocex_mem::{Access, Keys, MwBinding, PdId, Region};
use rocex_wire::bth::QPN_MASK;

use super::{Engine, FIRST_QPN, GSI_QPN, QpInit, VerbsError};
use crate::verbs::QpType;

impl Engine {
    /// Creates a QP in RESET with a QP number the caller chooses, for reproducing captures
    /// (`rocex conform replay` answers requests addressed to the captured QPN).
    ///
    /// The number must lie in `0x10..=0xFFFFFF` (below 0x10 are rxe's special QPs) and be
    /// unused ([`VerbsError::BadAttribute`] otherwise). Real QPs use [`Engine::create_qp`],
    /// whose numbers are unpredictable. The one special QP allowed is QPN 1, the GSI, as a
    /// UD QP: it carries the communication manager's MADs (IBTA chapter 13).
    pub fn create_qp_with_qpn(&mut self, init: QpInit, qpn: u32) -> Result<u32, VerbsError> {
        let gsi = qpn == GSI_QPN && init.qp_type == QpType::Ud;
        if !gsi && !(FIRST_QPN..=QPN_MASK).contains(&qpn) {
            return Err(VerbsError::BadAttribute(
                "a chosen QPN must lie in 0x10..=0xffffff, or be 1 (the GSI) for a UD QP",
            ));
        }
        if self.qps.contains_key(&qpn) {
            return Err(VerbsError::BadAttribute("the chosen QPN is in use"));
        }
        self.check_qp_init(&init)?;
        Ok(self.insert_qp(qpn, &init))
    }

    /// Registers a memory region under chosen keys, for reproducing captures (see
    /// [`MemTable::reg_mr_with_keys`](rocex_mem::MemTable::reg_mr_with_keys): keys must
    /// be non-zero, distinct and unused).
    #[cfg(feature = "replay")]
    pub fn reg_mr_with_keys(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
        keys: Keys,
    ) -> Result<Keys, VerbsError> {
        Ok(self
            .mem
            .reg_mr_with_keys(pd, iova, len, access, region, keys)?)
    }

    /// Allocates an unbound type-2 memory window under a chosen rkey, for reproducing
    /// captures (see [`MemTable::alloc_mw_with_key`](rocex_mem::MemTable::alloc_mw_with_key)).
    #[cfg(feature = "replay")]
    pub fn alloc_mw_with_key(&mut self, pd: PdId, rkey: u32) -> Result<u32, VerbsError> {
        Ok(self.mem.alloc_mw_with_key(pd, rkey)?)
    }

    /// Binds a type-2 window that keeps its rkey, for reproducing captures (see
    /// [`MemTable::bind_mw_keeping_key`](rocex_mem::MemTable::bind_mw_keeping_key)).
    #[cfg(feature = "replay")]
    pub fn bind_mw_keeping_key(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        to: MwBinding,
    ) -> Result<u32, VerbsError> {
        Ok(self.mem.bind_mw_keeping_key(pd, mw_rkey, to)?)
    }
}
