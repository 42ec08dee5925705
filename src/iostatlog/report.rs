//! `fslab iostat report LOG… -o out.html`: the experiment report's iostat
//! time-series charts for logs captured elsewhere, one chart set per device
//! name with every log that has that device overlaid, plus each file's
//! summary.

use std::fmt::Write;

use super::{summarize, FirstReport, IostatLog, SummaryOptions};
use crate::human::number as fmt_num;
use crate::report::html::{iostat_charts, page, IoPoint, IoSeries};
use crate::report::svg::{color, esc};

/// One self-contained HTML page for `(path, log)` pairs.
///
/// iostat's first, since-boot report is dropped when the log starts with the
/// banner (as in `summarize`); time is seconds since the first kept sample,
/// from the samples' `-t` timestamps where present, else sample index ×
/// interval (1 s when unknown).
pub fn render_html(logs: &[(String, IostatLog)]) -> String {
    let opts = SummaryOptions { first_report: FirstReport::Auto, ..SummaryOptions::default() };
    let mut body = String::new();
    let _ = write!(body, "<header><h1>iostat logs</h1><p class=\"muted\">{} file(s)</p></header>", logs.len());

    // Per file: summary table.
    body.push_str("<section id=\"files\"><h2>Files</h2><table><tr><th></th><th>file</th><th>layout</th><th>device</th><th>samples</th>\
        <th>interval s</th><th>duration s</th><th>read MB</th><th>written MB</th><th>busy s (%util ≥ 95)</th><th>busy written MB</th>\
        <th>busy mean wareq-sz kB</th><th>busy mean rareq-sz kB</th></tr>");
    let mut all_series: Vec<(String, IoSeries)> = Vec::new();
    for (i, (path, log)) in logs.iter().enumerate() {
        let summary = summarize(path, log, &opts);
        let layout = log.layout.map(|l| format!("{l:?}")).unwrap_or_else(|| "–".into());
        for d in &summary.devices {
            let opt = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "–".into());
            let _ = write!(
                body,
                "<tr><td><span class=\"swatch\" style=\"background:{}\"></span></td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                color(i),
                esc(path),
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
        if !log.warnings.is_empty() {
            let _ = write!(
                body,
                "<tr><td></td><td colspan=\"12\">{}: {} line(s) skipped: {}</td></tr>",
                esc(path),
                log.warnings.len(),
                esc(&log.warnings.iter().take(5).map(|w| w.to_string()).collect::<Vec<_>>().join("; "))
            );
        }

        let interval = summary.devices.first().map(|d| d.interval_s).unwrap_or(1.0);
        let first_report = log.samples.first().map(|s| s.report).unwrap_or(0);
        let kept: Vec<_> =
            log.samples.iter().filter(|s| !(summary.dropped_first_report && s.report == first_report)).collect();
        let t0 = kept.iter().find_map(|s| s.t_s);
        let mut names: Vec<&str> = Vec::new();
        for s in &kept {
            if !names.contains(&s.device.as_str()) {
                names.push(&s.device);
            }
        }
        for dev in names {
            let rows: Vec<_> = kept.iter().filter(|s| s.device == dev).collect();
            let use_ts = t0.is_some() && rows.iter().all(|s| s.t_s.is_some());
            let points = rows
                .iter()
                .enumerate()
                .map(|(k, s)| IoPoint {
                    t_s: match (use_ts, s.t_s, t0) {
                        (true, Some(t), Some(t0)) => t - t0 + interval,
                        _ => (k + 1) as f64 * interval,
                    },
                    util_pct: s.util_pct,
                    write_mb_s: Some(s.wkb_s / 1024.0),
                    read_mb_s: Some(s.rkb_s / 1024.0),
                    wareq_kb: s.wareq_kb,
                    rareq_kb: s.rareq_kb,
                    w_await_ms: s.w_await,
                    r_await_ms: s.r_await,
                    aqu_sz: s.aqu_sz,
                })
                .collect();
            let name = if logs.len() > 1 { file_name(path) } else { dev.to_string() };
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
