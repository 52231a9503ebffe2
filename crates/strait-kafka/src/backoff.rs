//! Exponential backoff with full jitter, so that many clients that failed together do not
//! retry together.

use std::time::Duration;

use rand::Rng;

/// Waits that double from `initial` up to `max`, each drawn uniformly from the upper half of the
/// current step (so a wait is never near zero, and never above `max`).
#[derive(Debug, Clone)]
pub struct Backoff {
    step: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `initial`, capped at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            step: initial.min(max),
            max,
        }
    }

    /// The next wait.
    pub fn next_wait(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(self.max);
        let half = step / 2;
        let jitter_ns = rand::rng().random_range(0..=half.as_nanos().min(u64::MAX as u128) as u64);
        half + Duration::from_nanos(jitter_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_stays_in_bounds() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<_> = (0..10).map(|_| b.next_wait()).collect();
        assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100));
        for w in &waits {
            assert!(*w <= Duration::from_secs(1), "{w:?}");
        }
        assert!(waits[9] >= Duration::from_millis(500), "{:?}", waits[9]);
    }
}
