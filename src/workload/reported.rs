//! Metrics a user's command reports itself, as lines on its stdout:
//!
//! ```text
//! fslab-metric NAME VALUE UNIT higher|lower
//! ```
//!
//! e.g. `fslab-metric score 1234.5 points higher` or `fslab-metric
//! latency_p99 3.2 ms lower`. Each becomes a metric with that unit and
//! direction, beside the command's `wall_s`/`user_s`/`sys_s`, so a
//! benchmark such as UnixBench, dbench or a script of one's own plugs
//! straight into fslab's statistics. Other stdout lines are ignored.
//!
//! Validation (any failure fails the run, naming the stdout line): exactly
//! four fields after the marker; NAME starts with a letter or digit and
//! holds only letters, digits and `_ . - : /` (at most 100 characters); VALUE
//! a finite number; UNIT any token (`-` or `1` for unitless); the direction
//! `higher` or `lower`; no name twice, and none of the names fslab already
//! reports for the run.
//!
//! Only the last [`super::process::TAIL_BYTES`] of stdout are kept; print
//! the metric lines at the end.

use anyhow::{bail, Result};

use crate::metric::Metric;

/// The first field of a metric line.
pub const MARKER: &str = "fslab-metric";

const MAX_NAME: usize = 100;

/// Parse the metric lines of `stdout`. `truncated`: stdout was cut to its
/// tail, so its first line may be partial and is skipped. `reserved`: names
/// the workload already reports.
pub fn parse(stdout: &str, truncated: bool, reserved: &[&str]) -> Result<Vec<Metric>> {
    let mut metrics: Vec<Metric> = Vec::new();
    let where_ = if truncated { " (counted in the kept tail of stdout)" } else { "" };
    for (i, line) in stdout.lines().enumerate().skip(usize::from(truncated)) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() != Some(&MARKER) {
            continue;
        }
        let at = || format!("stdout line {}{where_}: `{}`", i + 1, line.trim());
        let [_, name, value, unit, direction] = fields[..] else {
            bail!(
                "{}: expected `{MARKER} NAME VALUE UNIT higher|lower` ({} fields after the marker)",
                at(),
                fields.len() - 1
            );
        };
        if !valid_name(name) {
            bail!(
                "{}: bad metric name `{name}` (letters, digits and _ . - : / only, starting with a letter or digit, at most {MAX_NAME} characters)",
                at()
            );
        }
        let value: f64 = match value.parse() {
            Ok(v) if f64::is_finite(v) => v,
            Ok(_) => bail!("{}: value `{value}` of `{name}` is not a finite number", at()),
            Err(_) => bail!("{}: value `{value}` of `{name}` is not a number", at()),
        };
        let higher_is_better = match direction {
            "higher" => true,
            "lower" => false,
            other => bail!("{}: direction `{other}` of `{name}` must be `higher` or `lower`", at()),
        };
        if let Err(why) = crate::metric::check_user_metric_name(name) {
            bail!("{}: {why}", at());
        }
        if reserved.contains(&name) {
            bail!("{}: `{name}` is a metric fslab already reports for this workload", at());
        }
        if metrics.iter().any(|m| m.name == name) {
            bail!("{}: metric `{name}` reported twice", at());
        }
        metrics.push(Metric { name: name.to_string(), unit: unit.to_string(), higher_is_better, value });
    }
    Ok(metrics)
}

fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-:/".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESERVED: &[&str] = &["wall_s", "user_s", "sys_s"];

    #[test]
    fn metric_lines_become_metrics() {
        let out = "building...\nfslab-metric score 1234.5 points higher\n  fslab-metric lat/p99 3.2e-3 s lower\nfslab-metrics x 1 s lower\ndone\n";
        let m = parse(out, false, RESERVED).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0], Metric { name: "score".into(), unit: "points".into(), higher_is_better: true, value: 1234.5 });
        assert_eq!(m[1], Metric { name: "lat/p99".into(), unit: "s".into(), higher_is_better: false, value: 3.2e-3 });
        assert!(parse("", false, RESERVED).unwrap().is_empty());
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let cases = [
            ("fslab-metric score NaN points higher", "line 1", "not a finite number"),
            ("ok\nfslab-metric score inf points higher", "line 2", "not a finite number"),
            ("fslab-metric score 12x points higher", "line 1", "not a number"),
            ("fslab-metric score 1 points better", "line 1", "must be `higher` or `lower`"),
            ("fslab-metric score 1 points", "line 1", "3 fields after the marker"),
            ("fslab-metric score 1 points higher extra", "line 1", "5 fields"),
            ("fslab-metric -score 1 points higher", "line 1", "bad metric name `-score`"),
            ("fslab-metric sc\u{e9}re 1 points higher", "line 1", "bad metric name"),
            ("fslab-metric wall_s 1 s lower", "line 1", "already reports"),
            ("fslab-metric disk/busy_s 1 s lower", "line 1", "`disk/…` is reserved"),
            ("fslab-metric a 1 s lower\n\nfslab-metric a 2 s lower", "line 3", "reported twice"),
        ];
        for (text, line, what) in cases {
            let e = parse(text, false, RESERVED).unwrap_err().to_string();
            assert!(e.contains(line) && e.contains(what), "{text:?}: {e}");
        }
        let long = format!("fslab-metric {} 1 s lower", "a".repeat(101));
        assert!(parse(&long, false, RESERVED).is_err());
    }

    #[test]
    fn a_truncated_tail_skips_its_partial_first_line() {
        let out = "c-metric cut 1 s lower\nfslab-metric whole 2 s lower\n";
        let m = parse(out, true, RESERVED).unwrap();
        assert_eq!(m.len(), 1);
        let e = parse("partial\nfslab-metric x nan s lower\n", true, RESERVED).unwrap_err().to_string();
        assert!(e.contains("line 2 (counted in the kept tail of stdout)"), "{e}");
    }
}
