//! `fslab bisect-options` and `fslab bisect-kconfig`: which differing
//! settings, or kernel config options, carry a regression. One set of
//! flags, one driver; the bisection itself is the library's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{offer, DbArg, FormatArgs};
use fslab::bisect::{self, kconfig, BisectConfig, MetricRef, Report, Status};
use fslab::experiment::{self, Experiment, PlannedRun};
use fslab::output;
use fslab::record::RunRecord;
use fslab::report::{render, Format};
use fslab::runner::{self, progress::Console, Observer, RunOptions};
use fslab::store::Store;

/// What `bisect-options` and `bisect-kconfig` share: one set of flags
/// for "bisect between two variants of this file on this metric".
#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format of the result on stdout")))]
pub struct BisectArgs {
    /// Experiment file (TOML) holding the good and the bad variant (for bisect-kconfig, both
    /// built from the same kernel source).
    pub(crate) file: PathBuf,
    /// The variant without the regression.
    #[arg(long, value_name = "NAME")]
    pub(crate) good: String,
    /// The variant with the regression.
    #[arg(long, value_name = "NAME")]
    pub(crate) bad: String,
    /// The metric that regressed, as WORKLOAD/METRIC (e.g. untar/total_s, read/vm/instructions).
    #[arg(long, value_name = "WORKLOAD/METRIC")]
    pub(crate) metric: MetricRef,
    /// Fewest rounds per step (default: the file's repetitions).
    #[arg(long, value_name = "N", requires = "max_runs")]
    pub(crate) min_runs: Option<u32>,
    /// Most rounds per step while the verdict is inconclusive (default: the file's, or twice a fixed count).
    #[arg(long, value_name = "N", requires = "min_runs")]
    pub(crate) max_runs: Option<u32>,
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    pub(crate) workdir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) kernel_cache: super::KernelCacheArg,
    #[command(flatten)]
    pub(crate) db: DbArg,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// Exit status when good vs bad (or good + every candidate) shows no regression to bisect.
const NOT_REPRODUCED: u8 = 2;

pub fn bisect_options(args: BisectArgs) -> Result<ExitCode> {
    run(args, bisect::bisect)
}

pub fn bisect_kconfig(args: BisectArgs) -> Result<ExitCode> {
    run(args, kconfig::bisect_kconfig)
}

type Bisect<R> = fn(&Experiment, &BisectConfig, &mut Store, &mut dyn Observer) -> Result<R>;

fn run<R: Report>(args: BisectArgs, bisect: Bisect<R>) -> Result<ExitCode> {
    let exp = experiment::load_with(&args.file, &args.kernel_cache.overrides(args.workdir.as_deref()))?;
    let cfg = BisectConfig {
        good: args.good,
        bad: args.bad,
        metric: args.metric,
        repetitions: args.min_runs.zip(args.max_runs),
        run_options: RunOptions { workdir: args.workdir, ..RunOptions::default() },
    };
    // Names are checked before privileges, so a typo is told first.
    cfg.ends(&exp)?;
    runner::check_privileges(&exp)?;
    fslab::sys::signals::install()?;
    let mut store = args.db.open()?;
    let mut console = PerExperiment(Console::new());
    let report = bisect(&exp, &cfg, &mut store, &mut console)?;
    output::print(&render(args.format.chosen(), &report)?)?;
    output::diagnostic(&format!("results in {}", args.db.db.display()));
    Ok(match report.search().status {
        Status::Found => ExitCode::SUCCESS,
        Status::NotReproduced => {
            output::diagnostic(&report.search().not_reproduced_note());
            ExitCode::from(NOT_REPRODUCED)
        }
    })
}

/// A fresh [`Console`] for each trial experiment: a `Console` counts runs
/// from its creation, so one reused across experiments would count wrong.
pub(super) struct PerExperiment(pub(super) Console);

impl Observer for PerExperiment {
    fn start(&mut self, planned: usize, max: usize) {
        self.0 = Console::new();
        self.0.start(planned, max);
    }
    fn extend(&mut self, runs: usize) {
        self.0.extend(runs);
    }
    fn started(&mut self, run: &PlannedRun, variant: &str, workload: &str) {
        self.0.started(run, variant, workload);
    }
    fn finished(&mut self, run: &PlannedRun, record: &RunRecord) {
        self.0.finished(run, record);
    }
    fn skipped(&mut self, run: &PlannedRun) {
        self.0.skipped(run);
    }
    fn message(&mut self, text: &str) {
        self.0.message(text);
    }
    fn done(&mut self) {
        self.0.done();
    }
}
