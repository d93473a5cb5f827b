//! The XML form (`--xml`): `<VMAF version>`, `<fyi fps>`, `<frames><frame .../>`,
//! `<pooled_metrics><metric .../>`.
//!
//! Attributes are matched by name (the tools order them differently). `fps` is for
//! information only: a value that is not a finite number (C's printf writes `nan` or `inf`
//! when no frame was scored) reads as no fps rather than an error.

use std::ops::Range;

use quick_xml::errors::SyntaxError;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::number::number;
use super::{OutputError, OutputFormat, Position, Site};
use crate::scores::{FrameScores, Pooled, Scores};

const FORMAT: OutputFormat = OutputFormat::Xml;

pub(super) fn parse(text: &str) -> Result<Scores, OutputError> {
    let mut reader = Reader::from_str(text);
    let mut document = Document {
        text,
        scores: Scores::default(),
        open: Vec::new(),
        saw_root: false,
        saw_frames: false,
    };
    loop {
        let start = offset(reader.buffer_position());
        let event = reader
            .read_event()
            .map_err(|err| reader_error(&err, text, offset(reader.error_position())))?;
        let span = start..offset(reader.buffer_position());
        match event {
            Event::Start(tag) => {
                document.element(&tag, span)?;
                document.open.push(tag.name().as_ref().to_owned());
            }
            Event::Empty(tag) => document.element(&tag, span)?,
            Event::End(_) => {
                document.open.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    document.finish()
}

fn offset(position: u64) -> usize {
    usize::try_from(position).unwrap_or(usize::MAX)
}

fn reader_error(err: &quick_xml::Error, text: &str, offset: usize) -> OutputError {
    let at = Position::of_offset(text, offset);
    match err {
        quick_xml::Error::Syntax(syntax) if *syntax != SyntaxError::InvalidBangMarkup => {
            OutputError::Truncated { format: FORMAT, at }
        }
        _ => malformed(at, err.to_string()),
    }
}

fn malformed(at: Position, problem: String) -> OutputError {
    OutputError::Malformed {
        format: FORMAT,
        at,
        problem,
    }
}

/// What has been read so far, and where the reader stands.
struct Document<'t> {
    text: &'t str,
    scores: Scores,
    /// Names of the elements open around the reader, outermost first.
    open: Vec<String>,
    saw_root: bool,
    saw_frames: bool,
}

impl Document<'_> {
    /// Takes in one start or empty element, spanning `span` of the text.
    fn element(&mut self, tag: &BytesStart<'_>, span: Range<usize>) -> Result<(), OutputError> {
        // A position is counted from the text's start: only for an error (per element, a
        // 4K 10-minute output's 14,400 frames took seconds).
        let element = Element {
            text: self.text,
            attributes: attributes(tag, || Position::of_offset(self.text, span.start))?,
            span,
        };
        let name = tag.name();
        let name = name.as_ref();
        match (self.open.last().map(String::as_str), name) {
            (None, "VMAF") => {
                self.saw_root = true;
                self.scores.tool_version = element.get("version").map(str::to_owned);
            }
            (None, other) => {
                return Err(malformed(
                    element.position(),
                    format!("the root element is `<{other}>`, not `<VMAF>`"),
                ));
            }
            (Some("VMAF"), "fyi") => {
                self.scores.fps = element.get("fps").and_then(|fps| number(fps).ok());
            }
            (Some("VMAF"), "frames") => self.saw_frames = true,
            (Some("frames"), "frame") => self.scores.frames.push(element.frame()?),
            (Some("pooled_metrics"), "metric") => {
                let (name, pooled) = element.pooled()?;
                self.scores.pooled.insert(name, pooled);
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<Scores, OutputError> {
        let end = || Position::of_offset(self.text, self.text.len());
        if !self.open.is_empty() || !self.saw_root {
            return Err(OutputError::Truncated {
                format: FORMAT,
                at: end(),
            });
        }
        if !self.saw_frames {
            return Err(malformed(
                end(),
                "`<VMAF>` has no `<frames>` element".into(),
            ));
        }
        Ok(self.scores)
    }
}

/// The attributes of a tag, unescaped, in the order written; `at` says where the tag starts.
fn attributes(
    tag: &BytesStart<'_>,
    at: impl Fn() -> Position,
) -> Result<Vec<(String, String)>, OutputError> {
    tag.attributes()
        .map(|attribute| {
            let attribute = attribute.map_err(|err| attribute_error(tag, at(), &err))?;
            let value = attribute
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|err| attribute_error(tag, at(), &err))?;
            Ok((attribute.key.as_ref().to_owned(), value.into_owned()))
        })
        .collect()
}

/// `err` is about an attribute of `tag`, which starts at `at`.
fn attribute_error(tag: &BytesStart<'_>, at: Position, err: &dyn std::fmt::Display) -> OutputError {
    let name = tag.name();
    malformed(
        at,
        format!("a bad attribute in `<{}>`: {err}", name.as_ref()),
    )
}

/// One element's attributes and where it stands in the text.
struct Element<'t> {
    text: &'t str,
    span: Range<usize>,
    attributes: Vec<(String, String)>,
}

impl Element<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn position(&self) -> Position {
        Position::of_offset(self.text, self.span.start)
    }

    /// Where attribute `name` is written in this element, else where the element starts.
    fn position_of(&self, name: &str) -> Position {
        let source = self.text.get(self.span.clone()).unwrap_or_default();
        source.find(&format!(" {name}=")).map_or_else(
            || self.position(),
            |at| Position::of_offset(self.text, self.span.start + at + 1),
        )
    }

    fn required(&self, element: &str, name: &str) -> Result<&str, OutputError> {
        self.get(name)
            .ok_or_else(|| malformed(self.position(), format!("a `<{element}>` without `{name}`")))
    }

    fn frame(&self) -> Result<FrameScores, OutputError> {
        let raw = self.required("frame", "frameNum")?;
        let frame_num = raw.trim().parse().map_err(|_| {
            malformed(
                self.position_of("frameNum"),
                format!("`frameNum` is `{raw}`, not a whole number"),
            )
        })?;
        let metrics = self
            .attributes
            .iter()
            .filter(|(key, _)| key != "frameNum")
            .map(|(key, value)| {
                let value = self.number(value, key, key, Site::Frame(frame_num))?;
                Ok((key.clone(), value))
            })
            .collect::<Result<crate::scores::MetricValues, _>>()?;
        Ok(FrameScores { frame_num, metrics })
    }

    fn pooled(&self) -> Result<(String, Pooled), OutputError> {
        let name = self.required("metric", "name")?;
        let stat = |stat: &str| {
            let value = self.required("metric", stat)?;
            self.number(value, stat, name, Site::Pooled(stat.to_owned()))
        };
        let pooled = Pooled {
            min: stat("min")?,
            max: stat("max")?,
            mean: stat("mean")?,
            harmonic_mean: stat("harmonic_mean")?,
        };
        Ok((name.to_owned(), pooled))
    }

    /// The number in attribute `attribute`, the value of `metric` at `site`.
    fn number(
        &self,
        value: &str,
        attribute: &str,
        metric: &str,
        site: Site,
    ) -> Result<f64, OutputError> {
        number(value).map_err(|found| OutputError::NotANumber {
            format: FORMAT,
            at: self.position_of(attribute),
            metric: metric.to_owned(),
            site,
            found,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/vmaf-samples/upstream_model_psnr_576x324.xml"
    ));
    const FORK: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/vmaf-samples/fork_model_psnr_576x324.xml"
    ));

    #[test]
    fn upstream_sample_parses_frames_fps_version_and_pooled() {
        let scores = parse(UPSTREAM).expect("parses");
        assert_eq!(scores.tool_version.as_deref(), Some("3.2.0"));
        assert_eq!(scores.fps, Some(196.04));
        assert_eq!(scores.frames.len(), 48);
        for (index, frame) in scores.frames.iter().enumerate() {
            assert_eq!(frame.frame_num, index as u64);
            assert_eq!(frame.metrics.len(), 18);
        }
        let first = &scores.frames[0].metrics;
        assert_eq!(first["psnr_y"], 33.033351);
        assert_eq!(first["vmaf"], 71.669459);
        assert!(!first.contains_key("frameNum"));
        assert_eq!(scores.pooled.len(), 18);
        assert_eq!(
            scores.pooled["vmaf"],
            Pooled {
                min: 68.178770,
                max: 75.857635,
                mean: 72.048913,
                harmonic_mean: 71.996532,
            }
        );
    }

    #[test]
    fn fork_sample_parses_with_its_attribute_order() {
        let scores = parse(FORK).expect("parses");
        assert_eq!(scores.tool_version.as_deref(), Some("3.0.0"));
        assert_eq!(scores.fps, Some(183.97));
        assert_eq!(scores.frames.len(), 48);
        assert_eq!(scores.frames[2].metrics["integer_motion"], 2.417175);
        assert_eq!(scores.pooled["integer_motion3"].min, 1.941581);
    }

    #[test]
    fn non_numeric_attribute_names_metric_frame_and_position() {
        let text = UPSTREAM.replacen("psnr_cb=\"34.674518\"", "psnr_cb=\"-nan\"", 1);
        let err = parse(&text).expect_err("nan attribute");
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
                let offset = text.find("psnr_cb=\"-nan\"").expect("is there");
                assert_eq!(*at, Position::of_offset(&text, offset));
            }
            other => panic!("unexpected error {other:?}"),
        }
        let message = err.to_string();
        assert!(message.starts_with("failed to read vmaf xml output: metric `psnr_cb` of frame 1"));
    }

    #[test]
    fn non_numeric_pooled_attribute_names_the_statistic() {
        let text = UPSTREAM.replacen("mean=\"72.048913\"", "mean=\"x\"", 1);
        let err = parse(&text).expect_err("bad pooled");
        assert!(
            err.to_string()
                .contains("metric `vmaf` of the pooled `mean` is `x`"),
            "{err}"
        );
    }

    #[test]
    fn bad_frame_number_is_an_error() {
        let text = UPSTREAM.replacen("frameNum=\"3\"", "frameNum=\"three\"", 1);
        let err = parse(&text).expect_err("bad frameNum");
        assert!(err.to_string().contains("`frameNum` is `three`"), "{err}");
        assert_eq!(err.position().line, 8);
    }

    #[test]
    fn truncated_output_is_reported_as_ending_early() {
        for cut in [UPSTREAM.len() / 2, UPSTREAM.len() - 10, 20] {
            let err = parse(&UPSTREAM[..cut]).expect_err("truncated");
            assert!(
                matches!(err, OutputError::Truncated { .. }),
                "cut at {cut}: {err:?}"
            );
            assert!(err.to_string().contains("it ends early"), "{err}");
        }
        assert!(matches!(parse(""), Err(OutputError::Truncated { .. })));
    }

    #[test]
    fn wrong_root_element_is_an_error() {
        let err = parse("<html><body/></html>").expect_err("not vmaf");
        assert!(
            err.to_string().contains("the root element is `<html>`"),
            "{err}"
        );
    }

    #[test]
    fn mismatched_end_tag_is_an_error() {
        let err = parse("<VMAF>\n  <frames>\n  </pooled_metrics>\n</VMAF>").expect_err("mismatch");
        assert!(matches!(err, OutputError::Malformed { .. }), "{err:?}");
        assert_eq!(err.position().line, 3);
    }

    #[test]
    fn document_without_frames_is_an_error_but_empty_frames_parse() {
        let err = parse("<VMAF version=\"3.0.0\">\n</VMAF>\n").expect_err("no frames");
        assert!(err.to_string().contains("no `<frames>` element"), "{err}");
        let empty =
            "<VMAF version=\"3.0.0\">\n  <fyi fps=\"-nan\" />\n  <frames>\n  </frames>\n</VMAF>\n";
        let scores = parse(empty).expect("parses");
        assert!(scores.frames.is_empty());
        assert_eq!(scores.fps, None);
    }

    #[test]
    fn escaped_attribute_values_are_unescaped() {
        let text =
            "<VMAF version=\"3&amp;x\"><frames><frame frameNum=\"0\" a=\"1.5\"/></frames></VMAF>";
        let scores = parse(text).expect("parses");
        assert_eq!(scores.tool_version.as_deref(), Some("3&x"));
        assert_eq!(scores.frames[0].metrics["a"], 1.5);
    }

    #[test]
    fn missing_pooled_statistic_is_an_error() {
        let text = UPSTREAM.replacen(" harmonic_mean=\"71.996532\"", "", 1);
        let err = parse(&text).expect_err("missing stat");
        assert!(
            err.to_string()
                .contains("a `<metric>` without `harmonic_mean`"),
            "{err}"
        );
    }
}
