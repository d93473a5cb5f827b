//! What the benchmarks share: a sample's median, min and max, and process figures read from
//! the kernel (this process's CPU time, its peak resident set), and the JSON line each prints.

use serde::Serialize;

use crate::failure::{Classify, Failure};

/// Prints a benchmark's figures as its one JSON line (what tools and `bench_smoke.rs` read)
/// and gives the exit code every benchmark ends with, whatever its figures: 0.
pub fn print_json_line(report: &impl Serialize) -> Result<i32, Failure> {
    let line = serde_json::to_string(report)
        .map_err(|err| anyhow::anyhow!("failed to write the JSON line: {err}"))
        .infra()?;
    println!("{line}");
    Ok(abfleet_core::exit::OK)
}

/// Median, min and max of a sample of seconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub n: usize,
}

impl Summary {
    /// `None` for an empty sample.
    pub fn of(values: &[f64]) -> Option<Summary> {
        Some(Summary {
            median_s: abfleet_core::stats::median(values)?,
            min_s: values.iter().copied().min_by(|a, b| a.total_cmp(b))?,
            max_s: values.iter().copied().max_by(|a, b| a.total_cmp(b))?,
            n: values.len(),
        })
    }
}

/// User + system CPU seconds this process (all its threads, not its children) used so far.
/// `getrusage(RUSAGE_SELF)` rather than `/proc/self/stat`'s utime+stime: those count clock
/// ticks (10 ms at the usual USER_HZ=100), too coarse for a few milliseconds per second.
pub fn self_cpu_s() -> f64 {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(usage) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(usage.user_time()) + tv(usage.system_time())
        }
        Err(_) => f64::NAN,
    }
}

/// This process's peak resident set so far (`VmHWM` of /proc/self/status), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_has_the_median_and_the_extremes() {
        let summary = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(summary.median_s, 2.5);
        assert_eq!(summary.min_s, 1.0);
        assert_eq!(summary.max_s, 10.0);
        assert_eq!(summary.n, 4);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn this_process_has_a_peak_rss_and_uses_cpu() {
        assert!(peak_rss_kib().is_some_and(|kib| kib > 0));
        let before = self_cpu_s();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(self_cpu_s() > before);
    }
}
