//! `--format text`: what a terminal shows. The comparison is the mmtests
//! compare layout:
//!
//! ```text
//! Hmean  untar/files_per_s   1234.5 (  0.00%)   1100.2 * -10.88%*
//! ```
//!
//! One line per metric, one column per variant (baseline first). A change
//! whose verdict is `regressed` or `improved` is wrapped in `*…*`. The
//! percentage is the relative change of the mean; the verdict column says
//! whether that is better or worse. A detail line per change and the
//! headline of [`super::summary`] follow.

use std::fmt::Write;

use anyhow::Result;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

use super::data::ReportData;
use super::summary::{notes, Headline};
use super::{unsupported, CompareReport, Document, Exporter, Format};
use crate::analysis::ComparisonRow;
use crate::human;
use crate::stats::Verdict;

pub struct Text;

impl Exporter for Text {
    fn comparison(&self, report: &CompareReport) -> Result<String> {
        comparison_table(report)
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Text, "a report (use --format markdown)")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        Ok(doc.text())
    }
}

fn comparison_table(report: &CompareReport) -> Result<String> {
    let c = report.comparison;
    let mut out = String::new();
    writeln!(
        out,
        "experiment {} `{}`: baseline {}, θ = ±{}%, α = {}",
        report.experiment_id,
        report.experiment_name,
        c.baseline,
        human::number(c.theta * 100.0),
        c.alpha
    )?;
    let headline = Headline::new(c, report.runs);
    if c.rows.is_empty() {
        headline_lines(&headline, &mut out)?;
        hostile_findings(report, &mut out)?;
        return Ok(out);
    }
    let others: Vec<&String> = c.variants.iter().filter(|v| **v != c.baseline).collect();
    let mut table = Table::new();
    table.load_style(NOTHING);
    let mut header = vec![Cell::new(""), Cell::new("")];
    header.push(Cell::new(&c.baseline));
    header.extend(others.iter().map(Cell::new));
    header.extend(others.iter().map(|v| Cell::new(format!("verdict {v}"))));
    table.set_header(header);

    // Workload metrics, then the evidence group under its own heading.
    let (metric_rows, evidence_rows) = c.split_evidence();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in metric_rows.iter().chain(&evidence_rows) {
        if !keys.contains(&(r.workload.as_str(), r.metric.as_str())) {
            keys.push((&r.workload, &r.metric));
        }
    }
    let first_evidence = keys.iter().position(|(_, m)| crate::metric::is_evidence(m));
    for (i, (workload, metric)) in keys.into_iter().enumerate() {
        if Some(i) == first_evidence {
            table.add_row(vec![Cell::new(""), Cell::new(EVIDENCE_HEADING)]);
        }
        let rows: Vec<&ComparisonRow> =
            c.rows.iter().filter(|r| r.workload == workload && r.metric == metric).collect();
        let first = rows[0];
        let mut line = vec![
            Cell::new(first.mean_kind.label()),
            Cell::new(format!("{workload}/{metric}")),
            Cell::new(format!("{} (  0.00%)", human::number(first.mean_baseline))).set_alignment(CellAlignment::Right),
        ];
        let mut verdicts = Vec::new();
        for variant in &others {
            match rows.iter().find(|r| &&r.variant == variant) {
                Some(r) => {
                    line.push(
                        Cell::new(format!("{} {}", human::number(r.mean_variant), marked_change(r)))
                            .set_alignment(CellAlignment::Right),
                    );
                    verdicts.push(Cell::new(r.verdict.to_string()));
                }
                None => {
                    line.push(Cell::new(human::NONE));
                    verdicts.push(Cell::new(human::NONE));
                }
            }
        }
        line.extend(verdicts);
        table.add_row(line);
    }
    writeln!(out, "{table}")?;
    writeln!(out)?;
    place_lines(report, &mut out)?;
    for r in metric_rows.iter().chain(&evidence_rows) {
        let mut notes = notes(r);
        notes.extend(report.places.marks(&r.baseline, &r.variant));
        writeln!(
            out,
            "{}{} vs {}: {}/{} {} [{} CI {}, {}] {} n={}+{} cv={}/{} → {}{}",
            role_tag(r),
            r.variant,
            r.baseline,
            r.workload,
            r.metric,
            human::change_pct(r.change_pct),
            super::summary::ci_level(r),
            human::change_pct(r.ci_low_pct),
            human::change_pct(r.ci_high_pct),
            human::p_equation(r.p_adjusted),
            r.n_baseline,
            r.n_variant,
            human::percent(r.cv_baseline * 100.0),
            human::percent(r.cv_variant * 100.0),
            r.verdict,
            if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) }
        )?;
    }
    writeln!(out)?;
    headline_lines(&headline, &mut out)?;
    hostile_findings(report, &mut out)?;
    Ok(out)
}

/// The heading of the evidence group in the table.
const EVIDENCE_HEADING: &str = "evidence (decides only when named in `decisive`):";

/// `[evidence] `, `[evidence, decisive] `, `[emulated, not decisive] ` or
/// nothing (a workload metric as its kind decides).
fn role_tag(r: &ComparisonRow) -> &'static str {
    match (r.evidence, r.decisive, r.emulated) {
        (true, false, _) => "[evidence] ",
        (true, true, _) => "[evidence, decisive] ",
        (false, false, true) => "[emulated, not decisive] ",
        _ => "",
    }
}

fn headline_lines(headline: &Headline, out: &mut String) -> Result<()> {
    for line in headline.lines() {
        writeln!(out, "{line}")?;
    }
    for line in headline.failure_lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Where each variant ran, when not everything ran on the host.
fn place_lines(report: &CompareReport, out: &mut String) -> Result<()> {
    if report.places.all_host() {
        return Ok(());
    }
    writeln!(out, "where the variants ran:")?;
    for line in report.places.lines() {
        writeln!(out, "  {line}")?;
    }
    let c = report.comparison;
    // The marks stand next to each verdict below.
    for line in report.places.comparison_notes(&c.baseline, &c.variants).doctor {
        writeln!(out, "  doctor: {line}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// Doctor findings recorded when the experiment started.
fn hostile_findings(report: &CompareReport, out: &mut String) -> Result<()> {
    if !report.hostile.is_empty() {
        writeln!(out, "\nbenchmark-hostile findings when this experiment ran (`fslab doctor` for details):")?;
        for line in &report.hostile {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// `( -1.23%)` or, for a decisive change, `* -10.88%*` (mmtests style).
fn marked_change(r: &ComparisonRow) -> String {
    if !r.change_pct.is_finite() {
        return format!("({:>8})", human::NONE);
    }
    match r.verdict {
        Verdict::Regressed | Verdict::Improved => format!("*{:7.2}%*", r.change_pct),
        _ => format!("({:7.2}%)", r.change_pct),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn comparison_table_snapshot() {
        let d = fixture::decided();
        let runs = fixture::stored_runs(&d);
        insta::assert_snapshot!("compare_decided", Text.comparison(&fixture::compare_report(&d, &runs)).unwrap());
    }

    #[test]
    fn comparison_table_of_an_undecided_experiment_with_failed_runs_snapshot() {
        let d = fixture::undecided_with_failures();
        let runs = fixture::stored_runs(&d);
        let text = Text.comparison(&fixture::compare_report(&d, &runs)).unwrap();
        assert!(text.contains("Nothing decided") && text.contains("workload timed out"), "{text}");
        insta::assert_snapshot!("compare_undecided_failed", text);
    }
}
