//! Per-device totals and the busy phase of an iostat log, accumulated one
//! sample at a time ([`Summarizer`]) so a log of any length is summarised
//! in constant memory.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::parse::{IostatLog, LogInfo, Sample};

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

/// More distinct device names than this in one log is not an iostat log
/// of a real machine; refusing keeps the summary's memory bounded.
pub const MAX_DEVICES: usize = 4096;

/// Report timestamps of the kept samples: what [`timestamp_interval`]
/// needs, without keeping them.
#[derive(Clone, Debug, Default)]
struct Times {
    /// (report, t) of the last report seen with a timestamp.
    last: Option<(usize, f64)>,
    first_t: Option<f64>,
    count: usize,
    /// Positive steps between consecutive reports, by value. Timestamps
    /// have 1 s resolution and a backwards step is a new day, so there are
    /// at most 86,401 distinct values.
    steps: BTreeMap<u64, usize>,
    steps_total: usize,
}

impl Times {
    fn push(&mut self, s: &Sample) {
        let Some(t) = s.t_s else { return };
        if self.last.is_some_and(|(r, _)| r == s.report) {
            return;
        }
        if let Some((_, prev)) = self.last {
            let step = t - prev;
            if step > 0.0 {
                // Positive finite floats order like their bit patterns.
                *self.steps.entry(step.to_bits()).or_default() += 1;
                self.steps_total += 1;
            }
        }
        self.first_t.get_or_insert(t);
        self.last = Some((s.report, t));
        self.count += 1;
    }

    /// Median positive step between report timestamps.
    fn interval(&self) -> Option<f64> {
        if self.count < 2 {
            return None;
        }
        // Timestamps have 1 s resolution. For intervals of a second or more the
        // median step is exact and ignores gaps (a suspended board); below a
        // second only the mean spacing over the whole log is meaningful.
        let mean_step = (self.last?.1 - self.first_t?) / (self.count - 1) as f64;
        if mean_step <= 0.0 {
            return None;
        }
        if mean_step < 1.0 || self.steps_total == 0 {
            return Some(mean_step);
        }
        let mut k = self.steps_total / 2;
        for (bits, n) in &self.steps {
            if k < *n {
                return Some(f64::from_bits(*bits));
            }
            k -= n;
        }
        None
    }
}

fn mean(sum: f64, n: usize) -> Option<f64> {
    (n > 0).then(|| sum / n as f64)
}

/// Running sums of one device.
#[derive(Clone, Debug)]
struct DeviceAcc {
    name: String,
    rows: usize,
    // Sums of per-sample kB/s; × interval / 1024 at the end gives MiB.
    rkb: f64,
    wkb: f64,
    util_sum: f64,
    util_n: usize,
    busy: BusyAcc,
}

#[derive(Clone, Debug, Default)]
struct BusyAcc {
    samples: usize,
    first_index: Option<usize>,
    rkb: f64,
    wkb: f64,
    rareq_sum: f64,
    rareq_n: usize,
    wareq_sum: f64,
    wareq_n: usize,
    r_ios: f64,
    w_ios: f64,
}

impl DeviceAcc {
    fn new(name: &str) -> Self {
        DeviceAcc {
            name: name.to_string(),
            rows: 0,
            rkb: 0.0,
            wkb: 0.0,
            util_sum: 0.0,
            util_n: 0,
            busy: BusyAcc::default(),
        }
    }

    fn push(&mut self, s: &Sample, threshold: f64, busy_limit: Option<usize>) {
        let index = self.rows;
        self.rows += 1;
        self.rkb += s.rkb_s;
        self.wkb += s.wkb_s;
        if let Some(u) = s.util_pct {
            self.util_sum += u;
            self.util_n += 1;
        }
        let busy = s.util_pct.is_some_and(|u| u >= threshold);
        if !busy || busy_limit.is_some_and(|n| self.busy.samples >= n) {
            return;
        }
        let b = &mut self.busy;
        b.samples += 1;
        b.first_index.get_or_insert(index);
        b.rkb += s.rkb_s;
        b.wkb += s.wkb_s;
        // Mean request sizes over busy samples that moved data that way.
        if s.r_s.unwrap_or(s.rkb_s) > 0.0 {
            if let Some(k) = s.rareq_kb {
                b.rareq_sum += k;
                b.rareq_n += 1;
            }
        }
        if s.w_s.unwrap_or(s.wkb_s) > 0.0 {
            if let Some(k) = s.wareq_kb {
                b.wareq_sum += k;
                b.wareq_n += 1;
            }
        }
        b.r_ios += s.r_s.unwrap_or(0.0);
        b.w_ios += s.w_s.unwrap_or(0.0);
    }

    fn summary(&self, interval_s: f64) -> DeviceSummary {
        let mb = |kb_s: f64| kb_s * interval_s / 1024.0;
        let b = &self.busy;
        DeviceSummary {
            name: self.name.clone(),
            samples: self.rows,
            interval_s,
            duration_s: self.rows as f64 * interval_s,
            read_mb: mb(self.rkb),
            written_mb: mb(self.wkb),
            mean_util_pct: mean(self.util_sum, self.util_n),
            busy: BusySummary {
                samples: b.samples,
                seconds: b.samples as f64 * interval_s,
                starts_at_s: b.first_index.map(|i| i as f64 * interval_s),
                read_mb: mb(b.rkb),
                written_mb: mb(b.wkb),
                mean_rareq_kb: mean(b.rareq_sum, b.rareq_n),
                mean_wareq_kb: mean(b.wareq_sum, b.wareq_n),
                weighted_rareq_kb: (b.r_ios > 0.0).then(|| b.rkb / b.r_ios),
                weighted_wareq_kb: (b.w_ios > 0.0).then(|| b.wkb / b.w_ios),
            },
        }
    }
}

/// Sums over a run of kept samples.
#[derive(Clone, Debug, Default)]
struct Acc {
    devices: Vec<DeviceAcc>,
    index: HashMap<String, usize>,
    times: Times,
}

impl Acc {
    fn push(&mut self, s: &Sample, threshold: f64, busy_limit: Option<usize>, max: usize) -> Result<(), String> {
        // Logs name a handful of devices: a scan beats hashing the name.
        let found = if self.devices.len() <= 16 {
            self.devices.iter().position(|d| d.name == s.device)
        } else {
            self.index.get(s.device.as_str()).copied()
        };
        let i = match found {
            Some(i) => i,
            None => {
                if self.devices.len() >= max {
                    return Err(format!("more than {max} device names: not an iostat log of one machine?"));
                }
                self.devices.push(DeviceAcc::new(&s.device));
                self.index.insert(s.device.clone(), self.devices.len() - 1);
                self.devices.len() - 1
            }
        };
        self.devices[i].push(s, threshold, busy_limit);
        self.times.push(s);
        Ok(())
    }
}

/// Whether the since-boot first report is dropped, as far as known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstState {
    /// Still in the first report (its samples are held apart).
    Open,
    Kept,
    Dropped,
}

/// Decides, while streaming, whether iostat's first report is kept:
/// samples of the first report are held apart (as sums, never as rows)
/// until a second report shows up or the log ends.
#[derive(Clone, Debug)]
pub(crate) struct FirstGate {
    mode: FirstReport,
    banner: bool,
    first_report: Option<usize>,
    pub(crate) state: FirstState,
}

/// Where a sample goes, from [`FirstGate::route`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Into the held-apart first report.
    First,
    /// Into the summary proper.
    Main,
    /// This sample starts the second report: first keep (`true`) or drop
    /// the held-apart part, then it goes into the summary proper.
    Decided(bool),
}

impl FirstGate {
    pub(crate) fn new(mode: FirstReport) -> Self {
        FirstGate { mode, banner: false, first_report: None, state: FirstState::Open }
    }

    /// Whether the log has iostat's banner (known before its first report).
    pub(crate) fn set_banner(&mut self, present: bool) {
        self.banner = present;
    }

    fn decide(&mut self, more_reports: bool) -> bool {
        let keep = match self.mode {
            FirstReport::Keep => true,
            FirstReport::Drop => false,
            FirstReport::Auto => !(self.banner && more_reports),
        };
        self.state = if keep { FirstState::Kept } else { FirstState::Dropped };
        keep
    }

    pub(crate) fn route(&mut self, report: usize) -> Route {
        let first = *self.first_report.get_or_insert(report);
        match self.state {
            // A second report exists, so `Auto` now knows.
            FirstState::Open if report != first => Route::Decided(self.decide(true)),
            FirstState::Open => Route::First,
            _ => Route::Main,
        }
    }

    /// At the end of the log, with its banner and report count: the
    /// decision, if it was still open.
    pub(crate) fn settle(&mut self, info: &LogInfo) -> Option<bool> {
        self.banner = info.banner.is_some();
        (self.state == FirstState::Open).then(|| self.decide(info.reports > 1))
    }

    pub(crate) fn dropped(&self) -> bool {
        self.state == FirstState::Dropped
    }
}

/// Summarises a log one sample at a time, in constant memory.
///
/// The first report's samples are summed apart until the log shows
/// whether it is iostat's since-boot report (see [`FirstReport`]); then
/// those sums become the start of the summary or are dropped.
///
/// With a busy `window_s` the number of samples it covers depends on the
/// interval, which comes from the timestamps of the whole log unless given.
/// Give [`Summarizer::new`] that interval (`summarize_file` and
/// [`summarize`] make a first pass for it); without it the window is not
/// applied.
pub struct Summarizer {
    opts: SummaryOptions,
    max_devices: usize,
    busy_limit: Option<usize>,
    gate: FirstGate,
    first: Acc,
    main: Acc,
}

impl Summarizer {
    /// `interval_s`: the interval the busy window is counted in, when
    /// `opts.interval_s` is not given (see the type's documentation).
    pub fn new(opts: &SummaryOptions, interval_s: Option<f64>) -> Summarizer {
        let window_interval = opts.interval_s.or(interval_s);
        let busy_limit = match (opts.window_s, window_interval) {
            // First N busy seconds: whole samples while they fit (a partial sample
            // would need its throughput split, which iostat's averages cannot do).
            (Some(w), Some(i)) => Some(((w / i) + 1e-9).floor().max(0.0) as usize),
            _ => None,
        };
        Summarizer {
            opts: opts.clone(),
            max_devices: MAX_DEVICES,
            busy_limit,
            gate: FirstGate::new(opts.first_report),
            first: Acc::default(),
            main: Acc::default(),
        }
    }

    /// Whether the log has iostat's banner (known before its first report).
    pub fn set_banner(&mut self, present: bool) {
        self.gate.set_banner(present);
    }

    /// Adds the next sample. An error only for logs with absurdly many
    /// device names ([`MAX_DEVICES`]).
    pub fn push(&mut self, s: &Sample) -> Result<(), String> {
        let (t, limit, max) = (self.opts.util_threshold, self.busy_limit, self.max_devices);
        match self.gate.route(s.report) {
            Route::First => self.first.push(s, t, limit, max),
            Route::Decided(keep) => {
                self.close_first(keep);
                self.main.push(s, t, limit, max)
            }
            Route::Main => self.main.push(s, t, limit, max),
        }
    }

    fn close_first(&mut self, keep: bool) {
        let first = std::mem::take(&mut self.first);
        if keep {
            // Nothing was added to `main` yet: the first report's sums are its start.
            self.main = first;
        }
    }

    /// The interval the summary will use, with where it comes from.
    pub fn interval(&self) -> (f64, IntervalSource) {
        let times = if self.gate.state == FirstState::Open { &self.first.times } else { &self.main.times };
        match (self.opts.interval_s, times.interval()) {
            (Some(i), _) => (i, IntervalSource::Option),
            (None, Some(i)) => (i, IntervalSource::Timestamps),
            (None, None) => (1.0, IntervalSource::Assumed),
        }
    }

    /// At the end of the log: decide the first report with what the whole
    /// log says (its report count decides `Auto` when every row is in one).
    fn settle(&mut self, info: &LogInfo) {
        if let Some(keep) = self.gate.settle(info) {
            self.close_first(keep);
        }
    }

    /// The interval a finished first pass found, and its source.
    pub fn settled_interval(mut self, info: &LogInfo) -> (f64, IntervalSource) {
        self.settle(info);
        self.interval()
    }

    /// The summary; `info` is the whole log's.
    pub fn finish(mut self, path: &str, info: &LogInfo) -> FileSummary {
        self.settle(info);
        let (interval_s, interval_source) = self.interval();
        FileSummary {
            path: path.to_string(),
            dropped_first_report: self.gate.dropped(),
            interval_source,
            util_threshold: self.opts.util_threshold,
            window_s: self.opts.window_s,
            devices: self.main.devices.iter().map(|d| d.summary(interval_s)).collect(),
        }
    }
}

/// Summarises a parsed log; `path` is only copied into the result.
pub fn summarize(path: &str, log: &IostatLog, opts: &SummaryOptions) -> FileSummary {
    let info = log.info();
    let run = |interval: Option<f64>| {
        let mut s = Summarizer::new(opts, interval);
        // Held in memory already: no device cap needed.
        s.max_devices = usize::MAX;
        s.set_banner(info.banner.is_some());
        for sample in &log.samples {
            let _ = s.push(sample);
        }
        s
    };
    let first = run(None);
    if !needs_interval_pass(opts) {
        return first.finish(path, &info);
    }
    let (interval, source) = first.settled_interval(&info);
    let mut summary = run(Some(interval)).finish(path, &info);
    summary.interval_source = source;
    summary
}

/// A busy window counted in an interval that only the whole log's
/// timestamps give: summarising takes a first pass for the interval.
pub fn needs_interval_pass(opts: &SummaryOptions) -> bool {
    opts.window_s.is_some() && opts.interval_s.is_none()
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
