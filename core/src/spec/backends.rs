//! `[backends.*]`: the per-backend part of a spec that drives the retuning checks
//! (docs/retuning.md). The fork is built once per GPU backend, each build in its own
//! directory, with the backend's extra arguments appended to the fork's first build
//! command or with the backend's own commands ([`GpuBackendSpec::recipe`]); the CPU entry
//! configures the ISA dispatch sweep.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::model::BuildRecipe;

/// Every backend the spec configures; an absent entry means "no checks for it".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuDispatchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<GpuBackendSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<GpuBackendSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sycl: Option<GpuBackendSpec>,
    /// The fork's Vulkan backend (docs/retuning.md, "Vulkan"): built with Vulkan on, each
    /// workload run with `--backend vulkan` and its features renamed by `feature_suffix`,
    /// and gated against the fork's own CPU path on the same binary (`gate_against_cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulkan: Option<GpuBackendSpec>,
}

impl BackendsSpec {
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none()
            && self.cuda.is_none()
            && self.hip.is_none()
            && self.sycl.is_none()
            && self.vulkan.is_none()
    }

    /// The GPU backend's entry by name (`cuda`, `hip`, `sycl`).
    pub fn gpu(&self, backend: &str) -> Option<&GpuBackendSpec> {
        match backend {
            "cuda" => self.cuda.as_ref(),
            "hip" => self.hip.as_ref(),
            "sycl" => self.sycl.as_ref(),
            "vulkan" => self.vulkan.as_ref(),
            _ => None,
        }
    }
}

/// The CPU ISA dispatch sweep: one workload on one fixture, timed on the fork's binary with
/// the ISA restricted level by level through its `--cpumask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuDispatchSpec {
    /// The fixture the sweep runs on (default: the spec's first fixture).
    #[serde(default)]
    pub fixture: String,
    /// The workload the sweep times (default: the spec's first workload).
    #[serde(default)]
    pub workload: String,
    /// The levels, lowest first. Empty: the defaults for the host's architecture
    /// ([`default_levels`]).
    #[serde(default)]
    pub levels: Vec<DispatchLevel>,
    /// Timed runs per level after one discarded warm-up (at least 3).
    #[serde(default = "default_sweep_runs")]
    pub runs: u32,
    /// The option that restricts the ISA (`--cpumask` for both vmaf CLIs).
    #[serde(default = "default_cpumask_option")]
    pub cpumask_option: String,
    /// Optional command printing `{"compiled": [levels]}` (e.g. `["{binary}", "--simd_info"]`);
    /// without it the compiled-in levels come from the output's `simd_compiled`, if any.
    #[serde(default)]
    pub simd_info: Vec<String>,
    /// Arguments added to the fork's runs of the untimed ISA checks (every workload at every
    /// level, and under every vector length an emulated host has): `["--precision", "max"]`
    /// makes "bit-identical" mean all 17 digits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_args: Vec<String>,
    /// A folder of the fork's tree whose SIMD sources are scanned on ARM generations
    /// (`libvmaf/src`): code with x86 SIMD and no ARM path, ARM code compiled and never called
    /// (`core::retune::simd_sources`). Empty: no scan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sources: String,
}

/// One step of the sweep: a name for people and the `--cpumask` value that selects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchLevel {
    pub name: String,
    pub cpumask: String,
}

impl DispatchLevel {
    fn new(name: &str, cpumask: &str) -> Self {
        Self {
            name: name.into(),
            cpumask: cpumask.into(),
        }
    }
}

/// libvmaf's `--cpumask` is a mask of *disabled* flags. x86: SSE2 1, SSSE3 2, SSE4.1 4,
/// AVX2 8, AVX-512 16, AVX-512ICL 32, so 63 is scalar, 48 stops at AVX2, 0 is everything.
/// aarch64: NEON 1, SVE2 2 (the fork's `arm/cpu.h`), so 63 is scalar, 2 stops at NEON and
/// 0 is everything.
pub fn default_levels(arch: &str) -> Vec<DispatchLevel> {
    match arch {
        "aarch64" | "arm64" => vec![
            DispatchLevel::new("scalar", "63"),
            DispatchLevel::new("neon", "2"),
            DispatchLevel::new("all", "0"),
        ],
        _ => vec![
            DispatchLevel::new("scalar", "63"),
            DispatchLevel::new("avx2", "48"),
            DispatchLevel::new("all", "0"),
        ],
    }
}

fn default_sweep_runs() -> u32 {
    3
}

fn default_cpumask_option() -> String {
    "--cpumask".into()
}

/// A GPU backend's build and what its checks read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuBackendSpec {
    /// Appended to the fork's first build command (`-Denable_cuda=true`, `BACKEND=cuda`).
    #[serde(default)]
    pub build_args: Vec<String>,
    /// The backend's own build commands, replacing the fork's (`meson setup` with the
    /// backend on, then `ninja` of the kernel targets only); excludes `build_args`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Vec<String>>,
    /// Steps after `commands` that link the timed binary. A failure here is not a failed
    /// build: the artifacts are checked, the cells are skipped with the link error
    /// (the fork's CUDA host code needs newer ffnvcodec headers than Debian 12 has).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link: Vec<Vec<String>>,
    /// The binary the backend's build makes, when not the fork's `binary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<PathBuf>,
    /// Build environment added to the fork's (`NVCC_APPEND_FLAGS = "-Xptxas=-v"`, so the
    /// build log says per kernel what ptxas used and warns about ignored launch bounds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Built files the checks inspect (libraries, objects, binaries, `-Xptxas -v` logs),
    /// relative to the backend's source tree.
    #[serde(default)]
    pub artifacts: Vec<PathBuf>,
    /// The block size the kernels launch with, for occupancy (CUDA; default 128).
    #[serde(default = "default_block_threads")]
    pub block_threads: u32,
    /// Known launch geometry per kernel (from the fork's instrumentation or `ncu`).
    #[serde(default)]
    pub launch: Vec<KernelLaunch>,
    /// HIP: the fork's `hip_gfx_targets` as configured (empty list: autodetect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gfx_targets: Option<Vec<String>>,
    /// HIP: the wavefront size the fork's kernels are written for (their reductions shuffle
    /// over that many lanes). A code object compiled for another size (RDNA's wave32 default)
    /// is a failed `wave_size` finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_size: Option<u32>,
    /// SYCL: the fork's `sycl_icpx_aot_targets` (empty: SPIR-V JIT only).
    #[serde(default)]
    pub aot_targets: Vec<String>,
    /// SYCL: the sub-group sizes the kernels require (`reqd_sub_group_size`).
    #[serde(default)]
    pub subgroup_sizes: Vec<u32>,
    /// Time the workloads with `--backend NAME` on this backend (default true).
    #[serde(default = "default_true")]
    pub timed: bool,
    /// The command that fingerprints the backend's compiler (default `nvcc --version`,
    /// `hipcc --version`, `icpx --version`): it replaces the fork's toolchain command for
    /// this build, so a compiler bump rebuilds and shows in the report.
    #[serde(default)]
    pub toolchain: Vec<String>,
    /// Appended to the feature name after each `--feature` of a workload's arguments when
    /// the backend runs it (`_vulkan`: the fork runs its Vulkan kernel for `psnr` only as
    /// `--feature psnr_vulkan`; `--backend vulkan --feature psnr` quietly runs the CPU one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub feature_suffix: String,
    /// Run each workload once more on the same binary with `--backend cpu` and the plain
    /// feature names, and gate the backend's scores against it (the spec's
    /// `max_score_delta`): a backend that computes something else fails parity.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate_against_cpu: bool,
}

impl GpuBackendSpec {
    /// A workload's arguments as this backend runs them: each `--feature NAME` (or
    /// `--feature=NAME`, options after `=` kept) with `feature_suffix` appended to NAME.
    pub fn backend_args(&self, args: &[String]) -> Vec<String> {
        if self.feature_suffix.is_empty() {
            return args.to_vec();
        }
        let suffixed = |value: &str| match value.split_once('=') {
            Some((name, options)) => format!("{name}{}={options}", self.feature_suffix),
            None => format!("{value}{}", self.feature_suffix),
        };
        let mut out = Vec::with_capacity(args.len());
        let mut next_is_feature = false;
        for arg in args {
            if next_is_feature {
                out.push(suffixed(arg));
                next_is_feature = false;
            } else if arg == "--feature" {
                out.push(arg.clone());
                next_is_feature = true;
            } else if let Some(value) = arg.strip_prefix("--feature=") {
                out.push(format!("--feature={}", suffixed(value)));
            } else {
                out.push(arg.clone());
            }
        }
        out
    }

    /// The recipe that builds the fork for `backend`: the fork's own with `build_args`
    /// appended to its first command, or `commands` instead of its commands; `env` added to
    /// its environment, `link` and `binary` as given; the toolchain command is this
    /// backend's compiler, so a compiler bump rebuilds.
    pub fn recipe(&self, backend: &str, fork: &BuildRecipe) -> BuildRecipe {
        let mut recipe = fork.clone();
        if self.commands.is_empty() {
            if let Some(first) = recipe.commands.first_mut() {
                first.extend(self.build_args.iter().cloned());
            }
        } else {
            recipe.commands = self.commands.clone();
        }
        recipe
            .env
            .extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        recipe.link = self.link.clone();
        if let Some(binary) = &self.binary {
            recipe.binary = binary.clone();
        }
        recipe.toolchain = if self.toolchain.is_empty() {
            default_toolchain(backend)
        } else {
            self.toolchain.clone()
        };
        recipe
    }
}

/// The default compiler fingerprint of a GPU backend.
pub fn default_toolchain(backend: &str) -> Vec<String> {
    let compiler = match backend {
        "cuda" => "nvcc",
        "hip" => "hipcc",
        "vulkan" => "glslc",
        _ => "icpx",
    };
    vec![compiler.to_string(), "--version".to_string()]
}

fn default_block_threads() -> u32 {
    128
}

fn default_true() -> bool {
    true
}

/// One kernel's launch: `grid_blocks` blocks of `block_threads` threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLaunch {
    pub kernel: String,
    pub grid_blocks: u64,
    pub block_threads: u32,
}

impl BackendsSpec {
    /// Checks names and numbers and fills the sweep's defaults from the spec's fixtures and
    /// workloads. Errors name the key and say what to write instead.
    pub(super) fn validate(
        mut self,
        fixtures: &[String],
        workloads: &[String],
    ) -> Result<BackendsSpec, String> {
        if let Some(cpu) = &mut self.cpu {
            if cpu.fixture.is_empty() {
                cpu.fixture = fixtures.first().cloned().unwrap_or_default();
            }
            if cpu.workload.is_empty() {
                cpu.workload = workloads.first().cloned().unwrap_or_default();
            }
            if !fixtures.contains(&cpu.fixture) {
                return Err(format!(
                    "[backends.cpu] fixture `{}` is not a [[fixtures]] name; use one of {}",
                    cpu.fixture,
                    fixtures.join(", ")
                ));
            }
            if !workloads.contains(&cpu.workload) {
                return Err(format!(
                    "[backends.cpu] workload `{}` is not a [[workloads]] name; use one of {}",
                    cpu.workload,
                    workloads.join(", ")
                ));
            }
            if cpu.runs < 3 {
                return Err(format!(
                    "[backends.cpu] runs = {} is too few; a median needs at least 3 timed runs",
                    cpu.runs
                ));
            }
            let mut names = BTreeSet::new();
            for level in &cpu.levels {
                if level.name.trim().is_empty() || level.cpumask.trim().is_empty() {
                    return Err("[backends.cpu] every level needs a name and a cpumask, e.g. { name = \"avx2\", cpumask = \"48\" }".into());
                }
                if !names.insert(level.name.as_str()) {
                    return Err(format!(
                        "[backends.cpu] level `{}` is listed twice",
                        level.name
                    ));
                }
            }
            if cpu.levels.len() == 1 {
                return Err("[backends.cpu] one level cannot be compared; list at least two (the first is the baseline, usually scalar = \"63\") or leave levels out for the defaults".into());
            }
        }
        for (name, gpu) in [
            ("cuda", &self.cuda),
            ("hip", &self.hip),
            ("sycl", &self.sycl),
            ("vulkan", &self.vulkan),
        ] {
            let Some(gpu) = gpu else { continue };
            if gpu.feature_suffix.contains(char::is_whitespace) || gpu.feature_suffix.contains('=')
            {
                return Err(format!(
                    "[backends.{name}] feature_suffix `{}` must be a plain name suffix such as \"_vulkan\"",
                    gpu.feature_suffix
                ));
            }
            if gpu.build_args.iter().any(|a| a.trim().is_empty()) {
                return Err(format!(
                    "[backends.{name}] build_args has an empty argument"
                ));
            }
            if !gpu.commands.is_empty() && !gpu.build_args.is_empty() {
                return Err(format!(
                    "[backends.{name}] has both commands and build_args: build_args extends the fork's first command, commands replace them; put the arguments into commands"
                ));
            }
            for (key, steps) in [("commands", &gpu.commands), ("link", &gpu.link)] {
                if steps
                    .iter()
                    .any(|argv| argv.first().is_none_or(|p| p.trim().is_empty()))
                {
                    return Err(format!(
                        "[backends.{name}] {key} has an empty command; each is an argv list such as [\"ninja\", \"-C\", \"build\"]"
                    ));
                }
            }
            if let Some(binary) = gpu.binary.as_ref().filter(|b| b.is_absolute()) {
                return Err(format!(
                    "[backends.{name}] binary `{}` must be relative to the backend's source tree",
                    binary.display()
                ));
            }
            if gpu.env.keys().any(|k| k.is_empty() || k.contains('=')) {
                return Err(format!(
                    "[backends.{name}] env has an empty name or one with `=`"
                ));
            }
            if let Some(path) = gpu.artifacts.iter().find(|p| p.is_absolute()) {
                return Err(format!(
                    "[backends.{name}] artifact `{}` must be relative to the backend's source tree",
                    path.display()
                ));
            }
            if gpu.block_threads == 0 || gpu.block_threads > 1024 {
                return Err(format!(
                    "[backends.{name}] block_threads = {} must be between 1 and 1024",
                    gpu.block_threads
                ));
            }
            if let Some(launch) = gpu
                .launch
                .iter()
                .find(|l| l.grid_blocks == 0 || l.block_threads == 0)
            {
                return Err(format!(
                    "[backends.{name}] launch of `{}` needs non-zero grid_blocks and block_threads",
                    launch.kernel
                ));
            }
            if name != "hip" && (gpu.gfx_targets.is_some() || gpu.wave_size.is_some()) {
                return Err(format!(
                    "[backends.{name}] has gfx_targets/wave_size, which only [backends.hip] takes"
                ));
            }
            if let Some(size) = gpu.wave_size.filter(|s| *s != 32 && *s != 64) {
                return Err(format!(
                    "[backends.hip] wave_size = {size}: AMD GPUs run wave32 or wave64; write 32 or 64"
                ));
            }
            if name != "sycl" && (!gpu.aot_targets.is_empty() || !gpu.subgroup_sizes.is_empty()) {
                return Err(format!(
                    "[backends.{name}] has aot_targets/subgroup_sizes, which only [backends.sycl] takes"
                ));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn parse(text: &str) -> Result<BackendsSpec, String> {
        let raw: BackendsSpec = toml::from_str(text).map_err(|e| e.to_string())?;
        raw.validate(&names(&["small", "big"]), &names(&["psnr", "float_ssim"]))
    }

    #[test]
    fn the_sweep_defaults_to_the_first_fixture_and_workload() {
        let spec = parse("[cpu]\n").unwrap();
        let cpu = spec.cpu.unwrap();
        assert_eq!(
            (cpu.fixture.as_str(), cpu.workload.as_str()),
            ("small", "psnr")
        );
        assert_eq!(cpu.runs, 3);
        assert_eq!(cpu.cpumask_option, "--cpumask");
    }

    #[test]
    fn bad_entries_say_what_to_write() {
        let err = parse("[cpu]\nworkload = \"vif\"\n").unwrap_err();
        assert!(err.contains("use one of psnr, float_ssim"), "{err}");
        let err = parse("[cpu]\nlevels = [{ name = \"scalar\", cpumask = \"63\" }]\n").unwrap_err();
        assert!(err.contains("at least two"), "{err}");
        let err = parse("[cuda]\nbuild_args = [\"BACKEND=cuda\"]\naot_targets = [\"dg2\"]\n")
            .unwrap_err();
        assert!(err.contains("only [backends.sycl]"), "{err}");
        let err = parse("[hip]\nbuild_args = []\nartifacts = [\"/abs/lib.o\"]\n").unwrap_err();
        assert!(err.contains("relative"), "{err}");
        assert!(parse("[metal]\nbuild_args = []\n").is_err());
    }

    #[test]
    fn a_backend_recipe_replaces_or_extends_the_forks() {
        let fork = BuildRecipe {
            commands: vec![
                names(&["meson", "setup", "build"]),
                names(&["ninja", "-C", "build"]),
            ],
            binary: "build/tools/vmaf".into(),
            env: BTreeMap::from([("CC".to_string(), "gcc".to_string())]),
            toolchain: names(&["cc", "--version"]),
            link: Vec::new(),
        };
        let extended = parse("[cuda]\nbuild_args = [\"-Denable_cuda=true\"]\n")
            .unwrap()
            .cuda
            .unwrap()
            .recipe("cuda", &fork);
        assert_eq!(
            extended.commands[0],
            names(&["meson", "setup", "build", "-Denable_cuda=true"])
        );
        assert_eq!(extended.commands[1], fork.commands[1]);
        assert_eq!(extended.toolchain, names(&["nvcc", "--version"]));
        assert_eq!(extended.binary, fork.binary);
        let replaced = parse(
            "[cuda]\ncommands = [[\"ninja\", \"-C\", \"b\", \"src/a.fatbin\"]]\nlink = [[\"ninja\", \"-C\", \"b\"]]\nbinary = \"b/tools/vmaf\"\nenv = { NVCC_APPEND_FLAGS = \"-Xptxas=-v\" }\n",
        )
        .unwrap()
        .cuda
        .unwrap()
        .recipe("cuda", &fork);
        assert_eq!(
            replaced.commands,
            vec![names(&["ninja", "-C", "b", "src/a.fatbin"])]
        );
        assert_eq!(replaced.link, vec![names(&["ninja", "-C", "b"])]);
        assert_eq!(replaced.binary, PathBuf::from("b/tools/vmaf"));
        assert_eq!(replaced.env.len(), 2, "{:?}", replaced.env);
        let err = parse("[cuda]\ncommands = [[\"make\"]]\nbuild_args = [\"X=1\"]\n").unwrap_err();
        assert!(err.contains("both commands and build_args"), "{err}");
        let err = parse("[cuda]\nlink = [[]]\n").unwrap_err();
        assert!(err.contains("link has an empty command"), "{err}");
    }

    #[test]
    fn a_feature_suffix_renames_every_feature_the_backend_runs() {
        let spec =
            parse("[vulkan]\nfeature_suffix = \"_vulkan\"\ngate_against_cpu = true\n").unwrap();
        let vulkan = spec.vulkan.clone().unwrap();
        assert!(vulkan.gate_against_cpu);
        let args: Vec<String> = [
            "--no_prediction",
            "--feature",
            "psnr",
            "--feature=cambi=tvi:0.1",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            vulkan.backend_args(&args),
            [
                "--no_prediction",
                "--feature",
                "psnr_vulkan",
                "--feature=cambi_vulkan=tvi:0.1"
            ]
        );
        let model: Vec<String> = ["--model", "version=vmaf_v0.6.1"]
            .map(String::from)
            .to_vec();
        assert_eq!(vulkan.backend_args(&model), model);
        assert_eq!(
            spec.gpu("vulkan").map(|g| g.feature_suffix.as_str()),
            Some("_vulkan")
        );
    }

    #[test]
    fn default_levels_follow_libvmaf_cpumask() {
        let x86: Vec<_> = default_levels("x86_64")
            .into_iter()
            .map(|l| (l.name, l.cpumask))
            .collect();
        assert_eq!(
            x86,
            [
                ("scalar".into(), "63".into()),
                ("avx2".into(), "48".into()),
                ("all".into(), "0".into())
            ]
        );
        let arm: Vec<String> = default_levels("aarch64")
            .into_iter()
            .map(|l| l.cpumask)
            .collect();
        assert_eq!(arm, ["63", "2", "0"]);
    }
}
