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
pub mod summarize;

use std::path::Path;

use anyhow::{Context, Result};

pub use compare::{compare, render_comparison, CompareRow, Comparison, DeviceComparison};
pub use parse::{parse_log, IostatLog, Layout, ParseIssue, Sample, Unit};
pub use record::{record, write_report, RecordOptions, RECORD_COLUMNS};
pub use summarize::{summarize, BusySummary, DeviceSummary, FileSummary, FirstReport, IntervalSource, SummaryOptions};

/// Reads and parses a log file. Errors name the file and line; in lenient
/// mode skipped lines are returned in [`IostatLog::warnings`].
pub fn parse_file(path: &Path, lenient: bool) -> Result<IostatLog> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    // Logs pasted through mail may carry stray bytes; judge them line by line.
    let text = String::from_utf8_lossy(&bytes);
    parse_log(&text, lenient).map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.message))
}

/// Plain-text rendering of summaries, one block per file and device.
pub fn render_summaries(files: &[FileSummary]) -> String {
    let opt = |v: Option<f64>, unit: &str| v.map(|x| format!("{x:.1} {unit}")).unwrap_or_else(|| "-".into());
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
                "  {}: {} samples × {:.3} s{} = {:.0} s; read {:.1} MB, written {:.1} MB\n",
                d.name,
                d.samples,
                d.interval_s,
                if f.interval_source == IntervalSource::Assumed { " (assumed)" } else { "" },
                d.duration_s,
                d.read_mb,
                d.written_mb
            ));
            out.push_str(&format!(
                "    busy (%util ≥ {}{}): {:.0} s; read {:.1} MB, written {:.1} MB; mean rareq-sz {}, wareq-sz {}\n",
                f.util_threshold,
                f.window_s.map(|w| format!(", first {w} s")).unwrap_or_default(),
                b.seconds,
                b.read_mb,
                b.written_mb,
                opt(b.mean_rareq_kb, "kB"),
                opt(b.mean_wareq_kb, "kB"),
            ));
        }
    }
    out
}
