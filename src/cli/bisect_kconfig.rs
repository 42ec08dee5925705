//! `fslab bisect-kconfig`: which kernel config options carry a regression.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::bisect::PerExperiment;
use fslab::bisect::kconfig::{self, KconfigBisectConfig};
use fslab::bisect::Status;
use fslab::experiment;
use fslab::output;
use fslab::report::render_plain;
use fslab::runner::{self, progress::Console, RunOptions};
use fslab::store::Store;

/// Exit status when good + every candidate shows no regression to bisect.
const NOT_REPRODUCED: u8 = 2;

pub fn bisect_kconfig(args: super::bisect::BisectArgs) -> Result<ExitCode> {
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
