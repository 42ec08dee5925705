//! Schema and migrations, one list for both backends.
//!
//! Version N means the first N entries of [`MIGRATIONS`] have been applied.
//! SQLite keeps N in `PRAGMA user_version` (and marks the file with
//! `PRAGMA application_id`); PostgreSQL in the one-row table
//! `fslab_schema`. Migrations are append-only: never edit one that has
//! shipped, add a new one instead.
//!
//! The DDL is written once in SQLite's spelling and rendered for
//! PostgreSQL by [`render`]: `$ID` is an auto-assigned 64-bit key,
//! `INTEGER` becomes `BIGINT` (the store's integers are all 64-bit) and
//! `REAL` becomes `DOUBLE PRECISION`.
//!
//! Concurrency: on SQLite each migration runs in its own `BEGIN IMMEDIATE`
//! transaction with the version re-read under the write lock; on
//! PostgreSQL all pending migrations run in one transaction that first
//! takes `pg_advisory_xact_lock`, in READ COMMITTED so that a process that
//! waited for the lock sees the version the other one committed. Either
//! way two fslab processes opening a fresh database never both migrate.

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::sql::{params, Dialect, Lite, Sql};

/// Marks a database as an fslab store (`PRAGMA application_id`, "FSLB";
/// also the PostgreSQL advisory-lock key for migrations).
pub(crate) const APPLICATION_ID: i64 = 0x4653_4C42;

/// The schema version this code writes and fully understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// One schema step: `sql`, then `backfill` (Rust code, for values SQL
/// cannot compute the same way on both backends), then `after`.
struct Migration {
    sql: &'static str,
    backfill: Option<fn(&mut dyn Sql) -> Result<()>>,
    after: &'static str,
}

const fn ddl(sql: &'static str) -> Migration {
    Migration { sql, backfill: None, after: "" }
}

/// Ordered migrations; entry i takes the schema from version i to i + 1.
const MIGRATIONS: &[Migration] = &[
    ddl(V1_CORE),
    ddl(V2_MONITOR),
    ddl(V3_EXTRAS),
    Migration { sql: V4_FLEET, backfill: Some(backfill_v4), after: V4_FLEET_INDEXES },
    Migration { sql: "", backfill: Some(backfill_v5), after: "" },
    ddl(V6_LEASES),
];

/// v1: experiments, their variants and workloads, runs and workload metrics.
const V1_CORE: &str = "
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

/// v4: identities and fleets (issue #10): a stable uuid per experiment and
/// run, campaigns with their shards, experiment tags, the machine each run
/// ran on; and the CPU guest columns v2 forgot.
const V4_FLEET: &str = "
ALTER TABLE experiments ADD COLUMN uuid TEXT;           -- set for every row (backfilled)
ALTER TABLE experiments ADD COLUMN campaign TEXT;       -- shards of one campaign share one experiment
ALTER TABLE experiments ADD COLUMN shard_count INTEGER; -- N of --shard K/N, for campaigns

CREATE TABLE experiment_tags (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    PRIMARY KEY (experiment_id, key, value)
);
CREATE INDEX experiment_tags_key_value ON experiment_tags (key, value);

CREATE TABLE machines (
    id             $ID,
    fingerprint    TEXT NOT NULL UNIQUE,      -- hash of every field below
    hardware       TEXT NOT NULL,             -- hash of all but kernel_release
    hostname       TEXT NOT NULL,
    product_name   TEXT,
    cpu_model      TEXT,
    cpus           INTEGER NOT NULL,
    memory_bytes   INTEGER NOT NULL,
    kernel_release TEXT NOT NULL,
    device_model   TEXT
);
CREATE INDEX machines_hardware ON machines (hardware);

CREATE TABLE shards (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    shard_index   INTEGER NOT NULL,           -- K of --shard K/N (1-based)
    shard_count   INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('running', 'complete', 'interrupted', 'failed')),
    hostname      TEXT NOT NULL,
    machine_id    INTEGER REFERENCES machines (id),
    joined_at     TEXT NOT NULL,              -- RFC 3339 UTC
    heartbeat_at  TEXT NOT NULL,
    finished_at   TEXT,
    PRIMARY KEY (experiment_id, shard_index)
);

ALTER TABLE runs ADD COLUMN uuid TEXT;
ALTER TABLE runs ADD COLUMN machine_id INTEGER REFERENCES machines (id);
ALTER TABLE runs ADD COLUMN shard INTEGER;

-- Rows written before v4 read 0 here, as they did before.
ALTER TABLE cpu_samples ADD COLUMN guest_pct REAL DEFAULT 0;
ALTER TABLE cpu_samples ADD COLUMN guest_nice_pct REAL DEFAULT 0;
";

/// After v4's backfill: every experiment and run has its uuid.
const V4_FLEET_INDEXES: &str = "
CREATE UNIQUE INDEX experiments_uuid ON experiments (uuid);
CREATE UNIQUE INDEX experiments_campaign ON experiments (campaign);
CREATE UNIQUE INDEX runs_uuid ON runs (uuid);
CREATE INDEX runs_machine ON runs (machine_id);
";

/// v6: leases (issue 20 item 4): the process measuring an experiment
/// (`shard_index` 0) or one shard `K` of a campaign claims it here before
/// its first run and renews the claim while it measures, so a second
/// process refuses instead of measuring the same runs at the same time.
/// A row, not a database session lock: a PostgreSQL restart keeps it.
/// `start_time` is `/proc/PID/stat` field 22 (with `boot_id`, it tells a
/// reused pid apart); times are RFC 3339 UTC.
const V6_LEASES: &str = "
CREATE TABLE leases (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    shard_index   INTEGER NOT NULL,           -- K of --shard K/N; 0 for the whole experiment
    hostname      TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    start_time    INTEGER NOT NULL,
    boot_id       TEXT NOT NULL,
    version       TEXT NOT NULL,              -- the holder's fslab version
    workdir       TEXT NOT NULL,
    acquired_at   TEXT NOT NULL,
    heartbeat_at  TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    PRIMARY KEY (experiment_id, shard_index)
);
";

/// Gives experiments and runs stored before v4 a uuid derived from what
/// they hold, so two copies of one old file upgrade to the same identities
/// (and merge as one) instead of getting random ones.
fn backfill_v4(q: &mut dyn Sql) -> Result<()> {
    for r in q.query("SELECT id, name, created_at, spec_hash, seed FROM experiments WHERE uuid IS NULL", &[])? {
        let id: i64 = r.get(0)?;
        let parts = [r.get::<String, _>(1)?, r.get(2)?, r.get(3)?, r.get(4)?, id.to_string()];
        let uuid = derived_uuid("experiment", &parts);
        q.execute("UPDATE experiments SET uuid = ?1 WHERE id = ?2", params![uuid, id])?;
    }
    let rows = q.query(
        "SELECT r.id, r.seq, e.uuid FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.uuid IS NULL",
        &[],
    )?;
    for r in rows {
        let id: i64 = r.get(0)?;
        let uuid = derived_uuid("run", &[r.get(2)?, r.get::<i64, _>(1)?.to_string()]);
        q.execute("UPDATE runs SET uuid = ?1 WHERE id = ?2", params![uuid, id])?;
    }
    Ok(())
}

/// v5, typed documents: an experiment's `plan_json` and `environment_json`
/// are read as `stored::StoredPlan` and `stored::StoredEnvironment`, which
/// are JSON objects. The earliest stores wrote the plan as the bare list of
/// runs; that list becomes the plan's `first_rounds`, and any other
/// top-level value that is not an object becomes `{}` (it held nothing a
/// reader used). Written against JSON values, not the Rust types, so later
/// changes to those types do not change what this step does. Text that is
/// not JSON at all is left as it is: reading it then fails naming the
/// experiment and the document.
fn backfill_v5(q: &mut dyn Sql) -> Result<()> {
    use serde_json::{json, Value};
    for r in q.query("SELECT id, plan_json, environment_json FROM experiments", &[])? {
        let id: i64 = r.get(0)?;
        let (plan, environment): (String, String) = (r.get(1)?, r.get(2)?);
        let plan = match serde_json::from_str::<Value>(&plan) {
            Ok(Value::Array(runs)) => Some(json!({ "first_rounds": runs })),
            Ok(Value::Object(_)) | Err(_) => None,
            Ok(_) => Some(json!({})),
        };
        let environment = match serde_json::from_str::<Value>(&environment) {
            Ok(Value::Object(_)) | Err(_) => None,
            Ok(_) => Some(json!({})),
        };
        if let Some(plan) = plan {
            q.execute("UPDATE experiments SET plan_json = ?1 WHERE id = ?2", params![plan.to_string(), id])?;
        }
        if let Some(environment) = environment {
            q.execute(
                "UPDATE experiments SET environment_json = ?1 WHERE id = ?2",
                params![environment.to_string(), id],
            )?;
        }
    }
    Ok(())
}

/// A UUID (version 8, "custom") from the SHA-256 of `kind` and `parts`.
pub(crate) fn derived_uuid(kind: &str, parts: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    for p in parts {
        h.update([0u8]);
        h.update(p.as_bytes());
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

/// `sql` in `dialect`'s spelling (see the module comment).
pub(crate) fn render(sql: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => sql.replace("$ID", "INTEGER PRIMARY KEY AUTOINCREMENT"),
        Dialect::Postgres => {
            let sql = sql
                .replace("$ID", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
                .replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
            replace_word(&replace_word(&sql, "INTEGER", "BIGINT"), "REAL", "DOUBLE PRECISION")
        }
    }
}

/// Replaces `word` where it stands alone (not inside a longer identifier).
fn replace_word(s: &str, word: &str, with: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}

fn apply(q: &mut dyn Sql, m: &Migration) -> Result<()> {
    q.batch(&render(m.sql, q.dialect()))?;
    if let Some(f) = m.backfill {
        f(q)?;
    }
    if !m.after.is_empty() {
        q.batch(&render(m.after, q.dialect()))?;
    }
    Ok(())
}

/// Reads `PRAGMA user_version`.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    let v: i64 = conn.query_row("SELECT user_version FROM pragma_user_version", [], |r| r.get(0))?;
    // Negative versions are not ours; map them above anything we know.
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Error text for opening a database that holds no store where one must exist.
pub(crate) fn no_store(loc: &str) -> String {
    format!("{loc} holds no fslab store (only `fslab run`, `fslab quickstart` and `fslab merge --into` create one)")
}

/// Brings an SQLite database from its current version up to `target`;
/// an empty one only if `create`.
///
/// `target` is [`SCHEMA_VERSION`] except in tests that need an old schema.
pub(crate) fn migrate_sqlite(conn: &mut Connection, loc: &str, target: u32, create: bool) -> Result<()> {
    let target = target.min(SCHEMA_VERSION);
    check_identity(conn, loc)?;
    if !create && user_version(conn).with_context(|| format!("cannot read schema version of {loc}"))? == 0 {
        bail!(no_store(loc));
    }
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
        let next = version + 1;
        if version == 0 {
            // The version is an integer we produced, so formatting it is safe.
            tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID};"))
                .with_context(|| format!("cannot mark {loc} as an fslab store"))?;
        }
        apply(&mut Lite(&tx), &MIGRATIONS[version as usize])
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

/// The schema version of a PostgreSQL store (0 when it has none yet).
pub(crate) fn pg_version(q: &mut dyn Sql) -> Result<u32> {
    let exists: Option<String> = q.query_one("SELECT to_regclass('fslab_schema')::text", &[])?.get(0)?;
    if exists.is_none() {
        return Ok(0);
    }
    let v: i64 = q.query_one("SELECT version FROM fslab_schema", &[])?.get(0)?;
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Brings a PostgreSQL database up to `target`, inside the caller's READ
/// COMMITTED transaction; an empty database only if `create`.
pub(crate) fn migrate_postgres(q: &mut dyn Sql, loc: &str, target: u32, create: bool) -> Result<()> {
    let target = target.min(SCHEMA_VERSION);
    q.execute("SELECT pg_advisory_xact_lock(?1)", params![APPLICATION_ID])
        .with_context(|| format!("cannot lock {loc} to check its schema"))?;
    let has_schema: Option<String> = q.query_one("SELECT to_regclass('fslab_schema')::text", &[])?.get(0)?;
    if has_schema.is_none() {
        let foreign: Option<String> = q.query_one("SELECT to_regclass('experiments')::text", &[])?.get(0)?;
        if foreign.is_some() {
            bail!("{loc} has an `experiments` table but no fslab_schema table; not an fslab store");
        }
        if !create {
            bail!(no_store(loc));
        }
        q.batch(
            "CREATE TABLE fslab_schema (
                 application TEXT NOT NULL CHECK (application = 'fslab'),
                 version     BIGINT NOT NULL
             );
             INSERT INTO fslab_schema (application, version) VALUES ('fslab', 0);",
        )
        .with_context(|| format!("cannot create the schema version table in {loc}"))?;
    }
    let rows = q.query("SELECT application, version FROM fslab_schema", &[])?;
    let [row] = rows.as_slice() else {
        bail!("{loc}: fslab_schema must hold exactly one row, it holds {}; not an fslab store", rows.len());
    };
    let version = u32::try_from(row.get::<i64, _>(1)?).unwrap_or(u32::MAX);
    if version > SCHEMA_VERSION {
        bail!(too_new(loc, version));
    }
    for v in version..target {
        let next = v + 1;
        apply(q, &MIGRATIONS[v as usize])
            .with_context(|| format!("cannot migrate {loc} from schema version {v} to {next}"))?;
        q.execute("UPDATE fslab_schema SET version = ?1", params![i64::from(next)])
            .with_context(|| format!("cannot set schema version {next} in {loc}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_for_postgres() {
        let pg = render(
            "id $ID, n INTEGER NOT NULL, x REAL, r INTEGER PRIMARY KEY AUTOINCREMENT, REALM INTEGERS",
            Dialect::Postgres,
        );
        assert_eq!(
            pg,
            "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, x DOUBLE PRECISION, \
             r BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, REALM INTEGERS"
        );
        assert_eq!(render("id $ID", Dialect::Sqlite), "id INTEGER PRIMARY KEY AUTOINCREMENT");
    }

    #[test]
    fn derived_uuids_are_stable_and_distinct() {
        let a = derived_uuid("run", &["x".into(), "1".into()]);
        assert_eq!(a, derived_uuid("run", &["x".into(), "1".into()]));
        assert_ne!(a, derived_uuid("run", &["x1".into(), "".into()]));
        assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 8);
    }
}
