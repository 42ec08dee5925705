//! The report's profile section: per comparison, where the difference in
//! guest instructions went ([`crate::analysis::profile`]), drawn as
//! diverging bars, then the table of the functions that moved most.
//!
//! Why bars and not a differential flame graph: the plugin counts blocks,
//! not stacks, so there is no call chain to draw. The bars come at two
//! levels of the one hierarchy a flat profile has (where the code lives →
//! function): the groups' sums (user space, the kernel image or, for a
//! built kernel, its source directories, each module, unmapped code, the
//! remainder) and the functions that carry most of the difference, each
//! with its interval and coloured by its verdict.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analysis::profile::{ProfileComparison, ProfileRow};
use crate::human;
use crate::report::data::ReportData;
use crate::report::documents::profile::{
    change, ci, coverage_line, heading, row_label, row_notes, total_line, verdict,
};
use crate::report::svg::{esc, nice_ticks};
use crate::stats::Verdict;
use crate::vm::profile::Origin;

/// Functions drawn and listed per comparison.
const BARS: usize = 15;
const ROWS: usize = 25;

/// Chart geometry: a label column, then the bars around the zero line.
const W: f64 = 640.0;
const LABELS: f64 = 230.0;
const MR: f64 = 16.0;
const MT: f64 = 30.0;
const MB: f64 = 34.0;
const ROW: f64 = 18.0;

/// Fill of a function's bar by its verdict.
fn verdict_fill(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Regressed) => "#D55E00",
        Some(Verdict::Improved) => "#009E73",
        Some(Verdict::Inconclusive) => "#E69F00",
        Some(Verdict::NoChange) => "#999999",
        None => "#CCCCCC",
    }
}

/// The group a row belongs to: the level above the function.
pub fn group(r: &ProfileRow) -> String {
    match (r.origin, &r.unit) {
        (None, _) => "other (below the stored share)".to_string(),
        (Some(Origin::User), _) => "user space".to_string(),
        (Some(Origin::Unmapped), _) => "kernel code without a symbol".to_string(),
        (Some(Origin::Module), Some(m)) => format!("module {m}"),
        (Some(Origin::Module), None) => "modules".to_string(),
        (Some(Origin::Kernel), Some(dir)) => format!("kernel {dir}/"),
        (Some(Origin::Kernel), None) => "kernel image".to_string(),
    }
}

/// One bar: label, difference, its interval (absolute, when known), fill, tooltip.
struct Bar {
    label: String,
    difference: f64,
    interval: Option<(f64, f64)>,
    fill: &'static str,
    tip: String,
}

/// Horizontal bars of signed differences around a zero line.
fn diverging_bars(kind: &str, title: &str, bars: &[Bar]) -> String {
    let h = MT + MB + ROW * bars.len().max(1) as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg class="chart" data-chart="{kind}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><rect x="0" y="0" width="{W}" height="{h}" fill="#fff"/><text x="8" y="16" class="ct">{t}</text>"##,
        t = esc(title)
    );
    let extent = bars
        .iter()
        .flat_map(|b| [b.difference, b.interval.map_or(0.0, |i| i.0), b.interval.map_or(0.0, |i| i.1)])
        .filter(|v| v.is_finite())
        .fold(0.0_f64, |m, v| m.max(v.abs()));
    let extent = if extent > 0.0 { extent * 1.05 } else { 1.0 };
    let (x0, x1) = (LABELS, W - MR);
    let at = |v: f64| x0 + (v.clamp(-extent, extent) + extent) / (2.0 * extent) * (x1 - x0);
    let bottom = h - MB;
    for t in nice_ticks(-extent, extent, 6) {
        let x = at(t);
        let _ = write!(
            out,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{MT}" y2="{bottom:.1}" class="grid"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            bottom + 14.0,
            esc(&human::signed_count(t))
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" class="al" text-anchor="middle">instructions per run, variant − baseline</text>"#,
        (x0 + x1) / 2.0,
        h - 4.0
    );
    for (i, b) in bars.iter().enumerate() {
        let y = MT + ROW * i as f64;
        let short: String = b.label.chars().take(34).collect();
        let ellipsis = if b.label.chars().count() > 34 { "…" } else { "" };
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}{ellipsis}</text>"#,
            LABELS - 6.0,
            y + ROW * 0.7,
            esc(&short)
        );
        if b.difference.is_finite() {
            let (a, z) = (at(0.0), at(b.difference));
            let _ = write!(
                out,
                r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                a.min(z),
                y + 3.0,
                (z - a).abs().max(1.0),
                ROW - 6.0,
                b.fill,
                esc(&b.tip)
            );
        }
        if let Some((lo, hi)) = b.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()) {
            let mid = y + ROW / 2.0;
            let _ = write!(
                out,
                r##"<line class="ci" x1="{:.1}" x2="{:.1}" y1="{mid:.1}" y2="{mid:.1}" stroke="#222" stroke-width="1.2"/>"##,
                at(lo),
                at(hi)
            );
        }
    }
    let zero = at(0.0);
    let _ = write!(out, r#"<line x1="{zero:.1}" x2="{zero:.1}" y1="{MT}" y2="{bottom:.1}" class="axis"/></svg>"#);
    out
}

/// A function's change interval in instructions: its relative interval
/// applied to the baseline's mean (none when the baseline has none).
fn absolute_interval(r: &ProfileRow) -> Option<(f64, f64)> {
    let c = r.comparison.as_ref()?;
    (r.mean_baseline > 0.0 && c.ci_low_pct.is_finite() && c.ci_high_pct.is_finite())
        .then(|| (r.mean_baseline * c.ci_low_pct / 100.0, r.mean_baseline * c.ci_high_pct / 100.0))
}

/// The two charts of one comparison: groups, then functions.
pub fn charts(c: &ProfileComparison) -> String {
    let mut groups: BTreeMap<String, f64> = BTreeMap::new();
    for r in &c.rows {
        *groups.entry(group(r)).or_insert(0.0) += r.difference;
    }
    let mut groups: Vec<(String, f64)> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    let group_bars: Vec<Bar> = groups
        .iter()
        .take(BARS)
        .map(|(name, d)| Bar {
            label: name.clone(),
            difference: *d,
            interval: None,
            fill: if *d > 0.0 { "#E8A27C" } else { "#7CC6AE" },
            tip: format!("{name}: {} instructions per run (the sum of its functions)", human::signed_count(*d)),
        })
        .collect();
    let function_bars: Vec<Bar> = c
        .rows
        .iter()
        .take(BARS)
        .map(|r| Bar {
            label: row_label(r),
            difference: r.difference,
            interval: absolute_interval(r),
            fill: verdict_fill(r.verdict()),
            tip: format!(
                "{}: {} → {}, {} ({}, CI {}), {}",
                row_label(r),
                human::count(r.mean_baseline),
                human::count(r.mean_variant),
                human::signed_count(r.difference),
                change(r),
                ci(r),
                verdict(r)
            ),
        })
        .collect();
    let title = format!("{}: {} vs {}", c.workload, c.variant, c.baseline);
    format!(
        "<div class=\"charts\"><figure>{}<figcaption>Where the difference is, by where the code lives: each group's \
         functions' differences summed (no verdict of their own).</figcaption></figure><figure>{}<figcaption>The {} \
         functions that carry most of the difference, coloured by verdict (<span class=\"v-regressed\">regressed</span>, \
         <span class=\"v-improved\">improved</span>, <span class=\"v-inconclusive\">inconclusive</span>, \
         no-change grey, not tested light grey); the line is the change's interval in instructions.</figcaption></figure></div>",
        diverging_bars("profile-groups", &format!("{title}, by group"), &group_bars),
        diverging_bars("profile-functions", &format!("{title}, by function"), &function_bars),
        function_bars.len()
    )
}

/// The profile section, when some runs stored a profile: per comparison
/// the heading, the total, the charts, the table and what it covers.
pub fn section(d: &ReportData, out: &mut String) {
    let comparisons = match d.profiles() {
        Ok(c) if c.is_empty() => return,
        Ok(c) => c,
        Err(e) => {
            let _ = write!(
                out,
                "<section id=\"profile\"><h2>Where the instructions went</h2><p class=\"warning\">{}</p></section>",
                esc(&format!("{e:#}"))
            );
            return;
        }
    };
    out.push_str(
        "<section id=\"profile\"><h2>Where the instructions went</h2><p>The guest's instructions of each run's measured \
         part by kernel function (user space as one entry), from the runs' stored profiles. Per function: both sides' \
         mean count, the difference, the relative change with its interval and a verdict as the comparison computes \
         them; the functions of at least 0.1% of a run are tested as one Benjamini–Hochberg family per \
         comparison, the smaller ones are shown untested. The rows' differences add up to the total's.</p>",
    );
    for c in &comparisons {
        let _ = write!(out, "<h3>{}</h3><p>{}</p>", esc(&heading(c)), esc(&total_line(c)));
        out.push_str(&charts(c));
        out.push_str(
            "<div class=\"scroll\"><table class=\"verdicts profile\"><tr><th>function</th><th>baseline</th>\
             <th>variant</th><th>Δ</th><th>of Δ</th><th>change</th><th>CI</th><th>verdict</th><th>notes</th></tr>",
        );
        for r in c.rows.iter().take(ROWS) {
            let v = r.verdict().map_or("not-tested", |v| v.as_str());
            let _ = write!(
                out,
                "<tr class=\"v-{v}\"><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td><span class=\"verdict v-{v}\">{}</span></td><td class=\"notes\">{}</td></tr>",
                esc(&row_label(r)),
                human::count(r.mean_baseline),
                human::count(r.mean_variant),
                human::signed_count(r.difference),
                human::percent(r.share_of_difference * 100.0),
                change(r),
                esc(&ci(r)),
                esc(&verdict(r)),
                esc(&row_notes(r).join("; "))
            );
        }
        let _ = write!(out, "</table></div><p>{}.</p>", esc(&coverage_line(c, ROWS)));
    }
    out.push_str("</section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn the_section_draws_groups_and_functions_and_lists_the_movers() {
        let d = fixture::profiled();
        let mut out = String::new();
        section(&d, &mut out);
        assert!(out.starts_with("<section id=\"profile\">"), "{out}");
        assert_eq!(out.matches("data-chart=\"profile-groups\"").count(), 1);
        assert_eq!(out.matches("data-chart=\"profile-functions\"").count(), 1);
        // read_zero regressed: the first function bar is vermillion, with its interval.
        let functions = out.split("data-chart=\"profile-functions\"").nth(1).unwrap();
        let first_bar = functions.split("<rect class=\"bar\"").nth(1).unwrap();
        assert!(first_bar.contains("fill=\"#D55E00\"") && first_bar.contains("read_zero"), "{first_bar}");
        assert!(functions.contains("class=\"ci\""));
        // The groups: the kernel image carries the difference; the module is a group of its own.
        let groups = out.split("data-chart=\"profile-groups\"").nth(1).unwrap().split("</svg>").next().unwrap();
        assert!(groups.contains(">kernel image<") && groups.contains(">module squashfs<"), "{groups}");
        // Escaped names, the table and the coverage line.
        assert!(out.contains("rare_fn &lt;x&gt;") && !out.contains("rare_fn <x>"));
        assert!(out.contains("<tr class=\"v-regressed\"><td><code>read_zero</code>"), "{out}");
        assert!(out.contains("rows listed: +2.247 M of the total&#39;s +2.247 M (100.0%)"), "{out}");
        // No profiles, no section.
        let mut none = String::new();
        section(&fixture::decided(), &mut none);
        assert!(none.is_empty());
    }
}
