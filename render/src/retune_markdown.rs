//! The Markdown of a generation's retuning output: the findings table (with what changed
//! since the previous run on the same generation), the changes alone (what a toolchain bump
//! moved, per kernel and architecture), the checks that were skipped and why,
//! and the GPU backend's own timings against its previous run.

use std::fmt::Write as _;

use abfleet_core::backend_cell::BackendCellStatus;
use abfleet_core::finding::{Finding, Severity};

use abfleet_core::report::markdown_text::text as table_text;
use abfleet_core::report::GenerationSection;

/// `1 fail, 2 warn, 5 ok`, or `—` without findings.
pub fn findings_summary(section: &GenerationSection) -> String {
    let count = |s: Severity| section.findings.iter().filter(|f| f.severity == s).count();
    let parts: Vec<String> = [Severity::Fail, Severity::Warn, Severity::Ok]
        .into_iter()
        .filter(|&s| count(s) > 0)
        .map(|s| format!("{} {}", count(s), s.name()))
        .collect();
    if parts.is_empty() {
        "—".to_string()
    } else {
        parts.join(", ")
    }
}

pub fn render_retune(out: &mut String, section: &GenerationSection, heading: &str) {
    render_backend_cells(out, section, heading);
    if !section.findings.is_empty() {
        let _ = writeln!(out, "{heading} Retuning findings\n");
        let _ = writeln!(
            out,
            "| Severity | Backend | Check | Subject | Verdict | Since the previous run |\n|---|---|---|---|---|---|"
        );
        let mut findings: Vec<&Finding> = section.findings.iter().collect();
        // Worst first, then in the order the checks reported them.
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        for finding in findings {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                severity_cell(finding.severity),
                finding.backend,
                finding.check,
                table_text(&finding.subject),
                table_text(&finding.verdict),
                previous_cell(finding)
            );
        }
        out.push('\n');
        render_changes(out, &section.findings, &section.toolchain_changes());
        let commands: Vec<String> = {
            let mut seen = Vec::new();
            for f in &section.findings {
                let command = command_template(f);
                if !seen.contains(&command) {
                    seen.push(command);
                }
            }
            seen
        };
        let _ = writeln!(
            out,
            "Commands read: {}.\n",
            commands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !section.skipped_checks.is_empty() {
        let _ = writeln!(out, "Checks not run here:\n");
        for skipped in &section.skipped_checks {
            let _ = writeln!(
                out,
                "- {} {}: {}",
                skipped.backend, skipped.check, skipped.reason
            );
        }
        out.push('\n');
    }
}

fn render_backend_cells(out: &mut String, section: &GenerationSection, heading: &str) {
    if section.backend_cells.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{heading} The fork on `{}` (its own timings; upstream has no such backend to compare)\n",
        section.backend
    );
    let gated = section.backend_cells.iter().any(|c| c.cpu_parity.is_some());
    let _ = writeln!(
        out,
        "| Fixture | Feature | Fork | Backend ran | Metrics | Previous run | Change |{}\n|---|---|---|---|---|---|---|{}",
        if gated { " Against the CPU path |" } else { "" },
        if gated { "---|" } else { "" }
    );
    for cell in &section.backend_cells {
        let fork = match (cell.status, cell.median_seconds) {
            (BackendCellStatus::Measured, Some(median)) => {
                format!("{median:.3} s ±{:.1}%", cell.spread_pct.unwrap_or(0.0))
            }
            (BackendCellStatus::Skipped, _) => format!(
                "skipped: {}",
                table_text(cell.reason.as_deref().unwrap_or("no reason given"))
            ),
            _ => format!(
                "**failed**: {}",
                table_text(cell.reason.as_deref().unwrap_or("no reason given"))
            ),
        };
        let (previous, change) = match &cell.previous {
            Some(p) => (
                format!("{:.3} s", p.median_seconds),
                format!("{:.2}x", p.speedup),
            ),
            None => ("—".into(), "—".into()),
        };
        let against_cpu = match (&cell.cpu_parity, gated) {
            (_, false) => String::new(),
            (Some(parity), true) if parity.passed && parity.max_frame_delta == 0.0 => {
                " identical |".to_string()
            }
            (Some(parity), true) if parity.passed => format!(" {} |", table_text(&parity.words())),
            (Some(parity), true) => format!(" **{}** |", table_text(&parity.words())),
            (None, true) => " — |".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {fork} | {} | {} | {previous} | {change} |{against_cpu}",
            cell.fixture,
            cell.workload,
            cell.backend_reported.as_deref().unwrap_or("—"),
            cell.metric_keys.map_or("—".to_string(), |n| n.to_string()),
        );
    }
    out.push('\n');
}

/// What moved since the previous run on this generation, and only that: each finding whose
/// figures or severity changed, per kernel and architecture, so that a toolchain bump's effect
/// reads at a glance (the full table above has every finding).
fn render_changes(out: &mut String, findings: &[Finding], toolchain_changes: &[String]) {
    let changed: Vec<&Finding> = findings
        .iter()
        .filter(|f| {
            f.previous
                .as_ref()
                .is_some_and(|p| !p.changes.is_empty() || p.severity != f.severity)
        })
        .collect();
    let compared = findings.iter().filter(|f| f.previous.is_some()).count();
    if compared == 0 {
        return;
    }
    let runs: Vec<&str> = {
        let mut seen = Vec::new();
        for f in findings {
            if let Some(p) = &f.previous {
                if !seen.contains(&p.run_id.as_str()) {
                    seen.push(p.run_id.as_str());
                }
            }
        }
        seen
    };
    let toolchain = if toolchain_changes.is_empty() {
        String::new()
    } else {
        format!(" Toolchain: {}.", toolchain_changes.join(", "))
    };
    let _ = writeln!(
        out,
        "What changed since the previous run on this generation (`{}`): {} of {} compared findings.{toolchain}\n",
        runs.join("`, `"),
        changed.len(),
        compared
    );
    if changed.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "| Check | Subject | Artifact | Severity | Changed |\n|---|---|---|---|---|"
    );
    for finding in changed {
        let previous = finding.previous.as_ref().expect("filtered on previous");
        let severity = if previous.severity == finding.severity {
            finding.severity.name().to_string()
        } else {
            format!("{} → {}", previous.severity.name(), finding.severity.name())
        };
        let artifact = finding
            .evidence
            .get("artifact")
            .and_then(|a| a.as_str())
            .unwrap_or("—");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {severity} | {} |",
            finding.check,
            table_text(&finding.subject),
            table_text(artifact),
            table_text(&previous.changes.join("; "))
        );
    }
    out.push('\n');
}

/// A finding's command with its artifact's file name as `{artifact}`, so that the same
/// command run on each of 21 kernel fatbins is listed once.
fn command_template(finding: &Finding) -> String {
    let artifact = match finding.evidence.get("artifact") {
        Some(serde_json::Value::String(name)) => Some(name.as_str()),
        _ => match finding.evidence.get("artifacts") {
            Some(serde_json::Value::Array(names)) => names.first().and_then(|n| n.as_str()),
            _ => None,
        },
    };
    match artifact.filter(|a| !a.is_empty()) {
        Some(name) => finding
            .command
            .split(' ')
            .map(|word| {
                // `…/adm_cm.fatbin;` when more of the command follows.
                let path = word.trim_end_matches([';', ',']);
                match path.strip_suffix(name) {
                    Some(dir) if dir.ends_with('/') => {
                        format!("{dir}{{artifact}}{}", &word[path.len()..])
                    }
                    _ => word.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => finding.command.clone(),
    }
}

fn severity_cell(severity: Severity) -> &'static str {
    match severity {
        Severity::Ok => "ok",
        Severity::Warn => "**warn**",
        Severity::Fail => "**FAIL**",
    }
}

fn previous_cell(finding: &Finding) -> String {
    match &finding.previous {
        None => "new".to_string(),
        Some(previous) if previous.changes.is_empty() && previous.severity == finding.severity => {
            "unchanged".to_string()
        }
        Some(previous) => {
            let mut parts = Vec::new();
            if previous.severity != finding.severity {
                parts.push(format!(
                    "{} → {}",
                    previous.severity.name(),
                    finding.severity.name()
                ));
            }
            parts.extend(previous.changes.iter().map(|c| table_text(c)));
            parts.join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::finding::attach_previous;

    fn registers(kernel: &str, count: u32, severity: Severity) -> Finding {
        Finding::new(
            "cuda",
            "registers",
            kernel,
            severity,
            format!("{count} registers"),
            "cuobjdump",
        )
        .with("registers", count)
        .with("artifact", "psnr_hvs_score.fatbin")
    }

    #[test]
    fn only_what_moved_is_listed_with_its_figures() {
        let before = [
            registers("psnr_hvs@sm_120", 48, Severity::Ok),
            registers("psnr@sm_120", 30, Severity::Ok),
        ];
        let mut now = [
            registers("psnr_hvs@sm_120", 243, Severity::Warn),
            registers("psnr@sm_120", 30, Severity::Ok),
            registers("new_kernel@sm_120", 12, Severity::Ok),
        ];
        attach_previous(&mut now, &before, "run-1");
        let mut out = String::new();
        render_changes(&mut out, &now, &["fork: `13.0` → `13.5`".to_string()]);
        assert!(
            out.starts_with("What changed since the previous run on this generation (`run-1`): 1 of 2 compared findings. Toolchain: fork: `13.0` → `13.5`."),
            "{out}"
        );
        assert!(
            out.contains("| registers | psnr_hvs@sm_120 | psnr_hvs_score.fatbin | ok → warn | registers: 48 → 243 |"),
            "{out}"
        );
        assert!(!out.contains("psnr@sm_120"), "{out}");
        assert!(!out.contains("new_kernel"), "{out}");

        let first = [registers("psnr@sm_120", 30, Severity::Ok)];
        let mut none = String::new();
        render_changes(&mut none, &first, &[]);
        assert!(
            none.is_empty(),
            "a first run has nothing to compare: {none}"
        );
    }

    #[test]
    fn a_command_on_each_artifact_is_one_template() {
        let finding = Finding::new(
            "cuda",
            "registers",
            "k@sm_89",
            Severity::Ok,
            "",
            "/t/cuobjdump --dump-resource-usage /b/src/adm_cm.fatbin; spills from /b/build.log",
        )
        .with("artifact", "adm_cm.fatbin");
        assert_eq!(
            command_template(&finding),
            "/t/cuobjdump --dump-resource-usage /b/src/{artifact}; spills from /b/build.log"
        );
    }
}
