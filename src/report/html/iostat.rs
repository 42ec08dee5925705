//! iostat time-series charts (util, throughput, request sizes, await,
//! queue size) with several series overlaid: the experiment report draws
//! one set per round of runs, `fslab iostat report` one per device of its
//! logs.

use std::fmt::Write;

use crate::monitor::MonitorData;
use crate::report::svg::{esc, line_chart, Line};

/// One iostat interval, normalised for charting. `None` = not in the source.
#[derive(Clone, Debug, Default)]
pub struct IoPoint {
    /// Seconds since the start of the series.
    pub t_s: f64,
    pub util_pct: Option<f64>,
    pub write_mb_s: Option<f64>,
    pub read_mb_s: Option<f64>,
    pub wareq_kb: Option<f64>,
    pub rareq_kb: Option<f64>,
    pub w_await_ms: Option<f64>,
    pub r_await_ms: Option<f64>,
    pub aqu_sz: Option<f64>,
}

/// One overlaid line set of the iostat charts (a variant's run, or a log file's device).
#[derive(Clone, Debug)]
pub struct IoSeries {
    pub name: String,
    pub color: String,
    pub points: Vec<IoPoint>,
}

impl IoSeries {
    /// A run's monitor samples as a series.
    pub fn from_monitor(name: &str, color: &str, m: &MonitorData) -> IoSeries {
        let points = m
            .disk
            .iter()
            .map(|s| IoPoint {
                t_s: s.t_s,
                util_pct: Some(s.util_pct),
                write_mb_s: Some(s.wkb_s / 1024.0),
                read_mb_s: Some(s.rkb_s / 1024.0),
                wareq_kb: Some(s.wareq_sz),
                rareq_kb: Some(s.rareq_sz),
                w_await_ms: Some(s.w_await),
                r_await_ms: Some(s.r_await),
                aqu_sz: Some(s.aqu_sz),
            })
            .collect();
        IoSeries { name: name.to_string(), color: color.to_string(), points }
    }
}

/// The iostat time-series charts (util, MB/s written, MB/s read, request
/// sizes, await, queue size) with every series overlaid. Charts with no data
/// in any series are left out.
pub fn iostat_charts(caption: &str, series: &[IoSeries]) -> String {
    type Get = fn(&IoPoint) -> Option<f64>;
    type Chart<'a> = (&'a str, &'a str, &'a [(&'a str, Get)]);
    let charts: [Chart; 6] = [
        ("%util", "%", &[("", |p| p.util_pct)]),
        ("MB/s written", "MB/s", &[("", |p| p.write_mb_s)]),
        ("MB/s read", "MB/s", &[("", |p| p.read_mb_s)]),
        ("request size (wareq-sz, rareq-sz)", "kB", &[(" write", |p| p.wareq_kb), (" read", |p| p.rareq_kb)]),
        ("await", "ms", &[(" write", |p| p.w_await_ms), (" read", |p| p.r_await_ms)]),
        ("queue size (aqu-sz)", "requests", &[("", |p| p.aqu_sz)]),
    ];
    let mut out = String::from("<div class=\"charts\">");
    for (title, unit, fields) in charts {
        let mut lines = Vec::new();
        for s in series {
            for (i, (suffix, get)) in fields.iter().enumerate() {
                let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.t_s, get(p).unwrap_or(f64::NAN))).collect();
                if !pts.iter().any(|p| p.1.is_finite() && p.1 != 0.0) && fields.len() > 1 {
                    continue;
                }
                if !pts.iter().any(|p| p.1.is_finite()) {
                    continue;
                }
                // The second field of a chart (reads) is drawn lighter.
                let col = if i == 0 { s.color.clone() } else { lighten(&s.color) };
                lines.push(Line {
                    name: format!("{}{suffix}", s.name),
                    color: col,
                    points: pts,
                    err: vec![],
                    markers: false,
                });
            }
        }
        if lines.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<figure>{}<figcaption>{} — {}</figcaption></figure>",
            line_chart("ts", title, "seconds", unit, &lines),
            esc(caption),
            esc(title)
        );
    }
    out.push_str("</div>");
    out
}

/// A lighter tint of a `#rrggbb` colour (for the second line of a pair).
pub fn lighten(c: &str) -> String {
    let hex = c.trim_start_matches('#');
    if hex.len() != 6 || !hex.is_ascii() {
        return c.to_string();
    }
    let mut out = String::from("#");
    for i in 0..3 {
        let v = u8::from_str_radix(hex.get(i * 2..i * 2 + 2).unwrap_or("88"), 16).unwrap_or(0x88);
        let l = v as u16 + (255 - v as u16) * 55 / 100;
        let _ = write!(out, "{:02x}", l.min(255));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lighten_colours() {
        assert_eq!(lighten("#000000"), "#8c8c8c");
        assert_eq!(lighten("bad"), "bad");
    }
}
