//! The JSON form (`--json`): `version`, `fps`, `frames`, `pooled_metrics`, `aggregate_metrics`.
//!
//! Read with hand-written serde visitors rather than derived ones so that a bad metric value
//! is reported with its metric name and frame, at its line, without a second pass. Numbers
//! keep all 17 digits of `--precision max` through serde_json's `float_roundtrip` feature.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::error::Category;
use serde_json::Value;

use super::{OutputError, OutputFormat, Position, Site};
use crate::scores::{FrameScores, Pooled, Scores};

const FORMAT: OutputFormat = OutputFormat::Json;

pub(super) fn parse(text: &str) -> Result<Scores, OutputError> {
    let bad = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    (&mut deserializer)
        .deserialize_map(Document(&bad))
        .and_then(|scores| deserializer.end().map(|()| scores))
        .map_err(|err| output_error(&err, bad.take(), text))
}

/// Streams a document from `reader` through the same visitors as [`parse`], never holding its
/// text: only the per-frame numbers stay. An error is positioned, but a printf `nan` is not
/// named (that needs the lines above it): the caller re-reads the text with [`parse`] to
/// explain a failure.
pub(super) fn parse_reader<R: std::io::Read>(reader: R) -> Result<Scores, OutputError> {
    let bad = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    (&mut deserializer)
        .deserialize_map(Document(&bad))
        .and_then(|scores| deserializer.end().map(|()| scores))
        .map_err(|err| output_error(&err, bad.take(), ""))
}

/// Where a visitor notes a [`BadValue`] before failing, so that the error keeps its parts.
type Bad<'a> = &'a RefCell<Option<BadValue>>;

/// A metric value that is not a number, noted by the visitor that met it.
#[derive(Debug)]
struct BadValue {
    metric: String,
    site: Site,
    found: String,
}

fn output_error(err: &serde_json::Error, bad: Option<BadValue>, text: &str) -> OutputError {
    let at = Position::line_column(err.line(), err.column());
    if let Some(bad) = bad.or_else(|| printf_non_number(text, at)) {
        return OutputError::NotANumber {
            format: FORMAT,
            at,
            metric: bad.metric,
            site: bad.site,
            found: bad.found,
        };
    }
    if err.classify() == Category::Eof {
        return OutputError::Truncated { format: FORMAT, at };
    }
    // serde_json's message without the " at line L column C" it appends.
    let message = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let problem = message.strip_suffix(&suffix).unwrap_or(&message).to_owned();
    OutputError::Malformed {
        format: FORMAT,
        at,
        problem,
    }
}

/// C's printf writes `nan`, `-nan`, `inf` for non-finite values, which is not JSON; when the
/// syntax error sits on such a value, name the metric and frame (or pooled block) it belongs
/// to by looking at the lines above it, as the tools lay them out.
fn printf_non_number(text: &str, at: Position) -> Option<BadValue> {
    let lines: Vec<&str> = text.lines().collect();
    let (key, value) = key_and_value(lines.get(at.line.checked_sub(1)?)?)?;
    let lowered = value.trim_start_matches(['-', '+']).to_ascii_lowercase();
    if !(lowered.starts_with("nan") || lowered.starts_with("inf")) {
        return None;
    }
    let (metric, site) =
        lines[..at.line - 1]
            .iter()
            .rev()
            .find_map(|earlier| match key_and_value(earlier)? {
                ("frameNum", number) => Some((key.to_owned(), Site::Frame(number.parse().ok()?))),
                ("metrics", _) => None,
                (metric, "{") => Some((metric.to_owned(), Site::Pooled(key.to_owned()))),
                _ => None,
            })?;
    let found = format!("`{value}`");
    Some(BadValue {
        metric,
        site,
        found,
    })
}

/// `"key": value,` on one line, as (`key`, `value`).
fn key_and_value(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim().strip_prefix('"')?;
    let (key, rest) = rest.split_once('"')?;
    let value = rest.trim_start().strip_prefix(':')?.trim();
    Some((key, value.strip_suffix(',').unwrap_or(value).trim_end()))
}

/// Any of the visitors below, as the seed of a nested value.
struct Seed<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Seed<V> {
    type Value = V::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        deserializer.deserialize_any(self.0)
    }
}

/// The whole document.
struct Document<'a>(Bad<'a>);

impl<'de> Visitor<'de> for Document<'_> {
    type Value = Scores;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the output to be an object with `frames`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scores, A::Error> {
        let mut scores = Scores::default();
        let mut frames = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => scores.tool_version = map.next_value()?,
                "fps" => scores.fps = map.next_value()?,
                "frames" => frames = Some(map.next_value_seed(Seed(Frames(self.0)))?),
                "pooled_metrics" => scores.pooled = map.next_value_seed(Seed(AllPooled(self.0)))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        scores.frames = frames.ok_or_else(|| de::Error::missing_field("frames"))?;
        Ok(scores)
    }
}

/// `frames: [...]`.
struct Frames<'a>(Bad<'a>);

impl<'de> Visitor<'de> for Frames<'_> {
    type Value = Vec<FrameScores>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`frames` to be a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut frames = Vec::new();
        while let Some(frame) = seq.next_element_seed(Seed(Frame(self.0, frames.len())))? {
            frames.push(frame);
        }
        Ok(frames)
    }
}

/// One `{ "frameNum": n, "metrics": {...} }`, at this index in the list.
struct Frame<'a>(Bad<'a>, usize);

impl<'de> Visitor<'de> for Frame<'_> {
    type Value = FrameScores;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("each frame to be an object with `frameNum` and `metrics`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut frame_num = None;
        let mut metrics = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "frameNum" => frame_num = Some(map.next_value()?),
                "metrics" => {
                    let site = frame_num.map_or(Site::FrameAt(self.1), Site::Frame);
                    metrics = Some(map.next_value_seed(Seed(Numbers::Metrics(self.0, site)))?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(FrameScores {
            frame_num: frame_num.ok_or_else(|| de::Error::missing_field("frameNum"))?,
            metrics: metrics.ok_or_else(|| de::Error::missing_field("metrics"))?,
        })
    }
}

thread_local! {
    /// The metric names seen by this thread's parses, one allocation each: a million frames
    /// share a handful of names (see `scores::MetricValues`).
    static NAMES: std::cell::RefCell<crate::scores::NameInterner> = Default::default();
}

/// A metric name, read straight into this thread's shared names: no `String` per key.
struct SharedName;

impl<'de> DeserializeSeed<'de> for SharedName {
    type Value = std::sync::Arc<str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for SharedName {
    type Value = std::sync::Arc<str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a metric name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(NAMES.with(|names| names.borrow_mut().intern(name)))
    }
}

/// `pooled_metrics: { name: { min, max, mean, harmonic_mean } }`.
struct AllPooled<'a>(Bad<'a>);

impl<'de> Visitor<'de> for AllPooled<'_> {
    type Value = BTreeMap<String, Pooled>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`pooled_metrics` to be an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut pooled = BTreeMap::new();
        while let Some(metric) = map.next_key::<String>()? {
            let stats = map.next_value_seed(Seed(Numbers::Stats(self.0, &metric)))?;
            let take = |stat| {
                stats
                    .get(stat)
                    .copied()
                    .ok_or_else(|| de::Error::missing_field(stat))
            };
            let stats = Pooled {
                min: take("min")?,
                max: take("max")?,
                mean: take("mean")?,
                harmonic_mean: take("harmonic_mean")?,
            };
            pooled.insert(metric, stats);
        }
        Ok(pooled)
    }
}

/// An object of numbers: the `metrics` of the frame at this site, or the statistics of the
/// pooled metric of this name.
enum Numbers<'a> {
    Metrics(Bad<'a>, Site),
    Stats(Bad<'a>, &'a str),
}

impl<'de> Visitor<'de> for Numbers<'_> {
    type Value = crate::scores::MetricValues;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Numbers::Metrics(_, site) => {
                write!(f, "`metrics` of {site} to be an object of numbers")
            }
            Numbers::Stats(_, metric) => write!(
                f,
                "pooled `{metric}` to be an object with `min`, `max`, `mean` and `harmonic_mean`"
            ),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let width = NAMES.with(|names| names.borrow().width());
        let mut numbers = Vec::with_capacity(width);
        while let Some(key) = map.next_key_seed(SharedName)? {
            let value: Value = map.next_value()?;
            // `null` is how vmaf writes a score that is not a finite number: a value.
            let number = if value.is_null() {
                Some(crate::scores::NULL_SCORE)
            } else {
                value.as_f64()
            };
            let Some(number) = number else {
                let (bad, metric, site) = match &self {
                    Numbers::Metrics(bad, site) => (bad, key.to_string(), site.clone()),
                    Numbers::Stats(bad, metric) => {
                        (bad, metric.to_string(), Site::Pooled(key.to_string()))
                    }
                };
                let found = match value {
                    Value::String(text) => format!("the string {text:?}"),
                    Value::Array(_) => "a list".to_owned(),
                    Value::Object(_) => "an object".to_owned(),
                    Value::Null => "null".to_owned(),
                    other => format!("`{other}`"),
                };
                let message = format!("metric `{metric}` of {site} is {found}, not a number");
                *bad.borrow_mut() = Some(BadValue {
                    metric,
                    site,
                    found,
                });
                return Err(de::Error::custom(message));
            };
            numbers.push((key, number));
        }
        numbers.shrink_to_fit();
        Ok(crate::scores::MetricValues::from_unsorted(numbers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! sample {
        ($name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../fixtures/vmaf-samples/",
                $name
            ))
        };
    }

    const UPSTREAM: &str = sample!("upstream_model_psnr_576x324.json");
    const FORK: &str = sample!("fork_model_psnr_576x324.json");
    const PRECISION_MAX: &str = sample!("fork_model_576x324_precision_max.json");
    const EMPTY: &str = sample!("fork_feature_lpips_nomodel_EMPTY_rc0.json");

    /// Every JSON sample that holds a full run, with its metric count per frame.
    const FULL_RUNS: &[(&str, &str, usize)] = &[
        (
            "fork_feature_cambi_1080p",
            sample!("fork_feature_cambi_1080p.json"),
            1,
        ),
        (
            "fork_feature_float_ssim_1080p",
            sample!("fork_feature_float_ssim_1080p.json"),
            1,
        ),
        (
            "fork_feature_psnr_hvs_1080p",
            sample!("fork_feature_psnr_hvs_1080p.json"),
            4,
        ),
        (
            "fork_feature_ssimulacra2_1080p",
            sample!("fork_feature_ssimulacra2_1080p.json"),
            1,
        ),
        ("fork_model_576x324_precision_max", PRECISION_MAX, 15),
        ("fork_model_psnr_576x324", FORK, 18),
        (
            "fork_model_upstream-v1.0.16_3d0h-by-path_576x324",
            sample!("fork_model_upstream-v1.0.16_3d0h-by-path_576x324.json"),
            15,
        ),
        (
            "fork_model_vmaf_v0.6.1_1080p",
            sample!("fork_model_vmaf_v0.6.1_1080p.json"),
            15,
        ),
        (
            "upstream_feature_cambi_1080p",
            sample!("upstream_feature_cambi_1080p.json"),
            1,
        ),
        (
            "upstream_feature_float_ssim_1080p",
            sample!("upstream_feature_float_ssim_1080p.json"),
            1,
        ),
        (
            "upstream_feature_psnr_hvs_1080p",
            sample!("upstream_feature_psnr_hvs_1080p.json"),
            4,
        ),
        ("upstream_model_psnr_576x324", UPSTREAM, 18),
        (
            "upstream_model_vmaf_v0.6.1_1080p",
            sample!("upstream_model_vmaf_v0.6.1_1080p.json"),
            15,
        ),
        (
            "upstream_model_vmaf_v1.0.16_3d0h_576x324",
            sample!("upstream_model_vmaf_v1.0.16_3d0h_576x324.json"),
            15,
        ),
    ];

    #[test]
    fn every_full_sample_parses_48_numbered_frames_and_a_pooled_block() {
        for (name, text, metric_count) in FULL_RUNS {
            let scores = parse(text).unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(scores.frames.len(), 48, "{name}");
            for (index, frame) in scores.frames.iter().enumerate() {
                assert_eq!(frame.frame_num, index as u64, "{name}");
                assert_eq!(frame.metrics.len(), *metric_count, "{name} frame {index}");
            }
            assert_eq!(scores.pooled.len(), *metric_count, "{name}");
            assert!(scores.fps.is_some_and(|fps| fps > 0.0), "{name}");
            let version = scores.tool_version.as_deref();
            let expected = if name.starts_with("upstream") {
                "3.2.0"
            } else {
                "3.0.0"
            };
            assert_eq!(version, Some(expected), "{name}");
        }
    }

    #[test]
    fn upstream_sample_values_match_the_file() {
        let scores = parse(UPSTREAM).expect("parses");
        assert_eq!(scores.fps, Some(166.91));
        let first = &scores.frames[0].metrics;
        assert_eq!(first["psnr_y"], 33.033351);
        assert_eq!(first["psnr_cb"], 36.156775);
        assert_eq!(first["VMAF_integer_feature_motion_sad_score"], 0.0);
        assert_eq!(first["vmaf"], 71.669459);
        assert_eq!(scores.frames[1].metrics["integer_motion2"], 2.069197);
        let vmaf = scores.pooled["vmaf"];
        assert_eq!(
            vmaf,
            Pooled {
                min: 68.178770,
                max: 75.857635,
                mean: 72.048913,
                harmonic_mean: 71.996532,
            }
        );
        assert_eq!(scores.pooled["integer_motion2"].harmonic_mean, 1.950877);
    }

    #[test]
    fn fork_sample_names_motion_integer_motion() {
        let scores = parse(FORK).expect("parses");
        assert_eq!(scores.fps, Some(163.10));
        let first = &scores.frames[0].metrics;
        assert_eq!(first["integer_motion"], 0.0);
        assert_eq!(first["vmaf"], 71.669457);
        assert!(!first.contains_key("VMAF_integer_feature_motion_sad_score"));
        assert_eq!(scores.pooled["vmaf"].mean, 72.048914);
    }

    #[test]
    fn upstream_and_fork_differ_only_in_the_motion_name() {
        let upstream = parse(UPSTREAM).expect("parses").metric_names();
        let fork = parse(FORK).expect("parses").metric_names();
        let differing: Vec<&String> = upstream.symmetric_difference(&fork).collect();
        assert_eq!(
            differing,
            ["VMAF_integer_feature_motion_sad_score", "integer_motion"]
        );
    }

    #[test]
    fn precision_max_sample_keeps_all_17_digits() {
        let scores = parse(PRECISION_MAX).expect("parses");
        let first = &scores.frames[0].metrics;
        let exact = |text: &str| text.parse::<f64>().expect("a literal");
        assert_eq!(first["integer_adm2"], exact("0.93143344720208798"));
        assert_eq!(first["integer_aim"], exact("0.049601834253689442"));
        // serde_json without `float_roundtrip` reads this one a unit in the last place off.
        assert_eq!(first["integer_adm3"], exact("0.94091580647419926"));
        assert_eq!(first["vmaf"], exact("71.669456524090748"));
        // Written as a bare integer `0` in this mode.
        assert_eq!(first["integer_motion2"], 0.0);
        // Every value in the file round-trips exactly, not merely to 6 decimals.
        let values = literal_numbers(PRECISION_MAX);
        let parsed: Vec<f64> = scores
            .frames
            .iter()
            .flat_map(|frame| frame.metrics.values().copied())
            .collect();
        assert!(values.len() > parsed.len());
        for value in parsed {
            assert!(
                values.contains(&value),
                "{value} is not a literal of the file"
            );
        }
    }

    /// Every `"key": number` literal of the text, parsed by the standard library.
    fn literal_numbers(text: &str) -> Vec<f64> {
        text.lines()
            .filter_map(key_and_value)
            .filter_map(|(_, value)| value.parse().ok())
            .collect()
    }

    #[test]
    fn empty_lpips_sample_parses_with_no_frames_and_no_fps() {
        let scores = parse(EMPTY).expect("parses");
        assert!(scores.frames.is_empty());
        assert!(scores.pooled.is_empty());
        assert_eq!(scores.fps, None);
        assert_eq!(scores.tool_version.as_deref(), Some("3.0.0"));
    }

    #[test]
    fn truncated_output_is_reported_as_ending_early() {
        let cut = &UPSTREAM[..UPSTREAM.len() / 2];
        let err = parse(cut).expect_err("truncated");
        assert!(matches!(err, OutputError::Truncated { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.starts_with("failed to read vmaf json output: it ends early at line "));
        assert!(message.ends_with("check its stderr"), "{message}");
        assert_eq!(err.position().line, cut.lines().count());
    }

    #[test]
    fn empty_text_is_truncated() {
        let err = parse("").expect_err("empty");
        assert!(matches!(err, OutputError::Truncated { .. }), "{err:?}");
    }

    #[test]
    fn metric_that_is_a_string_names_metric_frame_and_line() {
        let text = UPSTREAM.replacen("\"psnr_y\": 32.283206", "\"psnr_y\": \"32.283206\"", 1);
        let err = parse(&text).expect_err("string metric");
        match &err {
            OutputError::NotANumber {
                metric,
                site,
                found,
                at,
                ..
            } => {
                assert_eq!(metric, "psnr_y");
                assert_eq!(*site, Site::Frame(1));
                assert_eq!(found, "the string \"32.283206\"");
                assert_eq!(at.line, line_of(&text, "\"psnr_y\": \"32.283206\""));
            }
            other => panic!("unexpected error {other:?}"),
        }
        let message = err.to_string();
        assert!(
            message
                .contains("metric `psnr_y` of frame 1 is the string \"32.283206\", not a number"),
            "{message}"
        );
    }

    #[test]
    fn a_null_metric_is_a_value_that_survives_a_json_round_trip() {
        // Real vmaf writes `null` for an infinite score (psnr_hvs_cb of identical chroma).
        let text = FORK.replacen("\"vmaf\": 71.669457", "\"vmaf\": null", 1);
        let scores = parse(&text).expect("a null score parses");
        assert_eq!(scores.frames[0].metrics["vmaf"], crate::scores::NULL_SCORE);
        let json = serde_json::to_string(&scores).unwrap();
        assert!(json.contains("\"vmaf\":null"), "{json}");
        let back: crate::scores::Scores = serde_json::from_str(&json).unwrap();
        assert_eq!(back, scores);
        // Pooling skips the null frame.
        let pooled = scores.pooled_mean("vmaf").unwrap();
        assert!(pooled.is_finite(), "{pooled}");
    }

    #[test]
    fn printf_nan_in_a_frame_names_metric_and_frame() {
        let text = UPSTREAM.replacen("\"psnr_cb\": 34.674518", "\"psnr_cb\": -nan", 1);
        let err = parse(&text).expect_err("nan metric");
        match &err {
            OutputError::NotANumber {
                metric,
                site,
                found,
                at,
                ..
            } => {
                assert_eq!(metric, "psnr_cb");
                assert_eq!(*site, Site::Frame(1));
                assert_eq!(found, "`-nan`");
                assert_eq!(at.line, line_of(&text, "-nan"));
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn printf_nan_in_the_pooled_block_names_metric_and_statistic() {
        let text = UPSTREAM.replacen("\"harmonic_mean\": 71.996532", "\"harmonic_mean\": nan", 1);
        let err = parse(&text).expect_err("nan pooled");
        assert!(
            err.to_string()
                .contains("metric `vmaf` of the pooled `harmonic_mean` is `nan`, not a number"),
            "{err}"
        );
    }

    #[test]
    fn frames_that_are_not_a_list_say_so() {
        let text = "{\n  \"version\": \"3.2.0\",\n  \"frames\": {}\n}\n";
        let err = parse(text).expect_err("frames is an object");
        let message = err.to_string();
        assert!(
            message.contains("expected `frames` to be a list at line 3"),
            "{message}"
        );
    }

    #[test]
    fn missing_frames_is_an_error() {
        let err = parse("{\"version\": \"3.2.0\"}").expect_err("no frames");
        assert!(err.to_string().contains("missing field `frames`"), "{err}");
    }

    #[test]
    fn frame_without_frame_num_is_an_error() {
        let err = parse("{\"frames\": [{\"metrics\": {}}]}").expect_err("no frameNum");
        assert!(
            err.to_string().contains("missing field `frameNum`"),
            "{err}"
        );
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        let err = parse("{\"frames\": []} x").expect_err("garbage");
        assert!(matches!(err, OutputError::Malformed { .. }), "{err:?}");
    }

    /// The 1-based line of the first occurrence of `needle`.
    fn line_of(text: &str, needle: &str) -> usize {
        let offset = text.find(needle).expect("needle is there");
        text[..offset].matches('\n').count() + 1
    }
}
