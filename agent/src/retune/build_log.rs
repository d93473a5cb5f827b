//! Reads a GPU backend's build log for what a maintainer must hear about the build itself:
//! each source file of the fork that did not compile (the compiler's first error, its path
//! resolved inside the fork's tree), split into the kernel build and the link steps, and
//! whether the toolchain simply cannot build a target the spec asks for
//! (`core::retune::build_errors` does the reading).

use std::path::{Component, Path, PathBuf};

use abfleet_core::finding::Finding;
use abfleet_core::retune::build_errors::{
    build_finding, first_error_per_file, unsupported_target, BuildPhase,
};
use abfleet_core::spec::BuildRecipe;

/// What the build log says.
#[derive(Debug, Default)]
pub struct BuildLogReading {
    /// The toolchain's own line refusing a target, when the build stopped on it.
    pub unsupported_target: Option<String>,
    /// One `build` finding per source file that did not compile.
    pub findings: Vec<Finding>,
}

/// Reads the log at `log_path` of `recipe`'s build in `tree`. A missing log reads as empty.
pub fn read_build_log(
    backend: &str,
    recipe: &BuildRecipe,
    tree: &Path,
    log_path: &Path,
) -> BuildLogReading {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let (kernels, link) = split_at_link(&log, recipe);
    let mut findings = Vec::new();
    for (phase, part, commands) in [
        (BuildPhase::Kernels, kernels, &recipe.commands),
        (BuildPhase::Link, link, &recipe.link),
    ] {
        let command = commands
            .iter()
            .map(|argv| argv.join(" "))
            .collect::<Vec<_>>()
            .join(" && ");
        for error in first_error_per_file(part) {
            let file = resolve_in_tree(tree, &error.file);
            findings.push(build_finding(backend, phase, &file, &error, &command));
        }
    }
    BuildLogReading {
        unsupported_target: unsupported_target(&log),
        findings,
    }
}

/// The log before the first link step's `$ command` line, and from it on.
fn split_at_link<'l>(log: &'l str, recipe: &BuildRecipe) -> (&'l str, &'l str) {
    let Some(first_link) = recipe.link.first() else {
        return (log, "");
    };
    let marker = format!("$ {}\n", first_link.join(" "));
    match log.find(&marker) {
        Some(at) => log.split_at(at),
        None => (log, ""),
    }
}

/// A path as a compiler printed it (relative to the build directory it ran in, or absolute),
/// as a path inside the fork's tree when it is one of its files; else as printed.
pub fn resolve_in_tree(tree: &Path, printed: &str) -> String {
    let path = Path::new(printed);
    if path.is_absolute() {
        return match path.strip_prefix(tree) {
            Ok(inside) => inside.display().to_string(),
            Err(_) => printed.to_string(),
        };
    }
    let tail: PathBuf = path
        .components()
        .skip_while(|c| matches!(c, Component::ParentDir | Component::CurDir))
        .collect();
    if tail.as_os_str().is_empty() {
        return printed.to_string();
    }
    if tree.join(&tail).is_file() {
        return tail.display().to_string();
    }
    find_by_tail(tree, &tail, 6)
        .map(|found| found.display().to_string())
        .unwrap_or_else(|| printed.to_string())
}

/// The file under `dir` (relative to it) whose path ends with `tail`, searching `depth` levels.
fn find_by_tail(dir: &Path, tail: &Path, depth: u32) -> Option<PathBuf> {
    if depth == 0 {
        return None;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name == ".git" || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let candidate = entry.path().join(tail);
        if candidate.is_file() {
            return Some(Path::new(&name).join(tail));
        }
        if let Some(found) = find_by_tail(&entry.path(), tail, depth - 1) {
            return Some(Path::new(&name).join(found));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(link: &[&str]) -> BuildRecipe {
        BuildRecipe {
            commands: vec![vec![
                "ninja".into(),
                "-C".into(),
                "libvmaf/build".into(),
                "src/k.hsaco".into(),
            ]],
            binary: "libvmaf/build/tools/vmaf".into(),
            env: Default::default(),
            toolchain: vec!["hipcc".into(), "--version".into()],
            link: if link.is_empty() {
                vec![]
            } else {
                vec![link.iter().map(|s| s.to_string()).collect()]
            },
        }
    }

    #[test]
    fn errors_are_placed_in_the_tree_and_split_by_phase() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("libvmaf/src/hip")).unwrap();
        std::fs::write(tree.path().join("libvmaf/src/hip/common.h"), "").unwrap();
        std::fs::write(tree.path().join("libvmaf/src/k.hip"), "").unwrap();
        let log = tree.path().join("build.log");
        std::fs::write(
            &log,
            "$ ninja -C libvmaf/build src/k.hsaco\n\
             ../src/k.hip:4:2: error: use of undeclared identifier 'x'\n\
             $ ninja -C libvmaf/build\n\
             In file included from ../src/hip/kernel_template.c:3:\n\
             ../src/hip/common.h:25:13: error: conflicting types for 'hipError_t'\n\
             /usr/include/stdio.h:1:1: error: elsewhere\n",
        )
        .unwrap();
        let read = read_build_log(
            "hip",
            &recipe(&["ninja", "-C", "libvmaf/build"]),
            tree.path(),
            &log,
        );
        let shown: Vec<(String, String)> = read
            .findings
            .iter()
            .map(|f| {
                (
                    f.subject.clone(),
                    f.evidence["phase"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("libvmaf/src/k.hip:4".to_string(), "kernels".to_string()),
                (
                    "libvmaf/src/hip/common.h:25".to_string(),
                    "link".to_string()
                ),
                ("/usr/include/stdio.h:1".to_string(), "link".to_string()),
            ]
        );
        assert!(read.unsupported_target.is_none());
    }

    #[test]
    fn without_link_steps_every_error_is_the_kernel_build() {
        let tree = tempfile::tempdir().unwrap();
        let log = tree.path().join("build.log");
        std::fs::write(
            &log,
            "x.cpp:1:1: error: no\nclang: error: invalid target ID 'gfx942'\n",
        )
        .unwrap();
        let read = read_build_log("hip", &recipe(&[]), tree.path(), &log);
        assert_eq!(read.findings.len(), 1);
        assert_eq!(read.findings[0].evidence["phase"], "kernels");
        assert_eq!(
            read.findings[0].subject, "x.cpp:1",
            "not in the tree: as printed"
        );
        assert_eq!(
            read.unsupported_target.as_deref(),
            Some("clang: error: invalid target ID 'gfx942'")
        );
    }
}
