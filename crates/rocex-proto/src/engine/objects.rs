//! The verbs that create, change, query and destroy PDs, MRs, memory windows, CQs and QPs.

use std::sync::Arc;

use rand_chacha::rand_core::RngCore;
use rocex_mem::{Access, Keys, MemError, MwBinding, PdId, Region};
use rocex_wire::bth::QPN_MASK;

use super::{Engine, Event, FIRST_QPN, GSI_QPN, QpInit, QpStatus, VerbsError};
use crate::cq::{Cq, NotifyOn};
use crate::qp::Qp;
use crate::qp::state;
use crate::time::Instant;
use crate::verbs::{AttrMask, QpAttr, QpCap, QpState, QpType, WorkCompletion};

impl Engine {
    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> PdId {
        self.mem.alloc_pd()
    }

    /// Frees a protection domain that holds no MR, MW or QP.
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        if self.qps.values().any(|q| q.pd == pd) {
            return Err(VerbsError::Mem(MemError::Busy));
        }
        Ok(self.mem.dealloc_pd(pd)?)
    }

    /// Registers `len` bytes of `region` at application address `iova`.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
    ) -> Result<Keys, VerbsError> {
        Ok(self.mem.reg_mr(pd, iova, len, access, region)?)
    }

    /// Deregisters a memory region.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        Ok(self.mem.dereg_mr(lkey)?)
    }

    /// Allocates a type-2 memory window.
    pub fn alloc_mw(&mut self, pd: PdId) -> Result<u32, VerbsError> {
        Ok(self.mem.alloc_mw(pd)?)
    }

    /// Binds a type-2 window to part of an MR; returns the window's new rkey.
    pub fn bind_mw(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, VerbsError> {
        Ok(self.mem.bind_mw(pd, mw_rkey, mr_lkey, addr, len, access)?)
    }

    /// Allocates a type-1 memory window, which binds again while bound and is never
    /// invalidated.
    pub fn alloc_mw_type1(&mut self, pd: PdId) -> Result<u32, VerbsError> {
        Ok(self.mem.alloc_mw_type1(pd)?)
    }

    /// Binds a window through QP `qpn`, as rxe executes a BIND_MW work request
    /// (`rxe_bind_mw`): the window and the region must be in the QP's PD, and the new rkey
    /// keeps the window's upper 24 bits with the binder's `key` byte.
    pub fn bind_mw_on_qp(
        &mut self,
        qpn: u32,
        mw_rkey: u32,
        key: u8,
        to: MwBinding,
    ) -> Result<u32, VerbsError> {
        let pd = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?.pd;
        Ok(self.mem.bind_mw_with_key(pd, mw_rkey, key, to)?)
    }

    /// LOCAL_INV through QP `qpn`: the window `rkey` of the QP's PD is free again (rxe
    /// `rxe_invalidate_mw`); a region's key or a type-1 window's is refused.
    pub fn invalidate_mw_on_qp(&mut self, qpn: u32, rkey: u32) -> Result<(), VerbsError> {
        let pd = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?.pd;
        Ok(self.mem.invalidate(pd, rkey)?)
    }

    /// Frees the memory window whose rkey is `rkey`, bound or not.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), VerbsError> {
        Ok(self.mem.dealloc_mw(rkey)?)
    }

    /// Creates a completion queue of `cqe` entries.
    pub fn create_cq(&mut self, cqe: usize) -> Result<u32, VerbsError> {
        if cqe == 0 || cqe > self.config.max_cqe {
            return Err(VerbsError::Limit("CQ depth"));
        }
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(id, Cq::new(cqe));
        Ok(id)
    }

    /// Gives a CQ room for `cqe` completions (`ibv_resize_cq`): refused beyond the device's
    /// limit and below the completions it holds (rxe `rxe_cq_chk_attr`).
    pub fn resize_cq(&mut self, cq: u32, cqe: usize) -> Result<(), VerbsError> {
        if cqe == 0 || cqe > self.config.max_cqe {
            return Err(VerbsError::Limit("CQ depth"));
        }
        let c = self.cqs.get_mut(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        if !c.resize(cqe) {
            return Err(VerbsError::BadAttribute(
                "fewer CQ entries than completions waiting",
            ));
        }
        Ok(())
    }

    /// Destroys a CQ no QP uses.
    pub fn destroy_cq(&mut self, cq: u32) -> Result<(), VerbsError> {
        if !self.cqs.contains_key(&cq) {
            return Err(VerbsError::NoSuchCq(cq));
        }
        if self
            .qps
            .values()
            .any(|q| q.send_cq == cq || q.recv_cq == cq)
        {
            return Err(VerbsError::CqBusy(cq));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    /// Takes the oldest completion of a CQ.
    pub fn poll_cq(&mut self, cq: u32) -> Option<WorkCompletion> {
        self.cqs.get_mut(&cq)?.pop()
    }

    /// Completions waiting on a CQ.
    pub fn cq_len(&self, cq: u32) -> usize {
        self.cqs.get(&cq).map_or(0, Cq::len)
    }

    /// Arms a CQ: the next completion (or solicited one) raises [`Event::CqNotify`].
    pub fn req_notify_cq(&mut self, cq: u32, on: NotifyOn) -> Result<(), VerbsError> {
        self.cqs
            .get_mut(&cq)
            .ok_or(VerbsError::NoSuchCq(cq))?
            .arm(on);
        Ok(())
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Creates a QP in RESET with an unpredictable QP number (in the engine's
    /// [`QpnSlot`](super::QpnSlot), if it has one).
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, VerbsError> {
        self.check_qp_init(&init)?;
        let slot = self.config.qpn_slot;
        let qpn = loop {
            let mut n = self.rng.next_u32() & QPN_MASK;
            if let Some(slot) = slot {
                n = slot.place(n);
            }
            if n >= FIRST_QPN && !self.qps.contains_key(&n) {
                break n;
            }
        };
        Ok(self.insert_qp(qpn, &init))
    }

    /// Adds a QP in RESET under `qpn`, which the caller has checked is free.
    pub(super) fn insert_qp(&mut self, qpn: u32, init: &QpInit) -> u32 {
        let mut qp = Qp::new(
            qpn,
            init.qp_type,
            init.pd,
            init.send_cq,
            init.recv_cq,
            init.cap,
        );
        let sr = self.config.selective_repeat && init.qp_type == QpType::Rc;
        qp.sr = crate::qp::sr::Sr::new(sr, self.config.window);
        qp.window = crate::qp::Window::new(self.config.window);
        self.qps.insert(qpn, qp);
        qpn
    }

    /// Turns selective repeat on or off for one RC QP before it connects (in RESET or
    /// INIT), for a caller that learns per connection whether the peer speaks it (rocex's
    /// tools' out-of-band exchange); `Config::selective_repeat` sets every QP's default.
    pub fn set_selective_repeat(&mut self, qpn: u32, on: bool) -> Result<(), VerbsError> {
        let window = self.config.window;
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if qp.qp_type != QpType::Rc {
            return Err(VerbsError::BadRequest("selective repeat is for RC QPs"));
        }
        if !matches!(qp.state, QpState::Reset | QpState::Init) {
            return Err(VerbsError::InvalidState(qp.state));
        }
        qp.sr = crate::qp::sr::Sr::new(on, window);
        Ok(())
    }

    /// Whether a QP recovers by selective repeat.
    pub fn selective_repeat(&self, qpn: u32) -> bool {
        self.qps.get(&qpn).is_some_and(|qp| qp.sr.on)
    }

    /// Creates the GSI QP: QPN 1, a UD QP, which carries the communication manager's MADs
    /// (IBTA chapter 13).
    pub fn create_gsi_qp(&mut self, init: QpInit) -> Result<u32, VerbsError> {
        self.create_qp_with_qpn(init, GSI_QPN)
    }

    /// The checks a new QP's resources pass: the QP limit, its CQs, a PD.
    pub(super) fn check_qp_init(&self, init: &QpInit) -> Result<(), VerbsError> {
        if self.qps.len() >= self.config.max_qp {
            return Err(VerbsError::Limit("QPs"));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.contains_key(&cq) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        if self.mem.pd_count() == 0 {
            return Err(VerbsError::Mem(MemError::UnknownPd { pd: init.pd }));
        }
        Ok(())
    }

    /// Modifies a QP: checks the transition and its attributes, then applies them.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr, mask: AttrMask) -> Result<(), VerbsError> {
        let port_mtu = self.config.port_mtu;
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let to = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            qp.state
        };
        let mut full = mask;
        if !mask.contains(AttrMask::STATE) {
            full = mask | AttrMask::STATE;
        }
        state::check(qp.qp_type, qp.state, to, full).map_err(VerbsError::Transition)?;
        if mask.contains(AttrMask::PATH_MTU) && attr.path_mtu > port_mtu {
            return Err(VerbsError::BadAttribute(
                "path_mtu exceeds the port's active MTU",
            ));
        }
        if mask.contains(AttrMask::PORT) && attr.port_num != 1 {
            return Err(VerbsError::BadAttribute(
                "the device has one port, number 1",
            ));
        }
        if mask.contains(AttrMask::PKEY_INDEX) && attr.pkey_index != 0 {
            return Err(VerbsError::BadAttribute(
                "the device has one P_Key, at index 0",
            ));
        }
        if mask.contains(AttrMask::AV) {
            let av = attr
                .ah_attr
                .ok_or(VerbsError::BadAttribute("ah_attr is missing"))?;
            if av.dest.is_ipv4() != self.config.local.is_ipv4() {
                return Err(VerbsError::BadAttribute(
                    "the destination's IP version differs from the device's",
                ));
            }
        }
        self.with_qp(qpn, Instant::ZERO, |qp, ctx| qp.apply(attr, mask, ctx));
        Ok(())
    }

    /// Moves a connected QP on to RTS with `rtr` and `rts` (each a modify's attributes and
    /// mask), from where it stands: INIT takes both, RTR the second, RTS neither. The CM's
    /// step (rocexd's for its QPs, a direct context's for its own): a program may already
    /// have moved the QP with `rdma_init_qp_attr`'s attributes, as rdma-core's librdmacm
    /// lets it before `rdma_accept`.
    pub fn ready_rc(
        &mut self,
        qpn: u32,
        (rtr, rtr_mask): (QpAttr, AttrMask),
        (rts, rts_mask): (QpAttr, AttrMask),
    ) -> Result<(), VerbsError> {
        let state = self.qp_status(qpn)?.state;
        if state == QpState::Init {
            self.modify_qp(qpn, &rtr, rtr_mask)?;
        }
        if matches!(state, QpState::Init | QpState::Rtr) {
            self.modify_qp(qpn, &rts, rts_mask)?;
        }
        Ok(())
    }

    /// A QP's attributes and capabilities.
    pub fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpCap), VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let mut attr = qp.attr;
        attr.qp_state = qp.state;
        attr.sq_psn = qp.req.psn.value();
        attr.rq_psn = qp.resp.psn.value();
        Ok((attr, qp.cap))
    }

    /// What a QP is doing now, for statistics (`rdma statistic qp` and `rdma res show qp`
    /// show the same).
    pub fn qp_status(&self, qpn: u32) -> Result<QpStatus, VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        Ok(QpStatus {
            qp_type: qp.qp_type,
            state: qp.state,
            sq_psn: qp.req.psn.value(),
            unacked_psn: qp.comp.psn.value(),
            rq_psn: qp.resp.psn.value(),
            msn: qp.resp.msn,
            sq_wqes: qp.sq.len(),
            rq_wqes: qp.rq.len(),
            receiving: qp.resp.receiving(),
            retry_left: qp.comp.retry_left,
            rnr_retry_left: qp.comp.rnr_left,
            counters: qp.counters,
        })
    }

    /// Every QP number, in no particular order.
    pub fn qpns(&self) -> impl Iterator<Item = u32> + '_ {
        self.qps.keys().copied()
    }

    /// Destroys a QP; its outstanding work requests are dropped without completions.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let qp = self.qps.remove(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if let Some(t) = qp.scheduling.timer_entry {
            self.timers.remove(&(t, qpn));
        }
        self.armed -= usize::from(qp.scheduling.armed);
        Ok(())
    }
}
