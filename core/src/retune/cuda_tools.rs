//! Readers of the CUDA toolchain's own output — `cuobjdump --list-elf`, `--list-ptx`,
//! `--dump-resource-usage`, `nvcc --list-gpu-arch` and the `-Xptxas -v` build log — and the
//! `cuda` `arch_coverage` check built on them. Pure text in, data out; the agent runs the tools.
//!
//! Compatibility rules used by [`arch_coverage`] (CUDA C++ Programming Guide, "Binary
//! Compatibility" and "PTX Compatibility"; CUDA Compatibility guide): a cubin (SASS) for
//! `sm_XY` runs on devices of compute capability `X.Z` with `Z >= Y` only, i.e. the same major
//! version and an equal or higher minor (an `sm_86` cubin runs on `sm_89`, not on `sm_90`); an
//! arch-specific cubin (`sm_90a`) runs on exactly that architecture; PTX for `compute_XY` is
//! JIT-compiled by the driver for any device of compute capability `>= X.Y`. When both a
//! compatible cubin and PTX are present the driver loads the cubin.

use crate::finding::{Finding, Severity};
use crate::retune::KernelResources;

/// The SASS architectures of `cuobjdump --list-elf` (lines like
/// `ELF file    1: k.1.sm_70.cubin`), as `sm_70`, sorted by number, without duplicates.
pub fn parse_list_elf(text: &str) -> Vec<String> {
    let archs = listed_files(text, "ELF file", ".cubin")
        .filter_map(|file| arch_component(file, "sm_"))
        .map(str::to_string);
    sorted_archs(archs)
}

/// The PTX architectures of `cuobjdump --list-ptx` (lines like `PTX file    1: k.1.sm_90.ptx`),
/// as `compute_90` (cuobjdump names PTX by the `sm_` it targets), sorted, without duplicates.
pub fn parse_list_ptx(text: &str) -> Vec<String> {
    let archs = listed_files(text, "PTX file", ".ptx")
        .filter_map(|file| arch_component(file, "sm_").or_else(|| arch_component(file, "compute_")))
        .map(|arch| {
            let digits = arch
                .trim_start_matches("sm_")
                .trim_start_matches("compute_");
            format!("compute_{digits}")
        });
    sorted_archs(archs)
}

/// The virtual architectures `nvcc --list-gpu-arch` prints, one `compute_XX` a line, sorted,
/// without duplicates. Other lines (warnings) are ignored.
pub fn parse_list_gpu_arch(text: &str) -> Vec<String> {
    let archs = text
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("compute_") && arch_number(line).is_some())
        .map(str::to_string);
    sorted_archs(archs)
}

/// Per kernel and per SASS architecture, what `cuobjdump --dump-resource-usage` reports.
///
/// Each `Fatbin elf code:` section names its architecture (`arch = sm_89`); each
/// `Function NAME:` line is followed by a `REG:… STACK:… SHARED:… LOCAL:…` line. `Fatbin ptx
/// code:` sections carry no resource usage and are skipped. `spill_bytes` is cuobjdump's `LOCAL`,
/// which is 0 even for a kernel that spills: ptxas puts spills in the stack frame (`STACK`), so
/// only [`parse_ptxas_log`] can tell spills from a private array (see [`merge_ptxas`]). On sm_90
/// cuobjdump 11.8 also reports 1 KiB more `SHARED` than ptxas's `smem` (2688 vs 1664 in the
/// shared capture; sm_70–sm_89 agree), so the log's figure is preferred there too.
///
/// A bare cubin's dump has no `arch =` line; then `arch` comes from a preceding line naming an
/// `sm_XX` file, or stays empty for the caller to fill from `--list-elf` (see
/// [`fill_unknown_arch`]).
pub fn parse_resource_usage(text: &str) -> Vec<KernelResources> {
    let mut kernels = Vec::new();
    let mut arch: Option<String> = None;
    let mut in_elf = true;
    let mut function: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with("Fatbin elf code") {
            in_elf = true;
            arch = None;
            function = None;
        } else if line.starts_with("Fatbin ptx code") {
            in_elf = false;
            arch = None;
            function = None;
        } else if let Some(value) = line.strip_prefix("arch =") {
            arch = Some(value.trim().to_string());
        } else if let Some(name) = line
            .strip_prefix("Function ")
            .and_then(|rest| rest.strip_suffix(':'))
        {
            function = Some(name.trim().to_string());
        } else if line.starts_with("REG:") {
            let (Some(name), true) = (function.take(), in_elf) else {
                continue;
            };
            let arch = arch.clone().unwrap_or_default();
            let field = |key: &str| resource_field(line, key).unwrap_or(0);
            kernels.push(KernelResources {
                name,
                arch,
                registers: field("REG"),
                sgprs: 0,
                stack_bytes: field("STACK"),
                spill_bytes: field("LOCAL"),
                shared_bytes: field("SHARED"),
                max_block_threads: None,
                wavefront_size: None,
            });
        } else if arch.is_none() {
            if let Some(found) = line
                .split(|c: char| c.is_whitespace() || c == '.' || c == '/' || c == ':')
                .find(|part| part.starts_with("sm_") && arch_number(part).is_some())
            {
                arch = Some(found.to_string());
            }
        }
    }
    kernels
}

/// Sets `arch` on kernels whose dump named none (a bare cubin) when the artifact holds exactly
/// one SASS architecture (`sass`, from [`parse_list_elf`]); otherwise leaves them empty.
pub fn fill_unknown_arch(kernels: &mut [KernelResources], sass: &[String]) {
    if let [only] = sass {
        for k in kernels.iter_mut().filter(|k| k.arch.is_empty()) {
            k.arch = only.clone();
        }
    }
}

/// Per kernel and per architecture, what a `-Xptxas -v` build log reports:
/// `Compiling entry function 'X' for 'sm_89'`, then `Function properties for X` with
/// `N bytes stack frame, N bytes spill stores, N bytes spill loads`, then
/// `Used N registers, N bytes smem, …`. `spill_bytes` is the spill stores. Properties of
/// non-entry (device) functions are ignored. Several compilation units may be concatenated.
pub fn parse_ptxas_log(text: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    let mut current: Option<usize> = None;
    let mut properties_for_current = false;
    for raw in text.lines() {
        let line = raw.trim();
        let info = line
            .strip_prefix("ptxas info")
            .map(|rest| rest.trim_start().trim_start_matches(':').trim());
        if let Some(rest) = info.and_then(|i| i.strip_prefix("Compiling entry function")) {
            let mut quoted = rest.split('\'').skip(1).step_by(2);
            let (Some(name), Some(arch)) = (quoted.next(), quoted.next()) else {
                current = None;
                continue;
            };
            kernels.push(KernelResources {
                name: name.to_string(),
                arch: arch.to_string(),
                registers: 0,
                sgprs: 0,
                stack_bytes: 0,
                spill_bytes: 0,
                shared_bytes: 0,
                max_block_threads: None,
                wavefront_size: None,
            });
            current = Some(kernels.len() - 1);
            properties_for_current = false;
        } else if let Some(name) = info.and_then(|i| i.strip_prefix("Function properties for")) {
            properties_for_current =
                current.is_some_and(|index| kernels[index].name == name.trim());
        } else if let Some(used) = info.and_then(|i| i.strip_prefix("Used ")) {
            if let Some(index) = current {
                for part in used.split(',') {
                    let part = part.trim();
                    if let Some(n) = number_before(part, "registers") {
                        kernels[index].registers = n;
                    } else if let Some(n) = number_before(part, "bytes smem") {
                        kernels[index].shared_bytes = n;
                    }
                }
            }
            properties_for_current = false;
        } else if info.is_none() && line.contains("bytes stack frame") {
            if let (Some(index), true) = (current, properties_for_current) {
                for part in line.split(',') {
                    let part = part.trim();
                    if let Some(n) = number_before(part, "bytes stack frame") {
                        kernels[index].stack_bytes = n;
                    } else if let Some(n) = number_before(part, "bytes spill stores") {
                        kernels[index].spill_bytes = n;
                    }
                }
            }
            properties_for_current = false;
        }
    }
    kernels
}

/// Fills what cuobjdump cannot know from a ptxas log of the same build: for each kernel of
/// `from_cuobjdump` that the log has at the same architecture, the spill stores, and the stack
/// frame and shared memory as ptxas states them. Kernels the log lacks are left as they are.
pub fn merge_ptxas(
    from_cuobjdump: &[KernelResources],
    from_ptxas: &[KernelResources],
) -> Vec<KernelResources> {
    from_cuobjdump
        .iter()
        .map(|k| {
            let mut merged = k.clone();
            if let Some(p) = from_ptxas
                .iter()
                .find(|p| p.name == k.name && p.arch == k.arch)
            {
                merged.spill_bytes = p.spill_bytes;
                merged.stack_bytes = p.stack_bytes;
                merged.shared_bytes = p.shared_bytes;
            }
            merged
        })
        .collect()
}

/// The architecture number of `sm_89`, `compute_89`, `sm_90a`, `8.9`, `89` or `12.0`: 89, 89,
/// 90, 89, 89, 120. `None` for anything else.
pub fn arch_number(arch: &str) -> Option<u32> {
    let arch = arch.trim();
    let arch = ["sm_", "compute_", "lto_"]
        .iter()
        .find_map(|prefix| arch.strip_prefix(prefix))
        .unwrap_or(arch);
    if let Some((major, minor)) = arch.split_once('.') {
        let major: u32 = major.parse().ok()?;
        let minor: u32 = minor.parse().ok()?;
        return (minor < 10).then_some(major * 10 + minor);
    }
    let digits = arch.trim_end_matches(['a', 'f']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|n| *n >= 10)
}

/// The lowest architecture the build holds, SASS or PTX (`70` for sm_70…sm_90 + compute_90):
/// the oldest GPU it can run on.
pub fn floor(sass: &[String], ptx: &[String]) -> Option<u32> {
    sass.iter().chain(ptx).filter_map(|a| arch_number(a)).min()
}

/// What a device of architecture `device` runs from a build: the cubin it loads, else the PTX
/// the driver JIT-compiles, else nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaRuns {
    /// A cubin for exactly the device's architecture.
    NativeSass(String),
    /// A cubin of the same major version and a lower minor (binary-compatible, not tuned).
    CompatibleSass(String),
    /// No loadable cubin; this PTX is JIT-compiled at first launch.
    PtxJit(String),
    Nothing,
}

/// Which of the build's cubins or PTX a device of `device_arch` runs (see the module doc for the
/// rules). Among compatible cubins the highest minor wins; among PTX, the highest `<=` device.
pub fn runs_on(sass: &[String], ptx: &[String], device_arch: &str) -> CudaRuns {
    let Some(device) = arch_number(device_arch) else {
        return CudaRuns::Nothing;
    };
    if let Some(native) = sass.iter().find(|s| arch_number(s) == Some(device)) {
        return CudaRuns::NativeSass(native.clone());
    }
    let compatible = sass
        .iter()
        .filter(|s| !is_arch_specific(s))
        .filter_map(|s| arch_number(s).map(|n| (n, s)))
        .filter(|(n, _)| n / 10 == device / 10 && *n < device)
        .max_by_key(|(n, _)| *n);
    if let Some((_, s)) = compatible {
        return CudaRuns::CompatibleSass(s.clone());
    }
    let jit = ptx
        .iter()
        .filter(|p| !is_arch_specific(p))
        .filter_map(|p| arch_number(p).map(|n| (n, p)))
        .filter(|(n, _)| *n <= device)
        .max_by_key(|(n, _)| *n);
    match jit {
        Some((_, p)) => CudaRuns::PtxJit(p.clone()),
        None => CudaRuns::Nothing,
    }
}

/// The `cuda` `arch_coverage` findings for one build. `sass` and `ptx`: what the binary holds
/// ([`parse_list_elf`], [`parse_list_ptx`]); `toolchain`: what the installed nvcc can target
/// ([`parse_list_gpu_arch`], may be empty when unknown); `device_arch`: the device's
/// architecture (`sm_89`, `8.9`; empty when there is no device).
///
/// Subject `device` (only with a device): ok when the build holds the device's own SASS; warn
/// when the device runs a lower cubin of its major family or JIT-compiles PTX; fail when nothing
/// in the build runs on it. Subject `toolchain` (only when `toolchain` is known and the build
/// holds code): warn when nvcc can target architectures newer than the newest SASS of the build,
/// listing them; ok otherwise.
pub fn arch_coverage(
    sass: &[String],
    ptx: &[String],
    toolchain: &[String],
    device_arch: &str,
    command: &str,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let device_arch = device_arch.trim();
    if !device_arch.is_empty() {
        findings.push(device_finding(sass, ptx, device_arch, command));
    }
    if let Some(finding) = toolchain_finding(sass, ptx, toolchain, command) {
        findings.push(finding);
    }
    findings
}

fn device_finding(sass: &[String], ptx: &[String], device_arch: &str, command: &str) -> Finding {
    let device = match arch_number(device_arch) {
        Some(n) => format!("sm_{n}"),
        None => device_arch.to_string(),
    };
    let device_number = arch_number(device_arch);
    let gencode = device_number
        .map(|n| format!("-gencode arch=compute_{n},code=sm_{n}"))
        .unwrap_or_else(|| "a -gencode for the device".to_string());
    let held = held_list(sass, ptx);
    let runs = runs_on(sass, ptx, device_arch);
    let (severity, verdict, runs_value) = match &runs {
        CudaRuns::NativeSass(s) => (
            Severity::Ok,
            format!("{device} runs its own SASS ({s}) from the build ({held})"),
            serde_json::Value::from(s.as_str()),
        ),
        CudaRuns::CompatibleSass(s) => (
            Severity::Warn,
            format!(
                "{device} runs {s} SASS, not tuned for {device} (build holds {held}); add {gencode}"
            ),
            serde_json::Value::from(s.as_str()),
        ),
        CudaRuns::PtxJit(p) => (
            Severity::Warn,
            format!(
                "no SASS {device} can load (build holds {held}): PTX JIT at first launch from {p}; add {gencode}"
            ),
            serde_json::Value::from(p.as_str()),
        ),
        CudaRuns::Nothing if device_number.is_none() => (
            Severity::Fail,
            format!(
                "cannot read the device architecture {device_arch:?}; check the probe's compute capability"
            ),
            serde_json::Value::Null,
        ),
        CudaRuns::Nothing if sass.is_empty() && ptx.is_empty() => (
            Severity::Fail,
            format!("the build holds no device code, so nothing runs on {device}; add {gencode}"),
            serde_json::Value::Null,
        ),
        CudaRuns::Nothing => (
            Severity::Fail,
            format!(
                "nothing in the build ({held}) runs on {device}: no SASS of its major version at or below it and no PTX at or below it; add {gencode}"
            ),
            serde_json::Value::Null,
        ),
    };
    Finding::new(
        "cuda",
        "arch_coverage",
        "device",
        severity,
        verdict,
        command,
    )
    .with("device", device)
    .with("sass", sass.to_vec())
    .with("ptx", ptx.to_vec())
    .with("runs", runs_value)
}

fn toolchain_finding(
    sass: &[String],
    ptx: &[String],
    toolchain: &[String],
    command: &str,
) -> Option<Finding> {
    if toolchain.is_empty() {
        return None;
    }
    let newest = sass
        .iter()
        .filter_map(|s| arch_number(s))
        .max()
        .or_else(|| ptx.iter().filter_map(|p| arch_number(p)).max())?;
    let newest_ptx = ptx.iter().filter_map(|p| arch_number(p)).max();
    let newer: Vec<String> = toolchain
        .iter()
        .filter(|t| arch_number(t).is_some_and(|n| n > newest))
        .cloned()
        .collect();
    let held = held_list(sass, ptx);
    let (severity, verdict) = if newer.is_empty() {
        (
            Severity::Ok,
            format!(
                "the build's newest SASS (sm_{newest}) is the newest architecture nvcc targets here"
            ),
        )
    } else {
        let names: Vec<String> = newer
            .iter()
            .filter_map(|t| arch_number(t).map(|n| format!("sm_{n}")))
            .collect();
        let fallback = match newest_ptx {
            Some(p) => format!("those GPUs JIT-compile the compute_{p} PTX at first launch"),
            None => "those GPUs cannot run it (no PTX)".to_string(),
        };
        (
            Severity::Warn,
            format!(
                "nvcc here can target {} but the build's newest SASS is sm_{newest} ({held}): {fallback}; add -gencode for {} if bench hosts have them",
                names.join(", "),
                names.join(", ")
            ),
        )
    };
    let mut finding = Finding::new(
        "cuda",
        "arch_coverage",
        "toolchain",
        severity,
        verdict,
        command,
    )
    .with("sass", sass.to_vec())
    .with("ptx", ptx.to_vec())
    .with("toolchain_targets", toolchain.to_vec())
    .with("newer_targets", newer)
    .with("newest", newest);
    finding = match floor(sass, ptx) {
        Some(f) => finding.with("floor", f),
        None => finding.with("floor", serde_json::Value::Null),
    };
    Some(finding)
}

/// A kernel symbol's plain name: `_Z9blur_rowsPKfPfii` → `blur_rows`,
/// `_ZN3vmf4ssimEPKf` → `vmf::ssim`; a symbol that is not Itanium-mangled is returned as is.
/// Lets a spec name kernels as written in the source.
pub fn kernel_base_name(symbol: &str) -> String {
    let Some(rest) = symbol.strip_prefix("_Z") else {
        return symbol.to_string();
    };
    let (nested, mut rest) = match rest.strip_prefix('N') {
        Some(inner) => (true, inner),
        None => (false, rest),
    };
    let mut parts = Vec::new();
    loop {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            break;
        }
        let Ok(len) = rest[..digits].parse::<usize>() else {
            break;
        };
        let Some(name) = rest.get(digits..digits + len) else {
            break;
        };
        parts.push(name);
        rest = &rest[digits + len..];
        if !nested {
            break;
        }
    }
    if parts.is_empty() {
        symbol.to_string()
    } else {
        parts.join("::")
    }
}

/// Whether a kernel symbol is the kernel a person named: the symbol itself or its
/// [`kernel_base_name`].
pub fn kernel_matches(symbol: &str, wanted: &str) -> bool {
    symbol == wanted || kernel_base_name(symbol) == wanted
}

fn held_list(sass: &[String], ptx: &[String]) -> String {
    let all: Vec<&str> = sass.iter().chain(ptx).map(String::as_str).collect();
    if all.is_empty() {
        "nothing".to_string()
    } else {
        all.join(", ")
    }
}

fn is_arch_specific(arch: &str) -> bool {
    arch.trim().ends_with('a')
}

fn listed_files<'t>(
    text: &'t str,
    label: &'static str,
    suffix: &'static str,
) -> impl Iterator<Item = &'t str> {
    text.lines().filter_map(move |line| {
        let rest = line.trim().strip_prefix(label)?;
        let (_, file) = rest.split_once(':')?;
        let file = file.trim();
        file.ends_with(suffix).then_some(file)
    })
}

/// The `sm_XX` (or `compute_XX`) component of a dotted file name like `k.1.sm_70.cubin`.
fn arch_component<'f>(file: &'f str, prefix: &str) -> Option<&'f str> {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.split('.')
        .find(|part| part.starts_with(prefix) && arch_number(part).is_some())
}

fn sorted_archs(archs: impl Iterator<Item = String>) -> Vec<String> {
    let mut list: Vec<String> = archs.collect();
    list.sort_by(|a, b| arch_number(a).cmp(&arch_number(b)).then_with(|| a.cmp(b)));
    list.dedup();
    list
}

fn resource_field(line: &str, key: &str) -> Option<u32> {
    line.split_whitespace().find_map(|token| {
        let (name, value) = token.split_once(':')?;
        (name == key).then(|| value.parse().ok()).flatten()
    })
}

fn number_before(part: &str, unit: &str) -> Option<u32> {
    let number = part.strip_suffix(unit)?.trim();
    number.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! probe {
        ($dir:literal, $file:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../fixtures/probes/",
                $dir,
                "/",
                $file
            ))
        };
    }

    const SHARED_ELF: &str = probe!("toolchain-cuda-11.8-debian", "cuobjdump-list-elf.txt");
    const SHARED_PTX: &str = probe!("toolchain-cuda-11.8-debian", "cuobjdump-list-ptx.txt");
    const SHARED_USAGE: &str = probe!(
        "toolchain-cuda-11.8-debian",
        "cuobjdump-dump-resource-usage.txt"
    );
    const SHARED_LOG: &str = probe!("toolchain-cuda-11.8-debian", "nvcc-Xptxas-v-build.log");
    const GPU_ARCH: &str = probe!("toolchain-cuda-11.8-debian", "nvcc-list-gpu-arch.txt");
    const MANY_ELF: &str = probe!("toolchain-cuda-11.8-many-kernels", "cuobjdump-list-elf.txt");
    const MANY_PTX: &str = probe!("toolchain-cuda-11.8-many-kernels", "cuobjdump-list-ptx.txt");
    const MANY_USAGE: &str = probe!(
        "toolchain-cuda-11.8-many-kernels",
        "cuobjdump-dump-resource-usage.txt"
    );
    const MANY_CUBIN_USAGE: &str = probe!(
        "toolchain-cuda-11.8-many-kernels",
        "cuobjdump-dump-resource-usage-cubin-sm_80.txt"
    );
    const MANY_CUBIN_ELF: &str = probe!(
        "toolchain-cuda-11.8-many-kernels",
        "cuobjdump-list-elf-cubin-sm_80.txt"
    );
    const MANY_LOG: &str = probe!(
        "toolchain-cuda-11.8-many-kernels",
        "nvcc-Xptxas-v-build.log"
    );

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn find<'k>(kernels: &'k [KernelResources], name: &str, arch: &str) -> &'k KernelResources {
        kernels
            .iter()
            .find(|k| k.name == name && k.arch == arch)
            .unwrap_or_else(|| panic!("no {name}@{arch} in {kernels:?}"))
    }

    #[test]
    fn list_elf_and_ptx_of_the_recorded_builds() {
        assert_eq!(
            parse_list_elf(SHARED_ELF),
            ["sm_70", "sm_80", "sm_86", "sm_89", "sm_90"]
        );
        assert_eq!(parse_list_ptx(SHARED_PTX), ["compute_90"]);
        assert_eq!(parse_list_elf(MANY_ELF), ["sm_80", "sm_86", "sm_89"]);
        assert_eq!(parse_list_ptx(MANY_PTX), ["compute_89"]);
    }

    #[test]
    fn list_elf_sorts_by_number_and_dedups() {
        let text = "ELF file    1: a.1.sm_90.cubin\nELF file    2: a.2.sm_100.cubin\n\
                    ELF file    3: b.1.sm_75.cubin\nELF file    4: b.2.sm_90.cubin\n\
                    cuobjdump info    : something else\n";
        assert_eq!(parse_list_elf(text), ["sm_75", "sm_90", "sm_100"]);
        assert!(parse_list_elf("").is_empty());
    }

    #[test]
    fn list_gpu_arch_of_nvcc_11_8() {
        let archs = parse_list_gpu_arch(GPU_ARCH);
        assert_eq!(archs.len(), 16);
        assert_eq!(archs.first().map(String::as_str), Some("compute_35"));
        assert_eq!(archs.last().map(String::as_str), Some("compute_90"));
        assert!(archs.contains(&"compute_89".to_string()));
    }

    #[test]
    fn resource_usage_of_the_shared_capture_skips_the_ptx_section() {
        let kernels = parse_resource_usage(SHARED_USAGE);
        // 5 ELF sections × 2 kernels; the `Fatbin ptx code` section adds none.
        assert_eq!(kernels.len(), 10);
        let many70 = find(&kernels, "_Z9many_regsPKdPdi", "sm_70");
        assert_eq!(many70.registers, 58);
        let blur89 = find(&kernels, "_Z9blur_rowsPKfPfii", "sm_89");
        assert_eq!(
            (blur89.registers, blur89.shared_bytes, blur89.stack_bytes),
            (28, 1664, 0)
        );
        // cuobjdump counts 1 KiB more shared memory on sm_90 than ptxas states.
        assert_eq!(
            find(&kernels, "_Z9blur_rowsPKfPfii", "sm_90").shared_bytes,
            2688
        );
        assert!(kernels
            .iter()
            .all(|k| k.sgprs == 0 && k.wavefront_size.is_none()));
    }

    #[test]
    fn resource_usage_of_the_many_kernel_build() {
        let kernels = parse_resource_usage(MANY_USAGE);
        assert_eq!(kernels.len(), 21);
        let wide = find(&kernels, "_Z9dot_acc96PKdS0_Pdi", "sm_89");
        assert_eq!((wide.registers, wide.stack_bytes), (254, 0));
        let bounded = find(&kernels, "_Z17dot_acc96_boundedPKdS0_Pdi", "sm_86");
        // Spills land in STACK; cuobjdump's LOCAL stays 0.
        assert_eq!(
            (bounded.registers, bounded.stack_bytes, bounded.spill_bytes),
            (64, 928, 0)
        );
        let tile = find(&kernels, "_Z9tile_blurPKfPfi", "sm_80");
        assert_eq!((tile.registers, tile.shared_bytes), (14, 9224));
        assert_eq!(
            find(&kernels, "_Z16moderate_boundedPKfPfi", "sm_80").registers,
            90
        );
        assert_eq!(
            find(&kernels, "_Z16moderate_boundedPKfPfi", "sm_89").registers,
            88
        );
    }

    #[test]
    fn resource_usage_of_a_bare_cubin_gets_its_arch_from_list_elf() {
        let mut kernels = parse_resource_usage(MANY_CUBIN_USAGE);
        assert_eq!(kernels.len(), 7);
        assert!(kernels.iter().all(|k| k.arch.is_empty()));
        let sass = parse_list_elf(MANY_CUBIN_ELF);
        assert_eq!(sass, ["sm_80"]);
        fill_unknown_arch(&mut kernels, &sass);
        assert_eq!(
            find(&kernels, "_Z16moderate_boundedPKfPfi", "sm_80").registers,
            90
        );
        // Two architectures: no guess.
        let mut unknown = parse_resource_usage(MANY_CUBIN_USAGE);
        fill_unknown_arch(&mut unknown, &strings(&["sm_80", "sm_86"]));
        assert!(unknown.iter().all(|k| k.arch.is_empty()));
    }

    #[test]
    fn resource_usage_takes_the_arch_from_a_file_name_line() {
        let text = "member k.sm_75.cubin:\nResource usage:\n Function _Z1kv:\n  REG:12 STACK:8 SHARED:0 LOCAL:4 CONSTANT[0]:356\n";
        let kernels = parse_resource_usage(text);
        assert_eq!(kernels.len(), 1);
        assert_eq!(
            (
                kernels[0].arch.as_str(),
                kernels[0].registers,
                kernels[0].spill_bytes
            ),
            ("sm_75", 12, 4)
        );
    }

    #[test]
    fn ptxas_log_reads_spills_that_cuobjdump_cannot() {
        let kernels = parse_ptxas_log(MANY_LOG);
        assert_eq!(kernels.len(), 21);
        let bounded = find(&kernels, "_Z17dot_acc96_boundedPKdS0_Pdi", "sm_89");
        assert_eq!(
            (bounded.registers, bounded.stack_bytes, bounded.spill_bytes),
            (64, 928, 1544)
        );
        let local = find(&kernels, "_Z13indexed_localPKiPfi", "sm_80");
        assert_eq!(
            (local.registers, local.stack_bytes, local.spill_bytes),
            (38, 1024, 0)
        );
        assert_eq!(
            find(&kernels, "_Z9tile_blurPKfPfi", "sm_86").shared_bytes,
            9224
        );
        // The same figures cuobjdump reports, kernel by kernel, bar the spills.
        let usage = parse_resource_usage(MANY_USAGE);
        for k in &usage {
            let p = find(&kernels, &k.name, &k.arch);
            assert_eq!(
                (p.registers, p.stack_bytes, p.shared_bytes),
                (k.registers, k.stack_bytes, k.shared_bytes),
                "{}",
                k.name
            );
        }
    }

    #[test]
    fn ptxas_log_of_the_shared_capture_including_lines_without_cmem() {
        let kernels = parse_ptxas_log(SHARED_LOG);
        assert_eq!(kernels.len(), 10);
        assert_eq!(find(&kernels, "_Z9many_regsPKdPdi", "sm_70").registers, 58);
        let blur90 = find(&kernels, "_Z9blur_rowsPKfPfii", "sm_90");
        assert_eq!((blur90.registers, blur90.shared_bytes), (26, 1664));
    }

    #[test]
    fn ptxas_log_ignores_device_function_properties() {
        let log = "ptxas info    : Function properties for _Z6helperv\n    \
                   64 bytes stack frame, 32 bytes spill stores, 32 bytes spill loads\n\
                   ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'\n\
                   ptxas info    : Function properties for _Z6helperv\n    \
                   64 bytes stack frame, 32 bytes spill stores, 32 bytes spill loads\n\
                   ptxas info    : Function properties for _Z1kPf\n    \
                   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
                   ptxas info    : Used 20 registers, used 1 barriers, 4096 bytes smem, 356 bytes cmem[0]\n";
        let kernels = parse_ptxas_log(log);
        assert_eq!(kernels.len(), 1);
        let k = &kernels[0];
        assert_eq!(
            (
                k.arch.as_str(),
                k.registers,
                k.spill_bytes,
                k.stack_bytes,
                k.shared_bytes
            ),
            ("sm_90a", 20, 0, 0, 4096)
        );
    }

    #[test]
    fn merge_takes_spills_from_the_log() {
        let merged = merge_ptxas(
            &parse_resource_usage(MANY_USAGE),
            &parse_ptxas_log(MANY_LOG),
        );
        assert_eq!(merged.len(), 21);
        assert_eq!(
            find(&merged, "_Z17dot_acc96_boundedPKdS0_Pdi", "sm_80").spill_bytes,
            1544
        );
        assert_eq!(
            find(&merged, "_Z13indexed_localPKiPfi", "sm_80").spill_bytes,
            0
        );
        assert_eq!(
            find(&merged, "_Z9dot_acc96PKdS0_Pdi", "sm_89").registers,
            254
        );
    }

    #[test]
    fn arch_numbers_in_every_spelling() {
        assert_eq!(arch_number("sm_89"), Some(89));
        assert_eq!(arch_number("compute_89"), Some(89));
        assert_eq!(arch_number("8.9"), Some(89));
        assert_eq!(arch_number("89"), Some(89));
        assert_eq!(arch_number("12.0"), Some(120));
        assert_eq!(arch_number("sm_100"), Some(100));
        assert_eq!(arch_number("sm_90a"), Some(90));
        assert_eq!(arch_number(" 9.0 "), Some(90));
        assert_eq!(arch_number("gfx90a"), None);
        assert_eq!(arch_number(""), None);
        assert_eq!(arch_number("sm_"), None);
        assert_eq!(arch_number("8"), None);
    }

    #[test]
    fn floor_is_the_lowest_sass_or_ptx() {
        assert_eq!(
            floor(&parse_list_elf(SHARED_ELF), &parse_list_ptx(SHARED_PTX)),
            Some(70)
        );
        assert_eq!(floor(&[], &strings(&["compute_52"])), Some(52));
        assert_eq!(floor(&[], &[]), None);
    }

    #[test]
    fn device_with_its_own_sass_is_ok() {
        let sass = parse_list_elf(SHARED_ELF);
        let ptx = parse_list_ptx(SHARED_PTX);
        let findings = arch_coverage(&sass, &ptx, &[], "8.9", "cuobjdump --list-elf k.o");
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(
            (f.check.as_str(), f.subject.as_str()),
            ("arch_coverage", "device")
        );
        assert_eq!(f.severity, Severity::Ok);
        assert_eq!(f.evidence["runs"], "sm_89");
        assert_eq!(f.evidence["device"], "sm_89");
        assert_eq!(f.command, "cuobjdump --list-elf k.o");
    }

    #[test]
    fn lower_minor_sass_of_the_same_major_runs_but_is_not_tuned() {
        let sass = strings(&["sm_80", "sm_86"]);
        let f = &arch_coverage(&sass, &[], &[], "sm_89", "c")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.verdict.contains("runs sm_86 SASS, not tuned for sm_89"),
            "{}",
            f.verdict
        );
        assert!(
            f.verdict.contains("-gencode arch=compute_89,code=sm_89"),
            "{}",
            f.verdict
        );
        assert_eq!(f.evidence["runs"], "sm_86");
    }

    #[test]
    fn sass_does_not_run_across_majors_or_up_minors_so_ptx_is_jit_compiled() {
        // The many-kernel build on an H100: no sm_9x cubin, the compute_89 PTX is JIT-compiled.
        let sass = parse_list_elf(MANY_ELF);
        let ptx = parse_list_ptx(MANY_PTX);
        let f = &arch_coverage(&sass, &ptx, &[], "9.0", "c")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.verdict.contains("PTX JIT at first launch"),
            "{}",
            f.verdict
        );
        assert_eq!(f.evidence["runs"], "compute_89");
        // An sm_86 cubin does not run on sm_80 (higher minor).
        assert_eq!(
            runs_on(&strings(&["sm_86"]), &[], "sm_80"),
            CudaRuns::Nothing
        );
        // An arch-specific cubin runs on its own architecture only.
        assert_eq!(
            runs_on(&strings(&["sm_90a"]), &[], "sm_90"),
            CudaRuns::NativeSass("sm_90a".into())
        );
    }

    #[test]
    fn nothing_runnable_fails() {
        let sass = parse_list_elf(MANY_ELF);
        let f = &arch_coverage(&sass, &[], &[], "sm_75", "c")[0];
        assert_eq!(f.severity, Severity::Fail);
        assert!(f.verdict.contains("nothing in the build"), "{}", f.verdict);
        assert_eq!(f.evidence["runs"], serde_json::Value::Null);
        let empty = &arch_coverage(&[], &[], &[], "sm_89", "c")[0];
        assert_eq!(empty.severity, Severity::Fail);
        assert!(
            empty.verdict.contains("no device code"),
            "{}",
            empty.verdict
        );
    }

    #[test]
    fn toolchain_targets_newer_than_the_build_warn() {
        let toolchain = parse_list_gpu_arch(GPU_ARCH);
        let sass = parse_list_elf(MANY_ELF);
        let ptx = parse_list_ptx(MANY_PTX);
        let findings = arch_coverage(&sass, &ptx, &toolchain, "sm_89", "c");
        assert_eq!(findings.len(), 2);
        let t = &findings[1];
        assert_eq!(t.subject, "toolchain");
        assert_eq!(t.severity, Severity::Warn);
        assert_eq!(
            t.evidence["newer_targets"],
            serde_json::json!(["compute_90"])
        );
        assert_eq!(t.evidence["newest"], 89);
        assert_eq!(t.evidence["floor"], 80);
        assert_eq!(
            t.evidence["sass"],
            serde_json::json!(["sm_80", "sm_86", "sm_89"])
        );
        assert_eq!(t.evidence["ptx"], serde_json::json!(["compute_89"]));
        assert!(t.verdict.contains("sm_90"), "{}", t.verdict);
        assert!(
            t.verdict.contains("JIT-compile the compute_89 PTX"),
            "{}",
            t.verdict
        );

        // The shared build reaches sm_90, the newest nvcc 11.8 targets.
        let ok = arch_coverage(
            &parse_list_elf(SHARED_ELF),
            &parse_list_ptx(SHARED_PTX),
            &toolchain,
            "",
            "c",
        );
        assert_eq!(ok.len(), 1, "no device: only the toolchain finding");
        assert_eq!(ok[0].severity, Severity::Ok);
        assert_eq!(ok[0].evidence["floor"], 70);
        assert_eq!(ok[0].evidence["newest"], 90);
    }

    #[test]
    fn kernel_names_as_written_in_the_source() {
        assert_eq!(kernel_base_name("_Z9blur_rowsPKfPfii"), "blur_rows");
        assert_eq!(kernel_base_name("_ZN3vmf4ssimEPKf"), "vmf::ssim");
        assert_eq!(kernel_base_name("plain_c_kernel"), "plain_c_kernel");
        assert!(kernel_matches(
            "_Z17dot_acc96_boundedPKdS0_Pdi",
            "dot_acc96_bounded"
        ));
        assert!(!kernel_matches(
            "_Z9dot_acc96PKdS0_Pdi",
            "dot_acc96_bounded"
        ));
        assert!(kernel_matches(
            "_Z9dot_acc96PKdS0_Pdi",
            "_Z9dot_acc96PKdS0_Pdi"
        ));
    }
}
