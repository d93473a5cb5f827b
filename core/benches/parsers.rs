//! Criterion benchmarks of the output parsers (`abfleet_core::output`) on what a 4K,
//! 10-minute clip at 24 fps makes vmaf write: 14,400 frames × 30 metrics at `%.6f`, generated
//! here in each format's shape (JSON as `--json` writes it, XML as `--xml`, CSV as `--csv`)
//! from a seeded generator, so every run parses the same text. `cargo bench -p abfleet-core
//! --bench parsers`; `-- --test` runs each once (CI's smoke). Figures: docs/performance.md.

use std::fmt::Write;

use abfleet_core::output::{parse, parse_reader, OutputFormat};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// 10 minutes at 24 fps.
const FRAMES: u32 = 14_400;

/// A vmaf model's features and the common extra features: 30 metrics.
const METRICS: [&str; 30] = [
    "integer_adm2",
    "integer_aim",
    "integer_adm3",
    "integer_adm_scale0",
    "integer_adm_scale1",
    "integer_adm_scale2",
    "integer_adm_scale3",
    "integer_motion2",
    "integer_motion",
    "integer_vif_scale0",
    "integer_vif_scale1",
    "integer_vif_scale2",
    "integer_vif_scale3",
    "integer_motion3",
    "vmaf",
    "float_ssim",
    "float_ms_ssim",
    "psnr_y",
    "psnr_cb",
    "psnr_cr",
    "psnr_hvs_y",
    "psnr_hvs_cb",
    "psnr_hvs_cr",
    "psnr_hvs",
    "cambi",
    "ciede2000",
    "ssimulacra2",
    "float_vif_scale0",
    "float_adm2",
    "float_motion",
];

/// Every frame's values, from a seeded xorshift.
fn values(frames: u32) -> Vec<[f64; METRICS.len()]> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        0.5 + (state >> 11) as f64 / (1u64 << 53) as f64 * 99.5
    };
    (0..frames)
        .map(|_| std::array::from_fn(|_| next()))
        .collect()
}

/// min, max, mean and harmonic mean of each metric over the frames.
fn pooled(frames: &[[f64; METRICS.len()]]) -> Vec<[f64; 4]> {
    (0..METRICS.len())
        .map(|m| {
            let column = frames.iter().map(|f| f[m]);
            let n = frames.len() as f64;
            [
                column.clone().fold(f64::INFINITY, f64::min),
                column.clone().fold(f64::NEG_INFINITY, f64::max),
                column.clone().sum::<f64>() / n,
                n / column.map(|v| 1.0 / v).sum::<f64>(),
            ]
        })
        .collect()
}

fn json(frames: &[[f64; METRICS.len()]]) -> String {
    let mut out =
        String::from("{\n  \"version\": \"3.0.0\",\n  \"fps\": 14.87,\n  \"frames\": [\n");
    for (n, frame) in frames.iter().enumerate() {
        write!(
            out,
            "    {{\n      \"frameNum\": {n},\n      \"metrics\": {{\n"
        )
        .unwrap();
        for (i, (metric, value)) in METRICS.iter().zip(frame).enumerate() {
            let comma = if i + 1 < METRICS.len() { "," } else { "" };
            writeln!(out, "        \"{metric}\": {value:.6}{comma}").unwrap();
        }
        let comma = if n + 1 < frames.len() { "," } else { "" };
        writeln!(out, "      }}\n    }}{comma}").unwrap();
    }
    out.push_str("  ],\n  \"pooled_metrics\": {\n");
    for (i, (metric, [min, max, mean, harmonic])) in METRICS.iter().zip(pooled(frames)).enumerate()
    {
        let comma = if i + 1 < METRICS.len() { "," } else { "" };
        writeln!(
            out,
            "    \"{metric}\": {{\n      \"min\": {min:.6},\n      \"max\": {max:.6},\n      \"mean\": {mean:.6},\n      \"harmonic_mean\": {harmonic:.6}\n    }}{comma}"
        )
        .unwrap();
    }
    out.push_str("  },\n  \"aggregate_metrics\": {\n  }\n}\n");
    out
}

fn xml(frames: &[[f64; METRICS.len()]]) -> String {
    let mut out = String::from(
        "<VMAF version=\"3.0.0\">\n  <params qualityWidth=\"3840\" qualityHeight=\"2160\" />\n  <fyi fps=\"14.87\" />\n  <frames>\n",
    );
    for (n, frame) in frames.iter().enumerate() {
        write!(out, "    <frame frameNum=\"{n}\"").unwrap();
        for (metric, value) in METRICS.iter().zip(frame) {
            write!(out, " {metric}=\"{value:.6}\"").unwrap();
        }
        out.push_str(" />\n");
    }
    out.push_str("  </frames>\n  <pooled_metrics>\n");
    for (metric, [min, max, mean, harmonic]) in METRICS.iter().zip(pooled(frames)) {
        writeln!(
            out,
            "    <metric name=\"{metric}\" min=\"{min:.6}\" max=\"{max:.6}\" mean=\"{mean:.6}\" harmonic_mean=\"{harmonic:.6}\" />"
        )
        .unwrap();
    }
    out.push_str("  </pooled_metrics>\n  <aggregate_metrics />\n</VMAF>\n");
    out
}

fn csv(frames: &[[f64; METRICS.len()]]) -> String {
    let mut out = String::from("Frame,");
    for metric in METRICS {
        write!(out, "{metric},").unwrap();
    }
    out.push('\n');
    for (n, frame) in frames.iter().enumerate() {
        write!(out, "{n},").unwrap();
        for value in frame {
            write!(out, "{value:.6},").unwrap();
        }
        out.push('\n');
    }
    out
}

fn parsers(c: &mut Criterion) {
    let frames = values(FRAMES);
    let mut group = c.benchmark_group("parse a 4K 10-minute output (14,400 frames × 30 metrics)");
    // Each parse takes tens of milliseconds: ten samples keep a run under a minute.
    group.sample_size(10);
    for (format, text) in [
        (OutputFormat::Json, json(&frames)),
        (OutputFormat::Xml, xml(&frames)),
        (OutputFormat::Csv, csv(&frames)),
    ] {
        let parsed = parse(format, &text).expect("the generated output parses");
        assert_eq!(parsed.frames.len(), FRAMES as usize);
        assert_eq!(parsed.frames[0].metrics.len(), METRICS.len());
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("parse (whole text)", format!("{format:?}")),
            &text,
            |b, text| b.iter(|| parse(format, text).expect("parses")),
        );
        if format == OutputFormat::Json {
            // What the agent runs on every output: streamed from a reader.
            group.bench_with_input(
                BenchmarkId::new("parse_reader (streamed)", "Json"),
                &text,
                |b, text| b.iter(|| parse_reader(format, text.as_bytes()).expect("parses")),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, parsers);
criterion_main!(benches);
