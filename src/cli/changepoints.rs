//! `fslab simulate-changepoints` (hidden): the error rates of change-point
//! detection, of the CI gate, of the bisection oracle and of whole
//! bisections (one commit a step or several) on synthetic series, as
//! Markdown tables (or JSON) for BENCHMARKS.md.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{offer, FormatArgs};
use fslab::output;
use fslab::report::documents::simulation::{ChangepointSimulation, OracleSettings};
use fslab::report::{render, Format};

use fslab::stats::changepoint::ChangePointConfig;
use fslab::stats::gate::GateConfig;
use fslab::stats::simulation::{
    bisection_rates, bisection_scenarios, changepoint_accuracy, changepoint_scenarios, gate_error_rates,
    gate_scenarios, oracle_rates, oracle_scenarios,
};

/// Text is Markdown tables.
#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json, Format::Markdown])))]
pub struct SimulateChangepointsArgs {
    /// Synthetic series per change-point row.
    #[arg(long, default_value_t = 2000)]
    series: usize,
    /// Gate checks per gate row and column (unchanged, +5%, +10%).
    #[arg(long, default_value_t = 10000)]
    checks: usize,
    /// Bisection steps per oracle row.
    #[arg(long, default_value_t = 4000)]
    steps: usize,
    /// Whole bisections per bisection row.
    #[arg(long, default_value_t = 2000)]
    bisections: usize,
    /// Oracle: runs per side before the first question.
    #[arg(long, value_name = "N", default_value_t = 3, alias = "start-runs")]
    min_runs: usize,
    /// Oracle: most runs per side before a step is undecided.
    #[arg(long, default_value_t = 10)]
    max_runs: usize,
    /// Oracle: error level per bisection step.
    #[arg(long, default_value_t = 0.01, value_parser = super::values::alpha)]
    oracle_alpha: f64,
    /// Seed of the first row (each row adds its index).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Change-point window.
    #[arg(long, default_value_t = ChangePointConfig::default().window)]
    window: usize,
    /// Change-point significance level.
    #[arg(long, default_value_t = ChangePointConfig::default().max_p)]
    max_p: f64,
    /// Change-point minimum segment length.
    #[arg(long, default_value_t = ChangePointConfig::default().min_segment)]
    min_segment: usize,
    /// Gate significance level.
    #[arg(long, default_value_t = GateConfig::default().alpha, value_parser = super::values::alpha)]
    alpha: f64,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn simulate(args: SimulateChangepointsArgs) -> Result<ExitCode> {
    let cp = ChangePointConfig {
        window: args.window,
        max_p: args.max_p,
        min_segment: args.min_segment,
        ..ChangePointConfig::default()
    };
    let gate = GateConfig { alpha: args.alpha, changepoint: cp, ..GateConfig::default() };
    let seed = |i: usize| args.seed.wrapping_add(i as u64);
    let cps: Vec<_> = changepoint_scenarios()
        .into_iter()
        .enumerate()
        .map(|(i, s)| changepoint_accuracy(&cp, s, args.series, seed(i)))
        .collect();
    let gates: Vec<_> = gate_scenarios()
        .into_iter()
        .enumerate()
        .map(|(i, s)| gate_error_rates(&gate, s, args.checks, seed(100 + i)))
        .collect();
    let oracles: Vec<_> = oracle_scenarios()
        .into_iter()
        .enumerate()
        .map(|(i, s)| oracle_rates(s, (args.min_runs, args.max_runs), args.oracle_alpha, args.steps, seed(200 + i)))
        .collect();
    let bisections: Vec<_> = bisection_scenarios()
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            bisection_rates(s, (args.min_runs, args.max_runs), args.oracle_alpha, args.bisections, seed(300 + i))
        })
        .collect();
    let doc = ChangepointSimulation {
        changepoint: cp,
        gate,
        oracle: OracleSettings { alpha: args.oracle_alpha, min_runs: args.min_runs, max_runs: args.max_runs },
        changepoints: cps,
        gates,
        oracles,
        bisections,
    };
    output::print(&render(args.format.chosen(), &doc)?)?;
    Ok(ExitCode::SUCCESS)
}
