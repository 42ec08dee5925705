//! Plain exports of one experiment: JSON (everything but raw samples) and
//! CSV (one row per run × metric, for spreadsheets and pandas).
//!
//! Both are serialised from structs, so a field added to a stored type
//! appears in the JSON without being listed here, and the CSV header and
//! rows come from one struct ([`CsvRow`]).

use anyhow::{Context, Result};
use serde::Serialize;

use super::{ExperimentMeta, ExperimentRow, RunMeta, Store, StoredRun};

#[derive(Serialize)]
struct JsonExport<'a> {
    experiment: JsonExperiment<'a>,
    runs: Vec<JsonRun<'a>>,
}

#[derive(Serialize)]
struct JsonExperiment<'a> {
    id: i64,
    uuid: &'a str,
    name: &'a str,
    created_at: &'a str,
    finished_at: Option<&'a str>,
    status: crate::stored::ExperimentStatus,
    spec_path: Option<&'a str>,
    spec_hash: &'a str,
    spec_text: &'a str,
    seed: u64,
    campaign: Option<&'a str>,
    shard_count: Option<usize>,
    tags: &'a [(String, String)],
    plan: &'a crate::stored::StoredPlan,
    environment: &'a crate::stored::StoredEnvironment,
    variants: Vec<JsonConfigured<'a, super::VariantRow>>,
    workloads: Vec<JsonConfigured<'a, super::WorkloadRow>>,
}

/// A variant or workload with its `config_json` embedded as parsed `config`.
#[derive(Serialize)]
struct JsonConfigured<'a, T> {
    #[serde(flatten)]
    row: &'a T,
    config: serde_json::Value,
}

/// A stored run plus its identity; `id` is the run's id in this store.
#[derive(Serialize)]
struct JsonRun<'a> {
    #[serde(flatten)]
    run: &'a StoredRun,
    uuid: &'a str,
    shard: Option<usize>,
    machine: Option<&'a crate::inspect::machine::Machine>,
}

/// The experiment and all its runs as pretty-printed JSON.
///
/// Shape: `{"experiment": {id, uuid, name, created_at, finished_at, status,
/// spec_path, spec_hash, spec_text, seed, campaign, shard_count, tags,
/// plan, environment, variants, workloads}, "runs": [{id, seq, round,
/// variant, workload, status, error, started_at, wall_s, metrics: [{name,
/// unit, higher_is_better, value}], mount, geometry, disk_totals, uuid,
/// shard, machine}]}`. The stored JSON fields are embedded parsed (variants
/// and workloads keep `config_json` and add `config`); monitor samples are
/// left out (they are per-interval bulk data). Non-finite numbers become
/// `null`.
pub fn to_json(store: &Store, experiment_id: i64) -> Result<String> {
    let loc = store.location();
    let e: ExperimentRow = store.experiment(experiment_id)?;
    let meta: ExperimentMeta = store.experiment_meta(experiment_id)?;
    let runs = store.runs(experiment_id)?;
    let metas: Vec<RunMeta> = runs.iter().map(|r| store.run_meta(r.id)).collect::<Result<_>>()?;
    let parse = |what: &str, text: &str| -> Result<serde_json::Value> {
        serde_json::from_str(text)
            .with_context(|| format!("{what} of experiment {experiment_id} in {loc} is not valid JSON"))
    };
    let experiment = JsonExperiment {
        id: e.id,
        uuid: &meta.uuid,
        name: &e.name,
        created_at: &e.created_at,
        finished_at: e.finished_at.as_deref(),
        status: e.status,
        spec_path: e.spec_path.as_deref(),
        spec_hash: &e.spec_hash,
        spec_text: &e.spec_text,
        seed: e.seed,
        campaign: meta.campaign.as_deref(),
        shard_count: meta.shard_count,
        tags: &meta.tags,
        plan: &e.plan,
        environment: &e.environment,
        variants: e
            .variants
            .iter()
            .map(|v| {
                Ok(JsonConfigured {
                    row: v,
                    config: parse(&format!("config of variant {:?}", v.name), &v.config_json)?,
                })
            })
            .collect::<Result<_>>()?,
        workloads: e
            .workloads
            .iter()
            .map(|w| {
                Ok(JsonConfigured {
                    row: w,
                    config: parse(&format!("config of workload {:?}", w.label), &w.config_json)?,
                })
            })
            .collect::<Result<_>>()?,
    };
    let runs = runs
        .iter()
        .zip(&metas)
        .map(|(run, m)| JsonRun { run, uuid: &m.uuid, shard: m.shard, machine: m.machine.as_ref().map(|s| &s.machine) })
        .collect();
    serde_json::to_string_pretty(&JsonExport { experiment, runs })
        .with_context(|| format!("cannot serialise experiment {experiment_id} from {loc} as JSON"))
}

/// One CSV line: the header is these field names, in this order.
#[derive(Serialize)]
struct CsvRow<'a> {
    experiment_id: i64,
    experiment: &'a str,
    run_seq: usize,
    round: usize,
    variant: &'a str,
    workload: &'a str,
    status: &'a str,
    /// Why a failed run failed; empty for ok runs.
    error: Option<&'a str>,
    metric: Option<&'a str>,
    unit: Option<&'a str>,
    higher_is_better: Option<bool>,
    /// Formatted with Rust's shortest round-trip form (`3`, not `3.0`);
    /// empty when not finite.
    value: Option<String>,
}

/// The experiment's runs as CSV: a header, then one row per run × metric in
/// seq order.
///
/// A run without metrics (typically a failed one) still gets one row, with
/// the metric columns empty, so failures stay visible. Lines end in `\n`;
/// fields are quoted per RFC 4180 when needed.
pub fn to_csv(store: &Store, experiment_id: i64) -> Result<String> {
    csv_of(&store.experiment(experiment_id)?, &store.runs(experiment_id)?)
}

fn csv_of<'a>(e: &'a ExperimentRow, runs: &'a [StoredRun]) -> Result<String> {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    for r in runs {
        let row = |m: Option<&'a crate::metric::Metric>| CsvRow {
            experiment_id: e.id,
            experiment: &e.name,
            run_seq: r.seq,
            round: r.round,
            variant: &r.variant,
            workload: &r.workload,
            status: r.status.as_str(),
            error: r.error.as_deref(),
            metric: m.map(|m| m.name.as_str()),
            unit: m.map(|m| m.unit.as_str()),
            higher_is_better: m.map(|m| m.higher_is_better),
            value: m.and_then(|m| m.value.is_finite().then(|| m.value.to_string())),
        };
        if r.metrics.is_empty() {
            w.serialize(row(None))?;
        }
        for m in &r.metrics {
            w.serialize(row(Some(m)))?;
        }
    }
    if runs.is_empty() {
        // serde writes the header with the first row; an empty export still has one.
        w.write_record(csv_header())?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("cannot finish the CSV: {e}"))?;
    String::from_utf8(bytes).context("CSV output is not UTF-8")
}

/// Column names of [`to_csv`], in order: the fields of its row struct.
pub fn csv_header() -> Vec<String> {
    let empty = CsvRow {
        experiment_id: 0,
        experiment: "",
        run_seq: 0,
        round: 0,
        variant: "",
        workload: "",
        status: "",
        error: None,
        metric: None,
        unit: None,
        higher_is_better: None,
        value: None,
    };
    // serde writes the header, from the field names, with the first row.
    let mut w = csv::Writer::from_writer(Vec::new());
    if w.serialize(empty).is_err() {
        return Vec::new();
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().split(',').map(str::to_string).collect()
}
