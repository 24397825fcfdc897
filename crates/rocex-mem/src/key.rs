//! Memory keys drawn from a seeded CSPRNG.
//!
//! An rkey is the only thing that stands between a peer and an application's memory, so
//! keys must not be guessable from earlier ones: rxe's `index << 8 | key` layout leaks the
//! table slot and leaves 8 bits of secret. Here every key is 32 bits from ChaCha20, seeded by
//! the caller so runs are reproducible. A key is never 0, never equal to a live key, and not
//! reissued while it is among the last [`RETIRED_WINDOW`] keys retired, so a peer holding a
//! stale rkey does not reach memory registered just after.

use std::collections::{HashSet, VecDeque};

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::MemError;

/// How many retired keys are kept out of circulation.
pub(crate) const RETIRED_WINDOW: usize = 4096;

/// Draws after which a key space this full is declared exhausted.
const MAX_DRAWS: usize = 64;

/// Source of fresh keys.
pub(crate) struct KeyGen {
    rng: ChaCha20Rng,
    retired: VecDeque<u32>,
    retired_set: HashSet<u32>,
}

impl KeyGen {
    pub(crate) fn new(seed: [u8; 32]) -> Self {
        Self {
            rng: ChaCha20Rng::from_seed(seed),
            retired: VecDeque::with_capacity(RETIRED_WINDOW),
            retired_set: HashSet::with_capacity(RETIRED_WINDOW),
        }
    }

    /// A key that is not 0, not `live`, and not recently retired.
    pub(crate) fn fresh(&mut self, live: impl Fn(u32) -> bool) -> Result<u32, MemError> {
        for _ in 0..MAX_DRAWS {
            let key = self.rng.next_u32();
            if key != 0 && !live(key) && !self.retired_set.contains(&key) {
                return Ok(key);
            }
        }
        Err(MemError::KeysExhausted)
    }

    /// Keep `key` out of circulation for the next [`RETIRED_WINDOW`] retirements.
    pub(crate) fn retire(&mut self, key: u32) {
        if !self.retired_set.insert(key) {
            return;
        }
        self.retired.push_back(key);
        if self.retired.len() > RETIRED_WINDOW {
            if let Some(old) = self.retired.pop_front() {
                self.retired_set.remove(&old);
            }
        }
    }
}

impl core::fmt::Debug for KeyGen {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The generator state is the secret behind every future key: never print it.
        f.debug_struct("KeyGen")
            .field("retired", &self.retired.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyGen, RETIRED_WINDOW};

    #[test]
    fn retired_keys_are_not_reissued_within_the_window() {
        let mut g = KeyGen::new([7; 32]);
        let first = g.fresh(|_| false).unwrap();
        g.retire(first);
        // Replay the same stream: the first draw is the retired key and must be skipped.
        let mut replay = KeyGen::new([7; 32]);
        replay.retire(first);
        assert_ne!(replay.fresh(|_| false).unwrap(), first);
        for k in 1..=RETIRED_WINDOW as u32 {
            g.retire(k);
        }
        assert!(!g.retired_set.contains(&first));
        assert_eq!(g.retired.len(), RETIRED_WINDOW);
    }

    #[test]
    fn a_full_key_space_is_an_error_not_a_hang() {
        let mut g = KeyGen::new([1; 32]);
        assert_eq!(g.fresh(|_| true), Err(crate::MemError::KeysExhausted));
    }
}
