//! `fslab simulate` (hidden): the Monte-Carlo evidence behind the verdict
//! rules' error rates (see `fslab::stats::simulate`).

use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use fslab::stats::simulate::{render, SimConfig, EXPLORE, TABLES};

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
        for (name, title, _) in TABLES.iter().chain(std::iter::once(&EXPLORE)) {
            println!("{name:20} {title}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.experiments == 0 {
        return Err(anyhow!("--experiments must be at least 1"));
    }
    let sim = SimConfig { experiments: args.experiments, threads: args.threads.max(1) };
    print!("{}", render(&args.tables, &sim).map_err(|e| anyhow!(e))?);
    Ok(ExitCode::SUCCESS)
}
