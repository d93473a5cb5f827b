//! Checks on what a job offer asks of this host that hold with or without a policy: git
//! URLs and revisions cannot smuggle options into `git`, names that become file names cannot
//! leave the job's directory, and paths into a built tree stay inside it. A job that fails
//! one is refused before anything is fetched or run. Pure, apart from [`inside_tree`], which
//! resolves symlinks of a built tree.

use std::path::{Component, Path, PathBuf};

use abfleet_core::spec::{FixtureLocation, JobSpec, SourceSpec};

/// Every check on a job offer's id, generation and spec; the error names the field and the
/// value, and says what to write instead.
pub fn check_job_inputs(job_id: &str, generation: &str, spec: &JobSpec) -> Result<(), String> {
    check_job_id(job_id)?;
    if !generation.is_empty() {
        check_path_component(
            "the generation's backend",
            abfleet_core::report::backend_of(generation),
        )?;
    }
    for (side, side_spec) in [("upstream", &spec.upstream), ("fork", &spec.fork)] {
        match &side_spec.source {
            SourceSpec::Git { url, rev } => {
                check_git_url(&format!("[{side}] git"), url)?;
                check_git_rev(&format!("[{side}] rev"), rev)?;
            }
            SourceSpec::Path { path } => check_no_parent_dir(&format!("[{side}] path"), path)?,
        }
        check_relative_inside(&format!("[{side}.build] binary"), &side_spec.build.binary)?;
    }
    for fixture in &spec.fixtures {
        check_path_component("a fixture name", &fixture.name)?;
        for (role, file) in [
            ("reference", &fixture.reference),
            ("distorted", &fixture.distorted),
        ] {
            if let FixtureLocation::Url(url) = &file.location {
                check_no_option(&format!("fixture `{}` {role} url", fixture.name), url)?;
            }
        }
    }
    for workload in &spec.workloads {
        check_path_component("a workload name", &workload.name)?;
    }
    for (backend, config) in [
        ("cuda", &spec.backends.cuda),
        ("hip", &spec.backends.hip),
        ("sycl", &spec.backends.sycl),
    ] {
        for artifact in config.iter().flat_map(|c| c.artifacts.iter()) {
            check_relative_inside(&format!("[backends.{backend}] artifacts"), artifact)?;
        }
    }
    Ok(())
}

/// A job id: a uuid, which is also a safe file name (it names the spool and job directories).
pub fn check_job_id(job_id: &str) -> Result<(), String> {
    check_path_component("the job id", job_id)?;
    job_id
        .parse::<abfleet_core::ids::JobId>()
        .map(|_| ())
        .map_err(|err| err.to_string())
}

/// A git URL or local repository path: not an option (`-…`), not git's `transport::address`
/// form (which can run a helper program), no control characters and no `..` segment (so a
/// policy pattern such as `/srv/trees/*` means what it says).
pub fn check_git_url(what: &str, url: &str) -> Result<(), String> {
    check_no_option(what, url)?;
    if url.is_empty() {
        return Err(format!("{what} is empty; name a repository URL or path"));
    }
    if let Some((scheme, _)) = url.split_once("::") {
        let is_transport = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if is_transport {
            return Err(format!(
                "{what} `{url}` uses git's `{scheme}::` transport, which runs a helper program; use an https://, ssh://, git:// or file:// URL or a path"
            ));
        }
    }
    if url.split('/').any(|segment| segment == "..") {
        return Err(format!(
            "{what} `{url}` has a `..` segment; write the repository's own URL or path"
        ));
    }
    Ok(())
}

/// A git revision: a tag, branch or commit made of letters, digits and `._/+-`, not starting
/// with `-` and without `..` (no ranges, reflog or revision-suffix syntax).
pub fn check_git_rev(what: &str, rev: &str) -> Result<(), String> {
    check_no_option(what, rev)?;
    if rev.is_empty() {
        return Err(format!("{what} is empty; pin a tag, branch or commit"));
    }
    if let Some(bad) = rev
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '+' | '-')))
    {
        return Err(format!(
            "{what} `{rev}` has `{}`; a revision is a tag, branch or commit of letters, digits and `._/+-`",
            bad.escape_default()
        ));
    }
    if rev.contains("..") {
        return Err(format!(
            "{what} `{rev}` has `..`; name one tag, branch or commit, not a range"
        ));
    }
    Ok(())
}

/// A name that becomes one file or directory name: not empty, not `.` or `..`, no `/`,
/// `\` or control characters.
pub fn check_path_component(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        return Err(format!(
            "{what} `{}` cannot be used as a file name (it is empty, `.`, `..`, or has `/`, `\\` or a control character); rename it",
            name.escape_default()
        ));
    }
    Ok(())
}

/// A path relative to a tree that stays inside it: no root, no `..`.
pub fn check_relative_inside(what: &str, path: &Path) -> Result<(), String> {
    let escapes = path
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes || path.as_os_str().is_empty() {
        return Err(format!(
            "{what} `{}` must be a path inside the source tree (relative, without `..`)",
            path.display()
        ));
    }
    Ok(())
}

/// Where `relative` really is once symlinks are resolved, when that is inside `tree`; else
/// why not (a built file that is a symlink out of the tree is not the build's).
pub fn inside_tree(what: &str, tree: &Path, relative: &Path) -> Result<PathBuf, String> {
    check_relative_inside(what, relative)?;
    let root = tree
        .canonicalize()
        .map_err(|err| format!("cannot resolve the tree `{}`: {err}", tree.display()))?;
    let real = tree.join(relative).canonicalize().map_err(|err| {
        format!(
            "{what} `{}` cannot be resolved in `{}`: {err}",
            relative.display(),
            tree.display()
        )
    })?;
    if !real.starts_with(&root) {
        return Err(format!(
            "{what} `{}` resolves to `{}`, outside the tree `{}` (a symlink out of the build); build the file inside the tree",
            relative.display(),
            real.display(),
            root.display()
        ));
    }
    Ok(real)
}

fn check_no_option(what: &str, value: &str) -> Result<(), String> {
    if value.starts_with('-') {
        return Err(format!(
            "{what} `{value}` starts with `-`, so a tool would read it as an option; refused"
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "{what} `{}` has a control character; refused",
            value.escape_default()
        ));
    }
    Ok(())
}

fn check_no_parent_dir(what: &str, path: &Path) -> Result<(), String> {
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "{what} `{}` has a `..` component; write the directory's own path",
            path.display()
        ));
    }
    check_no_option(what, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_urls_cannot_be_options_or_transports_or_climb() {
        for good in [
            "https://github.com/Netflix/vmaf.git",
            "ssh://[::1]/srv/vmaf.git",
            "git@github.com:Netflix/vmaf.git",
            "/srv/trees/vmaf",
            "file:///srv/trees/vmaf",
        ] {
            check_git_url("[fork] git", good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for (bad, says) in [
            ("--upload-pack=touch /tmp/pwned", "starts with `-`"),
            ("-oProxyCommand=x", "starts with `-`"),
            ("ext::sh -c touch% /tmp/pwned", "`ext::` transport"),
            ("fd::17", "`fd::` transport"),
            ("/srv/trees/../../etc", "`..` segment"),
            ("https://github.com/Netflix/../evil/x.git", "`..` segment"),
            ("/srv/a\nb", "control character"),
            ("", "is empty"),
        ] {
            let err = check_git_url("[fork] git", bad).unwrap_err();
            assert!(
                err.contains(says) && err.contains("[fork] git"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn git_revisions_are_plain_names() {
        for good in ["v3.0.0", "main", "release/2.3+fix", "6f1c2a8e0b", "a_b-c"] {
            check_git_rev("[fork] rev", good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for (bad, says) in [
            ("--output=/tmp/x", "starts with `-`"),
            ("-n", "starts with `-`"),
            ("main..evil", "not a range"),
            ("HEAD@{1}", "has `@`"),
            ("v1^{tree}", "has `^`"),
            ("a b", "has ` `"),
            ("", "is empty"),
        ] {
            let err = check_git_rev("[fork] rev", bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn names_and_relative_paths_stay_inside() {
        check_path_component("a fixture name", "bbb_4k-10bit.v2").unwrap();
        for bad in ["..", ".", "", "../x", "a/b", "a\\b", "nul\0"] {
            assert!(
                check_path_component("a fixture name", bad).is_err(),
                "{bad:?}"
            );
        }
        check_relative_inside("binary", Path::new("build/tools/vmaf")).unwrap();
        check_relative_inside("binary", Path::new("./vmaf")).unwrap();
        for bad in ["/usr/bin/python3", "../../bin/sh", "build/../../x", ""] {
            let err = check_relative_inside("binary", Path::new(bad)).unwrap_err();
            assert!(err.contains("inside the source tree"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_symlink_out_of_the_tree_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("build")).unwrap();
        std::fs::write(tree.join("build/vmaf"), "x").unwrap();
        std::fs::write(tmp.path().join("outside"), "y").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), tree.join("build/link")).unwrap();
        std::os::unix::fs::symlink("vmaf", tree.join("build/inner")).unwrap();
        assert!(inside_tree("binary", &tree, Path::new("build/vmaf")).is_ok());
        assert!(inside_tree("binary", &tree, Path::new("build/inner")).is_ok());
        let err = inside_tree("binary", &tree, Path::new("build/link")).unwrap_err();
        assert!(err.contains("outside the tree"), "{err}");
    }

    #[test]
    fn a_spec_with_an_escaping_name_or_a_bad_job_id_is_refused() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
        let id = abfleet_core::ids::JobId::new_random().to_string();
        check_job_inputs(&id, "cpu/x86-64-v3", &spec).unwrap();
        let err = check_job_inputs("../../etc", "", &spec).unwrap_err();
        assert!(err.contains("the job id"), "{err}");
        let err = check_job_inputs(&id, "../x/y", &spec).unwrap_err();
        assert!(err.contains("backend"), "{err}");
        let mut renamed = spec.clone();
        renamed.workloads[0].name = "../../../tmp/owned".into();
        let err = check_job_inputs(&id, "", &renamed).unwrap_err();
        assert!(err.contains("a workload name"), "{err}");
        let mut escaping = spec.clone();
        escaping.fork.build.binary = "/bin/sh".into();
        let err = check_job_inputs(&id, "", &escaping).unwrap_err();
        assert!(err.contains("[fork.build] binary"), "{err}");
    }
}
