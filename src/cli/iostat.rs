//! `fslab iostat`: iostat logs captured elsewhere (parse, summarize, compare)
//! and `record` to capture one in the same format.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use super::{offer, FormatArgs};
use fslab::iostatlog::{self, FirstReport, LogSummaries, ParseIssue, SummaryOptions};
use fslab::output;
use fslab::report::{render, Format};

/// `fslab iostat …`
#[derive(Args, Debug)]
pub struct IostatArgs {
    #[command(subcommand)]
    command: IostatCommand,
}

#[derive(Subcommand, Debug)]
enum IostatCommand {
    /// Parse sysstat iostat logs (any version, -k/-m, with or without -t) into rows.
    Parse(ParseArgs),
    /// Per device: samples, duration, MB read/written, and the busy (%util ≥ threshold) phase.
    Summarize(SummarizeArgs),
    /// Two logs' summaries side by side with changes.
    Compare(CompareLogsArgs),
    /// Record live diskstats of a block device as an `iostat -x -t -k` log.
    Record(RecordArgs),
    /// Time-series charts of one or more logs in one self-contained HTML file.
    Report(ReportLogsArgs),
}

#[derive(Args, Debug)]
struct ReportLogsArgs {
    /// iostat logs to chart (overlaid per device).
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    /// Output HTML file.
    #[arg(short, long, default_value = "iostat.html")]
    output: PathBuf,
    #[command(flatten)]
    read: ReadOpts,
}

fn report(args: ReportLogsArgs) -> Result<ExitCode> {
    let paths: Vec<&Path> = args.logs.iter().map(PathBuf::as_path).collect();
    let html = iostatlog::report::render_files(&paths, args.read.lenient, &mut warn_skipped)?;
    std::fs::write(&args.output, html).with_context(|| format!("writing {}", args.output.display()))?;
    output::diagnostic(&format!("wrote {}", args.output.display()));
    Ok(ExitCode::SUCCESS)
}

/// Options shared by everything that reads logs.
#[derive(Args, Debug, Clone)]
struct ReadOpts {
    /// Skip malformed lines with a warning instead of failing.
    #[arg(long)]
    lenient: bool,
}

/// Options shared by summarize and compare.
#[derive(Args, Debug, Clone)]
struct SummaryArgs {
    #[command(flatten)]
    read: ReadOpts,
    /// A sample is busy when its %util is at least this.
    #[arg(long, value_name = "PCT", default_value_t = 95.0)]
    util_threshold: f64,
    /// Count only the first SECONDS of the busy phase (compare logs of different length fairly).
    #[arg(long, value_name = "SECONDS")]
    window: Option<f64>,
    /// Seconds per report; default: from -t timestamps, else 1 s assumed.
    #[arg(long, value_name = "SECONDS")]
    interval: Option<f64>,
    /// iostat's first report is since boot (unless -y): auto drops it when the log starts with iostat's banner.
    #[arg(long, value_enum, default_value_t = FirstReport::Auto)]
    first_report: FirstReport,
}

impl SummaryArgs {
    fn options(&self) -> Result<SummaryOptions> {
        if let Some(w) = self.window {
            anyhow::ensure!(w.is_finite() && w > 0.0, "--window must be a positive number of seconds");
        }
        if let Some(i) = self.interval {
            anyhow::ensure!(i.is_finite() && i > 0.0, "--interval must be a positive number of seconds");
        }
        anyhow::ensure!(
            (0.0..=100.0).contains(&self.util_threshold),
            "--util-threshold {}: %util is a percentage, give 0 to 100",
            self.util_threshold
        );
        Ok(SummaryOptions {
            util_threshold: self.util_threshold,
            window_s: self.window,
            interval_s: self.interval,
            first_report: self.first_report,
        })
    }
}

// Rows are streamed as they are read (memory does not grow with the logs),
// so `parse` writes its two formats itself rather than build a Document.
#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Json, Format::Csv]).default_value("json")
    .help("json: every file with its samples; csv: one row per sample")))]
struct ParseArgs {
    /// iostat log files.
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    #[command(flatten)]
    format: FormatArgs,
    #[command(flatten)]
    read: ReadOpts,
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])
    .help(r#"Output format; json is `{"files":[{"path":…,"devices":[…]}]}`"#)))]
struct SummarizeArgs {
    /// iostat log files.
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    #[command(flatten)]
    format: FormatArgs,
    #[command(flatten)]
    summary: SummaryArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
struct CompareLogsArgs {
    /// Baseline log.
    a: PathBuf,
    /// Log compared against A.
    b: PathBuf,
    /// Only this device (default: same names; a single device per log is paired whatever its name).
    #[arg(long)]
    device: Option<String>,
    #[command(flatten)]
    format: FormatArgs,
    #[command(flatten)]
    summary: SummaryArgs,
}

#[derive(Args, Debug)]
struct RecordArgs {
    /// Block device (`sda`, `/dev/mmcblk0`, `/dev/mapper/vg-lv`).
    #[arg(long)]
    device: String,
    /// Time between reports, whole seconds (like iostat's).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Output file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Stop after N interval reports (default: until Ctrl-C).
    #[arg(long, conflicts_with = "duration")]
    count: Option<u64>,
    /// Stop after this long (e.g. `5min`).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

/// Run `fslab iostat`.
pub fn iostat(args: IostatArgs) -> Result<ExitCode> {
    match args.command {
        IostatCommand::Parse(a) => parse(a),
        IostatCommand::Summarize(a) => summarize(a),
        IostatCommand::Compare(a) => compare(a),
        IostatCommand::Record(a) => record(a),
        IostatCommand::Report(a) => report(a),
    }
}

/// A lenient-mode skipped line, with file and line, as it is read.
fn warn_skipped(path: &Path, w: &ParseIssue) {
    output::diagnostic(&format!("warning: {}:{}: skipped: {}", path.display(), w.line, w.message));
}

fn parse(args: ParseArgs) -> Result<ExitCode> {
    // Rows are written as they are read: memory does not grow with the logs.
    let paths: Vec<&Path> = args.logs.iter().map(PathBuf::as_path).collect();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = match args.format.chosen() {
        Format::Csv => iostatlog::rows::write_csv(&paths, args.read.lenient, &mut out, &mut warn_skipped),
        _ => iostatlog::rows::write_json(&paths, args.read.lenient, &mut out, &mut warn_skipped),
    };
    let written = written.and_then(|()| Ok(std::io::Write::flush(&mut out)?));
    match written {
        Err(e) if output::is_broken_pipe(&e) => output::stdout_gone(),
        r => r?,
    }
    Ok(ExitCode::SUCCESS)
}

fn summaries(paths: &[&PathBuf], args: &SummaryArgs) -> Result<Vec<iostatlog::FileSummary>> {
    let opts = args.options()?;
    paths.iter().map(|p| iostatlog::summarize_file(p, &opts, args.read.lenient, &mut |w| warn_skipped(p, w))).collect()
}

fn summarize(args: SummarizeArgs) -> Result<ExitCode> {
    let files = summaries(&args.logs.iter().collect::<Vec<_>>(), &args.summary)?;
    output::print(&render(args.format.chosen(), &LogSummaries { files })?)?;
    Ok(ExitCode::SUCCESS)
}

fn compare(args: CompareLogsArgs) -> Result<ExitCode> {
    let files = summaries(&[&args.a, &args.b], &args.summary)?;
    let c = iostatlog::compare(&files[0], &files[1], args.device.as_deref());
    if c.devices.is_empty() {
        bail!("no device appears in both logs ({})", c.unpaired.join("; "));
    }
    output::print(&render(args.format.chosen(), &c)?)?;
    Ok(ExitCode::SUCCESS)
}

fn record(args: RecordArgs) -> Result<ExitCode> {
    let count = match (args.count, args.duration) {
        (Some(n), _) => Some(n),
        // Whole intervals that fit in the duration, at least one.
        (None, Some(d)) => Some(((d.as_secs_f64() / args.interval.as_secs_f64()).floor() as u64).max(1)),
        (None, None) => None,
    };
    // Ctrl-C, SIGTERM and SIGHUP end the recording, not fslab.
    fslab::sys::signals::install()?;
    let stop = AtomicBool::new(false);
    let file = std::fs::File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let opts = iostatlog::RecordOptions { device: args.device.clone(), interval: args.interval, count };
    let n = iostatlog::record(&opts, &mut out, &stop)?;
    out.flush()?;
    output::diagnostic(&format!("recorded {n} interval reports of {} to {}", args.device, args.output.display()));
    Ok(ExitCode::SUCCESS)
}
