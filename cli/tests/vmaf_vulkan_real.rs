//! The fork's Vulkan backend, for real, on Mesa's lavapipe (Vulkan compute on the CPU):
//! `abfleet local` on the production spec `fixtures/jobs/vmaf-vulkan.toml` (the fork's tree
//! and the real 576x324 pair swapped in, and the fork's volk and VulkanMemoryAllocator
//! subprojects filled from Debian's packages first, as the spec says for an offline host).
//! The fork is built with Vulkan on, every workload runs with `--backend vulkan` as its
//! `X_vulkan` kernel and once more on the CPU path of the same binary, and the report gates
//! the two: the generation key says lavapipe is a CPU driver, the features whose Vulkan
//! kernels compute something else fail parity with their deltas, and the kernel that
//! crashes is a failed cell with its signal.
//!
//! Needs glslc, libvulkan-dev, libvulkan-volk-dev, mesa-vulkan-drivers and vulkan-tools
//! besides what vmaf_real.rs needs (`scripts/test` installs them). About 3 minutes.

mod support;
#[path = "support/vmaf_trees.rs"]
mod vmaf_trees;

use std::path::Path;
use std::process::Command;

use abfleet_core::backend_cell::BackendCellStatus;
use abfleet_core::report::Report;
use vmaf_trees::*;

#[test]
fn the_forks_vulkan_backend_on_lavapipe_is_gated_against_its_cpu_path() {
    require_tools(&["glslc", "vulkaninfo", "dpkg-deb", "apt-get"]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let fork = root.join("fork-vmaf");
    let fork_commit = support::repo_from_tarball(&real_tree("fork-c2a3c7e0.tar.xz"), &fork, None);
    let reference = unpack_fixture(REFERENCE, root);
    let distorted = unpack_fixture(DISTORTED, root);
    let production =
        std::fs::read_to_string(repo_root().join("fixtures/jobs/vmaf-vulkan.toml")).unwrap();
    let spec_text = derive_vulkan_spec(&production, &fork, &fork_commit, &reference, &distorted);
    let spec_path = root.join("vmaf-vulkan.toml");
    std::fs::write(&spec_path, &spec_text).unwrap();
    let expected: Vec<String> = abfleet_core::spec::JobSpec::load(&spec_path)
        .unwrap_or_else(|e| panic!("the derived spec does not load: {e:#}\n{spec_text}"))
        .workloads
        .iter()
        .map(|w| w.name.clone())
        .collect();

    let out = root.join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(root)
        .arg("local")
        .arg(&spec_path)
        .arg("--out")
        .arg(&out)
        // The subprojects' private apt state and the mesa shader cache stay in the test's dir.
        .env("VULKAN_SUBPROJECTS_CACHE", root.join("apt-cache"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .output()
        .expect("abfleet runs");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let context = format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr (tail)\n{}\n--- report.md\n{markdown}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        tail(&String::from_utf8_lossy(&output.stderr), 40)
    );
    let json = std::fs::read_to_string(out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e})\n{context}"));
    let report = Report::from_json(&json).unwrap();
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    let Some(section) = report
        .generations
        .iter()
        .find(|g| g.key == "vulkan/cpu/llvmpipe")
    else {
        panic!("no vulkan/cpu/llvmpipe section\n{context}");
    };
    check(
        section
            .host
            .as_ref()
            .and_then(|h| h.generations.iter().find(|g| g.key == section.key))
            .is_some_and(|g| g.description.contains("a CPU driver")),
        "the generation says lavapipe is a CPU driver".into(),
    );
    let cell = |name: &str| section.backend_cells.iter().find(|c| c.workload == name);
    for name in &expected {
        check(cell(name).is_some(), format!("a Vulkan cell for {name}"));
    }
    // The crashing kernel: a failed cell with its signal, never a silent CPU score.
    if let Some(cambi) = cell("cambi") {
        check(
            cambi.status == BackendCellStatus::Failed
                && cambi
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("signal 11")),
            format!(
                "cambi_vulkan crashes (SIGSEGV) and says so: {:?} {:?}",
                cambi.status, cambi.reason
            ),
        );
    }
    // The kernels that compute what the CPU does, to the last printed digit.
    for name in ["psnr", "float_psnr", "float_moment"] {
        let Some(c) = cell(name) else { continue };
        check(
            c.status == BackendCellStatus::Measured
                && c.cpu_parity
                    .as_ref()
                    .is_some_and(|p| p.passed && p.max_frame_delta == 0.0),
            format!(
                "{name}: identical to the CPU path ({:?}, {:?})",
                c.status, c.cpu_parity
            ),
        );
    }
    // The ones that do not: the fork's Vulkan vif is ~0.1 off, and the model with it.
    for (name, metric) in [("vif", "integer_vif_scale0"), ("vmaf_v0.6.1", "vmaf")] {
        let Some(c) = cell(name) else { continue };
        let parity = c.cpu_parity.as_ref();
        check(
            parity.is_some_and(|p| !p.passed),
            format!("{name}: fails the gate against the CPU path ({parity:?})"),
        );
        check(
            parity.is_some_and(|p| p.pooled_delta.get(metric).is_some_and(|d| d.abs() > 1e-2)),
            format!("{name}: `{metric}` is far off the CPU's ({parity:?})"),
        );
    }
    for name in ["psnr", "vif"] {
        let Some(c) = cell(name) else { continue };
        check(
            c.backend_reported.as_deref() == Some(&format!("vulkan (asked as {name}_vulkan)")),
            format!(
                "{name}: the report says the `{name}_vulkan` kernel ran ({:?})",
                c.backend_reported
            ),
        );
    }
    // The model row ran the Vulkan extractors: its frames carry their extra metrics.
    if let Some(model) = cell("vmaf_v0.6.1") {
        check(
            model.metric_keys.is_some_and(|k| k > 20),
            format!(
                "the model row's frames have the Vulkan extractors' keys ({:?})",
                model.metric_keys
            ),
        );
    }
    check(
        report
            .score_parity_report
            .iter()
            .any(|l| l.contains("differs from the CPU path")),
        format!(
            "the parity report says where they differ ({:?})",
            report.score_parity_report
        ),
    );
    check(
        markdown.contains("differs from the CPU path"),
        "report.md says where Vulkan differs from the CPU path".into(),
    );
    check(
        report
            .cross_parity
            .iter()
            .any(|r| r.workload == "vif" && !r.agrees()),
        "the cross-generation table shows vif disagreeing".into(),
    );
    check(
        output.status.code() == Some(1),
        format!(
            "`abfleet local` exits 1 (parity failed): {:?}",
            output.status.code()
        ),
    );
    assert_none_failed(&failures, &context);
}

/// The production spec with this test's fork tree and the real pair, and the subprojects
/// filled first (this machine reaches only Debian's archive, not the wraps' sources).
fn derive_vulkan_spec(
    production: &str,
    fork: &Path,
    fork_commit: &str,
    reference: &Path,
    distorted: &Path,
) -> String {
    let fill = repo_root().join("fixtures/vmaf-real/vulkan-subprojects.sh");
    let mut out = String::new();
    for (header, body) in split_sections(production) {
        let section = match header.as_str() {
            "[fork]" => {
                let body = replace_line(
                    &body,
                    "git = ",
                    &format!("git = {}", toml_string(&fork.display().to_string())),
                );
                format!(
                    "{header}\n{}",
                    replace_line(&body, "rev = ", &format!("rev = \"{fork_commit}\""))
                )
            }
            "[backends.vulkan]" => {
                let body = body.replacen(
                    "commands = [\n",
                    &format!(
                        "commands = [\n    [\"bash\", {}, \".\"],\n",
                        toml_string(&fill.display().to_string())
                    ),
                    1,
                );
                format!("{header}\n{body}")
            }
            "[[fixtures]]" => fixture_section(
                "testsrc2_576x324",
                FRAMES,
                (reference, REFERENCE.1),
                (distorted, DISTORTED.1),
            ),
            _ => format!("{header}\n{body}"),
        };
        out.push_str(&section);
    }
    assert!(
        out.contains("vulkan-subprojects.sh"),
        "the fill step went in:\n{out}"
    );
    out
}
