//! Where the client commands find the coordinator (issue 25): `ABFLEET_COORDINATOR` instead
//! of `--coordinator` on every command, a flag still winning over it, and `--data-dir`
//! reading a store directly whatever the variable says (both flags on one command line is a
//! mistake, said as one).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::*;

fn abfleet_with(dir: &Path, coordinator_env: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .env("ABFLEET_COORDINATOR", coordinator_env)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abfleet_coordinator_names_the_coordinator_for_every_client_command() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let mut coordinator = TestCoordinator::start(&data_dir, Default::default()).await;
    let url = coordinator.url();
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");

    let submitted = abfleet_with(tmp.path(), &url, &["submit", spec.to_str().unwrap()]);
    assert!(submitted.status.success(), "{}", output_text(&submitted));
    let run_id = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    let listed = abfleet_with(tmp.path(), &url, &["runs"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(&run_id),
        "{}",
        output_text(&listed)
    );
    let agents = abfleet_with(tmp.path(), &url, &["agents"]);
    assert!(agents.status.success(), "{}", output_text(&agents));

    // A flag wins over the variable.
    let dead = "http://127.0.0.1:9";
    let flagged = abfleet_with(tmp.path(), dead, &["runs", "--coordinator", &url]);
    assert!(
        String::from_utf8_lossy(&flagged.stdout).contains(&run_id),
        "{}",
        output_text(&flagged)
    );
    let refused = abfleet_with(tmp.path(), dead, &["runs"]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(3), "{text}");
    assert!(
        text.contains("127.0.0.1:9"),
        "the error names where it looked: {text}"
    );

    // `--data-dir` reads the store whatever the variable says; both flags is a mistake.
    coordinator.stop().await;
    let read = abfleet_with(
        tmp.path(),
        dead,
        &["runs", "--data-dir", data_dir.to_str().unwrap()],
    );
    assert!(
        String::from_utf8_lossy(&read.stdout).contains(&run_id),
        "{}",
        output_text(&read)
    );
    let both = abfleet(
        tmp.path(),
        &[
            "runs",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--coordinator",
            &url,
        ],
    );
    let text = output_text(&both);
    assert_eq!(both.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--coordinator URL or --data-dir DIR, not both"),
        "{text}"
    );
}
