//! `--format text`: what a terminal shows. A comparison opens with the
//! answer ([`Answer`]), as hyperfine and `perf diff` print what matters
//! first:
//!
//! ```text
//! experiment 7 `sdcard`: baseline optimize_scan=0, θ = ±2%, α = 0.05
//! Decided: 1 regressed.
//!
//!  decisive         variant          baseline  mean  change   CI                        verdict
//!  untar/total_s    optimize_scan=1        10    12  +20.00%  97.5% [+18.32%, +21.72%]  regressed
//!
//!  changed, decides nothing  variant  …
//!
//! Rule: fixed n = 5: …
//! 46 more rows (3 side metrics, 43 evidence; none changed) and each row's details: …
//! ```
//!
//! With [`Detail::Full`] the answer is followed by every row in the
//! mmtests compare layout,
//!
//! ```text
//! Hmean  untar/files_per_s   1234.5 (  0.00%)   1100.2 * -10.88%*
//! ```
//!
//! one line per metric, one column per variant (baseline first), a change
//! whose verdict is `regressed` or `improved` wrapped in `*…*` (the
//! percentage is the relative change of the mean; the verdict column says
//! whether that is better or worse), then a detail line per row and the
//! verdict counts of the rows that decide nothing.

use std::fmt::Write;

use anyhow::Result;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

use super::data::ReportData;
use super::summary::{notes, Answer, Headline};
use super::{unsupported, CompareReport, Detail, Document, Exporter, Format};
use crate::analysis::ComparisonRow;
use crate::human;
use crate::stats::Verdict;

pub struct Text;

impl Exporter for Text {
    fn comparison(&self, report: &CompareReport) -> Result<String> {
        comparison_text(report)
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Text, "a report (use --format markdown)")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        Ok(doc.text())
    }
}

fn comparison_text(report: &CompareReport) -> Result<String> {
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
    for line in headline.decision_lines() {
        writeln!(out, "{line}")?;
    }
    if c.rows.is_empty() {
        failure_lines(&headline, &mut out)?;
        hostile_findings(report, &mut out)?;
        return Ok(out);
    }
    writeln!(out)?;
    place_lines(report, &mut out)?;
    let answer = Answer::new(c);
    let tables = [("decisive", &answer.decisive), ("changed, decides nothing", &answer.changed)];
    for (title, rows) in tables.into_iter().filter(|(_, rows)| !rows.is_empty()) {
        write_table(&mut out, &answer_table(title, rows))?;
        writeln!(out)?;
    }
    for line in headline.method_lines() {
        writeln!(out, "{line}")?;
    }
    failure_lines(&headline, &mut out)?;
    match &report.detail {
        Detail::Answer { more } => match answer.more_text() {
            Some(rows) => writeln!(out, "{rows} and each row's details: {more}.")?,
            None => writeln!(out, "Each row's details: {more}.")?,
        },
        Detail::Full => {
            writeln!(out)?;
            every_row(report, &mut out)?;
            for line in headline.tally_lines() {
                writeln!(out, "{line}")?;
            }
        }
    }
    hostile_findings(report, &mut out)?;
    Ok(out)
}

/// `table` without the padding comfy-table leaves at the end of each line.
fn write_table(out: &mut String, table: &Table) -> Result<()> {
    for line in table.lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// One row per variant and metric of the answer: the means, the change,
/// its interval at the level the verdict used, the verdict.
fn answer_table(title: &str, rows: &[&ComparisonRow]) -> Table {
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(vec![title, "variant", "baseline", "mean", "change", "CI", "verdict"]);
    for r in rows {
        let number = |text: String| Cell::new(text).set_alignment(CellAlignment::Right);
        table.add_row(vec![
            Cell::new(format!("{}/{}", r.workload, r.metric)),
            Cell::new(&r.variant),
            number(human::number(r.mean_baseline)),
            number(human::number(r.mean_variant)),
            number(human::change_pct(r.change_pct)),
            Cell::new(format!("{} {}", super::summary::ci_level(r), human::ci_pct(r.ci_low_pct, r.ci_high_pct))),
            Cell::new(r.verdict.to_string()),
        ]);
    }
    table
}

/// Every row in the mmtests layout, then a detail line per row.
fn every_row(report: &CompareReport, out: &mut String) -> Result<()> {
    let c = report.comparison;
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
    write_table(out, &table)?;
    writeln!(out)?;
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
    Ok(())
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

/// `3 of 18 runs failed; why:` and one line per distinct reason.
fn failure_lines(headline: &Headline, out: &mut String) -> Result<()> {
    if let Some(line) = headline.failed_line() {
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
    let notes = report.places.comparison_notes(&c.baseline, &c.variants);
    // With the answer alone no detail line carries them: said once here.
    for line in &notes.marks {
        writeln!(out, "  {line}")?;
    }
    for line in &notes.doctor {
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

    /// What `fslab compare` names as the way to the rest.
    fn answer() -> Detail {
        Detail::Answer { more: "see `fslab compare --experiment 7 --full`".into() }
    }

    #[test]
    fn comparison_snapshots() {
        let d = fixture::decided();
        let runs = fixture::stored_runs(&d);
        let text = |detail| Text.comparison(&fixture::compare_report(&d, &runs, detail)).unwrap();
        insta::assert_snapshot!("compare_decided", text(answer()));
        insta::assert_snapshot!("compare_decided_full", text(Detail::Full));
    }

    #[test]
    fn comparison_of_an_undecided_experiment_with_failed_runs_snapshot() {
        let d = fixture::undecided_with_failures();
        let runs = fixture::stored_runs(&d);
        let text = Text.comparison(&fixture::compare_report(&d, &runs, answer())).unwrap();
        assert!(text.contains("Nothing decided") && text.contains("workload timed out"), "{text}");
        insta::assert_snapshot!("compare_undecided_failed", text);
    }

    /// Terminal rows `text` takes on a screen `columns` wide (a longer line wraps).
    fn screen_rows(text: &str, columns: usize) -> usize {
        text.lines().map(|l| l.chars().count().div_ceil(columns).max(1)).sum()
    }

    /// Issue 28 item 8: the quickstart's comparison (47 rows, 94 lines
    /// before) leads with its decision and the decisive metric's verdict,
    /// and fits one screen of 25 rows of 100 columns with the one line
    /// `fslab run` writes on stderr before it (`experiment N: 10 runs ok, 0
    /// failed; results in …`; the progress bar clears itself). `--full`
    /// still prints every row with its detail line, after the same answer.
    #[test]
    fn the_quickstart_answer_comes_first_and_fits_one_screen() {
        let d = fixture::quickstart();
        let runs = fixture::stored_runs(&d);
        assert!(d.comparison.rows.len() >= 45, "the fixture is not the quickstart's size: {}", d.comparison.rows.len());
        let more =
            "see `fslab compare --experiment 1 --full`, or `fslab report --experiment 1` with charts".to_string();
        let text = Text.comparison(&fixture::compare_report(&d, &runs, Detail::Answer { more })).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // First the decision, then the decisive metric's verdict.
        let decision = Headline::new(&d.comparison, &runs).decision_lines();
        assert!(lines[0].starts_with("experiment 1 `quickstart"), "{text}");
        assert_eq!(lines[1], decision[0], "{text}");
        let total = d.comparison.rows.iter().find(|r| r.metric == "total_s").unwrap();
        let verdict_line = lines.iter().position(|l| l.trim_start().starts_with("untar/total_s")).expect(&text);
        let row = lines[verdict_line];
        for shown in [human::change_pct(total.change_pct), human::ci_pct(total.ci_low_pct, total.ci_high_pct)] {
            assert!(row.contains(&shown), "{shown} missing in {row}");
        }
        assert!(row.trim_end().ends_with(&total.verdict.to_string()), "{row}");
        assert!(verdict_line <= 4, "the decisive verdict is not among the first lines:\n{text}");
        // What else exists, and how to see it, in one line at the end.
        let more = lines.iter().filter(|l| l.contains("--full")).collect::<Vec<_>>();
        assert_eq!(more.len(), 1, "{text}");
        assert!(more[0].contains("more rows") && more[0].contains("fslab report --experiment 1"), "{text}");
        // The side metrics and evidence that did not change stay behind --full.
        assert!(!text.contains("media/requests_4k") && !text.contains(" n=5+5 "), "{text}");
        let rows = screen_rows(&text, 100);
        assert!(rows < 25, "{rows} rows at 100 columns (+1 stderr line) do not fit 25:\n{text}");

        let full = Text.comparison(&fixture::compare_report(&d, &runs, Detail::Full)).unwrap();
        assert!(full.starts_with(&lines[..=verdict_line].join("\n")), "--full does not open with the answer:\n{full}");
        let details = full.lines().filter(|l| l.contains(" n=5+5 ")).count();
        assert_eq!(details, d.comparison.rows.len(), "{full}");
        assert!(full.contains("untar/media/requests_4k") && !full.contains("--full"), "{full}");
    }
}
