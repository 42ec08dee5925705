//! Value parsers the commands share, so a kind of value is validated one
//! way everywhere (clap `value_parser`s: an error names the flag).

/// `--theta PCT`: a band of more than 0 and less than 100 percent (the
/// experiment file's `theta` is the same as a fraction).
pub(crate) fn theta_percent(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p),
        Ok(_) => Err(format!("`{text}` is not a band: give a percentage above 0 and below 100 (e.g. 2 for ±2%)")),
        Err(_) => Err(format!("`{text}` is not a number: give a percentage such as 2 for ±2%")),
    }
}

/// A significance level or per-step error rate: above 0, below 0.5.
pub(crate) fn alpha(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 0.5 => Ok(a),
        _ => Err(format!("`{text}` is not a significance level between 0 and 0.5 (e.g. 0.01)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_and_levels_outside_their_range_are_refused_naming_the_value() {
        assert_eq!(theta_percent(" 2 "), Ok(2.0));
        assert!(theta_percent("0").unwrap_err().contains("`0` is not a band"));
        assert!(theta_percent("two").unwrap_err().contains("not a number"));
        assert_eq!(alpha("0.01"), Ok(0.01));
        for bad in ["0", "0.5", "2", "-0.1", "x"] {
            assert!(alpha(bad).unwrap_err().contains(&format!("`{bad}`")), "{bad}");
        }
    }
}
