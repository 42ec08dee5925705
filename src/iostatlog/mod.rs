//! iostat logs captured elsewhere: parse sysstat `iostat` text of any era,
//! summarise the busy phase, compare two logs, and record a live device in
//! the same format.
//!
//! The analyses people do by eye on mailing lists ("155 seconds at 100 %
//! util, ~63 MB written, average request 60 KB") become [`summarize`] and
//! [`compare`].

pub mod compare;
pub mod parse;
pub mod record;
pub mod report;
pub mod rows;
pub mod series;
pub mod summarize;

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{Context, Result};

pub use compare::{compare, render_comparison, CompareRow, DeviceComparison, LogComparison};
pub use parse::{parse_log, IostatLog, Item, Layout, LogInfo, LogReader, ParseIssue, Parser, Sample, Unit};
pub use record::{record, write_report, RecordOptions, RECORD_COLUMNS};
pub use series::{BoundedSeries, Bucket, ChartPoint, Envelope, LogSeries, SeriesBuilder, IO_CHANNELS, SERIES_BUCKETS};
pub use summarize::{
    summarize, BusySummary, DeviceSummary, FileSummary, FirstReport, IntervalSource, Summarizer, SummaryOptions,
};

/// Reads a log file in 1 MiB pieces.
const READ_BUFFER: usize = 1 << 20;

/// A streaming reader of the log at `path` (see [`LogReader`]).
pub fn open(path: &Path, lenient: bool) -> Result<LogReader<BufReader<File>>> {
    let f = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(LogReader::new(BufReader::with_capacity(READ_BUFFER, f), lenient))
}

/// `path:line: message`, as every iostat-log error reads.
pub fn located(path: &Path, e: &ParseIssue) -> anyhow::Error {
    anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.message)
}

/// Every sample of the log at `path`, in order, handed to `each` with what
/// the log said about itself so far (the banner comes before any row);
/// lenient-mode skipped lines go to `skipped`. Returns the whole log's
/// [`LogInfo`]. Memory stays constant whatever the log's length.
pub fn for_each_sample(
    path: &Path,
    lenient: bool,
    skipped: &mut dyn FnMut(&ParseIssue),
    each: &mut dyn FnMut(Sample, &LogInfo) -> Result<()>,
) -> Result<LogInfo> {
    let mut reader = open(path, lenient)?;
    while let Some(item) = reader.next() {
        match item.map_err(|e| located(path, &e))? {
            Item::Sample(s) => each(s, reader.info())?,
            Item::Skipped(w) => skipped(&w),
        }
    }
    Ok(reader.info().clone())
}

/// Reads and parses a log file into memory. Errors name the file and line;
/// in lenient mode skipped lines are returned in [`IostatLog::warnings`].
/// Long logs are better streamed ([`for_each_sample`], [`summarize_file`]).
pub fn parse_file(path: &Path, lenient: bool) -> Result<IostatLog> {
    let mut log = IostatLog::default();
    let mut warnings = Vec::new();
    let info = for_each_sample(path, lenient, &mut |w| warnings.push(w.clone()), &mut |s, _| {
        log.samples.push(s);
        Ok(())
    })?;
    (log.banner, log.layout, log.unit, log.reports, log.warnings) =
        (info.banner, info.layout, info.unit, info.reports, warnings);
    Ok(log)
}

/// Summarises the log at `path` streaming, in constant memory: one pass,
/// or two when the busy window needs the interval from the timestamps
/// first. Skipped lines (lenient) are reported once, from the first pass.
pub fn summarize_file(
    path: &Path,
    opts: &SummaryOptions,
    lenient: bool,
    skipped: &mut dyn FnMut(&ParseIssue),
) -> Result<FileSummary> {
    let label = path.display().to_string();
    let pass = |interval: Option<f64>, skipped: &mut dyn FnMut(&ParseIssue)| -> Result<(Summarizer, LogInfo)> {
        let mut s = Summarizer::new(opts, interval);
        let info = for_each_sample(path, lenient, skipped, &mut |sample, info| {
            s.set_banner(info.banner.is_some());
            s.push(&sample).map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), sample.line))
        })?;
        Ok((s, info))
    };
    let (first, info) = pass(None, skipped)?;
    if !summarize::needs_interval_pass(opts) {
        return Ok(first.finish(&label, &info));
    }
    let (interval, source) = first.settled_interval(&info);
    let (second, info) = pass(Some(interval), &mut |_| {})?;
    let mut summary = second.finish(&label, &info);
    summary.interval_source = source;
    Ok(summary)
}

/// `fslab iostat summarize`: the summary of each log. JSON:
/// `{"files":[{"path":…,"devices":[…]}]}`.
#[derive(Debug, serde::Serialize)]
pub struct LogSummaries {
    pub files: Vec<FileSummary>,
}

impl crate::report::Document for LogSummaries {
    fn what(&self) -> &'static str {
        "iostat summaries"
    }

    fn text(&self) -> String {
        render_summaries(&self.files)
    }
}

/// `fslab iostat compare`.
impl crate::report::Document for LogComparison {
    fn what(&self) -> &'static str {
        "an iostat comparison"
    }

    fn text(&self) -> String {
        render_comparison(self)
    }
}

/// Plain-text rendering of summaries, one block per file and device.
pub fn render_summaries(files: &[FileSummary]) -> String {
    use crate::human::{with_unit, NONE};
    let opt = |v: Option<f64>, unit: &str| v.map_or_else(|| NONE.to_string(), |x| with_unit(x, unit));
    let mut out = String::new();
    for f in files {
        out.push_str(&format!(
            "{}{}\n",
            f.path,
            if f.dropped_first_report { "  (first, since-boot report dropped)" } else { "" }
        ));
        for d in &f.devices {
            let b = &d.busy;
            out.push_str(&format!(
                "  {}: {} samples × {}{} = {}; read {}, written {}\n",
                d.name,
                d.samples,
                with_unit(d.interval_s, "s"),
                if f.interval_source == IntervalSource::Assumed { " (assumed)" } else { "" },
                with_unit(d.duration_s, "s"),
                with_unit(d.read_mb, "MB"),
                with_unit(d.written_mb, "MB")
            ));
            out.push_str(&format!(
                "    busy (%util ≥ {}{}): {}; read {}, written {}; mean rareq-sz {}, wareq-sz {}\n",
                f.util_threshold,
                f.window_s.map(|w| format!(", first {w} s")).unwrap_or_default(),
                with_unit(b.seconds, "s"),
                with_unit(b.read_mb, "MB"),
                with_unit(b.written_mb, "MB"),
                opt(b.mean_rareq_kb, "kB"),
                opt(b.mean_wareq_kb, "kB"),
            ));
        }
    }
    out
}
