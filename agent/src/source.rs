//! Getting a side's source tree: a git repository fetched into a mirror cache in the work
//! dir and checked out at the exact commit (with the real `git` CLI), or a local directory
//! copied and content-hashed. Either way the result is a tree of our own to build in, and
//! an exact identity (commit or content hash) for the build cache and the report.
//!
//! A mirror can be damaged (a pack torn by a full disk or a crash): every later fetch or
//! checkout from it would fail the same way. So when a fetch, a rev lookup or a checkout
//! from the mirror fails, the mirror is checked (`git fsck`: only then, never on the fast
//! path), and a damaged one is deleted and cloned again, once, with a warning.

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
    Git {
        url: String,
        mirror: PathBuf,
        commit: String,
    },
    Path {
        root: PathBuf,
        files: Vec<PathBuf>,
    },
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
    // In a process group of its own: git's helpers (index-pack, remote-https) die with it.
    let output =
        crate::runner::output(&mut command).map_err(io("run `git` (is git installed?)"))?;
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

/// Whether `rev` names one commit for good: a full SHA-1 (40) or SHA-256 (64) hex object
/// name, which no push can move.
fn is_full_commit(rev: &str) -> bool {
    matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit `rev` names in `mirror`, or `None` when the mirror does not know it.
fn commit_in(mirror: &Path, rev: &str) -> Option<String> {
    git(
        Some(mirror),
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .ok()
}

fn resolve_git(url: &str, rev: &str, cache_dir: &Path) -> Result<ResolvedSource, SourceError> {
    std::fs::create_dir_all(cache_dir).map_err(io(format!("create `{}`", cache_dir.display())))?;
    let key = hex(&Sha256::digest(url.as_bytes()))[..16].to_string();
    let mirror = cache_dir.join(format!("{key}.git"));
    let resolved = match fetch_into_mirror(url, rev, &mirror) {
        Err(err) if mirror_is_damaged(&mirror) => {
            repair_mirror(url, &mirror, &err)?;
            fetch_into_mirror(url, rev, &mirror)?
        }
        other => other?,
    };
    let commit = resolved.ok_or_else(|| SourceError::UnknownRev {
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
        kind: Resolved::Git {
            url: url.to_string(),
            mirror,
            commit,
        },
    })
}

/// Brings `mirror` up to date for `rev` (cloning it when there is none) and returns the
/// commit `rev` names there, `None` when it names none. An unknown rev in a mirror that is
/// not damaged is the spec's error, not the mirror's: it is returned as `Ok(None)`, and a
/// damaged mirror as an error.
fn fetch_into_mirror(url: &str, rev: &str, mirror: &Path) -> Result<Option<String>, SourceError> {
    if mirror.join("HEAD").exists() {
        // A full commit hash the mirror already holds cannot have moved: no fetch (one git
        // process, no network). Tags and branches can move, so they are always fetched.
        if is_full_commit(rev) {
            if let Some(commit) = commit_in(mirror, rev).filter(|c| c.eq_ignore_ascii_case(rev)) {
                tracing::info!(url, rev, "the mirror already holds the commit; not fetched");
                return Ok(Some(commit));
            }
        }
        git(Some(mirror), &["remote", "update", "--prune"])?;
    } else {
        clone_mirror(url, mirror)?;
    }
    match commit_in(mirror, rev) {
        Some(commit) => Ok(Some(commit)),
        None if mirror_is_damaged(mirror) => Err(SourceError::Git {
            command: format!("git rev-parse {rev}"),
            dir: mirror.display().to_string(),
            output: "the mirror is damaged (`git fsck` fails)".into(),
        }),
        None => Ok(None),
    }
}

/// Clones `url` as a mirror into `mirror`, through a `.partial` directory.
fn clone_mirror(url: &str, mirror: &Path) -> Result<(), SourceError> {
    let partial = mirror.with_extension("git.partial");
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
    std::fs::rename(&partial, mirror).map_err(io("move the fresh mirror into place"))
}

/// Whether the mirror exists and `git fsck` finds it damaged (an object missing or
/// unreadable, a pack cut short or overwritten). Run only after something failed: on a
/// large repository it reads every object.
fn mirror_is_damaged(mirror: &Path) -> bool {
    mirror.join("HEAD").exists()
        && git(
            Some(mirror),
            &["fsck", "--no-progress", "--no-dangling", "--full"],
        )
        .is_err()
}

/// Deletes a damaged mirror and clones it again.
fn repair_mirror(url: &str, mirror: &Path, failure: &SourceError) -> Result<(), SourceError> {
    tracing::warn!(url, mirror = %mirror.display(), error = %failure, "the git mirror is damaged; deleting it and cloning again");
    std::fs::remove_dir_all(mirror).map_err(io(format!(
        "remove the damaged mirror `{}`",
        mirror.display()
    )))?;
    clone_mirror(url, mirror)
}

fn resolve_path(path: &Path, host: &str) -> Result<ResolvedSource, SourceError> {
    if !path.is_dir() {
        return Err(SourceError::MissingPath {
            path: path.to_path_buf(),
            host: host.to_string(),
        });
    }
    let files = list_files(path)?;
    let stamps = stamps(path, &files)?;
    if let Some(resolved) = TREE_HASHES.lookup(path, &stamps) {
        return Ok(ResolvedSource {
            resolved,
            kind: Resolved::Path {
                root: path.to_path_buf(),
                files,
            },
        });
    }
    let mut hasher = Sha256::new();
    for (relative, stamp) in files.iter().zip(&stamps) {
        let full = path.join(relative);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((stamp.mode & 0o111 != 0).to_string().as_bytes());
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
    let resolved = format!("sha256:{}", hex(&hasher.finalize()));
    TREE_HASHES.remember(path, stamps, &resolved);
    Ok(ResolvedSource {
        resolved,
        kind: Resolved::Path {
            root: path.to_path_buf(),
            files,
        },
    })
}

/// What a file's content hash depends on, as `stat` tells it: a file whose stamp is the same
/// has the same bytes. The change time is in it, and nothing (not `touch`) can set that back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    relative: PathBuf,
    len: u64,
    inode: u64,
    mode: u32,
    /// The file is a symbolic link (its stamp is the link's, its hash the target's).
    symlink: bool,
    modified_ns: i128,
    changed_ns: i128,
}

/// A file changed this recently may change again within the same clock tick, unseen by its
/// stamp: a tree with one is hashed every time ("racy" files, as git calls them).
const RACY_WITHIN_NS: i128 = 2_000_000_000;

fn stamps(root: &Path, files: &[PathBuf]) -> Result<Vec<FileStamp>, SourceError> {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|relative| {
            let full = root.join(relative);
            let meta = std::fs::symlink_metadata(&full)
                .map_err(io(format!("stat `{}`", full.display())))?;
            Ok(FileStamp {
                relative: relative.clone(),
                len: meta.len(),
                inode: meta.ino(),
                mode: meta.mode(),
                symlink: meta.file_type().is_symlink(),
                modified_ns: i128::from(meta.mtime()) * 1_000_000_000
                    + i128::from(meta.mtime_nsec()),
                changed_ns: i128::from(meta.ctime()) * 1_000_000_000
                    + i128::from(meta.ctime_nsec()),
            })
        })
        .collect()
}

/// Path sources' tree hashes computed in this process, by root: reused while every file's
/// stamp is unchanged (same files, same lengths, inodes, modes, modification and change
/// times), so a second job on the same tree (or the other side of a spec that builds both
/// from one directory) stats the files instead of reading them.
struct TreeHashes(std::sync::Mutex<std::collections::HashMap<PathBuf, (Vec<FileStamp>, String)>>);

static TREE_HASHES: std::sync::LazyLock<TreeHashes> =
    std::sync::LazyLock::new(|| TreeHashes(std::sync::Mutex::default()));

impl TreeHashes {
    fn lookup(&self, root: &Path, stamps: &[FileStamp]) -> Option<String> {
        let cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (known, resolved) = cache.get(root)?;
        (known.as_slice() == stamps).then(|| resolved.clone())
    }

    /// Keeps a tree's hash unless one of its files changed within the last two seconds.
    fn remember(&self, root: &Path, stamps: Vec<FileStamp>, resolved: &str) {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        self.remember_at(root, stamps, resolved, now_ns);
    }

    /// [`TreeHashes::remember`] at `now_ns`. A tree with a symbolic link is never kept: the
    /// hash reads the file the link points to, the stamp is the link's own, so a change of
    /// the target would go unseen.
    fn remember_at(&self, root: &Path, stamps: Vec<FileStamp>, resolved: &str, now_ns: i128) {
        let unsure = stamps
            .iter()
            .any(|s| s.symlink || now_ns - s.modified_ns.max(s.changed_ns) < RACY_WITHIN_NS);
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if unsure {
            cache.remove(root);
        } else {
            cache.insert(root.to_path_buf(), (stamps, resolved.to_string()));
        }
    }
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
    /// The git mirror this source was fetched into (a cache entry); `None` for a path source.
    pub fn mirror(&self) -> Option<&Path> {
        match &self.kind {
            Resolved::Git { mirror, .. } => Some(mirror),
            Resolved::Path { .. } => None,
        }
    }

    /// Materialises the tree at `dest` (which must not exist yet).
    pub fn checkout(&self, dest: &Path) -> Result<(), SourceError> {
        match &self.kind {
            Resolved::Git {
                url,
                mirror,
                commit,
            } => match checkout_commit(mirror, commit, dest) {
                Err(err) if mirror_is_damaged(mirror) => {
                    repair_mirror(url, mirror, &err)?;
                    let _ = std::fs::remove_dir_all(dest);
                    checkout_commit(mirror, commit, dest)
                }
                other => other,
            },
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

/// A work tree of `commit` at `dest`, sharing the mirror's objects.
fn checkout_commit(mirror: &Path, commit: &str, dest: &Path) -> Result<(), SourceError> {
    git(
        None,
        &[
            "clone",
            "--quiet",
            "--shared",
            "--no-checkout",
            "--",
            &mirror.display().to_string(),
            &dest.display().to_string(),
        ],
    )?;
    git(Some(dest), &["checkout", "--quiet", "--detach", commit])?;
    Ok(())
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

    /// Issue 15: a warm rerun fetched into the mirror even when the rev was a full commit
    /// the mirror already held.
    #[test]
    fn a_full_commit_already_in_the_mirror_is_not_fetched_again() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_tag(&repo);
        let cache = tmp.path().join("cache");
        let tagged = git(Some(&repo), &["rev-parse", "v1.0.0^{commit}"]).unwrap();
        let pinned = |rev: &str| SourceSpec::Git {
            url: repo.display().to_string(),
            rev: rev.to_string(),
        };
        assert_eq!(
            resolve(&pinned(&tagged), &cache, "h").unwrap().resolved,
            tagged
        );
        // A commit made after the mirror was cloned: a fetch would bring it.
        std::fs::write(repo.join("a.txt"), "three").unwrap();
        sh(&repo, &["commit", "-q", "-am", "three"]);
        let head = git(Some(&repo), &["rev-parse", "HEAD"]).unwrap();
        let mirror_has = |commit: &str| {
            let mirror = std::fs::read_dir(&cache)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            commit_in(&mirror, commit).is_some()
        };
        let again = resolve(&pinned(&tagged), &cache, "h").unwrap();
        assert_eq!(again.resolved, tagged);
        assert!(
            !mirror_has(&head),
            "a pinned commit in the mirror must not fetch"
        );
        // A branch can move: it is fetched. So is a full commit the mirror lacks.
        let moved = resolve(&pinned("main"), &cache, "h").unwrap();
        assert_eq!(moved.resolved, head);
        std::fs::write(repo.join("a.txt"), "four").unwrap();
        sh(&repo, &["commit", "-q", "-am", "four"]);
        let newest = git(Some(&repo), &["rev-parse", "HEAD"]).unwrap();
        assert_eq!(
            resolve(&pinned(&newest), &cache, "h").unwrap().resolved,
            newest
        );
        assert!(
            is_full_commit(&newest) && !is_full_commit("v1.0.0") && !is_full_commit(&newest[..12])
        );
    }

    /// A path tree's hash is reused while no file's stamp changed, and recomputed when one did.
    #[test]
    fn a_path_tree_hash_is_reused_until_a_file_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("x.c"), "int x;").unwrap();
        std::fs::write(root.join("y.c"), "int y;").unwrap();
        let spec = SourceSpec::Path { path: root.clone() };
        // Freshly written files are "racy": hashed every time, never remembered.
        let fresh = resolve(&spec, tmp.path(), "h").unwrap();
        let listed = |root: &Path| stamps(root, &list_files(root).unwrap()).unwrap();
        assert_eq!(TREE_HASHES.lookup(&root, &listed(&root)), None);
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let settled = resolve(&spec, tmp.path(), "h").unwrap();
        assert_eq!(settled.resolved, fresh.resolved);
        assert_eq!(
            TREE_HASHES.lookup(&root, &listed(&root)),
            Some(fresh.resolved.clone()),
            "a settled tree is remembered"
        );
        assert_eq!(
            resolve(&spec, tmp.path(), "h").unwrap().resolved,
            fresh.resolved
        );
        // Same length, new content: its change time differs, so it is hashed again.
        std::fs::write(root.join("y.c"), "int z;").unwrap();
        assert_eq!(TREE_HASHES.lookup(&root, &listed(&root)), None);
        let changed = resolve(&spec, tmp.path(), "h").unwrap();
        assert_ne!(changed.resolved, fresh.resolved);
        std::fs::rename(root.join("x.c"), root.join("w.c")).unwrap();
        assert_ne!(
            resolve(&spec, tmp.path(), "h").unwrap().resolved,
            changed.resolved
        );
    }

    /// A symbolic link in a path tree that is a git work tree is listed and hashed through
    /// (its target's bytes), but its stamp is the link's own: such a tree is never
    /// remembered, so a changed target is seen.
    #[test]
    fn a_path_tree_with_a_symlink_is_hashed_every_time() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(&root).unwrap();
        sh(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("x.c"), "int x;").unwrap();
        let outside = tmp.path().join("outside.h");
        std::fs::write(&outside, "#define N 1").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("n.h")).unwrap();
        let spec = SourceSpec::Path { path: root.clone() };
        let first = resolve(&spec, tmp.path(), "h").unwrap();
        let listed = |root: &Path| stamps(root, &list_files(root).unwrap()).unwrap();
        let settled_ns = i128::MAX / 2;
        TREE_HASHES.remember_at(&root, listed(&root), &first.resolved, settled_ns);
        assert_eq!(
            TREE_HASHES.lookup(&root, &listed(&root)),
            None,
            "a tree with a symlink was remembered"
        );
        std::fs::write(&outside, "#define N 2").unwrap();
        assert_ne!(
            resolve(&spec, tmp.path(), "h").unwrap().resolved,
            first.resolved,
            "the link's target changed"
        );
        // The same tree without the link, settled, is remembered.
        std::fs::remove_file(root.join("n.h")).unwrap();
        let plain = resolve(&spec, tmp.path(), "h").unwrap();
        TREE_HASHES.remember_at(&root, listed(&root), &plain.resolved, settled_ns);
        assert_eq!(
            TREE_HASHES.lookup(&root, &listed(&root)),
            Some(plain.resolved)
        );
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

    /// The one pack of the only mirror under `cache`, and its length.
    fn mirror_pack(cache: &Path) -> (PathBuf, u64) {
        let mirror = std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "git"))
            .unwrap();
        let pack = std::fs::read_dir(mirror.join("objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "pack"))
            .expect("a file:// clone stores its objects in a pack");
        let len = std::fs::metadata(&pack).unwrap().len();
        (pack, len)
    }

    /// Issue 23, case 9: a damaged mirror failed every later run with the same error and
    /// was never repaired. A pack torn in the middle (same length: the commits still read,
    /// the blobs do not) passes the fast path and fails the checkout; a pack cut short
    /// fails the lookup (the fetch that follows brings the objects again). Either way the
    /// next resolve and checkout succeed.
    #[test]
    fn a_damaged_mirror_is_cloned_again_and_the_checkout_succeeds() {
        use std::io::{Seek, Write};
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        repo_with_tag(&repo);
        // Blobs large enough that the pack's middle holds file contents.
        let noise: String = (0..40_000u32)
            .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
            .collect();
        std::fs::write(repo.join("big.txt"), &noise).unwrap();
        sh(&repo, &["add", "."]);
        sh(&repo, &["commit", "-q", "-m", "big"]);
        let head = git(Some(&repo), &["rev-parse", "HEAD"]).unwrap();
        let cache = tmp.path().join("cache");
        // file:// makes git send a pack, as a remote does (a plain path hard-links objects).
        let spec = SourceSpec::Git {
            url: format!("file://{}", repo.display()),
            rev: head.clone(),
        };
        let checkout = |name: &str| {
            let dest = tmp.path().join(name);
            resolve(&spec, &cache, "h").and_then(|resolved| {
                resolved.checkout(&dest)?;
                Ok(std::fs::read_to_string(dest.join("big.txt")).unwrap())
            })
        };
        assert_eq!(checkout("first").unwrap(), noise);

        let (pack, len) = mirror_pack(&cache);
        let mut file = std::fs::OpenOptions::new().write(true).open(&pack).unwrap();
        file.seek(std::io::SeekFrom::Start(len / 3)).unwrap();
        file.write_all(&vec![0u8; (len / 3) as usize]).unwrap();
        drop(file);
        assert_eq!(
            checkout("after-a-torn-pack").unwrap(),
            noise,
            "a mirror with a torn pack was not repaired"
        );

        let (pack, len) = mirror_pack(&cache);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&pack)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        assert_eq!(
            checkout("after-a-short-pack").unwrap(),
            noise,
            "a mirror with a pack cut short was not repaired"
        );
    }
}
