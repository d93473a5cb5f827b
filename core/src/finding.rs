//! Retuning findings: the verdict of one check of the fork's hardware tuning on one host
//! (architecture coverage, register pressure, occupancy, ISA dispatch), with the evidence and
//! the command that produced it. Agents stream them; reports show them per generation and
//! diff them against the previous run on the same generation (docs/retuning.md).

use serde::{Deserialize, Serialize};

/// How bad a finding is. Ordered: `Ok < Warn < Fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Ok,
    Warn,
    Fail,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warn => "warn",
            Severity::Fail => "fail",
        }
    }
}

/// One check's result. `check` names the check (`arch_coverage`, `registers`, `occupancy`,
/// `dispatch`, …) and `subject` what it looked at (a kernel, an ISA level, the build):
/// `(backend, check, subject)` identifies a finding across runs, which is how `previous` is
/// found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// `cuda`, `hip`, `sycl` or `cpu`.
    pub backend: String,
    pub check: String,
    #[serde(default)]
    pub subject: String,
    pub severity: Severity,
    /// One line for people: what is right or wrong.
    pub verdict: String,
    /// The figures the verdict rests on, by name (`registers`, `occupancy_pct`, `targets`, …).
    /// Numbers stay numbers so the diff against the previous run can say `96 → 128`.
    #[serde(default)]
    pub evidence: serde_json::Map<String, serde_json::Value>,
    /// The command line whose output was read (or `calculated` for derived figures).
    pub command: String,
    /// The same finding in the previous run on this generation, filled in by the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousFinding>,
}

impl Finding {
    pub fn new(
        backend: &str,
        check: &str,
        subject: &str,
        severity: Severity,
        verdict: impl Into<String>,
        command: impl Into<String>,
    ) -> Self {
        Self {
            backend: backend.to_string(),
            check: check.to_string(),
            subject: subject.to_string(),
            severity,
            verdict: verdict.into(),
            evidence: serde_json::Map::new(),
            command: command.into(),
            previous: None,
        }
    }

    /// Adds one evidence figure (builder style).
    pub fn with(mut self, name: &str, value: impl Into<serde_json::Value>) -> Self {
        self.evidence.insert(name.to_string(), value.into());
        self
    }

    /// What identifies this finding across runs.
    pub fn identity(&self) -> (&str, &str, &str) {
        (&self.backend, &self.check, &self.subject)
    }
}

/// A check that did not run on this host, and why: the backend is absent (no such GPU), the
/// tool is not installed, or the spec builds no artifact for it. Never an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCheck {
    pub backend: String,
    pub check: String,
    pub reason: String,
}

impl SkippedCheck {
    pub fn new(backend: &str, check: &str, reason: impl Into<String>) -> Self {
        Self {
            backend: backend.to_string(),
            check: check.to_string(),
            reason: reason.into(),
        }
    }
}

/// What one backend's checks produced on one host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckResults {
    pub findings: Vec<Finding>,
    pub skipped: Vec<SkippedCheck>,
}

impl CheckResults {
    pub fn skip(&mut self, backend: &str, check: &str, reason: impl Into<String>) {
        self.skipped.push(SkippedCheck::new(backend, check, reason));
    }

    pub fn extend(&mut self, other: CheckResults) {
        self.findings.extend(other.findings);
        self.skipped.extend(other.skipped);
    }
}

/// The previous run's version of a finding and what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousFinding {
    pub run_id: String,
    pub severity: Severity,
    pub verdict: String,
    /// Every evidence figure that differs, as `name: old → new`.
    pub changes: Vec<String>,
}

/// Fills `previous` on each finding from the previous run's findings of the same generation.
/// A finding the previous run did not have gets `previous: None`; one whose figures did not
/// change gets an empty `changes` list.
pub fn attach_previous(findings: &mut [Finding], previous: &[Finding], previous_run: &str) {
    for finding in findings.iter_mut() {
        let Some(old) = previous.iter().find(|p| p.identity() == finding.identity()) else {
            continue;
        };
        finding.previous = Some(PreviousFinding {
            run_id: previous_run.to_string(),
            severity: old.severity,
            verdict: old.verdict.clone(),
            changes: evidence_changes(&old.evidence, &finding.evidence),
        });
    }
}

fn evidence_changes(
    old: &serde_json::Map<String, serde_json::Value>,
    new: &serde_json::Map<String, serde_json::Value>,
) -> Vec<String> {
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let before = old.get(name);
            let after = new.get(name);
            (before != after).then(|| match (before, after) {
                (Some(serde_json::Value::Array(old)), Some(serde_json::Value::Array(new))) => {
                    format!("{name}: {}", list_change(old, new))
                }
                _ => format!("{name}: {} → {}", show(before), show(after)),
            })
        })
        .collect()
}

/// A list's change as what it gained and lost (`+compute_107 −sm_50`), or the whole lists
/// when only the order changed: nvcc's target list and a build's gencode are long.
fn list_change(old: &[serde_json::Value], new: &[serde_json::Value]) -> String {
    let added: Vec<String> = new
        .iter()
        .filter(|v| !old.contains(v))
        .map(|v| show(Some(v)))
        .collect();
    let removed: Vec<String> = old
        .iter()
        .filter(|v| !new.contains(v))
        .map(|v| show(Some(v)))
        .collect();
    if added.is_empty() && removed.is_empty() {
        let whole = |list: &[serde_json::Value]| serde_json::Value::from(list.to_vec()).to_string();
        return format!("{} → {} (reordered)", whole(old), whole(new));
    }
    let mut parts: Vec<String> = added.iter().map(|a| format!("+{a}")).collect();
    parts.extend(removed.iter().map(|r| format!("−{r}")));
    parts.join(" ")
}

fn show(value: Option<&serde_json::Value>) -> String {
    match value {
        None => "(none)".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registers(regs: u64, occupancy: f64) -> Finding {
        Finding::new(
            "cuda",
            "occupancy",
            "ssim_kernel",
            Severity::Warn,
            "x",
            "calculated",
        )
        .with("registers", regs)
        .with("occupancy_pct", occupancy)
    }

    #[test]
    fn previous_lists_changed_figures_only() {
        let mut now = vec![registers(128, 33.3).with("toolchain", "13.3")];
        let before = vec![registers(96, 41.7).with("toolchain", "13.2")];
        attach_previous(&mut now, &before, "run-1");
        let previous = now[0].previous.as_ref().unwrap();
        assert_eq!(previous.run_id, "run-1");
        assert_eq!(
            previous.changes,
            [
                "occupancy_pct: 41.7 → 33.3",
                "registers: 96 → 128",
                "toolchain: 13.2 → 13.3"
            ]
        );
    }

    #[test]
    fn a_list_change_says_what_was_added_and_removed() {
        let targets = |list: &[&str]| registers(96, 41.7).with("toolchain_targets", list.to_vec());
        let mut now = vec![targets(&["compute_80", "compute_107", "compute_120"])];
        attach_previous(
            &mut now,
            &[targets(&["compute_50", "compute_80", "compute_120"])],
            "r",
        );
        assert_eq!(
            now[0].previous.as_ref().unwrap().changes,
            ["toolchain_targets: +compute_107 −compute_50"]
        );
        let mut now = vec![targets(&["b", "a"])];
        attach_previous(&mut now, &[targets(&["a", "b"])], "r");
        assert_eq!(
            now[0].previous.as_ref().unwrap().changes,
            [r#"toolchain_targets: ["a","b"] → ["b","a"] (reordered)"#]
        );
    }

    #[test]
    fn a_new_finding_has_no_previous_and_an_unchanged_one_no_changes() {
        let mut now = vec![
            registers(96, 41.7),
            Finding::new("cpu", "dispatch", "avx2", Severity::Ok, "x", "y"),
        ];
        attach_previous(&mut now, &[registers(96, 41.7)], "run-1");
        assert_eq!(
            now[0].previous.as_ref().unwrap().changes,
            Vec::<String>::new()
        );
        assert!(now[1].previous.is_none());
    }
}
