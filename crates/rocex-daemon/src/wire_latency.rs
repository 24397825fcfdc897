//! How long sampled send work requests take from the daemon's read of their descriptor to
//! the wire (`rocex stat`'s `doorbell_to_wire_*`).

/// One send work request in this many is timed from its descriptor to the wire.
pub(crate) const WIRE_SAMPLE_EVERY: u32 = 64;

/// How long sampled send work requests took from the pass that read their descriptor to
/// a point of the send call that carried their first packet: a log-linear histogram
/// (8 buckets per power of two, so a quantile is within 1/16 of the value).
#[derive(Debug)]
pub(crate) struct WireLatency {
    buckets: Box<[u64; WIRE_BUCKETS]>,
    samples: u64,
}

/// Bucket count: up to 2^40 ns (18 minutes), the last bucket taking the rest.
const WIRE_BUCKETS: usize = 8 * 39;

impl Default for WireLatency {
    fn default() -> Self {
        Self {
            buckets: Box::new([0; WIRE_BUCKETS]),
            samples: 0,
        }
    }
}

impl WireLatency {
    pub(crate) fn record(&mut self, ns: u64) {
        self.buckets[bucket_of(ns).min(WIRE_BUCKETS - 1)] += 1;
        self.samples += 1;
    }

    pub(crate) fn samples(&self) -> u64 {
        self.samples
    }

    /// The `q` quantile (0..=1) in nanoseconds, the middle of its bucket; 0 with no samples.
    pub(crate) fn quantile_ns(&self, q: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let rank = ((q * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(i);
                return low + width / 2;
            }
        }
        u64::MAX
    }
}

/// Values below 8 have a bucket each; above, 8 buckets split each power of two.
fn bucket_of(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    (e - 2) * 8 + ((ns >> (e - 3)) & 7) as usize
}

/// The lowest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < 8 {
        return (i as u64, 1);
    }
    let (e, sub) = (i / 8 + 2, (i % 8) as u64);
    ((8 + sub) << (e - 3), 1 << (e - 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_bucket_that_holds_it() {
        for ns in (0..5000).chain([1 << 20, (1 << 20) + 12345, 999_999_999, 1 << 39]) {
            let (low, width) = bucket_range(bucket_of(ns));
            assert!(low <= ns && ns < low + width, "{ns} in {low}+{width}");
            assert!(width <= low.max(1) / 8 + 1, "{ns}: bucket {width} wide");
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_values() {
        let mut h = WireLatency::default();
        assert_eq!(h.quantile_ns(0.5), 0, "no samples");
        for ns in 1..=100u64 {
            h.record(ns * 100);
        }
        h.record(u64::MAX);
        assert_eq!(h.samples(), 101);
        let p50 = h.quantile_ns(0.5);
        assert!((4800..=5400).contains(&p50), "p50 {p50}");
        let p99 = h.quantile_ns(0.99);
        assert!((9400..=10600).contains(&p99), "p99 {p99}");
        assert!(
            h.quantile_ns(1.0) > 1 << 39,
            "the largest lands in the last bucket"
        );
    }
}
