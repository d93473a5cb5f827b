//! What else the host was doing while a cell was timed: samples taken around the cell (the
//! CPU time of every other process, thermal-throttle counters, the frequency governor)
//! turned into noise flags. Flags explain data; they never drop it.

use std::collections::HashMap;
use std::path::Path;

use abfleet_core::cell::NoiseFlag;

/// A process using more than this share of one core during the cell is flagged.
const OTHER_PROCESS_SHARE: f64 = 0.25;
/// How many of the busy processes a flag names, busiest first.
const BUSY_PROCESSES_NAMED: usize = 3;

/// The host's state when a cell starts.
pub struct HostSample {
    process_ticks: HashMap<u32, (String, u64)>,
    throttle_events: u64,
    started: std::time::Instant,
}

impl HostSample {
    /// Reads every `/proc/PID/stat` (a few milliseconds on a busy host): called before a
    /// cell's warm-ups, never between its runs.
    pub fn take() -> HostSample {
        crate::timeline::mark("host.sample");
        HostSample {
            process_ticks: process_ticks(Path::new("/proc")),
            throttle_events: throttle_events(Path::new("/sys/devices/system/cpu")),
            started: std::time::Instant::now(),
        }
    }

    /// The flags for the cell that ran since `take`, read after its last run.
    pub fn flags_since(&self) -> Vec<NoiseFlag> {
        crate::timeline::mark("host.sample");
        let wall_s = self.started.elapsed().as_secs_f64();
        let mut flags = Vec::new();
        if let Some(governor) = governor(Path::new(
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        )) {
            if governor != "performance" {
                flags.push(NoiseFlag::text(
                    "governor_not_performance",
                    &governor,
                    "the CPU frequency governor may change clocks mid-run; set it to `performance` on bench hosts",
                ));
            }
        }
        let throttled = throttle_events(Path::new("/sys/devices/system/cpu"))
            .saturating_sub(self.throttle_events);
        if throttled > 0 {
            flags.push(NoiseFlag::number(
                "thermal_throttling",
                throttled as f64,
                "the kernel counted thermal-throttle events during the cell",
            ));
        }
        let now = process_ticks(Path::new("/proc"));
        let own = std::process::id();
        let ticks_per_s = clock_ticks_per_second();
        let mut busy: Vec<(String, f64)> = Vec::new();
        for (pid, (name, ticks)) in &now {
            if *pid == own {
                continue;
            }
            // A process that started during the cell counts from zero. Our own timed
            // children have exited by now, so whatever is still here is someone else's.
            let before = self.process_ticks.get(pid).map_or(0, |(_, t)| *t);
            let share = ticks.saturating_sub(before) as f64 / ticks_per_s / wall_s.max(1e-3);
            if share > OTHER_PROCESS_SHARE {
                busy.push((format!("{name} (pid {pid})"), share));
            }
        }
        // The busiest first; a few of them, since on a shared host one is rarely alone.
        busy.sort_by(|a, b| b.1.total_cmp(&a.1));
        if let Some((_, share)) = busy.first() {
            let who: Vec<String> = busy
                .iter()
                .take(BUSY_PROCESSES_NAMED)
                .map(|(who, share)| format!("{who} {:.0}%", share * 100.0))
                .collect();
            flags.push(NoiseFlag {
                name: "other_process_busy".into(),
                value: format!("{:.0}% of a core", share * 100.0),
                detail: format!("{} ran during the cell", who.join(", ")),
            });
        }
        flags
    }
}

/// utime + stime of every process, by pid, from `/proc/PID/stat`.
fn process_ticks(proc_dir: &Path) -> HashMap<u32, (String, u64)> {
    let mut ticks = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc_dir) else {
        return ticks;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) {
            if let Some(parsed) = parse_stat(&stat) {
                ticks.insert(pid, parsed);
            }
        }
    }
    ticks
}

/// (command name, utime + stime) from one `/proc/PID/stat` line. The name is in parentheses
/// and may itself contain spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

fn throttle_events(cpu_dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(cpu_dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("cpu") && n[3..].parse::<u32>().is_ok())
        })
        .filter_map(|e| {
            std::fs::read_to_string(e.path().join("thermal_throttle/core_throttle_count")).ok()
        })
        .filter_map(|text| text.trim().parse::<u64>().ok())
        .sum()
}

fn governor(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|g| g.trim().to_string())
        .filter(|g| !g.is_empty())
}

/// Clock ticks per second, the unit of `/proc/PID/stat`'s CPU times (100 when unknown).
pub fn clock_ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 1 0 12345 1000000 100 18446744073709551615";
        assert_eq!(parse_stat(line), Some(("my (odd) prog".to_string(), 175)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_busy_neighbour_process_is_flagged() {
        let sample = HostSample::take();
        let mut burner = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        // On a loaded host the burner may get little of a core at first, or other busy
        // processes may be named before it: look again until it is named, for up to 20 s.
        let named = format!("(pid {})", burner.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let flags = loop {
            std::thread::sleep(std::time::Duration::from_millis(700));
            let flags = sample.flags_since();
            let busy = flags.iter().find(|f| f.name == "other_process_busy");
            if busy.is_some_and(|f| f.detail.contains(&named))
                || std::time::Instant::now() > deadline
            {
                break flags;
            }
        };
        let _ = burner.kill();
        let _ = burner.wait();
        let busy = flags.iter().find(|f| f.name == "other_process_busy");
        assert!(
            busy.is_some_and(|f| f.detail.contains(&format!("sh {named}"))),
            "{flags:?}"
        );
    }

    #[test]
    fn the_live_proc_table_has_this_process() {
        let ticks = process_ticks(Path::new("/proc"));
        assert!(ticks.contains_key(&std::process::id()));
    }
}
