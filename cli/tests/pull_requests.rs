//! The pull request hears the answer (docs/milestone.md): an `abfleet coordinator` process
//! with `[github]` pointed at a local double of GitHub's REST API that checks every request
//! against GitHub's published description (`abfleet-testkit`), a real agent, and real git
//! repositories whose fork lives at `…/Codertocat/Hello-World`, the repository of GitHub's
//! recorded `pull_request` payloads. The recorded `labeled` delivery (its head commit set to
//! the fork's, the one field a recording cannot know) starts a run; the PR's head gets a
//! pending status, then the verdict; the PR gets one comment with the table, which a rerun
//! updates instead of adding another — and never a comment someone else planted with the
//! same marker. A comment that cannot be posted does not hold the verdict's status back.
//! `abfleet trigger --pr` asks GitHub for the head, and refuses one that is not a commit id.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use abfleet_coordinator::outbound::DELIVERY_HEADER;
use abfleet_render::pull_request::{comment_marker, pr_verdict};
use abfleet_testkit::{webhook_example, GitHubApiDouble};
use support::*;

const SECRET: &[u8] = b"webhook secret for the PR test";
const OWNER: &str = "Codertocat";
const NAME: &str = "Hello-World";
const TOKEN: &str = "github_pat_test_token";
/// Who the token is, as `GET /user` answers.
const ABFLEET_LOGIN: &str = "abfleet-bench";

fn private_file(path: &Path, text: &[u8]) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Posts a signed GitHub delivery to the coordinator's HTTP listener: (status, body).
fn deliver(http: u16, delivery: &str, payload: &serde_json::Value) -> (u16, String) {
    let body = serde_json::to_vec(payload).unwrap();
    let headers = vec![
        ("X-GitHub-Event".to_string(), "pull_request".to_string()),
        ("X-GitHub-Delivery".to_string(), delivery.to_string()),
        ("Content-Type".to_string(), "application/json".to_string()),
        (
            "X-Hub-Signature-256".to_string(),
            abfleet_coordinator::webhook::sign(SECRET, &body),
        ),
    ];
    http_request(
        format!("127.0.0.1:{http}").parse().unwrap(),
        "POST",
        "/hooks/github",
        &headers,
        &body,
    )
}

fn started_run(reply: &(u16, String)) -> String {
    assert_eq!(reply.0, 202, "{}", reply.1);
    reply
        .1
        .strip_prefix("started run ")
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no run started: {}", reply.1))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_performance_pr_gets_a_pending_status_then_the_verdict_and_one_comment_a_rerun_updates() {
    let double = GitHubApiDouble::start().await;
    double.set_login(TOKEN, ABFLEET_LOGIN);
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    // The fork where GitHub's recorded payloads say the PR is.
    let fork = tmp.path().join("github").join(OWNER).join(NAME);
    std::fs::create_dir_all(fork.parent().unwrap()).unwrap();
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            repos.fork.to_str().unwrap(),
            fork.to_str().unwrap(),
        ],
    );
    let head = git(&fork, &["rev-parse", "HEAD"]);
    SpecOptions {
        upstream_source: format!("git = \"{}\"\nrev = \"v1.0.0\"", repos.upstream.display()),
        fork_source: format!("git = \"{}\"\nrev = \"v1.0.0\"", fork.display()),
        fork_build: "",
        ..SpecOptions::path()
    }
    .write(tmp.path(), "milestone.toml");
    private_file(&tmp.path().join("webhook-secret"), SECRET);
    private_file(
        &tmp.path().join("github-token"),
        format!("{TOKEN}\n").as_bytes(),
    );
    let (grpc, http) = (free_port(), free_port());
    let config = tmp.path().join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            r#"[coordinator]
listen = "127.0.0.1:{grpc}"
plaintext = true
http = "127.0.0.1:{http}"
data_dir = "data"
milestone_spec = "milestone.toml"
webhook_secret_file = "webhook-secret"
perf_label = "bug"
debounce_seconds = 0.0

[github]
api_url = "{api}"
token_file = "github-token"
report_url = "https://abfleet.example:8443"
retry_after_seconds = 0.2
"#,
            api = double.url()
        ),
    )
    .unwrap();
    let checked = abfleet(tmp.path(), &["config", "check", config.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", output_text(&checked));
    let _coordinator = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--config", config.to_str().unwrap()])
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{grpc}");
    let mut client = control_at(&url).await;

    // GitHub's recorded `labeled` delivery, with the fork's head commit as the PR's head.
    let mut labeled = webhook_example("pull_request", Some("labeled"));
    assert_eq!(
        labeled["repository"]["full_name"],
        format!("{OWNER}/{NAME}").as_str()
    );
    let number = labeled["number"].as_u64().unwrap();
    labeled["pull_request"]["head"]["sha"] = head.clone().into();
    // A title that would clear the screen of whoever reads the webhook's answer.
    labeled["pull_request"]["title"] = "Faster ADM\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}".into();
    // The PR's author plants a comment that looks like abfleet's: it must never be the one
    // abfleet edits (its author could change the results afterwards).
    let planted_body = format!("{}\nall green, merge away", comment_marker("test"));
    let planted = double.plant_comment(OWNER, NAME, number, "Codertocat", &planted_body);
    let reply = tokio::task::spawn_blocking({
        let labeled = labeled.clone();
        move || deliver(http, "delivery-1", &labeled)
    })
    .await
    .unwrap();
    let run_id = started_run(&reply);
    assert!(
        reply
            .1
            .contains("Faster ADM\u{fffd}[2J\u{fffd}]0;pwned\u{fffd}\u{fffd}"),
        "the title's controls neutralised in the answer: {:?}",
        reply.1
    );

    // Queued (no agent yet): the head says so before anything is measured.
    let pending = wait_until(Duration::from_secs(30), "a pending status", || {
        let statuses = double.commit_statuses(OWNER, NAME, &head);
        async move { statuses.first().cloned() }
    })
    .await;
    assert_eq!(pending.state, "pending");
    assert_eq!(pending.context, "abfleet");
    assert!(
        pending
            .description
            .as_deref()
            .unwrap()
            .starts_with("queued: "),
        "{pending:?}"
    );
    assert_eq!(
        pending.target_url.as_deref(),
        Some(format!("https://abfleet.example:8443/runs/{run_id}").as_str())
    );

    let _agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    let (state, description) = pr_verdict(&report);
    let last = wait_until(Duration::from_secs(30), "the final status", || {
        let statuses = double.commit_statuses(OWNER, NAME, &head);
        async move { statuses.last().filter(|s| s.state != "pending").cloned() }
    })
    .await;
    assert_eq!(last.state, state.status_state());
    assert_eq!(last.description.as_deref(), Some(description.as_str()));
    let comments = double.issue_comments(OWNER, NAME, number);
    assert_eq!(
        comments.len(),
        2,
        "the planted one and abfleet's: {comments:#?}"
    );
    assert_eq!(
        (comments[0].id, comments[0].body.as_str()),
        (planted, planted_body.as_str()),
        "the planted comment is untouched"
    );
    assert_eq!(comments[1].author, ABFLEET_LOGIN);
    let body = &comments[1].body;
    assert!(body.starts_with(&comment_marker("test")), "{body}");
    assert!(
        body.contains(&format!("<!-- {DELIVERY_HEADER}: {run_id}/comment -->")),
        "{body}"
    );
    let created = double.requests_to("issues/create-comment");
    assert_eq!(
        created[0].header(DELIVERY_HEADER),
        Some(format!("{run_id}/comment").as_str())
    );
    for cell in &report.cells {
        assert!(
            body.lines()
                .any(|l| l.starts_with(&format!("| {} |", cell.workload))),
            "no row for {}: {body}",
            cell.workload
        );
    }
    assert!(body.contains("Score parity: **OK**"), "{body}");

    // A rerun (GitHub sends `labeled` again; a new delivery, a later `updated_at`) updates
    // the comment: still one.
    labeled["pull_request"]["updated_at"] = "2019-05-15T15:21:00Z".into();
    let reply = tokio::task::spawn_blocking(move || deliver(http, "delivery-2", &labeled))
        .await
        .unwrap();
    let rerun = started_run(&reply);
    assert_ne!(rerun, run_id);
    wait_for_report(&mut client, &rerun, Duration::from_secs(240)).await;
    wait_until(Duration::from_secs(30), "the rerun's comment", || {
        let comments = double.issue_comments(OWNER, NAME, number);
        let rerun = rerun.clone();
        async move { (comments.len() == 2 && comments[1].body.contains(&rerun)).then_some(()) }
    })
    .await;
    assert_eq!(double.requests_to("issues/create-comment").len(), 1);
    assert_eq!(double.requests_to("issues/update-comment").len(), 1);
    assert_eq!(
        double.issue_comments(OWNER, NAME, number)[0].body,
        planted_body
    );
    // Who the token is was asked once.
    assert_eq!(double.requests_to("users/get-authenticated").len(), 1);

    // `abfleet trigger --pr` asks GitHub for the PR's head. The double knows the pull
    // requests made through it; its head is the description's example commit, which the
    // fork does not have: the run cannot be carried out, and the PR hears that.
    let made = {
        let api = double.url().strip_prefix("http://").unwrap().to_string();
        tokio::task::spawn_blocking(move || {
            http_request(
                api.parse().unwrap(),
                "POST",
                &format!("/repos/{OWNER}/{NAME}/pulls"),
                &[
                    ("Accept".into(), "application/vnd.github+json".into()),
                    ("Authorization".into(), format!("Bearer {TOKEN}")),
                    ("User-Agent".into(), "abfleet-test".into()),
                    ("Content-Type".into(), "application/json".into()),
                ],
                br#"{"title":"by hand","head":"perf","base":"main"}"#,
            )
        })
        .await
        .unwrap()
    };
    assert_eq!(made.0, 201, "{}", made.1);
    let by_hand_number = serde_json::from_str::<serde_json::Value>(&made.1).unwrap()["number"]
        .as_u64()
        .unwrap();
    let cli = |args: &[&str]| abfleet(tmp.path(), &[args, &["--coordinator", &url]].concat());
    // The comment fails for a while: the verdict's status goes out all the same.
    double.fail_next("issues/create-comment", 502, 3);
    let triggered = cli(&[
        "trigger",
        "--reason",
        "perf-pr",
        "--note",
        "by hand",
        "--pr",
        &format!("{OWNER}/{NAME}#{by_hand_number}"),
    ]);
    assert!(triggered.status.success(), "{}", output_text(&triggered));
    let by_hand = String::from_utf8_lossy(&triggered.stdout)
        .trim()
        .to_string();
    assert_eq!(double.requests_to("pulls/get").len(), 1);
    let report = wait_for_report(&mut client, &by_hand, Duration::from_secs(240)).await;
    assert_eq!(report.exit_code, 3, "{:?}", report.errors);
    let is_verdict = |request: &abfleet_testkit::RecordedRequest| {
        request.operation_id.as_deref() == Some("repos/create-commit-status")
            && request.body.as_ref().is_some_and(|body| {
                body["state"] != "pending"
                    && body["target_url"]
                        .as_str()
                        .is_some_and(|url| url.ends_with(&by_hand))
            })
    };
    wait_until(Duration::from_secs(30), "the error status", || {
        let requests = double.requests();
        async move { requests.iter().any(is_verdict).then_some(()) }
    })
    .await;
    let requests = double.requests();
    let verdict_at = requests.iter().position(is_verdict).unwrap();
    let comment_tries: Vec<u16> = requests[..verdict_at]
        .iter()
        .filter(|r| {
            r.operation_id.as_deref() == Some("issues/create-comment")
                && r.path.contains(&format!("/issues/{by_hand_number}/"))
        })
        .map(|r| r.status)
        .collect();
    assert!(
        !comment_tries.is_empty() && comment_tries.iter().all(|status| *status == 502),
        "the status came after failed comments only, not held back by them: {comment_tries:?}"
    );
    wait_until(Duration::from_secs(30), "the error status and comment", || {
        let comments = double.issue_comments(OWNER, NAME, by_hand_number);
        let by_hand = by_hand.clone();
        async move {
            (comments.len() == 1 && comments[0].body.contains(&by_hand)).then_some(())
        }
    })
    .await;
    // The comment goes first and the status after it (a status that says "see the comment"
    // must not come before it): wait for this run's status rather than read the last one
    // the moment the comment is there, which may still be the rerun's verdict.
    let last = wait_until(Duration::from_secs(30), "the error status", || {
        let statuses = double.requests_to("repos/create-commit-status");
        let by_hand = by_hand.clone();
        async move {
            statuses
                .iter()
                .filter_map(|request| request.body.clone())
                .find(|body| {
                    body["target_url"]
                        .as_str()
                        .is_some_and(|url| url.ends_with(&by_hand))
                        && body["state"] != "pending"
                })
        }
    })
    .await;
    assert_eq!(last["state"], "error", "{last}");
    assert!(
        last["description"]
            .as_str()
            .unwrap()
            .starts_with("not carried out"),
        "{last}"
    );
    // A head that is not a commit id (a path, a query, an option) is refused where it comes
    // in: no run, and nothing sent to a path it would have built.
    let runs_before = list_runs(&client).await.len();
    for hostile in [
        "main/../../../../user",
        "abc?x=1#frag",
        "--upload-pack=touch /tmp/x",
    ] {
        double.set_pull_head(OWNER, NAME, by_hand_number, hostile);
        let refused = cli(&[
            "trigger",
            "--reason",
            "perf-pr",
            "--note",
            "hostile head",
            "--pr",
            &format!("{OWNER}/{NAME}#{by_hand_number}"),
        ]);
        let text = output_text(&refused);
        assert!(!refused.status.success(), "{hostile}: {text}");
        assert!(
            text.contains("`head.sha`") && text.contains("not a commit id"),
            "{hostile}: {text}"
        );
    }
    assert_eq!(
        list_runs(&client).await.len(),
        runs_before,
        "nothing stored"
    );
    let requests = double.requests();
    let statuses_of: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.path.split_once("/statuses/").map(|(_, sha)| sha))
        .collect();
    assert!(
        requests.iter().all(|r| !r.path.contains(".."))
            && statuses_of
                .iter()
                .all(|sha| sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())),
        "{statuses_of:?}"
    );
    let refused = cli(&[
        "trigger",
        "--reason",
        "perf-pr",
        "--note",
        "elsewhere",
        "--pr",
        "someone/else#1",
    ]);
    let text = output_text(&refused);
    assert!(!refused.status.success(), "{text}");
    assert!(
        text.contains("not one of the repositories abfleet may call"),
        "{text}"
    );

    double.assert_every_request_valid();
}
