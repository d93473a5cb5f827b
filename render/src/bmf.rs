//! `abfleet report RUN --format bmf`: the report in Bencher Metric Format, so results flow
//! into Bencher, a Grafana JSON source or any CI gate that reads it. One benchmark per
//! measured cell, named `GENERATION/FIXTURE/WORKLOAD` (without the generation when the run
//! had none), with these measures:
//!
//! - `latency`: the fork's median time in nanoseconds; `lower_value`/`upper_value` from the
//!   speedup's 95% interval (upstream's median divided by its bounds), when it has one;
//! - `upstream-latency`: upstream's median in nanoseconds (absent for a fork-only workload);
//! - `speedup`: upstream median / fork median, with the interval as its bounds;
//! - `score-delta-METRIC`: the pooled-mean score delta (fork − upstream) of each shared metric.
//!
//! A cell with nothing measured, or rejected by the coordinator, is left out: BMF has no way
//! to say "not measured", and a missing benchmark is what a tool reading it can check.
//! Non-finite values are left out too: JSON cannot carry them.

use serde_json::{json, Map, Value};

use abfleet_core::cell::CellResult;
use abfleet_core::report::{Report, ANY_GENERATION};

/// The report as a BMF JSON document (pretty, with a trailing newline).
pub fn render_bmf(report: &Report) -> String {
    let mut benchmarks = Map::new();
    for cell in &report.cells {
        if !cell.rejected.is_empty() {
            continue;
        }
        let measures = cell_measures(cell);
        if !measures.is_empty() {
            benchmarks.insert(benchmark_name(cell), Value::Object(measures));
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(benchmarks))
        .expect("a JSON map of finite numbers serializes");
    text.push('\n');
    text
}

fn benchmark_name(cell: &CellResult) -> String {
    match cell.generation.as_deref() {
        Some(key) if key != ANY_GENERATION => format!("{key}/{}/{}", cell.fixture, cell.workload),
        _ => format!("{}/{}", cell.fixture, cell.workload),
    }
}

fn cell_measures(cell: &CellResult) -> Map<String, Value> {
    const NS: f64 = 1e9;
    let mut measures = Map::new();
    let upstream = cell.upstream.median_time;
    if let Some(fork) = cell.fork.median_time {
        let bounds = match (upstream, cell.speedup_ci95) {
            (Some(up), Some([lo, hi])) if lo > 0.0 && hi > 0.0 => Some([up / hi, up / lo]),
            _ => None,
        };
        insert(
            &mut measures,
            "latency",
            fork * NS,
            bounds.map(|[l, u]| [l * NS, u * NS]),
        );
    }
    if let Some(up) = upstream {
        insert(&mut measures, "upstream-latency", up * NS, None);
    }
    if let Some(speedup) = cell.speedup {
        insert(&mut measures, "speedup", speedup, cell.speedup_ci95);
    }
    for (metric, delta) in &cell.score_delta {
        insert(
            &mut measures,
            &format!("score-delta-{metric}"),
            *delta,
            None,
        );
    }
    measures
}

fn insert(measures: &mut Map<String, Value>, name: &str, value: f64, bounds: Option<[f64; 2]>) {
    if !value.is_finite() {
        return;
    }
    let mut measure = json!({ "value": value });
    if let Some([lower, upper]) = bounds.filter(|[l, u]| l.is_finite() && u.is_finite()) {
        measure["lower_value"] = json!(lower);
        measure["upper_value"] = json!(upper);
    }
    measures.insert(name.to_string(), measure);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drift_report() -> Report {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/reports/demo-drift.json"
        );
        Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// BMF as Bencher documents it: an object of benchmarks, each an object of measures, each
    /// with a number `value` and optional number `lower_value` ≤ value ≤ `upper_value`.
    fn assert_valid_bmf(document: &Value) {
        let benchmarks = document.as_object().expect("top level is an object");
        assert!(!benchmarks.is_empty());
        for (name, measures) in benchmarks {
            assert!(!name.is_empty());
            let measures = measures.as_object().expect("measures are an object");
            assert!(!measures.is_empty(), "{name}");
            for (measure, metric) in measures {
                let metric = metric.as_object().expect("a metric is an object");
                for key in metric.keys() {
                    assert!(
                        ["value", "lower_value", "upper_value"].contains(&key.as_str()),
                        "{name}/{measure}: unknown key {key}"
                    );
                }
                let value = metric["value"].as_f64().expect("value is a number");
                if let Some(lower) = metric.get("lower_value") {
                    assert!(lower.as_f64().unwrap() <= value, "{name}/{measure}");
                }
                if let Some(upper) = metric.get("upper_value") {
                    assert!(upper.as_f64().unwrap() >= value, "{name}/{measure}");
                }
            }
        }
    }

    #[test]
    fn each_measured_cell_is_a_benchmark_with_its_latency_interval_speedup_and_deltas() {
        let report = drift_report();
        let document: Value = serde_json::from_str(&render_bmf(&report)).unwrap();
        assert_valid_bmf(&document);
        let cell = report.cells.iter().find(|c| c.workload == "psnr").unwrap();
        let name = benchmark_name(cell);
        let psnr = &document[&name];
        let fork_ns = cell.fork.median_time.unwrap() * 1e9;
        assert!((psnr["latency"]["value"].as_f64().unwrap() - fork_ns).abs() < 1e-3);
        let [lo, hi] = cell.speedup_ci95.unwrap();
        let up = cell.upstream.median_time.unwrap();
        assert!((psnr["latency"]["lower_value"].as_f64().unwrap() - up / hi * 1e9).abs() < 1e-3);
        assert!((psnr["latency"]["upper_value"].as_f64().unwrap() - up / lo * 1e9).abs() < 1e-3);
        assert_eq!(psnr["speedup"]["lower_value"].as_f64(), Some(lo));
        assert_eq!(psnr["speedup"]["value"].as_f64(), cell.speedup);
        for (metric, delta) in &cell.score_delta {
            assert_eq!(
                psnr[format!("score-delta-{metric}")]["value"].as_f64(),
                Some(*delta)
            );
        }
    }

    #[test]
    fn a_cell_measured_on_one_side_only_has_that_sides_latency_and_nothing_not_measured_appears() {
        let mut report = drift_report();
        let document: Value = serde_json::from_str(&render_bmf(&report)).unwrap();
        let fork_only = report
            .cells
            .iter()
            .find(|c| c.workload == "motion_v2")
            .unwrap();
        let measures = document[&benchmark_name(fork_only)]
            .as_object()
            .expect("the fork-only workload is a benchmark");
        let names: Vec<&str> = measures.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["latency"],
            "absent upstream: no speedup, no upstream latency"
        );
        assert!(
            measures["latency"].get("lower_value").is_none(),
            "no interval without pairs"
        );
        // Rejected cells are left out.
        let before = document.as_object().unwrap().len();
        for cell in &mut report.cells {
            cell.rejected = vec!["out of range".into()];
        }
        assert_eq!(render_bmf(&report), "{}\n");
        assert!(before > 0);
    }
}
