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

/// A side that is built and ready to time.
#[derive(Debug, Clone)]
pub struct BuiltSide {
    pub record: BuildRecord,
    /// The binary to run, when the build succeeded.
    pub binary: Option<PathBuf>,
    /// The source tree (the working directory of timed runs).
    pub tree: PathBuf,
}

/// Fingerprints the toolchain by running the recipe's toolchain command.
pub fn toolchain_fingerprint(recipe: &BuildRecipe) -> String {
    let Some((program, args)) = recipe.toolchain.split_first() else {
        return "unknown".into();
    };
    match std::process::Command::new(program)
        .args(args)
        .envs(&recipe.env)
        .output()
    {
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
            if text.is_empty() {
                String::from_utf8_lossy(&output.stderr).trim().to_string()
            } else {
                text
            }
        }
        Err(err) => format!("{program}: not runnable ({err})"),
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
    if dir.join(MARKER).exists() && binary.is_file() {
        return BuiltSide {
            record: record(BuildStatus::Cached, 0.0, None, None),
            binary: Some(binary),
            tree,
        };
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
    let checkout = {
        let source = source.clone();
        let tree = tree.clone();
        tokio::task::spawn_blocking(move || source.checkout(&tree)).await
    };
    match checkout {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return fail(format!("cannot check out the source: {err}")),
        Err(err) => return fail(format!("checkout task failed: {err}")),
    }
    let _ = std::fs::write(
        &log_path,
        format!(
            "# abfleet build of {} at {}\n# toolchain: {toolchain_line}\n",
            side.name(),
            source.resolved
        ),
    );
    for (number, argv) in recipe.commands.iter().enumerate() {
        step.send_replace(format!(
            "`{}` (step {} of {})",
            argv.join(" "),
            number + 1,
            recipe.commands.len()
        ));
        let _ = append(&log_path, &format!("$ {}\n", argv.join(" ")));
        let outcome = runner::run(
            CommandSpec {
                argv,
                cwd: Some(&tree),
                env: &recipe.env,
                log_path: &log_path,
                timeout,
            },
            cancel,
        )
        .await;
        if !outcome.exit.success() {
            return fail(format!("`{}` {}", argv.join(" "), outcome.exit.describe()));
        }
    }
    if !binary.is_file() {
        return fail(format!(
            "the build finished but the binary `{}` does not exist; check the recipe's `binary` (relative to the source tree)",
            recipe.binary.display()
        ));
    }
    // The binary is what timed runs execute: a symlink out of the tree is not the build's.
    if let Err(err) =
        crate::input_checks::inside_tree("the recipe's `binary`", &tree, &recipe.binary)
    {
        return fail(err);
    }
    if let Err(err) = std::fs::write(dir.join(MARKER), &key) {
        return fail(format!("cannot record the finished build: {err}"));
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
    }
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
            env: BTreeMap::new(),
            toolchain: vec!["cc".into(), "--version".into()],
        }
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
    }
}
