//! `fslab simulate` (hidden): the Monte-Carlo evidence behind the verdict
//! rules' error rates (see `fslab::stats::verdict_sim`).

use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use super::{offer, FormatArgs};
use fslab::exit;
use fslab::output;
use fslab::report::documents::simulation::{SimulationTables, VerdictSimulation};
use fslab::report::{render, Format};
use fslab::stats::verdict_sim::SimConfig;

/// Text is Markdown.
#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json, Format::Markdown])))]
pub struct SimulateArgs {
    /// Tables to compute (default: all but `explore`); `--list` names them.
    tables: Vec<String>,
    /// Simulated experiments per table cell.
    #[arg(long, default_value_t = 20_000)]
    experiments: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// List the tables and exit.
    #[arg(long)]
    list: bool,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn simulate(args: SimulateArgs) -> Result<ExitCode> {
    let format = args.format.chosen();
    if args.list {
        output::print(&render(format, &SimulationTables::all())?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.experiments == 0 {
        return Err(exit::usage(anyhow!("--experiments must be at least 1")));
    }
    let sim = SimConfig { experiments: args.experiments, threads: args.threads.max(1) };
    let doc = VerdictSimulation::run(&args.tables, &sim).map_err(|e| exit::usage(anyhow!(e)))?;
    output::print(&render(format, &doc)?)?;
    Ok(ExitCode::SUCCESS)
}
