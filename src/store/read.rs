//! Queries.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use rusqlite::{params, OptionalExtension, Row};

use super::{
    get_uint, real, ExperimentRow, ExperimentSummary, MetricSeries, Store, StoredRun, VariantRow, WorkloadRow,
};
use crate::metric::Metric;
use crate::monitor::{CpuSample, DiskTotals, IostatSample, MonitorData};
use crate::record::{MountFacts, RunStatus};

impl Store {
    /// One experiment with its variants and workloads (in position order).
    pub fn experiment(&self, id: i64) -> Result<ExperimentRow> {
        let loc = self.location();
        let row = self
            .conn
            .query_row(
                "SELECT id, name, created_at, finished_at, status, spec_path, spec_text, spec_hash, seed,
                        plan_json, environment_json
                 FROM experiments WHERE id = ?1",
                [id],
                |r| {
                    let e = ExperimentRow {
                        id: r.get("id")?,
                        name: r.get("name")?,
                        created_at: r.get("created_at")?,
                        finished_at: r.get("finished_at")?,
                        status: r.get("status")?,
                        spec_path: r.get("spec_path")?,
                        spec_text: r.get("spec_text")?,
                        spec_hash: r.get("spec_hash")?,
                        // Parsed below, where a bad value can get a useful error.
                        seed: 0,
                        plan_json: r.get("plan_json")?,
                        environment_json: r.get("environment_json")?,
                        variants: Vec::new(),
                        workloads: Vec::new(),
                    };
                    Ok((e, r.get::<_, String>("seed")?))
                },
            )
            .optional()
            .with_context(|| format!("cannot read experiment {id} from {loc}"))?;
        let Some((mut e, seed)) = row else {
            bail!("no experiment {id} in {loc}");
        };
        e.seed = seed.parse().with_context(|| format!("experiment {id} in {loc} has a bad seed {seed:?}"))?;

        let mut stmt = self
            .conn
            .prepare("SELECT position, name, config_json FROM variants WHERE experiment_id = ?1 ORDER BY position")
            .with_context(|| format!("cannot query variants in {loc}"))?;
        e.variants = stmt
            .query_map([id], |r| Ok(VariantRow { position: get_uint(r, 0)?, name: r.get(1)?, config_json: r.get(2)? }))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(|| format!("cannot read variants of experiment {id} from {loc}"))?;

        let mut stmt = self
            .conn
            .prepare(
                "SELECT position, label, kind, config_json FROM workloads WHERE experiment_id = ?1 ORDER BY position",
            )
            .with_context(|| format!("cannot query workloads in {loc}"))?;
        e.workloads = stmt
            .query_map([id], |r| {
                Ok(WorkloadRow { position: get_uint(r, 0)?, label: r.get(1)?, kind: r.get(2)?, config_json: r.get(3)? })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(|| format!("cannot read workloads of experiment {id} from {loc}"))?;
        Ok(e)
    }

    /// The id of the most recently created experiment, if any.
    pub fn latest_experiment(&self) -> Result<Option<i64>> {
        self.conn
            .query_row("SELECT max(id) FROM experiments", [], |r| r.get(0))
            .with_context(|| format!("cannot query experiments in {}", self.location()))
    }

    /// All experiments, oldest first, with their ok/failed run counts.
    pub fn list_experiments(&self) -> Result<Vec<ExperimentSummary>> {
        let loc = self.location();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT e.id, e.name, e.created_at, e.status,
                        count(CASE WHEN r.status = 'ok' THEN 1 END),
                        count(CASE WHEN r.status = 'failed' THEN 1 END)
                 FROM experiments e LEFT JOIN runs r ON r.experiment_id = e.id
                 GROUP BY e.id ORDER BY e.id",
            )
            .with_context(|| format!("cannot query experiments in {loc}"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ExperimentSummary {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                    status: r.get(3)?,
                    runs_ok: get_uint(r, 4)?,
                    runs_failed: get_uint(r, 5)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(|| format!("cannot list experiments in {loc}"))?;
        Ok(rows)
    }

    /// The newest experiment with this name and spec hash that is not
    /// `complete` (running, interrupted or failed): the one to resume.
    pub fn find_unfinished(&self, name: &str, spec_hash: &str) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT id FROM experiments
                 WHERE name = ?1 AND spec_hash = ?2 AND status <> 'complete'
                 ORDER BY id DESC LIMIT 1",
                params![name, spec_hash],
                |r| r.get(0),
            )
            .optional()
            .with_context(|| format!("cannot search unfinished experiments in {}", self.location()))
    }

    /// All runs of an experiment in seq order, with metrics, mount facts and
    /// device totals (monitor samples via [`Store::samples`]).
    pub fn runs(&self, experiment_id: i64) -> Result<Vec<StoredRun>> {
        let loc = self.location();
        self.require_experiment(experiment_id)?;
        let ctx = || format!("cannot read runs of experiment {experiment_id} from {loc}");

        // Three queries for the whole experiment instead of two per run.
        let mut metrics: HashMap<i64, Vec<Metric>> = HashMap::new();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT m.run_id, m.name, m.unit, m.higher_is_better, m.value
                 FROM metrics m JOIN runs r ON r.id = m.run_id
                 WHERE r.experiment_id = ?1 ORDER BY m.run_id, m.position",
            )
            .with_context(ctx)?;
        let rows = stmt
            .query_map([experiment_id], |r| {
                let m =
                    Metric { name: r.get(1)?, unit: r.get(2)?, higher_is_better: r.get(3)?, value: real(r, "value")? };
                Ok((r.get::<_, i64>(0)?, m))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(ctx)?;
        for (run_id, m) in rows {
            metrics.entry(run_id).or_default().push(m);
        }

        let mut stmt = self
            .conn
            .prepare("SELECT t.* FROM disk_totals t JOIN runs r ON r.id = t.run_id WHERE r.experiment_id = ?1")
            .with_context(ctx)?;
        let mut totals: HashMap<i64, DiskTotals> = stmt
            .query_map([experiment_id], |r| Ok((r.get::<_, i64>("run_id")?, disk_totals(r)?)))
            .and_then(|rows| rows.collect::<rusqlite::Result<HashMap<_, _>>>())
            .with_context(ctx)?;

        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, seq, round, variant, workload, status, error, started_at, wall_s,
                        mount_source, mount_fstype, mount_options, mount_super_options, mount_fs_options, geometry
                 FROM runs WHERE experiment_id = ?1 ORDER BY seq",
            )
            .with_context(ctx)?;
        let mut runs = stmt
            .query_map([experiment_id], run_row)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(ctx)?;
        for run in &mut runs {
            run.metrics = metrics.remove(&run.id).unwrap_or_default();
            run.disk_totals = totals.remove(&run.id);
        }
        Ok(runs)
    }

    /// Everything the monitors recorded for one run. A run recorded without
    /// monitor data yields an empty [`MonitorData`] (see [`Store::monitor`]).
    pub fn samples(&self, run_id: i64) -> Result<MonitorData> {
        Ok(self.monitor(run_id)?.unwrap_or_default())
    }

    /// Like [`Store::samples`], but `None` when the run had no monitor.
    pub fn monitor(&self, run_id: i64) -> Result<Option<MonitorData>> {
        let loc = self.location();
        let ctx = || format!("cannot read monitor data of run {run_id} from {loc}");
        let head: Option<(bool, Option<String>, f64)> = self
            .conn
            .query_row(
                "SELECT has_monitor, monitor_device, monitor_interval_s FROM runs WHERE id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, real(r, "monitor_interval_s")?)),
            )
            .optional()
            .with_context(ctx)?;
        let Some((has_monitor, device, interval_s)) = head else {
            bail!("no run {run_id} in {loc}");
        };
        if !has_monitor {
            return Ok(None);
        }

        let disk_totals = self
            .conn
            .query_row("SELECT * FROM disk_totals WHERE run_id = ?1", [run_id], disk_totals)
            .optional()
            .with_context(ctx)?;

        let mut stmt =
            self.conn.prepare("SELECT * FROM iostat_samples WHERE run_id = ?1 ORDER BY idx").with_context(ctx)?;
        let disk = stmt
            .query_map([run_id], |r| {
                Ok(IostatSample {
                    t_s: real(r, "t_s")?,
                    r_s: real(r, "r_s")?,
                    w_s: real(r, "w_s")?,
                    d_s: real(r, "d_s")?,
                    f_s: real(r, "f_s")?,
                    rkb_s: real(r, "rkb_s")?,
                    wkb_s: real(r, "wkb_s")?,
                    dkb_s: real(r, "dkb_s")?,
                    rrqm_s: real(r, "rrqm_s")?,
                    wrqm_s: real(r, "wrqm_s")?,
                    drqm_s: real(r, "drqm_s")?,
                    rrqm_pct: real(r, "rrqm_pct")?,
                    wrqm_pct: real(r, "wrqm_pct")?,
                    drqm_pct: real(r, "drqm_pct")?,
                    r_await: real(r, "r_await")?,
                    w_await: real(r, "w_await")?,
                    d_await: real(r, "d_await")?,
                    f_await: real(r, "f_await")?,
                    aqu_sz: real(r, "aqu_sz")?,
                    rareq_sz: real(r, "rareq_sz")?,
                    wareq_sz: real(r, "wareq_sz")?,
                    dareq_sz: real(r, "dareq_sz")?,
                    util_pct: real(r, "util_pct")?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(ctx)?;

        let mut stmt =
            self.conn.prepare("SELECT * FROM cpu_samples WHERE run_id = ?1 ORDER BY idx").with_context(ctx)?;
        let cpu = stmt
            .query_map([run_id], |r| {
                Ok(CpuSample {
                    t_s: real(r, "t_s")?,
                    user_pct: real(r, "user_pct")?,
                    nice_pct: real(r, "nice_pct")?,
                    sys_pct: real(r, "sys_pct")?,
                    iowait_pct: real(r, "iowait_pct")?,
                    irq_pct: real(r, "irq_pct")?,
                    softirq_pct: real(r, "softirq_pct")?,
                    steal_pct: real(r, "steal_pct")?,
                    idle_pct: real(r, "idle_pct")?,
                    ..CpuSample::default()
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(ctx)?;

        Ok(Some(MonitorData { device, interval_s, disk, cpu, disk_totals }))
    }

    /// Every metric's values per workload × variant, from ok runs only.
    ///
    /// Ordered by workload position, metric name, variant position (workloads
    /// or variants missing from the experiment's lists come after the listed
    /// ones, by name). A metric reported with different units or directions
    /// across runs yields one series per unit/direction rather than mixing
    /// them. NaN values are left out.
    pub fn metric_series(&self, experiment_id: i64) -> Result<Vec<MetricSeries>> {
        let loc = self.location();
        self.require_experiment(experiment_id)?;
        let ctx = || format!("cannot read metric series of experiment {experiment_id} from {loc}");
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.workload, m.name, m.unit, m.higher_is_better, r.variant, m.value
                 FROM metrics m
                 JOIN runs r ON r.id = m.run_id
                 LEFT JOIN workloads w ON w.experiment_id = r.experiment_id AND w.label = r.workload
                 LEFT JOIN variants v ON v.experiment_id = r.experiment_id AND v.name = r.variant
                 WHERE r.experiment_id = ?1 AND r.status = 'ok' AND m.value IS NOT NULL
                 ORDER BY w.position IS NULL, w.position, r.workload,
                          m.name, m.unit, m.higher_is_better,
                          v.position IS NULL, v.position, r.variant,
                          r.seq",
            )
            .with_context(ctx)?;
        let rows = stmt
            .query_map([experiment_id], |r| {
                Ok(MetricSeries {
                    workload: r.get(0)?,
                    metric: r.get(1)?,
                    unit: r.get(2)?,
                    higher_is_better: r.get(3)?,
                    variant: r.get(4)?,
                    values: vec![r.get(5)?],
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .with_context(ctx)?;
        // Rows arrive sorted, so each series is one consecutive group.
        let mut out: Vec<MetricSeries> = Vec::new();
        for row in rows {
            match out.last_mut() {
                Some(s)
                    if s.workload == row.workload
                        && s.metric == row.metric
                        && s.unit == row.unit
                        && s.higher_is_better == row.higher_is_better
                        && s.variant == row.variant =>
                {
                    s.values.extend(row.values)
                }
                _ => out.push(row),
            }
        }
        Ok(out)
    }

    /// Fails with "no experiment N in PATH" unless the experiment exists.
    fn require_experiment(&self, id: i64) -> Result<()> {
        let loc = self.location();
        let found: Option<i64> = self
            .conn
            .query_row("SELECT id FROM experiments WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .with_context(|| format!("cannot look up experiment {id} in {loc}"))?;
        if found.is_none() {
            bail!("no experiment {id} in {loc}");
        }
        Ok(())
    }
}

fn disk_totals(r: &Row<'_>) -> rusqlite::Result<DiskTotals> {
    Ok(DiskTotals {
        read_mb: real(r, "read_mb")?,
        written_mb: real(r, "written_mb")?,
        discarded_mb: real(r, "discarded_mb")?,
        reads: get_uint(r, "reads")?,
        writes: get_uint(r, "writes")?,
        discards: get_uint(r, "discards")?,
        flushes: get_uint(r, "flushes")?,
        mean_read_kb: real(r, "mean_read_kb")?,
        mean_write_kb: real(r, "mean_write_kb")?,
        busy_s: real(r, "busy_s")?,
        duration_s: real(r, "duration_s")?,
    })
}

/// One `runs` row, without metrics and totals (filled in by the caller).
fn run_row(r: &Row<'_>) -> rusqlite::Result<StoredRun> {
    let mount = match r.get::<_, Option<String>>("mount_fstype")? {
        Some(fstype) => Some(MountFacts {
            source: r.get::<_, Option<String>>("mount_source")?.unwrap_or_default(),
            fstype,
            mount_options: r.get::<_, Option<String>>("mount_options")?.unwrap_or_default(),
            super_options: r.get::<_, Option<String>>("mount_super_options")?.unwrap_or_default(),
            fs_options: r.get("mount_fs_options")?,
        }),
        None => None,
    };
    Ok(StoredRun {
        id: r.get("id")?,
        seq: get_uint(r, "seq")?,
        round: get_uint(r, "round")?,
        variant: r.get("variant")?,
        workload: r.get("workload")?,
        status: parse_run_status(r, "status")?,
        error: r.get("error")?,
        started_at: real(r, "started_at")?,
        wall_s: real(r, "wall_s")?,
        metrics: Vec::new(),
        mount,
        geometry: r.get("geometry")?,
        disk_totals: None,
    })
}

fn parse_run_status(r: &Row<'_>, col: &str) -> rusqlite::Result<RunStatus> {
    let s: String = r.get(col)?;
    match s.as_str() {
        "ok" => Ok(RunStatus::Ok),
        "failed" => Ok(RunStatus::Failed),
        // The CHECK constraint makes this unreachable unless the file was edited.
        other => Err(rusqlite::Error::FromSqlConversionFailure(
            r.as_ref().column_index(col)?,
            rusqlite::types::Type::Text,
            format!("unknown run status {other:?}").into(),
        )),
    }
}
