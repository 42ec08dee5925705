//! Two log summaries side by side.

use serde::Serialize;

use super::summarize::{DeviceSummary, FileSummary};
use crate::human;

/// One figure in both logs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    /// Metric name, as in the summary JSON (`busy.written_mb` …).
    pub metric: String,
    /// Value in log A.
    pub a: Option<f64>,
    /// Value in log B.
    pub b: Option<f64>,
    /// `b - a`.
    pub change: Option<f64>,
    /// `(b - a) / a × 100`; `None` when `a` is 0 or missing.
    pub change_pct: Option<f64>,
}

/// One device pair.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceComparison {
    /// Device name in A.
    pub a_device: String,
    /// Device name in B.
    pub b_device: String,
    /// Figures in order.
    pub rows: Vec<CompareRow>,
}

/// The comparison of two logs.
#[derive(Clone, Debug, Serialize)]
pub struct LogComparison {
    /// Path of A.
    pub a: String,
    /// Path of B.
    pub b: String,
    /// Paired devices.
    pub devices: Vec<DeviceComparison>,
    /// Devices found in only one log.
    pub unpaired: Vec<String>,
}

fn figures(d: &DeviceSummary) -> Vec<(&'static str, Option<f64>)> {
    vec![
        ("samples", Some(d.samples as f64)),
        ("interval_s", Some(d.interval_s)),
        ("duration_s", Some(d.duration_s)),
        ("read_mb", Some(d.read_mb)),
        ("written_mb", Some(d.written_mb)),
        ("mean_util_pct", d.mean_util_pct),
        ("busy.seconds", Some(d.busy.seconds)),
        ("busy.read_mb", Some(d.busy.read_mb)),
        ("busy.written_mb", Some(d.busy.written_mb)),
        ("busy.mean_rareq_kb", d.busy.mean_rareq_kb),
        ("busy.mean_wareq_kb", d.busy.mean_wareq_kb),
        ("busy.weighted_rareq_kb", d.busy.weighted_rareq_kb),
        ("busy.weighted_wareq_kb", d.busy.weighted_wareq_kb),
    ]
}

/// Pairs devices by name; when each log has exactly one device (the same card
/// may be `mmcblk0` on one board and `mmcblk1` on another) they are paired
/// regardless of name. `device`, if given, restricts the pairing to that name
/// in both logs.
pub fn compare(a: &FileSummary, b: &FileSummary, device: Option<&str>) -> LogComparison {
    let pick = |s: &FileSummary| -> Vec<DeviceSummary> {
        s.devices.iter().filter(|d| device.is_none_or(|n| d.name == n)).cloned().collect()
    };
    let (da, db) = (pick(a), pick(b));
    let mut pairs = Vec::new();
    let mut unpaired = Vec::new();
    if da.len() == 1 && db.len() == 1 {
        pairs.push((da[0].clone(), db[0].clone()));
    } else {
        for x in &da {
            match db.iter().find(|y| y.name == x.name) {
                Some(y) => pairs.push((x.clone(), y.clone())),
                None => unpaired.push(format!("{}: {}", a.path, x.name)),
            }
        }
        for y in db.iter().filter(|y| !da.iter().any(|x| x.name == y.name)) {
            unpaired.push(format!("{}: {}", b.path, y.name));
        }
    }
    let devices = pairs
        .into_iter()
        .map(|(x, y)| DeviceComparison {
            a_device: x.name.clone(),
            b_device: y.name.clone(),
            rows: figures(&x)
                .into_iter()
                .zip(figures(&y))
                .map(|((m, va), (_, vb))| {
                    let change = va.zip(vb).map(|(p, q)| q - p);
                    let change_pct = va.zip(vb).and_then(|(p, q)| (p != 0.0).then(|| (q - p) / p * 100.0));
                    CompareRow { metric: m.to_string(), a: va, b: vb, change, change_pct }
                })
                .collect(),
        })
        .collect();
    LogComparison { a: a.path.clone(), b: b.path.clone(), devices, unpaired }
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| human::NONE.to_string(), human::number)
}

/// Plain-text table of a comparison.
pub fn render_comparison(c: &LogComparison) -> String {
    let mut out = format!("A: {}\nB: {}\n", c.a, c.b);
    for d in &c.devices {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec![
            "metric".to_string(),
            format!("A ({})", d.a_device),
            format!("B ({})", d.b_device),
            "change".into(),
            "change %".into(),
        ]);
        for r in &d.rows {
            let pct = r.change_pct.map_or_else(|| human::NONE.to_string(), human::change_pct);
            let change = r.change.map_or_else(|| human::NONE.to_string(), human::signed);
            t.add_row(vec![r.metric.clone(), cell(r.a), cell(r.b), change, pct]);
        }
        out.push('\n');
        out.push_str(&t.to_string());
        out.push('\n');
    }
    for u in &c.unpaired {
        out.push_str(&format!("only in {u}\n"));
    }
    out
}
