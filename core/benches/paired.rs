//! Criterion benchmarks of the paired statistics (`abfleet_core::paired`): `analyse` (ratio of
//! medians, the seeded bootstrap interval with its default 2,000 resamples, the Wilcoxon
//! signed-rank test, the verdict) at the pair counts a cell takes — the adaptive minimum, a
//! typical adaptive stop, the cap — and the bootstrap alone. Pairs come from a seeded
//! generator (a fork 3% faster, ±2% noise), so every run analyses the same numbers. `cargo
//! bench -p abfleet-core --bench paired`; `-- --test` runs each once (CI's smoke). Figures:
//! docs/performance.md.

use abfleet_core::paired::{analyse, bootstrap_ci, AnalysisConfig, Pair};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn pairs(n: usize) -> Vec<Pair> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.04
    };
    (0..n)
        .map(|_| Pair {
            upstream_s: 1.0 * (1.0 + noise()),
            fork_s: 0.97 * (1.0 + noise()),
        })
        .collect()
}

fn paired(c: &mut Criterion) {
    let config = AnalysisConfig::default();
    let mut group = c.benchmark_group("paired statistics");
    for n in [5, 12, 30, 100] {
        let pairs = pairs(n);
        assert!(analyse(&pairs, &config).is_some(), "{n} pairs analyse");
        group.bench_with_input(BenchmarkId::new("analyse", n), &pairs, |b, pairs| {
            b.iter(|| analyse(pairs, &config))
        });
        group.bench_with_input(
            BenchmarkId::new("bootstrap_ci (2,000 resamples)", n),
            &pairs,
            |b, pairs| {
                b.iter(|| {
                    bootstrap_ci(
                        pairs,
                        config.bootstrap_resamples,
                        config.confidence,
                        config.seed,
                    )
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, paired);
criterion_main!(benches);
