//! The Markdown of a generation's retuning output: the findings table (with what changed
//! since the previous run on the same generation), the checks that were skipped and why,
//! and the GPU backend's own timings against its previous run.

use std::fmt::Write as _;

use crate::backend_cell::BackendCellStatus;
use crate::finding::{Finding, Severity};

use super::markdown::table_text;
use super::model::GenerationSection;

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
    let _ = writeln!(
        out,
        "| Fixture | Feature | Fork | Backend ran | Metrics | Previous run | Change |\n|---|---|---|---|---|---|---|"
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
        let _ = writeln!(
            out,
            "| {} | {} | {fork} | {} | {} | {previous} | {change} |",
            cell.fixture,
            cell.workload,
            cell.backend_reported.as_deref().unwrap_or("—"),
            cell.metric_keys.map_or("—".to_string(), |n| n.to_string()),
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
            .map(|word| match word.strip_suffix(name) {
                Some(dir) if dir.ends_with('/') => format!("{dir}{{artifact}}"),
                _ => word.to_string(),
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
