//! A metric value as the text formats (CSV, XML) print it, read into a number.

/// A metric value as the tools print it (`%.6f`, or 17 significant digits): a finite number,
/// or an infinite score (`inf`, as printf writes it where JSON has `null`), which is
/// [`crate::scores::NULL_SCORE`]; else a description of what stood there for an error message.
pub(super) fn number(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    match trimmed.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        Ok(value) if value == f64::INFINITY => Ok(crate::scores::NULL_SCORE),
        _ if trimmed.is_empty() => Err("empty".to_owned()),
        _ => Err(format!("`{trimmed}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_reads_printf_output_and_rejects_non_finite() {
        assert_eq!(number("33.033351"), Ok(33.033351));
        assert_eq!(number(" 0.000000 "), Ok(0.0));
        assert_eq!(number("-nan"), Err("`-nan`".to_owned()));
        assert_eq!(number("inf"), Ok(crate::scores::NULL_SCORE));
        assert_eq!(number("-inf"), Err("`-inf`".to_owned()));
        assert_eq!(number("abc"), Err("`abc`".to_owned()));
        assert_eq!(number(""), Err("empty".to_owned()));
    }
}
