//! Building one side, with a cache: the key covers the resolved source, the recipe and the
//! toolchain fingerprint, so a second run with nothing changed reuses the build, and a new
//! compiler, commit or recipe rebuilds. Build output goes to a log whose tail is reported
//! when the build fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abfleet_core::events::{BuildRecord, BuildStatus, Side};
use abfleet_core::spec::BuildRecipe;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::runner::{self, CommandSpec};
use crate::source::{hex, ResolvedSource};

/// How much of a failed build's log goes into the report.
const LOG_TAIL_BYTES: u64 = 3000;
/// The marker a finished build leaves; its presence makes the next run a cache hit.
const MARKER: &str = "abfleet-build-ok";
/// Beside the marker when the recipe's link steps failed: why, for a cache hit to say again.
const UNLINKED: &str = "abfleet-link-failed.txt";

/// A side that is built and ready to time.
#[derive(Debug, Clone)]
pub struct BuiltSide {
    pub record: BuildRecord,
    /// The binary to run, when the build succeeded.
    pub binary: Option<PathBuf>,
    /// The source tree (the working directory of timed runs).
    pub tree: PathBuf,
    /// Why the recipe's `link` steps did not make the binary, when they did not: the build's
    /// other outputs are there and usable (for the retuning checks), nothing can be timed.
    pub unlinked: Option<String>,
}

impl BuiltSide {
    /// The build's outputs exist: it made its binary, or everything but its link steps.
    pub fn usable(&self) -> bool {
        self.binary.is_some() || self.unlinked.is_some()
    }
}

/// Fingerprints the toolchain: the output of the recipe's toolchain command, run once per
/// agent process while the program it runs stays the same file (see [`ToolchainKey`]).
pub fn toolchain_fingerprint(recipe: &BuildRecipe) -> String {
    let Some((program, args)) = recipe.toolchain.split_first() else {
        return "unknown".into();
    };
    let key = ToolchainKey::of(recipe, program);
    if let Some(known) = key.as_ref().and_then(|key| FINGERPRINTS.get(key)) {
        return known;
    }
    let mut command = std::process::Command::new(program);
    command.args(args).envs(&recipe.env);
    let fingerprint = match crate::runner::output(&mut command) {
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
            if text.is_empty() {
                String::from_utf8_lossy(&output.stderr).trim().to_string()
            } else {
                text
            }
        }
        Err(err) => format!("{program}: not runnable ({err})"),
    };
    if let Some(key) = key {
        FINGERPRINTS.insert(key, &fingerprint);
    }
    fingerprint
}

/// What a toolchain fingerprint depends on. The invalidation rule: the same command and
/// recipe environment, and the program it starts (found on the recipe's `PATH`, else the
/// agent's) resolving, through its symlinks, to the same file with the same length, inode,
/// modification and change time. An upgraded or reinstalled compiler is a new file (new
/// times, usually a new inode); `update-alternatives` moves a symlink (a new resolved path).
/// A program that cannot be found is never cached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ToolchainKey {
    command: Vec<String>,
    env: Vec<(String, String)>,
    program: PathBuf,
    len: u64,
    inode: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl ToolchainKey {
    fn of(recipe: &BuildRecipe, program: &str) -> Option<ToolchainKey> {
        use std::os::unix::fs::MetadataExt;
        let found = if program.contains('/') {
            PathBuf::from(program)
        } else {
            let search = recipe
                .env
                .get("PATH")
                .map(std::ffi::OsString::from)
                .or_else(|| std::env::var_os("PATH"))?;
            std::env::split_paths(&search)
                .map(|dir| dir.join(program))
                .find(|candidate| {
                    candidate
                        .metadata()
                        .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
                })?
        };
        let program = std::fs::canonicalize(found).ok()?;
        let meta = program.metadata().ok()?;
        Some(ToolchainKey {
            command: recipe.toolchain.clone(),
            env: recipe
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            program,
            len: meta.len(),
            inode: meta.ino(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// Toolchain fingerprints computed in this agent process.
struct Fingerprints(std::sync::Mutex<std::collections::HashMap<ToolchainKey, String>>);

static FINGERPRINTS: std::sync::LazyLock<Fingerprints> =
    std::sync::LazyLock::new(|| Fingerprints(std::sync::Mutex::default()));

impl Fingerprints {
    fn get(&self, key: &ToolchainKey) -> Option<String> {
        let known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        known.get(key).cloned()
    }

    fn insert(&self, key: ToolchainKey, fingerprint: &str) {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        known.insert(key, fingerprint.to_string());
    }
}

/// The line of a toolchain's banner that names its version: nvcc prints its release on the
/// fourth line (`Cuda compilation tools, release 11.8, V11.8.89`), most compilers on the first.
pub fn toolchain_summary(banner: &str) -> String {
    banner
        .lines()
        .find(|l| l.contains("release") || l.contains("version"))
        .or_else(|| banner.lines().next())
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

/// The build's identity. The side is not part of it: the same source, recipe and toolchain
/// make the same binary, which is what an A/A calibration runs on both sides.
pub fn cache_key(resolved: &str, recipe: &BuildRecipe, toolchain: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(resolved.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(recipe).expect("a recipe serialises"));
    hasher.update([0]);
    hasher.update(toolchain.as_bytes());
    hex(&hasher.finalize())
}

/// Builds `source` with `recipe` under `builds_dir`, or reuses an earlier identical build.
pub async fn build_side(
    side: Side,
    source: &ResolvedSource,
    recipe: &BuildRecipe,
    builds_dir: &Path,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    step: &watch::Sender<String>,
) -> BuiltSide {
    let toolchain = {
        let recipe = recipe.clone();
        tokio::task::spawn_blocking(move || toolchain_fingerprint(&recipe))
            .await
            .unwrap_or_else(|_| "unknown".into())
    };
    let key = cache_key(&source.resolved, recipe, &toolchain);
    let dir = builds_dir.join(&key[..16]);
    let tree = dir.join("src");
    let log_path = dir.join("build.log");
    let binary = tree.join(&recipe.binary);
    let toolchain_line = toolchain_summary(&toolchain);
    let record = |status, seconds, log_tail: Option<String>, error: Option<String>| BuildRecord {
        side,
        status,
        cache_key: key.clone(),
        toolchain: toolchain_line.clone(),
        seconds,
        log_path: log_path.display().to_string(),
        log_tail,
        error,
    };
    if dir.join(MARKER).exists() {
        let unlinked = std::fs::read_to_string(dir.join(UNLINKED)).ok();
        if binary.is_file() || unlinked.is_some() {
            return BuiltSide {
                record: record(BuildStatus::Cached, 0.0, None, None),
                binary: binary.is_file().then_some(binary),
                tree,
                unlinked,
            };
        }
    }
    let started = Instant::now();
    let fail = |error: String| BuiltSide {
        record: record(
            BuildStatus::Failed,
            started.elapsed().as_secs_f64(),
            Some(runner::tail(&log_path, LOG_TAIL_BYTES)),
            Some(error),
        ),
        binary: None,
        tree: tree.clone(),
        unlinked: None,
    };
    // A half-finished earlier attempt is thrown away; a build starts from a clean tree.
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(err) = std::fs::create_dir_all(&dir) {
        return fail(format!(
            "cannot create the build directory `{}`: {err}",
            dir.display()
        ));
    }
    step.send_replace("checking out the source".into());
    if let Err(err) = check_out(source, &tree, cancel).await {
        return fail(err);
    }
    let _ = std::fs::write(
        &log_path,
        format!(
            "# abfleet build of {} at {}\n# toolchain: {toolchain_line}\n",
            side.name(),
            source.resolved
        ),
    );
    let mut unlinked = match run_steps(recipe, &tree, &log_path, timeout, cancel, step).await {
        Ok(unlinked) => unlinked,
        Err(failed) => return fail(failed),
    };
    if unlinked.is_none() && !recipe.link.is_empty() && !binary.is_file() {
        unlinked = Some(format!(
            "the link steps finished but the binary `{}` does not exist",
            recipe.binary.display()
        ));
    }
    if let Some(reason) = unlinked {
        if let Err(err) = record_unlinked(&dir, &log_path, &key, &reason) {
            return fail(err);
        }
        return BuiltSide {
            record: record(
                BuildStatus::Built,
                started.elapsed().as_secs_f64(),
                None,
                None,
            ),
            binary: None,
            tree,
            unlinked: Some(reason),
        };
    }
    if let Err(err) = record_linked(&dir, &tree, recipe, &key) {
        return fail(err);
    }
    BuiltSide {
        record: record(
            BuildStatus::Built,
            started.elapsed().as_secs_f64(),
            None,
            None,
        ),
        binary: Some(binary),
        tree,
        unlinked: None,
    }
}

/// A linked build recorded as finished, once its binary is there and inside the tree (it is
/// what timed runs execute: a symlink out of the tree is not the build's).
fn record_linked(dir: &Path, tree: &Path, recipe: &BuildRecipe, key: &str) -> Result<(), String> {
    if !tree.join(&recipe.binary).is_file() {
        return Err(format!(
            "the build finished but the binary `{}` does not exist; check the recipe's `binary` (relative to the source tree)",
            recipe.binary.display()
        ));
    }
    crate::input_checks::inside_tree("the recipe's `binary`", tree, &recipe.binary)?;
    std::fs::write(dir.join(MARKER), key)
        .map_err(|err| format!("cannot record the finished build: {err}"))
}

/// A build whose link step failed, recorded as finished: the reason in the log and beside
/// the tree, then the marker.
fn record_unlinked(dir: &Path, log_path: &Path, key: &str, reason: &str) -> Result<(), String> {
    let _ = append(log_path, &format!("# not linked: {reason}\n"));
    std::fs::write(dir.join(UNLINKED), reason)
        .and_then(|()| std::fs::write(dir.join(MARKER), key))
        .map_err(|err| format!("cannot record the finished build: {err}"))
}

/// Checks `source` out into `tree`, its child processes stopped on a cancel.
async fn check_out(
    source: &ResolvedSource,
    tree: &Path,
    cancel: &mut watch::Receiver<bool>,
) -> Result<(), String> {
    let checkout = {
        let source = source.clone();
        let tree = tree.to_path_buf();
        runner::blocking_with_children(move || source.checkout(&tree), cancel).await
    };
    match checkout {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(err))) => Err(format!("cannot check out the source: {err}")),
        Ok(None) => Err("the checkout was stopped because the job was cancelled".into()),
        Err(err) => Err(format!("checkout task failed: {err}")),
    }
}

/// The recipe's commands, then its link steps, each logged: `Err` with what failed when a
/// command fails (or anything fails on a cancel); `Ok(Some(reason))` when only a link step
/// failed (the tree is built, the binary not linked: a library's checks can still run).
async fn run_steps(
    recipe: &BuildRecipe,
    tree: &Path,
    log_path: &Path,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    step: &watch::Sender<String>,
) -> Result<Option<String>, String> {
    let steps = recipe.commands.len() + recipe.link.len();
    let mut unlinked = None;
    for (number, argv) in recipe.commands.iter().chain(&recipe.link).enumerate() {
        let linking = number >= recipe.commands.len();
        step.send_replace(format!(
            "`{}` (step {} of {steps})",
            argv.join(" "),
            number + 1,
        ));
        let _ = append(log_path, &format!("$ {}\n", argv.join(" ")));
        let outcome = runner::run(
            CommandSpec {
                argv,
                cwd: Some(tree),
                env: &recipe.env,
                log_path,
                timeout,
            },
            cancel,
        )
        .await;
        if !outcome.exit.success() {
            let failed = format!("`{}` {}", argv.join(" "), outcome.exit.describe());
            if !linking || *cancel.borrow() {
                return Err(failed);
            }
            let first_error = runner::tail(log_path, LOG_TAIL_BYTES)
                .lines()
                .find(|l| l.contains("error:"))
                .map(|l| format!(": {}", l.trim()))
                .unwrap_or_default();
            unlinked = Some(format!("{failed}{first_error}"));
            break;
        }
    }
    Ok(unlinked)
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toolchain_summary_is_the_versioned_line() {
        let nvcc =
            include_str!("../../fixtures/probes/toolchain-cuda-11.8-debian/nvcc-version.txt");
        assert_eq!(
            toolchain_summary(nvcc),
            "Cuda compilation tools, release 11.8, V11.8.89"
        );
        let hipcc =
            include_str!("../../fixtures/probes/toolchain-hip-5.2-debian/hipcc-version.txt");
        assert_eq!(toolchain_summary(hipcc), "HIP version: 5.2.21153-0");
        assert_eq!(
            toolchain_summary("cc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022"),
            "cc (Debian 12.2.0-14) 12.2.0"
        );
    }
    use std::collections::BTreeMap;

    fn recipe(commands: Vec<Vec<&str>>, binary: &str) -> BuildRecipe {
        BuildRecipe {
            commands: commands
                .into_iter()
                .map(|c| c.into_iter().map(String::from).collect())
                .collect(),
            binary: binary.into(),
            link: Vec::new(),
            env: BTreeMap::new(),
            toolchain: vec!["cc".into(), "--version".into()],
        }
    }

    /// Issue 15: every job ran the toolchain command again, for each side.
    #[test]
    fn a_toolchain_is_fingerprinted_once_until_its_program_changes() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let calls = tmp.path().join("calls");
        let write_tool = |version: &str| {
            let tool = bin.join("fakecc");
            // A new file each time, as a package upgrade installs one.
            let _ = std::fs::remove_file(&tool);
            std::fs::write(
                &tool,
                format!(
                    "#!/bin/sh\necho run >> {}\necho 'fakecc version {version}'\n",
                    calls.display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        write_tool("1.0");
        let mut r = recipe(vec![vec!["make"]], "b");
        r.toolchain = vec!["fakecc".into(), "--version".into()];
        r.env.insert(
            "PATH".into(),
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        );
        let runs = || {
            std::fs::read_to_string(&calls)
                .unwrap_or_default()
                .lines()
                .count()
        };
        assert_eq!(toolchain_fingerprint(&r), "fakecc version 1.0");
        assert_eq!(toolchain_fingerprint(&r), "fakecc version 1.0");
        assert_eq!(runs(), 1, "the second side of a job reuses the fingerprint");
        // A longer version: the new file may get the old one's inode back and be written
        // within the same clock tick, and only its length would then tell it apart.
        write_tool("2.0.1");
        assert_eq!(toolchain_fingerprint(&r), "fakecc version 2.0.1");
        assert_eq!(runs(), 2, "an upgraded compiler is fingerprinted again");
        // Another recipe environment is another toolchain.
        r.env.insert("CC_FLAVOUR".into(), "x".into());
        toolchain_fingerprint(&r);
        assert_eq!(runs(), 3);
        // A program that is not there is never cached (and says so).
        r.toolchain = vec!["abfleet-no-such-compiler".into()];
        assert!(toolchain_fingerprint(&r).contains("not runnable"));
    }

    #[test]
    fn the_key_changes_with_source_recipe_and_toolchain_but_not_side() {
        let r = recipe(vec![vec!["make"]], "b");
        let base = cache_key("abc", &r, "gcc 12");
        assert_eq!(base, cache_key("abc", &r, "gcc 12"));
        assert_ne!(base, cache_key("abd", &r, "gcc 12"));
        assert_ne!(base, cache_key("abc", &r, "gcc 13"));
        let parallel = recipe(vec![vec!["make", "-j2"]], "b");
        assert_ne!(base, cache_key("abc", &parallel, "gcc 12"));
    }

    #[tokio::test]
    async fn a_build_is_cached_and_a_failure_keeps_its_log_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("hello.c"), "int main(void) { return 0; }\n").unwrap();
        let source = crate::source::resolve(
            &abfleet_core::spec::SourceSpec::Path { path: tree.clone() },
            tmp.path(),
            "h",
        )
        .unwrap();
        let good = recipe(vec![vec!["cc", "-o", "hello", "hello.c"]], "hello");
        let builds = tmp.path().join("builds");
        let build = |recipe: &BuildRecipe| {
            let (source, builds, recipe) = (source.clone(), builds.clone(), recipe.clone());
            async move {
                let (_tx, mut rx) = watch::channel(false);
                let (step, last_step) = watch::channel(String::new());
                let built = build_side(
                    Side::Fork,
                    &source,
                    &recipe,
                    &builds,
                    Duration::from_secs(60),
                    &mut rx,
                    &step,
                )
                .await;
                let last_step = last_step.borrow().clone();
                (built, last_step)
            }
        };
        let (first, first_step) = build(&good).await;
        assert_eq!(first_step, "`cc -o hello hello.c` (step 1 of 1)");
        assert_eq!(
            first.record.status,
            BuildStatus::Built,
            "{:?}",
            first.record
        );
        let (second, second_step) = build(&good).await;
        assert_eq!(second.record.status, BuildStatus::Cached);
        assert_eq!(second_step, "", "a cached build runs no step");
        assert_eq!(second.binary, first.binary);

        let bad = recipe(vec![vec!["cc", "-o", "hello", "missing.c"]], "hello");
        let (failed, failed_step) = build(&bad).await;
        assert_eq!(failed_step, "`cc -o hello missing.c` (step 1 of 1)");
        assert_eq!(failed.record.status, BuildStatus::Failed);
        let tail = failed.record.log_tail.unwrap();
        assert!(tail.contains("missing.c"), "{tail}");
        assert!(failed.record.error.unwrap().contains("exited with code"));

        let no_binary = recipe(vec![vec!["true"]], "hello");
        let (failed, _) = build(&no_binary).await;
        assert!(failed.record.error.unwrap().contains("does not exist"));

        // A failing link step leaves a usable, unlinked build, with the compiler's own
        // error, and a cache hit says so again; a failing build step is still a failure.
        let mut unlinked = recipe(vec![vec!["cc", "-c", "hello.c", "-o", "hello.o"]], "hello");
        unlinked.link = vec![vec!["cc".into(), "hello.o".into(), "missing.o".into()]];
        let (built, step) = build(&unlinked).await;
        assert_eq!(step, "`cc hello.o missing.o` (step 2 of 2)");
        assert_eq!(built.record.status, BuildStatus::Built);
        assert!(built.usable() && built.binary.is_none());
        let reason = built.unlinked.clone().unwrap();
        assert!(
            reason.contains("`cc hello.o missing.o` exited with code"),
            "{reason}"
        );
        assert!(reason.contains("missing.o"), "{reason}");
        assert!(built.tree.join("hello.o").is_file());
        let (again, _) = build(&unlinked).await;
        assert_eq!(again.record.status, BuildStatus::Cached);
        assert_eq!(again.unlinked, Some(reason));
        let mut linked = unlinked.clone();
        linked.link = vec![vec![
            "cc".into(),
            "-o".into(),
            "hello".into(),
            "hello.o".into(),
        ]];
        let (built, _) = build(&linked).await;
        assert!(
            built.binary.is_some() && built.unlinked.is_none(),
            "{built:?}"
        );
        let mut broken = unlinked.clone();
        broken.commands = vec![vec!["cc".into(), "-c".into(), "missing.c".into()]];
        let (failed, _) = build(&broken).await;
        assert!(!failed.usable());
    }

    /// Issue 23, case 9: a build step's background grandchild outlived the build. A cancel,
    /// and a build dropped half-way (the job's future gone), end the whole step.
    #[tokio::test]
    async fn a_cancelled_or_dropped_build_takes_its_steps_grandchildren_with_it() {
        use crate::child_group::process_gone;
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("Makefile"), "all:\n").unwrap();
        let source = crate::source::resolve(
            &abfleet_core::spec::SourceSpec::Path { path: tree.clone() },
            tmp.path(),
            "h",
        )
        .unwrap();
        let wait_for_pid = |pid_file: PathBuf| async move {
            loop {
                if let Ok(text) = std::fs::read_to_string(&pid_file) {
                    if text.ends_with('\n') {
                        return text.trim().to_string();
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let wait_gone = |pid: String| async move {
            for _ in 0..500 {
                if process_gone(&pid) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            process_gone(&pid)
        };
        for (case, cancel_it) in [("cancelled", true), ("dropped", false)] {
            let pid_file = tmp.path().join(format!("{case}.pid"));
            let step = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
            let recipe = recipe(vec![vec!["sh", "-c", &step]], "never-made");
            let (cancel_tx, mut cancel_rx) = watch::channel(false);
            let (step_tx, _step_rx) = watch::channel(String::new());
            let builds = tmp.path().join(format!("builds-{case}"));
            // Boxed, so that dropping it drops the build itself.
            let mut build = Box::pin(build_side(
                Side::Fork,
                &source,
                &recipe,
                &builds,
                Duration::from_secs(600),
                &mut cancel_rx,
                &step_tx,
            ));
            let grandchild = tokio::select! {
                built = &mut build => panic!("the step ended by itself: {built:?}"),
                pid = wait_for_pid(pid_file.clone()) => pid,
            };
            assert!(!process_gone(&grandchild));
            if cancel_it {
                cancel_tx.send(true).unwrap();
                let built = build.await;
                assert_eq!(built.record.status, BuildStatus::Failed);
                assert!(
                    built
                        .record
                        .error
                        .as_deref()
                        .unwrap_or("")
                        .contains("cancelled"),
                    "{:?}",
                    built.record
                );
            } else {
                drop(build);
            }
            assert!(
                wait_gone(grandchild.clone()).await,
                "{case}: the step's grandchild (pid {grandchild}) outlived the build"
            );
        }
    }
}
