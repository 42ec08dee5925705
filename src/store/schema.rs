//! Schema and migrations.
//!
//! The schema version is `PRAGMA user_version`: version N means the first N
//! entries of [`MIGRATIONS`] have been applied. Migrations are append-only:
//! never edit one that has shipped, add a new one instead. Each is applied in
//! its own transaction together with the version bump, so a crash leaves the
//! database at a well-defined version.

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, TransactionBehavior};

/// Marks a database as an fslab store (`PRAGMA application_id`, "FSLB").
pub(crate) const APPLICATION_ID: i64 = 0x4653_4C42;

/// The schema version this code writes and fully understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Ordered migrations; entry i takes the schema from version i to i + 1.
const MIGRATIONS: &[&str] = &[V1_CORE, V2_MONITOR, V3_EXTRAS];

/// v1: experiments, their variants and workloads, runs and workload metrics.
const V1_CORE: &str = "
PRAGMA application_id = 1179864130; -- = APPLICATION_ID

CREATE TABLE experiments (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT NOT NULL,
    created_at       TEXT NOT NULL,           -- RFC 3339 UTC
    finished_at      TEXT,                    -- RFC 3339 UTC
    status           TEXT NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
    spec_path        TEXT,
    spec_text        TEXT NOT NULL,
    spec_hash        TEXT NOT NULL,
    seed             TEXT NOT NULL,           -- u64 as decimal: SQLite integers are signed
    plan_json        TEXT NOT NULL,
    environment_json TEXT NOT NULL
);
CREATE INDEX experiments_name_hash ON experiments (name, spec_hash);

CREATE TABLE variants (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    name          TEXT NOT NULL,
    config_json   TEXT NOT NULL,
    PRIMARY KEY (experiment_id, position),
    UNIQUE (experiment_id, name)
);

CREATE TABLE workloads (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    label         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    config_json   TEXT NOT NULL,
    PRIMARY KEY (experiment_id, position),
    UNIQUE (experiment_id, label)
);

-- REAL measurement columns are nullable because SQLite stores NaN as NULL.
CREATE TABLE runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id       INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    seq                 INTEGER NOT NULL,
    round               INTEGER NOT NULL,
    variant             TEXT NOT NULL,
    workload            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error               TEXT,
    started_at          REAL,                 -- unix seconds
    wall_s              REAL,
    -- mount facts: all NULL when the run has none (mount_fstype decides)
    mount_source        TEXT,
    mount_fstype        TEXT,
    mount_options       TEXT,
    mount_super_options TEXT,
    mount_fs_options    TEXT,
    geometry            TEXT,
    UNIQUE (experiment_id, seq)
);
CREATE INDEX runs_experiment_workload_variant ON runs (experiment_id, workload, variant);

CREATE TABLE metrics (
    run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position         INTEGER NOT NULL,        -- order the workload reported them
    name             TEXT NOT NULL,
    unit             TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL CHECK (higher_is_better IN (0, 1)),
    value            REAL,
    PRIMARY KEY (run_id, position),
    UNIQUE (run_id, name)
);
CREATE INDEX metrics_name ON metrics (name);
";

/// v2: monitor data: device totals and per-interval iostat and CPU samples.
const V2_MONITOR: &str = "
ALTER TABLE runs ADD COLUMN has_monitor INTEGER NOT NULL DEFAULT 0 CHECK (has_monitor IN (0, 1));
ALTER TABLE runs ADD COLUMN monitor_device TEXT;
ALTER TABLE runs ADD COLUMN monitor_interval_s REAL;

CREATE TABLE disk_totals (
    run_id       INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    read_mb      REAL,
    written_mb   REAL,
    discarded_mb REAL,
    reads        INTEGER NOT NULL,
    writes       INTEGER NOT NULL,
    discards     INTEGER NOT NULL,
    flushes      INTEGER NOT NULL,
    mean_read_kb  REAL,
    mean_write_kb REAL,
    busy_s       REAL,
    duration_s   REAL
);

CREATE TABLE iostat_samples (
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx      INTEGER NOT NULL,
    t_s      REAL,
    r_s      REAL,
    w_s      REAL,
    d_s      REAL,
    f_s      REAL,
    rkb_s    REAL,
    wkb_s    REAL,
    dkb_s    REAL,
    rrqm_s   REAL,
    wrqm_s   REAL,
    drqm_s   REAL,
    rrqm_pct REAL,
    wrqm_pct REAL,
    drqm_pct REAL,
    r_await  REAL,
    w_await  REAL,
    d_await  REAL,
    f_await  REAL,
    aqu_sz   REAL,
    rareq_sz REAL,
    wareq_sz REAL,
    dareq_sz REAL,
    util_pct REAL,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE cpu_samples (
    run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    t_s         REAL,
    user_pct    REAL,
    nice_pct    REAL,
    sys_pct     REAL,
    iowait_pct  REAL,
    irq_pct     REAL,
    softirq_pct REAL,
    steal_pct   REAL,
    idle_pct    REAL,
    PRIMARY KEY (run_id, idx)
);
";

/// v3: per-run extras: JSON documents by kind (`blocktrace`, `fs_before`,
/// `fs_after`, `fs_delta`, `notes`), so new monitors need no new tables.
const V3_EXTRAS: &str = "
CREATE TABLE run_extras (
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,                -- order written
    kind     TEXT NOT NULL,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX run_extras_kind ON run_extras (kind);
";

/// Reads `PRAGMA user_version`.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    let v: i64 = conn.query_row("SELECT user_version FROM pragma_user_version", [], |r| r.get(0))?;
    // Negative versions are not ours; map them above anything we know.
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Brings the database from its current version up to `target`.
///
/// `target` is [`SCHEMA_VERSION`] except in tests that need an old schema.
pub(crate) fn migrate(conn: &mut Connection, loc: &str, target: u32) -> Result<()> {
    let target = target.min(SCHEMA_VERSION);
    check_identity(conn, loc)?;
    loop {
        // IMMEDIATE takes the write lock first, and the version is re-read
        // under it, so two processes opening a fresh file cannot both apply
        // the same migration.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .with_context(|| format!("cannot lock {loc} to check its schema"))?;
        let version = user_version(&tx).with_context(|| format!("cannot read schema version of {loc}"))?;
        if version > SCHEMA_VERSION {
            bail!(too_new(loc, version));
        }
        if version >= target {
            return Ok(());
        }
        let sql = MIGRATIONS[version as usize];
        let next = version + 1;
        tx.execute_batch(sql)
            .with_context(|| format!("cannot migrate {loc} from schema version {version} to {next}"))?;
        // The version is an integer we produced, so formatting it is safe.
        tx.execute_batch(&format!("PRAGMA user_version = {next};"))
            .with_context(|| format!("cannot set schema version {next} in {loc}"))?;
        tx.commit().with_context(|| format!("cannot commit schema version {next} in {loc}"))?;
    }
}

fn too_new(loc: &str, version: u32) -> String {
    format!(
        "{loc} has schema version {version}, newer than this fslab understands \
         (up to {SCHEMA_VERSION}); use a newer fslab to open it"
    )
}

/// Refuses SQLite files that belong to something else, before touching them.
fn check_identity(conn: &Connection, loc: &str) -> Result<()> {
    // The first real read is where SQLite notices a file is not a database.
    let app_id: i64 = conn
        .query_row("SELECT application_id FROM pragma_application_id", [], |r| r.get(0))
        .with_context(|| format!("cannot read {loc} as an SQLite database"))?;
    let version = user_version(conn).with_context(|| format!("cannot read schema version of {loc}"))?;
    if app_id != 0 && app_id != APPLICATION_ID {
        bail!("{loc} is an SQLite database of another application (application_id {app_id:#x}), not an fslab store");
    }
    if version > SCHEMA_VERSION {
        bail!(too_new(loc, version));
    }
    if version == 0 {
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                [],
                |r| r.get(0),
            )
            .with_context(|| format!("cannot list tables of {loc}"))?;
        if tables > 0 {
            bail!("{loc} is an SQLite database with tables but no fslab schema version; not an fslab store");
        }
    }
    Ok(())
}
