//! What `fslab export` writes: one experiment whole (everything but raw
//! samples) as plain serde data; the report layer renders it as JSON (its
//! serde shape) or CSV (`report::documents::export`).
//!
//! Serialised from structs, so a field added to a stored type appears in
//! the JSON without being listed here.

use anyhow::{Context, Result};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};

use super::{Store, StoredExperiment, StoredRun, VariantRow, WorkloadRow};
use crate::inspect::machine::Machine;

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
    pub experiment: StoredExperiment,
    pub runs: Vec<ExportedRun>,
}

/// A stored run and the machine it ran on.
#[derive(Clone, Debug, Serialize)]
pub struct ExportedRun {
    #[serde(flatten)]
    pub run: StoredRun,
    pub machine: Option<Machine>,
}

/// A variant or workload row: its stored `config_json` is checked before
/// writing, so exports can embed it parsed.
pub trait Configured {
    /// `variant "NAME"` / `workload "LABEL"`, for errors.
    fn what(&self) -> String;
    fn config_json(&self) -> &str;
}

impl Configured for VariantRow {
    fn what(&self) -> String {
        format!("variant {:?}", self.name)
    }
    fn config_json(&self) -> &str {
        &self.config_json
    }
}

impl Configured for WorkloadRow {
    fn what(&self) -> String {
        format!("workload {:?}", self.label)
    }
    fn config_json(&self) -> &str {
        &self.config_json
    }
}

/// Serialises rows as the export shows them: each row's fields plus its
/// `config_json` parsed as `config` (for [`StoredExperiment`]'s serde).
pub(super) fn with_config<T: Configured + Serialize, S: Serializer>(rows: &[T], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithConfig<'a, T> {
        #[serde(flatten)]
        row: &'a T,
        config: serde_json::Value,
    }
    let mut seq = s.serialize_seq(Some(rows.len()))?;
    for row in rows {
        let config = serde_json::from_str(row.config_json())
            .map_err(|e| S::Error::custom(format!("config of {} is not valid JSON: {e}", row.what())))?;
        seq.serialize_element(&WithConfig { row, config })?;
    }
    seq.end()
}

/// Experiment `experiment_id` of `store`, whole.
pub fn export(store: &Store, experiment_id: i64) -> Result<Export> {
    let loc = store.location();
    let experiment = store.experiment(experiment_id)?;
    // Fail here, naming the store, rather than half-way through printing.
    let variants = experiment.variants.iter().map(|v| v as &dyn Configured);
    for row in variants.chain(experiment.workloads.iter().map(|w| w as &dyn Configured)) {
        serde_json::from_str::<serde_json::Value>(row.config_json()).with_context(|| {
            format!("config of {} of experiment {experiment_id} in {loc} is not valid JSON", row.what())
        })?;
    }
    let runs = store
        .runs(experiment_id)?
        .into_iter()
        .map(|run| Ok(ExportedRun { machine: store.run_machine(run.id)?.map(|m| m.machine), run }))
        .collect::<Result<_>>()?;
    Ok(Export { experiment, runs })
}
