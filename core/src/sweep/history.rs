//! A sweep compared with the previous sweep of the same spec on the same generation: the
//! previous winner is read from that run's `sweep` finding (kept in the store's
//! `generation_results` like every finding), and a winner that changed after a toolchain
//! change is flagged as a retuning finding. The finding keeps the winner's tie group
//! (`tied_with`): a new winner from inside the previous tie group, or a previous winner
//! inside the new one, is the same result within noise (the flip autotuners are known for),
//! not a change.

use super::section::{SweepHistory, SweepSection, RETUNING_CHECK, SWEEP_CHECK};
use crate::finding::{Finding, Severity};

/// Fills `sweep.history` from the previous run's findings of this generation, and adds a
/// retuning finding to `findings` when the winner changed after a toolchain change.
pub fn attach_history(
    sweep: &mut SweepSection,
    findings: &mut Vec<Finding>,
    previous_findings: &[Finding],
    toolchain_changes: Vec<String>,
    previous_run: &str,
) {
    let Some(now) = findings.iter().find(|f| f.check == SWEEP_CHECK) else {
        return;
    };
    let Some(before) = previous_findings
        .iter()
        .find(|p| p.identity() == now.identity())
    else {
        return;
    };
    let text = |f: &Finding| {
        f.evidence
            .get("best")
            .and_then(|v| v.as_str())
            .unwrap_or("(none)")
            .to_string()
    };
    let tied = |f: &Finding| -> Vec<String> {
        f.evidence
            .get("tied_with")
            .and_then(|v| v.as_array())
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (previous_best, best) = (text(before), text(now));
    let (previous_tied_with, tied_with) = (tied(before), tied(now));
    let flipped_within_tie = previous_best != best
        && (previous_tied_with.contains(&best) || tied_with.contains(&previous_best));
    let best_changed = previous_best != best && !flipped_within_tie;
    let retuning = best_changed && !toolchain_changes.is_empty();
    let note = match (best_changed, toolchain_changes.is_empty()) {
        (false, _) if flipped_within_tie => format!(
            "same winner as run {previous_run} within noise: {previous_best} → {best}, the two tied within noise (not a change)"
        ),
        (false, _) => format!("same winner as run {previous_run}: {best}"),
        (true, false) => format!(
            "the winner changed after a toolchain change ({}): {previous_best} → {best}; re-check the shipped default",
            toolchain_changes.join("; ")
        ),
        (true, true) => format!(
            "the winner changed with the same toolchain: {previous_best} → {best} (the fork changed, or the two are within noise)"
        ),
    };
    if retuning {
        findings.push(
            Finding::new(
                &now.backend,
                RETUNING_CHECK,
                &now.subject,
                Severity::Warn,
                note.clone(),
                format!("sweep compared with run {previous_run}"),
            )
            .with("previous_best", previous_best.clone())
            .with("best", best.clone())
            .with("toolchain_changes", toolchain_changes.join("; ")),
        );
    }
    sweep.history = Some(SweepHistory {
        previous_run: previous_run.to_string(),
        previous_best,
        best,
        previous_tied_with,
        tied_with,
        flipped_within_tie,
        best_changed,
        toolchain_changes,
        retuning,
        note,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::CellParity;
    use crate::paired::Pair;
    use crate::spec::{SearchStrategy, SweepSpec, Tunable, TunableKind};
    use crate::sweep::judge::{judge, sweep_finding};
    use crate::sweep::outcome::{ConfigurationRun, SweepOutcome};
    use crate::sweep::plan::Configuration;

    fn spec() -> SweepSpec {
        SweepSpec {
            tunables: vec![Tunable {
                name: "band".into(),
                how: TunableKind::Build(vec!["SSIM_BAND={value}".into()]),
                values: ["0", "64", "128", "8"].map(String::from).to_vec(),
                default: "0".into(),
            }],
            search: SearchStrategy::Grid,
            max_configurations: 8,
            max_seconds: None,
        }
    }

    /// A configuration timed at `ratio` over the default, with a little jitter.
    fn run(value: &str, ratio: f64) -> ConfigurationRun {
        let pairs = (0..12)
            .map(|i| {
                let jitter = 1.0 + 0.004 * ((i * 7 % 5) as f64 - 2.0);
                Pair {
                    upstream_s: 0.1 * jitter,
                    fork_s: 0.1 / ratio * (2.0 - jitter),
                }
            })
            .collect();
        ConfigurationRun {
            configuration: Configuration {
                label: format!("band={value}"),
                values: [("band".to_string(), value.to_string())].into(),
            },
            is_default: value == "0",
            build_key: None,
            pairs: if value == "0" { Vec::new() } else { pairs },
            order: Vec::new(),
            stop_reason: None,
            parity: CellParity::Ok,
            score_delta: Default::default(),
            parity_failures: Vec::new(),
            error: None,
        }
    }

    /// The findings a sweep of `(value, speedup)` configurations leaves on its generation.
    fn findings(speedups: &[(&str, f64)]) -> (SweepSection, Vec<Finding>) {
        let mut configurations = vec![run("0", 1.0)];
        configurations.extend(speedups.iter().map(|(v, r)| run(v, *r)));
        let outcome = SweepOutcome {
            strategy: "grid".into(),
            grid_size: 4,
            cells: vec!["f/float_ssim".into()],
            configurations,
            not_tried: Vec::new(),
            not_tried_count: 0,
            seed: 3,
            timing_seconds: 1.0,
        };
        let section = judge(&outcome, &spec(), 0.02, None);
        let finding = sweep_finding(&section, "cpu");
        (section, vec![finding])
    }

    const GCC: &str = "fork: `gcc 12` → `gcc 13`";

    #[test]
    fn a_flip_inside_the_tie_group_after_a_toolchain_change_is_not_a_retuning_finding() {
        // Before: 64 and 128 tied (64 planned first wins). After the compiler bump: 128 alone
        // is listed first and wins, 64 tied with it. The same result within noise.
        let (_, previous) = findings(&[("64", 1.30), ("128", 1.305)]);
        assert_eq!(previous[0].evidence["best"], "band=64");
        assert_eq!(
            previous[0].evidence["tied_with"],
            serde_json::json!(["band=128"])
        );
        // Now 64 is not timed at all and 128 wins alone: the previous tie group holds it.
        let (mut now_section, mut now) = findings(&[("128", 1.30), ("8", 0.9)]);
        assert!(now[0].evidence["tied_with"].as_array().unwrap().is_empty());
        attach_history(&mut now_section, &mut now, &previous, vec![GCC.into()], "7");
        let history = now_section.history.unwrap();
        assert_eq!(history.previous_best, "band=64");
        assert_eq!(history.best, "band=128");
        assert!(history.flipped_within_tie, "{history:?}");
        assert!(!history.best_changed && !history.retuning, "{history:?}");
        assert!(history.note.contains("within noise"), "{}", history.note);
        assert!(
            !now.iter().any(|f| f.check == RETUNING_CHECK),
            "no retuning finding for a flip inside a tie: {now:?}"
        );
    }

    #[test]
    fn a_previous_winner_inside_the_new_tie_group_is_not_a_change_either() {
        // Before: 64 alone. After: 128 wins, tied with 64.
        let (_, previous) = findings(&[("64", 1.30), ("8", 1.0)]);
        let (mut section, mut now) = findings(&[("128", 1.30), ("64", 1.301)]);
        assert_eq!(now[0].evidence["tied_with"], serde_json::json!(["band=64"]));
        attach_history(&mut section, &mut now, &previous, vec![GCC.into()], "7");
        let history = section.history.unwrap();
        assert!(
            history.flipped_within_tie && !history.retuning,
            "{history:?}"
        );
        assert_eq!(now.len(), 1, "{now:?}");
    }

    #[test]
    fn a_winner_outside_the_previous_tie_group_after_a_toolchain_change_is_flagged() {
        let (_, previous) = findings(&[("64", 1.30), ("128", 1.301)]);
        let (mut section, mut now) = findings(&[("64", 1.0), ("8", 1.4)]);
        attach_history(&mut section, &mut now, &previous, vec![GCC.into()], "7");
        let history = section.history.unwrap();
        assert_eq!(
            (history.previous_best.as_str(), history.best.as_str()),
            ("band=64", "band=8")
        );
        assert!(history.best_changed && history.retuning && !history.flipped_within_tie);
        let flagged: Vec<&Finding> = now.iter().filter(|f| f.check == RETUNING_CHECK).collect();
        assert_eq!(flagged.len(), 1, "{now:?}");
        assert!(
            flagged[0].verdict.contains("band=64 → band=8"),
            "{}",
            flagged[0].verdict
        );
        // The same change without a toolchain change is noted, not flagged.
        let (mut section, mut now) = findings(&[("64", 1.0), ("8", 1.4)]);
        attach_history(&mut section, &mut now, &previous, Vec::new(), "7");
        let history = section.history.unwrap();
        assert!(history.best_changed && !history.retuning);
        assert_eq!(now.len(), 1);
    }

    #[test]
    fn a_default_within_noise_keeps_its_tie_group_too() {
        // Before: the default within noise of 64, so its group holds 64; after, 64 wins:
        // inside the previous group, so not a change of winner (the verdict, now `stale`,
        // says the rest).
        let (previous_section, previous) = findings(&[("64", 1.005)]);
        assert_eq!(
            previous_section.default_verdict,
            Some(crate::sweep::DefaultVerdict::DefaultWithinNoise)
        );
        assert_eq!(previous[0].evidence["best"], "band=0");
        assert_eq!(
            previous[0].evidence["tied_with"],
            serde_json::json!(["band=64"])
        );
        // A finding stored before tie groups were kept has no `tied_with`: a plain compare.
        let mut old = previous.clone();
        old[0].evidence.remove("tied_with");
        let (mut section, mut now) = findings(&[("64", 1.3)]);
        attach_history(&mut section, &mut now, &old, vec![GCC.into()], "7");
        assert!(section.history.unwrap().retuning);
        let (mut section, mut now) = findings(&[("64", 1.3)]);
        attach_history(&mut section, &mut now, &previous, vec![GCC.into()], "7");
        assert!(section.history.unwrap().flipped_within_tie);
    }
}
