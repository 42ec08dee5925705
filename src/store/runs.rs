//! A run as stored: writing one with everything it carries, reading it back
//! whole, and the rule for a run that is already there.
//!
//! [`record_run`](super::Store::record_run) and [`merge`](super::merge)
//! both go through [`put_run`], so a run copied from another store is
//! written exactly like one recorded live.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::columns::{from_row, insert_all, insert_one};
use super::extras::{extras_of, insert_extras, read_extras, record_extras};
use super::machines::{machine_id, StoredMachine};
use super::sql::{int, params, Sql, Value};
use super::{Shard, Store, StoredRun};
use crate::inspect::machine::Machine;
use crate::metric::Metric;
use crate::monitor::{CpuSample, DiskTotals, IostatSample, MonitorData};
use crate::record::{MountFacts, RunRecord, RunStatus};

/// The `runs` table's columns, one field each; [`put_run`] and the readers
/// both go through this struct.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct RunRow {
    #[serde(skip_serializing, default)]
    pub id: i64,
    #[serde(skip_serializing, default)]
    pub experiment_id: i64,
    /// A store-local id; the machine itself travels as [`FullRun::machine`].
    #[serde(skip_serializing, default)]
    pub machine_id: Option<i64>,
    #[serde(default)]
    pub uuid: Option<String>,
    pub seq: usize,
    pub round: usize,
    pub variant: String,
    pub workload: String,
    pub status: String,
    pub error: Option<String>,
    pub started_at: f64,
    pub wall_s: f64,
    pub mount_source: Option<String>,
    pub mount_fstype: Option<String>,
    pub mount_options: Option<String>,
    pub mount_super_options: Option<String>,
    pub mount_fs_options: Option<String>,
    pub geometry: Option<String>,
    pub has_monitor: bool,
    pub monitor_device: Option<String>,
    pub monitor_interval_s: Option<f64>,
    #[serde(default)]
    pub shard: Option<usize>,
}

impl RunRow {
    pub fn status(&self) -> Result<RunStatus> {
        match self.status.as_str() {
            "ok" => Ok(RunStatus::Ok),
            "failed" => Ok(RunStatus::Failed),
            // The CHECK constraint makes this unreachable unless the database was edited.
            other => bail!("run {} has unknown status {other:?}", self.id),
        }
    }

    pub fn mount(&self) -> Option<MountFacts> {
        self.mount_fstype.as_ref().map(|fstype| MountFacts {
            source: self.mount_source.clone().unwrap_or_default(),
            fstype: fstype.clone(),
            mount_options: self.mount_options.clone().unwrap_or_default(),
            super_options: self.mount_super_options.clone().unwrap_or_default(),
            fs_options: self.mount_fs_options.clone(),
        })
    }

    /// The run without metrics and totals (filled in by the caller).
    pub fn to_stored(&self) -> Result<StoredRun> {
        Ok(StoredRun {
            id: self.id,
            seq: self.seq,
            round: self.round,
            variant: self.variant.clone(),
            workload: self.workload.clone(),
            status: self.status()?,
            error: self.error.clone(),
            started_at: self.started_at,
            wall_s: self.wall_s,
            metrics: Vec::new(),
            mount: self.mount(),
            geometry: self.geometry.clone(),
            disk_totals: None,
        })
    }
}

/// Everything stored about one run, free of store-local ids, so it can be
/// compared between stores and written to another.
#[derive(Clone, Debug, Serialize)]
pub(super) struct FullRun {
    /// The row; `id`, `experiment_id`, `machine_id` are ignored on write.
    pub row: RunRow,
    pub metrics: Vec<Metric>,
    pub monitor: Option<MonitorData>,
    pub extras: Vec<(String, serde_json::Value)>,
    pub machine: Option<Machine>,
}

impl FullRun {
    /// A run as the runner produced it, with the recording context.
    pub fn from_record(run: &RunRecord, status: RunStatus, machine: Option<&Machine>, shard: Option<Shard>) -> FullRun {
        let mount = run.mount.as_ref();
        let monitor = run.monitor.as_ref();
        FullRun {
            row: RunRow {
                uuid: Some(uuid::Uuid::new_v4().to_string()),
                seq: run.seq,
                round: run.round,
                variant: run.variant.clone(),
                workload: run.workload.clone(),
                status: status.as_str().to_string(),
                error: run.error.clone(),
                started_at: run.started_at,
                wall_s: run.wall_s,
                mount_source: mount.map(|m| m.source.clone()),
                mount_fstype: mount.map(|m| m.fstype.clone()),
                mount_options: mount.map(|m| m.mount_options.clone()),
                mount_super_options: mount.map(|m| m.super_options.clone()),
                mount_fs_options: mount.and_then(|m| m.fs_options.clone()),
                geometry: run.geometry.clone(),
                has_monitor: monitor.is_some(),
                monitor_device: monitor.and_then(|m| m.device.clone()),
                monitor_interval_s: monitor.map(|m| m.interval_s),
                shard: shard.map(|s| s.index),
                ..RunRow::default()
            },
            metrics: run.metrics.clone(),
            monitor: run.monitor.clone(),
            extras: extras_of(run),
            machine: machine.cloned(),
        }
    }

    /// What identifies the content: everything but the uuid and local ids.
    /// NaN and NULL compare equal (both are `null`), as stored.
    fn content(&self) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(self)?;
        v["row"]["uuid"] = serde_json::Value::Null;
        Ok(v)
    }

    pub fn same_content(&self, other: &FullRun) -> Result<bool> {
        Ok(self.content()? == other.content()?)
    }

    /// Back to the runner's shape (extras sorted into their fields).
    pub fn to_record(&self) -> Result<RunRecord> {
        let mut record = RunRecord {
            seq: self.row.seq,
            round: self.row.round,
            variant: self.row.variant.clone(),
            workload: self.row.workload.clone(),
            status: Some(self.row.status()?),
            error: self.row.error.clone(),
            started_at: self.row.started_at,
            wall_s: self.row.wall_s,
            metrics: self.metrics.clone(),
            monitor: self.monitor.clone(),
            mount: self.row.mount(),
            geometry: self.row.geometry.clone(),
            ..RunRecord::default()
        };
        record_extras(&mut record, &self.extras)?;
        Ok(record)
    }
}

/// What to do when the experiment already holds a run at the same seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Existing {
    /// `record_run`: a failed run is replaced (a resume retries it), an ok
    /// run only "replaced" by an identical one (a retried write), else error.
    Record,
    /// `merge`: identical is a no-op, an ok run wins over a failed one, two
    /// different failures keep the one already there, two different ok runs
    /// are a conflict.
    Merge,
}

/// What [`put_run`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Put {
    Inserted(i64),
    /// An earlier failed run at the seq was replaced.
    Replaced(i64),
    /// The same run was already there.
    Unchanged(i64),
    /// The run there is kept (merge: it is ok and this one failed, or both failed).
    Kept(i64),
}

impl Put {
    pub fn id(self) -> i64 {
        match self {
            Put::Inserted(i) | Put::Replaced(i) | Put::Unchanged(i) | Put::Kept(i) => i,
        }
    }
}

/// Writes `run` into `experiment_id` inside the caller's transaction.
pub(super) fn put_run(q: &mut dyn Sql, experiment_id: i64, run: &FullRun, existing: Existing) -> Result<Put> {
    let seq = run.row.seq;
    let earlier = q.query_opt(
        "SELECT id, status FROM runs WHERE experiment_id = ?1 AND seq = ?2",
        &[Value::Int(experiment_id), int(seq)?],
    )?;
    let mut replaced = false;
    if let Some(row) = earlier {
        let (old_id, old_status): (i64, String) = (row.get(0)?, row.get(1)?);
        let old = load_run(q, old_id)?;
        if old.same_content(run)? {
            return Ok(Put::Unchanged(old_id));
        }
        let new_ok = run.row.status == RunStatus::Ok.as_str();
        let old_ok = old_status == RunStatus::Ok.as_str();
        match (existing, old_ok, new_ok) {
            (Existing::Record, true, _) => {
                bail!("run {} (seq {seq}) is already recorded as {old_status}; an ok run is never replaced", seq + 1)
            }
            (Existing::Merge, true, true) => bail!(
                "run {} (seq {seq}) is stored ok in both with different content (uuid {} here, {} there); \
                 refusing to pick one",
                seq + 1,
                old.row.uuid.as_deref().unwrap_or("?"),
                run.row.uuid.as_deref().unwrap_or("?")
            ),
            (Existing::Merge, true, false) | (Existing::Merge, false, false) => return Ok(Put::Kept(old_id)),
            (Existing::Record, false, _) | (Existing::Merge, false, true) => {
                // Cascades to the failed run's metrics, totals, samples and extras.
                q.execute("DELETE FROM runs WHERE id = ?1", params![old_id])
                    .with_context(|| format!("cannot replace failed run {} (seq {seq})", seq + 1))?;
                replaced = true;
            }
        }
    }

    let machine = match &run.machine {
        Some(m) => Some(machine_id(q, m).context("machine")?),
        None => None,
    };
    let fixed = [("experiment_id", Value::Int(experiment_id)), ("machine_id", Value::from(machine))];
    let id: i64 = insert_one(q, "runs", &fixed, &run.row, Some("id"))?.expect("RETURNING asked").get(0)?;
    insert_all(q, "metrics", &["run_id", "position"], &run.metrics, |i| Ok(vec![Value::Int(id), int(i)?]))
        .with_context(|| metric_context(&run.metrics))?;
    if let Some(m) = &run.monitor {
        insert_monitor(q, id, m).context("monitor data")?;
    }
    insert_extras(q, id, &run.extras).context("extras")?;
    Ok(if replaced { Put::Replaced(id) } else { Put::Inserted(id) })
}

/// Names the duplicate metric when there is one (the likely cause of a
/// failed metric insert).
fn metric_context(metrics: &[Metric]) -> String {
    let mut seen = std::collections::HashSet::new();
    match metrics.iter().find(|m| !seen.insert(m.name.as_str())) {
        Some(m) => format!("metric {:?} appears twice (names must be unique within a run)", m.name),
        None => "metrics".to_string(),
    }
}

fn insert_monitor(q: &mut dyn Sql, run_id: i64, m: &MonitorData) -> Result<()> {
    if let Some(t) = &m.disk_totals {
        insert_one(q, "disk_totals", &[("run_id", Value::Int(run_id))], t, None).context("disk totals")?;
    }
    let fixed = |i: usize| Ok(vec![Value::Int(run_id), int(i)?]);
    insert_all(q, "iostat_samples", &["run_id", "idx"], &m.disk, fixed).context("iostat samples")?;
    insert_all(q, "cpu_samples", &["run_id", "idx"], &m.cpu, fixed).context("CPU samples")?;
    Ok(())
}

/// The `runs` row of `run_id`.
pub(super) fn run_row(q: &mut dyn Sql, run_id: i64) -> Result<Option<RunRow>> {
    q.query_opt("SELECT * FROM runs WHERE id = ?1", params![run_id])?.map(|r| from_row(&r)).transpose()
}

/// The monitor data of a run whose row is `row`.
pub(super) fn load_monitor(q: &mut dyn Sql, row: &RunRow) -> Result<Option<MonitorData>> {
    if !row.has_monitor {
        return Ok(None);
    }
    let id = row.id;
    let disk_totals = q
        .query_opt("SELECT * FROM disk_totals WHERE run_id = ?1", params![id])?
        .map(|r| from_row::<DiskTotals>(&r))
        .transpose()?;
    let disk = q
        .query("SELECT * FROM iostat_samples WHERE run_id = ?1 ORDER BY idx", params![id])?
        .iter()
        .map(from_row::<IostatSample>)
        .collect::<Result<_>>()?;
    let cpu = q
        .query("SELECT * FROM cpu_samples WHERE run_id = ?1 ORDER BY idx", params![id])?
        .iter()
        .map(from_row::<CpuSample>)
        .collect::<Result<_>>()?;
    Ok(Some(MonitorData {
        device: row.monitor_device.clone(),
        interval_s: row.monitor_interval_s.unwrap_or(f64::NAN),
        disk,
        cpu,
        disk_totals,
    }))
}

/// Everything about one run.
pub(super) fn load_run(q: &mut dyn Sql, run_id: i64) -> Result<FullRun> {
    let row = run_row(q, run_id)?.with_context(|| format!("no run {run_id}"))?;
    let metrics = q
        .query("SELECT * FROM metrics WHERE run_id = ?1 ORDER BY position", params![run_id])?
        .iter()
        .map(from_row::<Metric>)
        .collect::<Result<_>>()?;
    let monitor = load_monitor(q, &row)?;
    let extras = read_extras(q, run_id)?;
    let machine = match row.machine_id {
        Some(id) => super::machines::machine_by_id(q, id)?.map(|m| m.machine),
        None => None,
    };
    Ok(FullRun { row, metrics, monitor, extras, machine })
}

/// A run's identity and provenance ([`Store::run_meta`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMeta {
    pub run_id: i64,
    /// Stable across copies and merges (derived for runs stored before schema v4).
    pub uuid: String,
    /// K of `--shard K/N` when a shard of a campaign recorded the run.
    pub shard: Option<usize>,
    /// The machine the run ran on, if it was recorded (schema v4 on).
    pub machine: Option<StoredMachine>,
}

impl Store {
    /// A run's uuid, shard and machine.
    pub fn run_meta(&self, run_id: i64) -> Result<RunMeta> {
        let loc = self.location();
        self.snapshot(|q| {
            let row = run_row(q, run_id)?.with_context(|| format!("no run {run_id} in {loc}"))?;
            let machine = match row.machine_id {
                Some(id) => super::machines::machine_by_id(q, id)?,
                None => None,
            };
            Ok(RunMeta { run_id, uuid: row.uuid.unwrap_or_default(), shard: row.shard, machine })
        })
        .with_context(|| format!("cannot read run {run_id} from {loc}"))
    }

    /// One run whole, in the shape the runner hands to [`Store::record_run`].
    pub fn run_record(&self, run_id: i64) -> Result<RunRecord> {
        let loc = self.location();
        self.snapshot(|q| load_run(q, run_id)?.to_record())
            .with_context(|| format!("cannot read run {run_id} from {loc}"))
    }
}
