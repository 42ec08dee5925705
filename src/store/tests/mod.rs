//! The store's tests, run on every backend: SQLite always, PostgreSQL when
//! `FSLAB_TEST_POSTGRES` names a server (`./scripts/test` starts a private
//! one; without it the PostgreSQL half is skipped, which fails under CI).
//!
//! Each PostgreSQL test gets its own schema (through the URL's
//! `options=-csearch_path=…`), dropped when the test ends, so tests run in
//! parallel against one server without seeing each other.

mod bench;
mod core;
mod fleet;
mod leases;
mod merge;
mod proxy;
mod rows;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::monitor::{CpuSample, IostatSample, MonitorData};
use crate::record::RunRecord;

/// One database a test runs against.
pub(crate) struct TestDb {
    pub location: StoreLocation,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
    /// `(server URL, schema)` to drop at the end.
    pg_schema: Option<(String, String)>,
}

impl TestDb {
    /// Opens (creating) the store.
    pub fn open(&self) -> Store {
        Store::open(&self.location).unwrap_or_else(|e| panic!("opening {}: {e:#}", self.location))
    }

    pub fn is_postgres(&self) -> bool {
        self.location.is_postgres()
    }

    /// A second, independent database of the same backend.
    pub fn sibling(&self, tag: &str) -> TestDb {
        if self.is_postgres() {
            pg_db(tag).expect("the server answered a moment ago")
        } else {
            sqlite_db(tag)
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg_schema {
            if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let clean: String =
        tag.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    format!("fslab_t_{clean}_{}_{n}", std::process::id())
}

pub(crate) fn sqlite_db(tag: &str) -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(format!("{}.db", unique(tag)));
    TestDb { location: StoreLocation::Sqlite(path), backend: "sqlite", _dir: Some(dir), pg_schema: None }
}

/// The test server's URL, or `None` after [`crate::testsupport::skip`].
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("FSLAB_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            crate::testsupport::skip(
                "the PostgreSQL half of the store tests needs FSLAB_TEST_POSTGRES (./scripts/test starts a server)",
            );
            None
        }
    }
}

/// A fresh, empty schema on the test server as its own store location.
pub(crate) fn pg_db(tag: &str) -> Option<TestDb> {
    let url = postgres_url()?;
    let schema = unique(tag);
    let mut c = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("FSLAB_TEST_POSTGRES={url} does not answer: {e}"));
    c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
    Some(TestDb {
        location: StoreLocation::Postgres(with_schema(&url, &schema)),
        backend: "postgres",
        _dir: None,
        pg_schema: Some((url, schema)),
    })
}

/// `url` with `search_path` set to `schema`.
pub(crate) fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// Every backend available here, each with a fresh database.
pub(crate) fn test_dbs(tag: &str) -> Vec<TestDb> {
    let mut v = vec![sqlite_db(tag)];
    v.extend(pg_db(tag));
    v
}

pub(crate) fn variant(position: usize, name: &str) -> VariantRow {
    VariantRow {
        position,
        name: name.into(),
        config_json: format!("{{\"mkfs\":\"-O ^has_journal\",\"n\":{position}}}"),
    }
}

pub(crate) fn workload(position: usize, label: &str) -> WorkloadRow {
    WorkloadRow { position, label: label.into(), kind: "untar".into(), config_json: "{\"files\":1000}".into() }
}

pub(crate) fn new_exp(name: &str, hash: &str) -> NewExperiment {
    NewExperiment {
        name: name.into(),
        spec_path: Some("/tmp/exp.toml".into()),
        spec_text: "name = \"x\"\n".into(),
        spec_hash: hash.into(),
        seed: u64::MAX, // above i64::MAX on purpose
        plan: crate::stored::StoredPlan { first_rounds: vec![serde_json::json!({"seq": 0})], ..Default::default() },
        environment: crate::stored::StoredEnvironment {
            host: crate::inspect::environment::Environment {
                kernel_release: "6.8.0".into(),
                cpu_count: 2,
                ..Default::default()
            },
            ..Default::default()
        },
        variants: vec![variant(0, "zeta"), variant(1, "alpha")],
        workloads: vec![workload(0, "second"), workload(1, "first")],
    }
}

pub(crate) fn run(
    seq: usize,
    round: usize,
    variant: &str,
    workload: &str,
    status: RunStatus,
    metrics: Vec<Metric>,
) -> RunRecord {
    RunRecord {
        seq,
        round,
        variant: variant.into(),
        workload: workload.into(),
        status: Some(status),
        error: (status == RunStatus::Failed).then(|| "mkfs failed".to_string()),
        started_at: 1_700_000_000.25 + seq as f64,
        wall_s: 12.5,
        metrics,
        monitor: None,
        mount: None,
        geometry: None,
        ..RunRecord::default()
    }
}

pub(crate) fn iostat(i: usize) -> IostatSample {
    columns::testing::distinct(u32::try_from(i).unwrap())
}

pub(crate) fn cpu(i: usize) -> CpuSample {
    columns::testing::distinct(u32::try_from(i).unwrap() + 500)
}

/// A run with everything a run can carry, `disk`/`cpu` samples of each kind.
pub(crate) fn full_run_with(seq: usize, disk: usize, cpus: usize) -> RunRecord {
    let mut r = run(
        seq,
        0,
        "zeta",
        "second",
        RunStatus::Ok,
        vec![Metric::lower("elapsed", "s", 61.25), Metric::higher("throughput", "MB/s", 88.5)],
    );
    r.mount = Some(MountFacts {
        source: "/dev/loop3".into(),
        fstype: "ext4".into(),
        mount_options: "rw,relatime".into(),
        super_options: "rw,data=ordered".into(),
        fs_options: Some("rw,delalloc,barrier".into()),
    });
    r.geometry = Some("Block size: 4096\nInode count: 65536\n".into());
    r.monitor = Some(MonitorData {
        device: Some("loop3".into()),
        interval_s: 1.0,
        disk: (0..disk).map(iostat).collect(),
        cpu: (0..cpus).map(cpu).collect(),
        disk_totals: Some(DiskTotals {
            read_mb: 1.5,
            written_mb: 1024.25,
            discarded_mb: 0.0,
            reads: 12,
            writes: 1 << 40,
            discards: 0,
            flushes: 7,
            mean_read_kb: 128.0,
            mean_write_kb: 512.0,
            busy_s: 55.5,
            duration_s: 61.0,
        }),
    });
    r.extras = vec![
        ("blocktrace".into(), serde_json::json!({"enabled": false, "reason": "no tracefs"})),
        ("fs_before".into(), serde_json::json!({"fstype": "ext4"})),
    ];
    r.notes = vec!["fs_after: boom".into()];
    r.place = Some(crate::record::RunPlace {
        kind: "vm".into(),
        kernel_release: "6.1.0-50-cloud-amd64".into(),
        accelerator: Some("tcg".into()),
        cpus: Some(2),
        memory_mib: Some(1024),
        cmdline: vec!["mitigations=off".into()],
        boot_s: Some(40.5),
        warmup_s: Some(3.5),
        warnings: vec!["timings are emulated".into()],
    });
    r
}

pub(crate) fn full_run(seq: usize) -> RunRecord {
    full_run_with(seq, 3, 2)
}

pub(crate) fn count(store: &Store, table: &str) -> i64 {
    store.read(|q| q.query_one(&format!("SELECT count(*) FROM {table}"), &[])?.get(0)).unwrap()
}

pub(crate) fn err_text(e: anyhow::Error) -> String {
    format!("{e:#}")
}

/// A run record as JSON, for comparing whole records.
pub(crate) fn json(r: &RunRecord) -> serde_json::Value {
    serde_json::to_value(r).unwrap()
}
