//! `fslab simulate-changepoints` (hidden): the error rates of change-point
//! detection and of the CI gate on synthetic series, as Markdown tables
//! (or JSON) for BENCHMARKS.md.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use comfy_table::{presets::ASCII_MARKDOWN, Table};

use fslab::stats::changepoint::ChangePointConfig;
use fslab::stats::gate::GateConfig;
use fslab::stats::simulation::{
    changepoint_accuracy, changepoint_scenarios, gate_error_rates, gate_scenarios, oracle_rates, oracle_scenarios,
    GateAgainst, StepAt,
};

#[derive(Args, Debug)]
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
    /// Print JSON instead of Markdown tables.
    #[arg(long)]
    json: bool,
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
    if args.json {
        let all = serde_json::json!({
            "changepoint": cp, "gate": gate, "changepoints": cps, "gates": gates, "oracles": oracles
        });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    let num = |x: f64, digits: usize| if x.is_nan() { "–".to_string() } else { format!("{x:.digits$}") };

    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN);
    t.set_header([
        "noise",
        "step",
        "where",
        "points",
        "series",
        "found ±2",
        "exact",
        "mean |error|",
        "false / 1000 pts",
    ]);
    for r in &cps {
        let at = match r.step_at {
            StepAt::Nowhere => "–".to_string(),
            StepAt::Middle => "middle".to_string(),
            StepAt::FromEnd(k) => format!("{k} from end"),
        };
        t.add_row([
            format!("{:?}", r.noise).to_lowercase(),
            if r.step_sd == 0.0 { "none".into() } else { format!("{}σ", r.step_sd) },
            at,
            r.length.to_string(),
            r.series.to_string(),
            num(r.found_pct, 1) + if r.found_pct.is_nan() { "" } else { "%" },
            num(r.exact_pct, 1) + if r.exact_pct.is_nan() { "" } else { "%" },
            num(r.mean_abs_error, 2),
            num(r.false_per_1000, 2),
        ]);
    }
    println!(
        "Change points (window {}, p < {}, min segment {}, min magnitude {}):\n\n{t}\n",
        cp.window, cp.max_p, cp.min_segment, cp.min_magnitude
    );

    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN);
    t.set_header([
        "against",
        "run CV",
        "between",
        "runs",
        "baseline",
        "checks",
        "false alarms / 1000",
        "false improvements / 1000",
        "inconclusive",
        "+5% found",
        "+10% found",
    ]);
    for r in &gates {
        t.add_row([
            match r.against {
                GateAgainst::History => "history".to_string(),
                GateAgainst::Experiment => "experiment".to_string(),
            },
            format!("{}%", r.cv * 100.0),
            format!("{}%", r.between * 100.0),
            r.runs.to_string(),
            r.history.to_string(),
            r.checks.to_string(),
            num(r.false_alarms_per_1000, 1),
            num(r.false_improvements_per_1000, 1),
            num(r.inconclusive_pct, 1) + "%",
            num(r.detected_5_pct, 1) + "%",
            num(r.detected_10_pct, 1) + "%",
        ]);
    }
    println!(
        "Gate (alpha {}, theta {}, history ≤ {}, min {}):\n\n{t}\n",
        gate.alpha, gate.theta, gate.max_history, gate.min_history
    );

    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN);
    t.set_header(["step", "candidate is", "steps", "answered good", "answered bad", "undecided", "mean runs / side"]);
    for r in &oracles {
        t.add_row([
            format!("{}σ", r.step_sd),
            format!("{:?}", r.truth).to_lowercase(),
            r.steps.to_string(),
            num(r.good_pct, 2) + "%",
            num(r.bad_pct, 2) + "%",
            num(r.undecided_pct, 2) + "%",
            num(r.mean_runs, 2),
        ]);
    }
    println!(
        "Bisection oracle (alpha {} per step, {} to {} runs per side, run CV 2%):\n\n{t}",
        args.oracle_alpha, args.min_runs, args.max_runs
    );
    Ok(ExitCode::SUCCESS)
}
