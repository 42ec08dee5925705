//! `fslab export`, `fslab list`, `fslab cleanup`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{offer, DbArg, FormatArgs};
use fslab::cleanup::cleanup as cleanup_stale;
use fslab::output;
use fslab::report::documents::experiments::ExperimentList;
use fslab::report::{render, Format};
use fslab::testbed::workdirs;

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Json, Format::Csv]).default_value("json")
    .help("json: the experiment and every run; csv: one row per run × metric.")))]
pub struct ExportArgs {
    #[command(flatten)]
    db: DbArg,
    /// Experiment id (default: the newest).
    #[arg(long)]
    experiment: Option<i64>,
    #[command(flatten)]
    format: FormatArgs,
    /// Write here instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    let text = render(args.format.chosen(), &fslab::store::export::export(&store, id)?)?;
    match args.output {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?,
        None => output::print(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format: one line per experiment, or JSON (with each experiment's uuid, campaign and tags).")))]
pub struct ListArgs {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn list(args: ListArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    // The store reports a `running` experiment whose fslab is gone as interrupted.
    let list = ExperimentList(store.list_experiments()?);
    output::print(&render(args.format.chosen(), &list)?)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
pub struct CleanupArgs {
    /// Work directories to clean (default: /var/tmp/fslab and every work directory fslab has recorded, plus
    /// what fslab left system-wide). With --workdir, only what belongs to these: their testbeds' cgroups, VMs,
    /// mounts, loop devices and trace instances. Only directories carrying fslab's marker file are ever removed.
    #[arg(long)]
    workdir: Vec<PathBuf>,
    /// Also remove testbeds of fslab processes that are still running.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn cleanup(args: CleanupArgs) -> Result<ExitCode> {
    if !nix::unistd::geteuid().is_root() {
        return Err(fslab::exit::environment(anyhow::anyhow!("{}", fslab::runner::NEEDS_ROOT)));
    }
    // Named work directories: only what belongs to them.
    let report = if args.workdir.is_empty() {
        cleanup_stale(&workdirs::known(), args.all)
    } else {
        fslab::cleanup::cleanup_only(&args.workdir, args.all)
    };
    fslab::runner::owner::remove_stale_registrations();
    for error in &report.errors {
        output::diagnostic(&format!("could not remove {error}"));
    }
    output::print(&render(args.format.chosen(), &report)?)?;
    Ok(if report.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
