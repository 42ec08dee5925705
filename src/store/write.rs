//! Writing experiments and runs.

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::{now_rfc3339, sql_int, NewExperiment, Store, EXPERIMENT_STATUSES};
use crate::monitor::MonitorData;
use crate::record::{RunRecord, RunStatus};

impl Store {
    /// Records a new experiment (status `running`) with its variants and
    /// workloads, in one transaction; returns its id.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<i64> {
        let loc = self.location();
        // Checked here so exports can always embed these as parsed JSON.
        let of = format!("of experiment {:?}", e.name);
        check_json(&format!("plan_json {of}"), &e.plan_json)?;
        check_json(&format!("environment_json {of}"), &e.environment_json)?;
        for v in &e.variants {
            check_json(&format!("config_json of variant {:?} {of}", v.name), &v.config_json)?;
        }
        for w in &e.workloads {
            check_json(&format!("config_json of workload {:?} {of}", w.label), &w.config_json)?;
        }

        let tx = self.write_tx()?;
        tx.execute(
            "INSERT INTO experiments
                 (name, created_at, status, spec_path, spec_text, spec_hash, seed, plan_json, environment_json)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                e.name,
                now_rfc3339(),
                e.spec_path,
                e.spec_text,
                e.spec_hash,
                e.seed.to_string(),
                e.plan_json,
                e.environment_json
            ],
        )
        .with_context(|| format!("cannot record experiment {:?} in {loc}", e.name))?;
        let id = tx.last_insert_rowid();
        {
            let mut stmt = tx
                .prepare("INSERT INTO variants (experiment_id, position, name, config_json) VALUES (?1, ?2, ?3, ?4)")
                .with_context(|| format!("cannot prepare variant insert in {loc}"))?;
            for v in &e.variants {
                stmt.execute(params![id, sql_int(v.position)?, v.name, v.config_json]).with_context(|| {
                    format!(
                        "cannot record variant {:?} (position {}) of experiment {:?} in {loc}",
                        v.name, v.position, e.name
                    )
                })?;
            }
            let mut stmt = tx
                .prepare(
                    "INSERT INTO workloads (experiment_id, position, label, kind, config_json)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .with_context(|| format!("cannot prepare workload insert in {loc}"))?;
            for w in &e.workloads {
                stmt.execute(params![id, sql_int(w.position)?, w.label, w.kind, w.config_json]).with_context(|| {
                    format!(
                        "cannot record workload {:?} (position {}) of experiment {:?} in {loc}",
                        w.label, w.position, e.name
                    )
                })?;
            }
        }
        tx.commit().with_context(|| format!("cannot commit experiment {:?} to {loc}", e.name))?;
        Ok(id)
    }

    /// Sets an experiment's status (one of [`EXPERIMENT_STATUSES`]).
    ///
    /// `complete`, `interrupted` and `failed` stamp `finished_at` with the
    /// current time; `running` (a resume) clears it.
    pub fn set_experiment_status(&mut self, id: i64, status: &str) -> Result<()> {
        let loc = self.location();
        if !EXPERIMENT_STATUSES.contains(&status) {
            bail!("unknown experiment status {status:?}; expected one of {}", EXPERIMENT_STATUSES.join(", "));
        }
        let finished_at = (status != "running").then(now_rfc3339);
        let changed = self
            .conn
            .execute(
                "UPDATE experiments SET status = ?1, finished_at = ?2 WHERE id = ?3",
                params![status, finished_at, id],
            )
            .with_context(|| format!("cannot set status of experiment {id} in {loc}"))?;
        if changed == 0 {
            bail!("no experiment {id} in {loc}");
        }
        Ok(())
    }

    /// Writes one run — run row, metrics, device totals and monitor samples —
    /// in one transaction; returns the run's id.
    ///
    /// A run with the same `seq` replaces an earlier *failed* run of the same
    /// experiment (so a resume can retry failures); replacing an ok run is an
    /// error and leaves the store unchanged.
    pub fn record_run(&mut self, experiment_id: i64, run: &RunRecord) -> Result<i64> {
        let loc = self.location();
        let status = run.status.ok_or_else(|| {
            anyhow!("run seq {} of experiment {experiment_id} has no status; cannot record it", run.seq)
        })?;
        let what = format!("run seq {} of experiment {experiment_id} in {loc}", run.seq);

        let tx = self.write_tx()?;
        let exists: Option<i64> = tx
            .query_row("SELECT id FROM experiments WHERE id = ?1", [experiment_id], |r| r.get(0))
            .optional()
            .with_context(|| format!("cannot look up experiment {experiment_id} in {loc}"))?;
        if exists.is_none() {
            bail!("no experiment {experiment_id} in {loc}");
        }
        let earlier: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, status FROM runs WHERE experiment_id = ?1 AND seq = ?2",
                params![experiment_id, sql_int(run.seq)?],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .with_context(|| format!("cannot look up {what}"))?;
        if let Some((old_id, old_status)) = earlier {
            if old_status != RunStatus::Failed.as_str() {
                bail!("{what} is already recorded as {old_status}; an ok run is never replaced");
            }
            // Cascades to the failed run's metrics, totals and samples.
            tx.execute("DELETE FROM runs WHERE id = ?1", [old_id])
                .with_context(|| format!("cannot replace failed {what}"))?;
        }

        let run_id = insert_run(&tx, experiment_id, run, status).with_context(|| format!("cannot record {what}"))?;
        insert_metrics(&tx, run_id, run).with_context(|| format!("cannot record metrics of {what}"))?;
        if let Some(m) = &run.monitor {
            insert_monitor(&tx, run_id, m).with_context(|| format!("cannot record monitor data of {what}"))?;
        }
        super::extras::insert_extras(&tx, run_id, run).with_context(|| format!("cannot record extras of {what}"))?;
        tx.commit().with_context(|| format!("cannot commit {what}"))?;
        Ok(run_id)
    }

    /// Starts a write transaction that holds the write lock from the start,
    /// so it cannot fail halfway on a lock upgrade.
    fn write_tx(&mut self) -> Result<Transaction<'_>> {
        let loc = self.location();
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .with_context(|| format!("cannot start a write transaction on {loc}"))
    }
}

fn check_json(field: &str, text: &str) -> Result<()> {
    serde_json::from_str::<serde_json::Value>(text).map(|_| ()).with_context(|| format!("{field} is not valid JSON"))
}

fn insert_run(tx: &Transaction<'_>, experiment_id: i64, run: &RunRecord, status: RunStatus) -> Result<i64> {
    let mount = run.mount.as_ref();
    let monitor = run.monitor.as_ref();
    tx.execute(
        "INSERT INTO runs (experiment_id, seq, round, variant, workload, status, error, started_at, wall_s,
                           mount_source, mount_fstype, mount_options, mount_super_options, mount_fs_options,
                           geometry, has_monitor, monitor_device, monitor_interval_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
        params![
            experiment_id,
            sql_int(run.seq)?,
            sql_int(run.round)?,
            run.variant,
            run.workload,
            status.as_str(),
            run.error,
            run.started_at,
            run.wall_s,
            mount.map(|m| &m.source),
            mount.map(|m| &m.fstype),
            mount.map(|m| &m.mount_options),
            mount.map(|m| &m.super_options),
            mount.and_then(|m| m.fs_options.as_ref()),
            run.geometry,
            monitor.is_some(),
            monitor.and_then(|m| m.device.as_ref()),
            monitor.map(|m| m.interval_s),
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

fn insert_metrics(tx: &Transaction<'_>, run_id: i64, run: &RunRecord) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO metrics (run_id, position, name, unit, higher_is_better, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (pos, m) in run.metrics.iter().enumerate() {
        stmt.execute(params![run_id, sql_int(pos)?, m.name, m.unit, m.higher_is_better, m.value])
            .with_context(|| format!("metric {:?} (names must be unique within a run)", m.name))?;
    }
    Ok(())
}

fn insert_monitor(tx: &Transaction<'_>, run_id: i64, m: &MonitorData) -> Result<()> {
    if let Some(t) = &m.disk_totals {
        tx.execute(
            "INSERT INTO disk_totals (run_id, read_mb, written_mb, discarded_mb, reads, writes, discards, flushes,
                                      mean_read_kb, mean_write_kb, busy_s, duration_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                run_id,
                t.read_mb,
                t.written_mb,
                t.discarded_mb,
                sql_int(t.reads)?,
                sql_int(t.writes)?,
                sql_int(t.discards)?,
                sql_int(t.flushes)?,
                t.mean_read_kb,
                t.mean_write_kb,
                t.busy_s,
                t.duration_s
            ],
        )
        .context("disk totals")?;
    }
    let mut stmt = tx.prepare_cached(
        "INSERT INTO iostat_samples (run_id, idx, t_s, r_s, w_s, d_s, f_s, rkb_s, wkb_s, dkb_s,
                                     rrqm_s, wrqm_s, drqm_s, rrqm_pct, wrqm_pct, drqm_pct,
                                     r_await, w_await, d_await, f_await, aqu_sz,
                                     rareq_sz, wareq_sz, dareq_sz, util_pct)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                 ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
    )?;
    for (idx, s) in m.disk.iter().enumerate() {
        stmt.execute(params![
            run_id,
            sql_int(idx)?,
            s.t_s,
            s.r_s,
            s.w_s,
            s.d_s,
            s.f_s,
            s.rkb_s,
            s.wkb_s,
            s.dkb_s,
            s.rrqm_s,
            s.wrqm_s,
            s.drqm_s,
            s.rrqm_pct,
            s.wrqm_pct,
            s.drqm_pct,
            s.r_await,
            s.w_await,
            s.d_await,
            s.f_await,
            s.aqu_sz,
            s.rareq_sz,
            s.wareq_sz,
            s.dareq_sz,
            s.util_pct
        ])
        .with_context(|| format!("iostat sample {idx}"))?;
    }
    let mut stmt = tx.prepare_cached(
        "INSERT INTO cpu_samples (run_id, idx, t_s, user_pct, nice_pct, sys_pct, iowait_pct, irq_pct,
                                  softirq_pct, steal_pct, idle_pct)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for (idx, s) in m.cpu.iter().enumerate() {
        stmt.execute(params![
            run_id,
            sql_int(idx)?,
            s.t_s,
            s.user_pct,
            s.nice_pct,
            s.sys_pct,
            s.iowait_pct,
            s.irq_pct,
            s.softirq_pct,
            s.steal_pct,
            s.idle_pct
        ])
        .with_context(|| format!("CPU sample {idx}"))?;
    }
    Ok(())
}
