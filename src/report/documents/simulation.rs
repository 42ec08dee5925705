//! `fslab simulate-changepoints`: the error rates of change-point
//! detection, the CI gate and the bisection oracle on synthetic series.
//! Its text is Markdown tables (for BENCHMARKS.md).

use std::fmt::Write;

use comfy_table::{presets::ASCII_MARKDOWN, Table};
use serde::Serialize;

use crate::report::Document;
use crate::stats::changepoint::ChangePointConfig;
use crate::stats::gate::GateConfig;
use crate::stats::simulation::{BisectionRates, ChangePointAccuracy, GateAgainst, GateRates, OracleRates, StepAt};
use crate::stats::verdict_sim::{self, SimConfig, EXPLORE, TABLES};

/// `fslab simulate`: the Monte-Carlo tables behind the verdict rules'
/// error rates, each table Markdown (its text is the whole as Markdown).
#[derive(Debug, Serialize)]
pub struct VerdictSimulation {
    /// What every table assumes.
    pub heading: String,
    pub experiments: usize,
    pub threads: usize,
    pub tables: Vec<SimulatedTable>,
    pub total_s: f64,
}

#[derive(Debug, Serialize)]
pub struct SimulatedTable {
    pub name: &'static str,
    pub title: &'static str,
    pub markdown: String,
    pub seconds: f64,
}

impl VerdictSimulation {
    /// Computes the named tables (the default set when `names` is empty).
    pub fn run(names: &[String], sim: &SimConfig) -> Result<Self, String> {
        let start = std::time::Instant::now();
        let mut tables = Vec::new();
        for (name, title, table) in verdict_sim::select(names)? {
            let t0 = std::time::Instant::now();
            let mut markdown = String::new();
            table(sim, &mut markdown);
            tables.push(SimulatedTable { name, title, markdown, seconds: t0.elapsed().as_secs_f64() });
        }
        Ok(VerdictSimulation {
            heading: verdict_sim::heading(sim),
            experiments: sim.experiments,
            threads: sim.threads,
            tables,
            total_s: start.elapsed().as_secs_f64(),
        })
    }
}

impl Document for VerdictSimulation {
    fn what(&self) -> &'static str {
        "a verdict simulation"
    }

    fn text(&self) -> String {
        let mut out = format!("{}\n", self.heading);
        for t in &self.tables {
            let _ = write!(out, "\n## {} (`{}`)\n{}\n({:.1} s)\n", t.title, t.name, t.markdown, t.seconds);
        }
        let _ = writeln!(out, "\nTotal {:.1} s.", self.total_s);
        out
    }

    fn markdown(&self) -> Option<String> {
        Some(self.text())
    }
}

/// `fslab simulate --list`: the tables it can compute.
#[derive(Debug, Serialize)]
pub struct SimulationTables(pub Vec<TableName>);

#[derive(Debug, Serialize)]
pub struct TableName {
    pub name: &'static str,
    pub title: &'static str,
    /// Computed when no table is named.
    pub default: bool,
}

impl SimulationTables {
    pub fn all() -> Self {
        let default = TABLES.iter().map(|t| TableName { name: t.0, title: t.1, default: true });
        SimulationTables(
            default.chain(std::iter::once(TableName { name: EXPLORE.0, title: EXPLORE.1, default: false })).collect(),
        )
    }
}

impl Document for SimulationTables {
    fn what(&self) -> &'static str {
        "the simulation tables"
    }

    fn text(&self) -> String {
        self.0.iter().map(|t| format!("{:20} {}\n", t.name, t.title)).collect()
    }
}

#[derive(Debug, Serialize)]
pub struct ChangepointSimulation {
    pub changepoint: ChangePointConfig,
    pub gate: GateConfig,
    pub oracle: OracleSettings,
    pub changepoints: Vec<ChangePointAccuracy>,
    pub gates: Vec<GateRates>,
    pub oracles: Vec<OracleRates>,
    /// Whole bisections, one commit a step against several.
    pub bisections: Vec<BisectionRates>,
}

/// How the simulated bisection oracle asks.
#[derive(Debug, Serialize)]
pub struct OracleSettings {
    /// Error level per step.
    pub alpha: f64,
    pub min_runs: usize,
    pub max_runs: usize,
}

impl Document for ChangepointSimulation {
    fn what(&self) -> &'static str {
        "a change-point simulation"
    }

    fn text(&self) -> String {
        let mut out = String::new();
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
        for r in &self.changepoints {
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
        let _ = writeln!(
            out,
            "Change points (window {}, p < {}, min segment {}, min magnitude {}):\n\n{t}\n",
            self.changepoint.window,
            self.changepoint.max_p,
            self.changepoint.min_segment,
            self.changepoint.min_magnitude
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
        for r in &self.gates {
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
        let _ = writeln!(
            out,
            "Gate (alpha {}, theta {}, history ≤ {}, min {}):\n\n{t}\n",
            self.gate.alpha, self.gate.theta, self.gate.max_history, self.gate.min_history
        );

        let mut t = Table::new();
        t.load_style(ASCII_MARKDOWN);
        t.set_header([
            "step",
            "candidate is",
            "steps",
            "answered good",
            "answered bad",
            "undecided",
            "mean runs / side",
        ]);
        for r in &self.oracles {
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
        let _ = writeln!(
            out,
            "Bisection oracle (alpha {} per step, {} to {} runs per side, run CV 2%):\n\n{t}",
            self.oracle.alpha, self.oracle.min_runs, self.oracle.max_runs
        );
        let mut t = Table::new();
        t.load_style(ASCII_MARKDOWN);
        t.set_header([
            "commits",
            "step",
            "commits a step",
            "bisections",
            "mean steps",
            "most steps",
            "commits measured",
            "runs",
            "right",
            "wrong",
            "range",
        ]);
        for r in &self.bisections {
            t.add_row([
                r.commits.to_string(),
                format!("{}σ", r.step_sd),
                r.per_step.to_string(),
                r.bisections.to_string(),
                num(r.mean_steps, 2),
                r.max_steps.to_string(),
                num(r.mean_commits, 2),
                num(r.mean_runs, 1),
                num(r.right_pct, 2) + "%",
                num(r.wrong_pct, 2) + "%",
                num(r.range_pct, 2) + "%",
            ]);
        }
        let _ = writeln!(
            out,
            "\nWhole bisections on a line of commits, the first bad one uniform among them (the same oracle; \
             `--parallel K` measures K commits a step):\n\n{t}"
        );
        out
    }

    fn markdown(&self) -> Option<String> {
        Some(self.text())
    }
}
