//! Issue 23, output hygiene: strings other people choose (an agent's hostname, a spec's name,
//! a trigger's note) reach the operator through `abfleet agents`, `abfleet runs` and
//! `abfleet report`. Here they carry terminal escapes and HTML, through a real coordinator on
//! loopback, a real agent session and the real `abfleet` binary: nothing the terminal would
//! act on comes out, and the Markdown report holds no raw HTML.

mod support;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_proto::pb;
use support::*;

/// Clears the screen, rings the bell, returns the carriage, then HTML and a table breaker.
const HOSTILE: &str = "bench\u{1b}[2J\u{7}\r<img src=x onerror=alert(1)>|x\u{9b}31m";

/// The characters of `text` a terminal would act on: controls other than `\n`.
fn terminal_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c.is_control() && c != '\n')
        .collect()
}

fn stdout_of(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let output = abfleet(tmp.path(), args);
    assert!(output.status.success(), "{}", output_text(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostnames_names_and_notes_reach_the_terminal_made_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let url = coordinator.url();
    let mut inventory = abfleet_agent::inventory::probe_host();
    inventory.hostname = HOSTILE.to_string();
    let agent = TestAgent::start_with_inventory(&url, &tmp.path().join("agent"), inventory);
    let mut control = coordinator.control().await;
    wait_for_agents(&control, 1).await;
    assert_eq!(
        list_agents(&control).await[0]
            .inventory
            .as_ref()
            .unwrap()
            .hostname,
        HOSTILE,
        "the coordinator keeps what the agent sent"
    );

    let agents = stdout_of(&["agents", "--coordinator", &url]);
    assert_eq!(terminal_controls(&agents), Vec::<char>::new(), "{agents:?}");
    assert!(agents.contains(r"bench\u{1b}[2J\u{7}\u{d}<img"), "{agents}");
    assert_eq!(agents.lines().count(), 2, "one header, one agent: {agents}");
    // No agent: the run stays queued, and its report is what the coordinator has so far.
    agent.stop().await;

    let spec_path = SpecOptions::path().write(tmp.path(), "spec.toml");
    let mut spec = abfleet_core::spec::JobSpec::load(&spec_path).unwrap();
    spec.name = HOSTILE.to_string();
    let run_id = control
        .submit_run(pb::SubmitRunRequest {
            spec_json: spec.to_json(),
            trigger: "performance-pr".into(),
            spec_origin: "a pull request".into(),
            trigger_note: format!("PR #7 {HOSTILE}\nsecond line"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .run_id;

    let runs = stdout_of(&["runs", "--coordinator", &url]);
    assert_eq!(terminal_controls(&runs), Vec::<char>::new(), "{runs:?}");
    assert_eq!(runs.lines().count(), 2, "one header, one run: {runs}");
    let line = runs.lines().nth(1).unwrap();
    assert!(line.starts_with(&run_id), "{runs}");
    assert!(line.contains(r"\u{a}second line"), "{runs}");

    let markdown = stdout_of(&["report", &run_id, "--format", "md", "--coordinator", &url]);
    assert_eq!(
        terminal_controls(&markdown),
        Vec::<char>::new(),
        "{markdown:?}"
    );
    assert!(
        !markdown.contains("<img"),
        "raw HTML in report.md:\n{markdown}"
    );
    assert!(
        markdown.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{markdown}"
    );

    coordinator.stop().await;
}
