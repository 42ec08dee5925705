//! `fslab run` and `fslab quickstart`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::compare::print_comparison;
use super::{offer, DbArg, DetailArgs, FormatArgs, KernelCacheArg};
use fslab::exit::{self, Exit};
use fslab::experiment::{self, Experiment};
use fslab::output;
use fslab::report::documents::plan::DryRun;
use fslab::report::{render, Format};
use fslab::runner::fleet::{self, CampaignShard};
use fslab::runner::{self, progress::Console, RunOptions};
use fslab::store::Store;
use fslab::testbed::DeviceOptIn;

#[derive(Args, Debug)]
#[command(after_help = exit::HELP)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])
    .help("Output format of the comparison printed at the end (or of --dry-run's plan).")))]
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
    /// Finish the newest unfinished experiment from this file, skipping finished runs; with none, stop (exit 2).
    #[arg(long, conflicts_with = "resume_or_start")]
    resume: bool,
    /// Like --resume, but start the experiment when there is nothing to resume.
    #[arg(long)]
    resume_or_start: bool,
    /// Run on this block device instead of loop-mounted images. Needs --destroy-data. fslab refuses
    /// anything that is not a spare block device (mounted, holding mounted partitions or swap, stacked on, in use).
    #[arg(long, value_name = "PATH", requires = "destroy_data")]
    device: Option<PathBuf>,
    /// Confirm that everything on --device may be destroyed.
    #[arg(long)]
    destroy_data: bool,
    /// Scaled-down run of the same experiment: 2 repetitions, short durations, less data.
    #[arg(long)]
    quick: bool,
    /// Run shard K of N (1-based): a fixed slice of the runs, the same on every machine, joining the
    /// campaign's one experiment in the (shared) --db. Re-running a shard continues it.
    #[arg(long, value_name = "K/N")]
    shard: Option<fslab::store::Shard>,
    /// Campaign id every shard shares [default: the file's hash plus the CI run id: GITHUB_RUN_ID,
    /// SLURM_ARRAY_JOB_ID, CI_PIPELINE_ID, BUILDKITE_BUILD_ID or FSLAB_CAMPAIGN_RUN].
    #[arg(long, value_name = "ID", requires = "shard")]
    campaign: Option<String>,
}

#[derive(Args, Debug)]
pub struct CommonRunArgs {
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    kernel_cache: KernelCacheArg,
    /// Compare against this variant instead of the file's baseline.
    #[arg(long)]
    baseline: Option<String>,
    /// Accept a system directory (/, /usr, /var/…, a home directory) as work directory or dir: testbed.
    #[arg(long)]
    allow_system_dir: bool,
    /// Label the experiment (repeatable), e.g. --tag commit=abc123; kernel, hostname, machine
    /// and fslab version are recorded automatically (a --tag of the same key replaces them).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag_arg)]
    tags: Vec<(String, String)>,
    #[command(flatten)]
    format: FormatArgs,
    #[command(flatten)]
    detail: DetailArgs,
}

fn tag_arg(text: &str) -> std::result::Result<(String, String), String> {
    fslab::store::parse_tag(text).map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])
    .help("Output format of the comparison printed at the end (--show prints the experiment file).")))]
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
    let overrides = args.common.kernel_cache.overrides(args.common.workdir.as_deref());
    let exp = experiment::parse_with(QUICKSTART, None, &overrides)?;
    execute(exp, &args.db, &args.common, RunOptions::default())
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    // `--workdir` and `--kernel-cache` apply before the file is checked: its
    // kernels are looked up and prepared in the cache the run will use.
    let overrides = args.common.kernel_cache.overrides(args.common.workdir.as_deref());
    let mut exp = experiment::load_with(&args.file, &overrides).map_err(exit::usage)?;
    if args.quick {
        experiment::make_quick(&mut exp);
    }
    let campaign = match args.shard {
        Some(shard) => Some(CampaignShard::new(&exp, shard, args.campaign.as_deref()).map_err(exit::usage)?),
        None => None,
    };
    // Everything below is checked by a dry run too: it resolves and
    // validates what a real run would before its first measurement.
    apply_baseline(&mut exp, &args.common)?;
    let device = match &args.device {
        Some(_) if !args.destroy_data => return Err(exit::usage(anyhow::anyhow!("--device needs --destroy-data"))),
        // Checked before anything is written; again before every mkfs.
        Some(path) => Some(DeviceOptIn::new(path).map_err(exit::usage)?),
        None => None,
    };
    let mut opts = RunOptions {
        resume: args.resume,
        resume_or_start: args.resume_or_start,
        device,
        campaign,
        ..RunOptions::default()
    };
    common_options(&mut opts, &args.common);
    if args.dry_run {
        runner::dry_run_checks(&exp, &opts)?;
        let mut plan = DryRun::new(&exp);
        plan.device = opts.device.as_ref().map(|d| d.path.clone());
        plan.shard = opts.campaign.as_ref().map(|c| fleet::describe(&exp, c));
        output::print(&render(args.common.format.chosen(), &plan)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    execute(exp, &args.db, &args.common, opts)
}

/// `--baseline NAME`: a variant of the file (usage error otherwise).
fn apply_baseline(exp: &mut Experiment, common: &CommonRunArgs) -> Result<()> {
    if let Some(baseline) = &common.baseline {
        if exp.variant(baseline).is_none() {
            return Err(exit::usage(anyhow::anyhow!("--baseline {baseline}: no variant has that name")));
        }
        exp.baseline = baseline.clone();
    }
    Ok(())
}

fn common_options(opts: &mut RunOptions, common: &CommonRunArgs) {
    opts.workdir = common.workdir.clone();
    opts.allow_system_dir = common.allow_system_dir;
    opts.tags = common.tags.clone();
}

fn execute(mut exp: Experiment, db: &DbArg, common: &CommonRunArgs, mut opts: RunOptions) -> Result<ExitCode> {
    apply_baseline(&mut exp, common)?;
    common_options(&mut opts, common);
    runner::check_privileges(&exp)?;
    fslab::sys::signals::install()?;
    let mut store = db.open()?;
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
    if summary.runs_failed > 0 {
        failure_reasons(&store, summary.experiment_id);
    }
    // A shard's results are part of a campaign: say where the others stand.
    if let Ok(Some(campaign)) = store.campaign_status(summary.experiment_id) {
        output::diagnostic(&campaign.describe());
    }
    // The experiment is stored: a reader that went away (`| head`) changes nothing about how it went.
    let format = common.format.chosen();
    // The rest is a `compare` of the stored experiment away (not a rerun).
    let mut selection = vec!["--experiment".to_string(), summary.experiment_id.to_string()];
    if let Some(baseline) = &common.baseline {
        selection.extend(["--baseline".to_string(), baseline.clone()]);
    }
    let detail = common.detail.detail(db, &selection, Some(&selection));
    match print_comparison(&store, summary.experiment_id, Some(&exp.baseline), Some(exp.theta), format, detail) {
        Err(e) if output::is_broken_pipe(&e) => output::stdout_gone(),
        r => r?,
    }
    if summary.interrupted {
        output::diagnostic("interrupted: testbeds were torn down; continue with `fslab run FILE --resume`");
        return Ok(Exit::signalled().unwrap_or(Exit::Signal(libc::SIGINT)).into());
    }
    Ok(if summary.runs_failed > 0 { Exit::Failed } else { Exit::Success }.into())
}

/// Why runs failed: each distinct reason once, with how many runs it hit
/// and which (run numbers 1-based, as progress lines show them).
fn failure_reasons(store: &Store, experiment_id: i64) {
    let Ok(runs) = store.runs(experiment_id) else { return };
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for run in runs.iter().filter(|r| r.status != fslab::record::RunStatus::Ok) {
        let reason = run.error.as_deref().unwrap_or("unknown error").to_string();
        let which = format!("run {} ({} / {})", run.seq + 1, run.variant, run.workload);
        match reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, runs)) => runs.push(which),
            None => reasons.push((reason, vec![which])),
        }
    }
    const SHOWN: usize = 5;
    for (reason, which) in reasons.iter().take(SHOWN) {
        let list = if which.len() > 3 {
            format!("{}, … ({} runs)", which[..3].join(", "), which.len())
        } else {
            which.join(", ")
        };
        output::diagnostic(&format!("  failed: {list}: {reason}"));
    }
    if reasons.len() > SHOWN {
        output::diagnostic(&format!("  … and {} other reasons (see `fslab report`)", reasons.len() - SHOWN));
    }
}
