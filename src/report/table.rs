//! The terminal comparison table, in the mmtests compare layout:
//!
//! ```text
//! Hmean  untar/files_per_s   1234.50 (  0.00%)   1100.20 * -10.88%*
//! ```
//!
//! One line per metric, one column per variant (baseline first). A change
//! whose verdict is `regressed` or `improved` is wrapped in `*…*`. The
//! percentage is the relative change of the mean; the verdict column says
//! whether that is better or worse.

use std::fmt::Write;

use anyhow::Result;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

use super::{CompareFormat, CompareReport};
use crate::analysis::ComparisonRow;
use crate::stats::Verdict;

/// mmtests-layout text table with verdicts and a detail line per change.
pub struct Terminal;

impl CompareFormat for Terminal {
    fn render(&self, report: &CompareReport) -> Result<String> {
        let mut out = String::new();
        writeln!(
            out,
            "experiment {} `{}`: baseline {}, θ = ±{:.1}%, α = {}",
            report.experiment_id,
            report.experiment_name,
            report.baseline,
            report.theta * 100.0,
            report.alpha
        )?;
        if report.rows.is_empty() {
            writeln!(out, "no comparisons yet (needs successful runs of the baseline and another variant)")?;
            return Ok(out);
        }
        let others: Vec<&String> = report.variants.iter().filter(|v| *v != report.baseline).collect();
        let mut table = Table::new();
        table.load_style(NOTHING);
        let mut header = vec![Cell::new(""), Cell::new("")];
        header.push(Cell::new(report.baseline));
        header.extend(others.iter().map(Cell::new));
        header.extend(others.iter().map(|v| Cell::new(format!("verdict {v}"))));
        table.set_header(header);

        let mut keys: Vec<(&str, &str)> = Vec::new();
        for r in report.rows {
            if !keys.contains(&(r.workload.as_str(), r.metric.as_str())) {
                keys.push((&r.workload, &r.metric));
            }
        }
        for (workload, metric) in keys {
            let rows: Vec<&ComparisonRow> =
                report.rows.iter().filter(|r| r.workload == workload && r.metric == metric).collect();
            let first = rows[0];
            let mut line = vec![
                Cell::new(first.mean_kind.label()),
                Cell::new(format!("{workload}/{metric}")),
                Cell::new(format!("{} (  0.00%)", number(first.mean_baseline))).set_alignment(CellAlignment::Right),
            ];
            let mut verdicts = Vec::new();
            for variant in &others {
                match rows.iter().find(|r| &&r.variant == variant) {
                    Some(r) => {
                        line.push(
                            Cell::new(format!("{} {}", number(r.mean_variant), marked_change(r)))
                                .set_alignment(CellAlignment::Right),
                        );
                        verdicts.push(Cell::new(verdict_text(r)));
                    }
                    None => {
                        line.push(Cell::new("-"));
                        verdicts.push(Cell::new("-"));
                    }
                }
            }
            line.extend(verdicts);
            table.add_row(line);
        }
        writeln!(out, "{table}")?;
        writeln!(out)?;
        for r in report.rows {
            writeln!(
                out,
                "{} vs {}: {}/{} {:+.2}% [95% CI {:+.2}%, {:+.2}%] p={} n={}+{} cv={:.1}%/{:.1}% → {}{}{}",
                r.variant,
                r.baseline,
                r.workload,
                r.metric,
                r.change_pct,
                r.ci_low_pct,
                r.ci_high_pct,
                p_text(r.p_adjusted),
                r.n_baseline,
                r.n_variant,
                r.cv_baseline * 100.0,
                r.cv_variant * 100.0,
                r.verdict,
                r.runs_needed.map(|n| format!(" (about {n} runs per variant needed)")).unwrap_or_default(),
                notes(r)
            )?;
        }
        Ok(out)
    }
}

fn number(x: f64) -> String {
    if !x.is_finite() {
        "–".to_string()
    } else if x.abs() >= 1000.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// `( -1.23%)` or, for a decisive change, `* -10.88%*` (mmtests style).
fn marked_change(r: &ComparisonRow) -> String {
    if !r.change_pct.is_finite() {
        return "(      –)".to_string();
    }
    match r.verdict {
        Verdict::Regressed | Verdict::Improved => format!("*{:7.2}%*", r.change_pct),
        _ => format!("({:7.2}%)", r.change_pct),
    }
}

fn verdict_text(r: &ComparisonRow) -> String {
    r.verdict.to_string()
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

fn notes(r: &ComparisonRow) -> String {
    let mut notes = Vec::new();
    if r.disagreement {
        notes.push("Mann-Whitney disagrees".to_string());
    }
    if !r.outliers_baseline.is_empty() || !r.outliers_variant.is_empty() {
        notes.push(format!(
            "outlier runs flagged: {} {:?}, {} {:?}",
            r.baseline, r.outliers_baseline, r.variant, r.outliers_variant
        ));
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    }
}
