//! DCQCN congestion control (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", SIGCOMM 2015), sans-IO: the notification point that answers CE-marked
//! packets with CNPs, and the reaction point that turns CNPs into a sending rate.
//!
//! The reaction point follows the paper's equations, with time the engine's:
//!
//! * on a CNP: `Rt = Rc`, `Rc = Rc (1 - alpha / 2)`, `alpha = (1 - g) alpha + g`, and the
//!   increase timer, byte counter and their stage counts start over;
//! * every `alpha_period` without a CNP: `alpha = (1 - g) alpha`;
//! * every `increase_period`, and every `byte_counter` bytes sent, one increase step:
//!   while both stage counts are below `fast_recovery`, `Rc = (Rt + Rc) / 2`; once either
//!   reaches it, additive increase `Rt += additive` first; once both pass it, hyper
//!   increase `Rt += i hyper` (`i` the smaller count past `fast_recovery`) first.
//!
//! A QP that never hears a CNP has no limiter: it sends at line rate exactly as without
//! DCQCN, and the limiter goes away again once the rate is back within one additive step
//! of line rate. `docs/congestion.md` gives the defaults and where each comes from.

mod params;

use core::time::Duration;

use rocex_wire::{Ecn, PacketRepr, ecn};

pub use params::DcqcnParamError;

use super::Qp;
use crate::time::Instant;
use crate::verbs::QpType;
use crate::{Ctx, Outgoing};

/// DCQCN's parameters (`Config::congestion`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    /// Whether CNPs received slow the QP down at all (the reaction point).
    pub react: bool,
    /// The rate a QP sends at when unlimited, in bits per second (the "line rate").
    pub line_rate: f64,
    /// The lowest rate a CNP can bring a QP to, in bits per second.
    pub min_rate: f64,
    /// Gain of the alpha average (`g`).
    pub g: f64,
    /// Alpha decays once per this period without a CNP (`K`).
    pub alpha_period: Duration,
    /// One increase step per this period (`T`).
    pub increase_period: Duration,
    /// One increase step per this many bytes sent (`B`).
    pub byte_counter: u64,
    /// Fast recovery steps before additive increase (`F`).
    pub fast_recovery: u32,
    /// Additive increase of the target rate, bits per second (`R_AI`).
    pub additive: f64,
    /// Hyper increase of the target rate, bits per second (`R_HAI`).
    pub hyper: f64,
    /// Bytes a limited QP may send back to back after a late wake-up: pacing evens out
    /// the engine's timer slack rather than losing rate to it.
    pub burst: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        Self {
            react: true,
            line_rate: 100e9,
            min_rate: 1e6,
            g: 1.0 / 256.0,
            alpha_period: Duration::from_micros(55),
            increase_period: Duration::from_micros(55),
            byte_counter: 10 << 20,
            fast_recovery: 5,
            additive: 40e6,
            hyper: 400e6,
            burst: 16 << 10,
        }
    }
}

/// Congestion settings of a device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Congestion {
    /// Mark every RC and UC packet ECT(0) unless its QP's traffic class sets the ECN bits.
    /// Off by default: kernel rxe sends TOS 0 (every capture in `pcaps/`).
    pub ecn: bool,
    /// The shortest time between two CNPs of one QP (the notification point's limit).
    pub cnp_interval: Duration,
    /// The reaction point.
    pub dcqcn: DcqcnParams,
}

impl Default for Congestion {
    fn default() -> Self {
        Self {
            ecn: false,
            cnp_interval: Duration::from_micros(50),
            dcqcn: DcqcnParams::default(),
        }
    }
}

/// The notification point of one QP: whether a CNP waits to go, and when the last went.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    pub(crate) pending: bool,
    last: Option<Instant>,
}

impl Notifier {
    /// A CE-marked packet arrived at `now`: a CNP is due unless one went within `interval`.
    /// Returns whether this packet causes one.
    pub(crate) fn on_ce(&mut self, now: Instant, interval: Duration) -> bool {
        if self.last.is_some_and(|t| now.since(t) < interval) {
            return false;
        }
        self.last = Some(now);
        self.pending = true;
        true
    }
}

/// The reaction point of one QP while it is limited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateState {
    /// Current rate `Rc`, bits per second.
    pub current: f64,
    /// Target rate `Rt`, bits per second.
    pub target: f64,
    /// Alpha, the estimate of how congested the path is (0 to 1).
    pub alpha: f64,
    /// Increase steps taken by the timer since the last CNP.
    pub timer_stage: u32,
    /// Increase steps taken by the byte counter since the last CNP.
    pub byte_stage: u32,
    bytes: u64,
    alpha_due: Instant,
    increase_due: Instant,
    /// Bytes the QP may send now (a token bucket filled at `current`, at most `burst`);
    /// below zero, the next packet waits until it is filled back to zero.
    tokens: f64,
    tokens_at: Instant,
}

impl RateState {
    /// Fills the bucket up to `now` at the current rate.
    fn fill(&mut self, now: Instant, p: &DcqcnParams) {
        let dt = now.since(self.tokens_at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.current / 8.0).min(p.burst as f64);
        self.tokens_at = self.tokens_at.max(now);
    }

    /// When the bucket is back at zero, if it is below: a whole nanosecond at least, so
    /// that the wait always moves time on.
    fn wait(&self, now: Instant) -> Option<Instant> {
        let ns = (-self.tokens * 8e9 / self.current).ceil().max(1.0);
        (self.tokens < 0.0).then(|| now + Duration::from_nanos(ns as u64))
    }
}

/// A QP's rate limiter: none (line rate) until the first CNP.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    state: Option<RateState>,
    /// Set while a limited QP must wait before its next packet.
    pub(crate) paced_until: Option<Instant>,
}

impl RateLimiter {
    /// The limiter's state, `None` at line rate.
    pub(crate) fn state(&self) -> Option<RateState> {
        self.state
    }

    /// A CNP arrived at `now`.
    pub(crate) fn on_cnp(&mut self, now: Instant, p: &DcqcnParams) {
        let s = self.state.get_or_insert(RateState {
            current: p.line_rate,
            target: p.line_rate,
            alpha: 1.0,
            timer_stage: 0,
            byte_stage: 0,
            bytes: 0,
            alpha_due: now,
            increase_due: now,
            tokens: 0.0,
            tokens_at: now,
        });
        s.fill(now, p);
        s.target = s.current;
        // At least 1 b/s whatever the configuration says: a zero rate would stop the QP.
        s.current = (s.current * (1.0 - s.alpha / 2.0)).max(p.min_rate).max(1.0);
        s.alpha = (1.0 - p.g) * s.alpha + p.g;
        s.alpha_due = now + p.alpha_period;
        s.increase_due = now + p.increase_period;
        (s.timer_stage, s.byte_stage, s.bytes) = (0, 0, 0);
        self.paced_until = s.wait(now);
    }

    /// `bytes` left at `now`: the byte counter advances, and a QP that has spent its
    /// bucket waits until the current rate has filled it again.
    pub(crate) fn on_sent(&mut self, now: Instant, bytes: usize, p: &DcqcnParams) {
        let Some(s) = &mut self.state else { return };
        s.fill(now, p);
        s.tokens -= bytes as f64;
        s.bytes += bytes as u64;
        while p.byte_counter > 0 && s.bytes >= p.byte_counter {
            s.bytes -= p.byte_counter;
            s.byte_stage += 1;
            Self::increase(s, p);
        }
        self.paced_until = s.wait(now);
        self.settle(p);
    }

    /// Runs the timers due at `now`.
    pub(crate) fn on_timer(&mut self, now: Instant, p: &DcqcnParams) {
        if self.paced_until.is_some_and(|t| t <= now) {
            self.paced_until = None;
        }
        let Some(s) = &mut self.state else { return };
        s.fill(now, p);
        while s.alpha_due <= now {
            s.alpha *= 1.0 - p.g;
            s.alpha_due = s.alpha_due + p.alpha_period;
        }
        while s.increase_due <= now {
            s.timer_stage += 1;
            Self::increase(s, p);
            s.increase_due = s.increase_due + p.increase_period;
        }
        self.paced_until = s.wait(now);
        self.settle(p);
    }

    /// When the limiter next needs [`Self::on_timer`].
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let timers = self.state.map(|s| s.alpha_due.min(s.increase_due));
        match (timers, self.paced_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn increase(s: &mut RateState, p: &DcqcnParams) {
        let f = p.fast_recovery;
        if s.timer_stage.max(s.byte_stage) >= f {
            let past = s.timer_stage.min(s.byte_stage);
            s.target += if past > f {
                f64::from(past - f) * p.hyper
            } else {
                p.additive
            };
            s.target = s.target.min(p.line_rate);
        }
        s.current = ((s.target + s.current) / 2.0).min(p.line_rate);
    }

    /// Back at line rate: no limiter.
    fn settle(&mut self, p: &DcqcnParams) {
        if let Some(s) = self.state
            && s.target >= p.line_rate
            && p.line_rate - s.current < p.additive
        {
            self.state = None;
            self.paced_until = None;
        }
    }
}

impl Qp {
    /// The traffic class byte this QP's packets leave with: the application's DSCP, and
    /// its ECN bits, or ECT(0) where the device marks (`Congestion::ecn`) and the
    /// application set none. UD and the special QPs keep the application's byte.
    pub(crate) fn wire_tclass(&self, ctx: &Ctx<'_>) -> u8 {
        let tclass = self.attr.traffic_class;
        let mark = ctx.congestion.ecn
            && self.qp_type != QpType::Ud
            && Ecn::from_tos(tclass) == Ecn::NotEct;
        if mark {
            ecn::tos(tclass >> 2, Ecn::Ect0)
        } else {
            tclass
        }
    }

    /// A packet marked `ecn` arrived for this QP from its peer: a CE mark asks the peer's
    /// QP for a CNP, at most one per `cnp_interval` (the notification point).
    pub(crate) fn note_ecn(&mut self, ctx: &mut Ctx<'_>, ecn: Ecn) {
        if ecn != Ecn::Ce || self.qp_type == QpType::Ud {
            return;
        }
        ctx.counters.np_ecn_marked_roce_packets += 1;
        self.notify.on_ce(ctx.now, ctx.congestion.cnp_interval);
    }

    /// A CNP for this QP arrived (the reaction point).
    pub(crate) fn handle_cnp(&mut self, ctx: &mut Ctx<'_>) {
        let p = &ctx.congestion.dcqcn;
        if !p.react || self.qp_type == QpType::Ud {
            ctx.counters.rp_cnp_ignored += 1;
            return;
        }
        ctx.counters.rp_cnp_handled += 1;
        self.rate.on_cnp(ctx.now, p);
    }

    /// Writes the CNP that waits, to the peer's QP.
    pub(crate) fn next_cnp(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Outgoing> {
        self.notify.pending = false;
        let dest = self.attr.ah_attr?.dest;
        let len = PacketRepr::cnp(self.attr.dest_qp_num).emit(buf).ok()?;
        ctx.counters.np_cnp_sent += 1;
        Some(Outgoing {
            len,
            dest,
            local_qpn: self.qpn,
            dest_qpn: self.attr.dest_qp_num,
            tclass: self.wire_tclass(ctx),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DcqcnParams {
        DcqcnParams {
            line_rate: 10e9,
            ..DcqcnParams::default()
        }
    }

    #[test]
    fn no_cnp_no_limiter() {
        let mut r = RateLimiter::default();
        let p = params();
        for i in 0..1000 {
            r.on_sent(Instant::from_micros(i), 4096, &p);
            r.on_timer(Instant::from_micros(i), &p);
        }
        assert_eq!(r.state(), None);
        assert_eq!(r.paced_until, None);
        assert_eq!(r.deadline(), None);
    }

    #[test]
    fn cnps_inside_an_interval_are_one() {
        let mut n = Notifier::default();
        let iv = Duration::from_micros(50);
        let hits: Vec<bool> = [0, 10, 49, 50, 99, 100, 180]
            .iter()
            .map(|&us| n.on_ce(Instant::from_micros(us), iv))
            .collect();
        assert_eq!(hits, [true, false, false, true, false, true, true]);
    }
}
