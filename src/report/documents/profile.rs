//! `fslab compare --profile`: where each comparison's instructions went,
//! by kernel function ([`crate::analysis::profile`]). Its text and
//! Markdown are also the report's profile section; the HTML report draws
//! it ([`crate::report::html::profile`]).

use std::fmt::Write;

use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
use serde::Serialize;

use super::super::markdown::md_esc;
use crate::analysis::profile::{CountKind, ProfileComparison, ProfileRow, TESTED_SHARE};
use crate::human;
use crate::report::Document;
use crate::stats::Verdict;
use crate::vm::profile::{Origin, MIN_SHARE};

/// Rows a text or Markdown table shows per comparison unless told.
pub const DEFAULT_ROWS: usize = 20;

/// The profile comparisons of one experiment; JSON has every row.
#[derive(Debug, Serialize)]
pub struct ProfileReport {
    pub experiment_id: i64,
    pub experiment_name: String,
    pub comparisons: Vec<ProfileComparison>,
    /// Rows the text shows per comparison.
    #[serde(skip)]
    pub rows: usize,
}

/// How a row is named: the function with its module or directory, or the
/// bucket, and its background role.
pub fn row_label(r: &ProfileRow) -> String {
    let mut label = match (r.origin, &r.unit) {
        (None, _) => format!("other (below {} of a run)", share(MIN_SHARE)),
        (Some(Origin::User), _) => "user space (all processes)".to_string(),
        (Some(Origin::Unmapped), _) => "kernel code without a symbol".to_string(),
        (Some(_), Some(unit)) if !r.symbol.starts_with('[') => format!("{} [{unit}]", r.symbol),
        (Some(_), _) => r.symbol.clone(),
    };
    if let Some(b) = r.background {
        label.push_str(&format!(" ({})", b.as_str()));
    }
    label
}

/// What a row's reader should know beside its figures.
pub fn row_notes(r: &ProfileRow) -> Vec<String> {
    let mut notes = Vec::new();
    if r.mean_baseline == 0.0 && r.mean_variant > 0.0 {
        notes.push("only in the variant".to_string());
    } else if r.mean_variant == 0.0 && r.mean_baseline > 0.0 {
        notes.push("only in the baseline".to_string());
    } else if let Some(note) = r.comparison.as_ref().and_then(|c| c.interval_note.as_ref()) {
        notes.push(note.clone());
    }
    if let Some(n) = r.runs_to_decide {
        notes.push(format!(
            "beyond ±θ alone, but too few runs for the rank test to pass BH over the tested rows: about {n} per side would decide"
        ));
    }
    if r.runs_below_share > 0 && r.origin.is_some() {
        notes.push(format!("below the stored share in {} runs (counted 0)", r.runs_below_share));
    }
    notes
}

/// A small share as a percentage: `0.001%`.
fn share(fraction: f64) -> String {
    let pct = fraction * 100.0;
    let text = format!("{pct:.6}");
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The comparison's first line: what is compared, how the counts were
/// taken, the statistics' family.
pub fn heading(c: &ProfileComparison) -> String {
    let counting = match c.counting {
        CountKind::Exact => "exact instruction counts (every executed block counted)",
        CountKind::Sampled => "SAMPLED counts (perf samples × period: estimates)",
    };
    format!(
        "{}: {} vs {} — {counting}, {} + {} runs; the {} rows of at least {} of a run are tested as one \
         Benjamini–Hochberg family (α = {}, θ = ±{}%), the other {} are shown",
        c.workload,
        c.variant,
        c.baseline,
        c.n_baseline,
        c.n_variant,
        c.tested,
        share(TESTED_SHARE),
        c.alpha,
        human::number(c.theta * 100.0),
        c.rows.len() - c.tested
    )
}

/// `total 4.5 M → 6.75 M: +2.25 M (+50.00%)`.
pub fn total_line(c: &ProfileComparison) -> String {
    format!(
        "total {} → {}: {} ({}) instructions per run",
        human::count(c.total_baseline),
        human::count(c.total_variant),
        human::signed_count(c.difference),
        human::change_pct(c.change_pct)
    )
}

/// What the first `shown` rows carry of the total's difference, and the rest.
pub fn coverage_line(c: &ProfileComparison, shown: usize) -> String {
    let shown = shown.min(c.rows.len());
    let (listed, part) = c.coverage(shown);
    let rest = c.rows.len() - shown;
    let mut line = format!(
        "the {shown} rows listed: {} of the total's {} ({})",
        human::signed_count(listed),
        human::signed_count(c.difference),
        human::percent(part * 100.0)
    );
    if rest > 0 {
        let _ = write!(line, "; the other {rest} rows: {}", human::signed_count(c.difference - listed));
    }
    line
}

/// The relative change of the means: `+50.00%`.
pub fn change(r: &ProfileRow) -> String {
    human::change_pct((r.mean_variant - r.mean_baseline) / r.mean_baseline.abs() * 100.0)
}

/// The CI cell: `[+1.2%, +3.4%] at 95%`, or nothing when not tested.
pub fn ci(r: &ProfileRow) -> String {
    match &r.comparison {
        Some(c) => format!("{} at {}", human::ci_pct(c.ci_low_pct, c.ci_high_pct), human::percent(c.ci_level * 100.0)),
        None => human::NONE.to_string(),
    }
}

/// The verdict word, or `not tested`.
pub fn verdict(r: &ProfileRow) -> String {
    r.verdict().map_or_else(|| "not tested".to_string(), |v| v.to_string())
}

fn decided(r: &ProfileRow) -> bool {
    matches!(r.verdict(), Some(Verdict::Regressed | Verdict::Improved))
}

/// One comparison as a terminal table.
pub fn text_of(c: &ProfileComparison, shown: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", heading(c));
    let _ = writeln!(out, "{}", total_line(c));
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(["function", &c.baseline, &c.variant, "Δ", "of Δ", "change", "CI", "verdict", "notes"]);
    for r in c.rows.iter().take(shown) {
        let verdict = if decided(r) { format!("*{}*", verdict(r)) } else { verdict(r) };
        table.add_row(vec![
            Cell::new(row_label(r)),
            Cell::new(human::count(r.mean_baseline)).set_alignment(CellAlignment::Right),
            Cell::new(human::count(r.mean_variant)).set_alignment(CellAlignment::Right),
            Cell::new(human::signed_count(r.difference)).set_alignment(CellAlignment::Right),
            Cell::new(human::percent(r.share_of_difference * 100.0)).set_alignment(CellAlignment::Right),
            Cell::new(change(r)).set_alignment(CellAlignment::Right),
            Cell::new(ci(r)),
            Cell::new(verdict),
            Cell::new(row_notes(r).join("; ")),
        ]);
    }
    let _ = writeln!(out, "{table}");
    let _ = writeln!(out, "{}", coverage_line(c, shown));
    out
}

/// One comparison as a Markdown table.
pub fn markdown_of(c: &ProfileComparison, shown: usize) -> String {
    let mut out = String::new();
    let _ = write!(out, "**{}**\n\n{}\n\n", md_esc(&heading(c)), md_esc(&total_line(c)));
    let _ = writeln!(
        out,
        "| function | {} | {} | Δ | of Δ | change | CI | verdict | notes |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
        md_esc(&c.baseline),
        md_esc(&c.variant)
    );
    for r in c.rows.iter().take(shown) {
        let verdict = verdict(r);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            md_esc(&row_label(r)),
            human::count(r.mean_baseline),
            human::count(r.mean_variant),
            human::signed_count(r.difference),
            human::percent(r.share_of_difference * 100.0),
            change(r),
            md_esc(&ci(r)),
            if decided(r) { format!("**{verdict}**") } else { verdict },
            md_esc(&row_notes(r).join("; "))
        );
    }
    let _ = write!(out, "\n{}.\n\n", md_esc(&coverage_line(c, shown)));
    out
}

/// Why there is nothing to show.
const NO_PROFILES: &str = "no run stored a profile: profiles come from guests under TCG with fslab's \
     instruction-counting plugin (every run of such a variant stores one), compared when the baseline has them too";

impl Document for ProfileReport {
    fn what(&self) -> &'static str {
        "a profile comparison"
    }

    fn text(&self) -> String {
        let mut out =
            format!("experiment {} `{}`: instructions by function\n", self.experiment_id, self.experiment_name);
        if self.comparisons.is_empty() {
            let _ = writeln!(out, "{NO_PROFILES}");
        }
        for c in &self.comparisons {
            out.push('\n');
            out.push_str(&text_of(c, self.rows));
        }
        out
    }

    fn markdown(&self) -> Option<String> {
        let mut out = format!(
            "## fslab experiment {}: {}, instructions by function\n\n",
            self.experiment_id,
            md_esc(&self.experiment_name)
        );
        if self.comparisons.is_empty() {
            let _ = writeln!(out, "{}", md_esc(NO_PROFILES));
        }
        for c in &self.comparisons {
            out.push_str(&markdown_of(c, self.rows));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::profile::compare_profiles;
    use crate::report::fixture;

    #[test]
    fn the_text_names_the_movers_their_cis_and_what_the_rows_cover() {
        let c = compare_profiles(&fixture::profiled_runs(), "base", &Default::default());
        let doc = ProfileReport { experiment_id: 7, experiment_name: "reads".into(), comparisons: c, rows: 3 };
        let text = doc.text();
        assert!(text.contains("reads: more vs base — exact instruction counts"), "{text}");
        assert!(text.contains("total 6.225 M → 8.472 M: +2.247 M (+36.10%) instructions per run"), "{text}");
        let first = text.lines().find(|l| l.trim_start().starts_with("read_zero")).unwrap();
        assert!(first.contains("+2.25 M") && first.contains("*regressed*"), "{first}");
        assert!(
            text.contains("the 3 rows listed: +2.247 M of the total's +2.247 M (100.0%); the other 3 rows: 0"),
            "{text}"
        );
        assert!(text.contains("only in the baseline; below the stored share in 7 runs (counted 0)"), "{text}");
        assert!(text.contains("do_idle (idle)"), "{text}");
        let md = doc.markdown().unwrap();
        assert!(md.contains("| read\\_zero | 4.5 M | 6.75 M | +2.25 M | 100.1% |"), "{md}");
        assert!(md.contains("rare\\_fn &lt;x&gt;"), "{md}");
        assert!(md.contains("**regressed**"));
        let json: serde_json::Value = serde_json::from_str(&crate::report::json::pretty(&doc).unwrap()).unwrap();
        let rows = json["comparisons"][0]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), doc.comparisons[0].rows.len(), "JSON has every row");
        assert_eq!(rows[0]["symbol"], "read_zero");
        assert_eq!(rows[0]["verdict"], "regressed");
        let empty = ProfileReport { experiment_id: 1, experiment_name: "x".into(), comparisons: vec![], rows: 20 };
        assert!(empty.text().contains("no run stored a profile"));
    }
}
