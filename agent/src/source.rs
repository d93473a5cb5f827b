//! Getting a side's source tree: a git repository fetched into a mirror cache in the work
//! dir and checked out at the exact commit (with the real `git` CLI), or a local directory
//! copied and content-hashed. Either way the result is a tree of our own to build in, and
//! an exact identity (commit or content hash) for the build cache and the report.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use abfleet_core::spec::SourceSpec;
use sha2::{Digest, Sha256};

/// A source whose identity is fixed.
#[derive(Debug, Clone)]
pub struct ResolvedSource {
    /// The commit hash (git) or `sha256:` content hash (path).
    pub resolved: String,
    kind: Resolved,
}

#[derive(Debug, Clone)]
enum Resolved {
    Git { mirror: PathBuf, commit: String },
    Path { root: PathBuf, files: Vec<PathBuf> },
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("`{command}` failed in `{dir}`: {output}")]
    Git {
        command: String,
        dir: String,
        output: String,
    },
    #[error("revision `{rev}` does not exist in {url}; check [side] rev (a tag, branch or commit that the repository has)")]
    UnknownRev { url: String, rev: String },
    #[error("source directory `{path}` does not exist on host `{host}`; check the spec's path, which resolves against the spec's directory")]
    MissingPath { path: PathBuf, host: String },
    #[error("failed to {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SourceError {
    let what = what.into();
    move |source| SourceError::Io { what, source }
}

/// Runs git with arguments; stdout on success.
fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, SourceError> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    command
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true");
    let output = command
        .output()
        .map_err(io("run `git` (is git installed?)"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(SourceError::Git {
            command: format!("git {}", args.join(" ")),
            dir: dir.map_or(".".into(), |d| d.display().to_string()),
            output: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Fixes the identity of a source; fetches git sources into `cache_dir`.
pub fn resolve(
    spec: &SourceSpec,
    cache_dir: &Path,
    host: &str,
) -> Result<ResolvedSource, SourceError> {
    match spec {
        SourceSpec::Git { url, rev } => resolve_git(url, rev, cache_dir),
        SourceSpec::Path { path } => resolve_path(path, host),
    }
}

fn resolve_git(url: &str, rev: &str, cache_dir: &Path) -> Result<ResolvedSource, SourceError> {
    std::fs::create_dir_all(cache_dir).map_err(io(format!("create `{}`", cache_dir.display())))?;
    let key = hex(&Sha256::digest(url.as_bytes()))[..16].to_string();
    let mirror = cache_dir.join(format!("{key}.git"));
    if mirror.join("HEAD").exists() {
        git(Some(&mirror), &["remote", "update", "--prune"])?;
    } else {
        let partial = cache_dir.join(format!("{key}.git.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        git(
            None,
            &[
                "clone",
                "--quiet",
                "--mirror",
                "--",
                url,
                &partial.display().to_string(),
            ],
        )?;
        std::fs::rename(&partial, &mirror).map_err(io("move the fresh mirror into place"))?;
    }
    let commit = git(
        Some(&mirror),
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .map_err(|_| SourceError::UnknownRev {
        url: url.to_string(),
        rev: rev.to_string(),
    })?;
    // The commit goes to `git checkout` as an argument: it must be the hash rev-parse printed.
    if commit.is_empty() || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(SourceError::UnknownRev {
            url: url.to_string(),
            rev: rev.to_string(),
        });
    }
    Ok(ResolvedSource {
        resolved: commit.clone(),
        kind: Resolved::Git { mirror, commit },
    })
}

fn resolve_path(path: &Path, host: &str) -> Result<ResolvedSource, SourceError> {
    if !path.is_dir() {
        return Err(SourceError::MissingPath {
            path: path.to_path_buf(),
            host: host.to_string(),
        });
    }
    let files = list_files(path)?;
    let mut hasher = Sha256::new();
    for relative in &files {
        let full = path.join(relative);
        let metadata =
            std::fs::symlink_metadata(&full).map_err(io(format!("stat `{}`", full.display())))?;
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        use std::os::unix::fs::PermissionsExt;
        hasher.update(
            (metadata.permissions().mode() & 0o111 != 0)
                .to_string()
                .as_bytes(),
        );
        let mut file =
            std::fs::File::open(&full).map_err(io(format!("read `{}`", full.display())))?;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(io(format!("read `{}`", full.display())))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
        hasher.update([0]);
    }
    Ok(ResolvedSource {
        resolved: format!("sha256:{}", hex(&hasher.finalize())),
        kind: Resolved::Path {
            root: path.to_path_buf(),
            files,
        },
    })
}

/// The files of a directory tree: git's view (tracked and untracked, ignored files left
/// out) when it is inside a work tree, else every regular file except `.git`.
fn list_files(root: &Path) -> Result<Vec<PathBuf>, SourceError> {
    if let Ok(listing) = git(
        Some(root),
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            ".",
        ],
    ) {
        let mut files: Vec<PathBuf> = listing
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(PathBuf::from)
            .filter(|f| root.join(f).is_file())
            .collect();
        files.sort();
        files.dedup();
        return Ok(files);
    }
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        let dir = root.join(&relative);
        for entry in std::fs::read_dir(&dir).map_err(io(format!("list `{}`", dir.display())))? {
            let entry = entry.map_err(io(format!("list `{}`", dir.display())))?;
            let name = entry.file_name();
            if name == ".git" {
                continue;
            }
            let file_type = entry.file_type().map_err(io("stat a source file"))?;
            let child = relative.join(&name);
            if file_type.is_dir() {
                stack.push(child);
            } else if file_type.is_file() {
                files.push(child);
            }
        }
    }
    files.sort();
    Ok(files)
}

impl ResolvedSource {
    /// Materialises the tree at `dest` (which must not exist yet).
    pub fn checkout(&self, dest: &Path) -> Result<(), SourceError> {
        match &self.kind {
            Resolved::Git { mirror, commit } => {
                let dest_text = dest.display().to_string();
                git(
                    None,
                    &[
                        "clone",
                        "--quiet",
                        "--shared",
                        "--no-checkout",
                        "--",
                        &mirror.display().to_string(),
                        &dest_text,
                    ],
                )?;
                git(Some(dest), &["checkout", "--quiet", "--detach", commit])?;
                Ok(())
            }
            Resolved::Path { root, files } => {
                for relative in files {
                    let target = dest.join(relative);
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(io(format!("create `{}`", parent.display())))?;
                    }
                    std::fs::copy(root.join(relative), &target)
                        .map_err(io(format!("copy `{}`", root.join(relative).display())))?;
                }
                Ok(())
            }
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    fn repo_with_tag(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        sh(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one").unwrap();
        sh(dir, &["add", "."]);
        sh(dir, &["commit", "-q", "-m", "one"]);
        sh(dir, &["tag", "v1.0.0"]);
        std::fs::write(dir.join("a.txt"), "two").unwrap();
        sh(dir, &["commit", "-q", "-am", "two"]);
    }

    #[test]
    fn a_tag_resolves_to_its_commit_and_checks_out_that_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_tag(&repo);
        let spec = SourceSpec::Git {
            url: repo.display().to_string(),
            rev: "v1.0.0".into(),
        };
        let resolved = resolve(&spec, &tmp.path().join("cache"), "h").unwrap();
        let expected = git(Some(&repo), &["rev-parse", "v1.0.0^{commit}"]).unwrap();
        assert_eq!(resolved.resolved, expected);
        let dest = tmp.path().join("src");
        resolved.checkout(&dest).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a.txt")).unwrap(), "one");
        // A second resolve fetches into the existing mirror and sees new commits.
        let head = SourceSpec::Git {
            url: repo.display().to_string(),
            rev: "main".into(),
        };
        let again = resolve(&head, &tmp.path().join("cache"), "h").unwrap();
        assert_ne!(again.resolved, expected);
    }

    #[test]
    fn an_unknown_rev_says_which_and_where() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_tag(&repo);
        let spec = SourceSpec::Git {
            url: repo.display().to_string(),
            rev: "v9.9.9".into(),
        };
        let err = resolve(&spec, &tmp.path().join("cache"), "h")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`v9.9.9` does not exist"), "{err}");
    }

    #[test]
    fn a_path_source_hash_follows_its_content_and_skips_ignored_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/x.c"), "int x;").unwrap();
        let first = resolve(&SourceSpec::Path { path: root.clone() }, tmp.path(), "h").unwrap();
        let same = resolve(&SourceSpec::Path { path: root.clone() }, tmp.path(), "h").unwrap();
        assert_eq!(first.resolved, same.resolved);
        std::fs::write(root.join("sub/x.c"), "int y;").unwrap();
        let changed = resolve(&SourceSpec::Path { path: root.clone() }, tmp.path(), "h").unwrap();
        assert_ne!(first.resolved, changed.resolved);
        let dest = tmp.path().join("copy");
        changed.checkout(&dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("sub/x.c")).unwrap(),
            "int y;"
        );
        let missing = resolve(
            &SourceSpec::Path {
                path: tmp.path().join("nope"),
            },
            tmp.path(),
            "bench-7",
        )
        .unwrap_err()
        .to_string();
        assert!(
            missing.contains("bench-7") && missing.contains("nope"),
            "{missing}"
        );
    }
}
