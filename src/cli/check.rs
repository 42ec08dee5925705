//! `fslab check`: a CI gate. Exit 1 (with `--fail-on-regression`) when a
//! decisive metric of the newest experiment regressed significantly
//! against its history or a named experiment; 0 otherwise; 2 on bad usage.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{offer, DbArg, FormatArgs};
use fslab::exit;
use fslab::history::check::{check, Against};
use fslab::history::ExperimentSnapshot;
use fslab::output;
use fslab::report::{render, Format};
use fslab::stats::gate::GateConfig;

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format: a table, or the whole check as JSON for a CI system.")))]
#[command(after_help = "Exit status:\n  0  no decisive metric regressed (or no --fail-on-regression)\n  \
                        1  with --fail-on-regression: a decisive metric regressed significantly\n  2  bad usage")]
pub struct CheckArgs {
    #[command(flatten)]
    db: DbArg,
    /// The experiment checked (default: the newest).
    #[arg(long)]
    experiment: Option<i64>,
    /// `history` (a prediction interval from the last ≤ 64 comparable experiments) or an experiment id.
    #[arg(long, value_name = "history|ID", default_value = "history")]
    against: Against,
    /// Exit 1 when a decisive metric regressed (without it the check only reports).
    #[arg(long)]
    fail_on_regression: bool,
    /// Use experiments whose machine, workload or variant config differs.
    #[arg(long)]
    allow_mixed: bool,
    /// Significance level after Benjamini–Hochberg across the decisive metrics.
    #[arg(long, default_value_t = 0.01, value_parser = super::values::alpha)]
    alpha: f64,
    /// Changes within ±PCT percent never fail the check.
    #[arg(long, value_name = "PCT", default_value_t = 2.0, value_parser = super::values::theta_percent)]
    theta: f64,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn check_cmd(args: CheckArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let all = ExperimentSnapshot::load_all(&store)?;
    let newest = match args.experiment {
        Some(id) => id,
        None => all
            .last()
            .map(|s| s.experiment.id)
            .ok_or_else(|| exit::usage(anyhow::anyhow!("{} holds no finished experiments", args.db.db)))?,
    };
    let cfg = GateConfig { alpha: args.alpha, theta: args.theta / 100.0, ..GateConfig::default() };
    let result = check(&all, newest, args.against, args.allow_mixed, &cfg).map_err(exit::usage)?;
    output::print(&render(args.format.chosen(), &result)?)?;
    Ok(ExitCode::from(if args.fail_on_regression { result.exit_status } else { 0 }))
}
