//! `fslab compare`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::DbArg;
use fslab::report::data::comparison_for;
use fslab::report::{table::Terminal, CompareFormat, CompareReport, JsonRows};
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
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let store = Store::open(&args.db.db).with_context(|| format!("opening {}", args.db.db.display()))?;
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    print_comparison(&store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0), args.json)?;
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

/// Print the comparison table (or JSON rows) of experiment `id`.
pub fn print_comparison(store: &Store, id: i64, baseline: Option<&str>, theta: Option<f64>, json: bool) -> Result<()> {
    let experiment = store.experiment(id)?;
    let data = comparison_for(store, id, baseline, theta)?;
    let report = CompareReport {
        experiment_id: id,
        experiment_name: &experiment.name,
        baseline: &data.baseline,
        variants: data.variants.clone(),
        theta: data.theta,
        alpha: data.alpha,
        rows: &data.rows,
    };
    let text = if json { JsonRows.render(&report)? } else { Terminal.render(&report)? };
    print!("{text}");
    if !json {
        // Doctor findings recorded when the experiment started.
        let environment: serde_json::Value = serde_json::from_str(&experiment.environment_json).unwrap_or_default();
        let hostile = environment["doctor"]["hostile"].as_array().cloned().unwrap_or_default();
        if !hostile.is_empty() {
            println!("\nbenchmark-hostile findings when this experiment ran (`fslab doctor` for details):");
            for line in hostile {
                println!("  {}", line.as_str().unwrap_or_default());
            }
        }
    }
    Ok(())
}
