//! Which configurations a sweep times, the shipped default first: the full grid when it fits
//! the budget (or when asked), else one knob at a time around the default, or a seeded random
//! sample. What the budget or the strategy leaves out is listed as not tried, with why.

use std::collections::BTreeMap;

use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::spec::{SearchStrategy, SweepSpec};

/// At most this many untried configurations are listed by name; the rest are counted.
pub const NOT_TRIED_LISTED: usize = 50;

/// One setting of every tunable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    /// `ssim_band=64 row_stride=1`: every tunable, in the spec's order.
    pub label: String,
    /// Tunable name → value.
    pub values: BTreeMap<String, String>,
}

impl Configuration {
    fn from_indexes(spec: &SweepSpec, indexes: &[usize]) -> Configuration {
        let mut values = BTreeMap::new();
        let mut label = Vec::new();
        for (tunable, &i) in spec.tunables.iter().zip(indexes) {
            let value = &tunable.values[i];
            values.insert(tunable.name.clone(), value.clone());
            label.push(format!("{}={value}", tunable.name));
        }
        Configuration {
            label: label.join(" "),
            values,
        }
    }

    /// The shipped default of every tunable.
    pub fn default_of(spec: &SweepSpec) -> Configuration {
        Configuration::from_indexes(spec, &default_indexes(spec))
    }

    /// The tunables whose value differs from `default`, as `name=value`.
    pub fn changes_from(&self, default: &Configuration) -> Vec<String> {
        self.values
            .iter()
            .filter(|(name, value)| default.values.get(*name) != Some(value))
            .map(|(name, value)| format!("{name}={value}"))
            .collect()
    }
}

/// A configuration the sweep did not time, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotTried {
    pub label: String,
    pub reason: String,
}

/// The configurations to time, and what is left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// The strategy that chose them (`auto` resolved to `grid` or `one-at-a-time`).
    pub strategy: SearchStrategy,
    pub grid_size: u64,
    /// The default first.
    pub configurations: Vec<Configuration>,
    /// Up to [`NOT_TRIED_LISTED`] of the configurations left out.
    pub not_tried: Vec<NotTried>,
    /// How many configurations of the grid are left out in all.
    pub not_tried_count: u64,
}

fn default_indexes(spec: &SweepSpec) -> Vec<usize> {
    spec.tunables
        .iter()
        .map(|t| {
            t.values
                .iter()
                .position(|v| *v == t.default)
                .expect("validation put the default among the values")
        })
        .collect()
}

/// Mixed-radix decoding of a grid index (the first tunable varies slowest).
fn grid_indexes(spec: &SweepSpec, mut index: u64) -> Vec<usize> {
    let mut indexes = vec![0; spec.tunables.len()];
    for (slot, tunable) in indexes.iter_mut().zip(&spec.tunables).rev() {
        let n = tunable.values.len() as u64;
        *slot = (index % n) as usize;
        index /= n;
    }
    indexes
}

/// The configurations of a sweep, the default first, within `max_configurations`.
pub fn plan(spec: &SweepSpec, seed: u64) -> SweepPlan {
    let grid_size = spec.grid_size();
    let budget = spec.max_configurations as usize;
    let strategy = match spec.search {
        SearchStrategy::Auto if grid_size <= budget as u64 => SearchStrategy::Grid,
        SearchStrategy::Auto => SearchStrategy::OneAtATime,
        other => other,
    };
    let default = default_indexes(spec);
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    // How many candidates the strategy could name beyond what is listed (for the count).
    let strategy_total: u64;
    let budget_reason = format!(
        "budget: [sweep] max_configurations = {} reached",
        spec.max_configurations
    );
    let strategy_reason = match strategy {
        SearchStrategy::OneAtATime => {
            "the one-at-a-time search changes one tunable at a time; combinations are not tried"
        }
        SearchStrategy::Random => "not drawn by the random search within the budget",
        _ => "",
    };
    let listed_cap = budget + NOT_TRIED_LISTED;
    match strategy {
        SearchStrategy::Grid | SearchStrategy::Auto => {
            strategy_total = grid_size - 1;
            let mut index = 0u64;
            while index < grid_size && candidates.len() < listed_cap {
                let indexes = grid_indexes(spec, index);
                if indexes != default {
                    candidates.push(indexes);
                }
                index += 1;
            }
        }
        SearchStrategy::OneAtATime => {
            let (one_at_a_time, total) = one_at_a_time(spec, &default);
            strategy_total = total;
            candidates = one_at_a_time;
        }
        SearchStrategy::Random => {
            strategy_total = budget.saturating_sub(1) as u64;
            let mut draws = random_draws(seed);
            let mut seen = std::collections::BTreeSet::new();
            seen.insert(default.clone());
            let mut attempts = 0;
            while candidates.len() + 1 < budget && attempts < budget * 64 {
                attempts += 1;
                let indexes = grid_indexes(spec, draws.next_u64() % grid_size);
                if seen.insert(indexes.clone()) {
                    candidates.push(indexes);
                }
            }
        }
    }
    let mut configurations = vec![Configuration::from_indexes(spec, &default)];
    let mut not_tried = Vec::new();
    for indexes in candidates {
        let configuration = Configuration::from_indexes(spec, &indexes);
        if configurations.len() < budget {
            configurations.push(configuration);
        } else if not_tried.len() < NOT_TRIED_LISTED {
            not_tried.push(NotTried {
                label: configuration.label,
                reason: budget_reason.clone(),
            });
        }
    }
    let tried = configurations.len() as u64;
    let not_tried_count = grid_size.saturating_sub(tried);
    let beyond_budget = (strategy_total + 1).saturating_sub(tried);
    if not_tried.len() < NOT_TRIED_LISTED && not_tried_count > beyond_budget {
        // The rest of the grid, left out by the strategy itself rather than the budget.
        let mut index = 0u64;
        let chosen: std::collections::BTreeSet<&str> = configurations
            .iter()
            .map(|c| c.label.as_str())
            .chain(not_tried.iter().map(|n| n.label.as_str()))
            .collect();
        let mut extra = Vec::new();
        while index < grid_size && not_tried.len() + extra.len() < NOT_TRIED_LISTED {
            let configuration = Configuration::from_indexes(spec, &grid_indexes(spec, index));
            if !chosen.contains(configuration.label.as_str()) {
                extra.push(NotTried {
                    label: configuration.label,
                    reason: strategy_reason.to_string(),
                });
            }
            index += 1;
        }
        not_tried.extend(extra);
    }
    SweepPlan {
        strategy,
        grid_size,
        configurations,
        not_tried,
        not_tried_count,
    }
}

/// The one-at-a-time candidates: each tunable changed alone, nearest values to the default
/// first, tunable by tunable in turn; and how many there are.
fn one_at_a_time(spec: &SweepSpec, default: &[usize]) -> (Vec<Vec<usize>>, u64) {
    let mut candidates = Vec::new();
    let mut per_tunable: Vec<Vec<usize>> = spec
        .tunables
        .iter()
        .enumerate()
        .map(|(t, tunable)| {
            let mut others: Vec<usize> = (0..tunable.values.len())
                .filter(|&i| i != default[t])
                .collect();
            others.sort_by_key(|&i| (i.abs_diff(default[t]), i));
            others
        })
        .collect();
    let total = per_tunable.iter().map(|v| v.len() as u64).sum();
    let mut round = 0;
    while per_tunable.iter().any(|v| round < v.len()) {
        for (t, others) in per_tunable.iter_mut().enumerate() {
            if let Some(&i) = others.get(round) {
                let mut indexes = default.to_vec();
                indexes[t] = i;
                candidates.push(indexes);
            }
        }
        round += 1;
    }
    (candidates, total)
}

/// The random search's draws for a sweep seed.
fn random_draws(seed: u64) -> SplitMix64 {
    SplitMix64::seed_from_u64(seed ^ 0x5EED_5EED_5EED_5EED)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The random search's draws for seed 7, as they were before `rand_xoshiro`'s
    /// SplitMix64 drew them: a recorded sweep seed plans the same configurations.
    #[test]
    fn the_random_search_draws_the_recorded_stream() {
        let mut draws = random_draws(7);
        let first: Vec<u64> = (0..3).map(|_| draws.next_u64()).collect();
        assert_eq!(
            first,
            [
                0x57c7_1ba0_ef26_ee5a,
                0x71cb_bc42_55c3_b52e,
                0x5f5c_38ee_510c_afee
            ]
        );
    }
    use crate::spec::{Tunable, TunableKind};

    fn tunable(name: &str, values: &[&str], default: &str) -> Tunable {
        Tunable {
            name: name.into(),
            how: TunableKind::Env(name.to_uppercase()),
            values: values.iter().map(|v| v.to_string()).collect(),
            default: default.into(),
        }
    }

    fn sweep(search: SearchStrategy, max: u32) -> SweepSpec {
        SweepSpec {
            tunables: vec![
                tunable("chunk", &["1", "8", "64", "0"], "8"),
                tunable("stride", &["1", "2"], "1"),
            ],
            search,
            max_configurations: max,
            max_seconds: None,
        }
    }

    #[test]
    fn a_small_grid_is_tried_whole_with_the_default_first() {
        let plan = plan(&sweep(SearchStrategy::Auto, 32), 1);
        assert_eq!(plan.strategy, SearchStrategy::Grid);
        assert_eq!(plan.grid_size, 8);
        assert_eq!(plan.configurations.len(), 8);
        assert_eq!(plan.configurations[0].label, "chunk=8 stride=1");
        assert_eq!(plan.not_tried_count, 0);
        assert!(plan.not_tried.is_empty());
        let labels: std::collections::BTreeSet<_> =
            plan.configurations.iter().map(|c| &c.label).collect();
        assert_eq!(labels.len(), 8, "no configuration twice");
    }

    #[test]
    fn the_budget_stops_the_grid_and_names_what_was_left_out() {
        let plan = plan(&sweep(SearchStrategy::Grid, 3), 1);
        assert_eq!(plan.configurations.len(), 3);
        assert_eq!(plan.not_tried_count, 5);
        assert_eq!(plan.not_tried.len(), 5);
        assert!(plan.not_tried[0].reason.contains("max_configurations = 3"));
        for left_out in &plan.not_tried {
            assert!(!plan
                .configurations
                .iter()
                .any(|c| c.label == left_out.label));
        }
    }

    #[test]
    fn a_large_space_goes_one_knob_at_a_time_nearest_values_first() {
        let plan = plan(&sweep(SearchStrategy::Auto, 4), 1);
        assert_eq!(plan.strategy, SearchStrategy::OneAtATime);
        let labels: Vec<&str> = plan
            .configurations
            .iter()
            .map(|c| c.label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "chunk=8 stride=1",
                "chunk=1 stride=1",
                "chunk=8 stride=2",
                "chunk=64 stride=1"
            ]
        );
        // chunk=0 is left out by the budget, the combinations by the strategy.
        assert_eq!(plan.not_tried_count, 4);
        assert!(plan
            .not_tried
            .iter()
            .any(|n| n.label == "chunk=0 stride=1" && n.reason.contains("budget")));
        assert!(plan
            .not_tried
            .iter()
            .any(|n| n.label == "chunk=1 stride=2" && n.reason.contains("combinations")));
    }

    #[test]
    fn random_sampling_is_seeded_distinct_and_within_the_budget() {
        let a = plan(&sweep(SearchStrategy::Random, 5), 7);
        let b = plan(&sweep(SearchStrategy::Random, 5), 7);
        assert_eq!(a, b);
        assert_eq!(a.configurations.len(), 5);
        assert_eq!(a.configurations[0].label, "chunk=8 stride=1");
        let labels: std::collections::BTreeSet<_> =
            a.configurations.iter().map(|c| &c.label).collect();
        assert_eq!(labels.len(), 5);
        assert_eq!(a.not_tried_count, 3);
    }
}
