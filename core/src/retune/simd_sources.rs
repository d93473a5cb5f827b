//! Where the fork's SIMD code is, read from its source tree: which code has a vector path on
//! x86 and none on ARM, and which ARM code is compiled but never called. The rule, so a
//! maintainer can check it by hand: a SIMD file lives in a folder named `x86` or `arm64`
//! (`feature/x86/psnr_avx2.c`, `feature/arm64/psnr_neon.c`); code *uses* one when it
//! includes its header (`#include "feature/arm64/psnr_neon.h"` or `"arm64/psnr_neon.h"`).
//! The fork's CPU detection (`x86/cpu.h`, `arm/cpu.h`) counts the same way. A file outside those folders that includes x86 SIMD headers and no ARM one runs scalar on
//! ARM; an `arm64` source that a `meson.build` compiles and whose header nothing outside
//! `arm64/` includes is compiled and never called.

use std::collections::{BTreeMap, BTreeSet};

use crate::finding::{CheckResults, Finding, Severity};

/// One file of the tree: its path relative to the scanned folder, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

const X86: &str = "x86";
const ARM: &str = "arm64";
/// The fork's own ARM CPU detection lives in `src/arm/` (`arm/cpu.h`), its kernels in
/// `feature/arm64/`: both count as an ARM path.
const ARM_CPU: &str = "arm";

/// The folder a SIMD header path names (`x86` or `arm64`) and its file name, from an
/// include line's path (`feature/arm64/psnr_neon.h` → (`arm64`, `psnr_neon.h`)).
fn simd_header(include: &str) -> Option<(&'static str, String)> {
    let mut parts = include.rsplit('/');
    let file = parts.next()?;
    let folder = parts.next()?;
    let isa = [X86, ARM, ARM_CPU].into_iter().find(|isa| *isa == folder)?;
    Some((if isa == ARM_CPU { ARM } else { isa }, file.to_string()))
}

/// The quoted includes of a C or C++ text.
fn includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let rest = rest.strip_prefix('"')?;
        rest.split('"').next()
    })
}

fn in_simd_folder(path: &str) -> Option<&'static str> {
    let mut parts = path.rsplit('/');
    parts.next()?;
    let folder = parts.next()?;
    [X86, ARM, ARM_CPU].into_iter().find(|isa| *isa == folder)
}

fn is_code(path: &str) -> bool {
    [".c", ".cpp", ".cc", ".h", ".hpp"]
        .iter()
        .any(|ext| path.ends_with(ext))
}

/// The findings of a scan of `files` (every C/C++ source and header of the tree, and its
/// `meson.build` files). `command` says what was scanned.
pub fn judge(files: &[SourceFile], command: &str) -> CheckResults {
    let mut results = CheckResults::default();
    // Per using file: the x86 and ARM headers it includes.
    let mut uses: BTreeMap<&str, [BTreeSet<String>; 2]> = BTreeMap::new();
    let mut arm_headers_used: BTreeSet<String> = BTreeSet::new();
    for file in files.iter().filter(|f| is_code(&f.path)) {
        if in_simd_folder(&file.path).is_some() {
            continue;
        }
        for include in includes(&file.text) {
            if let Some((isa, header)) = simd_header(include) {
                let entry = uses.entry(&file.path).or_default();
                let slot = usize::from(isa == ARM);
                if isa == ARM {
                    arm_headers_used.insert(header.clone());
                }
                entry[slot].insert(header);
            }
        }
    }
    let compiled: String = files
        .iter()
        .filter(|f| f.path.ends_with("meson.build"))
        .map(|f| f.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut with_both = 0usize;
    for (path, [x86, arm]) in &uses {
        if x86.is_empty() {
            continue;
        }
        if !arm.is_empty() {
            with_both += 1;
            continue;
        }
        let headers: Vec<&str> = x86.iter().map(String::as_str).collect();
        results.findings.push(
            Finding::new(
                "cpu",
                "isa_coverage",
                path,
                Severity::Warn,
                format!(
                    "{path} has x86 SIMD ({}) and no ARM path: on aarch64 it runs scalar; port its kernels to NEON (feature/arm64/) or say in the docs that ARM is scalar here",
                    headers.join(", ")
                ),
                command,
            )
            .with("x86_headers", headers),
        );
    }
    for file in files.iter().filter(|f| {
        in_simd_folder(&f.path) == Some(ARM) && (f.path.ends_with(".c") || f.path.ends_with(".S"))
    }) {
        let name = file.path.rsplit('/').next().unwrap_or(&file.path);
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        let header = format!("{stem}.h");
        let is_compiled = compiled.contains(&format!("{ARM}/{name}"));
        if is_compiled && !arm_headers_used.contains(&header) {
            results.findings.push(
                Finding::new(
                    "cpu",
                    "isa_coverage",
                    &file.path,
                    Severity::Warn,
                    format!(
                        "{} is compiled (meson.build) but nothing outside {ARM}/ includes {header}: its NEON code is never called; wire it into its feature's dispatch or stop building it",
                        file.path
                    ),
                    command,
                )
                .with("header", header),
            );
        }
    }
    let x86_users = uses.values().filter(|[x86, _]| !x86.is_empty()).count();
    results.findings.push(
        Finding::new(
            "cpu",
            "isa_coverage",
            "summary",
            Severity::Ok,
            format!("{with_both} of {x86_users} files with x86 SIMD also have an ARM path"),
            command,
        )
        .with("files_with_x86_simd", x86_users)
        .with("files_with_both", with_both),
    );
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    #[test]
    fn x86_only_users_and_uncalled_arm_files_are_found_by_name() {
        let files = [
            file(
                "feature/integer_psnr.c",
                "#include \"x86/psnr_avx2.h\"\n#include \"arm64/psnr_neon.h\"\n",
            ),
            file(
                "feature/integer_motion.c",
                "#include \"feature/x86/motion_avx2.h\"\n#  include \"x86/motion_avx512.h\"\n",
            ),
            file("cpu.c", "#include \"x86/cpu.h\"\n#include \"arm/cpu.h\"\n"),
            file("arm/cpu.c", "#include \"cpu.h\"\n"),
            file("feature/arm64/psnr_neon.c", "#include \"psnr_neon.h\"\n"),
            file(
                "feature/arm64/motion_neon.c",
                "#include \"motion_neon.h\"\n",
            ),
            file("feature/arm64/extra_neon.c", ""),
            file(
                "meson.build",
                "arm64_sources = [ 'feature/arm64/psnr_neon.c', 'feature/arm64/motion_neon.c' ]",
            ),
        ];
        let results = judge(&files, "scan");
        let subjects: Vec<(&str, Severity)> = results
            .findings
            .iter()
            .map(|f| (f.subject.as_str(), f.severity))
            .collect();
        assert_eq!(
            subjects,
            [
                ("feature/integer_motion.c", Severity::Warn),
                ("feature/arm64/motion_neon.c", Severity::Warn),
                ("summary", Severity::Ok),
            ]
        );
        assert!(results.findings[0]
            .verdict
            .contains("motion_avx2.h, motion_avx512.h"));
        assert!(results.findings[1].verdict.contains("never called"));
        assert!(
            results.findings[2].verdict.contains("2 of 3"),
            "{}",
            results.findings[2].verdict
        );
    }

    #[test]
    fn includes_read_only_quoted_paths() {
        let text = "#include <stdio.h>\n  # include \"a/x86/b.h\"\n// #include \"c.h\" here\n";
        assert_eq!(includes(text).collect::<Vec<_>>(), ["a/x86/b.h"]);
    }
}
