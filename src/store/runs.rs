//! A run as stored: writing one with everything it carries, reading it back
//! whole, and the rule for a run that is already there.
//!
//! [`record_run`](super::Store::record_run) and [`merge`](super::merge)
//! both go through [`put_run`] with a [`WholeRun`], so a run copied from
//! another store is written exactly like one recorded live.

use std::borrow::Cow;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::columns::{from_row, insert_all, insert_one};
use super::extras::{extras_of, insert_extras, read_extras, record_extras};
use super::machines::{machine_id, StoredMachine};
use super::sql::{int, params, Sql, Value};
use super::{Store, StoredRun};
use crate::inspect::machine::Machine;
use crate::metric::Metric;
use crate::monitor::{CpuSample, DiskTotals, IostatSample, MonitorData};
use crate::record::{MountFacts, RunRecord, RunStatus};

/// The `runs` table's columns, one field each: the SQL codec of a run's
/// own row ([`from_row`]/[`insert_one`] map it by field name), not a run
/// type anyone outside this module sees. It exists because the table is
/// flat where the run is not (mount facts and the monitor's header are
/// columns here, nested structs in [`RunRecord`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct RunRow {
    #[serde(skip_serializing, default)]
    pub id: i64,
    #[serde(skip_serializing, default)]
    pub experiment_id: i64,
    /// A store-local id; the machine itself travels as [`WholeRun::machine`].
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
    /// The row `run` is stored as.
    fn of(run: &WholeRun) -> Result<RunRow> {
        let record = &*run.record;
        let status =
            record.status.with_context(|| format!("run {} (seq {}) has no status", record.seq + 1, record.seq))?;
        let mount = record.mount.as_ref();
        let monitor = record.monitor.as_ref();
        Ok(RunRow {
            uuid: run.uuid.as_deref().map(str::to_string),
            seq: record.seq,
            round: record.round,
            variant: record.variant.clone(),
            workload: record.workload.clone(),
            status: status.as_str().to_string(),
            error: record.error.clone(),
            started_at: record.started_at,
            wall_s: record.wall_s,
            mount_source: mount.map(|m| m.source.clone()),
            mount_fstype: mount.map(|m| m.fstype.clone()),
            mount_options: mount.map(|m| m.mount_options.clone()),
            mount_super_options: mount.map(|m| m.super_options.clone()),
            mount_fs_options: mount.and_then(|m| m.fs_options.clone()),
            geometry: record.geometry.clone(),
            has_monitor: monitor.is_some(),
            monitor_device: monitor.and_then(|m| m.device.clone()),
            monitor_interval_s: monitor.map(|m| m.interval_s),
            shard: run.shard,
            ..RunRow::default()
        })
    }

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

    /// The run as readers see it, with its metrics and device totals.
    pub fn to_stored(&self, metrics: Vec<Metric>, disk_totals: Option<DiskTotals>) -> Result<StoredRun> {
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
            metrics,
            mount: self.mount(),
            geometry: self.geometry.clone(),
            disk_totals,
            uuid: self.uuid.clone().unwrap_or_default(),
            shard: self.shard,
        })
    }

    /// The runner's record of this row, without metrics, monitor and extras
    /// (filled in by the caller).
    fn to_record(&self) -> Result<RunRecord> {
        Ok(RunRecord {
            seq: self.seq,
            round: self.round,
            variant: self.variant.clone(),
            workload: self.workload.clone(),
            status: Some(self.status()?),
            error: self.error.clone(),
            started_at: self.started_at,
            wall_s: self.wall_s,
            mount: self.mount(),
            geometry: self.geometry.clone(),
            ..RunRecord::default()
        })
    }
}

/// Everything stored about one run, free of store-local ids: the runner's
/// record and who recorded it. Borrowed from the runner when recording
/// live, owned when read from a store (merge, and the run already at a
/// seq), so one type serves both and two runs compare as stored.
#[derive(Clone, Debug, Serialize)]
pub(super) struct WholeRun<'a> {
    pub record: Cow<'a, RunRecord>,
    /// Stable across copies and merges; `None` only in a store edited by hand.
    pub uuid: Option<Cow<'a, str>>,
    /// K of `--shard K/N` when a shard of a campaign recorded the run.
    pub shard: Option<usize>,
    pub machine: Option<Cow<'a, Machine>>,
}

impl WholeRun<'_> {
    /// What identifies the content: everything but the uuid.
    /// NaN and NULL compare equal (both are `null`), as stored.
    fn content(&self) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(self)?;
        v["uuid"] = serde_json::Value::Null;
        Ok(v)
    }

    pub fn same_content(&self, other: &WholeRun) -> Result<bool> {
        Ok(self.content()? == other.content()?)
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
pub(super) fn put_run(q: &mut dyn Sql, experiment_id: i64, run: &WholeRun, existing: Existing) -> Result<Put> {
    let row = RunRow::of(run)?;
    let seq = row.seq;
    let earlier = q.query_opt(
        "SELECT id, status FROM runs WHERE experiment_id = ?1 AND seq = ?2",
        &[Value::Int(experiment_id), int(seq)?],
    )?;
    let mut replaced = false;
    if let Some(earlier) = earlier {
        let (old_id, old_status): (i64, String) = (earlier.get(0)?, earlier.get(1)?);
        let old = load_run(q, old_id)?;
        if old.same_content(run)? {
            return Ok(Put::Unchanged(old_id));
        }
        let new_ok = row.status == RunStatus::Ok.as_str();
        let old_ok = old_status == RunStatus::Ok.as_str();
        match (existing, old_ok, new_ok) {
            (Existing::Record, true, _) => {
                bail!("run {} (seq {seq}) is already recorded as {old_status}; an ok run is never replaced", seq + 1)
            }
            (Existing::Merge, true, true) => bail!(
                "run {} (seq {seq}) is stored ok in both with different content (uuid {} here, {} there); \
                 refusing to pick one",
                seq + 1,
                old.uuid.as_deref().unwrap_or("?"),
                run.uuid.as_deref().unwrap_or("?")
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
    let id: i64 = insert_one(q, "runs", &fixed, &row, Some("id"))?.expect("RETURNING asked").get(0)?;
    let record = &*run.record;
    insert_all(q, "metrics", &["run_id", "position"], &record.metrics, |i| Ok(vec![Value::Int(id), int(i)?]))
        .with_context(|| metric_context(&record.metrics))?;
    if let Some(m) = &record.monitor {
        insert_monitor(q, id, m).context("monitor data")?;
    }
    insert_extras(q, id, &extras_of(record)).context("extras")?;
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

/// A run's metrics in the order the workload reported them.
fn metrics(q: &mut dyn Sql, run_id: i64) -> Result<Vec<Metric>> {
    q.query("SELECT * FROM metrics WHERE run_id = ?1 ORDER BY position", params![run_id])?
        .iter()
        .map(from_row::<Metric>)
        .collect()
}

fn disk_totals(q: &mut dyn Sql, run_id: i64) -> Result<Option<DiskTotals>> {
    q.query_opt("SELECT * FROM disk_totals WHERE run_id = ?1", params![run_id])?
        .map(|r| from_row::<DiskTotals>(&r))
        .transpose()
}

/// The monitor data of a run whose row is `row`.
pub(super) fn load_monitor(q: &mut dyn Sql, row: &RunRow) -> Result<Option<MonitorData>> {
    if !row.has_monitor {
        return Ok(None);
    }
    let id = row.id;
    let disk_totals = disk_totals(q, id)?;
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

/// Everything about one run, owned.
pub(super) fn load_run(q: &mut dyn Sql, run_id: i64) -> Result<WholeRun<'static>> {
    let row = run_row(q, run_id)?.with_context(|| format!("no run {run_id}"))?;
    let mut record = row.to_record()?;
    record.metrics = metrics(q, run_id)?;
    record.monitor = load_monitor(q, &row)?;
    record_extras(&mut record, &read_extras(q, run_id)?)?;
    let machine = match row.machine_id {
        Some(id) => super::machines::machine_by_id(q, id)?.map(|m| Cow::Owned(m.machine)),
        None => None,
    };
    Ok(WholeRun { record: Cow::Owned(record), uuid: row.uuid.map(Cow::Owned), shard: row.shard, machine })
}

impl Store {
    /// One run as [`Store::runs`] reads it.
    pub fn run(&self, run_id: i64) -> Result<StoredRun> {
        let loc = self.location();
        self.snapshot(|q| {
            let row = run_row(q, run_id)?.with_context(|| format!("no run {run_id} in {loc}"))?;
            row.to_stored(metrics(q, run_id)?, disk_totals(q, run_id)?)
        })
        .with_context(|| format!("cannot read run {run_id} from {loc}"))
    }

    /// The machine a run ran on, if it was recorded (schema v4 on).
    pub fn run_machine(&self, run_id: i64) -> Result<Option<StoredMachine>> {
        let loc = self.location();
        self.snapshot(|q| {
            let row = run_row(q, run_id)?.with_context(|| format!("no run {run_id} in {loc}"))?;
            match row.machine_id {
                Some(id) => super::machines::machine_by_id(q, id),
                None => Ok(None),
            }
        })
        .with_context(|| format!("cannot read run {run_id} from {loc}"))
    }

    /// One run whole, in the shape the runner hands to [`Store::record_run`].
    pub fn run_record(&self, run_id: i64) -> Result<RunRecord> {
        let loc = self.location();
        self.snapshot(|q| Ok(load_run(q, run_id)?.record.into_owned()))
            .with_context(|| format!("cannot read run {run_id} from {loc}"))
    }
}
