//! Criterion benchmarks of the output parsers (`abfleet_core::output`) on what a 4K,
//! 10-minute clip at 24 fps makes vmaf write: 14,400 frames × 30 metrics at `%.6f`, in each
//! format's shape (`abfleet_core::output::synthetic`: JSON as `--json` writes it, XML as
//! `--xml`, CSV as `--csv`, from a seeded generator, so every run parses the same text).
//! `cargo bench -p abfleet-core --bench parsers`; `-- --test` runs each once (CI's smoke).
//! Figures: docs/performance.md.

use abfleet_core::output::synthetic::{output_text, METRICS, TEN_MINUTES_AT_24_FPS as FRAMES};
use abfleet_core::output::{parse, parse_reader, OutputFormat};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn parsers(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse a 4K 10-minute output (14,400 frames × 30 metrics)");
    // Each parse takes tens of milliseconds: ten samples keep a run under a minute.
    group.sample_size(10);
    for (format, text) in [
        (OutputFormat::Json, output_text(OutputFormat::Json, FRAMES)),
        (OutputFormat::Xml, output_text(OutputFormat::Xml, FRAMES)),
        (OutputFormat::Csv, output_text(OutputFormat::Csv, FRAMES)),
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
