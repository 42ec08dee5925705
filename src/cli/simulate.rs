//! `fslab simulate` (hidden): the Monte-Carlo evidence behind the verdict
//! rules' error rates (see `fslab::stats::verdict_sim`).

use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use fslab::exit;
use fslab::output;
use fslab::stats::verdict_sim::{render, SimConfig, EXPLORE, TABLES};

#[derive(Args, Debug)]
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
}

pub fn simulate(args: SimulateArgs) -> Result<ExitCode> {
    if args.list {
        let list: String = TABLES
            .iter()
            .chain(std::iter::once(&EXPLORE))
            .map(|(name, title, _)| format!("{name:20} {title}\n"))
            .collect();
        output::print(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.experiments == 0 {
        return Err(exit::usage(anyhow!("--experiments must be at least 1")));
    }
    let sim = SimConfig { experiments: args.experiments, threads: args.threads.max(1) };
    output::print(&render(&args.tables, &sim).map_err(|e| exit::usage(anyhow!(e)))?)?;
    Ok(ExitCode::SUCCESS)
}
