//! Made-up but valid inputs for the fleet-scale benchmarks: a spec with as many
//! fixture × workload cells as asked (generated fixtures, never read), and cell events as an
//! agent sends them (each a `CellResult::evaluate` of two measured sides with per-frame
//! scores), so the coordinator stores, checks and assembles what it would in production.

use abfleet_core::cell::{CellInput, CellResult, SideMeasurement, SideStatus};
use abfleet_core::events::JobEventPayload;
use abfleet_core::scores::{FrameScores, Scores};
use abfleet_core::spec::JobSpec;

/// A `[[fixtures]]` table of a generated 8-bit 4:2:0 pair (the moving pattern and its
/// distorted copy from `seed`), as the benches' specs hold them.
pub fn generated_fixture(name: &str, width: u32, height: u32, frames: u32, seed: u32) -> String {
    format!(
        "[[fixtures]]\nname = \"{name}\"\nwidth = {width}\nheight = {height}\nbitdepth = 8\npixel_format = \"420\"\nframes = {frames}\nreference = {{ generate = \"moving-pattern\", seed = {seed} }}\ndistorted = {{ generate = \"moving-pattern-distorted\", seed = {seed} }}\n\n"
    )
}

/// The `[measure] seed` of every synthetic spec. A spec that names none gets a fresh one at
/// each submission, and the coordinator refuses a cell whose seed is not its spec's: the cell
/// events a benchmark makes once and every job sends must carry the seed of every job's spec,
/// or the benchmark times the refusal of every cell instead of its intake.
pub const SEED: u64 = 1;

/// Workloads per fixture in a synthetic spec (cells = fixtures × this).
pub const WORKLOADS: u32 = 20;

/// A spec named `name` with at least `cells` cells (fixtures of 20 workloads each), targeting
/// `generation` (`None`: any agent).
pub fn spec(name: &str, cells: u32, generation: Option<&str>) -> JobSpec {
    JobSpec::from_toml(
        &spec_toml(name, cells, generation),
        std::path::Path::new("synthetic.toml"),
        std::path::Path::new("/"),
    )
    .expect("the synthetic spec is valid")
}

/// The TOML of [`spec`] (what `abfleet submit` reads).
pub fn spec_toml(name: &str, cells: u32, generation: Option<&str>) -> String {
    let fixtures = cells.div_ceil(WORKLOADS).max(1);
    let mut toml = format!(
        "name = \"{name}\"\n[upstream]\npath = \"/nonexistent/upstream\"\n[fork]\npath = \"/nonexistent/fork\"\n\
         [build]\ncommands = [[\"make\"]]\nbinary = \"build/vmaf\"\n\
         [command]\ntemplate = [\"{{binary}}\", \"-r\", \"{{reference}}\", \"-d\", \"{{distorted}}\", \"-o\", \"{{output}}\", \"--json\"]\n\
         [measure]\nseed = {SEED}\n"
    );
    for f in 0..fixtures {
        toml.push_str(&generated_fixture(&format!("fixture_{f}"), 64, 64, 2, f));
    }
    for w in 0..WORKLOADS {
        toml.push_str(&format!(
            "[[workloads]]\nname = \"feature_{w}\"\nargs = [\"--feature\", \"psnr\"]\n"
        ));
    }
    if let Some(key) = generation {
        let backend = key.split('/').next().unwrap_or("cpu");
        toml.push_str(&format!(
            "[targets]\nbackends = [\"{backend}\"]\ngenerations = [\"{key}\"]\n"
        ));
    }
    toml
}

fn side(seconds: f64, psnr: f64) -> SideMeasurement {
    SideMeasurement {
        status: SideStatus::Ok,
        times: vec![
            seconds,
            seconds * 1.01,
            seconds * 0.99,
            seconds * 1.02,
            seconds * 0.98,
        ],
        cpu_times: vec![seconds; 5],
        warmup_times: vec![seconds],
        scores: Some(Scores {
            frames: (0..2)
                .map(|i| FrameScores {
                    frame_num: i,
                    metrics: [
                        ("psnr_y", psnr),
                        ("psnr_cb", psnr + 1.0),
                        ("psnr_cr", psnr + 2.0),
                    ]
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v + i as f64))
                    .collect(),
                })
                .collect(),
            ..Scores::default()
        }),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

/// Cell `index` of `spec` as its event.
pub fn cell_event(spec: &JobSpec, index: u32) -> JobEventPayload {
    let workloads = spec.workloads.len() as u32;
    let fixture = &spec.fixtures[(index / workloads) as usize % spec.fixtures.len()];
    let workload = &spec.workloads[(index % workloads) as usize];
    let speedup = 1.0 + f64::from(index % 7) / 10.0;
    JobEventPayload::Cell(Box::new(CellResult::evaluate(
        CellInput {
            index,
            fixture: fixture.name.clone(),
            workload: workload.name.clone(),
            upstream: side(0.5 * speedup, 40.0),
            fork: side(0.5, 40.0),
            load_avg_1min: [0.1, 0.1],
            idle_cores: 1.0,
            host_flags: Vec::new(),
            // The cell's seed under the spec's, as an agent's: the coordinator checks it.
            seed: abfleet_core::paired::cell_seed(spec.measure.seed, index),
            run_order: Vec::new(),
            stop_reason: abfleet_core::paired::StopReason::NotAdaptive,
            overhead_seconds: Some(0.001),
        },
        spec,
    )))
}
