//! Where the coordinator's time comes from. Leases, heartbeats and timestamps are stored as
//! Unix milliseconds, read from one [`Clock`] that the [`Fleet`](crate::Fleet) is given:
//! [`SystemClock`] in production, [`ManualClock`] in tests, which moves only when told to, so
//! lease expiry and requeueing can be tested on the state machine alone.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A source of Unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// Wall time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// Simulated time: it stands still until [`ManualClock::advance`]. Clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now_ms: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn starting_at_ms(start_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: Arc::new(AtomicI64::new(start_ms)),
        }
    }

    pub fn advance(&self, by: Duration) {
        self.now_ms
            .fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_clones_share_it() {
        let clock = ManualClock::starting_at_ms(1_000);
        let other = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        other.advance(Duration::from_millis(250));
        assert_eq!(clock.now_ms(), 1_250);
    }

    #[test]
    fn the_system_clock_reads_unix_time() {
        // 2020-01-01 in Unix ms: any machine running this is later.
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
