//! The CSV form (`--csv`): a `Frame,name,...,` header and one row per frame, no pooled block.
//!
//! Every line the tools write ends with a comma; a line without one is accepted too, and
//! `\r\n` line ends are. Blank lines are skipped.

use super::number::number;
use super::{OutputError, OutputFormat, Position, Site};
use crate::scores::{FrameScores, Scores};

const FORMAT: OutputFormat = OutputFormat::Csv;

pub(super) fn parse(text: &str) -> Result<Scores, OutputError> {
    let mut lines = numbered_lines(text);
    let Some((header_line, header)) = lines.next() else {
        return Err(OutputError::Truncated {
            format: FORMAT,
            at: Position::line(1),
        });
    };
    let names = metric_names(header_line, header)?;
    let frames = lines
        .map(|(line, row)| frame(line, row, &names))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scores {
        frames,
        ..Scores::default()
    })
}

/// The non-blank lines with their 1-based numbers, line ends and the trailing comma removed.
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(index, line)| (index + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| (number, line.strip_suffix(',').unwrap_or(line)))
}

fn malformed(line: usize, problem: String) -> OutputError {
    OutputError::Malformed {
        format: FORMAT,
        at: Position::line(line),
        problem,
    }
}

/// The metric names of the header, after its leading `Frame`.
fn metric_names(line: usize, header: &str) -> Result<Vec<String>, OutputError> {
    let mut fields = header.split(',').map(str::trim);
    match fields.next() {
        Some("Frame") => {}
        first => {
            let first = first.unwrap_or_default();
            return Err(malformed(
                line,
                format!("the header starts with `{first}`, not `Frame`"),
            ));
        }
    }
    let mut names: Vec<String> = Vec::new();
    for name in fields {
        if name.is_empty() {
            return Err(malformed(
                line,
                "the header has an empty metric name".into(),
            ));
        }
        if names.iter().any(|seen| seen == name) {
            return Err(malformed(
                line,
                format!("the header names metric `{name}` twice"),
            ));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

fn frame(line: usize, row: &str, names: &[String]) -> Result<FrameScores, OutputError> {
    let fields: Vec<&str> = row.split(',').collect();
    if fields.len() != names.len() + 1 {
        return Err(malformed(
            line,
            format!(
                "the row has {} fields where the header has {}",
                fields.len(),
                names.len() + 1
            ),
        ));
    }
    let frame_num = frame_number(line, fields[0])?;
    let metrics = names
        .iter()
        .zip(&fields[1..])
        .map(|(name, field)| metric(line, frame_num, name, field))
        .collect::<Result<crate::scores::MetricValues, _>>()?;
    Ok(FrameScores { frame_num, metrics })
}

fn frame_number(line: usize, field: &str) -> Result<u64, OutputError> {
    let field = field.trim();
    field.parse().map_err(|_| {
        malformed(
            line,
            format!("the frame number `{field}` is not a whole number"),
        )
    })
}

fn metric(
    line: usize,
    frame_num: u64,
    name: &str,
    field: &str,
) -> Result<(String, f64), OutputError> {
    let value = number(field).map_err(|found| OutputError::NotANumber {
        format: FORMAT,
        at: Position::line(line),
        metric: name.to_owned(),
        site: Site::Frame(frame_num),
        found,
    })?;
    Ok((name.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/vmaf-samples/upstream_model_psnr_576x324.csv"
    ));
    const FORK: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/vmaf-samples/fork_model_psnr_576x324.csv"
    ));

    #[test]
    fn upstream_sample_parses_all_frames_with_exact_values() {
        let scores = parse(UPSTREAM).expect("upstream csv parses");
        assert_eq!(scores.frames.len(), 48);
        assert!(scores.pooled.is_empty());
        assert_eq!(scores.tool_version, None);
        assert_eq!(scores.fps, None);
        let first = &scores.frames[0];
        assert_eq!(first.frame_num, 0);
        assert_eq!(first.metrics.len(), 18);
        assert_eq!(first.metrics["psnr_y"], 33.033351);
        assert_eq!(first.metrics["VMAF_integer_feature_motion_sad_score"], 0.0);
        let last = &scores.frames[47];
        assert_eq!(last.frame_num, 47);
        assert_eq!(last.metrics["vmaf"], 70.369404);
    }

    #[test]
    fn fork_sample_parses_with_its_own_metric_names() {
        let scores = parse(FORK).expect("fork csv parses");
        assert_eq!(scores.frames.len(), 48);
        assert_eq!(scores.frames[1].metrics["integer_motion"], 2.069196);
        assert_eq!(scores.frames[1].metrics["vmaf"], 70.884171);
        assert!(!scores.frames[0]
            .metrics
            .contains_key("VMAF_integer_feature_motion_sad_score"));
    }

    #[test]
    fn pooled_mean_is_computed_from_frames() {
        let scores = parse(UPSTREAM).expect("upstream csv parses");
        let mean = scores.pooled_mean("vmaf").expect("vmaf is there");
        // The JSON form of the same run prints a pooled mean of 72.048913.
        assert!((mean - 72.048913).abs() < 1e-6, "{mean}");
    }

    #[test]
    fn crlf_line_ends_and_missing_trailing_commas_are_accepted() {
        let text = "Frame,psnr_y,vmaf,\r\n0,33.5,71.25,\r\n1,32.0,70.5\r\n";
        let scores = parse(text).expect("parses");
        assert_eq!(scores.frames.len(), 2);
        assert_eq!(scores.frames[1].metrics["psnr_y"], 32.0);
        assert_eq!(scores.frames[1].metrics["vmaf"], 70.5);
    }

    #[test]
    fn header_only_parses_with_zero_frames() {
        let scores = parse("Frame,vmaf,\n").expect("parses");
        assert!(scores.frames.is_empty());
    }

    #[test]
    fn row_with_too_few_fields_is_an_error_naming_its_line() {
        let text = "Frame,psnr_y,vmaf,\n0,33.5,71.25,\n1,32.0,\n";
        let err = parse(text).expect_err("short row");
        assert_eq!(err.position(), Position::line(3));
        let message = err.to_string();
        assert!(
            message.contains("the row has 2 fields where the header has 3 at line 3"),
            "{message}"
        );
        assert!(
            message.starts_with("failed to read vmaf csv output: "),
            "{message}"
        );
    }

    #[test]
    fn row_with_too_many_fields_is_an_error() {
        let err = parse("Frame,vmaf,\n0,1.0,2.0,\n").expect_err("long row");
        assert!(
            err.to_string().contains("3 fields where the header has 2"),
            "{err}"
        );
    }

    #[test]
    fn nan_value_is_an_error_naming_metric_and_frame() {
        let err = parse("Frame,psnr_y,vmaf,\n0,33.5,71.25,\n1,-nan,70.0,\n").expect_err("nan");
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
                assert_eq!(found, "`-nan`");
                assert_eq!(*at, Position::line(3));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err
            .to_string()
            .contains("metric `psnr_y` of frame 1 is `-nan`, not a number"));
    }

    #[test]
    fn header_not_starting_with_frame_is_an_error() {
        let err = parse("{\n  \"version\": \"3.2.0\",\n").expect_err("json is not csv");
        assert!(err.to_string().contains("not `Frame`"), "{err}");
        let err = parse("").expect_err("empty");
        assert!(matches!(err, OutputError::Truncated { .. }), "{err:?}");
    }

    #[test]
    fn non_numeric_frame_number_is_an_error() {
        let err = parse("Frame,vmaf,\nx,1.0,\n").expect_err("bad frame number");
        assert!(err.to_string().contains("frame number `x`"), "{err}");
    }
}
