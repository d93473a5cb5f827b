//! `abfleet docs pull-request`: a run's docs land on the fork as a pull request. A fresh
//! clone of `--remote` (with the operator's own git credentials) gets the run's section in
//! docs/benchmarks.md and its rows in docs/state.md (`abfleet_render::docs`, the same as `docs
//! update`) on the branch `abfleet/docs-SPEC`, pushed back; then one pull request from that
//! branch into `--base` is found or opened on GitHub and labelled. The branch grows while
//! its pull request is open (a newer run adds its section beside the earlier one's), and
//! starts again from `--base` once it was merged or closed. A run already on the branch
//! changes nothing: no commit, no push, no second pull request.

use std::path::{Path, PathBuf};
use std::process::Command;

use abfleet_coordinator::outbound::github::{GitHub, Repo, Token};
use abfleet_core::report::Report;
use abfleet_render::docs;
use abfleet_render::pull_request::{pr_verdict, render_pr_comment};

use crate::cli::DocsPullRequestArgs;
use crate::failure::{Classify, Failure};

/// The triggers whose runs document the fork (a PR's or a bisect's runs answer elsewhere).
const DOCUMENTED_TRIGGERS: [&str; 3] = ["release", "upstream-tag", "manual"];

pub async fn run(args: DocsPullRequestArgs) -> Result<i32, Failure> {
    let report = super::docs::load_report(&args.run, &args.source).await?;
    if !DOCUMENTED_TRIGGERS.contains(&report.trigger.as_str()) {
        return Err(Failure::usage(anyhow::anyhow!(
            "run {} was triggered by `{}`; the fork's docs take release, upstream-tag and manual runs (a PR's run answers on its PR)",
            report.run_id,
            report.trigger
        )));
    }
    if !matches!(report.status.as_str(), "done" | "failed") {
        return Err(Failure::usage(anyhow::anyhow!(
            "run {} is `{}`; only a finished run's results go into the docs",
            report.run_id,
            report.status
        )));
    }
    for path in [&args.benchmarks_path, &args.state_path] {
        if path.is_absolute() || path.components().any(|c| c.as_os_str() == "..") {
            return Err(Failure::usage(anyhow::anyhow!(
                "`{}` must be a path inside the repository (e.g. docs/benchmarks.md)",
                path.display()
            )));
        }
    }
    let repo = Repo::parse(&args.github)
        .map_err(|err| anyhow::anyhow!("--github: {err}"))
        .usage()?;
    let token = Token::from_file(&args.github_token_file)
        .map_err(|err| anyhow::anyhow!("--github-token-file: {err}"))
        .usage()?;
    let github = GitHub::new(&args.api_url, token, vec![repo.full_name()], None)
        .map_err(|err| anyhow::anyhow!("--api-url: {err}"))
        .usage()?;
    let branch = args
        .branch
        .clone()
        .unwrap_or_else(|| format!("abfleet/docs-{}", slug(&report.name)));
    let open = github
        .open_pull_request(&repo, &branch, &args.base)
        .await
        .infra()?;

    let clone = tempfile::tempdir().infra()?;
    let pushed = {
        let args = DocsBranch {
            remote: args.remote.clone(),
            base: args.base.clone(),
            branch: branch.clone(),
            continue_branch: open.is_some(),
            benchmarks_path: args.benchmarks_path.clone(),
            state_path: args.state_path.clone(),
            dir: clone.path().to_path_buf(),
        };
        let report = report.clone();
        tokio::task::spawn_blocking(move || write_docs_branch(&args, &report))
            .await
            .infra()??
    };

    if matches!(pushed, BranchOutcome::InBase) {
        println!(
            "{} already has run {}'s docs: no pull request needed",
            args.base, report.run_id
        );
        return Ok(0);
    }
    let (_, verdict) = pr_verdict(&report);
    let title = format!(
        "docs: {} benchmarks, fork {} vs upstream {}",
        report.name,
        report
            .fork
            .resolved
            .as_deref()
            .unwrap_or(&report.fork_ref)
            .chars()
            .take(12)
            .collect::<String>(),
        report.upstream_ref
    );
    let table = render_pr_comment(&report, None);
    let body = format!(
        "The results of run `{}` ({}{}) written into `{}` and `{}` by `abfleet docs pull-request`.\n\n{verdict}\n\n{}",
        report.run_id,
        report.trigger,
        report
            .trigger_note
            .as_deref()
            .map_or(String::new(), |note| format!(": {note}")),
        args.benchmarks_path.display(),
        args.state_path.display(),
        table.split_once('\n').map_or(table.as_str(), |(_, rest)| rest)
    );
    let pull = github
        .upsert_pull_request(&repo, &branch, &args.base, &title, &body, &args.labels)
        .await
        .infra()?;
    println!(
        "branch {branch}: {}",
        match &pushed {
            BranchOutcome::Pushed(commit) => format!("pushed {}", &commit[..commit.len().min(12)]),
            _ => "already has this run's docs (nothing pushed)".to_string(),
        }
    );
    println!(
        "pull request #{} {}: {}",
        pull.number,
        if pull.created { "opened" } else { "updated" },
        pull.html_url
    );
    Ok(0)
}

/// What the docs branch is made from.
struct DocsBranch {
    remote: String,
    base: String,
    branch: String,
    /// Its pull request is open: the branch goes on from where it is.
    continue_branch: bool,
    benchmarks_path: PathBuf,
    state_path: PathBuf,
    dir: PathBuf,
}

/// Clones, writes the run's docs on the branch and pushes it.
fn write_docs_branch(args: &DocsBranch, report: &Report) -> Result<BranchOutcome, Failure> {
    let dir = args.dir.as_path();
    git(
        Path::new("."),
        &[
            "clone",
            "--quiet",
            "--no-tags",
            &args.remote,
            &dir.display().to_string(),
        ],
    )
    .map_err(|err| anyhow::anyhow!("cloning --remote {}: {err}", args.remote))
    .usage()?;
    git(dir, &["check-ref-format", "--branch", &args.branch])
        .map_err(|_| anyhow::anyhow!("`{}` is not a valid branch name", args.branch))
        .usage()?;
    let remote_branch = format!("origin/{}", args.branch);
    let had_branch = git(dir, &["rev-parse", "--verify", "--quiet", &remote_branch]).ok();
    let start = match (&had_branch, args.continue_branch) {
        (Some(_), true) => remote_branch.clone(),
        _ => format!("origin/{}", args.base),
    };
    git(dir, &["checkout", "--quiet", "-B", &args.branch, &start])
        .map_err(|err| {
            anyhow::anyhow!(
                "the fork has no branch `{}` to start from ({err}); give --base",
                start.trim_start_matches("origin/")
            )
        })
        .usage()?;
    for (path, update) in [
        (
            &args.benchmarks_path,
            docs::update_benchmarks as fn(&str, &Report) -> String,
        ),
        (&args.state_path, docs::update_state),
    ] {
        let file = dir.join(path);
        let page = std::fs::read_to_string(&file).unwrap_or_default();
        let updated = update(&page, report);
        if updated != page {
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).infra()?;
            }
            std::fs::write(&file, updated).infra()?;
        }
    }
    // A page the run has nothing for (no unexplained delta: no state.md rows) may not exist.
    let pages: Vec<String> = [&args.benchmarks_path, &args.state_path]
        .into_iter()
        .filter(|path| dir.join(path).exists())
        .map(|path| path.display().to_string())
        .collect();
    let mut add = vec!["add", "--"];
    add.extend(pages.iter().map(String::as_str));
    git(dir, &add).infra()?;
    if git(dir, &["diff", "--cached", "--quiet"]).is_ok() {
        // Nothing new: the open branch already has this run's docs, or the base does.
        return Ok(if start == remote_branch {
            BranchOutcome::Unchanged
        } else {
            BranchOutcome::InBase
        });
    }
    let mut commit = Vec::new();
    if git(dir, &["config", "user.email"]).is_err() {
        commit.extend([
            "-c",
            "user.name=abfleet",
            "-c",
            "user.email=abfleet@localhost",
        ]);
    }
    let message = format!(
        "docs: {} benchmarks from run {} ({})",
        report.name, report.run_id, report.trigger
    );
    commit.extend(["commit", "--quiet", "-m", &message]);
    git(dir, &commit).infra()?;
    // A branch that starts again from the base replaces the old one only if nobody moved it.
    let lease = format!(
        "--force-with-lease=refs/heads/{}:{}",
        args.branch,
        had_branch.as_deref().unwrap_or("")
    );
    git(
        dir,
        &[
            "push",
            "--quiet",
            &lease,
            "origin",
            &format!("HEAD:refs/heads/{}", args.branch),
        ],
    )
    .map_err(|err| anyhow::anyhow!("pushing the branch {} to --remote: {err}", args.branch))
    .infra()?;
    Ok(BranchOutcome::Pushed(
        git(dir, &["rev-parse", "HEAD"]).infra()?,
    ))
}

/// What the docs branch needed.
enum BranchOutcome {
    /// A commit with the run's docs, pushed.
    Pushed(String),
    /// The open pull request's branch has them already.
    Unchanged,
    /// The base branch has them already (an earlier pull request was merged): no pull
    /// request is needed.
    InBase,
}

/// Runs git in `dir`; its trimmed stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, anyhow::Error> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|err| anyhow::anyhow!("git {}: {err}", args.join(" ")))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(anyhow::anyhow!(
            "git {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// A spec name as a branch name's last part.
fn slug(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-').to_string();
    if slug.is_empty() {
        "run".to_string()
    } else {
        slug
    }
}
