//! Queries.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};

use super::columns::from_row;
use super::runs::{load_monitor, run_row, RunRow};
use super::sql::{params, Sql};
use super::write::ExperimentRow;
use super::{ExperimentSummary, MetricSeries, Store, StoredExperiment, StoredRun, VariantRow, WorkloadRow};
use crate::metric::Metric;
use crate::monitor::{DiskTotals, MonitorData};
use crate::stored::{self, ExperimentStatus, StoredEnvironment};

/// A line of `list_experiments` as queried (status as stored).
#[derive(serde::Deserialize)]
struct SummaryDb {
    id: i64,
    name: String,
    created_at: String,
    status: ExperimentStatus,
    runs_ok: usize,
    runs_failed: usize,
    uuid: Option<String>,
    campaign: Option<String>,
    shard_count: Option<usize>,
}

/// Fails with "no experiment N in LOC" unless the experiment exists.
pub(super) fn require_experiment(q: &mut dyn Sql, id: i64, loc: &str) -> Result<()> {
    if q.query_opt("SELECT id FROM experiments WHERE id = ?1", params![id])?.is_none() {
        bail!("no experiment {id} in {loc}");
    }
    Ok(())
}

pub(super) fn experiment_row(q: &mut dyn Sql, id: i64) -> Result<Option<ExperimentRow>> {
    q.query_opt("SELECT * FROM experiments WHERE id = ?1", params![id])?.map(|r| from_row(&r)).transpose()
}

pub(super) fn variants(q: &mut dyn Sql, id: i64) -> Result<Vec<VariantRow>> {
    q.query("SELECT * FROM variants WHERE experiment_id = ?1 ORDER BY position", params![id])?
        .iter()
        .map(from_row)
        .collect()
}

pub(super) fn workloads(q: &mut dyn Sql, id: i64) -> Result<Vec<WorkloadRow>> {
    q.query("SELECT * FROM workloads WHERE experiment_id = ?1 ORDER BY position", params![id])?
        .iter()
        .map(from_row)
        .collect()
}

impl Store {
    /// One experiment with its labels, variants and workloads (in position order).
    pub fn experiment(&self, id: i64) -> Result<StoredExperiment> {
        let loc = self.location();
        self.snapshot(|q| {
            let Some(e) = experiment_row(q, id)? else {
                bail!("no experiment {id} in {loc}");
            };
            let seed =
                e.seed.parse().with_context(|| format!("experiment {id} in {loc} has a bad seed {:?}", e.seed))?;
            Ok(StoredExperiment {
                id: e.id,
                uuid: e.uuid.unwrap_or_default(),
                name: e.name,
                created_at: e.created_at,
                finished_at: e.finished_at,
                status: e.status,
                spec_path: e.spec_path,
                spec_hash: e.spec_hash,
                spec_text: e.spec_text,
                seed,
                campaign: e.campaign,
                shard_count: e.shard_count,
                tags: super::tags::read_tags(q, id)?,
                plan: stored::parse(id, "plan", &e.plan_json)?,
                environment: stored::parse(id, "environment", &e.environment_json)?,
                variants: variants(q, id)?,
                workloads: workloads(q, id)?,
            })
        })
        .map(|mut e| {
            e.status = self.effective_status(id, e.status, e.environment.owner.as_ref());
            e
        })
        .with_context(|| format!("cannot read experiment {id} from {loc}"))
    }

    /// The id of the most recently created experiment, if any.
    pub fn latest_experiment(&self) -> Result<Option<i64>> {
        self.read(|q| q.query_one("SELECT max(id) FROM experiments", &[])?.get(0))
            .with_context(|| format!("cannot query experiments in {}", self.location()))
    }

    /// The experiment with this uuid, if stored here.
    pub fn experiment_by_uuid(&self, uuid: &str) -> Result<Option<i64>> {
        self.read(|q| {
            q.query_opt("SELECT id FROM experiments WHERE uuid = ?1", params![uuid])?.map(|r| r.get(0)).transpose()
        })
        .with_context(|| format!("cannot query experiments in {}", self.location()))
    }

    /// All experiments, oldest first, with their labels and ok/failed run counts.
    pub fn list_experiments(&self) -> Result<Vec<ExperimentSummary>> {
        let loc = self.location();
        let rows: Vec<(SummaryDb, Vec<(String, String)>)> = self
            .snapshot(|q| {
                let lines: Vec<SummaryDb> = q
                    .query(
                        "SELECT e.id, e.name, e.created_at, e.status, e.uuid, e.campaign, e.shard_count,
                            count(CASE WHEN r.status = 'ok' THEN 1 END) AS runs_ok,
                            count(CASE WHEN r.status = 'failed' THEN 1 END) AS runs_failed
                     FROM experiments e LEFT JOIN runs r ON r.experiment_id = e.id
                     GROUP BY e.id ORDER BY e.id",
                        &[],
                    )?
                    .iter()
                    .map(from_row)
                    .collect::<Result<_>>()?;
                lines
                    .into_iter()
                    .map(|r| {
                        let tags = super::tags::read_tags(q, r.id)?;
                        Ok((r, tags))
                    })
                    .collect()
            })
            .with_context(|| format!("cannot list experiments in {loc}"))?;
        rows.into_iter()
            .map(|(r, tags)| {
                let stored = r.status;
                let status = if stored == ExperimentStatus::Running {
                    // Only a running one needs its owner, from its environment.
                    let env: StoredEnvironment = self
                        .read(|q| {
                            q.query_one("SELECT environment_json FROM experiments WHERE id = ?1", params![r.id])?.get(0)
                        })
                        .and_then(|text: String| stored::parse(r.id, "environment", &text))
                        .with_context(|| format!("cannot read experiment {} from {loc}", r.id))?;
                    self.effective_status(r.id, stored, env.owner.as_ref())
                } else {
                    stored
                };
                Ok(ExperimentSummary {
                    id: r.id,
                    name: r.name,
                    created_at: r.created_at,
                    status,
                    runs_ok: r.runs_ok,
                    runs_failed: r.runs_failed,
                    uuid: r.uuid.unwrap_or_default(),
                    campaign: r.campaign,
                    shard_count: r.shard_count,
                    tags,
                })
            })
            .collect()
    }

    /// The newest experiment with this name and spec hash that is not
    /// `complete` (running, interrupted or failed): the one to resume.
    /// Campaign experiments are not resumed this way (shards rejoin them
    /// with [`Store::join_campaign`]).
    pub fn find_unfinished(&self, name: &str, spec_hash: &str) -> Result<Option<i64>> {
        self.read(|q| {
            q.query_opt(
                "SELECT id FROM experiments
                 WHERE name = ?1 AND spec_hash = ?2 AND status <> 'complete' AND campaign IS NULL
                 ORDER BY id DESC LIMIT 1",
                params![name, spec_hash],
            )?
            .map(|r| r.get(0))
            .transpose()
        })
        .with_context(|| format!("cannot search unfinished experiments in {}", self.location()))
    }

    /// The newest `complete` experiment with this name and spec hash (a
    /// bisection step measured before, whose runs answer it again).
    pub fn find_complete(&self, name: &str, spec_hash: &str) -> Result<Option<i64>> {
        self.read(|q| {
            q.query_opt(
                "SELECT id FROM experiments
                 WHERE name = ?1 AND spec_hash = ?2 AND status = 'complete' AND campaign IS NULL
                 ORDER BY id DESC LIMIT 1",
                params![name, spec_hash],
            )?
            .map(|r| r.get(0))
            .transpose()
        })
        .with_context(|| format!("cannot search complete experiments in {}", self.location()))
    }

    /// All runs of an experiment in seq order, with metrics, mount facts and
    /// device totals (monitor samples via [`Store::samples`]).
    pub fn runs(&self, experiment_id: i64) -> Result<Vec<StoredRun>> {
        let loc = self.location();
        self.snapshot(|q| {
            require_experiment(q, experiment_id, &loc)?;
            // Three queries for the whole experiment instead of two per run.
            let mut metrics: HashMap<i64, Vec<Metric>> = HashMap::new();
            for r in q.query(
                "SELECT m.* FROM metrics m JOIN runs r ON r.id = m.run_id
                 WHERE r.experiment_id = ?1 ORDER BY m.run_id, m.position",
                params![experiment_id],
            )? {
                metrics.entry(r.get("run_id")?).or_default().push(from_row(&r)?);
            }
            let mut totals: HashMap<i64, DiskTotals> = HashMap::new();
            for r in q.query(
                "SELECT t.* FROM disk_totals t JOIN runs r ON r.id = t.run_id WHERE r.experiment_id = ?1",
                params![experiment_id],
            )? {
                totals.insert(r.get("run_id")?, from_row(&r)?);
            }
            let rows = q.query("SELECT * FROM runs WHERE experiment_id = ?1 ORDER BY seq", params![experiment_id])?;
            rows.iter()
                .map(|r| {
                    let row: RunRow = from_row(r)?;
                    row.to_stored(metrics.remove(&row.id).unwrap_or_default(), totals.remove(&row.id))
                })
                .collect()
        })
        .with_context(|| format!("cannot read runs of experiment {experiment_id} from {loc}"))
    }

    /// Everything the monitors recorded for one run. A run recorded without
    /// monitor data yields an empty [`MonitorData`] (see [`Store::monitor`]).
    pub fn samples(&self, run_id: i64) -> Result<MonitorData> {
        Ok(self.monitor(run_id)?.unwrap_or_default())
    }

    /// Like [`Store::samples`], but `None` when the run had no monitor.
    pub fn monitor(&self, run_id: i64) -> Result<Option<MonitorData>> {
        let loc = self.location();
        self.snapshot(|q| {
            let Some(row) = run_row(q, run_id)? else {
                bail!("no run {run_id} in {loc}");
            };
            load_monitor(q, &row)
        })
        .with_context(|| format!("cannot read monitor data of run {run_id} from {loc}"))
    }

    /// Every metric's values per workload × variant, from ok runs only.
    ///
    /// Ordered by workload position, metric name, variant position (workloads
    /// or variants missing from the experiment's lists come after the listed
    /// ones, by name). A metric reported with different units or directions
    /// across runs yields one series per unit/direction rather than mixing
    /// them. NaN values are left out. Names sort by bytes on both backends.
    pub fn metric_series(&self, experiment_id: i64) -> Result<Vec<MetricSeries>> {
        self.series(experiment_id, None)
    }

    /// [`Store::metric_series`], optionally only from runs on `hardware`.
    pub(super) fn series(&self, experiment_id: i64, hardware: Option<&str>) -> Result<Vec<MetricSeries>> {
        let loc = self.location();
        let (machine_join, machine_filter) = match hardware {
            Some(_) => ("JOIN machines mc ON mc.id = r.machine_id", "AND mc.hardware = ?2"),
            None => ("", ""),
        };
        let sql = format!(
            "SELECT r.workload, m.name, m.unit, m.higher_is_better, r.variant, m.value
             FROM runs r
             JOIN metrics m ON m.run_id = r.id
             {machine_join}
             LEFT JOIN workloads w ON w.experiment_id = r.experiment_id AND w.label = r.workload
             LEFT JOIN variants v ON v.experiment_id = r.experiment_id AND v.name = r.variant
             WHERE r.experiment_id = ?1 AND r.status = 'ok' AND m.value IS NOT NULL {machine_filter}
             ORDER BY w.position IS NULL, w.position, r.workload COLLATE BINARY,
                      m.name COLLATE BINARY, m.unit COLLATE BINARY, m.higher_is_better,
                      v.position IS NULL, v.position, r.variant COLLATE BINARY,
                      r.seq"
        );
        let mut params = vec![super::sql::Value::Int(experiment_id)];
        params.extend(hardware.map(super::sql::Value::from));
        self.snapshot(|q| {
            require_experiment(q, experiment_id, &loc)?;
            let rows = q.query(&sql, &params)?;
            // Rows arrive sorted, so each series is one consecutive group.
            let mut out: Vec<MetricSeries> = Vec::new();
            for r in rows {
                let (workload, metric, unit): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                let (higher_is_better, variant, value): (bool, String, f64) = (r.get(3)?, r.get(4)?, r.get(5)?);
                match out.last_mut() {
                    Some(s)
                        if s.workload == workload
                            && s.metric == metric
                            && s.unit == unit
                            && s.higher_is_better == higher_is_better
                            && s.variant == variant =>
                    {
                        s.values.push(value)
                    }
                    _ => out.push(MetricSeries {
                        workload,
                        metric,
                        unit,
                        higher_is_better,
                        variant,
                        values: vec![value],
                    }),
                }
            }
            Ok(out)
        })
        .with_context(|| format!("cannot read metric series of experiment {experiment_id} from {loc}"))
    }
}
