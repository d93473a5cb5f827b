//! Choosing the parser for a format, and what the parsers share: reading a number.

use super::{csv, json, xml, OutputError, OutputFormat};
use crate::scores::Scores;

/// Reads the whole text of one output file written in `format`.
pub fn parse(format: OutputFormat, text: &str) -> Result<Scores, OutputError> {
    let mut scores = match format {
        OutputFormat::Json => json::parse(text),
        OutputFormat::Xml => xml::parse(text),
        OutputFormat::Csv => csv::parse(text),
    }?;
    scores.printed_decimals = printed_decimals(text);
    Ok(scores)
}

/// Reads one output from `reader`. JSON is streamed (serde over the reader, no text and no
/// value tree held: a million-frame output costs its frames, not its text); XML and CSV are
/// read as text. The precision comes from the first [`PRECISION_SCAN_BYTES`], as in
/// [`parse`]. A JSON error is positioned but terser than [`parse`]'s; re-read the text with
/// [`parse`] to explain one.
pub fn parse_reader(
    format: OutputFormat,
    reader: impl std::io::Read,
) -> Result<Scores, OutputError> {
    let mut reader = PrefixKept {
        inner: reader,
        prefix: Vec::new(),
    };
    let mut scores = match format {
        // Buffered outside `PrefixKept`: serde_json reads byte by byte, and std reads a byte
        // from a `BufReader` without a `read` call; through the wrapper each byte was one
        // (`abfleet-bench parse`: 189 ms for a 10-minute 4K output, before).
        OutputFormat::Json => json::parse_reader(std::io::BufReader::new(&mut reader))?,
        OutputFormat::Xml | OutputFormat::Csv => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut reader, &mut text).map_err(|err| {
                OutputError::Malformed {
                    format,
                    at: super::Position::line_column(1, 1),
                    problem: format!("the output is not readable text: {err}"),
                }
            })?;
            return parse(format, &text);
        }
    };
    scores.printed_decimals = printed_decimals(&String::from_utf8_lossy(&reader.prefix));
    Ok(scores)
}

/// A reader that keeps a copy of the first [`PRECISION_SCAN_BYTES`] it passes on.
struct PrefixKept<R> {
    inner: R,
    prefix: Vec<u8>,
}

impl<R: std::io::Read> std::io::Read for PrefixKept<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let room = PRECISION_SCAN_BYTES.saturating_sub(self.prefix.len());
        self.prefix.extend_from_slice(&buf[..n.min(room)]);
        Ok(n)
    }
}

/// How many bytes of an output [`printed_decimals`] reads: the tools print every number
/// alike, so the first frames tell.
const PRECISION_SCAN_BYTES: usize = 256 * 1024;

/// The most digits after a decimal point in any number of the text's first
/// [`PRECISION_SCAN_BYTES`] (a digit, `.`, digits), capped at 17; `None` when there is none.
pub fn printed_decimals(text: &str) -> Option<u32> {
    let bytes = &text.as_bytes()[..text.len().min(PRECISION_SCAN_BYTES)];
    let mut most = None;
    let mut i = 1;
    while i + 1 < bytes.len() {
        if bytes[i] == b'.' && bytes[i - 1].is_ascii_digit() && bytes[i + 1].is_ascii_digit() {
            let digits = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            most = most.max(Some(digits.min(17) as u32));
            i += digits;
        }
        i += 1;
    }
    most
}

#[cfg(test)]
mod tests {
    #[test]
    fn printed_decimals_are_read_from_the_text() {
        assert_eq!(
            printed_decimals(r#"{"vmaf": 71.669457, "fps": 12.5}"#),
            Some(6)
        );
        assert_eq!(printed_decimals(r#"{"vmaf": 71.66945712345678}"#), Some(14));
        assert_eq!(printed_decimals(r#"{"n": 3}"#), None);
        assert_eq!(printed_decimals("version 3.2.0"), Some(1));
    }

    use std::collections::BTreeMap;
    use std::fmt::Write as _;

    use proptest::prelude::*;

    use super::*;
    use crate::scores::{FrameScores, Pooled};

    macro_rules! sample {
        ($name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../fixtures/vmaf-samples/",
                $name
            ))
        };
    }

    /// The same run written as JSON, XML and CSV, for each tool.
    const SAME_RUNS: [(&str, [&str; 3]); 2] = [
        (
            "upstream",
            [
                sample!("upstream_model_psnr_576x324.json"),
                sample!("upstream_model_psnr_576x324.xml"),
                sample!("upstream_model_psnr_576x324.csv"),
            ],
        ),
        (
            "fork",
            [
                sample!("fork_model_psnr_576x324.json"),
                sample!("fork_model_psnr_576x324.xml"),
                sample!("fork_model_psnr_576x324.csv"),
            ],
        ),
    ];

    #[test]
    fn json_xml_and_csv_of_the_same_run_give_identical_frames() {
        for (side, [json, xml, csv]) in SAME_RUNS {
            let json = parse(OutputFormat::Json, json).expect("json parses");
            let xml = parse(OutputFormat::Xml, xml).expect("xml parses");
            let csv = parse(OutputFormat::Csv, csv).expect("csv parses");
            assert_eq!(json.frames.len(), 48, "{side}");
            assert_eq!(json.frames, xml.frames, "{side}: json vs xml");
            assert_eq!(json.frames, csv.frames, "{side}: json vs csv");
            assert_eq!(json.pooled, xml.pooled, "{side}: json vs xml pooled");
            assert_eq!(json.tool_version, xml.tool_version, "{side}");
        }
    }

    #[test]
    fn computed_csv_means_agree_with_the_printed_pooled_means() {
        for (side, [json, _, csv]) in SAME_RUNS {
            let json = parse(OutputFormat::Json, json).expect("json parses");
            let csv = parse(OutputFormat::Csv, csv).expect("csv parses");
            for (metric, printed) in json.pooled_means() {
                let computed = csv.pooled_mean(&metric).expect("metric is in the csv");
                assert!((computed - printed).abs() <= 1e-6, "{side} {metric}");
            }
        }
    }

    /// Random scores as the tools would hold them: the same metrics in every frame,
    /// frames numbered from 0.
    fn scores() -> impl Strategy<Value = Scores> {
        let names = prop::collection::btree_set("[a-z][a-z0-9_]{0,12}", 1..6);
        names.prop_flat_map(|names| {
            let names: Vec<String> = names.into_iter().collect();
            let count = names.len();
            let frames = prop::collection::vec(prop::collection::vec(-1e5f64..1e5, count), 0..12);
            let pooled = prop::collection::vec(prop::array::uniform4(-1e5f64..1e5), count);
            let fps = prop::option::of(0.0f64..1e4);
            let version = prop::option::of("[0-9]\\.[0-9]\\.[0-9]");
            (Just(names), frames, pooled, fps, version).prop_map(
                |(names, frames, pooled, fps, tool_version)| Scores {
                    tool_version,
                    fps,
                    printed_decimals: None,
                    frames: frames
                        .into_iter()
                        .enumerate()
                        .map(|(index, values)| FrameScores {
                            frame_num: index as u64,
                            metrics: names.iter().cloned().zip(values).collect(),
                        })
                        .collect(),
                    pooled: names
                        .iter()
                        .cloned()
                        .zip(
                            pooled
                                .into_iter()
                                .map(|[min, max, mean, harmonic_mean]| Pooled {
                                    min,
                                    max,
                                    mean,
                                    harmonic_mean,
                                }),
                        )
                        .collect(),
                },
            )
        })
    }

    /// `scores` as the tools write JSON: two-space indents, `%.6f` values, `%.2f` fps.
    fn write_json(scores: &Scores) -> String {
        let mut out = String::from("{\n");
        let version = scores.tool_version.as_deref().unwrap_or("");
        let _ = writeln!(out, "  \"version\": \"{version}\",");
        match scores.fps {
            Some(fps) => _ = writeln!(out, "  \"fps\": {fps:.2},"),
            None => out.push_str("  \"fps\": null,\n"),
        }
        out.push_str("  \"frames\": [\n");
        let frames: Vec<String> = scores
            .frames
            .iter()
            .map(|frame| {
                let metrics: BTreeMap<String, f64> = frame
                    .metrics
                    .iter()
                    .map(|(name, value)| (name.to_string(), *value))
                    .collect();
                let metrics = json_members(&metrics, 8, |value| format!("{value:.6}"));
                format!(
                    "    {{\n      \"frameNum\": {},\n      \"metrics\": {{\n{metrics}\n      }}\n    }}",
                    frame.frame_num
                )
            })
            .collect();
        out.push_str(&frames.join(",\n"));
        out.push_str("\n  ],\n  \"pooled_metrics\": {\n");
        let pooled = json_members(&scores.pooled, 4, |p| {
            format!(
                "{{\n      \"min\": {:.6},\n      \"max\": {:.6},\n      \"mean\": {:.6},\n      \"harmonic_mean\": {:.6}\n    }}",
                p.min, p.max, p.mean, p.harmonic_mean
            )
        });
        out.push_str(&pooled);
        out.push_str("\n  },\n  \"aggregate_metrics\": {\n  }\n}\n");
        out
    }

    fn json_members<T>(
        map: &BTreeMap<String, T>,
        indent: usize,
        value: impl Fn(&T) -> String,
    ) -> String {
        map.iter()
            .map(|(name, v)| format!("{:indent$}\"{name}\": {}", "", value(v)))
            .collect::<Vec<_>>()
            .join(",\n")
    }

    /// `scores` as the tools write CSV: a `Frame,...,` header, `%.6f` values, trailing commas.
    fn write_csv(scores: &Scores) -> String {
        let names: Vec<&String> = scores.pooled.keys().collect();
        let mut out = String::from("Frame,");
        for name in &names {
            let _ = write!(out, "{name},");
        }
        out.push('\n');
        for frame in &scores.frames {
            let _ = write!(out, "{},", frame.frame_num);
            for name in &names {
                let _ = write!(out, "{:.6},", frame.metrics[*name]);
            }
            out.push('\n');
        }
        out
    }

    /// `%.6f` is off by at most half a unit in its last place (plus the f64 rounding of it).
    fn close(written: f64, read: f64) -> bool {
        (written - read).abs() <= 5e-7 + written.abs() * f64::EPSILON
    }

    fn same_frames(written: &[FrameScores], read: &[FrameScores]) -> bool {
        written.len() == read.len()
            && written.iter().zip(read).all(|(w, r)| {
                w.frame_num == r.frame_num
                    && w.metrics.len() == r.metrics.len()
                    && w.metrics
                        .iter()
                        .all(|(name, v)| r.metrics.get(name).is_some_and(|r| close(*v, *r)))
            })
    }

    proptest! {
        #[test]
        fn csv_written_like_vmaf_reads_back(scores in scores()) {
            let read = parse(OutputFormat::Csv, &write_csv(&scores)).expect("parses");
            prop_assert!(same_frames(&scores.frames, &read.frames), "{read:?}");
            prop_assert!(read.pooled.is_empty());
        }

        #[test]
        fn json_written_like_vmaf_reads_back(scores in scores()) {
            let text = write_json(&scores);
            let read = parse(OutputFormat::Json, &text).expect("parses");
            prop_assert!(same_frames(&scores.frames, &read.frames), "{text}");
            prop_assert_eq!(read.pooled.len(), scores.pooled.len());
            for (name, written) in &scores.pooled {
                let r = read.pooled[name];
                prop_assert!(close(written.min, r.min) && close(written.max, r.max));
                prop_assert!(close(written.mean, r.mean));
                prop_assert!(close(written.harmonic_mean, r.harmonic_mean));
            }
            prop_assert_eq!(read.fps.is_some(), scores.fps.is_some());
            if let (Some(w), Some(r)) = (scores.fps, read.fps) {
                prop_assert!((w - r).abs() <= 5e-3 + w * f64::EPSILON);
            }
            let version = scores.tool_version.unwrap_or_default();
            prop_assert_eq!(read.tool_version, Some(version));
        }
    }

    #[test]
    fn parse_dispatches_on_format() {
        let csv = "Frame,vmaf,\n0,71.5,\n";
        let scores = parse(OutputFormat::Csv, csv).expect("csv parses");
        assert_eq!(scores.frames[0].metrics["vmaf"], 71.5);
        assert!(parse(OutputFormat::Json, csv).is_err());
        assert!(parse(OutputFormat::Xml, csv).is_err());
    }

    /// A vmaf-like JSON output of `frames` frames, written as it is read: the test never
    /// holds the text either.
    pub(crate) struct GeneratedJson {
        frames: u64,
        next: u64,
        pending: Vec<u8>,
        done: bool,
    }

    impl GeneratedJson {
        pub(crate) fn new(frames: u64) -> GeneratedJson {
            GeneratedJson {
                frames,
                next: 0,
                pending: b"{\n  \"version\": \"3.2.0\",\n  \"fps\": 12.5,\n  \"frames\": [\n"
                    .to_vec(),
                done: false,
            }
        }

        pub(crate) fn vmaf(frame: u64) -> f64 {
            70.0 + (frame % 1000) as f64 / 1000.0
        }
    }

    impl std::io::Read for GeneratedJson {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            while self.pending.len() < buf.len() && !self.done {
                let n = self.next;
                if n < self.frames {
                    let comma = if n + 1 < self.frames { "," } else { "" };
                    let line = format!(
                        "    {{\"frameNum\": {n}, \"metrics\": {{\"integer_adm2\": 0.973456, \"integer_motion\": {:.6}, \"vmaf\": {:.6}}}}}{comma}\n",
                        (n % 7) as f64 / 8.0,
                        Self::vmaf(n),
                    );
                    self.pending.extend_from_slice(line.as_bytes());
                    self.next += 1;
                } else {
                    self.pending.extend_from_slice(b"  ],\n  \"pooled_metrics\": {\"vmaf\": {\"min\": 70.0, \"max\": 70.999, \"mean\": 70.4995, \"harmonic_mean\": 70.49}}\n}\n");
                    self.done = true;
                }
            }
            let n = buf.len().min(self.pending.len());
            buf[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            Ok(n)
        }
    }

    /// Issue 11: a one-million-frame JSON output (about 100 MB) was read whole into a
    /// string; it now streams, and parses to the same scores.
    #[test]
    fn a_million_frame_json_output_streams_to_its_scores() {
        let mut counted = Counted(GeneratedJson::new(1_000_000), 0);
        let scores = parse_reader(OutputFormat::Json, &mut counted).unwrap();
        assert!(counted.1 > 95_000_000, "only {} bytes", counted.1);
        assert_eq!(scores.frames.len(), 1_000_000);
        assert_eq!(scores.tool_version.as_deref(), Some("3.2.0"));
        assert_eq!(scores.printed_decimals, Some(6));
        for n in [0u64, 1, 499_999, 999_999] {
            let frame = &scores.frames[n as usize];
            assert_eq!(frame.frame_num, n);
            assert_eq!(frame.metrics.len(), 3);
            assert!((frame.metrics["vmaf"] - GeneratedJson::vmaf(n)).abs() < 1e-9);
        }
        assert_eq!(scores.pooled["vmaf"].mean, 70.4995);
        // And the same scores as the text parser gives, on a smaller one.
        let mut text = String::new();
        std::io::Read::read_to_string(&mut GeneratedJson::new(2_000), &mut text).unwrap();
        let streamed = parse_reader(OutputFormat::Json, text.as_bytes()).unwrap();
        assert_eq!(streamed, parse(OutputFormat::Json, &text).unwrap());
        // A cut-off stream is an error, not a short list of frames.
        let cut = &text.as_bytes()[..text.len() / 2];
        assert!(matches!(
            parse_reader(OutputFormat::Json, cut),
            Err(OutputError::Truncated { .. })
        ));
    }

    /// Every real output of both real tools streams to exactly what the text parser reads.
    #[test]
    fn real_outputs_stream_to_what_the_text_parser_reads() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/vmaf-samples");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let format = match path.extension().and_then(|e| e.to_str()) {
                Some("json") => OutputFormat::Json,
                Some("xml") => OutputFormat::Xml,
                Some("csv") => OutputFormat::Csv,
                _ => continue,
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let streamed = parse_reader(format, text.as_bytes());
            match parse(format, &text) {
                Ok(scores) => assert_eq!(streamed.unwrap(), scores, "{}", path.display()),
                Err(_) => assert!(streamed.is_err(), "{}", path.display()),
            }
            seen += 1;
        }
        assert!(seen >= 15, "only {seen} samples");
    }

    /// Counts the bytes read through it.
    struct Counted<R>(R, u64);

    impl<R: std::io::Read> std::io::Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1 += n as u64;
            Ok(n)
        }
    }
}
