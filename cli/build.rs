//! The commit the binary was built from, for `abfleet --version` (`ABFLEET_COMMIT`): `git
//! describe` of the source tree, `-dirty` when it had uncommitted changes; `unknown` when
//! built outside a git checkout (a crate tarball).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args([
            "describe",
            "--always",
            "--dirty",
            "--abbrev=12",
            "--exclude=*",
        ])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .filter(|commit| !commit.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=ABFLEET_COMMIT={commit}");
    // A new commit (the branch's ref moves, HEAD names it) or a changed index means
    // another version string.
    let mut watched = vec!["../.git/HEAD".to_string(), "../.git/index".to_string()];
    if let Ok(head) = std::fs::read_to_string("../.git/HEAD") {
        if let Some(reference) = head.trim().strip_prefix("ref: ") {
            watched.push(format!("../.git/{reference}"));
            watched.push("../.git/packed-refs".to_string());
        }
    }
    for path in watched {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
