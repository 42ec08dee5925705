//! `--format markdown`: a compact summary for mail and issue trackers — the
//! headline, the verdict table, failed runs, the variants and the
//! environment.

use std::fmt::Write;

use anyhow::Result;

use super::data::ReportData;
use super::describe::VARIANT_ROWS;
use super::summary::{Cell, EVIDENCE_INTRO, VERDICT_COLUMNS};
use super::{unsupported, CompareReport, Document, Exporter, Format};
use crate::analysis::ComparisonRow;
use crate::human;

pub struct Markdown;

impl Exporter for Markdown {
    fn comparison(&self, _: &CompareReport) -> Result<String> {
        unsupported(Format::Markdown, "a comparison (use `fslab report --format markdown`)")
    }

    fn report(&self, data: &ReportData) -> Result<String> {
        Ok(render_markdown(data))
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        doc.markdown().map_or_else(|| unsupported(Format::Markdown, doc.what()), Ok)
    }
}

/// Escapes text for a Markdown table cell or inline text: pipes, HTML
/// brackets, backticks and emphasis characters cannot break the layout or
/// inject markup.
pub fn md_esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' | '*' | '_' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The Markdown summary of an experiment.
pub fn render_markdown(d: &ReportData) -> String {
    let mut out = String::new();
    let c = &d.comparison;
    let _ = writeln!(out, "## fslab experiment {}: {}\n", d.experiment.id, md_esc(&d.experiment.name));
    let headline = d.headline();
    for line in headline.lines() {
        let _ = writeln!(out, "**{}**\n", md_esc(&line));
    }
    for line in headline.failure_lines() {
        let _ = writeln!(out, "- {}", md_esc(&line));
    }
    if !headline.failures.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Status {}, created {}. Baseline **{}**, θ = ±{}%, α = {}.\n",
        md_esc(d.experiment.status.as_str()),
        md_esc(&d.experiment.created_at),
        md_esc(&c.baseline),
        human::number(c.theta * 100.0),
        c.alpha
    );

    out.push_str("### Verdicts\n\n");
    if c.rows.is_empty() {
        out.push_str("No comparisons yet (needs successful runs of the baseline and another variant).\n\n");
    } else {
        let (metric_rows, evidence_rows) = c.split_evidence();
        verdict_table(&metric_rows, &mut out);
        if !evidence_rows.is_empty() {
            let _ = write!(out, "### Evidence\n\n{}\n\n", md_esc(EVIDENCE_INTRO));
            // Compact: the evidence that moved or decides; the rest is counted.
            let (shown, rest): (Vec<&ComparisonRow>, Vec<&ComparisonRow>) = evidence_rows.iter().partition(|r| {
                r.decisive || matches!(r.verdict, crate::stats::Verdict::Regressed | crate::stats::Verdict::Improved)
            });
            if !shown.is_empty() {
                verdict_table(&shown, &mut out);
            }
            if !rest.is_empty() {
                let _ = write!(
                    out,
                    "{} more evidence comparisons are `no-change` or `inconclusive` (all in `fslab compare` and the HTML report).\n\n",
                    rest.len()
                );
            }
        }
    }

    profile_section(d, &mut out);

    if !d.places.all_host() {
        out.push_str("### Where the variants ran\n\n");
        for line in d.places.lines() {
            let _ = writeln!(out, "- {}", md_esc(&line));
        }
        let notes = d.places.comparison_notes(&c.baseline, &c.variants);
        for m in notes.marks {
            let _ = writeln!(out, "- **{}**", md_esc(&m));
        }
        for line in notes.doctor {
            let _ = writeln!(out, "- doctor: {}", md_esc(&line));
        }
        out.push('\n');
    }

    out.push_str("### Variants\n\n");
    let names = d.variant_names();
    out.push_str("| |");
    for n in &names {
        let _ = write!(out, " {} |", md_esc(n));
    }
    out.push_str("\n| --- |");
    for _ in &names {
        out.push_str(" --- |");
    }
    out.push('\n');
    let configs: Vec<_> = names.iter().map(|n| d.variant_config(n)).collect();
    for row in VARIANT_ROWS.iter().filter(|r| r.compact) {
        let _ = write!(out, "| {} |", md_esc(row.label));
        for (n, c) in names.iter().zip(&configs) {
            let _ = write!(out, " {} |", md_esc(&row.text(d, n, c.as_ref())));
        }
        out.push('\n');
    }
    out.push_str("\n### Environment\n\n");
    let env = &d.experiment.environment.host;
    let _ = writeln!(out, "- kernel: {} {}", md_esc(&env.kernel_release), md_esc(&env.kernel_version));
    let _ = writeln!(out, "- CPU: {} × {}", env.cpu_count, md_esc(&env.cpu_model));
    let _ = writeln!(out, "- memory: {}", human::bytes(env.mem_total_kb as f64 * 1024.0));
    let list: Vec<String> = env.tools.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let _ = writeln!(out, "- tools: {}", md_esc(&list.join("; ")));
    let hostile: Vec<String> =
        d.experiment.environment.doctor.as_ref().map(|doc| doc.hostile.clone()).unwrap_or_default();
    if !hostile.is_empty() {
        out.push_str("\nBenchmark-hostile findings when this experiment ran:\n\n");
        for h in hostile {
            let _ = writeln!(out, "- {}", md_esc(&h));
        }
    }
    out
}

/// Where the instructions went, when runs stored profiles: the functions
/// that moved most per comparison (`fslab compare --profile` has them all).
fn profile_section(d: &ReportData, out: &mut String) {
    match d.profiles() {
        Ok(comparisons) if comparisons.is_empty() => {}
        Ok(comparisons) => {
            out.push_str("### Where the instructions went\n\n");
            for c in &comparisons {
                out.push_str(&super::documents::profile::markdown_of(c, PROFILE_ROWS));
            }
        }
        Err(e) => {
            let _ = write!(out, "### Where the instructions went\n\n{}\n\n", md_esc(&format!("{e:#}")));
        }
    }
}

/// Functions per comparison in the Markdown profile.
const PROFILE_ROWS: usize = 10;

/// The compact verdict table of `rows`.
fn verdict_table(rows: &[&ComparisonRow], out: &mut String) {
    let columns: Vec<_> = VERDICT_COLUMNS.iter().filter(|col| col.compact).collect();
    out.push('|');
    for col in &columns {
        let _ = write!(out, " {} |", col.header);
    }
    out.push_str("\n|");
    for col in &columns {
        out.push_str(if col.cell == Cell::Number { " ---: |" } else { " --- |" });
    }
    out.push('\n');
    for r in rows {
        out.push('|');
        for col in &columns {
            let text = md_esc(&(col.value)(r));
            let decided = matches!(r.verdict, crate::stats::Verdict::Regressed | crate::stats::Verdict::Improved);
            if col.cell == Cell::Verdict && decided {
                let _ = write!(out, " **{text}** |");
            } else {
                let _ = write!(out, " {text} |");
            }
        }
        out.push('\n');
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::fixture;

    #[test]
    fn markdown_snapshot() {
        insta::assert_snapshot!("markdown_decided", render_markdown(&fixture::decided()));
    }

    #[test]
    fn the_variants_table_shows_each_variant_s_device_model() {
        let md = render_markdown(&fixture::decided());
        assert!(md.contains("\n| device | none | none | sdcard |\n"), "{md}");
    }

    #[test]
    fn markdown_of_an_undecided_experiment_with_failed_runs_snapshot() {
        let md = render_markdown(&fixture::undecided_with_failures());
        assert!(md.contains("Nothing decided") && !md.contains("No metric regressed"), "{md}");
        assert!(md.contains("runs 16, 17 (optimize\\_scan=1 / untar): mount:"), "{md}");
        insta::assert_snapshot!("markdown_undecided_failed", md);
    }

    #[test]
    fn escapes_cells() {
        assert_eq!(md_esc("a|b<script>`x`"), "a\\|b&lt;script&gt;\\`x\\`");
    }
}
