//! Plain exports of one experiment: JSON (everything but raw samples) and
//! CSV (one row per run × metric, for spreadsheets and pandas).

use std::borrow::Cow;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{Store, StoredRun};
use crate::metric::Metric;
use crate::monitor::DiskTotals;
use crate::record::{MountFacts, RunStatus};

#[derive(Serialize)]
struct JsonExport<'a> {
    experiment: JsonExperiment<'a>,
    runs: Vec<JsonRun<'a>>,
}

#[derive(Serialize)]
struct JsonExperiment<'a> {
    id: i64,
    name: &'a str,
    created_at: &'a str,
    finished_at: Option<&'a str>,
    status: &'a str,
    spec_path: Option<&'a str>,
    spec_hash: &'a str,
    spec_text: &'a str,
    seed: u64,
    plan: serde_json::Value,
    environment: serde_json::Value,
    variants: Vec<JsonVariant<'a>>,
    workloads: Vec<JsonWorkload<'a>>,
}

#[derive(Serialize)]
struct JsonVariant<'a> {
    position: usize,
    name: &'a str,
    config: serde_json::Value,
}

#[derive(Serialize)]
struct JsonWorkload<'a> {
    position: usize,
    label: &'a str,
    kind: &'a str,
    config: serde_json::Value,
}

#[derive(Serialize)]
struct JsonRun<'a> {
    seq: usize,
    round: usize,
    variant: &'a str,
    workload: &'a str,
    status: RunStatus,
    error: Option<&'a str>,
    started_at: f64,
    wall_s: f64,
    metrics: &'a [Metric],
    disk_totals: Option<&'a DiskTotals>,
    mount: Option<&'a MountFacts>,
    geometry: Option<&'a str>,
}

/// The experiment and all its runs as pretty-printed JSON.
///
/// Shape: `{"experiment": {id, name, created_at, finished_at, status,
/// spec_path, spec_hash, spec_text, seed, plan, environment, variants,
/// workloads}, "runs": [{seq, round, variant, workload, status, error,
/// started_at, wall_s, metrics: [{name, unit, higher_is_better, value}],
/// disk_totals, mount, geometry}]}`. The stored JSON fields are embedded
/// parsed; monitor samples are left out (they are per-interval bulk data).
/// Non-finite numbers become `null`.
pub fn to_json(store: &Store, experiment_id: i64) -> Result<String> {
    let loc = store.location();
    let e = store.experiment(experiment_id)?;
    let runs = store.runs(experiment_id)?;
    let parse = |what: &str, text: &str| -> Result<serde_json::Value> {
        serde_json::from_str(text)
            .with_context(|| format!("{what} of experiment {experiment_id} in {loc} is not valid JSON"))
    };
    let experiment = JsonExperiment {
        id: e.id,
        name: &e.name,
        created_at: &e.created_at,
        finished_at: e.finished_at.as_deref(),
        status: &e.status,
        spec_path: e.spec_path.as_deref(),
        spec_hash: &e.spec_hash,
        spec_text: &e.spec_text,
        seed: e.seed,
        plan: parse("plan", &e.plan_json)?,
        environment: parse("environment", &e.environment_json)?,
        variants: e
            .variants
            .iter()
            .map(|v| {
                Ok(JsonVariant {
                    position: v.position,
                    name: &v.name,
                    config: parse(&format!("config of variant {:?}", v.name), &v.config_json)?,
                })
            })
            .collect::<Result<_>>()?,
        workloads: e
            .workloads
            .iter()
            .map(|w| {
                Ok(JsonWorkload {
                    position: w.position,
                    label: &w.label,
                    kind: &w.kind,
                    config: parse(&format!("config of workload {:?}", w.label), &w.config_json)?,
                })
            })
            .collect::<Result<_>>()?,
    };
    let doc = JsonExport { experiment, runs: runs.iter().map(json_run).collect() };
    serde_json::to_string_pretty(&doc)
        .with_context(|| format!("cannot serialise experiment {experiment_id} from {loc} as JSON"))
}

fn json_run(r: &StoredRun) -> JsonRun<'_> {
    JsonRun {
        seq: r.seq,
        round: r.round,
        variant: &r.variant,
        workload: &r.workload,
        status: r.status,
        error: r.error.as_deref(),
        started_at: r.started_at,
        wall_s: r.wall_s,
        metrics: &r.metrics,
        disk_totals: r.disk_totals.as_ref(),
        mount: r.mount.as_ref(),
        geometry: r.geometry.as_deref(),
    }
}

/// Column names of [`to_csv`], in order.
pub const CSV_HEADER: [&str; 11] = [
    "experiment_id",
    "experiment",
    "run_seq",
    "round",
    "variant",
    "workload",
    "status",
    "metric",
    "unit",
    "higher_is_better",
    "value",
];

/// The experiment's runs as CSV: a header, then one row per run × metric in
/// seq order.
///
/// A run without metrics (typically a failed one) still gets one row, with
/// the metric columns empty, so failures stay visible. Lines end in `\n`;
/// fields are quoted per RFC 4180 when needed (see [`csv_field`]). Non-finite
/// values are written as an empty field.
pub fn to_csv(store: &Store, experiment_id: i64) -> Result<String> {
    let e = store.experiment(experiment_id)?;
    let runs = store.runs(experiment_id)?;
    let mut out = String::new();
    push_row(&mut out, &CSV_HEADER);
    let id = e.id.to_string();
    for r in &runs {
        let seq = r.seq.to_string();
        let round = r.round.to_string();
        let (variant, workload, status) = (r.variant.as_str(), r.workload.as_str(), r.status.as_str());
        if r.metrics.is_empty() {
            push_row(&mut out, &[&id, &e.name, &seq, &round, variant, workload, status, "", "", "", ""]);
            continue;
        }
        for m in &r.metrics {
            let hib = if m.higher_is_better { "true" } else { "false" };
            let value = if m.value.is_finite() { m.value.to_string() } else { String::new() };
            push_row(&mut out, &[&id, &e.name, &seq, &round, variant, workload, status, &m.name, &m.unit, hib, &value]);
        }
    }
    Ok(out)
}

fn push_row(out: &mut String, fields: &[&str]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&csv_field(f));
    }
    out.push('\n');
}

/// Quotes one CSV field per RFC 4180: fields containing a comma, double
/// quote, CR or LF are wrapped in double quotes with inner quotes doubled;
/// others are returned unchanged.
pub fn csv_field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}
