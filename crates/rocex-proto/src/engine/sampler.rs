//! Samples of how long a send work request waits between its post and its first packet.

use super::Engine;
use crate::time::Instant;

/// Post times of a sample of send work requests whose first packet has been built, for
/// measuring how long a request waits before it goes out (without a clock per packet).
#[derive(Debug, Default)]
pub(super) struct SendSampler {
    /// Every how many posts one is sampled; 0: none.
    every: u32,
    posts: u32,
    built: Vec<Instant>,
}

/// Samples kept until taken; later ones are dropped.
const MAX_SEND_SAMPLES: usize = 1024;

impl SendSampler {
    pub(super) fn on_post(&mut self, now: Instant) -> Option<Instant> {
        if self.every == 0 {
            return None;
        }
        self.posts += 1;
        if self.posts < self.every {
            return None;
        }
        self.posts = 0;
        Some(now)
    }

    pub(super) fn on_built(&mut self, posted_at: Instant) {
        if self.built.len() < MAX_SEND_SAMPLES {
            self.built.push(posted_at);
        }
    }
}

impl Engine {
    /// Samples one send work request in `every` (0: none): [`Engine::take_send_samples`]
    /// then gives the post times of those whose first packet [`Engine::poll_transmit`]
    /// has written.
    pub fn sample_sends(&mut self, every: u32) {
        self.sends.every = every;
        self.sends.posts = 0;
    }

    /// The post times of the sampled send work requests whose first packet has been
    /// written since the last call, oldest first (at most 1024 are kept).
    pub fn take_send_samples(&mut self) -> std::vec::Drain<'_, Instant> {
        self.sends.built.drain(..)
    }
}
