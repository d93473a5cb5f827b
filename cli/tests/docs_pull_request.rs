//! `abfleet docs pull-request` (docs/milestone.md): a run's docs pushed to a real bare git
//! repository standing for the fork, and one pull request opened on a local double of
//! GitHub's REST API that checks every request against GitHub's published description
//! (`abfleet-testkit`). Twice the same run: nothing pushed, no second pull request; a newer
//! run: its section added on the same branch and the same pull request updated.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use abfleet_core::report::Report;
use abfleet_testkit::GitHubApiDouble;
use support::*;

/// A real `abfleet local` run of the subject; its report.json.
fn local_run(dir: &Path, name: &str, trigger: &str) -> std::path::PathBuf {
    let spec = SpecOptions::path().write(dir, &format!("{name}.toml"));
    let out = dir.join(name);
    let output = abfleet(
        dir,
        &[
            "local",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--data-dir",
            dir.join("data").to_str().unwrap(),
            "--work-dir",
            dir.join("agent").to_str().unwrap(),
            "--trigger",
            trigger,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    out.join("report.json")
}

fn run_id_of(report: &Path) -> String {
    Report::from_json(&std::fs::read_to_string(report).unwrap())
        .unwrap()
        .run_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_runs_docs_land_as_one_pull_request_that_a_newer_run_updates() {
    let double = GitHubApiDouble::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let remote = tmp.path().join("fork.git");
    git(
        tmp.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(
        &repos.fork,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            "HEAD:refs/heads/main",
        ],
    );
    let token = tmp.path().join("github-token");
    std::fs::write(&token, "github_pat_docs\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let first = local_run(tmp.path(), "first", "release");
    let api = double.url();
    let docs_pr = |report: &Path| {
        abfleet(
            tmp.path(),
            &[
                "docs",
                "pull-request",
                "--report",
                report.to_str().unwrap(),
                "--remote",
                remote.to_str().unwrap(),
                "--github",
                "Codertocat/Hello-World",
                "--github-token-file",
                token.to_str().unwrap(),
                "--api-url",
                &api,
            ],
        )
    };
    let branch_head = || git(&remote, &["rev-parse", "refs/heads/abfleet/docs-test"]);
    let page = |file: &str| {
        git(
            &remote,
            &["show", &format!("abfleet/docs-test:docs/{file}")],
        )
    };

    let opened = docs_pr(&first);
    let text = output_text(&opened);
    assert!(opened.status.success(), "{text}");
    assert!(
        text.contains("pull request #") && text.contains(" opened: "),
        "{text}"
    );
    let after_first = branch_head();
    let first_id = run_id_of(&first);
    assert!(page("benchmarks.md").contains(&format!("<!-- abfleet:run {first_id} begin -->")));
    let pulls = double.pull_requests("Codertocat", "Hello-World");
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!(
        (pulls[0].head_ref.as_str(), pulls[0].base_ref.as_str()),
        ("abfleet/docs-test", "main")
    );
    assert!(
        pulls[0].title.starts_with("docs: test benchmarks"),
        "{}",
        pulls[0].title
    );
    assert!(pulls[0].body.as_deref().unwrap().contains(&first_id));
    assert_eq!(
        double.issue_labels("Codertocat", "Hello-World", pulls[0].number),
        ["benchmarks"]
    );

    // The same run again: nothing pushed, no second pull request.
    let again = docs_pr(&first);
    let text = output_text(&again);
    assert!(again.status.success(), "{text}");
    assert!(
        text.contains("nothing pushed") && text.contains(" updated: "),
        "{text}"
    );
    assert_eq!(branch_head(), after_first);
    assert_eq!(double.requests_to("pulls/create").len(), 1);

    // A newer run: its section joins the first on the same branch and pull request.
    let second = local_run(tmp.path(), "second", "manual");
    let updated = docs_pr(&second);
    assert!(updated.status.success(), "{}", output_text(&updated));
    assert_ne!(branch_head(), after_first);
    let benchmarks = page("benchmarks.md");
    for id in [&first_id, &run_id_of(&second)] {
        assert!(
            benchmarks.contains(&format!("<!-- abfleet:run {id} begin -->")),
            "{benchmarks}"
        );
    }
    assert_eq!(double.pull_requests("Codertocat", "Hello-World").len(), 1);
    assert_eq!(double.requests_to("pulls/create").len(), 1);
    assert!(!double.requests_to("pulls/update").is_empty());

    // A PR's run answers on its PR, not in the docs.
    let mut pr_run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    pr_run["trigger"] = "performance-pr".into();
    let pr_report = tmp.path().join("pr-report.json");
    std::fs::write(&pr_report, pr_run.to_string()).unwrap();
    let refused = docs_pr(&pr_report);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("triggered by `performance-pr`"), "{text}");

    double.assert_every_request_valid();
}
