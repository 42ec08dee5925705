//! `fslab bisect-commits`: the first commit of a source tree that brought a
//! regression (see [`fslab::bisect::commits`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::bisect::PerExperiment;
use super::{offer, DbArg, FormatArgs, KernelCacheArg};
use fslab::bisect::commits::{bisect_commits, CommitBisectConfig, CommitBisectStatus};
use fslab::bisect::MetricRef;
use fslab::output;
use fslab::report::{render, Format};
use fslab::runner::{progress::Console, RunOptions};

#[derive(Args, Debug)]
#[command(after_help = "Exit status: 0 first bad commit found; 1 only a range (skipped or undecided commits) \
                        or failed runs; 2 bad usage, or the bad end is not worse than the good end")]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format of the result on stdout")))]
pub struct BisectCommitsArgs {
    /// The git repository (its checkout is never touched: a kernel is built in fslab's own clone, other
    /// trees in worktrees of fslab's own).
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,
    /// A revision without the regression.
    #[arg(long, value_name = "REV")]
    good: String,
    /// A later revision with it.
    #[arg(long, value_name = "REV")]
    bad: String,
    /// Experiment file; `{rev}` (the full commit id), `{repo}` (the repository) and `{worktree}` (a checkout of
    /// the commit) are filled in. A kernel variant builds the commit with
    /// `kernel = { git = "{repo}", rev = "{rev}", config = … }` (`source = "{worktree}"` means the same).
    #[arg(value_name = "FILE", required_unless_present = "experiment")]
    file: Option<PathBuf>,
    /// The old spelling of FILE.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "file")]
    experiment: Option<PathBuf>,
    /// Build command for trees fslab does not build itself, run with `sh -c` in each commit's worktree
    /// (FSLAB_REV, FSLAB_WORKTREE set); exit 125 or a failure skips the commit.
    #[arg(long, value_name = "CMD")]
    build: Option<String>,
    /// The variant measured (default: the file's baseline).
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
    /// The metric, as WORKLOAD/METRIC (default: the first workload's main time).
    #[arg(long, value_name = "WORKLOAD/METRIC")]
    metric: Option<MetricRef>,
    /// Runs each commit (and each end) starts with.
    #[arg(long, value_name = "N", default_value_t = 3, alias = "start-rounds")]
    min_runs: usize,
    /// Most runs per commit before its step is reported undecided (and skipped).
    #[arg(long, value_name = "N", default_value_t = 20, alias = "max-rounds")]
    max_runs: usize,
    /// Error rate of one step's answer.
    #[arg(long, default_value_t = 0.01, value_parser = super::values::alpha)]
    alpha: f64,
    /// Commits measured per step, side by side (multisection): N commits take about log_(K+1) N steps.
    #[arg(long, value_name = "K", default_value_t = 1)]
    parallel: usize,
    /// Share the steps with other machines running this same command against the same (PostgreSQL)
    /// store: each commit of a step is claimed by one machine and measured there; the others wait for its
    /// runs. With --parallel K, K machines measure a step's K commits at once.
    #[arg(long)]
    fleet: bool,
    /// Continue the bisection this command line started (its stored steps are reused; exit 2 when
    /// there is none). Without it a stored bisection is continued too.
    #[arg(long)]
    resume: bool,
    /// Where the (marked, removed afterwards) worktrees are made.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    worktrees: PathBuf,
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    kernel_cache: KernelCacheArg,
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn bisect_commits_cmd(args: BisectCommitsArgs) -> Result<ExitCode> {
    fslab::sys::signals::install()?;
    let mut store = args.db.open()?;
    let cfg = CommitBisectConfig {
        repo: args.repo,
        good: args.good,
        bad: args.bad,
        experiment: args.file.or(args.experiment).expect("clap requires FILE or --experiment"),
        build: args.build,
        variant: args.variant,
        metric: args.metric,
        start_rounds: args.min_runs,
        max_rounds: args.max_runs,
        alpha: args.alpha,
        parallel: args.parallel,
        fleet: args.fleet,
        resume: args.resume,
        worktree_base: args.worktrees,
        overrides: args.kernel_cache.overrides(args.workdir.as_deref()),
        run_options: RunOptions { workdir: args.workdir, ..RunOptions::default() },
    };
    let mut console = PerExperiment(Console::new());
    let report = bisect_commits(&cfg, &mut store, &mut console)?;
    output::print(&render(args.format.chosen(), &report)?)?;
    output::diagnostic(&format!("results in {} (tag bisect={})", args.db.db.display(), report.id));
    Ok(ExitCode::from(match report.status {
        CommitBisectStatus::Found => 0,
        CommitBisectStatus::Range => 1,
        CommitBisectStatus::NotWorse => 2,
    }))
}
