//! DCQCN's parameters by name, as `rocexd --dcqcn KEY=VALUE,...` and its configuration
//! file's `[dcqcn]` table give them: each checked, with an error naming the key.

use core::fmt;
use core::time::Duration;

use super::Congestion;

/// The keys [`Congestion::set`] takes, with their units.
const KEYS: &str = "react (true/false), g (0..1], alpha_period_us, increase_period_us, \
    byte_counter (bytes, 0: off), fast_recovery, additive_mbps, hyper_mbps, min_rate_mbps, \
    line_rate_mbps, burst (bytes), cnp_interval_us";

/// A DCQCN parameter that could not be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcqcnParamError {
    /// No parameter has this name.
    UnknownKey(String),
    /// `KEY=VALUE` without the `=`.
    NoValue(String),
    /// The value is not a number of the key's kind, or outside its range.
    BadValue {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// What the key takes.
        want: &'static str,
    },
    /// `min_rate_mbps` above `line_rate_mbps`.
    MinAboveLine,
}

impl fmt::Display for DcqcnParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKey(k) => write!(f, "unknown DCQCN parameter `{k}` (known: {KEYS})"),
            Self::NoValue(k) => write!(f, "DCQCN parameter `{k}` has no value (KEY=VALUE)"),
            Self::BadValue { key, value, want } => {
                write!(f, "DCQCN parameter {key}={value}: want {want}")
            }
            Self::MinAboveLine => f.write_str("DCQCN min_rate_mbps is above line_rate_mbps"),
        }
    }
}

impl std::error::Error for DcqcnParamError {}

impl Congestion {
    /// Sets one parameter by name (the keys of `rocexd --dcqcn`); rates are in Mb/s,
    /// periods in microseconds.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), DcqcnParamError> {
        let bad = |want| DcqcnParamError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
            want,
        };
        let num = |want, ok: fn(f64) -> bool| {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && ok(*v))
                .ok_or_else(|| bad(want))
        };
        let int = |want| value.parse::<u64>().map_err(|_| bad(want));
        let micros = |want| {
            let v = int(want)?;
            (v > 0)
                .then(|| Duration::from_micros(v))
                .ok_or_else(|| bad(want))
        };
        let mbps = |want| num(want, |v| v > 0.0).map(|v| v * 1e6);
        let d = &mut self.dcqcn;
        match key {
            "react" => d.react = value.parse().map_err(|_| bad("true or false"))?,
            "g" => d.g = num("a number in (0, 1]", |v| v > 0.0 && v <= 1.0)?,
            "alpha_period_us" => d.alpha_period = micros("whole microseconds above 0")?,
            "increase_period_us" => d.increase_period = micros("whole microseconds above 0")?,
            "byte_counter" => d.byte_counter = int("a whole number of bytes (0: off)")?,
            "fast_recovery" => {
                d.fast_recovery = value.parse().map_err(|_| bad("a whole number of steps"))?
            }
            "additive_mbps" => d.additive = num("Mb/s, 0 or more", |v| v >= 0.0)? * 1e6,
            "hyper_mbps" => d.hyper = num("Mb/s, 0 or more", |v| v >= 0.0)? * 1e6,
            "min_rate_mbps" => d.min_rate = mbps("Mb/s above 0")?,
            "line_rate_mbps" => d.line_rate = mbps("Mb/s above 0")?,
            "burst" => {
                d.burst = int("bytes, at least 1")
                    .ok()
                    .filter(|&b| b > 0)
                    .ok_or_else(|| bad("bytes, at least 1"))?
            }
            "cnp_interval_us" => {
                self.cnp_interval = Duration::from_micros(int("whole microseconds")?)
            }
            _ => return Err(DcqcnParamError::UnknownKey(key.to_owned())),
        }
        Ok(())
    }

    /// Sets every `KEY=VALUE` of a comma-separated list, then checks that the minimum
    /// rate is not above the line rate.
    pub fn set_all(&mut self, list: &str) -> Result<(), DcqcnParamError> {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| DcqcnParamError::NoValue(item.to_owned()))?;
            self.set(k.trim(), v.trim())?;
        }
        self.check()
    }

    /// Checks what no single key can: the minimum rate is at most the line rate.
    pub fn check(&self) -> Result<(), DcqcnParamError> {
        if self.dcqcn.min_rate > self.dcqcn.line_rate {
            return Err(DcqcnParamError::MinAboveLine);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_sets_its_parameter() {
        let mut c = Congestion::default();
        c.set_all(
            "react=false, g=0.5,alpha_period_us=10,increase_period_us=300,byte_counter=0,\
             fast_recovery=3,additive_mbps=5,hyper_mbps=50,min_rate_mbps=2,\
             line_rate_mbps=25000,burst=65536,cnp_interval_us=4",
        )
        .unwrap();
        let d = c.dcqcn;
        assert!(!d.react);
        assert_eq!(
            (d.g, d.byte_counter, d.fast_recovery, d.burst),
            (0.5, 0, 3, 65536)
        );
        assert_eq!(
            (d.additive, d.hyper, d.min_rate, d.line_rate),
            (5e6, 50e6, 2e6, 25e9)
        );
        assert_eq!(d.alpha_period, Duration::from_micros(10));
        assert_eq!(d.increase_period, Duration::from_micros(300));
        assert_eq!(c.cnp_interval, Duration::from_micros(4));
    }

    #[test]
    fn bad_keys_and_values_say_which() {
        let mut c = Congestion::default();
        let e = c.set_all("gain=0.1").unwrap_err();
        assert_eq!(e, DcqcnParamError::UnknownKey("gain".into()));
        assert!(e.to_string().contains("known: react"), "{e}");
        assert_eq!(c.set_all("g"), Err(DcqcnParamError::NoValue("g".into())));
        for (k, v) in [
            ("g", "0"),
            ("g", "1.5"),
            ("g", "NaN"),
            ("alpha_period_us", "0"),
            ("alpha_period_us", "1.5"),
            ("line_rate_mbps", "-1"),
            ("min_rate_mbps", "inf"),
            ("burst", "0"),
            ("react", "yes"),
            ("fast_recovery", "-2"),
        ] {
            let e = c.set(k, v).unwrap_err();
            assert!(
                matches!(&e, DcqcnParamError::BadValue { key, .. } if key == k),
                "{e}"
            );
            assert!(
                e.to_string()
                    .starts_with(&format!("DCQCN parameter {k}={v}: want"))
            );
        }
        assert_eq!(c, Congestion::default(), "nothing set by a refused value");
        let e = c.set_all("line_rate_mbps=100,min_rate_mbps=200");
        assert_eq!(e, Err(DcqcnParamError::MinAboveLine));
    }
}
