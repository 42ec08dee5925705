//! `fslab run` and `fslab quickstart`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::compare::print_comparison;
use super::DbArg;
use fslab::experiment::{self, Experiment};
use fslab::output;
use fslab::report::Format;
use fslab::runner::{self, progress::Console, RunOptions};
use fslab::store::Store;
use fslab::testbed::DeviceOptIn;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Experiment file (TOML).
    file: PathBuf,
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    common: CommonRunArgs,
    /// Print the run plan and exit without running anything.
    #[arg(long)]
    dry_run: bool,
    /// Finish the newest interrupted run of this experiment file, skipping finished runs.
    #[arg(long)]
    resume: bool,
    /// Run on this block device instead of loop-mounted images. Needs --destroy-data.
    #[arg(long, value_name = "PATH", requires = "destroy_data")]
    device: Option<PathBuf>,
    /// Confirm that everything on --device may be destroyed.
    #[arg(long)]
    destroy_data: bool,
    /// Scaled-down run of the same experiment: 2 repetitions, short durations, less data.
    #[arg(long)]
    quick: bool,
}

#[derive(Args, Debug)]
pub struct CommonRunArgs {
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Compare against this variant instead of the file's baseline.
    #[arg(long)]
    baseline: Option<String>,
}

#[derive(Args, Debug)]
pub struct QuickstartArgs {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    common: CommonRunArgs,
    /// Print the experiment file quickstart runs, and exit.
    #[arg(long)]
    show: bool,
}

/// The built-in quickstart experiment.
pub const QUICKSTART: &str = include_str!("../../examples/quickstart.toml");

pub fn quickstart(args: QuickstartArgs) -> Result<ExitCode> {
    if args.show {
        output::print(QUICKSTART)?;
        return Ok(ExitCode::SUCCESS);
    }
    let exp = experiment::parse(QUICKSTART, None)?;
    execute(exp, &args.db, &args.common, RunOptions::default())
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let mut exp = experiment::load(&args.file)?;
    if args.quick {
        experiment::make_quick(&mut exp);
    }
    if args.dry_run {
        output::print(&fslab::experiment::plan::describe(&exp))?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.device.is_some() && !args.destroy_data {
        bail!("--device needs --destroy-data");
    }
    let opts = RunOptions { resume: args.resume, device: args.device.map(|path| DeviceOptIn { path }), workdir: None };
    execute(exp, &args.db, &args.common, opts)
}

fn execute(mut exp: Experiment, db: &DbArg, common: &CommonRunArgs, mut opts: RunOptions) -> Result<ExitCode> {
    if let Some(baseline) = &common.baseline {
        if exp.variant(baseline).is_none() {
            bail!("--baseline {baseline}: no variant has that name");
        }
        exp.baseline = baseline.clone();
    }
    opts.workdir = common.workdir.clone();
    runner::check_privileges(&exp)?;
    fslab::sys::signals::install()?;
    let mut store = Store::open(&db.db).with_context(|| format!("opening {}", db.db.display()))?;
    let mut console = Console::new();
    let summary = runner::run(&exp, &mut store, &opts, &mut console)?;
    output::diagnostic(&format!(
        "experiment {}: {} runs ok, {} failed{}; results in {}",
        summary.experiment_id,
        summary.runs_ok,
        summary.runs_failed,
        if summary.runs_skipped > 0 { format!(", {} already done", summary.runs_skipped) } else { String::new() },
        db.db.display()
    ));
    // The experiment is stored: a reader that went away (`| head`) changes nothing about how it went.
    match print_comparison(&store, summary.experiment_id, Some(&exp.baseline), Some(exp.theta), Format::Text) {
        Err(e) if output::is_broken_pipe(&e) => output::stdout_gone(),
        r => r?,
    }
    if summary.interrupted {
        output::diagnostic("interrupted: testbeds were torn down; continue with `fslab run FILE --resume`");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
