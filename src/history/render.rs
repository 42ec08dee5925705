//! A history as a terminal table and as an HTML page with a line chart.

use std::fmt::Write;

use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

use super::{History, SeriesPoint};
use crate::human;
use crate::report::html::page;
use crate::report::svg::{self, esc, Line};
use crate::report::Document;
use crate::stats::changepoint::ChangePoint;

/// Tags every experiment carries, left out of the table's tag column.
const QUIET_TAGS: [&str; 3] = ["fslab", "hostname", "machine"];

fn tag_text(p: &SeriesPoint) -> String {
    if let Some(label) = &p.label {
        return format!("{label} ({} exp.)", p.experiments.len());
    }
    p.tags
        .iter()
        .filter(|(k, _)| !QUIET_TAGS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `◆ +12.30% (p<0.001) regression`.
pub fn change_text(cp: &ChangePoint, higher_is_better: bool) -> String {
    format!(
        "◆ {} ({}) {}",
        human::change_pct(cp.change_pct()),
        human::p_equation(cp.p_value),
        if cp.is_regression(higher_is_better) { "regression" } else { "improvement" }
    )
}

fn ci_text(p: &SeriesPoint) -> String {
    if p.point.ci_low.is_finite() {
        format!("[{}, {}]", human::number(p.point.ci_low), human::number(p.point.ci_high))
    } else {
        "–".to_string()
    }
}

fn heading(h: &History) -> String {
    format!(
        "{}/{} ({}, {} is better), variant {}{}: {} points, {} change point{}",
        h.workload,
        h.metric,
        if h.unit.is_empty() { "no unit" } else { &h.unit },
        if h.higher_is_better { "higher" } else { "lower" },
        h.variant,
        h.by.as_ref().map(|b| format!(", by {b}")).unwrap_or_default(),
        h.points.len(),
        h.change_points.len(),
        if h.change_points.len() == 1 { "" } else { "s" }
    )
}

/// The terminal table: `# | date | experiment | tags | mean | 95% CI | n | change`.
pub fn text(h: &History) -> String {
    let mut out = heading(h) + "\n";
    for why in &h.left_out {
        let _ = writeln!(out, "left out: {why} (--allow-mixed keeps them)");
    }
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(["#", "date", "experiment", "tags", "mean", "95% CI", "n", "change"]);
    for (i, p) in h.points.iter().enumerate() {
        let change = h.change_points.iter().find(|c| c.index == i).map(|c| change_text(c, h.higher_is_better));
        let mut experiment = format!("{}", p.experiment_id);
        if !p.mixed.is_empty() {
            experiment.push_str(" (mixed)");
        }
        table.add_row(vec![
            Cell::new(i + 1).set_alignment(CellAlignment::Right),
            Cell::new(p.created_at.get(..10).unwrap_or(&p.created_at)),
            Cell::new(experiment).set_alignment(CellAlignment::Right),
            Cell::new(tag_text(p)),
            Cell::new(human::number(p.point.mean)).set_alignment(CellAlignment::Right),
            Cell::new(ci_text(p)),
            Cell::new(p.point.n).set_alignment(CellAlignment::Right),
            Cell::new(change.unwrap_or_default()),
        ]);
    }
    let _ = writeln!(out, "{table}");
    for p in h.points.iter().filter(|p| !p.mixed.is_empty()) {
        let _ = writeln!(out, "experiment {} differs: {}", p.experiment_id, p.mixed.join("; "));
    }
    out
}

/// A self-contained HTML page: the means with their CIs over the points,
/// a vertical marker at each change point, and the table.
pub fn html(h: &History) -> String {
    let x = |i: usize| (i + 1) as f64;
    let means = Line {
        name: format!("{} mean (95% CI)", h.variant),
        color: svg::color(0).to_string(),
        points: h.points.iter().enumerate().map(|(i, p)| (x(i), p.point.mean)).collect(),
        err: h.points.iter().map(|p| (p.point.ci_low, p.point.ci_high)).collect(),
        markers: true,
    };
    let (lo, hi) = h.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        let vals = [p.point.mean, p.point.ci_low, p.point.ci_high];
        let f = vals.iter().filter(|v| v.is_finite());
        (f.clone().fold(lo, |a, &b| a.min(b)), f.fold(hi, |a, &b| a.max(b)))
    });
    let mut lines = vec![means];
    for c in &h.change_points {
        // Drawn half a step before the segment's first point.
        let at = x(c.index) - 0.5;
        lines.push(Line {
            name: format!("change at #{}: {}", c.index + 1, human::change_pct(c.change_pct())),
            color: svg::color(1).to_string(),
            points: vec![(at, lo), (at, hi)],
            err: Vec::new(),
            markers: false,
        });
    }
    let unit = if h.unit.is_empty() { h.metric.clone() } else { format!("{} ({})", h.metric, h.unit) };
    let x_label =
        if h.by.is_some() { "tag value (in order of first experiment)" } else { "experiment (in time order)" };
    let chart = svg::line_chart("line", &format!("{}/{}", h.workload, h.metric), x_label, &unit, &lines);
    let mut body = format!(
        "<header><h1>fslab history: {}/{}</h1><p class=\"muted\">{}</p></header>",
        esc(&h.workload),
        esc(&h.metric),
        esc(&heading(h))
    );
    for why in &h.left_out {
        let _ = write!(body, "<p class=\"muted\">left out: {}</p>", esc(why));
    }
    body.push_str(&chart);
    body.push_str("<table><tr><th>#</th><th>date</th><th>experiment</th><th>tags</th><th>mean</th><th>95% CI</th><th>n</th><th>change</th></tr>");
    for (i, p) in h.points.iter().enumerate() {
        let change = h.change_points.iter().find(|c| c.index == i).map(|c| change_text(c, h.higher_is_better));
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            esc(&p.created_at),
            p.experiment_id,
            esc(&tag_text(p)),
            human::number(p.point.mean),
            esc(&ci_text(p)),
            p.point.n,
            esc(&change.unwrap_or_default())
        );
    }
    body.push_str("</table>");
    page(&format!("fslab history: {}/{}", h.workload, h.metric), &body)
}

/// `fslab history`: the table, the JSON series, or the HTML chart.
impl Document for History {
    fn what(&self) -> &'static str {
        "a metric's history"
    }

    fn text(&self) -> String {
        text(self)
    }

    fn html(&self) -> Option<String> {
        Some(html(self))
    }
}
