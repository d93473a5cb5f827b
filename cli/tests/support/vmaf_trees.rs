//! The real VMAF trees and fixture pair the real-tree tests share (`vmaf_real.rs`,
//! `vmaf_arm_real.rs`, `vmaf_vulkan_real.rs`): the tarballs of `fixtures/vmaf-real/` (held
//! byte-identical to `../shared/vmaf-src/`), the 576x324 testsrc2/x264 pair unpacked and
//! checked, the tools the builds need, and the text edits that derive a test spec from a
//! production one.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The real trees as the project received them (`../shared/vmaf-src/`, present on every
/// development and CI machine), with a copy in `fixtures/vmaf-real/` so the repository stands
/// alone. Where the shared tree is present the test builds from it, and the copy must be
/// byte-identical to it: the trees abfleet's claims are checked on cannot drift.
pub fn real_tree(name: &str) -> PathBuf {
    let copy = fixtures_dir().join(name);
    let shared = repo_root().join("../shared/vmaf-src").join(name);
    if !shared.is_file() {
        eprintln!(
            "note: {} is not here; building from the repository's copy {}",
            shared.display(),
            copy.display()
        );
        return copy;
    }
    let (shared_bytes, copy_bytes) = (
        std::fs::read(&shared).unwrap(),
        std::fs::read(&copy).unwrap(),
    );
    assert!(
        shared_bytes == copy_bytes,
        "{} differs from {}: copy the real tree again (cp {} {}) and update fixtures/vmaf-real/README.md",
        copy.display(),
        shared.display(),
        shared.display(),
        copy.display()
    );
    shared
}

pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures/vmaf-real")
}

/// The fixture pair: file stem, and the sha256 of the uncompressed file (as in
/// `fixtures/vmaf-real/README.md`).
pub const REFERENCE: (&str, &str) = (
    "testsrc2_576x324_ref.yuv",
    "769201b5a09324f94906716e1f6a34a2ceea4c5226b2a5f36cf96e99028c5b8c",
);
pub const DISTORTED: (&str, &str) = (
    "testsrc2_576x324_x264crf35.yuv",
    "82b320dac20d1542af487ae539e8d1377514fdfcfe6f56e96edf4c7f2c81b3f8",
);
pub const WIDTH: u64 = 576;
pub const HEIGHT: u64 = 324;
pub const FRAMES: u64 = 12;

/// Fails, naming what to install, unless every tool the real builds need is on PATH, and
/// `more` besides (the cross compiler, qemu, the Vulkan tools).
pub fn require_tools(more: &[&str]) {
    let missing: Vec<&str> = ["meson", "ninja", "nasm", "xxd", "xz", "tar", "git", "cc"]
        .iter()
        .chain(more)
        .copied()
        .filter(|tool| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the real VMAF tests need {} (missing: {}); run `scripts/test` to install them \
         (or `scripts/test --install-only`)",
        "meson, ninja, nasm, xxd, xz, tar, git, a C compiler and what each test names",
        missing.join(", ")
    );
}

/// One side of the pair unpacked into `dir`, checked against its sha256.
pub fn unpack_fixture(pair: (&str, &str), dir: &Path) -> PathBuf {
    unpack_frames(pair, dir, FRAMES).0
}

/// One side of the pair unpacked into `dir` and checked, then cut to its first `frames`
/// frames (the real content, fewer of them: an emulated host runs 40-100x slower), with the
/// cut file's sha256.
pub fn unpack_frames((name, sha256): (&str, &str), dir: &Path, frames: u64) -> (PathBuf, String) {
    let packed = fixtures_dir().join(format!("{name}.xz"));
    let path = dir.join(if frames == FRAMES {
        name.to_string()
    } else {
        format!("{frames}f-{name}")
    });
    let output = Command::new("xz")
        .arg("-dc")
        .arg(&packed)
        .output()
        .expect("xz runs");
    assert!(
        output.status.success(),
        "xz -dc {} failed",
        packed.display()
    );
    let bytes = output.stdout;
    assert_eq!(
        bytes.len() as u64,
        WIDTH * HEIGHT * 3 / 2 * FRAMES,
        "{name}: not {FRAMES} frames of {WIDTH}x{HEIGHT} yuv420p"
    );
    let actual = format!("{:x}", Sha256::digest(&bytes));
    assert_eq!(
        actual,
        sha256,
        "{}: sha256 differs from fixtures/vmaf-real/README.md",
        packed.display()
    );
    assert!(
        (1..=FRAMES).contains(&frames),
        "the pair has {FRAMES} frames"
    );
    let kept = &bytes[..(WIDTH * HEIGHT * 3 / 2 * frames) as usize];
    std::fs::write(&path, kept).unwrap();
    (path, format!("{:x}", Sha256::digest(kept)))
}

/// (header line, the lines after it up to the next header), in file order; the first has
/// an empty header (the top-level keys and comments).
pub fn split_sections(text: &str) -> Vec<(String, String)> {
    let mut sections = vec![(String::new(), String::new())];
    for line in text.lines() {
        let is_header = line.starts_with('[')
            && line
                .trim_start_matches('[')
                .starts_with(|c: char| c.is_ascii_alphabetic());
        if is_header {
            let header = line.split('#').next().unwrap().trim().to_string();
            sections.push((header, String::new()));
        } else {
            let body = &mut sections.last_mut().unwrap().1;
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

/// Replaces the one line of `body` that starts with `prefix` (a `key = ` at column 0,
/// trailing comment included) with `line`; panics unless exactly one line matched.
pub fn replace_line(body: &str, prefix: &str, line: &str) -> String {
    let matches = body.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(
        matches, 1,
        "expected exactly one line starting with `{prefix}` in the production spec section:\n{body}"
    );
    body.lines()
        .map(|l| {
            if l.starts_with(prefix) {
                format!("{line}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// A TOML basic string of `s`.
pub fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The two real trees as git repositories in `root`: upstream tagged `v3.2.0`, the fork at
/// its one commit (returned).
pub struct RealRepos {
    pub upstream: PathBuf,
    pub fork: PathBuf,
    pub fork_commit: String,
}

pub fn real_repos(root: &Path) -> RealRepos {
    let upstream = root.join("upstream-vmaf");
    let fork = root.join("fork-vmaf");
    crate::support::repo_from_tarball(
        &real_tree("upstream-v3.2.0.tar.xz"),
        &upstream,
        Some("v3.2.0"),
    );
    let fork_commit =
        crate::support::repo_from_tarball(&real_tree("fork-c2a3c7e0.tar.xz"), &fork, None);
    RealRepos {
        upstream,
        fork,
        fork_commit,
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The `[[fixtures]]` section of the pair: `name`, `frames` of it, each side's path and sha256.
pub fn fixture_section(
    name: &str,
    frames: u64,
    reference: (&Path, &str),
    distorted: (&Path, &str),
) -> String {
    format!(
        "[[fixtures]]\nname = \"{name}\"\nwidth = {WIDTH}\nheight = {HEIGHT}\n\
         bitdepth = 8\npixel_format = \"420\"\nframes = {frames}\n\
         reference = {{ path = {}, sha256 = \"{}\" }}\n\
         distorted = {{ path = {}, sha256 = \"{}\" }}\n\n",
        toml_string(&reference.0.display().to_string()),
        reference.1,
        toml_string(&distorted.0.display().to_string()),
        distorted.1
    )
}

/// Panics listing every failed assertion at once, with `context` (the run's output and
/// report) after them; nothing when `failures` is empty.
pub fn assert_none_failed(failures: &[String], context: &str) {
    if !failures.is_empty() {
        let list: Vec<String> = failures.iter().map(|f| format!("  - {f}")).collect();
        panic!(
            "{} assertion(s) failed:\n{}\n{context}",
            failures.len(),
            list.join("\n")
        );
    }
}
