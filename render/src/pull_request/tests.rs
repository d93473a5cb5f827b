use super::*;

/// The report.json of a real `abfleet local fixtures/jobs/demo-drift.toml` run: float_ssim
/// 13.9x faster but fails parity (exit 1); psnr and motion slower; motion_v2 fork-only.
fn drift_report() -> Report {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reports/demo-drift.json"
    );
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The same run as if parity had passed and nothing were slower or unsure.
fn passing_report() -> Report {
    let mut report = drift_report();
    report.exit_code = exit::OK;
    report.score_parity = ScoreParity::Ok;
    for cell in &mut report.cells {
        if cell.parity == CellParity::Fail {
            cell.parity = CellParity::Ok;
        }
        if cell.verdict.is_some() {
            cell.verdict = Some(Verdict::Faster);
        }
    }
    report
}

#[test]
fn a_parity_failure_fails_the_status_naming_the_feature() {
    let (state, line) = pr_verdict(&drift_report());
    assert_eq!(state, PrState::Failure);
    assert!(line.starts_with("parity FAILED on float_ssim"), "{line}");
    assert!(line.chars().count() <= 140);
}

#[test]
fn slower_unsure_and_clean_runs_get_failure_neutral_and_success() {
    let mut slower = passing_report();
    slower.cells[0].verdict = Some(Verdict::Slower);
    slower.cells[0].speedup = Some(0.91);
    let (state, line) = pr_verdict(&slower);
    assert_eq!(state, PrState::Failure);
    assert!(line.starts_with("slower: psnr 0.91x"), "{line}");

    let mut unsure = passing_report();
    unsure.cells[0].verdict = Some(Verdict::Unsure);
    let (state, line) = pr_verdict(&unsure);
    assert_eq!((state, state.status_state()), (PrState::Neutral, "success"));
    assert!(
        line.starts_with("unsure: 2 faster, 0 same, 0 slower, 1 unsure"),
        "{line}"
    );

    let (state, line) = pr_verdict(&passing_report());
    assert_eq!(state, PrState::Success);
    assert!(
        line.contains("3 faster") && line.contains("parity ok"),
        "{line}"
    );

    let mut broken = passing_report();
    broken.exit_code = exit::NOT_CARRIED_OUT;
    broken.errors = vec!["the fork's build failed".into()];
    assert_eq!(
        pr_verdict(&broken),
        (
            PrState::Error,
            "not carried out: the fork's build failed".to_string()
        )
    );
}

#[test]
fn the_comment_has_its_marker_a_row_per_feature_the_parity_verdict_and_the_link() {
    let report = drift_report();
    let comment = render_pr_comment(&report, Some("https://abfleet.example:8443/"));
    assert!(
        comment.starts_with(&comment_marker("demo-drift")),
        "{comment}"
    );
    assert!(
        comment.contains("**failure**: parity FAILED on float\\_ssim"),
        "{comment}"
    );
    let rows: Vec<&str> = comment
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Feature"))
        .collect();
    assert_eq!(rows.len(), report.cells.len(), "{comment}");
    let ssim = rows.iter().find(|r| r.starts_with("| float_ssim")).unwrap();
    assert!(
        ssim.contains("~~13.93x~~") && ssim.ends_with("| **FAIL** |"),
        "{ssim}"
    );
    assert!(
        ssim.contains("float_ssim +") || ssim.contains("float_ssim -"),
        "{ssim}"
    );
    let v2 = rows.iter().find(|r| r.starts_with("| motion_v2")).unwrap();
    assert!(v2.contains("absent upstream"), "{v2}");
    assert!(comment.contains("Score parity: **FAIL**"), "{comment}");
    assert!(
        comment.contains(&format!(
            "[The full report](https://abfleet.example:8443/runs/{})",
            report.run_id
        )),
        "{comment}"
    );
}

#[test]
fn names_from_a_spec_cannot_break_the_table_or_close_the_marker() {
    let mut report = passing_report();
    report.cells[0].workload = "a|b<script>".into();
    report.name = "x --> y".into();
    let comment = render_pr_comment(&report, None);
    assert!(!comment.contains("<script>"), "{comment}");
    let marker = comment.lines().next().unwrap();
    assert_eq!(marker.matches("-->").count(), 1, "{marker}");
    let row = comment
        .lines()
        .find(|l| l.contains("a\\|b"))
        .expect("the pipe escaped");
    assert_eq!(row.matches(" | ").count() + 2, 8, "{row}");
}

#[test]
fn an_agents_error_in_the_comment_pings_nobody_and_its_markdown_shows_as_written() {
    let mut broken = passing_report();
    broken.exit_code = exit::NOT_CARRIED_OUT;
    broken.errors = vec!["cc @maintainers **boom** ![x](https://evil.example/p.png)".into()];
    let comment = render_pr_comment(&broken, None);
    assert!(!comment.contains("@maintainers"), "{comment}");
    assert!(
        comment.contains(
            "not carried out: cc @&#8203;maintainers \\*\\*boom\\*\\* \\!\\[x\\](https://evil.example/p.png)"
        ),
        "{comment}"
    );
}
