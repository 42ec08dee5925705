//! The SQLite file results live in.
//!
//! One experiment is one row in `experiments` plus its variants, workloads and
//! runs; each run carries its workload metrics, device totals and the raw
//! monitor samples. The store owns the schema (versioned through
//! `PRAGMA user_version`, see [`schema`]), writes each run atomically and
//! answers the queries the report and stats stages need. It formats nothing
//! except the plain JSON/CSV exports in [`export`].
//!
//! The database stays in SQLite's default rollback-journal mode (no WAL), so a
//! finished store is exactly one file that can be copied or mailed.

pub mod export;
mod extras;
mod read;
mod schema;
mod write;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::Connection;
use serde::Serialize;

use crate::metric::Metric;
use crate::monitor::DiskTotals;
use crate::record::{MountFacts, RunStatus};

pub use schema::SCHEMA_VERSION;

/// Experiment status values, as stored in `experiments.status`.
pub const EXPERIMENT_STATUSES: [&str; 4] = ["running", "complete", "interrupted", "failed"];

/// An open fslab result database.
pub struct Store {
    conn: Connection,
    /// `None` for in-memory stores; used to name the database in errors.
    path: Option<PathBuf>,
}

/// One variant of an experiment, in plan order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantRow {
    /// 0-based position in the experiment's variant list.
    pub position: usize,
    /// Variant name, unique within the experiment.
    pub name: String,
    /// The variant's resolved configuration as JSON.
    pub config_json: String,
}

/// One workload of an experiment, in plan order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadRow {
    /// 0-based position in the experiment's workload list.
    pub position: usize,
    /// Workload label, unique within the experiment.
    pub label: String,
    /// Workload kind (e.g. `untar`, `fio`).
    pub kind: String,
    /// The workload's resolved configuration as JSON.
    pub config_json: String,
}

/// What [`Store::create_experiment`] needs to start a new experiment.
///
/// The `*_json` fields must hold valid JSON; the store checks this so exports
/// can always embed them as parsed values.
#[derive(Clone, Debug, PartialEq)]
pub struct NewExperiment {
    pub name: String,
    /// Where the spec was read from, if it came from a file.
    pub spec_path: Option<String>,
    /// The spec text exactly as read, so the experiment can be re-run.
    pub spec_text: String,
    /// Hash of the spec text; with `name`, identifies an experiment to resume.
    pub spec_hash: String,
    pub seed: u64,
    /// The expanded run plan as JSON.
    pub plan_json: String,
    /// The captured environment (kernel, tools, machine) as JSON.
    pub environment_json: String,
    pub variants: Vec<VariantRow>,
    pub workloads: Vec<WorkloadRow>,
}

/// One stored experiment with its variants and workloads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentRow {
    pub id: i64,
    pub name: String,
    /// RFC 3339, UTC, seconds precision.
    pub created_at: String,
    /// RFC 3339; set when the status became complete, interrupted or failed.
    pub finished_at: Option<String>,
    /// One of [`EXPERIMENT_STATUSES`].
    pub status: String,
    pub spec_path: Option<String>,
    pub spec_text: String,
    pub spec_hash: String,
    pub seed: u64,
    pub plan_json: String,
    pub environment_json: String,
    pub variants: Vec<VariantRow>,
    pub workloads: Vec<WorkloadRow>,
}

/// One line of the experiment list.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentSummary {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    pub status: String,
    pub runs_ok: usize,
    pub runs_failed: usize,
}

/// One run as read back from the store (without its monitor samples; see
/// [`Store::samples`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StoredRun {
    /// Database id, for [`Store::samples`].
    pub id: i64,
    pub seq: usize,
    pub round: usize,
    pub variant: String,
    pub workload: String,
    pub status: RunStatus,
    pub error: Option<String>,
    /// Unix time in seconds.
    pub started_at: f64,
    pub wall_s: f64,
    /// Workload metrics in the order the workload reported them.
    pub metrics: Vec<Metric>,
    pub mount: Option<MountFacts>,
    pub geometry: Option<String>,
    pub disk_totals: Option<DiskTotals>,
}

/// All values of one metric for one workload × variant, ready for statistics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricSeries {
    pub workload: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub variant: String,
    /// Values from ok runs only, in seq order (NaN values are left out).
    pub values: Vec<f64>,
}

impl Store {
    /// Opens (creating if needed) the store at `path` and brings its schema up
    /// to date.
    ///
    /// Fails with a clear error if the file is not an fslab store or was
    /// written by a newer fslab (schema version above [`SCHEMA_VERSION`]).
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_at(path, SCHEMA_VERSION)
    }

    /// Opens a fresh in-memory store (for tests and dry runs).
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().context("cannot open in-memory SQLite database")?;
        let mut store = Store { conn, path: None };
        store.init(SCHEMA_VERSION)?;
        Ok(store)
    }

    /// The schema version of the open database (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<u32> {
        schema::user_version(&self.conn).with_context(|| format!("cannot read schema version of {}", self.location()))
    }

    /// The file this store lives in; `None` for in-memory stores.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Opens `path` migrated only up to `target` (test hook for upgrade tests).
    pub(crate) fn open_at(path: &Path, target: u32) -> Result<Store> {
        let conn = Connection::open(path).with_context(|| format!("cannot open store database {}", path.display()))?;
        let mut store = Store { conn, path: Some(path.to_path_buf()) };
        store.init(target)?;
        Ok(store)
    }

    fn init(&mut self, target: u32) -> Result<()> {
        let loc = self.location();
        // Foreign keys are per connection and off by default; they make
        // deleting a run take its metrics and samples with it.
        self.conn.execute_batch("PRAGMA foreign_keys = ON;").with_context(|| format!("cannot configure {loc}"))?;
        // A report may read while a run is being written; wait rather than fail.
        self.conn.busy_timeout(Duration::from_secs(10)).with_context(|| format!("cannot configure {loc}"))?;
        schema::migrate(&mut self.conn, &loc, target)
    }

    /// How errors name this database.
    pub(crate) fn location(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => ":memory:".to_string(),
        }
    }
}

/// Reads a REAL column where NULL stands for NaN (SQLite stores NaN as NULL).
fn real(row: &rusqlite::Row<'_>, idx: &str) -> rusqlite::Result<f64> {
    Ok(row.get::<_, Option<f64>>(idx)?.unwrap_or(f64::NAN))
}

/// Converts a Rust count/position to an SQLite integer (SQLite integers are
/// i64; rusqlite's own unsigned conversions are behind a feature we lack).
fn sql_int<T>(v: T) -> rusqlite::Result<i64>
where
    T: TryInto<i64>,
    T::Error: std::error::Error + Send + Sync + 'static,
{
    v.try_into().map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Reads an INTEGER column into an unsigned Rust type, failing on negatives.
fn get_uint<I: rusqlite::RowIndex + Copy, T: TryFrom<i64>>(row: &rusqlite::Row<'_>, idx: I) -> rusqlite::Result<T> {
    let v: i64 = row.get(idx)?;
    T::try_from(v).map_err(|_| match idx.idx(row.as_ref()) {
        Ok(i) => rusqlite::Error::IntegralValueOutOfRange(i, v),
        Err(e) => e,
    })
}

/// Current time as RFC 3339 UTC with seconds precision.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
