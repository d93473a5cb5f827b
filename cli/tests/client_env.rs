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

    // The lists for scripts: one JSON document each, in the documented shape.
    let json = |args: &[&str]| {
        let output = abfleet_with(tmp.path(), &url, args);
        assert!(output.status.success(), "{}", output_text(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout)
            .unwrap_or_else(|err| panic!("{args:?}: not JSON ({err}): {}", output_text(&output)))
    };
    let runs = json(&["runs", "--format", "json"]);
    assert_eq!(runs["more"], false);
    let run = &runs["runs"][0];
    assert_eq!(run["run_id"], run_id.as_str());
    assert_eq!(
        (run["name"].as_str(), run["trigger"].as_str()),
        (Some("test"), Some("manual"))
    );
    assert!(
        run["state"].is_string() && run["submitted_ms"].is_i64(),
        "{run}"
    );
    assert!(run["exit_code"].is_null(), "not finished: {run}");
    let _agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let listed = wait_until(
        std::time::Duration::from_secs(60),
        "the agent listed",
        || {
            let listed = json(&["agents", "--format", "json"]);
            async move { (listed["agents"].as_array().unwrap().len() == 1).then_some(listed) }
        },
    )
    .await;
    let agent = &listed["agents"][0];
    assert!(
        agent["agent_id"].is_string() && agent["hostname"].is_string(),
        "{agent}"
    );
    assert!(
        agent["certificate"].is_null(),
        "plaintext loopback: {agent}"
    );
    assert!(
        !agent["generations"][0]["key"].as_str().unwrap().is_empty(),
        "{agent}"
    );

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

/// Reading commands never create or migrate a store (issue 25): a mistyped `--data-dir`
/// is an error that says so (and no directory appears), and a store at another schema
/// version (a backup being checked) is refused untouched, saying how to migrate it.
#[test]
fn reading_commands_neither_create_nor_migrate_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("dta");
    for args in [
        vec!["runs", "--data-dir", typo.to_str().unwrap()],
        vec![
            "report",
            "6c23b1cb-e293-45b2-ac09-58cab92139cd",
            "--data-dir",
            typo.to_str().unwrap(),
        ],
    ] {
        let output = abfleet(tmp.path(), &args);
        let text = output_text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        assert!(
            text.contains("holds no abfleet store: there is no such directory"),
            "{text}"
        );
        assert!(!typo.exists(), "{args:?} made the directory");
    }

    // A store one schema version behind, as an older coordinator left it.
    let old = tmp.path().join("backup");
    drop(abfleet_coordinator::store::Store::open(&old).unwrap());
    let db = old.join("abfleet.sqlite3");
    let version = |db: &Path| -> i64 {
        rusqlite::Connection::open(db)
            .unwrap()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    };
    let latest = version(&db);
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", latest - 1)
        .unwrap();
    let output = abfleet(tmp.path(), &["runs", "--data-dir", old.to_str().unwrap()]);
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("is at schema version {}", latest - 1))
            && text.contains("does not migrate a store it only reads"),
        "{text}"
    );
    assert_eq!(version(&db), latest - 1, "left as it was");
}
