//! The scores of one frame: metric name → value, as a vector sorted by name whose names are
//! shared between frames (`Arc<str>`, interned by the parsers through [`NameInterner`]). A
//! long clip has a million frames of a few metrics each: as a `BTreeMap<String, f64>` a
//! frame cost about 450 bytes (a tree node and a `String` per name), so a 100 MB output
//! took ~0.5 GB per side; this is a name pointer and a value per metric.
//! Its API is the part of a map the crate uses: `get`, `[name]`, `insert`, iteration in
//! name order, `len`, `keys`, `values`, `contains_key`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Default, PartialEq)]
pub struct MetricValues(Vec<(Arc<str>, f64)>);

impl MetricValues {
    pub fn new() -> MetricValues {
        MetricValues(Vec::new())
    }

    pub fn with_capacity(capacity: usize) -> MetricValues {
        MetricValues(Vec::with_capacity(capacity))
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&f64> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Sets `name` to `value`; the old value, if there was one.
    pub fn insert(&mut self, name: impl Into<Arc<str>>, value: f64) -> Option<f64> {
        let name = name.into();
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Builds from pairs in any order, faster than inserting one by one: sorted once, and
    /// of a name given twice the last value is kept (as a JSON object's last key wins).
    pub fn from_unsorted(mut pairs: Vec<(Arc<str>, f64)>) -> MetricValues {
        if !pairs.windows(2).all(|w| w[0].0 < w[1].0) {
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            // A stable sort keeps the order of equal names: keep the last of each run.
            let mut kept: Vec<(Arc<str>, f64)> = Vec::with_capacity(pairs.len());
            for pair in pairs {
                match kept.last_mut() {
                    Some(last) if last.0 == pair.0 => *last = pair,
                    _ => kept.push(pair),
                }
            }
            pairs = kept;
        }
        MetricValues(pairs)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(name, value)` in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &f64)> {
        self.0.iter().map(|(n, v)| (&**n, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| &**n)
    }

    pub fn values(&self) -> impl Iterator<Item = &f64> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Frees the spare capacity left by parsing.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

impl std::ops::Index<&str> for MetricValues {
    type Output = f64;

    fn index(&self, name: &str) -> &f64 {
        self.get(name)
            .unwrap_or_else(|| panic!("no metric `{name}` in this frame"))
    }
}

type Pair = (Arc<str>, f64);

impl<'a> IntoIterator for &'a MetricValues {
    type Item = (&'a str, &'a f64);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Pair>, fn(&'a Pair) -> (&'a str, &'a f64)>;

    fn into_iter(self) -> Self::IntoIter {
        fn pair((name, value): &Pair) -> (&str, &f64) {
            (name, value)
        }
        self.0.iter().map(pair)
    }
}

impl<K: Into<Arc<str>>> FromIterator<(K, f64)> for MetricValues {
    fn from_iter<I: IntoIterator<Item = (K, f64)>>(iter: I) -> MetricValues {
        let mut values = MetricValues::new();
        for (name, value) in iter {
            values.insert(name, value);
        }
        values
    }
}

impl<K: Into<Arc<str>>, const N: usize> From<[(K, f64); N]> for MetricValues {
    fn from(pairs: [(K, f64); N]) -> MetricValues {
        pairs.into_iter().collect()
    }
}

impl fmt::Debug for MetricValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Shares one `Arc<str>` per metric name across the frames of one parse. Frames list their
/// metrics in the same order, so the name after the last one handed out is tried first (a
/// string compare, no hashing); the map is the fallback.
#[derive(Default)]
pub struct NameInterner {
    names: HashMap<Box<str>, Arc<str>>,
    /// The names in the order they were last asked for, and where the next one probably is.
    order: Vec<Arc<str>>,
    next: usize,
}

impl NameInterner {
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(expected) = self.order.get(self.next) {
            if **expected == *name {
                self.next = (self.next + 1) % self.order.len();
                return expected.clone();
            }
        }
        let shared = match self.names.get(name) {
            Some(shared) => shared.clone(),
            None => {
                let shared: Arc<str> = Arc::from(name);
                self.names.insert(name.into(), shared.clone());
                shared
            }
        };
        match self.order.iter().position(|n| Arc::ptr_eq(n, &shared)) {
            Some(at) => self.next = (at + 1) % self.order.len(),
            None => {
                self.order.push(shared.clone());
                self.next = 0;
            }
        }
        shared
    }

    /// How many metrics the frames had so far (a capacity hint for the next frame).
    pub fn width(&self) -> usize {
        self.order.len()
    }
}

/// Written as a JSON object with `null` for a non-finite score, like the map it replaces.
impl Serialize for MetricValues {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(k, v)| (k, v.is_finite().then_some(*v))))
    }
}

impl<'de> Deserialize<'de> for MetricValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MetricValues, D::Error> {
        struct Values;
        impl<'de> Visitor<'de> for Values {
            type Value = MetricValues;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of metric scores")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricValues, A::Error> {
                let mut values = MetricValues::new();
                while let Some((name, value)) = map.next_entry::<String, Option<f64>>()? {
                    values.insert(name, value.unwrap_or(super::NULL_SCORE));
                }
                Ok(values)
            }
        }
        d.deserialize_map(Values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sorted_map_that_shares_names_and_round_trips_nulls() {
        let mut values = MetricValues::new();
        assert_eq!(values.insert("vmaf", 70.0), None);
        values.insert("adm2", 0.9);
        values.insert("psnr_hvs_cb", super::super::NULL_SCORE);
        assert_eq!(values.insert("vmaf", 71.0), Some(70.0));
        assert_eq!(
            values.keys().collect::<Vec<_>>(),
            ["adm2", "psnr_hvs_cb", "vmaf"]
        );
        assert_eq!(values["vmaf"], 71.0);
        assert!(values.get("motion").is_none());
        let json = serde_json::to_string(&values).unwrap();
        assert_eq!(json, r#"{"adm2":0.9,"psnr_hvs_cb":null,"vmaf":71.0}"#);
        let back: MetricValues = serde_json::from_str(&json).unwrap();
        assert_eq!(back, values);

        let mut names = NameInterner::default();
        let (a, b) = (names.intern("vmaf"), names.intern("vmaf"));
        assert!(Arc::ptr_eq(&a, &b), "one allocation per name");
        // Frames in a steady order and out of it get the same shared names.
        let first: Vec<Arc<str>> = ["adm2", "motion", "vmaf"].map(|n| names.intern(n)).into();
        for order in [["adm2", "motion", "vmaf"], ["vmaf", "adm2", "motion"]] {
            for name in order {
                let shared = names.intern(name);
                let same = first.iter().find(|n| ***n == *name).unwrap();
                assert!(Arc::ptr_eq(&shared, same), "{name}");
            }
        }
        assert_eq!(names.width(), 3);

        let pairs = |list: &[(&str, f64)]| -> Vec<(Arc<str>, f64)> {
            list.iter().map(|(n, v)| (Arc::from(*n), *v)).collect()
        };
        let built =
            MetricValues::from_unsorted(pairs(&[("vmaf", 1.0), ("adm2", 2.0), ("vmaf", 3.0)]));
        assert_eq!(
            built.iter().collect::<Vec<_>>(),
            [("adm2", &2.0), ("vmaf", &3.0)]
        );
    }
}
