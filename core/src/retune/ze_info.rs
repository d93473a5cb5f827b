//! Intel GPU binaries (zebin) as the SYCL checks read them: the `.ze_info` section's YAML
//! (per kernel `execution_env.grf_count`, `simd_size`, `slm_size`,
//! `user_attributes.intel_reqd_sub_group_size`, and the scratch of
//! `per_thread_memory_buffers`), the spill estimate `ocloc` prints per kernel (`kernel K
//! compiled SIMD32 allocated 128 regs and spilled around 36`), and the `sycl` `registers` and
//! `sub_group_size` findings they give. Only the subset of YAML that IGC writes is read: block
//! mappings and `- ` sequences by indentation, one scalar per line.

use crate::finding::{Finding, Severity};

/// One kernel of a zebin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ZeKernel {
    /// The symbol, as `.ze_info` names it (`_ZTSZZ…`, a SYCL kernel lambda's type name).
    pub name: String,
    pub grf_count: Option<u32>,
    pub simd_size: Option<u32>,
    /// `user_attributes.intel_reqd_sub_group_size`: the source's `reqd_sub_group_size`.
    pub reqd_sub_group_size: Option<u32>,
    /// `execution_env.slm_size`: shared local memory per work-group, bytes.
    pub slm_bytes: u32,
    /// Per-thread scratch, bytes: the sum of `per_thread_memory_buffers` of type `scratch`.
    pub scratch_bytes: u32,
    /// Per-thread private memory in global memory (`usage: private_space`), bytes.
    pub private_bytes: u32,
}

/// The kernels of a `.ze_info` text, in order (IGC's `Intel_Symbol_Table_Void_Program`
/// helper kernel left out).
pub fn parse_ze_info(text: &str) -> Vec<ZeKernel> {
    /// One `per_thread_memory_buffers` item, and the kernel it belongs to.
    #[derive(Default)]
    struct Buffer {
        kernel: usize,
        kind: String,
        usage: String,
        size: u32,
    }
    let mut kernels: Vec<ZeKernel> = Vec::new();
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut in_kernels = false;
    let mut section = String::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed == "---" || trimmed == "..." {
            continue;
        }
        if indent == 0 {
            in_kernels = trimmed == "kernels:";
            continue;
        }
        if !in_kernels {
            continue;
        }
        if indent == 2 {
            if let Some(name) = trimmed.strip_prefix("- name:") {
                kernels.push(ZeKernel {
                    name: name.trim().trim_matches('\'').to_string(),
                    ..ZeKernel::default()
                });
            }
            section.clear();
            continue;
        }
        let Some(kernel) = kernels.last_mut() else {
            continue;
        };
        if indent == 4 {
            section = trimmed.trim_end_matches(':').to_string();
            continue;
        }
        let item = trimmed.strip_prefix("- ");
        let Some((key, value)) = item.unwrap_or(trimmed).split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().trim_matches('\''));
        let number = || value.parse::<u32>().ok();
        match section.as_str() {
            "execution_env" => match key {
                "grf_count" => kernel.grf_count = number(),
                "simd_size" => kernel.simd_size = number(),
                "slm_size" => kernel.slm_bytes = number().unwrap_or(0),
                _ => {}
            },
            "user_attributes" if key == "intel_reqd_sub_group_size" => {
                kernel.reqd_sub_group_size = number();
            }
            "per_thread_memory_buffers" => {
                if item.is_some() {
                    buffers.push(Buffer {
                        kernel: kernels.len() - 1,
                        ..Buffer::default()
                    });
                }
                if let Some(buffer) = buffers.last_mut() {
                    match key {
                        "type" => buffer.kind = value.to_string(),
                        "usage" => buffer.usage = value.to_string(),
                        "size" => buffer.size = number().unwrap_or(0),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    for buffer in buffers {
        let kernel = &mut kernels[buffer.kernel];
        if buffer.kind == "scratch" {
            kernel.scratch_bytes = kernel.scratch_bytes.saturating_add(buffer.size);
        } else if buffer.usage == "private_space" {
            kernel.private_bytes = kernel.private_bytes.saturating_add(buffer.size);
        }
    }
    kernels.retain(|k| k.name != "Intel_Symbol_Table_Void_Program");
    kernels
}

/// What `ocloc` said of one kernel's register allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OclocSpill {
    pub kernel: String,
    pub simd: u32,
    pub registers: u32,
    /// IGC's "spilled around N": its estimate of the spill size, bytes per thread.
    pub spilled: u32,
}

/// The `warning: kernel K compiled SIMD32 allocated 128 regs and spilled around 36` lines of
/// an `ocloc` output.
pub fn parse_ocloc_spills(text: &str) -> Vec<OclocSpill> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("warning: kernel ")?;
            let (kernel, rest) = rest.split_once(" compiled SIMD")?;
            let (simd, rest) = rest.split_once(" allocated ")?;
            let (registers, rest) = rest.split_once(" regs and spilled around ")?;
            Some(OclocSpill {
                kernel: kernel.trim().to_string(),
                simd: simd.trim().parse().ok()?,
                registers: registers.trim().parse().ok()?,
                spilled: rest.split_whitespace().next()?.parse().ok()?,
            })
        })
        .collect()
}

/// A SYCL kernel's symbol for people: the function that launches the lambda, with its
/// template arguments (`_ZTSZZL20launch_vif_hori_implILi0ELi32EE…` → `launch_vif_hori_impl<0,32>`);
/// the runtime's `RoundedRangeKernel` wrapper of a plain-range launch (the runtime picks it or
/// the plain kernel at launch) gets ` [rounded range]`. The symbol itself when it is not of that
/// shape.
pub fn launcher_name(symbol: &str) -> String {
    let Some(body) = symbol.strip_prefix("_ZTS") else {
        return symbol.to_string();
    };
    // The lambda's enclosing function: the first local-entity `ZZ` (`Z` of the lambda's
    // scope, `Z` of the function's).
    let Some(at) = body.find("ZZ") else {
        return symbol.to_string();
    };
    let rest = &body[at..];
    let rest = rest.trim_start_matches('Z');
    let rest = rest
        .strip_prefix("N12_GLOBAL__N_1")
        .or_else(|| rest.strip_prefix('N'))
        .or_else(|| rest.strip_prefix('L'))
        .unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(length) = digits.parse::<usize>() else {
        return symbol.to_string();
    };
    let Some(name) = rest.get(digits.len()..digits.len() + length) else {
        return symbol.to_string();
    };
    let after = &rest[digits.len() + length..];
    let mut arguments = Vec::new();
    if let Some(mut list) = after.strip_prefix('I') {
        while let Some(literal) = list.strip_prefix('L') {
            // `Li0E`, `Lb1E`: a literal of a builtin type.
            let body: String = literal.chars().skip(1).take_while(|c| *c != 'E').collect();
            arguments.push(body.clone());
            list = literal.get(1 + body.len() + 1..).unwrap_or("");
        }
    }
    let mut shown = if arguments.is_empty() {
        name.to_string()
    } else {
        format!("{name}<{}>", arguments.join(","))
    };
    if body[..at].contains("RoundedRangeKernel") {
        shown.push_str(" [rounded range]");
    }
    shown
}

/// One kernel on one device and register-file mode, with what `ocloc` said of it.
#[derive(Debug, Clone)]
pub struct ZeKernelOnDevice<'k> {
    pub kernel: &'k ZeKernel,
    /// The source file it came from (`float_vif_sycl`).
    pub source: &'k str,
    /// The `ocloc -device` name (`acm-g10`).
    pub device: &'k str,
    /// Compiled with `-ze-opt-large-register-file`.
    pub large_grf: bool,
    pub spill: Option<&'k OclocSpill>,
    /// The same kernel in the other register-file mode, when that was compiled too.
    pub other_mode: Option<OtherMode>,
}

/// What the same kernel got in the other register-file mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherMode {
    /// `ocloc`'s spill estimate there, if it printed one.
    pub spill: Option<u32>,
    pub scratch_bytes: u32,
}

impl ZeKernelOnDevice<'_> {
    /// `float_vif_sycl::launch_compute<1>@acm-g10` (`+large-grf` for that mode).
    pub fn subject(&self) -> String {
        format!(
            "{}::{}@{}{}",
            self.source,
            launcher_name(&self.kernel.name),
            self.device,
            if self.large_grf { "+large-grf" } else { "" }
        )
    }
}

/// The `registers` finding (GRF, SIMD width, spills, scratch) and, when the kernel requires a
/// sub-group size, the `sub_group_size` finding (fails when the compiled SIMD width differs).
pub fn zebin_kernel_findings(k: &ZeKernelOnDevice, command: &str) -> Vec<Finding> {
    let subject = k.subject();
    let kernel = k.kernel;
    let grf = kernel.grf_count.unwrap_or(0);
    let simd = kernel.simd_size.unwrap_or(0);
    let spilled = k.spill.map(|s| s.spilled);
    let mode = if k.large_grf {
        "large GRF"
    } else {
        "default GRF"
    };
    // IGC keeps spills and private arrays in one scratch space: scratch that the large register
    // file makes smaller is spill, whether or not ocloc printed its estimate.
    let scratch_is_spill = !k.large_grf
        && k.other_mode
            .is_some_and(|other| kernel.scratch_bytes > other.scratch_bytes);
    let (severity, verdict) = if spilled.is_some() || scratch_is_spill {
        let what = match spilled {
            Some(bytes) => format!("spills around {bytes} B per thread"),
            None => format!(
                "spills: {} B of scratch per thread, {} B with the large register file",
                kernel.scratch_bytes,
                k.other_mode.map_or(0, |o| o.scratch_bytes)
            ),
        };
        let advice = match (k.large_grf, k.other_mode) {
            (false, Some(other)) if other.spill.is_none() && other.scratch_bytes == 0 => {
                "the large register file (-ze-opt-large-register-file) removes the spill: build this kernel with it, or cut live values".to_string()
            }
            (false, Some(other)) => format!(
                "it still uses {} B of scratch{} with the large register file: cut live values, split the kernel or compile it SIMD16",
                other.scratch_bytes,
                other
                    .spill
                    .map(|s| format!(" (spills around {s} B)"))
                    .unwrap_or_default()
            ),
            (true, _) => "cut live values, split the kernel or compile it SIMD16 (reqd_sub_group_size 16)".to_string(),
            (false, None) => "try -ze-opt-large-register-file, cut live values or compile it SIMD16".to_string(),
        };
        (
            Severity::Warn,
            format!("{what} at {grf} GRF SIMD{simd} ({mode}); {advice}"),
        )
    } else {
        (
            Severity::Ok,
            format!(
                "{grf} GRF, SIMD{simd}, no spill ({mode}){}",
                if kernel.scratch_bytes > 0 {
                    format!(", {} B scratch per thread", kernel.scratch_bytes)
                } else {
                    String::new()
                }
            ),
        )
    };
    let registers = Finding::new("sycl", "registers", &subject, severity, verdict, command)
        .with("symbol", kernel.name.as_str())
        .with("grf_count", grf)
        .with("simd_size", simd)
        .with("spill_bytes", spilled.unwrap_or(0))
        .with("scratch_bytes", kernel.scratch_bytes)
        .with("private_bytes", kernel.private_bytes)
        .with("slm_bytes", kernel.slm_bytes)
        .with("large_grf", k.large_grf);
    let mut findings = vec![registers];
    if let Some(required) = kernel.reqd_sub_group_size {
        let (severity, verdict) = if simd == required {
            (
                Severity::Ok,
                format!("compiled SIMD{simd}, the sub-group size it requires"),
            )
        } else {
            (
                Severity::Fail,
                format!(
                    "requires sub-group size {required} (reqd_sub_group_size) but was compiled SIMD{simd} for {}: fix the attribute or the kernel's sub-group assumptions",
                    k.device
                ),
            )
        };
        findings.push(
            Finding::new(
                "sycl",
                "sub_group_size",
                &subject,
                severity,
                verdict,
                command,
            )
            .with("required", required)
            .with("simd_size", simd),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "---
version:         '1.20'
kernels:
  - name:            _ZTSZZN12_GLOBAL__N_114launch_computeILi1EEEN4sycl3_V15eventERNS2_5queueEE_
    user_attributes:
      intel_reqd_sub_group_size: 32
    execution_env:
      grf_count:       128
      simd_size:       32
      slm_size:        2048
    payload_arguments:
      - arg_type:        global_id_offset
        offset:          0
        size:            12
    per_thread_memory_buffers:
      - type:            scratch
        usage:           single_space
        size:            64
      - type:            global
        usage:           private_space
        size:            32
        is_simt_thread:  true
  - name:            Intel_Symbol_Table_Void_Program
    execution_env:
      grf_count:       128
      simd_size:       8
  - name:            _ZTSZZL20launch_vif_hori_implILi0ELi16EEN4sycl3_V15eventEE_
    user_attributes:
      intel_reqd_sub_group_size: 16
    execution_env:
      grf_count:       256
      simd_size:       32
kernels_misc_info:
  - name:            _ZTSZZ…
    args_info:
      - index:           0
        size:            99
";

    #[test]
    fn kernels_their_registers_simd_and_memory() {
        let kernels = parse_ze_info(SAMPLE);
        assert_eq!(kernels.len(), 2, "the symbol-table helper is not a kernel");
        let k = &kernels[0];
        assert_eq!(
            (k.grf_count, k.simd_size, k.reqd_sub_group_size),
            (Some(128), Some(32), Some(32))
        );
        assert_eq!(
            (k.slm_bytes, k.scratch_bytes, k.private_bytes),
            (2048, 64, 32)
        );
        assert_eq!(
            kernels[1].scratch_bytes, 0,
            "kernels_misc_info sizes are not scratch"
        );
    }

    #[test]
    fn launcher_names_read_from_lambda_symbols() {
        assert_eq!(
            launcher_name(
                "_ZTSZZN12_GLOBAL__N_114launch_computeILi1EEEN4sycl3_V15eventERNS2_5queueEE_"
            ),
            "launch_compute<1>"
        );
        assert_eq!(
            launcher_name("_ZTSZZL20launch_vif_hori_implILi0ELi32EEN4sycl3_V15eventEE_"),
            "launch_vif_hori_impl<0,32>"
        );
        assert_eq!(
            launcher_name("_ZTSZZN12_GLOBAL__N_115launch_dwt_horiERN4sycl3_V15queueEE_"),
            "launch_dwt_hori"
        );
        assert_eq!(
            launcher_name("_ZTSN4sycl3_V16detail18RoundedRangeKernelINS0_4itemILi2ELb1EEELi2EZZN12_GLOBAL__N_112launch_horizERNS0_5queueEPKfS9_PfSA_SA_SA_SA_jjjENKUlRNS0_7handlerEE_clESC_EUlNS0_2idILi2EEEE_EE"),
            "launch_horiz [rounded range]"
        );
        assert_eq!(launcher_name("plain_kernel"), "plain_kernel");
        assert_eq!(launcher_name("_ZTS99x"), "_ZTS99x");
    }

    #[test]
    fn ocloc_spill_warnings() {
        let text = "Compilation from IR - skipping loading of FCL\n\nwarning: kernel _ZTSabc  compiled SIMD32 allocated 128 regs and spilled around 36\n\nBuild succeeded.\n";
        assert_eq!(
            parse_ocloc_spills(text),
            [OclocSpill {
                kernel: "_ZTSabc".into(),
                simd: 32,
                registers: 128,
                spilled: 36
            }]
        );
    }

    #[test]
    fn a_spill_warns_with_advice_and_a_wrong_simd_width_fails() {
        let kernels = parse_ze_info(SAMPLE);
        let spill = OclocSpill {
            kernel: kernels[0].name.clone(),
            simd: 32,
            registers: 128,
            spilled: 36,
        };
        let on = ZeKernelOnDevice {
            kernel: &kernels[0],
            source: "float_vif_sycl",
            device: "acm-g10",
            large_grf: false,
            spill: Some(&spill),
            other_mode: Some(OtherMode {
                spill: None,
                scratch_bytes: 0,
            }),
        };
        let findings = zebin_kernel_findings(&on, "ocloc");
        assert_eq!(
            findings[0].subject,
            "float_vif_sycl::launch_compute<1>@acm-g10"
        );
        assert_eq!(findings[0].severity, Severity::Warn);
        assert!(
            findings[0].verdict.contains("removes the spill"),
            "{}",
            findings[0].verdict
        );
        assert_eq!(findings[0].evidence["spill_bytes"], 36);
        assert_eq!(findings[1].severity, Severity::Ok);

        let wrong = ZeKernelOnDevice {
            kernel: &kernels[1],
            source: "integer_vif_sycl",
            device: "pvc",
            large_grf: true,
            spill: None,
            other_mode: None,
        };
        let findings = zebin_kernel_findings(&wrong, "ocloc");
        assert_eq!(findings[0].severity, Severity::Ok);
        assert_eq!(
            findings[0].subject,
            "integer_vif_sycl::launch_vif_hori_impl<0,16>@pvc+large-grf"
        );
        assert_eq!(findings[1].check, "sub_group_size");
        assert_eq!(findings[1].severity, Severity::Fail);

        // No warning from ocloc, but scratch the large register file makes smaller: spill.
        let quiet = ZeKernelOnDevice {
            kernel: &kernels[0],
            source: "integer_vif_sycl",
            device: "acm-g10",
            large_grf: false,
            spill: None,
            other_mode: Some(OtherMode {
                spill: None,
                scratch_bytes: 0,
            }),
        };
        let findings = zebin_kernel_findings(&quiet, "ocloc");
        assert_eq!(findings[0].severity, Severity::Warn);
        assert!(
            findings[0].verdict.starts_with(
                "spills: 64 B of scratch per thread, 0 B with the large register file"
            ),
            "{}",
            findings[0].verdict
        );
        let same = ZeKernelOnDevice {
            other_mode: Some(OtherMode {
                spill: None,
                scratch_bytes: 64,
            }),
            ..quiet
        };
        assert_eq!(
            zebin_kernel_findings(&same, "ocloc")[0].severity,
            Severity::Ok,
            "private arrays, not spill"
        );
    }

    const FORK: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-intel-sycl-2026.2-fork"
    );

    #[test]
    fn the_forks_real_zebin_and_ocloc_output() {
        let zebin = std::fs::read(format!("{FORK}/integer_motion_sycl-acm-g10.zebin")).unwrap();
        assert_eq!(
            crate::retune::elf_sections::machine(&zebin).unwrap(),
            205,
            "EM_INTELGT"
        );
        let info = crate::retune::elf_sections::section(&zebin, ".ze_info")
            .unwrap()
            .unwrap();
        let dumped =
            std::fs::read(format!("{FORK}/ze_info-integer_motion_sycl-acm-g10.yaml")).unwrap();
        assert_eq!(
            info,
            dumped.as_slice(),
            "the section is what llvm-objcopy dumps"
        );
        let kernels = parse_ze_info(&String::from_utf8_lossy(info));
        assert_eq!(kernels.len(), 1);
        assert_eq!(launcher_name(&kernels[0].name), "launch_blur_sad_fused");
        assert_eq!(
            (kernels[0].grf_count, kernels[0].simd_size),
            (Some(128), Some(32))
        );
        assert_eq!(
            (kernels[0].reqd_sub_group_size, kernels[0].scratch_bytes),
            (Some(32), 64)
        );

        let vif = parse_ze_info(
            &std::fs::read_to_string(format!("{FORK}/ze_info-float_vif_sycl-acm-g10.yaml"))
                .unwrap(),
        );
        let large = parse_ze_info(
            &std::fs::read_to_string(format!(
                "{FORK}/ze_info-float_vif_sycl-acm-g10-large-grf.yaml"
            ))
            .unwrap(),
        );
        let names: Vec<String> = vif.iter().map(|k| launcher_name(&k.name)).collect();
        assert!(
            names.contains(&"launch_decimate<1>".to_string()),
            "{names:?}"
        );
        assert!(vif.iter().all(|k| k.grf_count == Some(128)));
        assert!(large.iter().all(|k| k.grf_count == Some(256)));
        let spills = parse_ocloc_spills(
            &std::fs::read_to_string(format!("{FORK}/ocloc-compile-float_vif_sycl-acm-g10.txt"))
                .unwrap(),
        );
        assert_eq!(spills.len(), 1);
        assert_eq!(launcher_name(&spills[0].kernel), "launch_decimate<1>");
        assert_eq!(
            (spills[0].simd, spills[0].registers, spills[0].spilled),
            (32, 128, 36)
        );
        let pvc = parse_ocloc_spills(
            &std::fs::read_to_string(format!("{FORK}/ocloc-compile-integer_vif_sycl-pvc.txt"))
                .unwrap(),
        );
        let spilled: Vec<(String, u32)> = pvc
            .iter()
            .map(|s| (launcher_name(&s.kernel), s.spilled))
            .collect();
        assert_eq!(
            spilled,
            [
                ("launch_vif_hori_impl<0,32>".to_string(), 50),
                ("launch_vif_fused_impl<0,32>".to_string(), 60),
                ("launch_vif_fused_impl<1,32>".to_string(), 2)
            ]
        );
    }

    #[test]
    fn the_sycl_front_ends_failure_is_a_compiler_error() {
        let stderr = std::fs::read_to_string(format!(
            "{FORK}/sycl-spirv-integer_motion_v2_sycl-stderr.txt"
        ))
        .unwrap();
        let errors = crate::retune::build_errors::first_error_per_file(&stderr);
        assert_eq!(
            errors[0].location(),
            "feature/sycl/integer_motion_v2_sycl.cpp:85"
        );
        assert_eq!(errors[0].message, "duplicate member 'motion_fps_weight'");
    }
}
