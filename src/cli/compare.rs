//! `fslab compare`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{chosen, formats, DbArg};
use fslab::output;
use fslab::report::data::comparison_for;
use fslab::report::{CompareReport, Format};
use fslab::store::Store;

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    db: DbArg,
    /// Experiment id (default: the newest).
    #[arg(long)]
    experiment: Option<i64>,
    /// Compare against this variant (default: the experiment's baseline).
    #[arg(long)]
    baseline: Option<String>,
    /// Equivalence band in percent (default: the experiment's, usually 2).
    #[arg(long, value_name = "PCT", value_parser = theta_percent)]
    theta: Option<f64>,
    /// Output format: the mmtests-style table, or the rows as JSON.
    #[arg(long, value_parser = formats(&[Format::Text, Format::Json]), default_value = "text")]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    let format = chosen(args.format, args.json);
    print_comparison(&store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0), format)?;
    Ok(ExitCode::SUCCESS)
}

/// `--theta PCT`: a band of more than 0 and less than 100 percent (the
/// experiment file's `theta` is the same as a fraction).
pub(crate) fn theta_percent(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p),
        Ok(_) => Err(format!("`{text}` is not a band: give a percentage above 0 and below 100 (e.g. 2 for ±2%)")),
        Err(_) => Err(format!("`{text}` is not a number: give a percentage such as 2 for ±2%")),
    }
}

/// Print the comparison of experiment `id` in `format`.
pub fn print_comparison(
    store: &Store,
    id: i64,
    baseline: Option<&str>,
    theta: Option<f64>,
    format: Format,
) -> Result<()> {
    let experiment = store.experiment(id)?;
    let data = comparison_for(store, id, baseline, theta)?;
    let runs = store.runs(id)?;
    let environment: serde_json::Value = serde_json::from_str(&experiment.environment_json).unwrap_or_default();
    let hostile = environment["doctor"]["hostile"]
        .as_array()
        .map(|a| a.iter().map(|l| l.as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default();
    let places = fslab::report::places::Places::load(store, id, &environment)?;
    let report = CompareReport {
        experiment_id: id,
        experiment_name: &experiment.name,
        comparison: &data,
        runs: &runs,
        hostile,
        places,
    };
    output::print(&format.exporter().comparison(&report)?)?;
    Ok(())
}
