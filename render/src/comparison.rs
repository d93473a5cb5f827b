//! Two reports side by side as Markdown (`abfleet report RUN --against EARLIER`): what
//! changed between them, and per matched cell the speedup then and now and the parity
//! ratchet, from `core::report::compare_reports`.

use std::collections::BTreeMap;
use std::fmt::Write;

use abfleet_core::report::{compare_reports, Report};

/// The comparison as Markdown.
pub fn render_comparison(now: &Report, earlier: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {}: run {} against run {}\n",
        abfleet_core::report::markdown_text::code(&now.name),
        now.run_id,
        earlier.run_id
    );
    let _ = writeln!(out, "## What changed\n");
    let short = |c: &Option<String>| {
        c.as_deref()
            .map(|c| c.chars().take(12).collect::<String>())
            .unwrap_or_else(|| "-".into())
    };
    for (side, a, b) in [
        ("fork", &earlier.fork, &now.fork),
        ("upstream", &earlier.upstream, &now.upstream),
    ] {
        let same = a.resolved == b.resolved;
        let _ = writeln!(
            out,
            "- {side}: {} ({}) → {} ({}){}",
            abfleet_core::report::markdown_text::code(&a.requested),
            short(&a.resolved),
            abfleet_core::report::markdown_text::code(&b.requested),
            short(&b.resolved),
            if same { ", unchanged" } else { "" }
        );
    }
    let earlier_toolchains: BTreeMap<&str, &BTreeMap<String, String>> = earlier
        .generations
        .iter()
        .map(|g| (g.key.as_str(), &g.toolchain))
        .collect();
    for section in &now.generations {
        match earlier_toolchains.get(section.key.as_str()) {
            Some(old) if *old != &section.toolchain => {
                let _ = writeln!(
                    out,
                    "- toolchain on `{}`: {:?} → {:?}",
                    section.key, old, section.toolchain
                );
            }
            Some(_) => {}
            None => {
                let _ = writeln!(out, "- `{}` is new in this run", section.key);
            }
        }
    }
    let changes = compare_reports(now, earlier);
    let _ = writeln!(out, "\n## Cells\n");
    let _ = writeln!(
        out,
        "| Generation | Fixture | Workload | Speedup then | Speedup now | Flags |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let speed = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.3}x"));
    for change in &changes {
        let mut flags = Vec::new();
        if change.regression {
            flags.push("**slower** (intervals apart)".to_string());
        }
        if change.fork_slower {
            flags.push("**fork slower** (every run slower than before)".to_string());
        }
        for (metric, a, b) in &change.parity_growth {
            flags.push(format!("**parity delta grew**: `{metric}` {a:e} → {b:e}"));
        }
        for (metric, a, b) in &change.parity_shrink {
            flags.push(format!(
                "parity delta shrank: `{metric}` {a:e} → {b:e} (ratchet down)"
            ));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            if change.generation.is_empty() {
                "-"
            } else {
                &change.generation
            },
            change.fixture,
            change.workload,
            speed(change.earlier_speedup),
            speed(change.speedup),
            if flags.is_empty() {
                "-".to_string()
            } else {
                flags.join("; ")
            }
        );
    }
    let matched = changes.len();
    if matched < now.cells.len() {
        let _ = writeln!(
            out,
            "\n{} cell(s) of this run have no match in run {}.",
            now.cells.len() - matched,
            earlier.run_id
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_cell_and_a_grown_parity_delta_are_flagged_and_a_shrunk_one_listed() {
        let (now, earlier) = abfleet_core::report::samples::compared_reports();
        let markdown = render_comparison(&now, &earlier);
        assert!(
            markdown.contains("**slower** (intervals apart)"),
            "{markdown}"
        );
        assert!(
            markdown.contains("**parity delta grew**: `psnr_y`"),
            "{markdown}"
        );
        assert!(markdown.contains("(ratchet down)"), "{markdown}");
        assert!(
            markdown.contains("- fork: `perf` (257ac1ec4aaa) → `perf` (222222222222)\n"),
            "{markdown}"
        );
        assert!(
            markdown.contains("upstream:") && markdown.contains(", unchanged"),
            "{markdown}"
        );
    }
}
