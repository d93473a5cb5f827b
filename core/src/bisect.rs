//! Bisecting a regression between two fork commits (`abfleet bisect`): the spec of each step
//! and the search, pure. Each step is an A/B run of the fork at the known-good commit (as the
//! "upstream" side, built with the fork's own recipe) against the fork at a candidate, on one
//! generation, fixture and workload, timed with the paired method. The first step confirms
//! that the bad commit is slower than the good one at all, and its interval is the size of
//! the regression hunted: a candidate is bad when it is `slower` and not clearly less slow
//! than the bad commit, good when it is `faster`, `same`, or its interval lies wholly above
//! the bad commit's with at most half its slowdown ([`Decision::of`]). Anything else earns one retry with twice the pairs and
//! is then reported as undecidable, never guessed.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::events::BuildStatus;
use crate::paired::Verdict;
use crate::spec::{Fanout, JobSpec, SourceSpec, TargetSpec};

/// The spec of one step: `spec`'s fork at `good` as the baseline side and at `candidate` as
/// the fork side, only `fixture` × `workload`, on `generation` when given; `max_runs` raises
/// the pair budget (a retry). Read back through validation.
pub fn step_spec(
    spec: &JobSpec,
    good: &str,
    candidate: &str,
    generation: Option<&str>,
    fixture: &str,
    workload: &str,
    max_runs: Option<u32>,
) -> Result<JobSpec, String> {
    let SourceSpec::Git { url, .. } = &spec.fork.source else {
        return Err("the fork is a path source; a bisect walks the fork's git history, so make it git = \"URL\"".into());
    };
    let mut step = spec.clone();
    step.name = format!("{} bisect", spec.name);
    step.upstream = spec.fork.clone();
    step.upstream.source = SourceSpec::Git {
        url: url.clone(),
        rev: good.to_string(),
    };
    step.fork.source = SourceSpec::Git {
        url: url.clone(),
        rev: candidate.to_string(),
    };
    step.fixtures.retain(|f| f.name == fixture);
    if step.fixtures.is_empty() {
        return Err(format!("the spec has no fixture `{fixture}`"));
    }
    step.workloads.retain(|w| w.name == workload);
    if step.workloads.is_empty() {
        return Err(format!("the spec has no workload `{workload}`"));
    }
    // The two sides are one program: nothing to rename, nothing absent.
    step.parity.renames.clear();
    if let Some(key) = generation {
        let backend = key.split('/').next().unwrap_or("cpu").to_string();
        step.targets = Some(TargetSpec {
            backends: vec![backend],
            generations: vec![key.to_string()],
            vendors: vec!["*".to_string()],
            fanout: Fanout::PerGeneration,
        });
    }
    if let Some(max_runs) = max_runs {
        step.measure.max_runs = max_runs.max(step.measure.runs);
    }
    JobSpec::from_json(&step.to_json()).map_err(|err| format!("the step's spec: {err}"))
}

/// What a step decided about its candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Good,
    Bad,
    /// `unsure` even with twice the pairs.
    Undecidable,
    /// The step's run did not measure the cell.
    Failed,
}

impl Decision {
    /// A candidate's verdict and interval against the good commit; `bad_ci` is the bad
    /// commit's interval from the confirming step (none while confirming). `slower` is bad
    /// unless its interval lies wholly above the bad commit's and shows at most half its
    /// slowdown (a smaller slowdown than the one being hunted: that regression is not in it
    /// yet); `faster` and `same` are good, and so is an `unsure` above the bad commit's in
    /// the same way — on a noisy host the pairs cannot say "same", but they can say "not
    /// that slow". `None`: cannot tell (retry, then undecidable).
    pub fn of(
        verdict: Option<Verdict>,
        ci: Option<[f64; 2]>,
        bad_ci: Option<[f64; 2]>,
    ) -> Option<Decision> {
        // "Not that slow" needs more than intervals that happen not to overlap: two
        // measurements of one slowdown can miss each other by a hair (CI saw the planted
        // slowdown at [0.043, 0.048] against the bad commit's [0.034, 0.043]). The candidate's
        // lower bound must also show at most half the slowdown hunted, in ratio terms:
        // above the square root of the bad commit's upper bound (0.9 → 0.949, 0.04 → 0.2).
        let above_bad = match (ci, bad_ci) {
            (Some([lo, _]), Some([_, bad_hi])) => lo > bad_hi.max(bad_hi.sqrt()),
            _ => false,
        };
        match verdict? {
            Verdict::Faster | Verdict::Same => Some(Decision::Good),
            _ if above_bad => Some(Decision::Good),
            Verdict::Slower => Some(Decision::Bad),
            Verdict::Unsure => None,
        }
    }
}

/// One commit of the range: its id and subject line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub id: String,
    pub subject: String,
}

/// One measured step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub commit: Commit,
    pub run_id: String,
    /// Good commit time / candidate time: below 1 the candidate is slower.
    pub speedup: Option<f64>,
    pub speedup_ci95: Option<[f64; 2]>,
    pub verdict: Option<Verdict>,
    pub pairs: u32,
    pub decision: Decision,
    /// Taken again with twice the pairs after an `unsure`.
    pub retried: bool,
    /// The candidate's scores moved against the good commit (reported, not decided on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parity_note: Option<String>,
    /// How the agent got each build: the good commit's (the baseline side) and the
    /// candidate's, `built` or `cached` (the agent's build cache is keyed by commit, recipe
    /// and toolchain); `None` when the step's report did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_build: Option<BuildStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_build: Option<BuildStatus>,
}

/// The search over `commits`: index 0 is the known-good commit, the last the bad one, the
/// rest the fork's first-parent history between them, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bisection {
    pub commits: Vec<Commit>,
    /// The newest commit known good and the oldest known bad (indexes into `commits`).
    pub good: usize,
    pub bad: usize,
    /// Whether the bad commit was confirmed slower than the good one.
    pub confirmed: bool,
    pub steps: Vec<Step>,
    /// Set when the search stopped before it could name a commit.
    pub stopped: Option<String>,
}

impl Bisection {
    pub fn new(commits: Vec<Commit>) -> Result<Bisection, String> {
        if commits.len() < 2 {
            return Err("a bisect needs a good and a later bad commit".into());
        }
        let bad = commits.len() - 1;
        Ok(Bisection {
            commits,
            good: 0,
            bad,
            confirmed: false,
            steps: Vec::new(),
            stopped: None,
        })
    }

    /// The commit to measure next; `None` when the search is over.
    pub fn next(&self) -> Option<usize> {
        if self.stopped.is_some() {
            return None;
        }
        if !self.confirmed {
            return Some(self.bad);
        }
        (self.bad - self.good > 1).then(|| self.good + (self.bad - self.good) / 2)
    }

    /// Records the step of commit `index`.
    pub fn record(&mut self, index: usize, step: Step) {
        let decision = step.decision;
        self.steps.push(step);
        if index == self.bad && !self.confirmed {
            match decision {
                Decision::Bad => self.confirmed = true,
                Decision::Good => {
                    self.stopped = Some(format!(
                        "the bad commit `{}` is not slower than the good one here: no regression to bisect on this host",
                        short(&self.commits[self.bad].id)
                    ))
                }
                Decision::Undecidable | Decision::Failed => {
                    self.stopped = Some(format!(
                        "cannot tell whether `{}` is slower than the good commit ({}): a quieter host or more pairs are needed",
                        short(&self.commits[self.bad].id),
                        decision_word(decision)
                    ))
                }
            }
            return;
        }
        match decision {
            Decision::Good => self.good = index,
            Decision::Bad => self.bad = index,
            Decision::Undecidable | Decision::Failed => {
                self.stopped = Some(format!(
                    "step at `{}` was {}: the first bad commit lies between `{}` and `{}`",
                    short(&self.commits[index].id),
                    decision_word(decision),
                    short(&self.commits[self.good].id),
                    short(&self.commits[self.bad].id)
                ))
            }
        }
    }

    /// The bad commit's interval, from the confirming step.
    pub fn bad_interval(&self) -> Option<[f64; 2]> {
        if !self.confirmed {
            return None;
        }
        self.steps.first().and_then(|s| s.speedup_ci95)
    }

    /// The first bad commit, once the search has ended on one.
    pub fn first_bad(&self) -> Option<&Commit> {
        (self.confirmed && self.stopped.is_none() && self.bad - self.good == 1)
            .then(|| &self.commits[self.bad])
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn decision_word(decision: Decision) -> &'static str {
    match decision {
        Decision::Good => "good",
        Decision::Bad => "bad",
        Decision::Undecidable => "undecidable (unsure even with twice the pairs)",
        Decision::Failed => "not measured",
    }
}

/// A finished bisect as the run it bisected keeps it (`abfleet bisect RUN` records it with
/// the coordinator; `abfleet report RUN` shows it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectRecord {
    /// What was bisected: `` `psnr` on fixture `tiny`, generation `cpu/…` ``.
    pub what: String,
    /// When the coordinator recorded it, UTC (empty in what the CLI sends).
    #[serde(default)]
    pub recorded: String,
    pub bisection: Bisection,
}

/// A recorded bisect as its run's report shows it: the section, with when it was recorded.
pub fn render_record(record: &BisectRecord) -> String {
    let mut section = render(&record.bisection, &record.what);
    if !record.recorded.is_empty() {
        if let Some(end) = section.find('\n') {
            section.insert_str(end + 1, &format!("\nRecorded {}.\n", record.recorded));
        }
    }
    section
}

/// The bisect's report section.
pub fn render(bisection: &Bisection, what: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Bisect of {what}\n");
    match (bisection.first_bad(), &bisection.stopped) {
        (Some(commit), _) => {
            let _ = writeln!(
                out,
                "**First bad commit: `{}`** — {}\n",
                commit.id, commit.subject
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "**No first bad commit named**: {why}.\n");
        }
        (None, None) => {
            let _ = writeln!(out, "The search has not finished.\n");
        }
    }
    let _ = writeln!(
        out,
        "{} commits from `{}` (good) to `{}` (bad), first-parent. Each step times the candidate against the good commit `{}` with the paired method.\n",
        bisection.commits.len(),
        short(&bisection.commits[0].id),
        short(&bisection.commits[bisection.commits.len() - 1].id),
        short(&bisection.commits[0].id),
    );
    let _ = writeln!(
        out,
        "| Step | Commit | Subject | Speedup vs good [95% CI] | Verdict | Pairs | Decision | Builds (good, candidate) | Run |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (n, step) in bisection.steps.iter().enumerate() {
        let speedup = match (step.speedup, step.speedup_ci95) {
            (Some(s), Some([lo, hi])) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
            (Some(s), None) => format!("{s:.3}x"),
            _ => "-".into(),
        };
        let build = |status: Option<BuildStatus>| match status {
            Some(BuildStatus::Built) => "built",
            Some(BuildStatus::Cached) => "cached",
            Some(BuildStatus::Failed) => "failed",
            None => "-",
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {}{} | {} | {}, {} | `{}` |",
            n + 1,
            short(&step.commit.id),
            crate::report::markdown_text::text(&step.commit.subject),
            speedup,
            step.verdict
                .map_or("-".to_string(), |v| format!("{v:?}").to_lowercase()),
            step.pairs,
            if step.retried { " (retried)" } else { "" },
            decision_word(step.decision),
            build(step.good_build),
            build(step.candidate_build),
            step.run_id
        );
    }
    for step in &bisection.steps {
        if let Some(note) = &step.parity_note {
            let _ = writeln!(out, "\n- `{}`: {note}", short(&step.commit.id));
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commits(n: usize) -> Vec<Commit> {
        (0..n)
            .map(|i| Commit {
                id: format!("{i:040}"),
                subject: format!("commit {i}"),
            })
            .collect()
    }

    fn step(bisection: &Bisection, index: usize, decision: Decision) -> Step {
        Step {
            commit: bisection.commits[index].clone(),
            run_id: format!("run-{index}"),
            speedup: None,
            speedup_ci95: None,
            verdict: None,
            pairs: 5,
            decision,
            retried: false,
            parity_note: None,
            good_build: None,
            candidate_build: None,
        }
    }

    /// Runs the search against a history whose commits from `first_bad` on are slow.
    fn search(n: usize, first_bad: usize) -> Bisection {
        let mut bisection = Bisection::new(commits(n)).unwrap();
        while let Some(index) = bisection.next() {
            let decision = if index >= first_bad {
                Decision::Bad
            } else {
                Decision::Good
            };
            let s = step(&bisection, index, decision);
            bisection.record(index, s);
        }
        bisection
    }

    #[test]
    fn every_planted_position_is_found_in_logarithmic_steps() {
        for n in 2..12 {
            for first_bad in 1..n {
                let b = search(n, first_bad);
                assert_eq!(
                    b.first_bad().unwrap().id,
                    format!("{first_bad:040}"),
                    "n={n}"
                );
                let bound = 1 + (usize::BITS - (n - 1).leading_zeros()) as usize;
                assert!(
                    b.steps.len() <= bound,
                    "n={n} first_bad={first_bad}: {} steps",
                    b.steps.len()
                );
            }
        }
        // Eight commits after the good one, the slowdown in the fifth: confirm, then 3 steps.
        let b = search(9, 5);
        assert_eq!(b.steps.len(), 4);
        assert!(render(&b, "`psnr`")
            .contains("**First bad commit: `0000000000000000000000000000000000000005`**"));
    }

    #[test]
    fn a_candidate_is_judged_against_the_size_of_the_regression_hunted() {
        let bad = Some([0.03, 0.05]);
        // Confirming: only the verdict counts.
        assert_eq!(
            Decision::of(Some(Verdict::Slower), Some([0.03, 0.05]), None),
            Some(Decision::Bad)
        );
        assert_eq!(
            Decision::of(Some(Verdict::Unsure), Some([0.8, 1.2]), None),
            None
        );
        // Noisy but nowhere near the bad commit: good.
        assert_eq!(
            Decision::of(Some(Verdict::Unsure), Some([0.8, 1.2]), bad),
            Some(Decision::Good)
        );
        // Slower by as much as the bad commit: bad.
        assert_eq!(
            Decision::of(Some(Verdict::Slower), Some([0.04, 0.06]), bad),
            Some(Decision::Bad)
        );
        assert_eq!(
            Decision::of(Some(Verdict::Same), Some([0.99, 1.01]), bad),
            Some(Decision::Good)
        );
        // Unsure and reaching down to the bad interval: cannot tell.
        assert_eq!(
            Decision::of(Some(Verdict::Unsure), Some([0.04, 1.1]), bad),
            None
        );
        // The same slowdown measured again, its interval missing the bad one's by a hair
        // (cli/tests/bisect.rs in CI): still the regression hunted.
        assert_eq!(
            Decision::of(
                Some(Verdict::Slower),
                Some([0.0432, 0.048]),
                Some([0.034, 0.0428])
            ),
            Some(Decision::Bad)
        );
        // A 10% regression hunted: 7% slower is the same regression, 3% slower is not.
        let ten = Some([0.88, 0.92]);
        assert_eq!(
            Decision::of(Some(Verdict::Slower), Some([0.925, 0.94]), ten),
            Some(Decision::Bad)
        );
        assert_eq!(
            Decision::of(Some(Verdict::Slower), Some([0.96, 0.98]), ten),
            Some(Decision::Good)
        );
        assert_eq!(
            Decision::of(Some(Verdict::Unsure), Some([0.94, 1.06]), ten),
            None
        );
    }

    #[test]
    fn an_unconfirmed_regression_or_an_undecidable_step_stops_without_a_guess() {
        let mut b = Bisection::new(commits(5)).unwrap();
        let s = step(&b, 4, Decision::Good);
        b.record(4, s);
        assert_eq!(b.next(), None);
        assert!(b.first_bad().is_none());
        assert!(b.stopped.as_ref().unwrap().contains("not slower"));

        let mut b = Bisection::new(commits(5)).unwrap();
        let s = step(&b, 4, Decision::Bad);
        b.record(4, s);
        let mid = b.next().unwrap();
        let s = step(&b, mid, Decision::Undecidable);
        b.record(mid, s);
        assert_eq!(b.next(), None);
        assert!(b.first_bad().is_none());
        let text = render(&b, "`psnr`");
        assert!(
            text.contains("No first bad commit named") && text.contains("undecidable"),
            "{text}"
        );
    }
}
