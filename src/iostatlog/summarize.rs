//! Per-device totals and the busy phase of a parsed iostat log.

use serde::Serialize;

use super::parse::{IostatLog, Sample};

/// What to do with the first report of a log.
///
/// iostat's first report holds averages since boot, not an interval, unless
/// `-y` was given. The text does not say whether `-y` was used, so `Auto`
/// drops the first report when the log starts with iostat's banner line
/// (i.e. it is a complete capture) and holds more than one report. With `-y`
/// logs this costs one real interval; pass `Keep` for those.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FirstReport {
    /// Drop it when the banner is present and there are ≥ 2 reports.
    #[default]
    Auto,
    /// Always keep it (logs taken with `iostat -y`).
    Keep,
    /// Always drop it.
    Drop,
}

/// Options for [`summarize`].
#[derive(Clone, Debug)]
pub struct SummaryOptions {
    /// A sample is busy when its `%util` is at least this (percent).
    pub util_threshold: f64,
    /// Only the first this-many busy seconds count toward the busy figures.
    pub window_s: Option<f64>,
    /// Interval override in seconds; else taken from `-t` timestamps, else 1 s.
    pub interval_s: Option<f64>,
    /// Treatment of iostat's since-boot first report.
    pub first_report: FirstReport,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { util_threshold: 95.0, window_s: None, interval_s: None, first_report: FirstReport::Auto }
    }
}

/// Where the interval of a summary came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalSource {
    /// Given by the user.
    Option,
    /// Median step between `-t` timestamps.
    Timestamps,
    /// No timestamps and no option: 1 s assumed.
    Assumed,
}

/// One log's summary.
#[derive(Clone, Debug, Serialize)]
pub struct FileSummary {
    /// The log's path as given.
    pub path: String,
    /// Whether the since-boot first report was dropped.
    pub dropped_first_report: bool,
    /// Where `interval_s` came from.
    pub interval_source: IntervalSource,
    /// `%util` threshold used for the busy phase.
    pub util_threshold: f64,
    /// Busy window in seconds, if any.
    pub window_s: Option<f64>,
    /// Devices in order of first appearance.
    pub devices: Vec<DeviceSummary>,
}

/// One device's totals over a log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceSummary {
    /// Device name as printed.
    pub name: String,
    /// Interval samples counted.
    pub samples: usize,
    /// Seconds per sample.
    pub interval_s: f64,
    /// `samples × interval_s`.
    pub duration_s: f64,
    /// MiB read (Σ rkB/s × interval / 1024).
    pub read_mb: f64,
    /// MiB written.
    pub written_mb: f64,
    /// Mean `%util` over all samples (`None` for logs without `%util`).
    pub mean_util_pct: Option<f64>,
    /// The busy phase.
    pub busy: BusySummary,
}

/// Samples with `%util` ≥ threshold (restricted to the window, if any).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BusySummary {
    /// Busy samples counted.
    pub samples: usize,
    /// `samples × interval`.
    pub seconds: f64,
    /// Seconds from the log's first sample to the first busy one.
    pub starts_at_s: Option<f64>,
    /// MiB read in busy samples.
    pub read_mb: f64,
    /// MiB written in busy samples.
    pub written_mb: f64,
    /// Mean of the per-sample `rareq-sz` over busy samples that had reads.
    pub mean_rareq_kb: Option<f64>,
    /// Mean of the per-sample `wareq-sz` over busy samples that had writes.
    pub mean_wareq_kb: Option<f64>,
    /// kB read / read requests over busy samples (request-weighted mean).
    pub weighted_rareq_kb: Option<f64>,
    /// kB written / write requests over busy samples.
    pub weighted_wareq_kb: Option<f64>,
}

/// Median positive step between report timestamps.
fn timestamp_interval(samples: &[&Sample]) -> Option<f64> {
    let mut times: Vec<(usize, f64)> = samples.iter().filter_map(|s| s.t_s.map(|t| (s.report, t))).collect();
    times.dedup_by_key(|(r, _)| *r);
    if times.len() < 2 {
        return None;
    }
    // Timestamps have 1 s resolution. For intervals of a second or more the
    // median step is exact and ignores gaps (a suspended board); below a
    // second only the mean spacing over the whole log is meaningful.
    let mean_step = (times[times.len() - 1].1 - times[0].1) / (times.len() - 1) as f64;
    if mean_step <= 0.0 {
        return None;
    }
    let mut steps: Vec<f64> = times.windows(2).map(|w| w[1].1 - w[0].1).filter(|d| *d > 0.0).collect();
    steps.sort_by(f64::total_cmp);
    if mean_step < 1.0 || steps.is_empty() {
        return Some(mean_step);
    }
    Some(steps[steps.len() / 2])
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// Summarises a parsed log; `path` is only copied into the result.
pub fn summarize(path: &str, log: &IostatLog, opts: &SummaryOptions) -> FileSummary {
    let drop_first = match opts.first_report {
        FirstReport::Keep => false,
        FirstReport::Drop => true,
        FirstReport::Auto => log.banner.is_some() && log.reports > 1,
    };
    let first_report = log.samples.first().map(|s| s.report).unwrap_or(0);
    let kept: Vec<&Sample> = log.samples.iter().filter(|s| !(drop_first && s.report == first_report)).collect();
    let (interval_s, interval_source) = match (opts.interval_s, timestamp_interval(&kept)) {
        (Some(i), _) => (i, IntervalSource::Option),
        (None, Some(i)) => (i, IntervalSource::Timestamps),
        (None, None) => (1.0, IntervalSource::Assumed),
    };
    let mut names: Vec<&str> = Vec::new();
    for s in &kept {
        if !names.contains(&s.device.as_str()) {
            names.push(&s.device);
        }
    }
    let devices = names
        .into_iter()
        .map(|name| {
            let rows: Vec<&Sample> = kept.iter().copied().filter(|s| s.device == name).collect();
            device_summary(name, &rows, interval_s, opts)
        })
        .collect();
    FileSummary {
        path: path.to_string(),
        dropped_first_report: drop_first,
        interval_source,
        util_threshold: opts.util_threshold,
        window_s: opts.window_s,
        devices,
    }
}

fn device_summary(name: &str, rows: &[&Sample], interval_s: f64, opts: &SummaryOptions) -> DeviceSummary {
    let mb = |kb_s: f64| kb_s * interval_s / 1024.0;
    let mut busy: Vec<(usize, &Sample)> = rows
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| s.util_pct.is_some_and(|u| u >= opts.util_threshold))
        .collect();
    if let Some(w) = opts.window_s {
        // First N busy seconds: whole samples while they fit (a partial sample
        // would need its throughput split, which iostat's averages cannot do).
        let n = ((w / interval_s) + 1e-9).floor().max(0.0) as usize;
        busy.truncate(n);
    }
    let with = |f: fn(&Sample) -> Option<f64>, g: fn(&Sample) -> Option<f64>| {
        mean(busy.iter().filter(|(_, s)| g(s).is_some_and(|n| n > 0.0)).filter_map(|(_, s)| f(s)))
    };
    let weighted = |kb: fn(&Sample) -> f64, ios: fn(&Sample) -> Option<f64>| {
        // fold from +0.0: an empty f64 sum() is -0.0, which prints as "-0.0".
        let n = busy.iter().filter_map(|(_, s)| ios(s)).fold(0.0, |a, b| a + b);
        let k = busy.iter().map(|(_, s)| kb(s)).fold(0.0, |a, b| a + b);
        (n > 0.0).then(|| k / n)
    };
    let has_util = rows.iter().any(|s| s.util_pct.is_some());
    DeviceSummary {
        name: name.to_string(),
        samples: rows.len(),
        interval_s,
        duration_s: rows.len() as f64 * interval_s,
        read_mb: rows.iter().map(|s| mb(s.rkb_s)).fold(0.0, |a, b| a + b),
        written_mb: rows.iter().map(|s| mb(s.wkb_s)).fold(0.0, |a, b| a + b),
        mean_util_pct: if has_util { mean(rows.iter().filter_map(|s| s.util_pct)) } else { None },
        busy: BusySummary {
            samples: busy.len(),
            seconds: busy.len() as f64 * interval_s,
            starts_at_s: busy.first().map(|(i, _)| *i as f64 * interval_s),
            read_mb: busy.iter().map(|(_, s)| mb(s.rkb_s)).fold(0.0, |a, b| a + b),
            written_mb: busy.iter().map(|(_, s)| mb(s.wkb_s)).fold(0.0, |a, b| a + b),
            mean_rareq_kb: with(|s| s.rareq_kb, |s| s.r_s.or(Some(s.rkb_s))),
            mean_wareq_kb: with(|s| s.wareq_kb, |s| s.w_s.or(Some(s.wkb_s))),
            weighted_rareq_kb: weighted(|s| s.rkb_s, |s| s.r_s),
            weighted_wareq_kb: weighted(|s| s.wkb_s, |s| s.w_s),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iostatlog::parse::parse_log;

    const LOG: &str = "Linux 5.19.0 (rpi) \t08/25/2022 \t_aarch64_\t(4 CPU)\n\n\
08/25/2022 09:00:00 PM\nDevice r/s w/s rkB/s wkB/s rareq-sz wareq-sz %util\n\
mmcblk0 9.00 9.00 900.00 900.00 100.00 100.00 50.00\n\n\
08/25/2022 09:00:02 PM\nDevice r/s w/s rkB/s wkB/s rareq-sz wareq-sz %util\n\
mmcblk0 0.00 10.00 0.00 1024.00 0.00 102.40 100.00\n\n\
08/25/2022 09:00:04 PM\nDevice r/s w/s rkB/s wkB/s rareq-sz wareq-sz %util\n\
mmcblk0 1.00 20.00 4.00 2048.00 4.00 102.40 96.00\n\n\
08/25/2022 09:00:06 PM\nDevice r/s w/s rkB/s wkB/s rareq-sz wareq-sz %util\n\
mmcblk0 0.00 0.00 0.00 0.00 0.00 0.00 10.00\n\n";

    #[test]
    fn busy_phase_and_first_report() {
        let log = parse_log(LOG, false).unwrap();
        let s = summarize("x", &log, &SummaryOptions::default());
        assert!(s.dropped_first_report);
        assert_eq!(s.interval_source, IntervalSource::Timestamps);
        let d = &s.devices[0];
        assert_eq!((d.samples, d.interval_s, d.duration_s), (3, 2.0, 6.0));
        assert!((d.written_mb - 6.0).abs() < 1e-9, "{}", d.written_mb);
        assert!((d.read_mb - 8.0 / 1024.0).abs() < 1e-9);
        assert_eq!(d.busy.samples, 2);
        assert_eq!(d.busy.seconds, 4.0);
        assert_eq!(d.busy.starts_at_s, Some(0.0));
        assert!((d.busy.written_mb - 6.0).abs() < 1e-9);
        // Only the busy sample with reads counts toward the read size mean.
        assert_eq!(d.busy.mean_rareq_kb, Some(4.0));
        assert!((d.busy.mean_wareq_kb.unwrap() - 102.4).abs() < 1e-9);

        let w = summarize("x", &log, &SummaryOptions { window_s: Some(2.0), ..Default::default() });
        assert_eq!(w.devices[0].busy.samples, 1);
        assert!((w.devices[0].busy.written_mb - 2.0).abs() < 1e-9);
        assert_eq!(w.devices[0].busy.mean_rareq_kb, None);
        let none = summarize("x", &log, &SummaryOptions { util_threshold: 101.0, ..Default::default() });
        assert!(none.devices[0].busy.read_mb.is_sign_positive(), "no -0.0 in output");

        let k = summarize("x", &log, &SummaryOptions { first_report: FirstReport::Keep, ..Default::default() });
        assert_eq!(k.devices[0].samples, 4);
    }

    #[test]
    fn no_timestamps_assume_one_second() {
        let text: String = LOG.lines().filter(|l| !l.contains(" PM")).map(|l| format!("{l}\n")).collect();
        let log = parse_log(&text, false).unwrap();
        let s = summarize("x", &log, &SummaryOptions::default());
        assert_eq!(s.interval_source, IntervalSource::Assumed);
        assert_eq!(s.devices[0].interval_s, 1.0);
        let o = summarize("x", &log, &SummaryOptions { interval_s: Some(5.0), ..Default::default() });
        assert_eq!(o.devices[0].duration_s, 15.0);
    }
}
