//! Retry delays for reconnects and uploads: exponential, capped, and jittered
//! ("decorrelated jitter": each delay is drawn between the base and three times the last,
//! then capped), so a coordinator restart does not bring the whole fleet back in lockstep.
//! The generator is a small xorshift seeded from the clock, the pid and a counter: jitter
//! needs spread, not cryptographic quality, and no new dependency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A retry delay sequence. `next_delay` lies in `[base, cap]`; `reset` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    last: Duration,
    rng: XorShift64,
}

impl Backoff {
    /// A sequence seeded from the clock, the pid and a per-process counter: two agents (or two
    /// sequences in one agent) started at the same instant still draw apart.
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = nanos
            ^ (u64::from(std::process::id()) << 32)
            ^ COUNTER
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Backoff::with_seed(base, cap, seed)
    }

    pub fn with_seed(base: Duration, cap: Duration, seed: u64) -> Backoff {
        let cap = cap.max(base);
        Backoff {
            base,
            cap,
            last: base,
            rng: XorShift64::new(seed),
        }
    }

    /// The next delay: uniform in `[base, 3 × last]`, capped.
    pub fn next_delay(&mut self) -> Duration {
        let low = self.base.as_micros() as u64;
        let high = (self.last.as_micros() as u64)
            .saturating_mul(3)
            .min(self.cap.as_micros() as u64)
            .max(low);
        let drawn = low + self.rng.next() % (high - low + 1);
        self.last = Duration::from_micros(drawn);
        self.last
    }

    /// Back to short delays (the last attempt succeeded).
    pub fn reset(&mut self) {
        self.last = self.base;
    }
}

/// Marsaglia's xorshift64: enough to spread retry delays.
#[derive(Debug, Clone)]
struct XorShift64(u64);

impl XorShift64 {
    fn new(seed: u64) -> XorShift64 {
        // Splitmix the seed once, so close seeds (pids, nanoseconds) start far apart; never 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        XorShift64(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(100);
    const CAP: Duration = Duration::from_secs(5);

    #[test]
    fn every_delay_stays_between_the_base_and_the_cap() {
        for seed in 0..200 {
            let mut backoff = Backoff::with_seed(BASE, CAP, seed);
            for _ in 0..50 {
                let delay = backoff.next_delay();
                assert!((BASE..=CAP).contains(&delay), "seed {seed}: {delay:?}");
            }
        }
    }

    /// Issue 11: every agent retried after 100 ms, 200 ms, 400 ms…: after a coordinator
    /// restart the whole fleet reconnected in the same instants.
    #[test]
    fn a_fleet_restarting_together_spreads_its_reconnects() {
        // 100 agents whose coordinator went away at the same instant: when each tries for
        // the fifth time (the sum of its first five delays).
        let fifth_try = |backoff: &mut Backoff| (0..5).map(|_| backoff.next_delay()).sum();
        let seeded: Vec<Duration> = (0..100)
            .map(|seed| fifth_try(&mut Backoff::with_seed(BASE, CAP, seed)))
            .collect();
        // No 100 ms window holds more than a handful of them (in lockstep, all 100).
        let mut windows = std::collections::BTreeMap::new();
        for at in &seeded {
            *windows.entry(at.as_millis() / 100).or_insert(0) += 1;
        }
        let crowded = windows.values().max().copied().unwrap();
        assert!(
            crowded <= 15,
            "{crowded} agents retry within one 100 ms window"
        );
        let (min, max) = (seeded.iter().min().unwrap(), seeded.iter().max().unwrap());
        assert!(
            *max - *min > Duration::from_secs(2),
            "fifth tries bunch between {min:?} and {max:?}"
        );
        // Agents seeded from the clock in the same instant draw apart too.
        let mut started_together: Vec<Duration> = (0..100)
            .map(|_| fifth_try(&mut Backoff::new(BASE, CAP)))
            .collect();
        started_together.sort();
        started_together.dedup();
        assert!(
            started_together.len() > 90,
            "only {} distinct retry times",
            started_together.len()
        );
    }

    #[test]
    fn delays_grow_towards_the_cap_and_reset_brings_them_back() {
        let mut backoff = Backoff::with_seed(BASE, CAP, 7);
        let late: Vec<Duration> = (0..40).map(|_| backoff.next_delay()).skip(20).collect();
        let mean = late.iter().sum::<Duration>() / late.len() as u32;
        assert!(mean > Duration::from_secs(1), "mean late delay {mean:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= BASE * 3);
    }
}
