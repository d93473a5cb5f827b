//! Triggers (docs/milestone.md): `abfleet trigger` with a reason and note, of a spec or of the
//! coordinator's milestone spec; GitHub webhooks on `POST /hooks/github` (signature, replay,
//! event mapping, the PR's head as the fork, the upstream pin moved by a release and kept,
//! debounce, one run per tag with the upstream watcher), sent as raw HTTP/1.1 over loopback
//! to a real coordinator with a real SQLite store.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use abfleet_coordinator::http::{serve_http_with, HttpConfig};
use abfleet_coordinator::store::RunRow;
use abfleet_coordinator::webhook::{sign, WebhookConfig};
use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, Fleet, ServerTransport};
use support::*;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SECRET: &[u8] = b"a shared secret for the tests";

/// A coordinator serving gRPC and the HTTP listener (with or without the webhook endpoint).
struct Hooked {
    fleet: Fleet,
    grpc: SocketAddr,
    http: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Hooked {
    async fn start(data_dir: &Path, milestone: Option<PathBuf>, secret: Option<&[u8]>) -> Hooked {
        let config = CoordinatorConfig {
            milestone_spec: milestone,
            ..CoordinatorConfig::default()
        };
        Hooked::start_with(data_dir, config, secret).await
    }

    async fn start_with(
        data_dir: &Path,
        config: CoordinatorConfig,
        secret: Option<&[u8]>,
    ) -> Hooked {
        let coordinator = Coordinator::open(data_dir, config).unwrap();
        let fleet = coordinator.fleet.clone();
        let grpc_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = grpc_listener.local_addr().unwrap();
        let http = http_listener.local_addr().unwrap();
        let (stop_grpc, grpc_stopped) = oneshot::channel::<()>();
        let (stop_http, http_stopped) = oneshot::channel::<()>();
        let grpc_task = tokio::spawn(async move {
            serve(
                coordinator,
                grpc_listener,
                ServerTransport::LoopbackPlaintext,
                async {
                    let _ = grpc_stopped.await;
                },
            )
            .await
            .unwrap();
        });
        let http_config = HttpConfig {
            webhook: secret.map(WebhookConfig::new),
            web: false,
            limits: Default::default(),
        };
        let http_fleet = fleet.clone();
        let http_task = tokio::spawn(async move {
            serve_http_with(http_fleet, http_listener, http_config, async {
                let _ = http_stopped.await;
            })
            .await
            .unwrap();
        });
        Hooked {
            fleet,
            grpc,
            http,
            stops: vec![stop_grpc, stop_http],
            tasks: vec![grpc_task, http_task],
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    async fn runs(&self) -> Vec<RunRow> {
        self.fleet.runs().all().await.unwrap()
    }

    /// Posts a GitHub delivery: `event`, `delivery` id, the fixture's body, signed with
    /// `signature` (`None`: no signature header).
    async fn deliver(
        &self,
        event: &str,
        delivery: &str,
        body: Vec<u8>,
        signature: Option<String>,
    ) -> (u16, String) {
        let addr = self.http;
        let mut headers = vec![
            ("X-GitHub-Event".to_string(), event.to_string()),
            ("X-GitHub-Delivery".to_string(), delivery.to_string()),
            ("Content-Type".to_string(), "application/json".to_string()),
        ];
        if let Some(signature) = signature {
            headers.push(("X-Hub-Signature-256".to_string(), signature));
        }
        tokio::task::spawn_blocking(move || {
            http_request(addr, "POST", "/hooks/github", &headers, &body)
        })
        .await
        .unwrap()
    }

    /// Posts `body` signed with the right secret.
    async fn deliver_signed(&self, event: &str, delivery: &str, body: Vec<u8>) -> (u16, String) {
        let signature = sign(SECRET, &body);
        self.deliver(event, delivery, body, Some(signature)).await
    }

    /// A signed delivery that must start a run (202 "started run ID: …"): the run's id.
    async fn deliver_starting_a_run(&self, event: &str, delivery: &str, body: Vec<u8>) -> String {
        let (status, reply) = self.deliver_signed(event, delivery, body).await;
        assert_eq!(status, 202, "{reply}");
        started_run_id(&reply)
    }

    async fn stop(mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for task in self.tasks.drain(..) {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the coordinator stops")
                .unwrap();
        }
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/webhooks")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A fixture with one JSON field replaced (`pointer` as in `serde_json::Value::pointer_mut`).
fn fixture_with(name: &str, pointer: &str, value: serde_json::Value) -> Vec<u8> {
    let mut json: serde_json::Value = serde_json::from_slice(&fixture(name)).unwrap();
    *json.pointer_mut(pointer).unwrap() = value;
    serde_json::to_vec(&json).unwrap()
}

/// The fork commit the milestone spec pins.
const FORK_PIN: &str = "c2a3c7e0febd98a6831b9bfebe5e298e229b1244";
/// The head commits of the fixtures' pull requests.
const PR_412_HEAD: &str = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b";
const PR_418_HEAD: &str = "3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b";

/// The milestone spec: upstream and fork are the repositories the fixtures name (never
/// fetched: no agent is connected, so its runs stay queued), upstream pinned at `v3.0.0`.
fn write_milestone_spec(dir: &Path) -> PathBuf {
    write_milestone_spec_at(dir, "https://github.com/Netflix/vmaf.git", "v3.0.0")
}

fn write_milestone_spec_at(dir: &Path, upstream_url: &str, upstream_rev: &str) -> PathBuf {
    let options = SpecOptions {
        upstream_source: format!("git = \"{upstream_url}\"\nrev = \"{upstream_rev}\"\n[upstream.build]\ncommands = [[\"make\", \"-s\", \"VARIANT=upstream\"]]"),
        fork_source: format!("git = \"https://github.com/lusoris/vmaf.git\"\nrev = \"{FORK_PIN}\""),
        ..SpecOptions::path()
    };
    let path = dir.join("milestone.toml");
    std::fs::write(
        &path,
        options
            .render()
            .replace("name = \"test\"", "name = \"milestone\""),
    )
    .unwrap();
    path
}

/// The revs a run's spec asks for: (upstream, fork).
fn revs(run: &RunRow) -> (String, String) {
    (
        run.spec.upstream.source.requested(),
        run.spec.fork.source.requested(),
    )
}

fn started_run_id(body: &str) -> String {
    body.strip_prefix("started run ")
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("not a started run: {body}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_release_starts_a_milestone_run_with_its_reason_and_note() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;

    let run_id = hooked
        .deliver_starting_a_run(
            "release",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            fixture("release.published.json"),
        )
        .await;
    let runs = hooked.runs().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run_id.to_string(), run_id);
    assert_eq!(runs[0].name, "milestone");
    assert_eq!(runs[0].trigger, "release");
    let note = "release VMAF v3.1.0 (v3.1.0) of Netflix/vmaf; upstream pin v3.0.0 → v3.1.0";
    assert_eq!(runs[0].trigger_note.as_deref(), Some(note));
    // An upstream release runs with the upstream pin moved to its tag.
    assert_eq!(revs(&runs[0]), ("v3.1.0".to_string(), FORK_PIN.to_string()));

    // The note is in the report's header, JSON and Markdown.
    let mut client =
        abfleet_proto::pb::control_service_client::ControlServiceClient::connect(hooked.url())
            .await
            .unwrap();
    let report = report(&mut client, &run_id).await;
    assert_eq!(report.trigger, "release");
    assert_eq!(report.trigger_note.as_deref(), Some(note));
    let markdown = abfleet_render::render_markdown(&report);
    assert!(
        markdown.contains(&format!("trigger `release` ({note})")),
        "{markdown}"
    );

    // A labelled PR and a dependency bot's CUDA bump start runs with their reasons.
    let (status, body) = hooked
        .deliver_signed(
            "pull_request",
            "pr-labeled-1",
            fixture("pull_request.labeled.json"),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = hooked
        .deliver_signed(
            "pull_request",
            "pr-dependabot-1",
            fixture("pull_request.dependabot.json"),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let runs = hooked.runs().await;
    let reasons: Vec<(&str, &str)> = runs
        .iter()
        .map(|run| (run.trigger.as_str(), run.trigger_note.as_deref().unwrap()))
        .collect();
    // Both run after the release: the pin it moved is kept, and their notes say so.
    let moved = format!("; upstream pin v3.0.0 → v3.1.0 (moved by run {run_id}: release VMAF v3.1.0 (v3.1.0) of Netflix/vmaf)");
    assert_eq!(
        reasons[1..],
        [
            (
                "performance-pr",
                format!("PR lusoris/vmaf#412 at 9a8b7c6d5e4f: AVX-512 path for the integer VIF filter{moved}").as_str()
            ),
            (
                "toolchain-bump",
                format!("PR lusoris/vmaf#418 by dependabot[bot] (cuda) at 3c2b1a0f9e8d: Bump nvidia/cuda from 12.6.3-devel-ubuntu24.04 to 12.8.1-devel-ubuntu24.04 in /docker{moved}").as_str()
            ),
        ]
    );

    // `abfleet runs` shows the note.
    let listing = abfleet(tmp.path(), &["runs", "--coordinator", &hooked.url()]);
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    assert!(
        listing.contains("release VMAF v3.1.0 (v3.1.0) of Netflix/vmaf"),
        "{listing}"
    );
    hooked.stop().await;
}

/// A labelled PR and a bot's toolchain PR run the PR's head commit as the fork (the
/// milestone spec pins another); a bot updating its PR within the window is the same run; a
/// PR of another repository, or with another label, starts nothing and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_runs_its_head_commit_as_the_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;

    let perf_run = hooked
        .deliver_starting_a_run("pull_request", "pr-1", fixture("pull_request.labeled.json"))
        .await;
    let bot_run = hooked
        .deliver_starting_a_run(
            "pull_request",
            "pr-2",
            fixture("pull_request.dependabot.json"),
        )
        .await;
    let runs = hooked.runs().await;
    let run = |id: &str| runs.iter().find(|r| r.run_id.to_string() == id).unwrap();
    assert_eq!(
        revs(run(&perf_run)),
        ("v3.0.0".to_string(), PR_412_HEAD.to_string())
    );
    assert_eq!(run(&perf_run).trigger, "performance-pr");
    assert_eq!(
        run(&perf_run).trigger_note.as_deref(),
        Some("PR lusoris/vmaf#412 at 9a8b7c6d5e4f: AVX-512 path for the integer VIF filter")
    );
    assert_eq!(
        revs(run(&bot_run)),
        ("v3.0.0".to_string(), PR_418_HEAD.to_string())
    );
    assert_eq!(run(&bot_run).trigger, "toolchain-bump");

    // The bot moves its PR to a newer CUDA (`synchronize`): within the window, one run.
    let mut updated: serde_json::Value =
        serde_json::from_slice(&fixture("pull_request.dependabot.json")).unwrap();
    updated["action"] = "synchronize".into();
    updated["pull_request"]["head"]["sha"] = "5e".repeat(20).into();
    let (status, body) = hooked
        .deliver_signed(
            "pull_request",
            "pr-3",
            serde_json::to_vec(&updated).unwrap(),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        body.starts_with(&format!("debounced into run {bot_run}")),
        "{body}"
    );

    // A PR of another repository is not the fork's.
    let (status, body) = hooked
        .deliver_signed(
            "pull_request",
            "pr-4",
            fixture_with(
                "pull_request.labeled.json",
                "/repository/full_name",
                "someone/vmaf".into(),
            ),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        body.trim(),
        "ignored: PR someone/vmaf#412 is not on the milestone spec's fork `https://github.com/lusoris/vmaf.git`"
    );
    assert_eq!(hooked.runs().await.len(), 2);
    hooked.stop().await;
}

/// "The pin moves deliberately": a new upstream tag runs with the upstream pin moved, and the
/// milestone runs after it (a PR, a toolchain bump) keep the new tag, saying so in their
/// note; a backport tagged later runs as itself without moving the pin back; an operator
/// who writes a newer pin into the file wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_tag_moves_the_pin_for_the_runs_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;

    let tag_run = hooked
        .deliver_starting_a_run("push", "tag-1", fixture("push.tag.json"))
        .await;
    let pr_run = hooked
        .deliver_starting_a_run("pull_request", "pr-1", fixture("pull_request.labeled.json"))
        .await;

    // A backport of the 3.0 line, pushed after v3.1.0: measured as itself.
    let backport_run = hooked
        .deliver_starting_a_run(
            "push",
            "tag-2",
            fixture_with("push.tag.json", "/ref", "refs/tags/v3.0.5".into()),
        )
        .await;
    // `abfleet trigger` without a spec runs the milestone spec as the webhooks do.
    let url = hooked.url();
    let dir = tmp.path().to_path_buf();
    let cli = tokio::task::spawn_blocking(move || {
        abfleet(
            &dir,
            &[
                "trigger",
                "--coordinator",
                &url,
                "--reason",
                "toolchain-bump",
                "--note",
                "nvcc 12.8 on the bench hosts",
            ],
        )
    })
    .await
    .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let cli_run = String::from_utf8_lossy(&cli.stdout).trim().to_string();

    let runs = hooked.runs().await;
    let run = |id: &str| runs.iter().find(|r| r.run_id.to_string() == id).unwrap();
    assert_eq!(
        revs(run(&tag_run)),
        ("v3.1.0".to_string(), FORK_PIN.to_string())
    );
    assert_eq!(
        run(&tag_run).trigger_note.as_deref(),
        Some("tag v3.1.0 of Netflix/vmaf; upstream pin v3.0.0 → v3.1.0")
    );
    let moved = format!(
        "; upstream pin v3.0.0 → v3.1.0 (moved by run {tag_run}: tag v3.1.0 of Netflix/vmaf)"
    );
    assert_eq!(
        revs(run(&pr_run)),
        ("v3.1.0".to_string(), PR_412_HEAD.to_string())
    );
    assert_eq!(
        run(&pr_run).trigger_note.clone().unwrap(),
        format!(
            "PR lusoris/vmaf#412 at 9a8b7c6d5e4f: AVX-512 path for the integer VIF filter{moved}"
        )
    );
    assert_eq!(
        run(&backport_run).spec.upstream.source.requested(),
        "v3.0.5"
    );
    assert_eq!(
        run(&backport_run).trigger_note.as_deref(),
        Some("tag v3.0.5 of Netflix/vmaf; upstream pin v3.1.0 → v3.0.5")
    );
    assert_eq!(
        revs(run(&cli_run)),
        ("v3.1.0".to_string(), FORK_PIN.to_string())
    );
    assert_eq!(
        run(&cli_run).trigger_note.clone().unwrap(),
        format!("nvcc 12.8 on the bench hosts{moved}")
    );

    // The operator writes a newer pin into the file: the file wins, and nothing is said.
    write_milestone_spec_at(tmp.path(), "https://github.com/Netflix/vmaf.git", "v3.2.0");
    let after_edit = hooked
        .deliver_starting_a_run(
            "pull_request",
            "pr-2",
            fixture_with(
                "pull_request.labeled.json",
                "/pull_request/number",
                413.into(),
            ),
        )
        .await;
    let runs = hooked.runs().await;
    let run = runs
        .iter()
        .find(|r| r.run_id.to_string() == after_edit)
        .unwrap();
    assert_eq!(run.spec.upstream.source.requested(), "v3.2.0");
    assert_eq!(
        run.trigger_note.as_deref(),
        Some("PR lusoris/vmaf#413 at 9a8b7c6d5e4f: AVX-512 path for the integer VIF filter")
    );
    hooked.stop().await;
}

/// Upstream's tag `v3.1.0` seen three ways — its push, its release, the upstream watcher's
/// poll — is one run, even with a debounce window of 0 (a tag is run once); and the other way
/// round for `v3.2.0`, which the watcher sees first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_seen_by_webhooks_and_the_upstream_watcher_is_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    // A real upstream repository whose path ends in the fixtures' `Netflix/vmaf`.
    let upstream = tmp.path().join("github/Netflix/vmaf");
    std::fs::create_dir_all(&upstream).unwrap();
    git(&upstream, &["init", "-q", "-b", "master"]);
    git(&upstream, &["commit", "--allow-empty", "-qm", "3.0.0"]);
    git(&upstream, &["tag", "v3.0.0"]);
    let milestone = write_milestone_spec_at(tmp.path(), &upstream.display().to_string(), "v3.0.0");
    let config = CoordinatorConfig {
        milestone_spec: Some(milestone),
        trigger_debounce: Duration::ZERO,
        ..CoordinatorConfig::default()
    };
    let hooked = Hooked::start_with(&tmp.path().join("data"), config, Some(SECRET)).await;
    let poll = || abfleet_coordinator::watcher::poll_upstream_once(&hooked.fleet);
    assert!(poll().await.unwrap().baseline);

    git(&upstream, &["commit", "--allow-empty", "-qm", "3.1.0"]);
    git(&upstream, &["tag", "-a", "v3.1.0", "-m", "VMAF v3.1.0"]);
    let run_id = hooked
        .deliver_starting_a_run("push", "tag-push", fixture("push.tag.json"))
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, body) = hooked
        .deliver_signed("release", "release", fixture("release.published.json"))
        .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        body.starts_with(&format!("debounced into run {run_id}: release, ")),
        "{body}"
    );
    let outcome = poll().await.unwrap();
    assert_eq!(
        outcome.triggered,
        [(
            "v3.1.0".to_string(),
            abfleet_coordinator::TriggerOutcome::Debounced(run_id.parse().unwrap())
        )]
    );
    assert_eq!(hooked.runs().await.len(), 1);

    // The watcher first, then the release.
    git(&upstream, &["commit", "--allow-empty", "-qm", "3.2.0"]);
    git(&upstream, &["tag", "v3.2.0"]);
    let outcome = poll().await.unwrap();
    let [(ref tag, abfleet_coordinator::TriggerOutcome::Started(watched))] = outcome.triggered[..]
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(tag, "v3.2.0");
    let (status, body) = hooked
        .deliver_signed(
            "release",
            "release-2",
            fixture_with(
                "release.published.json",
                "/release/tag_name",
                "v3.2.0".into(),
            ),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        body.starts_with(&format!("debounced into run {watched}: release, ")),
        "{body}"
    );
    let runs = hooked.runs().await;
    assert_eq!(runs.len(), 2);
    let triggers = hooked
        .fleet
        .store()
        .triggers()
        .list_triggers()
        .await
        .unwrap();
    let recorded: Vec<(&str, &str, bool)> = triggers
        .iter()
        .map(|t| {
            (
                t.source.as_str(),
                t.debounce_key.as_deref().unwrap(),
                t.debounced,
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("webhook", "tag v3.1.0", false),
            ("webhook", "tag v3.1.0", true),
            ("watcher", "tag v3.1.0", true),
            ("watcher", "tag v3.2.0", false),
            ("webhook", "tag v3.2.0", true),
        ]
    );
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_or_badly_signed_deliveries_are_refused_and_start_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;
    let body = fixture("release.published.json");

    let (status, text) = hooked
        .deliver("release", "unsigned", body.clone(), None)
        .await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("no X-Hub-Signature-256"), "{text}");

    let wrong_secret = sign(b"not the secret", &body);
    let (status, text) = hooked
        .deliver("release", "wrong-secret", body.clone(), Some(wrong_secret))
        .await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("does not match"), "{text}");

    // Signed right, then changed: the signature covers the raw body.
    let signature = sign(SECRET, &body);
    let tampered = fixture_with(
        "release.published.json",
        "/release/tag_name",
        "v9.9.9".into(),
    );
    let (status, text) = hooked
        .deliver("release", "tampered", tampered, Some(signature))
        .await;
    assert_eq!(status, 401, "{text}");

    let (status, text) = hooked
        .deliver("release", "garbled", body.clone(), Some("sha256=zz".into()))
        .await;
    assert_eq!(status, 401, "{text}");

    assert!(hooked.runs().await.is_empty());
    // A refused delivery is not remembered: the same id, signed right, is handled.
    let (status, text) = hooked.deliver_signed("release", "unsigned", body).await;
    assert_eq!(status, 202, "{text}");
    assert_eq!(hooked.runs().await.len(), 1);
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_that_are_not_triggers_are_answered_202_and_start_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;

    let cases = [
        ("ping", fixture("ping.json"), "event `ping`"),
        (
            "push",
            fixture("push.branch.json"),
            "push of `refs/heads/master`, not a tag",
        ),
        (
            "release",
            fixture_with(
                "release.published.json",
                "/repository/full_name",
                "someone/else".into(),
            ),
            "release `v3.1.0` of someone/else, which is neither the milestone spec's upstream `https://github.com/Netflix/vmaf.git` nor its fork `https://github.com/lusoris/vmaf.git`",
        ),
        (
            "release",
            fixture_with("release.published.json", "/action", "created".into()),
            "release action `created`",
        ),
        (
            "push",
            fixture_with("push.tag.json", "/ref", "refs/heads/master".into()),
            "not a tag",
        ),
        (
            "push",
            fixture_with(
                "push.tag.json",
                "/repository/full_name",
                "someone/else".into(),
            ),
            "not of the milestone spec's upstream",
        ),
        (
            "pull_request",
            fixture_with(
                "pull_request.labeled.json",
                "/label/name",
                "documentation".into(),
            ),
            "labelled `documentation`",
        ),
        (
            "pull_request",
            fixture_with(
                "pull_request.dependabot.json",
                "/pull_request/user/login",
                "octocat".into(),
            ),
            "action `opened` by `octocat`",
        ),
    ];
    for (i, (event, body, why)) in cases.into_iter().enumerate() {
        let (status, text) = hooked
            .deliver_signed(event, &format!("ignored-{i}"), body)
            .await;
        assert_eq!(status, 202, "{event}: {text}");
        assert!(text.starts_with("ignored: "), "{event}: {text}");
        assert!(text.contains(why), "{event}: {text} should say {why}");
    }
    assert!(hooked.runs().await.is_empty());
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_delivery_is_ignored_even_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&data_dir, Some(milestone.clone()), Some(SECRET)).await;
    let delivery = "a1b2c3d4-0000-11ef-8000-000000000001";

    let (status, text) = hooked
        .deliver_signed("push", delivery, fixture("push.tag.json"))
        .await;
    assert_eq!(status, 202, "{text}");
    let (status, text) = hooked
        .deliver_signed("push", delivery, fixture("push.tag.json"))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("already received"), "{text}");
    assert_eq!(hooked.runs().await.len(), 1);

    // Issue 23: the delivery id is not signed; the same signed body under a new id is the
    // same replay, not a new trigger.
    let (status, text) = hooked
        .deliver_signed(
            "push",
            "a-new-id-for-the-same-body",
            fixture("push.tag.json"),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("this signed body was already received"),
        "{text}"
    );
    assert_eq!(
        hooked
            .fleet
            .store()
            .triggers()
            .list_triggers()
            .await
            .unwrap()
            .len(),
        1
    );
    hooked.stop().await;

    // Restarted: the store still knows the id (the answer is a replay's, not a debounce's).
    let hooked = Hooked::start(&data_dir, Some(milestone), Some(SECRET)).await;
    let (status, text) = hooked
        .deliver_signed("push", delivery, fixture("push.tag.json"))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("already received"), "{text}");
    let runs = hooked.runs().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger, "upstream-tag");
    assert_eq!(
        runs[0].trigger_note.as_deref(),
        Some("tag v3.1.0 of Netflix/vmaf; upstream pin v3.0.0 → v3.1.0")
    );
    // The milestone spec pins v3.0.0; the run is of the pushed tag.
    assert_eq!(runs[0].spec.upstream.source.requested(), "v3.1.0");
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_for_one_tag_within_the_window_start_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;

    // The tag push and, a moment later, another delivery for the same tag (another body: a
    // byte-identical one is a replay, see below).
    let run_id = hooked
        .deliver_starting_a_run("push", "push-1", fixture("push.tag.json"))
        .await;
    let (status, second) = hooked
        .deliver_signed(
            "push",
            "push-2",
            fixture_with("push.tag.json", "/sender/login", "another-pusher".into()),
        )
        .await;
    assert_eq!(status, 202, "{second}");
    assert!(
        second.starts_with(&format!("debounced into run {run_id}")),
        "{second}"
    );
    assert_eq!(hooked.runs().await.len(), 1);

    // Another tag is another thing: its own run.
    let other_run = hooked
        .deliver_starting_a_run(
            "push",
            "push-3",
            fixture_with("push.tag.json", "/ref", "refs/tags/v3.1.1".into()),
        )
        .await;
    assert_ne!(other_run, run_id);
    assert_eq!(hooked.runs().await.len(), 2);

    // Every trigger is recorded, the debounced one with the run it went into.
    let triggers = hooked
        .fleet
        .store()
        .triggers()
        .list_triggers()
        .await
        .unwrap();
    let recorded: Vec<(String, bool, String)> = triggers
        .iter()
        .map(|t| {
            (
                t.debounce_key.clone().unwrap(),
                t.debounced,
                t.run_id.to_string(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("tag v3.1.0".to_string(), false, run_id.clone()),
            ("tag v3.1.0".to_string(), true, run_id.clone()),
            ("tag v3.1.1".to_string(), false, other_run),
        ]
    );
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_the_endpoint_is_off() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), None).await;
    let (status, text) = hooked
        .deliver_signed("release", "no-secret", fixture("release.published.json"))
        .await;
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("--webhook-secret-file"), "{text}");
    assert!(hooked.runs().await.is_empty());
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abfleet_trigger_records_reason_and_note_of_a_spec_or_the_milestone_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec(tmp.path());
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), None).await;
    let url = hooked.url();

    let dir = tmp.path().to_path_buf();
    let given = {
        let (dir, url, spec) = (dir.clone(), url.clone(), spec.clone());
        tokio::task::spawn_blocking(move || {
            abfleet(
                &dir,
                &[
                    "trigger",
                    "--coordinator",
                    &url,
                    "--reason",
                    "release",
                    "--note",
                    "v3.1.0 by hand",
                    spec.to_str().unwrap(),
                ],
            )
        })
        .await
        .unwrap()
    };
    assert!(given.status.success(), "{given:?}");
    let given_run = String::from_utf8_lossy(&given.stdout).trim().to_string();

    let from_milestone = {
        let (dir, url) = (dir.clone(), url.clone());
        tokio::task::spawn_blocking(move || {
            abfleet(
                &dir,
                &[
                    "trigger",
                    "--coordinator",
                    &url,
                    "--reason",
                    "perf-pr",
                    "--note",
                    "PR #412",
                ],
            )
        })
        .await
        .unwrap()
    };
    assert!(from_milestone.status.success(), "{from_milestone:?}");
    let milestone_run = String::from_utf8_lossy(&from_milestone.stdout)
        .trim()
        .to_string();

    let runs = hooked.runs().await;
    let seen: Vec<(String, &str, &str, Option<&str>)> = runs
        .iter()
        .map(|run| {
            (
                run.run_id.to_string(),
                run.name.as_str(),
                run.trigger.as_str(),
                run.trigger_note.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (given_run, "test", "release", Some("v3.1.0 by hand")),
            (
                milestone_run,
                "milestone",
                "performance-pr",
                Some("PR #412")
            ),
        ]
    );
    hooked.stop().await;

    // A coordinator without a milestone spec says how to give it one.
    let hooked = Hooked::start(&tmp.path().join("data2"), None, None).await;
    let url = hooked.url();
    let refused = tokio::task::spawn_blocking(move || {
        abfleet(
            &dir,
            &[
                "trigger",
                "--coordinator",
                &url,
                "--reason",
                "release",
                "--note",
                "v3.1.0",
            ],
        )
    })
    .await
    .unwrap();
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--milestone-spec"), "{stderr}");
    assert!(hooked.runs().await.is_empty());
    hooked.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_watcher_runs_a_new_release_tag_with_the_pin_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(&tmp.path().join("repos"));
    let milestone = SpecOptions::git(&repos).write(tmp.path(), "milestone.toml");
    let data_dir = tmp.path().join("data");
    let hooked = Hooked::start(&data_dir, Some(milestone.clone()), None).await;
    let upstream_url = repos.upstream.display().to_string();

    let (stop, stopped) = oneshot::channel::<()>();
    let watcher = tokio::spawn(abfleet_coordinator::watcher::watch_upstream(
        hooked.fleet.clone(),
        Duration::from_millis(100),
        async {
            let _ = stopped.await;
        },
    ));
    // The first poll records the tags upstream has (v1.0.0) and runs none of them.
    let fleet = hooked.fleet.clone();
    let url = upstream_url.clone();
    wait_until(Duration::from_secs(30), "the watcher's first poll", || {
        let (fleet, url) = (fleet.clone(), url.clone());
        async move {
            let known = fleet
                .store()
                .triggers()
                .known_upstream_tags(&url)
                .await
                .unwrap();
            known.contains("v1.0.0").then_some(())
        }
    })
    .await;
    assert!(hooked.runs().await.is_empty());

    // Upstream gains tags: a nightly, a release candidate and a release.
    git(
        &repos.upstream,
        &["commit", "--allow-empty", "-qm", "1.1.0"],
    );
    git(&repos.upstream, &["tag", "nightly-20261204"]);
    git(&repos.upstream, &["tag", "v1.1.0-rc1"]);
    git(
        &repos.upstream,
        &["tag", "-a", "v1.1.0", "-m", "release 1.1.0"],
    );
    let run = wait_until(Duration::from_secs(30), "a run of v1.1.0", || {
        let fleet = hooked.fleet.clone();
        async move { fleet.runs().all().await.unwrap().into_iter().next() }
    })
    .await;
    assert_eq!(run.trigger, "upstream-tag");
    let note = run.trigger_note.clone().unwrap();
    assert!(
        note.starts_with(&format!("tag v1.1.0 of {upstream_url} (")),
        "{note}"
    );
    assert_eq!(run.spec.upstream.source.requested(), "v1.1.0");
    // Let a few more polls pass: the other tags start nothing, v1.1.0 nothing more.
    let fleet = hooked.fleet.clone();
    let url = upstream_url.clone();
    wait_until(
        Duration::from_secs(30),
        "the watcher to see every tag",
        || {
            let (fleet, url) = (fleet.clone(), url.clone());
            async move {
                let known = fleet
                    .store()
                    .triggers()
                    .known_upstream_tags(&url)
                    .await
                    .unwrap();
                (known.len() == 4).then_some(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hooked.runs().await.len(), 1);
    let _ = stop.send(());
    watcher.await.unwrap();
    hooked.stop().await;

    // After a restart the tags are still known: a poll runs nothing again.
    let hooked = Hooked::start(&data_dir, Some(milestone), None).await;
    let outcome = abfleet_coordinator::watcher::poll_upstream_once(&hooked.fleet)
        .await
        .unwrap();
    assert!(
        !outcome.baseline && outcome.triggered.is_empty(),
        "{outcome:?}"
    );
    assert_eq!(hooked.runs().await.len(), 1);
    hooked.stop().await;
}

/// The settings reach the coordinator from its config file: `milestone_spec` and
/// `webhook_secret_file` (relative to the file), `perf_label`, and `debounce_seconds = 0`,
/// under which two deliveries for one PR are two runs. A refused delivery is logged on the
/// coordinator's stderr with its delivery id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abfleet_coordinator_takes_the_trigger_settings_from_its_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let etc = tmp.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    write_milestone_spec(&etc);
    std::fs::write(etc.join("webhook-secret"), [SECRET, b"\n"].concat()).unwrap();
    let (grpc_port, http_port) = (support::free_port(), support::free_port());
    std::fs::write(
        etc.join("coordinator.toml"),
        format!(
            "[coordinator]\nlisten = \"127.0.0.1:{grpc_port}\"\nhttp = \"127.0.0.1:{http_port}\"\ndata_dir = \"store\"\nplaintext = true\nmilestone_spec = \"milestone.toml\"\nwebhook_secret_file = \"webhook-secret\"\ndebounce_seconds = 0.0\nperf_label = \"speed\"\n"
        ),
    )
    .unwrap();
    let checked = abfleet(
        tmp.path(),
        &[
            "config",
            "check",
            etc.join("coordinator.toml").to_str().unwrap(),
        ],
    );
    assert!(checked.status.success(), "{checked:?}");
    let log_path = tmp.path().join("coordinator.log");
    let _coordinator = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .current_dir(tmp.path())
            .args(["coordinator", "--config", "etc/coordinator.toml"])
            .env_remove("ABFLEET_TLS_CERT")
            .env_remove("ABFLEET_TLS_KEY")
            .env_remove("ABFLEET_TLS_CA")
            .env_remove("ABFLEET_LOG")
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let http: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
    let url = format!("http://127.0.0.1:{grpc_port}");
    let post = |event: &'static str, delivery: &'static str, body: Vec<u8>, signed: bool| {
        let mut headers = vec![
            ("X-GitHub-Event".to_string(), event.to_string()),
            ("X-GitHub-Delivery".to_string(), delivery.to_string()),
        ];
        if signed {
            headers.push(("X-Hub-Signature-256".to_string(), sign(SECRET, &body)));
        }
        tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while TcpStream::connect(http).is_err() {
                assert!(std::time::Instant::now() < deadline, "no http listener");
                std::thread::sleep(Duration::from_millis(100));
            }
            http_request(http, "POST", "/hooks/github", &headers, &body)
        })
    };

    // Unsigned: refused, and the warning names the delivery.
    let (status, refused) = post(
        "push",
        "config-refused-7f3a",
        fixture("push.tag.json"),
        false,
    )
    .await
    .unwrap();
    assert_eq!(status, 401, "{refused}");
    let log = wait_until(Duration::from_secs(10), "the refusal in the log", || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let found = log.lines().any(|line| {
            line.contains("webhook delivery refused") && line.contains("config-refused-7f3a")
        });
        std::future::ready(found.then_some(log))
    })
    .await;
    assert!(log.contains("WARN"), "{log}");
    assert!(log.contains("no X-Hub-Signature-256"), "{log}");

    // `perf_label = "speed"`: the default label is not it.
    let (status, ignored) = post(
        "pull_request",
        "config-0",
        fixture("pull_request.labeled.json"),
        true,
    )
    .await
    .unwrap();
    assert_eq!(status, 202, "{ignored}");
    assert!(
        ignored.contains("labelled `performance`, not `speed`"),
        "{ignored}"
    );
    let speed = || fixture_with("pull_request.labeled.json", "/label/name", "speed".into());
    let (status, first) = post("pull_request", "config-1", speed(), true)
        .await
        .unwrap();
    assert_eq!(status, 202, "{first}");
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Another labelling of the same PR (another body: the same body again is a replay).
    let relabelled = {
        let mut json: serde_json::Value = serde_json::from_slice(&speed()).unwrap();
        json["sender"]["login"] = "another-maintainer".into();
        serde_json::to_vec(&json).unwrap()
    };
    let (status, second) = post("pull_request", "config-2", relabelled, true)
        .await
        .unwrap();
    assert_eq!(status, 202, "{second}");
    assert_ne!(started_run_id(&first), started_run_id(&second));
    let listing =
        tokio::task::spawn_blocking(move || abfleet(tmp.path(), &["runs", "--coordinator", &url]))
            .await
            .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    assert_eq!(
        listing
            .matches("PR lusoris/vmaf#412 at 9a8b7c6d5e4f")
            .count(),
        2,
        "{listing}"
    );
}

/// `abfleet coordinator --watch-upstream-interval` as a process: the first poll records
/// upstream's tags; a new release runs with the pin moved; a backport of an older line
/// tagged after it, a release candidate, and two releases found in one poll (only the newer
/// runs) behave as docs/milestone.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_binary_watches_upstream_and_runs_only_newer_releases() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(&tmp.path().join("repos"));
    let milestone = SpecOptions::git(&repos).write(tmp.path(), "milestone.toml");
    let grpc_port = support::free_port();
    let _coordinator = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "coordinator",
                "--plaintext",
                "--listen",
                &format!("127.0.0.1:{grpc_port}"),
            ])
            .arg("--data-dir")
            .arg(tmp.path().join("data"))
            .arg("--milestone-spec")
            .arg(&milestone)
            .args(["--watch-upstream-interval", "0.2"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{grpc_port}");
    let client = control_at(&url).await;
    let notes = |client: abfleet_proto::pb::control_service_client::ControlServiceClient<
        tonic::transport::Channel,
    >| async move {
        let mut client = client;
        client
            .list_runs(abfleet_proto::pb::ListRunsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .runs
            .into_iter()
            .map(|r| (r.trigger, r.trigger_note))
            .collect::<Vec<_>>()
    };
    // Give the first poll time to record v1.0.0 (several intervals).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(notes(client.clone()).await.is_empty());

    git(
        &repos.upstream,
        &["commit", "--allow-empty", "-qm", "1.2.0"],
    );
    git(&repos.upstream, &["tag", "v1.2.0"]);
    let runs = wait_until(Duration::from_secs(30), "a run of v1.2.0", || {
        let client = client.clone();
        async move {
            let runs = notes(client).await;
            (!runs.is_empty()).then_some(runs)
        }
    })
    .await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].0, "upstream-tag");
    assert!(runs[0].1.starts_with("tag v1.2.0 of "), "{runs:?}");

    // A backport of the 1.0 line and a release candidate: recorded, not run.
    git(&repos.upstream, &["tag", "v1.0.5", "v1.0.0"]);
    git(&repos.upstream, &["tag", "v1.3.0-rc1"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(notes(client.clone()).await.len(), 1);

    // Two new releases at once: only the newer one runs.
    git(&repos.upstream, &["commit", "--allow-empty", "-qm", "1.4"]);
    git(&repos.upstream, &["tag", "v1.3.0"]);
    git(&repos.upstream, &["tag", "v1.4.0"]);
    wait_until(Duration::from_secs(30), "a run of v1.4.0", || {
        let client = client.clone();
        async move { (notes(client).await.len() > 1).then_some(()) }
    })
    .await;
    // A few more polls: v1.3.0 stays superseded.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let runs = notes(client.clone()).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs.iter()
            .any(|(_, note)| note.starts_with("tag v1.4.0 of ")),
        "{runs:?}"
    );
    assert!(
        !runs.iter().any(|(_, note)| note.contains("v1.3.0 ")),
        "{runs:?}"
    );
}

/// Issue 24: GitHub's own recorded deliveries (`@octokit/webhooks-examples`) of
/// Codertocat/Hello-World, posted to the endpoint as GitHub posts them, with the milestone
/// spec's upstream being that repository: the release starts a run with the pin moved to its
/// tag; a pre-release, a tag that is no release tag (created and pushed), a deleted tag and
/// a branch push start nothing and say why; the same tag created then pushed is one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_recorded_deliveries_start_the_runs_they_should_and_no_other() {
    use abfleet_testkit::{webhook_example, webhook_examples};
    let tmp = tempfile::tempdir().unwrap();
    let milestone = write_milestone_spec_at(
        tmp.path(),
        "https://github.com/Codertocat/Hello-World.git",
        "0.0.0",
    );
    let hooked = Hooked::start(&tmp.path().join("data"), Some(milestone), Some(SECRET)).await;
    let body = |value: &serde_json::Value| serde_json::to_vec(value).unwrap();

    let published = webhook_example("release", Some("published"));
    let run_id = hooked
        .deliver_starting_a_run("release", "rec-release", body(&published))
        .await;
    let runs = hooked.runs().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run_id.to_string(), run_id);
    assert_eq!(revs(&runs[0]), ("0.0.1".to_string(), FORK_PIN.to_string()));

    let pushes = webhook_examples("push");
    let tag_push = pushes
        .iter()
        .find(|p| p["ref"] == "refs/tags/simple-tag" && p["deleted"] == false)
        .unwrap();
    let deleted = pushes.iter().find(|p| p["deleted"] == true).unwrap();
    let branch = pushes
        .iter()
        .find(|p| p["ref"] == "refs/heads/master")
        .unwrap();
    for (event, delivery, payload, why) in [
        (
            "release",
            "rec-prerelease",
            webhook_example("release", Some("prereleased")),
            "action `prereleased`",
        ),
        (
            "create",
            "rec-create",
            webhook_example("create", None),
            "not a release tag",
        ),
        (
            "push",
            "rec-push-tag",
            tag_push.clone(),
            "not a release tag",
        ),
        ("push", "rec-push-deleted", deleted.clone(), "deleted"),
        ("push", "rec-push-branch", branch.clone(), "not a tag"),
    ] {
        let (status, reply) = hooked.deliver_signed(event, delivery, body(&payload)).await;
        assert_eq!(status, 202, "{event}: {reply}");
        assert!(
            reply.starts_with("ignored: ") && reply.contains(why),
            "{event}: {reply}"
        );
    }

    // A release tag created, then pushed: one run.
    let mut created = webhook_example("create", None);
    created["ref"] = "1.0.0".into();
    let by_create = hooked
        .deliver_starting_a_run("create", "rec-create-release", body(&created))
        .await;
    let mut pushed = tag_push.clone();
    pushed["ref"] = "refs/tags/1.0.0".into();
    let (status, reply) = hooked
        .deliver_signed("push", "rec-push-release", body(&pushed))
        .await;
    assert_eq!(status, 202, "{reply}");
    assert!(
        reply.contains(&by_create),
        "the push is the create's run: {reply}"
    );
    assert_eq!(hooked.runs().await.len(), 2);
    hooked.stop().await;
}
