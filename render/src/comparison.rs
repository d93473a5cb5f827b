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
        let earlier = abfleet_core::report::samples::sample_report();
        let mut now = earlier.clone();
        now.run_id = "00000000-0000-0000-0000-000000000002".into();
        now.fork.resolved = Some("2222222222222222222222222222222222222222".into());
        // float_ssim: the fork got slower (the new interval is below the old one).
        let ssim = now
            .cells
            .iter_mut()
            .find(|c| c.workload == "float_ssim")
            .unwrap();
        ssim.speedup = Some(2.0);
        ssim.speedup_ci95 = Some([1.8, 2.2]);
        // psnr: its delta grew (under any gate); motion: its delta shrank.
        let psnr = now.cells.iter_mut().find(|c| c.workload == "psnr").unwrap();
        psnr.score_delta.insert("psnr_y".into(), 3e-6);
        let mut earlier = earlier;
        earlier
            .cells
            .iter_mut()
            .find(|c| c.workload == "motion")
            .unwrap()
            .score_delta
            .insert("integer_motion".into(), 4e-6);
        let changes = compare_reports(&now, &earlier);
        let by = |w: &str| changes.iter().find(|c| c.workload == w).unwrap();
        assert!(by("float_ssim").regression, "{:?}", by("float_ssim"));
        assert!(!by("psnr").regression);
        assert_eq!(by("psnr").parity_growth.len(), 1);
        assert_eq!(by("psnr").parity_growth[0].0, "psnr_y");
        assert_eq!(by("motion").parity_shrink.len(), 1);
        // Growth inside half a printed unit is rounding.
        let mut tiny = earlier.clone();
        tiny.cells
            .iter_mut()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .score_delta
            .insert("psnr_y".into(), 2.6e-6);
        assert!(compare_reports(&now, &tiny)
            .iter()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .parity_growth
            .is_empty());

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
        assert!(markdown.contains("→ `"), "{markdown}");
        assert!(
            markdown.contains("upstream:") && markdown.contains(", unchanged"),
            "{markdown}"
        );
    }
}
