//! A path template of the description (`/repos/{owner}/{repo}/statuses/{sha}`) and how a
//! request's path matches it: a `{param}` takes one non-empty segment, or one or more when the
//! operation marks the parameter `x-multi-segment` (a `ref` such as `heads/main`); a segment
//! mixing text and parameters (`{base}...{head}`) gives each parameter a non-empty part.

/// One segment of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TemplateSegment {
    Literal(String),
    Parameter {
        name: String,
        multi_segment: bool,
    },
    /// Text and parameters within one segment, such as `{base}...{head}`.
    Mixed(Vec<SegmentPart>),
}

/// A part of a mixed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentPart {
    Text(String),
    Parameter(String),
}

/// A parsed path template.
#[derive(Debug, Clone)]
pub(crate) struct PathTemplate {
    pub(crate) segments: Vec<TemplateSegment>,
}

/// What a match captured, with a rank to choose between templates that both match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathMatch {
    /// Each parameter's name and its (percent-decoded) text, in template order.
    pub(crate) parameters: Vec<(String, String)>,
    /// Higher is more specific: more literal segments, then more mixed ones, then fewer
    /// segments taken by multi-segment parameters.
    pub(crate) specificity: (usize, usize, std::cmp::Reverse<usize>),
}

impl PathTemplate {
    /// Parses `template`; `is_multi_segment(name)` says which parameters may span segments.
    pub(crate) fn parse(template: &str, is_multi_segment: impl Fn(&str) -> bool) -> PathTemplate {
        let segments = split_path(template)
            .map(|segment| match parse_segment_parts(segment).as_slice() {
                [SegmentPart::Text(text)] => TemplateSegment::Literal(text.clone()),
                [SegmentPart::Parameter(name)] => TemplateSegment::Parameter {
                    name: name.clone(),
                    multi_segment: is_multi_segment(name),
                },
                parts => TemplateSegment::Mixed(parts.to_vec()),
            })
            .collect();
        PathTemplate { segments }
    }

    /// Matches the raw segments of a request path (not yet percent-decoded).
    pub(crate) fn match_segments(&self, request_segments: &[&str]) -> Option<PathMatch> {
        let mut captures = Vec::new();
        if !match_from(&self.segments, request_segments, &mut captures) {
            return None;
        }
        let count = |wanted: fn(&TemplateSegment) -> bool| {
            self.segments
                .iter()
                .filter(|segment| wanted(segment))
                .count()
        };
        let literal_count = count(|segment| matches!(segment, TemplateSegment::Literal(_)));
        let mixed_count = count(|segment| matches!(segment, TemplateSegment::Mixed(_)));
        let mut extra_segments = 0;
        let parameters = captures
            .into_iter()
            .map(|(name, taken): (String, Vec<&str>)| {
                extra_segments += taken.len() - 1;
                let text = taken
                    .iter()
                    .map(|segment| percent_decode(segment))
                    .collect::<Vec<_>>()
                    .join("/");
                (name, text)
            })
            .collect();
        Some(PathMatch {
            parameters,
            specificity: (
                literal_count,
                mixed_count,
                std::cmp::Reverse(extra_segments),
            ),
        })
    }
}

/// The segments of a path, without the leading `/` (an empty segment stays, and matches
/// nothing: `/repos//r` is no path of the API).
pub(crate) fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.strip_prefix('/').unwrap_or(path).split('/')
}

/// Decodes `%XX` escapes (and leaves anything malformed as it was).
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| bytes.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Splits a template segment into text and `{parameter}` parts.
fn parse_segment_parts(segment: &str) -> Vec<SegmentPart> {
    let mut parts = Vec::new();
    let mut rest = segment;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|close| open + close) else {
            break;
        };
        if open > 0 {
            parts.push(SegmentPart::Text(rest[..open].to_string()));
        }
        parts.push(SegmentPart::Parameter(rest[open + 1..close].to_string()));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(SegmentPart::Text(rest.to_string()));
    }
    parts
}

/// Matches one request segment against a mixed segment's parts, each parameter taking a
/// non-empty part.
fn match_parts<'a>(
    parts: &[SegmentPart],
    text: &'a str,
    captures: &mut Vec<(String, Vec<&'a str>)>,
) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return text.is_empty();
    };
    match first {
        SegmentPart::Text(literal) => text
            .strip_prefix(literal.as_str())
            .is_some_and(|after| match_parts(rest, after, captures)),
        SegmentPart::Parameter(name) => {
            let ends = text
                .char_indices()
                .map(|(index, _)| index)
                .skip(1)
                .chain([text.len()]);
            for end in ends.filter(|&end| end > 0) {
                captures.push((name.clone(), vec![&text[..end]]));
                if match_parts(rest, &text[end..], captures) {
                    return true;
                }
                captures.pop();
            }
            false
        }
    }
}

fn match_from<'a>(
    template: &[TemplateSegment],
    request: &[&'a str],
    captures: &mut Vec<(String, Vec<&'a str>)>,
) -> bool {
    let Some((first, rest)) = template.split_first() else {
        return request.is_empty();
    };
    match first {
        TemplateSegment::Literal(literal) => {
            request.first() == Some(&literal.as_str()) && match_from(rest, &request[1..], captures)
        }
        TemplateSegment::Mixed(parts) => {
            let Some(segment) = request.first() else {
                return false;
            };
            let before = captures.len();
            if match_parts(parts, segment, captures) && match_from(rest, &request[1..], captures) {
                return true;
            }
            captures.truncate(before);
            false
        }
        TemplateSegment::Parameter {
            name,
            multi_segment,
        } => {
            let longest = if *multi_segment {
                request.len()
            } else {
                request.len().min(1)
            };
            // Longest first: a multi-segment parameter takes what the rest leaves.
            for taken in (1..=longest).rev() {
                if request[..taken].iter().any(|segment| segment.is_empty()) {
                    continue;
                }
                captures.push((name.clone(), request[..taken].to_vec()));
                if match_from(rest, &request[taken..], captures) {
                    return true;
                }
                captures.pop();
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, multi: &[&str], path: &str) -> Option<Vec<(String, String)>> {
        let template = PathTemplate::parse(template, |name| multi.contains(&name));
        let segments: Vec<&str> = split_path(path).collect();
        template
            .match_segments(&segments)
            .map(|found| found.parameters)
    }

    #[test]
    fn a_parameter_takes_one_non_empty_segment() {
        assert_eq!(
            matches("/repos/{owner}/{repo}/pulls", &[], "/repos/o/r/pulls"),
            Some(vec![
                ("owner".into(), "o".into()),
                ("repo".into(), "r".into())
            ])
        );
        assert_eq!(
            matches("/repos/{owner}/{repo}/pulls", &[], "/repos//r/pulls"),
            None
        );
        assert_eq!(
            matches("/repos/{owner}/{repo}/pulls", &[], "/repos/o/r/pulls/"),
            None
        );
        assert_eq!(matches("/repos/{owner}/{repo}", &[], "/repos/o/r/x"), None);
    }

    #[test]
    fn a_multi_segment_parameter_spans_segments_and_leaves_the_rest() {
        assert_eq!(
            matches("/r/{ref}/statuses", &["ref"], "/r/heads/main/statuses"),
            Some(vec![("ref".into(), "heads/main".into())])
        );
        assert_eq!(
            matches("/r/{ref}/statuses", &[], "/r/heads/main/statuses"),
            None
        );
    }

    #[test]
    fn a_mixed_segment_gives_each_parameter_a_non_empty_part() {
        assert_eq!(
            matches("/compare/{base}...{head}", &[], "/compare/main...topic"),
            Some(vec![
                ("base".into(), "main".into()),
                ("head".into(), "topic".into())
            ])
        );
        assert_eq!(
            matches("/compare/{base}...{head}", &[], "/compare/main..."),
            None
        );
        assert_eq!(
            matches("/compare/{base}...{head}", &[], "/compare/main"),
            None
        );
    }

    #[test]
    fn parameters_are_percent_decoded() {
        assert_eq!(
            matches("/r/{ref}", &[], "/r/heads%2Fmain%20x"),
            Some(vec![("ref".into(), "heads/main x".into())])
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
