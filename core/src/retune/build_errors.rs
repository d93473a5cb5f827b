//! What a GPU backend's build log says went wrong, read the way a maintainer reads it: the
//! compiler's first error per source file (`file:line:col: error: message`, as gcc, clang,
//! hipcc and the SYCL front end print it), and whether the toolchain simply cannot build for
//! a target it was asked for (clang's `invalid target ID 'gfx942'`, nvcc's `Unsupported gpu
//! architecture`, ocloc's `Could not determine device target`), which is the toolchain's limit
//! on this host, not a fault of the fork. Pure: the agent reads the log and resolves the paths.

use crate::finding::{Finding, Severity};

/// One compiler error as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilerError {
    /// The path as the compiler printed it (often relative to the build directory).
    pub file: String,
    pub line: u32,
    pub column: Option<u32>,
    /// The text after `error:`.
    pub message: String,
}

impl CompilerError {
    /// Reads one log line: `path:line[:col]: [fatal ]error: message`.
    pub fn parse(line: &str) -> Option<CompilerError> {
        let line = line.trim();
        let (location, message) = ["error: ", "fatal error: "]
            .iter()
            .filter_map(|marker| {
                let at = line.find(&format!(": {marker}"))?;
                Some((&line[..at], line[at + 2 + marker.len()..].trim()))
            })
            .min_by_key(|(location, _)| location.len())?;
        let mut parts = location.rsplitn(3, ':');
        let last: u32 = parts.next()?.trim().parse().ok()?;
        let middle = parts.next()?;
        let (file, line_number, column) = match (middle.trim().parse::<u32>(), parts.next()) {
            (Ok(line_number), Some(file)) => (file, line_number, Some(last)),
            _ => {
                // `path:line: error:` (no column): the middle part is the path's end.
                let file = location.rsplit_once(':')?.0;
                (file, last, None)
            }
        };
        let file = file.trim();
        // A path, not a sentence that quotes one (abfleet's own `# not linked: … exited with
        // code 1: ../src/a.h:25:13: error: …` line, ninja's `FAILED:`).
        if file.is_empty() || file.contains(": ") || file.starts_with('#') || file.contains('`') {
            return None;
        }
        Some(CompilerError {
            file: file.to_string(),
            line: line_number,
            column,
            message: message.to_string(),
        })
    }

    /// `file:line` for people.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The first error of each source file, in the order the log shows them.
pub fn first_error_per_file(log: &str) -> Vec<CompilerError> {
    let mut seen: Vec<CompilerError> = Vec::new();
    for error in log.lines().filter_map(CompilerError::parse) {
        if !seen.iter().any(|e| e.file == error.file) {
            seen.push(error);
        }
    }
    seen
}

/// The line saying the toolchain cannot build for a target it was asked for, when the log has
/// one: the build failed on the toolchain's limit, not on the fork's code.
pub fn unsupported_target(log: &str) -> Option<String> {
    const SIGNS: [&str; 7] = [
        "invalid target id",
        "unsupported hip gpu architecture",
        "unsupported cuda gpu architecture",
        "unsupported gpu architecture",
        "cannot find rocm device library for",
        "could not determine device target",
        "invalid device",
    ];
    log.lines()
        .map(str::trim)
        .find(|line| {
            let lower = line.to_ascii_lowercase();
            SIGNS.iter().any(|sign| lower.contains(sign))
        })
        .map(str::to_string)
}

/// Which part of the build a log's error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildPhase {
    /// The backend's kernel build (`commands`): the fork's device code.
    Kernels,
    /// The steps that link the timed binary (`link`): the fork's host code.
    Link,
}

/// One `build` finding per source file that did not compile, `file` already resolved to a
/// path inside the fork's tree (`libvmaf/src/hip/common.h`). Kernel code that does not compile
/// fails; host code that does not compile here warns (it may be this host's headers).
pub fn build_finding(
    backend: &str,
    phase: BuildPhase,
    file: &str,
    error: &CompilerError,
    command: &str,
) -> Finding {
    let location = format!("{file}:{}", error.line);
    let (severity, what) = match phase {
        BuildPhase::Kernels => (Severity::Fail, "kernel source"),
        BuildPhase::Link => (Severity::Warn, "host code"),
    };
    Finding::new(
        backend,
        "build",
        &location,
        severity,
        format!(
            "the fork's {backend} {what} does not compile: {location}: error: {}",
            error.message
        ),
        command,
    )
    .with("file", file)
    .with("line", error.line)
    .with("error", error.message.as_str())
    .with(
        "phase",
        match phase {
            BuildPhase::Kernels => "kernels",
            BuildPhase::Link => "link",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_and_clang_error_lines_parse() {
        let e = CompilerError::parse(
            "../libvmaf/src/hip/common.h:25:13: error: conflicting types for 'hipError_t'",
        )
        .unwrap();
        assert_eq!(e.file, "../libvmaf/src/hip/common.h");
        assert_eq!((e.line, e.column), (25, Some(13)));
        assert_eq!(e.message, "conflicting types for 'hipError_t'");
        assert_eq!(e.location(), "../libvmaf/src/hip/common.h:25");

        let fatal = CompilerError::parse(
            "src/feature/sycl/x.cpp:7:10: fatal error: 'oneapi/mkl.hpp' file not found",
        )
        .unwrap();
        assert_eq!(fatal.message, "'oneapi/mkl.hpp' file not found");
        assert_eq!(fatal.line, 7);

        let no_column = CompilerError::parse("k.cu:12: error: expected ';'").unwrap();
        assert_eq!(
            (no_column.file.as_str(), no_column.line, no_column.column),
            ("k.cu", 12, None)
        );
    }

    #[test]
    fn lines_that_are_not_compiler_errors_are_not_read_as_such() {
        for line in [
            "FAILED: src/libvmaf.so.3.0.0.p/hip_kernel_template.c.o",
            "clang: error: invalid target ID 'gfx942'",
            "ninja: build stopped: subcommand failed.",
            "1 error generated.",
            "warning: foo.c:3:1: something",
            "# not linked: `ninja -C b` exited with code 1: ../src/hip/common.h:25:13: error: conflicting types",
        ] {
            assert_eq!(CompilerError::parse(line), None, "{line}");
        }
    }

    #[test]
    fn the_first_error_of_each_file_in_log_order() {
        let log = "\
[1/3] Compiling C object a.o
../src/a.c:3:1: error: first
../src/a.c:9:1: error: second
In file included from ../src/b.c:1:
../src/hip/common.h:25:13: error: conflicting types
../src/a.c:12:1: error: third
";
        let errors = first_error_per_file(log);
        let shown: Vec<String> = errors
            .iter()
            .map(|e| format!("{} {}", e.location(), e.message))
            .collect();
        assert_eq!(
            shown,
            [
                "../src/a.c:3 first",
                "../src/hip/common.h:25 conflicting types"
            ]
        );
    }

    #[test]
    fn a_toolchain_too_old_for_a_target_is_recognised() {
        let hipcc_5_2 = "$ ninja -C build\nclang: error: invalid target ID 'gfx942'; format is a processor name followed by an optional colon-delimited list of features followed by an enable/disable sign (e.g., 'gfx908:sramecc+:xnack-')\n";
        assert_eq!(
            unsupported_target(hipcc_5_2).unwrap(),
            "clang: error: invalid target ID 'gfx942'; format is a processor name followed by an optional colon-delimited list of features followed by an enable/disable sign (e.g., 'gfx908:sramecc+:xnack-')"
        );
        assert!(
            unsupported_target("nvcc fatal   : Unsupported gpu architecture 'compute_120'")
                .is_some()
        );
        assert!(unsupported_target("../src/a.c:3:1: error: expected ';'").is_none());
    }

    #[test]
    fn kernel_errors_fail_and_host_errors_warn() {
        let e =
            CompilerError::parse("../src/hip/common.h:25:13: error: conflicting types").unwrap();
        let kernel = build_finding(
            "sycl",
            BuildPhase::Kernels,
            "libvmaf/src/a.cpp",
            &e,
            "sh -c …",
        );
        assert_eq!(kernel.severity, Severity::Fail);
        assert_eq!(kernel.subject, "libvmaf/src/a.cpp:25");
        let host = build_finding(
            "hip",
            BuildPhase::Link,
            "libvmaf/src/hip/common.h",
            &e,
            "ninja",
        );
        assert_eq!(host.severity, Severity::Warn);
        assert_eq!(host.evidence["phase"], "link");
        assert!(
            host.verdict
                .contains("libvmaf/src/hip/common.h:25: error: conflicting types"),
            "{}",
            host.verdict
        );
    }
}
