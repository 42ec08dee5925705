//! `fslab report`: one self-contained HTML file (or a Markdown summary) of a
//! stored experiment.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use super::DbArg;
use fslab::report::data::ReportData;
use fslab::report::{html, markdown};

/// Output format of `fslab report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML file with inline SVG charts.
    Html,
    /// A compact summary (verdicts, variants, environment) for mail and issue trackers.
    Markdown,
}

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
    #[arg(long, value_name = "PCT")]
    theta: Option<f64>,
    /// Output file; `-` for standard output. Default: report.html (html) or standard output (markdown).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    format: ReportFormat,
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    let data = ReportData::load(&store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0))?;
    let (text, default_out) = match args.format {
        ReportFormat::Html => (html::render_html(&data), Some(PathBuf::from("report.html"))),
        ReportFormat::Markdown => (markdown::render_markdown(&data), None),
    };
    match args.output.or(default_out) {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("experiment {id}: report written to {}", path.display());
        }
        _ => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
