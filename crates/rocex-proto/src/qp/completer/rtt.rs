//! Round-trip estimation for the retransmit timer's early deadline (RFC 6298's SRTT and
//! RTTVAR, in engine time).
//!
//! rxe's requester waits the QP's whole ACK timeout (4.096 us x 2^timeout, 67 ms at
//! perftest's 14) before it resends anything the responder did not answer: a lost last
//! packet of a message, or a lost sequence NAK, costs that long. rocex resends earlier,
//! once a measured round trip and its variation have passed without an answer, and keeps
//! the ACK timeout for what rxe does at it: counting a retry against `retry_cnt`. The
//! resent packets are the ones rxe would resend at its timeout (go-back-N from the oldest
//! unacknowledged PSN), so a peer sees the same packets, sooner (`docs/wire.md`,
//! "Recovery").
//!
//! A responder that now and then answers late (a host busy or descheduled for a while,
//! kernel rxe in an emulated guest) must not be resent for every time. A late answer's
//! round trip is longer than the deadline, so its packet has been resent before the
//! answer comes, and Karn's rule forbids the sample: the timer never learns it. An answer
//! that comes sooner after the resend than any round trip seen cannot be the copy's,
//! though: it is the first copy's, the resend was spurious, and its round trip is a
//! sample. And the longest recent sample is a floor under the deadline, since such a
//! responder is late again long after SRTT and RTTVAR have forgotten it.

use core::time::Duration;

use rocex_wire::Psn;

use crate::time::Instant;

/// The least early deadline: below it, a responder's scheduling (a daemon woken from
/// sleep) would pass for loss. IRN's RTO_low (Mittal et al., SIGCOMM 2018) is the same.
pub(crate) const MIN_RTO: Duration = Duration::from_micros(100);
/// Early deadlines run out in a row double the next, at most this many times.
const MAX_BACKOFF: u32 = 10;
/// How many samples the longest recent round trip stands for ([`Rtt::peak`]).
const PEAK_SAMPLES: u32 = 256;

/// The packet being timed.
#[derive(Debug, Clone, Copy)]
struct Timed {
    psn: Psn,
    /// When it first went out.
    at: Instant,
    /// When a go-back first sent it again.
    resent: Option<Instant>,
}

/// Measured round trips and the packet being timed.
#[derive(Debug, Default)]
pub(crate) struct Rtt {
    /// Smoothed round trip, once a sample has been taken.
    srtt: Option<Duration>,
    /// Its mean deviation.
    rttvar: Duration,
    /// The shortest round trip seen: no resend is answered sooner.
    min: Option<Duration>,
    /// The longest round trip of the last [`PEAK_SAMPLES`] samples, and how many samples
    /// ago it was taken: a responder that answers late now and then (a host descheduled
    /// for milliseconds) does so again, long after SRTT and RTTVAR have forgotten it.
    peak: (Duration, u32),
    /// The packet being timed (one at a time).
    timing: Option<Timed>,
    /// Early deadlines run out since the last progress.
    backoff: u32,
    /// Selective repeat: an answer came since the last tail-loss probe ([`Rtt::probe_at`]).
    probe: bool,
}

impl Rtt {
    /// A packet left at `now` for the first time; timed unless another is. Any packet,
    /// not only one asking for an ACK: the sample ends at the first answer that covers it
    /// (an ACK, a READ response, or a NAK past it), so it also counts the time the
    /// responder takes to answer at all, which is what the timer waits for. Timing only
    /// packets with AckReq left a link losing 5% with almost no sample: 64 packets had to
    /// arrive unbroken first.
    pub(crate) fn sent(&mut self, psn: Psn, now: Instant) {
        if self.timing.is_none() {
            self.timing = Some(Timed {
                psn,
                at: now,
                resent: None,
            });
        }
    }

    /// A packet went out again at `now`. Resends run in PSN order from the oldest
    /// unacknowledged, so one at or past the timed packet has resent it, and an answer to
    /// it may now be the copy's (Karn's rule); one before it leaves an answer unambiguous
    /// until then. Forgetting the timing at the go-back instead left a link losing 5% with
    /// no sample at all: nearly every window went back before its timed packet was answered.
    /// Under selective repeat (`selective`) only the packet itself resends it.
    pub(crate) fn resent(&mut self, psn: Psn, now: Instant, selective: bool) {
        if let Some(t) = &mut self.timing
            && (!psn.is_before(t.psn) && !selective || psn == t.psn)
            && t.resent.is_none()
        {
            t.resent = Some(now);
        }
    }

    /// Everything before `acked` is acknowledged at `now`: a sample if that covers the
    /// timed packet. The backoff is forgotten.
    pub(crate) fn progress(&mut self, acked: Psn, now: Instant) {
        self.backoff = 0;
        self.probe = true;
        if let Some(t) = self.timing
            && acked.is_after(t.psn)
        {
            self.answered(t, now);
        }
    }

    /// Selective repeat: the peer holds `psn` at `now` (a SACK shows it, or a response
    /// shows its request executed), which may be long before the cumulative
    /// acknowledgement covers it: a hole before it is resent first. Timed to the
    /// cumulative acknowledgement instead, a packet past a hole measured the hole's
    /// recovery, which at 10% loss grew the recent longest round trip, the deadline's
    /// floor, to the ACK timeout. The backoff is forgotten: the peer answers.
    pub(crate) fn held(&mut self, psn: Psn, now: Instant) {
        self.backoff = 0;
        self.probe = true;
        if let Some(t) = self.timing
            && t.psn == psn
        {
            self.answered(t, now);
        }
    }

    /// The timed packet `t` is answered at `now`: a sample if the answer can only be its
    /// first copy's. That is so if the packet was not resent, or if the answer came sooner
    /// after the resend than any round trip seen (the copy cannot have been answered yet:
    /// the resend was spurious, and its first copy's round trip is the one the timer must
    /// learn).
    fn answered(&mut self, t: Timed, now: Instant) {
        self.timing = None;
        let r = now - t.at;
        match t.resent {
            None => self.sample(r),
            Some(again) if self.min.is_some_and(|m| now - again < m) => self.sample(r),
            Some(_) => {}
        }
    }

    /// A round trip `r` measured: RFC 6298's SRTT and RTTVAR, the shortest and the recent
    /// longest.
    fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                self.rttvar = (self.rttvar * 3 + s.abs_diff(r)) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
        let (peak, age) = self.peak;
        self.peak = if r >= peak || age + 1 >= PEAK_SAMPLES {
            (r, 0)
        } else {
            (peak, age + 1)
        };
    }

    /// Selective repeat's tail-loss probe (RFC 8985 section 7, after Linux TCP): two
    /// smoothed round trips (at least [`MIN_RTO`]) after `now` with no answer, one packet
    /// goes again, so that the peer's answer (a SACK, a READ response) shows what was
    /// lost; everything not known held is resent only at the early deadline, whose floor
    /// is the longest recent round trip. Once per answer; none before the first sample.
    /// Without it a burst lost whole at the end of a window cost that floor, milliseconds
    /// on a loaded host, where the probe costs a round trip.
    pub(crate) fn probe_at(&self, now: Instant) -> Option<Instant> {
        let srtt = self.srtt.filter(|_| self.probe)?;
        Some(now + (srtt * 2).max(MIN_RTO))
    }

    /// Whether an answer at `now` to a packet resent at `again` can be the resend's: no
    /// answer comes sooner than the shortest round trip seen (RFC 8985's check before it
    /// trusts the time of a retransmission that an acknowledgement covers).
    pub(crate) fn may_answer(&self, again: Instant, now: Instant) -> bool {
        self.min.is_some_and(|m| now - again >= m)
    }

    /// The tail-loss probe went: the next deadline is the early one.
    pub(crate) fn probed(&mut self) {
        self.probe = false;
    }

    /// An early deadline ran out with nothing answered: the next is twice as far.
    pub(crate) fn back_off(&mut self) {
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
    }

    /// The early deadline for a timer started at `now`: none before the first sample.
    /// RFC 6298's SRTT + 4 RTTVAR, at least the recent longest round trip and
    /// [`MIN_RTO`], doubled per early deadline run out since the last progress.
    pub(crate) fn deadline(&self, now: Instant) -> Option<Instant> {
        let rto = (self.srtt? + self.rttvar * 4).max(self.peak.0).max(MIN_RTO);
        Some(now + rto * (1 << self.backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn first_sample_then_smoothing_as_rfc_6298() {
        let mut r = Rtt::default();
        let t0 = Instant::ZERO;
        assert_eq!(r.deadline(t0), None, "no deadline before a sample");
        r.sent(Psn::new(10), t0);
        r.progress(Psn::new(10), t0 + us(50));
        assert_eq!(r.srtt, None, "PSN 10 not yet acknowledged");
        r.progress(Psn::new(11), t0 + us(80));
        // R = 80: SRTT 80, RTTVAR 40, RTO 80 + 160.
        assert_eq!(r.deadline(t0), Some(t0 + us(240)));
        r.sent(Psn::new(20), t0 + us(100));
        r.sent(Psn::new(30), t0 + us(110)); // not timed: PSN 20 is
        r.progress(Psn::new(31), t0 + us(140));
        // R = 40: RTTVAR 3/4 * 40 + 1/4 * 40 = 40, SRTT 7/8 * 80 + 1/8 * 40 = 75.
        assert_eq!(r.deadline(t0), Some(t0 + us(235)));
    }

    #[test]
    fn floor_backoff_and_karn() {
        let mut r = Rtt::default();
        let t0 = Instant::ZERO;
        r.sent(Psn::new(0), t0);
        r.progress(Psn::new(1), t0 + us(10));
        assert_eq!(r.deadline(t0), Some(t0 + MIN_RTO));
        r.back_off();
        r.back_off();
        assert_eq!(r.deadline(t0), Some(t0 + MIN_RTO * 4));
        r.sent(Psn::new(5), t0);
        r.resent(Psn::new(4), t0 + us(100), false);
        r.resent(Psn::new(5), t0 + us(100), false);
        r.progress(Psn::new(6), t0 + us(5000));
        assert_eq!(
            r.deadline(t0),
            Some(t0 + MIN_RTO),
            "no sample from a resent packet"
        );
        r.sent(Psn::new(9), t0);
        r.resent(Psn::new(7), t0 + us(100), false);
        r.progress(Psn::new(10), t0 + us(300));
        // Answered before its resend: R = 300, SRTT 7/8 * 10 + 1/8 * 300 = 46.25,
        // RTTVAR 3/4 * 5 + 1/4 * 290 = 76.25, RTO 351.25 us.
        assert_eq!(r.deadline(t0), Some(t0 + Duration::from_nanos(351_250)));
    }

    #[test]
    fn an_answer_sooner_than_any_round_trip_after_the_resend_is_the_first_copys() {
        let mut r = Rtt::default();
        let t0 = Instant::ZERO;
        r.sent(Psn::new(0), t0);
        r.progress(Psn::new(1), t0 + us(40));
        r.sent(Psn::new(1), t0 + us(1000));
        r.resent(Psn::new(1), t0 + us(1140), false);
        r.back_off();
        // 30 us after the resend, under the 40 us seen: the first copy's, R = 170.
        r.progress(Psn::new(2), t0 + us(1170));
        // SRTT 7/8 * 40 + 1/8 * 170 = 56.25, RTTVAR 3/4 * 20 + 1/4 * 130 = 47.5, peak 170.
        assert_eq!(r.deadline(t0), Some(t0 + Duration::from_nanos(246_250)));
        // The peak outlasts RTTVAR: 20 round trips of 40 us later it still holds.
        for i in 2..22 {
            r.sent(Psn::new(i), t0);
            r.progress(Psn::new(i + 1), t0 + us(40));
        }
        assert_eq!(r.deadline(t0), Some(t0 + us(170)));
        // An answer as late after the resend as a round trip may be the copy's: no sample.
        r.sent(Psn::new(22), t0);
        r.resent(Psn::new(22), t0 + us(200), false);
        r.progress(Psn::new(23), t0 + us(250));
        assert_eq!(r.deadline(t0), Some(t0 + us(170)));
    }

    #[test]
    fn one_tail_probe_per_answer_at_two_round_trips() {
        let mut r = Rtt::default();
        let t0 = Instant::ZERO;
        assert_eq!(r.probe_at(t0), None, "no probe before a sample");
        r.sent(Psn::new(0), t0);
        r.progress(Psn::new(1), t0 + us(80));
        assert_eq!(r.probe_at(t0), Some(t0 + us(160)));
        r.probed();
        assert_eq!(r.probe_at(t0), None, "once");
        // SRTT 80, RTTVAR 40: the early deadline follows.
        assert_eq!(r.deadline(t0), Some(t0 + us(240)));
        // A SACK showing a packet held is an answer: the next silence gets a probe.
        r.held(Psn::new(7), t0 + us(300));
        assert_eq!(r.probe_at(t0), Some(t0 + us(160)));
        // Never sooner than MIN_RTO.
        r.sent(Psn::new(8), t0);
        for _ in 0..30 {
            r.sample(us(10));
        }
        assert_eq!(r.probe_at(t0), Some(t0 + MIN_RTO));
    }

    #[test]
    fn selective_repeat_times_a_packet_to_the_sack_that_shows_it_held() {
        let mut r = Rtt::default();
        let t0 = Instant::ZERO;
        r.sent(Psn::new(5), t0);
        // Another packet resent selectively is not this one: no Karn's rule.
        r.resent(Psn::new(6), t0 + us(10), true);
        r.held(Psn::new(4), t0 + us(50));
        assert_eq!(r.deadline(t0), None, "PSN 4 is not the timed packet");
        r.held(Psn::new(5), t0 + us(100));
        // R = 100: SRTT 100, RTTVAR 50.
        assert_eq!(r.deadline(t0), Some(t0 + us(300)));
        // The cumulative ACK past the hole before it, much later, is no sample.
        r.progress(Psn::new(6), t0 + us(9000));
        assert_eq!(r.deadline(t0), Some(t0 + us(300)));
    }
}
