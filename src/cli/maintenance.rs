//! `fslab export`, `fslab list`, `fslab cleanup`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::DbArg;
use fslab::experiment::DEFAULT_WORKDIR;
use fslab::report::exporter;
use fslab::store::{ExperimentMeta, ExperimentSummary};
use fslab::testbed::cleanup::cleanup as cleanup_stale;
use serde::Serialize;

#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    db: DbArg,
    /// Experiment id (default: the newest).
    #[arg(long)]
    experiment: Option<i64>,
    /// json or csv.
    #[arg(long, default_value = "json")]
    format: String,
    /// Write here instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    let exporter = exporter(&args.format)?;
    let store = args.db.open_existing()?;
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    let text = exporter.export(&store, id)?;
    match args.output {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    db: DbArg,
    /// Print the list as JSON (with each experiment's uuid, campaign and tags).
    #[arg(long)]
    json: bool,
}

/// One experiment of `fslab list --json`.
#[derive(Serialize)]
struct ListEntry {
    #[serde(flatten)]
    summary: ExperimentSummary,
    #[serde(flatten)]
    meta: ExperimentMeta,
}

pub fn list(args: ListArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    if args.json {
        let entries = store
            .list_experiments()?
            .into_iter()
            .map(|summary| Ok(ListEntry { meta: store.experiment_meta(summary.id)?, summary }))
            .collect::<Result<Vec<_>>>()?;
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(ExitCode::SUCCESS);
    }
    for e in store.list_experiments()? {
        println!(
            "{:>4}  {}  {:<11}  {:>3} ok {:>3} failed  {}",
            e.id, e.created_at, e.status, e.runs_ok, e.runs_failed, e.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Work directories to scan for testbed directories (default /var/tmp/fslab).
    #[arg(long)]
    workdir: Vec<PathBuf>,
    /// Also remove testbeds of fslab processes that are still running.
    #[arg(long)]
    all: bool,
}

pub fn cleanup(args: CleanupArgs) -> Result<ExitCode> {
    anyhow::ensure!(nix::unistd::geteuid().is_root(), "{}", fslab::runner::NEEDS_ROOT);
    let workdirs = if args.workdir.is_empty() { vec![PathBuf::from(DEFAULT_WORKDIR)] } else { args.workdir };
    let report = cleanup_stale(&workdirs, args.all);
    for item in &report.removed {
        println!("removed {item}");
    }
    for item in &report.in_use {
        println!("left alone (its fslab is still running): {item}");
    }
    for error in &report.errors {
        eprintln!("could not remove {error}");
    }
    if report.removed.is_empty() && report.errors.is_empty() {
        println!("nothing to clean up");
    }
    Ok(if report.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
