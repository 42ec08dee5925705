//! Where results live: an SQLite file (the default) or a PostgreSQL
//! database shared by a fleet of machines, behind one [`Store`].
//!
//! One experiment is one row in `experiments` plus its variants, workloads,
//! tags and runs; each run carries its workload metrics, device totals, raw
//! monitor samples, extras and the machine it ran on. Shards of one
//! campaign (`fslab run --shard K/N`) join one experiment ([`campaign`]).
//! The store owns the schema (versioned, see [`schema`]), writes each run
//! in one transaction and answers the queries the report and stats stages
//! need. It formats nothing except the plain JSON/CSV exports in [`export`].
//!
//! Both backends run the same SQL through [`sql`] (why a dialect layer:
//! see there). An SQLite store stays in the default rollback-journal mode
//! (no WAL), so a finished store is exactly one file that can be copied or
//! mailed; [`merge`] combines such files.

pub mod campaign;
mod columns;
pub mod export;
mod extras;
mod kernels;
mod location;
mod machines;
pub mod merge;
pub mod owner;
mod pg;
mod read;
mod runs;
mod schema;
pub mod spool;
mod sql;
mod tags;
mod write;

#[cfg(test)]
pub(crate) mod tests;

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::metric::Metric;
use crate::monitor::DiskTotals;
use crate::record::{MountFacts, RunStatus};
use crate::stored::{ExperimentStatus, StoredEnvironment, StoredPlan};

pub use campaign::{CampaignStatus, Shard, ShardRow};
pub use location::{AsLocation, StoreLocation};
pub use machines::{HardwareUse, MachineUse, StoredMachine};
pub use merge::MergeReport;
pub use schema::SCHEMA_VERSION;
pub use tags::{automatic_tags, parse_tag};

use pg::{Pg, PgSql};
use sql::{Lite, Sql};

/// An open fslab result database.
pub struct Store {
    backend: Backend,
    /// `None` for in-memory stores.
    location: Option<StoreLocation>,
    /// What [`Store::record_run`] attaches to every run it writes.
    context: RecordingContext,
}

enum Backend {
    Sqlite(Connection),
    /// Behind a `RefCell` because the `postgres` client needs `&mut` even
    /// to read, and the store's readers take `&self`; boxed because it is
    /// much larger than an SQLite connection.
    Postgres(Box<RefCell<Pg>>),
}

/// Who records runs, attached to every run [`Store::record_run`] writes:
/// set once with [`Store::set_recording_context`] after opening the store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingContext {
    /// The machine the runs execute on ([`Machine::capture`]).
    ///
    /// [`Machine::capture`]: crate::inspect::machine::Machine::capture
    pub machine: Option<crate::inspect::machine::Machine>,
    /// The shard of a campaign this process runs (`--shard K/N`); each run
    /// it records also beats the shard's heartbeat.
    pub shard: Option<Shard>,
}

/// One variant of an experiment, in plan order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantRow {
    /// 0-based position in the experiment's variant list.
    pub position: usize,
    /// Variant name, unique within the experiment.
    pub name: String,
    /// The variant's resolved configuration as JSON.
    pub config_json: String,
}

/// One workload of an experiment, in plan order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

/// What [`Store::create_experiment`] needs to start a new experiment: the
/// write-side input, a [`StoredExperiment`] without what the store assigns
/// (id, uuid, creation time, status, campaign, tags) or learns later.
///
/// The `config_json` fields must hold valid JSON; the store checks this so
/// exports can always embed them as parsed values.
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
    /// The resolved experiment and its first rounds.
    pub plan: StoredPlan,
    /// The captured environment (kernel, tools, machine, doctor, per-variant
    /// kernels, owner).
    pub environment: StoredEnvironment,
    pub variants: Vec<VariantRow>,
    pub workloads: Vec<WorkloadRow>,
}

/// One experiment as read back from the store ([`Store::experiment`]): its
/// row, identity and labels, variants and workloads. Serialised, it is the
/// `experiment` object of `fslab export` (fields in that order; variants and
/// workloads also carry their `config_json` parsed as `config`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StoredExperiment {
    pub id: i64,
    /// Stable across copies and merges of the store.
    pub uuid: String,
    pub name: String,
    /// RFC 3339, UTC, seconds precision.
    pub created_at: String,
    /// RFC 3339; set when the status became complete, interrupted or failed.
    pub finished_at: Option<String>,
    /// As every reader sees it: a `running` experiment whose owner is gone
    /// is `interrupted` ([`owner`]).
    pub status: ExperimentStatus,
    pub spec_path: Option<String>,
    pub spec_hash: String,
    pub spec_text: String,
    pub seed: u64,
    /// Set for experiments run as shards of a campaign.
    pub campaign: Option<String>,
    /// N of `--shard K/N`, for campaigns.
    pub shard_count: Option<usize>,
    /// `(key, value)` pairs sorted by key, then value; a key may repeat
    /// (e.g. one `hostname` per machine of a campaign).
    pub tags: Vec<(String, String)>,
    pub plan: StoredPlan,
    pub environment: StoredEnvironment,
    #[serde(serialize_with = "export::with_config")]
    pub variants: Vec<VariantRow>,
    #[serde(serialize_with = "export::with_config")]
    pub workloads: Vec<WorkloadRow>,
}

/// One line of the experiment list ([`Store::list_experiments`]): a stored
/// experiment's identity, labels and run counts, without its spec, plan and
/// environment, which a list need not parse.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentSummary {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    /// As in [`StoredExperiment::status`].
    pub status: ExperimentStatus,
    pub runs_ok: usize,
    pub runs_failed: usize,
    /// As in [`StoredExperiment`].
    pub uuid: String,
    pub campaign: Option<String>,
    pub shard_count: Option<usize>,
    pub tags: Vec<(String, String)>,
}

/// One run as read back from the store: the [`RunRecord`](crate::record::RunRecord)'s
/// outcome plus its identity here, without what readers fetch per run on
/// demand (monitor samples: [`Store::samples`]; extras: [`Store::run_extras`];
/// the machine: [`Store::run_machine`]; the whole record: [`Store::run_record`]).
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
    /// Stable across copies and merges (derived for runs stored before schema v4).
    pub uuid: String,
    /// K of `--shard K/N` when a shard of a campaign recorded the run.
    pub shard: Option<usize>,
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

/// Whether opening may create a store that is not there yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Create {
    Yes,
    No,
}

/// How often a write that lost a race with another writer is retried.
const MAX_RETRIES: u32 = 30;

impl Store {
    /// Opens the store at `loc`, creating it if it does not exist, and
    /// brings its schema up to date. For commands that write results
    /// (`run`, `quickstart`, `merge --into`); readers use [`Store::open_existing`].
    ///
    /// `loc` is a [`StoreLocation`] or a path (a path spelling a
    /// `postgres://` URL is one). Fails with a clear error if the database
    /// is not an fslab store or was written by a newer fslab (schema
    /// version above [`SCHEMA_VERSION`]).
    pub fn open<L: AsLocation + ?Sized>(loc: &L) -> Result<Store> {
        Self::open_at(&loc.as_location(), SCHEMA_VERSION, Create::Yes)
    }

    /// Same as [`Store::open`], named for what it does.
    pub fn open_or_create<L: AsLocation + ?Sized>(loc: &L) -> Result<Store> {
        Self::open(loc)
    }

    /// Opens an existing store; a missing SQLite file, or a database
    /// without an fslab store, is an error saying so (nothing is created).
    /// An older schema is still upgraded.
    pub fn open_existing<L: AsLocation + ?Sized>(loc: &L) -> Result<Store> {
        Self::open_at(&loc.as_location(), SCHEMA_VERSION, Create::No)
    }

    /// Opens a fresh in-memory SQLite store (for tests and dry runs).
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().context("cannot open in-memory SQLite database")?;
        let mut store = Store { backend: Backend::Sqlite(conn), location: None, context: RecordingContext::default() };
        store.init(SCHEMA_VERSION, Create::Yes)?;
        Ok(store)
    }

    /// Opens `loc` migrated only up to `target` (test hook for upgrade tests).
    fn open_at(loc: &StoreLocation, target: u32, create: Create) -> Result<Store> {
        let name = loc.to_string();
        let backend = match loc {
            StoreLocation::Sqlite(path) => {
                if create == Create::No && !path.exists() {
                    // A mistyped --db is a usage error (2), like any bad argument.
                    return Err(crate::exit::usage(anyhow::anyhow!(
                        "{name} does not exist (check --db or FSLAB_DB; only `fslab run`, `fslab quickstart` \
                         and `fslab merge --into` create a store)"
                    )));
                }
                let flags = if create == Create::Yes {
                    OpenFlags::default()
                } else {
                    OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE
                };
                let conn = Connection::open_with_flags(path, flags)
                    .with_context(|| format!("cannot open store database {name}"))?;
                Backend::Sqlite(conn)
            }
            StoreLocation::Postgres(url) => Backend::Postgres(Box::new(RefCell::new(Pg::connect(url)?))),
        };
        let mut store = Store { backend, location: Some(loc.clone()), context: RecordingContext::default() };
        store.init(target, create)?;
        Ok(store)
    }

    fn init(&mut self, target: u32, create: Create) -> Result<()> {
        let loc = self.location();
        let create = create == Create::Yes;
        match &mut self.backend {
            Backend::Sqlite(conn) => {
                // Foreign keys are per connection and off by default; they make
                // deleting a run take its metrics and samples with it.
                conn.execute_batch("PRAGMA foreign_keys = ON;").with_context(|| format!("cannot configure {loc}"))?;
                // A report may read while a run is being written; wait rather than fail.
                conn.busy_timeout(Duration::from_secs(10)).with_context(|| format!("cannot configure {loc}"))?;
                conn.set_prepared_statement_cache_capacity(64);
                schema::migrate_sqlite(conn, &loc, target, create)
            }
            Backend::Postgres(_) => self.write(|q| schema::migrate_postgres(q, &loc, target, create)),
        }
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32> {
        let loc = self.location();
        match &self.backend {
            Backend::Sqlite(conn) => schema::user_version(conn).map_err(anyhow::Error::from),
            Backend::Postgres(_) => self.read(schema::pg_version),
        }
        .with_context(|| format!("cannot read schema version of {loc}"))
    }

    /// The SQLite file this store lives in; `None` for in-memory and
    /// PostgreSQL stores.
    pub fn path(&self) -> Option<&Path> {
        self.location.as_ref().and_then(StoreLocation::sqlite_path)
    }

    /// Where this store lives; `None` for in-memory stores.
    pub fn store_location(&self) -> Option<&StoreLocation> {
        self.location.as_ref()
    }

    /// How errors name this database (PostgreSQL URLs without password).
    pub fn location(&self) -> String {
        match &self.location {
            Some(l) => l.to_string(),
            None => ":memory:".to_string(),
        }
    }

    /// Sets what [`Store::record_run`] attaches to each run from now on.
    pub fn set_recording_context(&mut self, context: RecordingContext) {
        self.context = context;
    }

    pub fn recording_context(&self) -> &RecordingContext {
        &self.context
    }

    /// Runs `f` on the connection (autocommit on PostgreSQL).
    fn read<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(conn) => f(&mut Lite(conn)),
            Backend::Postgres(cell) => {
                let mut pg = cell.borrow_mut();
                let result = pg.parts().and_then(|(client, statements)| f(&mut PgSql { client, statements }));
                if let Err(e) = &result {
                    pg.note_error(e);
                }
                result
            }
        }
    }

    /// Runs `f` in a read-only transaction, so its queries see one state.
    fn snapshot<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                let tx = conn.unchecked_transaction()?;
                let v = f(&mut Lite(&tx))?;
                tx.commit()?;
                Ok(v)
            }
            Backend::Postgres(cell) => {
                let mut pg = cell.borrow_mut();
                let result = pg.parts().and_then(|(client, statements)| {
                    let mut tx = client
                        .build_transaction()
                        .isolation_level(postgres::IsolationLevel::RepeatableRead)
                        .read_only(true)
                        .start()
                        .map_err(|e| anyhow!("cannot start a read transaction: {}", pg::describe(&e)))?;
                    let v = f(&mut PgSql { client: &mut tx, statements })?;
                    tx.commit().map_err(|e| anyhow!("cannot end a read transaction: {}", pg::describe(&e)))?;
                    Ok(v)
                });
                if let Err(e) = &result {
                    pg.note_error(e);
                }
                result
            }
        }
    }

    /// Runs `f` in one write transaction: all of it is stored or none.
    ///
    /// SQLite: `BEGIN IMMEDIATE` (the write lock from the start, so the
    /// transaction cannot fail halfway on a lock upgrade; writers take turns).
    ///
    /// PostgreSQL: READ COMMITTED, and `f` runs again (up to
    /// [`MAX_RETRIES`] times) when it lost a race with another writer. The
    /// races are all decided by unique keys: two writers of the same run meet
    /// on `(experiment_id, seq)`, of the same machine on its fingerprint, of
    /// a new campaign on its id; the loser's insert fails, and its retry
    /// finds the winner's row and decides afresh (same run: no-op). Status
    /// derived from several rows (a campaign's shards) is computed under a
    /// lock on the experiment row ([`lock_experiment`]). SERIALIZABLE would
    /// also be correct, but its predicate locks make writers of *different*
    /// runs of one experiment abort each other (86 retries in 300 runs with
    /// four writers, BENCHMARKS.md), for nothing the unique keys do not
    /// already guarantee.
    fn write<T>(&mut self, mut f: impl FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        let loc = self.location();
        match &mut self.backend {
            Backend::Sqlite(conn) => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .with_context(|| format!("cannot start a write transaction on {loc}"))?;
                let v = f(&mut Lite(&tx))?;
                tx.commit().with_context(|| format!("cannot commit to {loc}"))?;
                Ok(v)
            }
            Backend::Postgres(cell) => {
                let pg = cell.get_mut();
                let mut attempt = 0;
                loop {
                    let result = pg.parts().and_then(|(client, statements)| {
                        let mut tx = client
                            .build_transaction()
                            .isolation_level(postgres::IsolationLevel::ReadCommitted)
                            .start()
                            .map_err(|e| {
                                // Kept as the source, so a lost connection is seen as one.
                                let text = pg::describe(&e);
                                anyhow::Error::new(e).context(format!("cannot start a write transaction: {text}"))
                            })?;
                        let v = f(&mut PgSql { client: &mut tx, statements })?;
                        tx.commit().map_err(|e| {
                            let text = pg::describe(&e);
                            anyhow::Error::new(e).context(format!("cannot commit: {text}"))
                        })?;
                        Ok(v)
                    });
                    match result {
                        Ok(v) => return Ok(v),
                        Err(e) if pg::is_retryable(&e) && attempt < MAX_RETRIES => {
                            attempt += 1;
                            std::thread::sleep(backoff(attempt));
                        }
                        Err(e) => {
                            pg.note_error(&e);
                            if pg::is_connection_lost(&e) {
                                return Err(e.context(format!(
                                    "lost the connection to {loc}; nothing of this write was stored \
                                     unless the commit itself was cut (recording the same run again is safe)"
                                )));
                            }
                            return Err(e);
                        }
                    }
                }
            }
        }
    }
}

/// Exponential backoff with jitter, so racing writers spread out.
fn backoff(attempt: u32) -> Duration {
    let base = 5u64 << attempt.min(7);
    let jitter = u64::from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos(),
    ) % base.max(1);
    Duration::from_millis(base + jitter)
}

/// Takes the experiment's row lock until the transaction ends (PostgreSQL;
/// SQLite writers hold the whole database already), so updates derived
/// from several rows of one experiment happen one at a time.
fn lock_experiment(q: &mut dyn Sql, id: i64) -> Result<()> {
    let n = q.execute("UPDATE experiments SET status = status WHERE id = ?1", sql::params![id])?;
    if n == 0 {
        bail!("no experiment {id}");
    }
    Ok(())
}

/// Current time as RFC 3339 UTC with seconds precision.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Checks that `text` is JSON, naming `field` if not.
fn check_json(field: &str, text: &str) -> Result<()> {
    serde_json::from_str::<serde_json::Value>(text).map(|_| ()).with_context(|| format!("{field} is not valid JSON"))
}
