//! Reading a CUDA build's own log. Ninja prints one status line per target (`[5/21] Generating
//! src/cu_ptx_target_motion_score with a custom command`) followed by what that target's
//! command printed, so the log splits into one part per target ([`split_by_target`]), and each
//! part is matched to the artifact it built ([`target_of_artifact`]). In each part, ptxas says
//! per kernel and architecture what it used (`-Xptxas -v`, read by
//! [`parse_ptxas_log`](super::cuda_tools::parse_ptxas_log)) and warns about the
//! `__launch_bounds__` it could not honour ([`parse_ptxas_warnings`]). Pure text in, data out.

use serde::{Deserialize, Serialize};

/// One target's part of a build log: the target ninja named (`cu_ptx_target_motion_score`),
/// or `None` for what came before the first status line (or a log without any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetLog<'t> {
    pub target: Option<String>,
    pub text: &'t str,
}

/// Splits a build log at ninja's status lines. A log with none (make, a script) is one part.
pub fn split_by_target(log: &str) -> Vec<TargetLog<'_>> {
    let mut parts = Vec::new();
    let mut target: Option<String> = None;
    let mut start = 0;
    let mut offset = 0;
    for line in log.split_inclusive('\n') {
        if let Some(next) = ninja_target(line) {
            if offset > start || target.is_some() {
                parts.push(TargetLog {
                    target: target.take(),
                    text: &log[start..offset],
                });
            }
            target = Some(next);
            start = offset + line.len();
        }
        offset += line.len();
    }
    if offset > start || target.is_some() {
        parts.push(TargetLog {
            target,
            text: &log[start..],
        });
    }
    parts
}

/// The target of a ninja status line: `[5/21] Generating src/cu_ptx_target_x with a custom
/// command` → `cu_ptx_target_x`; `[3/9] Compiling C object src/a.c.o` → `a.c.o` (the last
/// word's file name). `None` for any other line.
fn ninja_target(line: &str) -> Option<String> {
    let rest = line.trim_end().strip_prefix('[')?;
    let (counts, description) = rest.split_once("] ")?;
    let (done, total) = counts.split_once('/')?;
    if done.parse::<u32>().is_err() || total.parse::<u32>().is_err() {
        return None;
    }
    let description = description
        .strip_suffix(" with a custom command")
        .unwrap_or(description);
    let word = description.split_whitespace().last()?;
    Some(word.rsplit('/').next().unwrap_or(word).to_string())
}

/// Which of `stems` (artifact file names without extension: `motion_score`, `psnr_score`) a
/// target built: the longest stem the target's name is or ends with after a `_`, `-` or `/`
/// (`cu_ptx_target_float_psnr_score` built `float_psnr_score`, not `psnr_score`). `None` when
/// no stem matches.
pub fn target_of_artifact(target: &str, stems: &[String]) -> Option<usize> {
    stems
        .iter()
        .enumerate()
        .filter(|(_, stem)| {
            !stem.is_empty()
                && (target == stem.as_str()
                    || target.strip_suffix(stem.as_str()).is_some_and(|head| {
                        head.ends_with('_') || head.ends_with('-') || head.ends_with('/')
                    })
                    || target.strip_prefix(stem.as_str()).is_some_and(|tail| {
                        tail.starts_with('.') // `motion_score.fatbin`
                    }))
        })
        .max_by_key(|(_, stem)| stem.len())
        .map(|(index, _)| index)
}

/// A warning ptxas printed about one kernel, with the architecture it was compiling for when
/// the log says (only `-Xptxas -v` prints the `Compiling entry function` lines that tell).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxasWarning {
    pub kernel: String,
    pub arch: Option<String>,
    /// The warning as ptxas printed it, without the `ptxas warning :` prefix.
    pub message: String,
}

impl PtxasWarning {
    /// ptxas could not honour the kernel's `__launch_bounds__` minimum blocks per SM
    /// (`.minnctapersm will be ignored`): the register cap that minimum sets is not applied.
    pub fn ignores_launch_bounds(&self) -> bool {
        self.message.contains("minnctapersm will be ignored")
    }
}

/// Every per-kernel `ptxas warning` of a log. ptxas runs once per architecture and prints its
/// warnings before the `Compiling entry function 'K' for 'sm_XY'` lines of that run, so a
/// warning about `K` belongs to the architecture of the next such line naming `K`.
pub fn parse_ptxas_warnings(text: &str) -> Vec<PtxasWarning> {
    let mut warnings: Vec<PtxasWarning> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(message) = line
            .strip_prefix("ptxas warning")
            .map(|rest| rest.trim_start().trim_start_matches(':').trim())
        {
            if let Some(kernel) = entry_named_in(message) {
                warnings.push(PtxasWarning {
                    kernel,
                    arch: None,
                    message: message.to_string(),
                });
            }
        } else if let Some(rest) = line
            .strip_prefix("ptxas info")
            .map(|rest| rest.trim_start().trim_start_matches(':').trim())
            .and_then(|info| info.strip_prefix("Compiling entry function"))
        {
            let mut quoted = rest.split('\'').skip(1).step_by(2);
            if let (Some(kernel), Some(arch)) = (quoted.next(), quoted.next()) {
                for warning in warnings
                    .iter_mut()
                    .filter(|w| w.arch.is_none() && w.kernel == kernel)
                {
                    warning.arch = Some(arch.to_string());
                }
            }
        }
    }
    warnings
}

/// The kernel a warning names: `… for entry NAME is out of range …`, `… in function 'NAME'`.
fn entry_named_in(message: &str) -> Option<String> {
    if let Some((_, rest)) = message.split_once("for entry ") {
        let name = rest.split_whitespace().next()?;
        return Some(name.trim_matches(['\'', '.', ',']).to_string());
    }
    let (_, rest) = message.split_once("function '")?;
    let (name, _) = rest.split_once('\'')?;
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retune::cuda_tools::parse_ptxas_log;

    const LOG_13_5: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-13.5-pypi-fork/ninja-build-excerpt.log"
    ));
    const LOG_13_0: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-13.0-pypi-fork/ninja-build-excerpt.log"
    ));

    #[test]
    fn the_fork_build_log_splits_per_kernel_target() {
        let parts = split_by_target(LOG_13_5);
        let targets: Vec<Option<&str>> = parts.iter().map(|p| p.target.as_deref()).collect();
        assert_eq!(
            targets,
            [
                None,
                Some("cu_ptx_target_motion_score"),
                Some("cu_ptx_target_ssimulacra2_blur"),
                Some("cu_ptx_target_adm_cm"),
            ]
        );
        assert!(parts[0].text.starts_with("ninja: Entering directory"));
        assert!(parts[1].text.contains("calculate_motion_score_kernel_8bpc"));
        assert!(!parts[1].text.contains("ssimulacra2_blur_h"));
        let joined: String = parts.iter().map(|p| p.text).collect();
        assert_eq!(
            joined.lines().count() + 3,
            LOG_13_5.lines().count(),
            "only the three status lines are left out"
        );
    }

    #[test]
    fn a_log_without_status_lines_is_one_part() {
        let parts = split_by_target("ptxas info    : Used 3 registers\n");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].target, None);
        assert!(split_by_target("").is_empty());
    }

    #[test]
    fn targets_match_the_longest_artifact_stem() {
        let stems: Vec<String> = ["psnr_score", "float_psnr_score", "motion_score", "adm_cm"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            target_of_artifact("cu_ptx_target_float_psnr_score", &stems),
            Some(1)
        );
        assert_eq!(
            target_of_artifact("cu_ptx_target_psnr_score", &stems),
            Some(0)
        );
        assert_eq!(target_of_artifact("motion_score.fatbin", &stems), Some(2));
        assert_eq!(target_of_artifact("cu_ptx_target_adm_cm_x", &stems), None);
        assert_eq!(target_of_artifact("notadm_cm", &stems), None);
    }

    #[test]
    fn ignored_launch_bounds_of_the_real_fork_per_architecture() {
        let warnings = parse_ptxas_warnings(LOG_13_5);
        let ignored: Vec<(&str, Option<&str>)> = warnings
            .iter()
            .filter(|w| w.ignores_launch_bounds())
            .map(|w| (w.kernel.as_str(), w.arch.as_deref()))
            .collect();
        // (256, 8) asks for 2048 threads per SM, (64, 32) for 32 blocks: more than sm_75
        // (1024 threads, 16 blocks), sm_86 (1536, 16), sm_89 (1536, 24) and sm_120 (1536)
        // hold; ptxas 13.5 says so on exactly those four, for all four kernels.
        for kernel in [
            "calculate_motion_score_kernel_8bpc",
            "calculate_motion_score_kernel_16bpc",
            "ssimulacra2_blur_h",
            "ssimulacra2_blur_v",
        ] {
            let archs: Vec<Option<&str>> = ignored
                .iter()
                .filter(|(k, _)| *k == kernel)
                .map(|(_, a)| *a)
                .collect();
            assert_eq!(
                archs,
                [Some("sm_75"), Some("sm_86"), Some("sm_89"), Some("sm_120")],
                "{kernel}"
            );
        }
        assert_eq!(ignored.len(), 16);
        assert!(warnings[0]
            .message
            .starts_with("Value of threads per SM for entry"));
    }

    #[test]
    fn the_same_warnings_from_nvcc_13_0_and_its_registers_differ() {
        let old = parse_ptxas_warnings(LOG_13_0);
        assert_eq!(old.iter().filter(|w| w.ignores_launch_bounds()).count(), 16);
        let find = |log: &str, kernel: &str, arch: &str| {
            parse_ptxas_log(log)
                .into_iter()
                .find(|k| k.name == kernel && k.arch == arch)
                .unwrap()
                .registers
        };
        // ptxas 13.5 gives the kernel 14 registers fewer on sm_120, none on sm_89.
        assert_eq!(find(LOG_13_0, "adm_cm_line_kernel_8", "sm_120"), 110);
        assert_eq!(find(LOG_13_5, "adm_cm_line_kernel_8", "sm_120"), 96);
        assert_eq!(find(LOG_13_0, "adm_cm_line_kernel_8", "sm_89"), 114);
        assert_eq!(find(LOG_13_5, "adm_cm_line_kernel_8", "sm_89"), 114);
    }

    #[test]
    fn a_warning_without_verbose_output_has_no_architecture() {
        let warnings = parse_ptxas_warnings(
            "ptxas warning : Value of threads per SM for entry k is out of range. .minnctapersm will be ignored\n\
             ptxas warning : Registers are spilled to local memory in function 'spiller', 8 bytes spill stores, 8 bytes spill loads\n",
        );
        assert_eq!(warnings.len(), 2);
        assert_eq!(
            (warnings[0].kernel.as_str(), warnings[0].arch.as_deref()),
            ("k", None)
        );
        assert!(warnings[0].ignores_launch_bounds());
        assert_eq!(warnings[1].kernel, "spiller");
        assert!(!warnings[1].ignores_launch_bounds());
    }
}
