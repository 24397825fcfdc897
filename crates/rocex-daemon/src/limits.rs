//! Per-client limits: how many QPs, CQs, MRs and PDs one control connection may hold, and
//! how many bytes it may register, so that one application cannot exhaust the device (or
//! the daemon's address space) for the others.
//!
//! A request over a limit is refused with `EDQUOT` and a detail that starts with the
//! limit's configuration key (`docs/abi.md` §6.3), which `rocex-verbs` turns into
//! `Error::Limit`.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;

/// The limits one client is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// QPs.
    pub(crate) max_qps: u64,
    /// CQs.
    pub(crate) max_cqs: u64,
    /// MRs.
    pub(crate) max_mrs: u64,
    /// Bytes registered in all its MRs together.
    pub(crate) max_mr_bytes: u64,
    /// PDs.
    pub(crate) max_pds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_qps: 4096,
            max_cqs: 4096,
            max_mrs: 4096,
            max_mr_bytes: 64 << 30,
            max_pds: 4096,
        }
    }
}

/// The `[limits]` table of the configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitKeys {
    max_qps: Option<u64>,
    max_cqs: Option<u64>,
    max_mrs: Option<u64>,
    max_mr_bytes: Option<Bytes>,
    max_pds: Option<u64>,
}

/// The limit flags (they win over the file).
#[derive(Debug, Default, Clone, clap::Args)]
pub(crate) struct LimitArgs {
    /// Most QPs one client may hold [default: 4096].
    #[arg(long, value_name = "N")]
    max_qps: Option<u64>,
    /// Most CQs one client may hold [default: 4096].
    #[arg(long, value_name = "N")]
    max_cqs: Option<u64>,
    /// Most MRs one client may hold [default: 4096].
    #[arg(long, value_name = "N")]
    max_mrs: Option<u64>,
    /// Most bytes one client may register, all MRs together (suffix K, M, G, T)
    /// [default: 64G].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    max_mr_bytes: Option<u64>,
    /// Most PDs one client may hold [default: 4096].
    #[arg(long, value_name = "N")]
    max_pds: Option<u64>,
}

impl LimitArgs {
    /// The flags over the file's `[limits]` over the defaults.
    pub(crate) fn merge(self, file: Option<LimitKeys>) -> Limits {
        let f = file.unwrap_or_default();
        let d = Limits::default();
        Limits {
            max_qps: self.max_qps.or(f.max_qps).unwrap_or(d.max_qps),
            max_cqs: self.max_cqs.or(f.max_cqs).unwrap_or(d.max_cqs),
            max_mrs: self.max_mrs.or(f.max_mrs).unwrap_or(d.max_mrs),
            max_mr_bytes: self
                .max_mr_bytes
                .or(f.max_mr_bytes.map(|b| b.0))
                .unwrap_or(d.max_mr_bytes),
            max_pds: self.max_pds.or(f.max_pds).unwrap_or(d.max_pds),
        }
    }
}

/// A byte count in the file: an integer, or a string with a K/M/G/T suffix.
#[derive(Debug, Clone, Copy)]
struct Bytes(u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Self(n)),
            Raw::S(s) => parse_bytes(&s).map(Self).map_err(serde::de::Error::custom),
        }
    }
}

/// `4096`, `64K`, `512M`, `16G`, `1T` (powers of 1024).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 10),
        Some((i, 'M' | 'm')) => (&s[..i], 20),
        Some((i, 'G' | 'g')) => (&s[..i], 30),
        Some((i, 'T' | 't')) => (&s[..i], 40),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?} is not a byte count (e.g. 4096, 512M, 16G)"))
}

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    /// QPs.
    Qps,
    /// CQs.
    Cqs,
    /// MRs.
    Mrs,
    /// Registered bytes.
    MrBytes,
    /// PDs.
    Pds,
}

impl Resource {
    /// The configuration key (and, with dashes, the flag) that sets the limit.
    pub(crate) const fn key(self) -> &'static str {
        match self {
            Self::Qps => "max_qps",
            Self::Cqs => "max_cqs",
            Self::Mrs => "max_mrs",
            Self::MrBytes => "max_mr_bytes",
            Self::Pds => "max_pds",
        }
    }

    const fn noun(self) -> &'static str {
        match self {
            Self::Qps => "QPs",
            Self::Cqs => "CQs",
            Self::Mrs => "MRs",
            Self::MrBytes => "registered bytes",
            Self::Pds => "PDs",
        }
    }
}

/// A request that would take a client over a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverLimit {
    /// Which limit.
    pub(crate) resource: Resource,
    /// Its value.
    pub(crate) limit: u64,
    /// What the client holds.
    pub(crate) held: u64,
    /// What the request adds.
    pub(crate) wanted: u64,
}

impl fmt::Display for OverLimit {
    /// Starts with the key: clients find the limit by it (`docs/abi.md` §6.3).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: per-client limit of {} {} reached (held {}, asked for {} more)",
            self.resource.key(),
            self.limit,
            self.resource.noun(),
            self.held,
            self.wanted
        )
    }
}

impl Limits {
    /// The limit on `r`.
    pub(crate) const fn of(&self, r: Resource) -> u64 {
        match r {
            Resource::Qps => self.max_qps,
            Resource::Cqs => self.max_cqs,
            Resource::Mrs => self.max_mrs,
            Resource::MrBytes => self.max_mr_bytes,
            Resource::Pds => self.max_pds,
        }
    }

    /// Whether a client holding `held` of `r` may take `wanted` more.
    pub(crate) fn check(&self, r: Resource, held: u64, wanted: u64) -> Result<(), OverLimit> {
        let limit = self.of(r);
        if held.checked_add(wanted).is_some_and(|n| n <= limit) {
            Ok(())
        } else {
            Err(OverLimit {
                resource: r,
                limit,
                held,
                wanted,
            })
        }
    }
}

/// The bytes one client has registered, by lkey (so a deregistration gives them back).
#[derive(Debug, Default)]
pub(crate) struct MrBytes {
    by_lkey: HashMap<u32, u64>,
    total: u64,
}

impl MrBytes {
    /// Bytes registered now.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Records a registration.
    pub(crate) fn add(&mut self, lkey: u32, len: u64) {
        if let Some(old) = self.by_lkey.insert(lkey, len) {
            self.total -= old;
        }
        self.total += len;
    }

    /// Forgets a registration.
    pub(crate) fn remove(&mut self, lkey: u32) {
        if let Some(len) = self.by_lkey.remove(&lkey) {
            self.total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_counts_what_is_held_and_asked() {
        let l = Limits {
            max_qps: 2,
            max_mr_bytes: 100,
            ..Limits::default()
        };
        assert!(l.check(Resource::Qps, 1, 1).is_ok());
        let e = l.check(Resource::Qps, 2, 1).unwrap_err();
        assert_eq!(e.limit, 2);
        assert!(e.to_string().starts_with("max_qps: "), "{e}");
        assert!(l.check(Resource::MrBytes, 60, 40).is_ok());
        assert!(l.check(Resource::MrBytes, 60, 41).is_err());
        assert!(l.check(Resource::MrBytes, 1, u64::MAX).is_err());
    }

    #[test]
    fn bytes_are_given_back() {
        let mut b = MrBytes::default();
        b.add(1, 4096);
        b.add(2, 100);
        b.remove(1);
        b.remove(7);
        assert_eq!(b.total(), 100);
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("16G"), Ok(16 << 30));
        assert!(parse_bytes("16Q").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        let k: LimitKeys = toml::from_str("max_qps = 3\nmax_mr_bytes = \"1M\"\n").unwrap();
        let l = LimitArgs {
            max_qps: Some(5),
            ..LimitArgs::default()
        }
        .merge(Some(k));
        assert_eq!((l.max_qps, l.max_mr_bytes, l.max_cqs), (5, 1 << 20, 4096));
        assert!(toml::from_str::<LimitKeys>("max_qp = 3\n").is_err());
    }
}
