//! `fslab report`: one self-contained HTML file (or a Markdown summary) of a
//! stored experiment.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{formats, DbArg};
use fslab::output;
use fslab::report::data::ReportData;
use fslab::report::Format;

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    db: DbArg,
    /// Experiment id (default: the newest).
    #[arg(long)]
    experiment: Option<i64>,
    /// Compare against this variant (default: the experiment's baseline).
    #[arg(long)]
    baseline: Option<String>,
    /// Equivalence band in percent (default: the experiment's, usually 2).
    #[arg(long, value_name = "PCT", value_parser = super::values::theta_percent)]
    theta: Option<f64>,
    /// Output file; `-` for standard output. Default: report.html (html) or standard output (markdown).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// html: one self-contained page with inline SVG charts; markdown: a compact summary for mail and issue trackers.
    #[arg(long, value_parser = formats(&[Format::Html, Format::Markdown]), default_value = "html")]
    format: Format,
    /// Instead of one experiment: the history of WORKLOAD/METRIC as a line chart with change points (HTML).
    #[arg(long, value_name = "WORKLOAD/METRIC")]
    history: Option<String>,
    #[command(flatten)]
    series: super::history::SeriesArgs,
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    if let Some(metric) = &args.history {
        let h = args.series.history(&store, metric, args.experiment)?;
        return write_out(
            fslab::history::render::html(&h),
            args.output.or(Some(PathBuf::from("history.html"))),
            &format!("history of {metric}"),
        );
    }
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    let data = ReportData::load(&store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0))?;
    let text = args.format.exporter().report(&data)?;
    let output =
        if args.format == Format::Html { args.output.or(Some(PathBuf::from("report.html"))) } else { args.output };
    write_out(text, output, &format!("experiment {id}"))
}

/// Writes `text` to `output` (`-` or none: standard output).
fn write_out(text: String, output: Option<PathBuf>, what: &str) -> Result<ExitCode> {
    match output {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            output::diagnostic(&format!("{what}: report written to {}", path.display()));
        }
        _ => output::print(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
