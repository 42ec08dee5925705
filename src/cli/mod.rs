//! Command-line arguments and dispatch. Each subcommand lives in its own file.

mod bisect;
mod compare;
mod inspect;
mod iostat;
mod maintenance;
mod plan;
mod report;
mod run;
mod simulate;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Reproduce, measure and explain Linux filesystem performance regressions.
#[derive(Parser, Debug)]
#[command(name = "fslab", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The stored experiment `id`, or the newest one in `db`.
pub fn experiment_id(store: &fslab::store::Store, db: &std::path::Path, id: Option<i64>) -> Result<i64> {
    use anyhow::Context;
    match id {
        Some(id) => Ok(id),
        None => store.latest_experiment()?.with_context(|| format!("{} holds no experiments", db.display())),
    }
}

/// Where results live.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArg {
    /// SQLite results file.
    #[arg(long, default_value = "fslab.db", env = "FSLAB_DB")]
    pub db: PathBuf,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ext4 mb_optimize_scan SD-card example end to end and print the verdict.
    Quickstart(run::QuickstartArgs),
    /// Run an experiment file.
    Run(run::RunArgs),
    /// Compare the variants of a stored experiment.
    Compare(compare::CompareArgs),
    /// Write a self-contained HTML (or Markdown) report of a stored experiment.
    Report(report::ReportArgs),
    /// Dump the runs of a stored experiment with their metrics.
    Export(maintenance::ExportArgs),
    /// List stored experiments.
    List(maintenance::ListArgs),
    /// Remove testbeds (mounts, loop devices, cgroups, images) left by a killed fslab.
    Cleanup(maintenance::CleanupArgs),
    /// Check this system (or another's kernel config) against known filesystem performance issues.
    Doctor(inspect::DoctorArgs),
    /// Kernel config tools.
    Kconfig(inspect::KconfigArgs),
    /// Parse, summarize, compare and record iostat logs (from any machine).
    Iostat(iostat::IostatArgs),
    /// Find which differing setting between a good and a bad variant carries a regression (ddmin).
    BisectOptions(bisect::BisectArgs),
    /// Runs per variant needed to detect a change, from the noise of earlier results (or a pilot).
    Plan(plan::PlanArgs),
    /// Simulate the verdict rules and print their error rates (the evidence behind the statistics docs).
    #[command(hide = true)]
    Simulate(simulate::SimulateArgs),
}

/// Run the chosen subcommand.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Quickstart(args) => run::quickstart(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::compare(args),
        Command::Report(args) => report::report(args),
        Command::Export(args) => maintenance::export(args),
        Command::List(args) => maintenance::list(args),
        Command::Cleanup(args) => maintenance::cleanup(args),
        Command::Doctor(args) => inspect::doctor_cmd(args),
        Command::Kconfig(args) => inspect::kconfig(args),
        Command::Iostat(args) => iostat::iostat(args),
        Command::BisectOptions(args) => bisect::bisect(args),
        Command::Plan(args) => plan::plan_cmd(args),
        Command::Simulate(args) => simulate::simulate(args),
    }
}
