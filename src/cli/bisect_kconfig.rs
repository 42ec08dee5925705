//! `fslab bisect-kconfig`: which kernel config options carry a regression.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::bisect::PerExperiment;
use super::DbArg;
use fslab::bisect::kconfig::{self, KconfigBisectConfig};
use fslab::bisect::{MetricRef, Status};
use fslab::experiment;
use fslab::output;
use fslab::report::{render_plain, Format};
use fslab::runner::{self, progress::Console, RunOptions};
use fslab::store::Store;

#[derive(Args, Debug)]
pub struct BisectKconfigArgs {
    /// Experiment file (TOML) holding the good and the bad variant, both built from the same kernel source.
    file: PathBuf,
    /// The variant without the regression.
    #[arg(long, value_name = "NAME")]
    good: String,
    /// The variant with the regression.
    #[arg(long, value_name = "NAME")]
    bad: String,
    /// The metric that regressed, as WORKLOAD/METRIC (e.g. read/vm/instructions).
    #[arg(long, value_name = "WORKLOAD/METRIC")]
    metric: MetricRef,
    /// Fewest rounds per step (default: the file's repetitions).
    #[arg(long, value_name = "N", requires = "max_runs")]
    min_runs: Option<u32>,
    /// Most rounds per step while the verdict is inconclusive (default: the file's, or twice a fixed count).
    #[arg(long, value_name = "N", requires = "min_runs")]
    max_runs: Option<u32>,
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
    /// Output format of the result on stdout.
    #[arg(long, value_parser = super::formats(&[Format::Text, Format::Json]), default_value = "text")]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

/// Exit status when good + every candidate shows no regression to bisect.
const NOT_REPRODUCED: u8 = 2;

pub fn bisect_kconfig(args: BisectKconfigArgs) -> Result<ExitCode> {
    let exp = experiment::load(&args.file)?;
    runner::check_privileges(&exp)?;
    fslab::sys::signals::install()?;
    let mut store = Store::open(&args.db.db).with_context(|| format!("opening {}", args.db.db.display()))?;
    let cfg = KconfigBisectConfig {
        good: args.good,
        bad: args.bad,
        metric: args.metric,
        repetitions: args.min_runs.zip(args.max_runs),
        run_options: RunOptions { workdir: args.workdir, ..RunOptions::default() },
    };
    let mut console = PerExperiment(Console::new());
    let report = kconfig::bisect_kconfig(&exp, &cfg, &mut store, &mut console)?;
    let text = render_plain(super::chosen(args.format, args.json), "a bisect result", &report, kconfig::render_text)?;
    output::print(&text)?;
    output::diagnostic(&format!("results in {}", args.db.db.display()));
    Ok(match report.status {
        Status::Found => ExitCode::SUCCESS,
        Status::NotReproduced => {
            output::diagnostic(&format!(
                "bisect-kconfig: `{}` + every candidate is not regressed against `{}` on {} ({}); nothing to bisect",
                report.good,
                report.good,
                report.metric,
                report.confirmation.verdict.map_or("no verdict".to_string(), |v| v.to_string())
            ));
            ExitCode::from(NOT_REPRODUCED)
        }
    })
}
