use super::*;

/// The report.json of a real `abfleet local fixtures/jobs/demo-drift.toml` run: float_ssim
/// fails parity (exit 1).
fn drift_report() -> Report {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reports/demo-drift.json"
    );
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_parity_failure_is_one_alert_per_generation_naming_the_cell_the_host_and_the_report() {
    let report = drift_report();
    let alerts = alerts_for_finished_run(&report, Some("https://abfleet.example:8443/"));
    let kinds: Vec<AlertKind> = alerts.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [AlertKind::ParityFailure], "{alerts:#?}");
    let alert = &alerts[0];
    assert!(
        alert.details.iter().any(|d| d.contains("/float_ssim: ")),
        "{alert:#?}"
    );
    assert!(
        alert.summary.starts_with("demo-drift: parity failed"),
        "{}",
        alert.summary
    );
    assert_eq!(alert.host.as_deref(), Some("vm"));
    assert!(alert.summary.contains(" on vm: "), "{}", alert.summary);
    assert_eq!(
        alert.report_url.as_deref(),
        Some(format!("https://abfleet.example:8443/runs/{}", report.run_id).as_str())
    );
}

#[test]
fn a_clean_run_says_nothing_and_a_failed_one_says_it_was_not_carried_out() {
    let mut report = drift_report();
    for cell in &mut report.cells {
        cell.parity = CellParity::Ok;
    }
    for section in &mut report.generations {
        section.score_parity = ScoreParity::Ok;
    }
    assert!(alerts_for_finished_run(&report, None).is_empty());
    report.generations[0].exit_code = abfleet_core::exit::NOT_CARRIED_OUT;
    report.generations[0].errors = vec!["the fork's build failed: make: *** [all] Error 2".into()];
    let alerts = alerts_for_finished_run(&report, None);
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].kind, AlertKind::NotCarriedOut);
    assert!(
        alerts[0].summary.contains("the fork's build failed"),
        "{}",
        alerts[0].summary
    );
    assert_eq!(alerts[0].report_url, None);
}

#[test]
fn payloads_carry_the_alert_and_slack_text_is_escaped() {
    let mut alert = alerts_for_finished_run(&drift_report(), Some("https://a.example")).remove(0);
    alert.summary = "demo <b>&</b>: parity failed".into();
    let json = payload(PayloadFormat::Json, &alert);
    assert_eq!(json["event"], "parity_failure");
    assert_eq!(json["run"]["id"], alert.run_id.as_str());
    assert_eq!(
        json["report_url"],
        alert.report_url.clone().unwrap().as_str()
    );
    assert_eq!(
        json["details"].as_array().unwrap().len(),
        alert.details.len()
    );
    let slack = payload(PayloadFormat::Slack, &alert);
    let text = slack["text"].as_str().unwrap();
    assert!(
        text.contains("demo &lt;b&gt;&amp;&lt;/b&gt;: parity failed"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "<{}|the report of run ",
            alert.report_url.unwrap()
        )),
        "{text}"
    );
    assert_eq!(
        slack.as_object().unwrap().len(),
        1,
        "Slack's incoming webhook: `text` only"
    );
}

#[test]
fn an_endpoint_takes_the_kinds_it_lists_or_all_and_kinds_parse_by_name() {
    let mut endpoint = Endpoint {
        name: "ops".into(),
        url: "https://hooks.example/x".into(),
        format: PayloadFormat::Json,
        events: vec![],
        secret: Some(b"s".to_vec()),
        ca_pem: None,
    };
    assert!(AlertKind::ALL.iter().all(|k| endpoint.wants(*k)));
    endpoint.events = vec![AlertKind::ParityFailure];
    assert!(endpoint.wants(AlertKind::ParityFailure) && !endpoint.wants(AlertKind::AgentLost));
    assert_eq!(
        "stale_sweep".parse::<AlertKind>(),
        Ok(AlertKind::StaleSweep)
    );
    assert!("stale"
        .parse::<AlertKind>()
        .unwrap_err()
        .contains("stale_sweep"));
    // The URL's path (a Slack webhook's secret) and the secret stay out of logs.
    let shown = format!("{endpoint:?}");
    assert!(!shown.contains("/x") && !shown.contains("\"s\""), "{shown}");
}

#[test]
fn the_signature_is_the_one_a_github_style_verifier_accepts() {
    let body = br#"{"event":"parity_failure"}"#;
    let signature = crate::webhook::sign(b"alert secret", body);
    assert!(crate::webhook::verify_signature(b"alert secret", body, Some(&signature)).is_ok());
    assert!(crate::webhook::verify_signature(b"another", body, Some(&signature)).is_err());
}
