//! Hardware generations: the keys that say which hosts measure alike (`cpu/x86-64-v4/zen4`,
//! `cpu/arm/neoverse-v2`, `cuda/sm_90`, `hip/gfx942`, `sycl/dg2`), and the selectors a spec
//! uses to pick them. An agent computes its generations from its probes; the coordinator
//! only compares keys.

use serde::{Deserialize, Serialize};

/// One backend an agent can run, on one kind of silicon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// `backend/...`: the report never mixes cells of different keys in one table.
    pub key: String,
    /// `cpu`, `cuda`, `hip`, `sycl`.
    pub backend: String,
    /// `intel`, `amd`, `arm`, `nvidia`, …
    pub vendor: String,
    /// A hash of what makes two hosts measure alike (key, SKU, core/SM/CU count, driver,
    /// power limit): hosts may pool results only when it is equal.
    pub silicon_id: String,
    /// For people: `AMD EPYC 9R14 (Zen 4), 2 cores`.
    pub description: String,
    /// True when the inventory came from recorded probe output (`--probes`), not live tools:
    /// the agent's timed CPU cells still ran on its real CPU.
    #[serde(default)]
    pub simulated: bool,
}

/// `*` matches any run of characters (including `/`), `?` one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_keys() {
        assert!(glob_match("cpu/*", "cpu/x86-64-v4/zen4"));
        assert!(glob_match("*/zen?", "cpu/x86-64-v4/zen4"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("cuda/*", "cpu/arm/neoverse-v2"));
        assert!(!glob_match("cpu/arm/neoverse-v?", "cpu/arm/neoverse-v20"));
        assert!(glob_match("cpu/arm/*", "cpu/arm/neoverse-v2"));
    }
}
