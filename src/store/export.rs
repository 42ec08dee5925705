//! What `fslab export` writes: one experiment whole (everything but raw
//! samples) as plain serde data; the report layer renders it as JSON (its
//! serde shape) or CSV (`report::documents::export`).
//!
//! Serialised from structs, so a field added to a stored type appears in
//! the JSON without being listed here.

use anyhow::{Context, Result};
use serde::Serialize;

use super::{ExperimentRow, Store, StoredRun, VariantRow, WorkloadRow};
use crate::inspect::machine::Machine;
use crate::stored::{ExperimentStatus, StoredEnvironment, StoredPlan};

/// One experiment and all its runs.
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
#[derive(Clone, Debug, Serialize)]
pub struct Export {
    pub experiment: ExportedExperiment,
    pub runs: Vec<ExportedRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExportedExperiment {
    pub id: i64,
    pub uuid: String,
    pub name: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: ExperimentStatus,
    pub spec_path: Option<String>,
    pub spec_hash: String,
    pub spec_text: String,
    pub seed: u64,
    pub campaign: Option<String>,
    pub shard_count: Option<usize>,
    pub tags: Vec<(String, String)>,
    pub plan: StoredPlan,
    pub environment: StoredEnvironment,
    pub variants: Vec<Configured<VariantRow>>,
    pub workloads: Vec<Configured<WorkloadRow>>,
}

/// A variant or workload with its `config_json` embedded as parsed `config`.
#[derive(Clone, Debug, Serialize)]
pub struct Configured<T> {
    #[serde(flatten)]
    pub row: T,
    pub config: serde_json::Value,
}

/// A stored run and the machine it ran on.
#[derive(Clone, Debug, Serialize)]
pub struct ExportedRun {
    #[serde(flatten)]
    pub run: StoredRun,
    pub machine: Option<Machine>,
}

/// Experiment `experiment_id` of `store`, whole.
pub fn export(store: &Store, experiment_id: i64) -> Result<Export> {
    let loc = store.location();
    let e: ExperimentRow = store.experiment(experiment_id)?;
    let meta = store.experiment_meta(experiment_id)?;
    let configured = |what: String, text: &str| -> Result<serde_json::Value> {
        serde_json::from_str(text)
            .with_context(|| format!("{what} of experiment {experiment_id} in {loc} is not valid JSON"))
    };
    let variants = e
        .variants
        .into_iter()
        .map(|v| {
            Ok(Configured { config: configured(format!("config of variant {:?}", v.name), &v.config_json)?, row: v })
        })
        .collect::<Result<_>>()?;
    let workloads = e
        .workloads
        .into_iter()
        .map(|w| {
            Ok(Configured { config: configured(format!("config of workload {:?}", w.label), &w.config_json)?, row: w })
        })
        .collect::<Result<_>>()?;
    let experiment = ExportedExperiment {
        id: e.id,
        uuid: meta.uuid,
        name: e.name,
        created_at: e.created_at,
        finished_at: e.finished_at,
        status: e.status,
        spec_path: e.spec_path,
        spec_hash: e.spec_hash,
        spec_text: e.spec_text,
        seed: e.seed,
        campaign: meta.campaign,
        shard_count: meta.shard_count,
        tags: meta.tags,
        plan: e.plan,
        environment: e.environment,
        variants,
        workloads,
    };
    let runs = store
        .runs(experiment_id)?
        .into_iter()
        .map(|run| Ok(ExportedRun { machine: store.run_machine(run.id)?.map(|m| m.machine), run }))
        .collect::<Result<_>>()?;
    Ok(Export { experiment, runs })
}
