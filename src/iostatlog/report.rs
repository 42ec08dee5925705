//! `fslab iostat report LOG… -o out.html`: the experiment report's iostat
//! time-series charts for logs captured elsewhere, one chart set per device
//! name with every log that has that device overlaid, plus each file's
//! summary.
//!
//! A log is read once, streaming, into a [`LogView`]: its summary and one
//! [`BoundedSeries`](super::BoundedSeries) per device, so the page costs the
//! same memory, and holds at most two points per bucket per series,
//! however long the log is.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

use super::parse::{IostatLog, Layout, LogInfo, ParseIssue};
use super::series::{LogSeries, SeriesBuilder};
use super::summarize::{FileSummary, FirstReport, Summarizer, SummaryOptions};
use crate::human::number as fmt_num;
use crate::report::html::{iostat_charts, page, IoPoint, IoSeries};
use crate::report::svg::{color, esc};

/// Skipped lines quoted per file.
const QUOTED_WARNINGS: usize = 5;

/// What the page shows of one log.
#[derive(Clone, Debug)]
pub struct LogView {
    pub path: String,
    pub layout: Option<Layout>,
    pub summary: FileSummary,
    /// Lines skipped (lenient), and the first few of them.
    pub skipped: usize,
    pub first_skipped: Vec<ParseIssue>,
    pub series: LogSeries,
}

/// Summary and series in one pass (the report uses no busy window, so one
/// pass is enough).
struct ViewBuilder {
    summary: Summarizer,
    series: SeriesBuilder,
    skipped: usize,
    first_skipped: Vec<ParseIssue>,
}

fn report_options() -> SummaryOptions {
    SummaryOptions { first_report: FirstReport::Auto, ..SummaryOptions::default() }
}

impl ViewBuilder {
    fn new() -> Self {
        let opts = report_options();
        ViewBuilder {
            summary: Summarizer::new(&opts, None),
            series: SeriesBuilder::new(opts.first_report),
            skipped: 0,
            first_skipped: Vec::new(),
        }
    }

    fn skip(&mut self, w: &ParseIssue) {
        self.skipped += 1;
        if self.first_skipped.len() < QUOTED_WARNINGS {
            self.first_skipped.push(w.clone());
        }
    }

    fn finish(self, path: &str, info: &LogInfo) -> LogView {
        LogView {
            path: path.to_string(),
            layout: info.layout,
            summary: self.summary.finish(path, info),
            skipped: self.skipped,
            first_skipped: self.first_skipped,
            series: self.series.finish(info),
        }
    }
}

/// Reads the log at `path` streaming into what the page shows; skipped
/// lines (lenient) are also handed to `skipped`.
pub fn view_file(path: &Path, lenient: bool, skipped: &mut dyn FnMut(&ParseIssue)) -> Result<LogView> {
    let mut b = ViewBuilder::new();
    let (mut count, mut quoted) = (0usize, Vec::new());
    let info = super::for_each_sample(
        path,
        lenient,
        &mut |w| {
            skipped(w);
            count += 1;
            if quoted.len() < QUOTED_WARNINGS {
                quoted.push(w.clone());
            }
        },
        &mut |s, info| {
            b.summary.set_banner(info.banner.is_some());
            b.series.set_banner(info.banner.is_some());
            let located = |e: String| anyhow::anyhow!("{}:{}: {e}", path.display(), s.line);
            b.summary.push(&s).map_err(located)?;
            b.series.push(&s).map_err(located)
        },
    )?;
    (b.skipped, b.first_skipped) = (count, quoted);
    Ok(b.finish(&path.display().to_string(), &info))
}

/// What the page shows of a log already in memory.
pub fn view_log(path: &str, log: &IostatLog) -> LogView {
    let mut b = ViewBuilder::new();
    b.summary.set_banner(log.banner.is_some());
    b.series.set_banner(log.banner.is_some());
    for s in &log.samples {
        // Held in memory already; the device cap only guards streams.
        let _ = b.summary.push(s);
        let _ = b.series.push(s);
    }
    for w in &log.warnings {
        b.skip(w);
    }
    b.finish(path, &log.info())
}

/// One self-contained HTML page for `(path, log)` pairs held in memory.
///
/// iostat's first, since-boot report is dropped when the log starts with
/// the banner (as in `summarize`); time is seconds since the first kept
/// sample, from the samples' `-t` timestamps where present, else sample
/// index × interval (1 s when unknown).
pub fn render_html(logs: &[(String, IostatLog)]) -> String {
    let views: Vec<LogView> = logs.iter().map(|(p, l)| view_log(p, l)).collect();
    render_views(&views)
}

/// One self-contained HTML page for the logs at `paths`, each read once,
/// streaming.
pub fn render_files(paths: &[&Path], lenient: bool, skipped: &mut dyn FnMut(&Path, &ParseIssue)) -> Result<String> {
    let mut views = Vec::with_capacity(paths.len());
    for &p in paths {
        views.push(view_file(p, lenient, &mut |w| skipped(p, w))?);
    }
    Ok(render_views(&views))
}

/// A device's bounded series as the charts' points: `x` is seconds from
/// the log's first kept sample (timestamps when every sample of the device
/// has one, else sample index × interval).
fn io_points(series: &super::BoundedSeries<8>, t0: Option<f64>, interval: f64) -> Vec<IoPoint> {
    let use_ts = t0.is_some() && series.all_timed();
    series
        .chart_points()
        .into_iter()
        .map(|p| {
            let t_s = match (use_ts, p.t, t0) {
                (true, Some(t), Some(t0)) => t - t0 + interval,
                _ => (p.index + 1) as f64 * interval,
            };
            let [util_pct, write_mb_s, read_mb_s, wareq_kb, rareq_kb, w_await_ms, r_await_ms, aqu_sz] = p.values;
            IoPoint { t_s, util_pct, write_mb_s, read_mb_s, wareq_kb, rareq_kb, w_await_ms, r_await_ms, aqu_sz }
        })
        .collect()
}

/// The page for finished views.
pub fn render_views(logs: &[LogView]) -> String {
    let mut body = String::new();
    let _ = write!(body, "<header><h1>iostat logs</h1><p class=\"muted\">{} file(s)</p></header>", logs.len());

    // Per file: summary table.
    body.push_str("<section id=\"files\"><h2>Files</h2><table><tr><th></th><th>file</th><th>layout</th><th>device</th><th>samples</th>\
        <th>interval s</th><th>duration s</th><th>read MB</th><th>written MB</th><th>busy s (%util ≥ 95)</th><th>busy written MB</th>\
        <th>busy mean wareq-sz kB</th><th>busy mean rareq-sz kB</th></tr>");
    let mut all_series: Vec<(String, IoSeries)> = Vec::new();
    for (i, view) in logs.iter().enumerate() {
        let summary = &view.summary;
        let layout = view.layout.map(|l| format!("{l:?}")).unwrap_or_else(|| "–".into());
        for d in &summary.devices {
            let opt = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "–".into());
            let _ = write!(
                body,
                "<tr><td><span class=\"swatch\" style=\"background:{}\"></span></td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                color(i),
                esc(&view.path),
                esc(&layout),
                esc(&d.name),
                d.samples,
                fmt_num(d.interval_s),
                fmt_num(d.duration_s),
                fmt_num(d.read_mb),
                fmt_num(d.written_mb),
                fmt_num(d.busy.seconds),
                fmt_num(d.busy.written_mb),
                opt(d.busy.mean_wareq_kb),
                opt(d.busy.mean_rareq_kb)
            );
        }
        if view.skipped > 0 {
            let _ = write!(
                body,
                "<tr><td></td><td colspan=\"12\">{}: {} line(s) skipped: {}</td></tr>",
                esc(&view.path),
                view.skipped,
                esc(&view.first_skipped.iter().map(|w| w.to_string()).collect::<Vec<_>>().join("; "))
            );
        }

        let interval = summary.devices.first().map(|d| d.interval_s).unwrap_or(1.0);
        for (dev, series) in &view.series.devices {
            let points = io_points(series, view.series.t0, interval);
            let name = if logs.len() > 1 { file_name(&view.path) } else { dev.to_string() };
            all_series.push((dev.to_string(), IoSeries { name, color: color(i).to_string(), points }));
        }
    }
    body.push_str("</table></section>");

    body.push_str("<section id=\"iostat\"><h2>Time series</h2>");
    let mut devices: Vec<&str> = Vec::new();
    for (d, _) in &all_series {
        if !devices.contains(&d.as_str()) {
            devices.push(d);
        }
    }
    if devices.is_empty() {
        body.push_str("<p class=\"muted\">No device rows in these logs.</p>");
    }
    for (k, dev) in devices.iter().enumerate() {
        let series: Vec<IoSeries> = all_series.iter().filter(|(d, _)| d == dev).map(|(_, s)| s.clone()).collect();
        // Devices with no I/O at all (idle partitions) are folded.
        let idle = series
            .iter()
            .all(|s| s.points.iter().all(|p| p.write_mb_s.unwrap_or(0.0) == 0.0 && p.read_mb_s.unwrap_or(0.0) == 0.0));
        let _ = write!(
            body,
            "<details{}><summary>{}{}</summary>{}</details>",
            if !idle || (k == 0 && devices.len() == 1) { " open" } else { "" },
            esc(dev),
            if idle { " (no I/O)" } else { "" },
            iostat_charts(dev, &series)
        );
    }
    body.push_str("</section>");
    page("fslab iostat report", &body)
}

/// The last path component (for legends), or the whole path.
fn file_name(path: &str) -> String {
    std::path::Path::new(path).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long log's page stays small: at most two points per bucket.
    #[test]
    fn long_logs_make_bounded_pages() {
        let mut text = String::from("Linux 6.1 (h)\n\n");
        for k in 0..20_000u32 {
            let (h, m, s) = (k / 3600 % 24, k / 60 % 60, k % 60);
            let util = if k == 12_345 { 100.0 } else { 10.0 };
            text.push_str(&format!(
                "{h:02}:{m:02}:{s:02}\nDevice r/s w/s rkB/s wkB/s %util\nsda 1.00 2.00 4.00 {}.00 {util}\n\n",
                k % 7
            ));
        }
        let log = crate::iostatlog::parse_log(&text, false).unwrap();
        let view = view_log("big.log", &log);
        let (_, series) = &view.series.devices[0];
        assert_eq!(series.len(), 19_999, "first report dropped");
        let points = io_points(series, view.series.t0, 1.0);
        assert!(points.len() <= 2 * crate::iostatlog::SERIES_BUCKETS, "{}", points.len());
        assert!(points.iter().any(|p| p.util_pct == Some(100.0)), "the one busy second survives");
        assert!(points.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        assert_eq!(points.last().unwrap().t_s, 19_999.0);
    }
}
