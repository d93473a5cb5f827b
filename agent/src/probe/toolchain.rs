//! The toolchain fingerprint: the first version line of each compiler and build tool that
//! exists on the host (cc, gcc, clang, nvcc, hipcc, icpx, glslc, meson, ninja, nasm).

use serde::{Deserialize, Serialize};

/// Each tool and the arguments that make it print its version.
pub const TOOLS: &[(&str, &[&str])] = &[
    ("cc", &["--version"]),
    ("gcc", &["--version"]),
    ("clang", &["--version"]),
    ("nvcc", &["--version"]),
    ("hipcc", &["--version"]),
    ("icpx", &["--version"]),
    ("glslc", &["--version"]),
    ("meson", &["--version"]),
    ("ninja", &["--version"]),
    ("nasm", &["-v"]),
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolVersion {
    pub tool: String,
    /// The first dotted version number in the output, e.g. `12.2.0`, `11.8.89`.
    pub version: Option<String>,
    /// The line it came from (for nvcc the `release` line, not the banner).
    pub line: String,
}

/// Reads a tool's version output; `None` when it printed nothing.
pub fn parse_tool_version(tool: &str, text: &str) -> Option<ToolVersion> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // nvcc and hipcc print a banner first; their version is on a later line.
    let line = lines
        .iter()
        .find(|l| l.contains("release") || l.contains("HIP version"))
        .or_else(|| lines.iter().find(|l| first_version(l).is_some()))
        .or(lines.first())?;
    Some(ToolVersion {
        tool: tool.to_string(),
        version: first_version(line),
        line: line.to_string(),
    })
}

fn first_version(line: &str) -> Option<String> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|word| word.contains('.') && word.split('.').all(|p| !p.is_empty()))
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes");

    #[test]
    fn recorded_nvcc_and_hipcc_versions_parse() {
        let nvcc =
            std::fs::read_to_string(format!("{DIR}/toolchain-cuda-11.8-debian/nvcc-version.txt"))
                .unwrap();
        let parsed = parse_tool_version("nvcc", &nvcc).unwrap();
        assert!(
            parsed.version.as_deref().unwrap().starts_with("11.8"),
            "{parsed:?}"
        );
        let hipcc =
            std::fs::read_to_string(format!("{DIR}/toolchain-hip-5.2-debian/hipcc-version.txt"))
                .unwrap();
        let parsed = parse_tool_version("hipcc", &hipcc).unwrap();
        assert!(
            parsed.version.as_deref().unwrap().starts_with("5.2"),
            "{parsed:?}"
        );
    }

    #[test]
    fn recorded_gcc_banner_and_empty_output() {
        let gcc = std::fs::read_to_string(format!("{DIR}/toolchain-gcc-12-debian/gcc-version.txt"))
            .unwrap();
        let parsed = parse_tool_version("gcc", &gcc).unwrap();
        assert_eq!(parsed.version.as_deref(), Some("12.2.0"), "{parsed:?}");
        assert!(parsed.line.starts_with("gcc (Debian"), "{parsed:?}");
        assert_eq!(parse_tool_version("gcc", "\n"), None);
    }
}
