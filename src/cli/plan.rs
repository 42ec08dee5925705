//! `fslab plan`: how many runs an experiment needs, from the noise of
//! earlier comparable results in the store (or a short pilot run).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use super::{offer, DbArg, FormatArgs, KernelCacheArg};
use fslab::analysis::{compare_config, plan, stored_noise};
use fslab::exit;
use fslab::experiment::{self, Repetitions};
use fslab::output;
use fslab::report::documents::plan::RunPlan;
use fslab::report::{render, Format};
use fslab::runner::{self, progress::Console, RunOptions};

/// `plan`'s exit status (it measures nothing unless `--pilot`).
const PLAN_EXIT: &str = "\
Exit status:
  0      the plan was printed (with --pilot: after the pilot rounds ran)
  1      a failure (e.g. a pilot run failed, the store cannot be read)
  2      usage or experiment-file error (also a missing --db, or no earlier results without --pilot)
  3      environment or privilege problem (--pilot: not root, a missing tool, not enough free space)
  128+N  stopped by signal N (--pilot)";

#[derive(Args, Debug)]
#[command(after_help = PLAN_EXIT)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
pub struct PlanArgs {
    /// Experiment file (TOML).
    file: PathBuf,
    #[command(flatten)]
    db: DbArg,
    /// The change to detect with 80% power, in percent (`5%` or `5`).
    #[arg(long, default_value = "5%", value_parser = parse_percent)]
    detect: f64,
    /// When the store has no comparable results, run this many rounds of
    /// the file first and plan from their noise (stored like any run).
    #[arg(long, value_name = "ROUNDS")]
    pilot: Option<u32>,
    /// Work directory for a pilot's images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    kernel_cache: KernelCacheArg,
    #[command(flatten)]
    format: FormatArgs,
}

/// `5%`, `5` or `0.5%` → a fraction (0.05, 0.05, 0.005).
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1000.0 => Ok(v / 100.0),
        _ => Err(format!("`{text}` is not a percentage like 5%")),
    }
}

pub fn plan_cmd(args: PlanArgs) -> Result<ExitCode> {
    let overrides = args.kernel_cache.overrides(args.workdir.as_deref());
    let exp = experiment::load_with(&args.file, &overrides).map_err(exit::usage)?;
    // A pilot stores its runs, so only then may the store be created.
    let mut store = match args.pilot {
        Some(_) => args.db.open()?,
        None => {
            args.db.open_existing().context("no earlier results to plan from: run the file once, or use --pilot 3")?
        }
    };
    let mut noise = stored_noise(&store, &exp)?;
    if noise.is_empty() {
        let Some(rounds) = args.pilot else {
            return Err(exit::usage(anyhow!(
                "{} holds no earlier results of {} or of its workloads to take the noise from; \
                 run it once (or use --pilot 3) and plan again",
                args.db.db,
                args.file.display()
            )));
        };
        if rounds < 2 {
            return Err(exit::usage(anyhow!("--pilot needs at least 2 rounds to see any noise")));
        }
        let mut pilot = exp.clone();
        pilot.repetitions = Repetitions::Fixed(rounds);
        runner::check_privileges(&pilot)?;
        fslab::sys::signals::install()?;
        output::diagnostic(&format!("pilot: {rounds} rounds of {}", args.file.display()));
        let summary = runner::run(&pilot, &mut store, &RunOptions::default(), &mut Console::new())?;
        if summary.interrupted {
            bail!("pilot interrupted (experiment {}); its finished runs are in the store", summary.experiment_id);
        }
        noise = stored_noise(&store, &exp)?;
    }
    let cfg = compare_config(&exp);
    let lines = plan(&exp, &noise, args.detect);
    let reps = match exp.repetitions {
        Repetitions::Fixed(n) => format!("repetitions = {n}"),
        Repetitions::Adaptive { min, max } => format!("repetitions = {{ min = {min}, max = {max} }}"),
    };
    let heading = format!(
        "plan for `{}` ({reps}, θ = {}%, α = {}), to detect {}% with {:.0}% power; noise from {} earlier experiment(s):",
        exp.name,
        exp.theta * 100.0,
        exp.alpha,
        args.detect * 100.0,
        cfg.power * 100.0,
        noise.iter().flat_map(|n| n.experiments.iter()).collect::<std::collections::BTreeSet<_>>().len()
    );
    let warnings: Vec<String> = lines.iter().filter_map(|l| l.reach_warning(exp.theta)).collect();
    output::print(&render(args.format.chosen(), &RunPlan { lines, heading, power: cfg.power })?)?;
    // Warnings are diagnostics: on standard error, each on its own line.
    for line in warnings {
        output::diagnostic(&format!("warning: {line}"));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_percent;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent(" 0.5 % "), Ok(0.005));
        assert!(parse_percent("abc").is_err() && parse_percent("-1%").is_err() && parse_percent("0").is_err());
    }
}
