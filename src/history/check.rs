//! `fslab check`: the newest experiment against its history or against one
//! named experiment, by the gate rule of [`crate::stats::gate`].

use std::fmt::Write;

use comfy_table::{presets::NOTHING, Cell, Table};

use crate::human;
use crate::stored::ExperimentStatus;
use anyhow::{bail, Result};
use serde::Serialize;

use super::{differences, history, ExperimentSnapshot, HistoryQuery};
use crate::stats::gate::{
    check_experiment, check_history, GateBasis, GateConfig, GateReport, MetricHistory, MetricRuns,
};
use crate::stats::history::HistoryPoint;

/// What the newest experiment is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "experiment")]
pub enum Against {
    /// A prediction interval from the last ≤ 64 comparable results.
    History,
    /// One named experiment.
    Experiment(i64),
}

impl std::str::FromStr for Against {
    type Err = String;
    fn from_str(s: &str) -> Result<Against, String> {
        match s {
            "history" => Ok(Against::History),
            _ => s
                .parse::<i64>()
                .map(Against::Experiment)
                .map_err(|_| format!("`{s}` is neither `history` nor an experiment id")),
        }
    }
}

/// The check as `--json` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub experiment: i64,
    /// The checked experiment's status (`interrupted` when it did not finish its plan).
    pub status: ExperimentStatus,
    pub against: Against,
    /// `regression`, `inconclusive`, `improvement` or `ok` over the decisive metrics.
    pub outcome: String,
    /// What `--fail-on-regression` exits with.
    pub exit_status: u8,
    /// Why some history experiments were not used (other machine, config).
    pub left_out: Vec<String>,
    /// Keys that differ from the named experiment (only with `allow_mixed`).
    pub mixed: Vec<String>,
    pub report: GateReport,
}

/// Checks experiment `newest` of `all` (every stored experiment, oldest first).
pub fn check(
    all: &[ExperimentSnapshot],
    newest: i64,
    against: Against,
    allow_mixed: bool,
    cfg: &GateConfig,
) -> Result<Check> {
    let Some(n) = all.iter().find(|s| s.experiment.id == newest) else {
        bail!("no finished experiment {newest} in the store");
    };
    let several = n.experiment.variants.len() > 1;
    // (name, workload, metric, variant, higher is better, decisive, values)
    let mut metrics = Vec::new();
    for v in &n.experiment.variants {
        for s in n.series.iter().filter(|s| s.variant == v.name) {
            let name = if several {
                format!("{}/{} [{}]", s.workload, s.metric, v.name)
            } else {
                format!("{}/{}", s.workload, s.metric)
            };
            let decisive = n.is_decisive(&s.workload, &s.metric);
            metrics.push((name, s, decisive));
        }
    }
    if metrics.is_empty() {
        bail!("experiment {newest} has no results (no ok runs) to check");
    }
    let (mut left_out, mut mixed) = (Vec::new(), Vec::new());
    let report = match against {
        Against::History => {
            let mut histories: Vec<Vec<HistoryPoint>> = Vec::new();
            for (name, s, _) in &metrics {
                let q = HistoryQuery {
                    workload: s.workload.clone(),
                    metric: s.metric.clone(),
                    variant: Some(s.variant.clone()),
                    by: None,
                    allow_mixed,
                    reference: Some(newest),
                    exclude_reference: true,
                };
                let h = history(all, &q)?;
                left_out.extend(h.left_out.iter().map(|w| format!("{name}: {w}")));
                histories.push(h.points.iter().map(|p| p.point).collect());
            }
            let items: Vec<MetricHistory> = metrics
                .iter()
                .zip(&histories)
                .map(|((name, s, decisive), hist)| MetricHistory {
                    name,
                    higher_is_better: s.higher_is_better,
                    decisive: *decisive,
                    history: hist,
                    newest: HistoryPoint::from_values(&s.values, s.higher_is_better),
                })
                .collect();
            check_history(&items, cfg)
        }
        Against::Experiment(id) => {
            let Some(base) = all.iter().find(|s| s.experiment.id == id) else {
                bail!("no finished experiment {id} in the store to check against");
            };
            let mut items = Vec::new();
            for (name, s, decisive) in &metrics {
                let diffs = differences(base, n, &s.variant, &[s.workload.as_str()]);
                if !diffs.is_empty() && !allow_mixed {
                    let list: Vec<String> = diffs.iter().map(|d| d.to_string()).collect();
                    bail!(
                        "experiment {newest} is not comparable with experiment {id} for {name}:\n  {}\n--allow-mixed checks anyway",
                        list.join("\n  ")
                    );
                }
                mixed.extend(diffs.iter().map(|d| format!("{name}: {d}")));
                let Some(b) = base.values(&s.workload, &s.metric, &s.variant) else {
                    bail!("experiment {id} has no values of {name}");
                };
                items.push(MetricRuns {
                    name,
                    higher_is_better: s.higher_is_better,
                    decisive: *decisive,
                    baseline: &b.values,
                    newest: &s.values,
                });
            }
            check_experiment(&items, cfg)
        }
    };
    mixed.dedup();
    Ok(Check {
        experiment: newest,
        status: n.experiment.status,
        against,
        outcome: report.outcome().as_str().to_string(),
        exit_status: report.exit_status(),
        left_out,
        mixed,
        report,
    })
}

/// `fslab check`: a table (the JSON is the whole check, for a CI system).
impl crate::report::Document for Check {
    fn what(&self) -> &'static str {
        "a check"
    }

    fn text(&self) -> String {
        table(self)
    }
}

fn table(c: &Check) -> String {
    let against = match c.against {
        Against::History => "its history".to_string(),
        Against::Experiment(id) => format!("experiment {id}"),
    };
    let mut out = format!("experiment {} against {against}: {}\n", c.experiment, c.outcome);
    let mut t = Table::new();
    t.load_style(NOTHING);
    t.set_header(["metric", "outcome", "change", "expected (99%)", "p adj.", "note"]);
    for m in &c.report.metrics {
        let expected = match &m.evidence {
            GateBasis::History(h) => format!(
                "[{}, {}] ({} exp.)",
                human::number(h.interval_low),
                human::number(h.interval_high),
                h.baseline_points
            ),
            GateBasis::Experiment(cmp) => format!("CI {}", human::ci_pct(cmp.ci_low_pct, cmp.ci_high_pct)),
            GateBasis::None => "–".to_string(),
        };
        // Names are `workload/metric[ [variant]]`; evidence is told by the metric's namespace.
        let evidence = m.name.split_once('/').is_some_and(|(_, metric)| crate::metric::is_evidence(metric));
        let name = match (m.decisive, evidence) {
            (true, _) => m.name.clone(),
            (false, true) => format!("{} (evidence)", m.name),
            (false, false) => format!("{} (side)", m.name),
        };
        t.add_row(vec![
            Cell::new(name),
            Cell::new(m.outcome.as_str()),
            Cell::new(human::change_pct(m.change_pct)),
            Cell::new(expected),
            Cell::new(human::p_value(m.p_adjusted)),
            Cell::new(m.note.clone().unwrap_or_default()),
        ]);
    }
    let _ = writeln!(out, "{t}");
    for line in c.left_out.iter().chain(&c.mixed) {
        let _ = writeln!(out, "note: {line}");
    }
    out
}
