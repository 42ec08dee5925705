//! Writing experiments and runs.

use std::borrow::Cow;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::campaign::{heartbeat, shard_count, update_campaign_status};
use super::columns::insert_one;
use super::runs::{put_run, Existing, WholeRun};
use super::sql::{params, Sql, Value};
use super::{check_json, now_rfc3339, NewExperiment, RecordingContext, Store, VariantRow, WorkloadRow};
use crate::record::RunRecord;
use crate::stored::ExperimentStatus;

/// The `experiments` table's columns, one field each: the private codec
/// between SQL and [`NewExperiment`] (written) / [`StoredExperiment`](super::StoredExperiment) (read).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct ExperimentRow {
    #[serde(skip_serializing, default)]
    pub id: i64,
    #[serde(default)]
    pub uuid: Option<String>,
    pub name: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: ExperimentStatus,
    pub spec_path: Option<String>,
    pub spec_text: String,
    pub spec_hash: String,
    /// u64 as decimal text: SQL integers are signed.
    pub seed: String,
    pub plan_json: String,
    pub environment_json: String,
    #[serde(default)]
    pub campaign: Option<String>,
    #[serde(default)]
    pub shard_count: Option<usize>,
}

impl ExperimentRow {
    /// A new experiment, status `running`, with a fresh uuid.
    pub fn new(e: &NewExperiment) -> ExperimentRow {
        ExperimentRow {
            id: 0,
            uuid: Some(uuid::Uuid::new_v4().to_string()),
            name: e.name.clone(),
            created_at: now_rfc3339(),
            finished_at: None,
            status: ExperimentStatus::Running,
            spec_path: e.spec_path.clone(),
            spec_text: e.spec_text.clone(),
            spec_hash: e.spec_hash.clone(),
            seed: e.seed.to_string(),
            // Structs with string-keyed maps only: serializing cannot fail.
            plan_json: serde_json::to_string(&e.plan).expect("the plan serializes"),
            environment_json: serde_json::to_string(&e.environment).expect("the environment serializes"),
            campaign: None,
            shard_count: None,
        }
    }
}

/// Checked before writing so exports can always embed these as parsed JSON.
pub(super) fn check_new_experiment(e: &NewExperiment) -> Result<()> {
    let of = format!("of experiment {:?}", e.name);
    for v in &e.variants {
        check_json(&format!("config_json of variant {:?} {of}", v.name), &v.config_json)?;
    }
    for w in &e.workloads {
        check_json(&format!("config_json of workload {:?} {of}", w.label), &w.config_json)?;
    }
    Ok(())
}

/// Inserts an experiment row with its variants and workloads; returns its id.
pub(super) fn insert_experiment(
    q: &mut dyn Sql,
    e: &ExperimentRow,
    variants: &[VariantRow],
    workloads: &[WorkloadRow],
) -> Result<i64> {
    let name = &e.name;
    let id: i64 = insert_one(q, "experiments", &[], e, Some("id"))
        .with_context(|| format!("cannot record experiment {name:?}"))?
        .expect("RETURNING asked")
        .get(0)?;
    for v in variants {
        insert_one(q, "variants", &[("experiment_id", Value::Int(id))], v, None).with_context(|| {
            format!("cannot record variant {:?} (position {}) of experiment {name:?}", v.name, v.position)
        })?;
    }
    for w in workloads {
        insert_one(q, "workloads", &[("experiment_id", Value::Int(id))], w, None).with_context(|| {
            format!("cannot record workload {:?} (position {}) of experiment {name:?}", w.label, w.position)
        })?;
    }
    Ok(id)
}

impl Store {
    /// Records a new experiment (status `running`) with its variants and
    /// workloads, in one transaction; returns its id.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<i64> {
        check_new_experiment(e)?;
        let loc = self.location();
        let row = ExperimentRow::new(e);
        self.write(|q| insert_experiment(q, &row, &e.variants, &e.workloads))
            .with_context(|| format!("cannot record experiment {:?} in {loc}", e.name))
    }

    /// Sets an experiment's status.
    ///
    /// `complete`, `interrupted` and `failed` stamp `finished_at` with the
    /// current time; `running` (a resume) clears it. For a campaign's
    /// experiment, while this store's [`RecordingContext::shard`] is set, this
    /// ends that shard instead ([`Store::finish_shard`]) and the experiment
    /// is complete only when all shards are.
    pub fn set_experiment_status(&mut self, id: i64, status: ExperimentStatus) -> Result<()> {
        let loc = self.location();
        if let Some(shard) = self.context.shard {
            let is_campaign = self.read(|q| shard_count(q, id)).map_err(|e| anyhow!("{e:#} in {loc}"))?.is_some();
            if is_campaign {
                return self.finish_shard(id, shard.index, status);
            }
        }
        let finished_at = status.is_finished().then(now_rfc3339);
        let changed = self
            .write(|q| {
                q.execute(
                    "UPDATE experiments SET status = ?1, finished_at = ?2 WHERE id = ?3",
                    params![status, finished_at.clone(), id],
                )
            })
            .with_context(|| format!("cannot set status of experiment {id} in {loc}"))?;
        if changed == 0 {
            bail!("no experiment {id} in {loc}");
        }
        Ok(())
    }

    /// Writes one run — run row, metrics, device totals, monitor samples,
    /// extras, and the machine and shard of [`Store::run_context`] — in one
    /// transaction; returns the run's id.
    ///
    /// A run with the same `seq` replaces an earlier *failed* run of the
    /// same experiment (so a resume can retry failures). Recording a run
    /// identical to the stored one is a no-op returning its id (so a write
    /// whose commit acknowledgement was lost can simply be repeated);
    /// replacing an ok run with a different one is an error and leaves the
    /// store unchanged.
    pub fn record_run(&mut self, experiment_id: i64, run: &RunRecord) -> Result<i64> {
        let context = self.context.clone();
        self.record_run_with(experiment_id, run, &context)
    }

    /// [`Store::record_run`] with an explicit context.
    pub fn record_run_with(&mut self, experiment_id: i64, run: &RunRecord, context: &RecordingContext) -> Result<i64> {
        self.record_run_as(experiment_id, run, context, &uuid::Uuid::new_v4().to_string())
    }

    /// [`Store::record_run_with`], the run identified by `uuid` and
    /// idempotent on it: a run already stored with this uuid is not written
    /// again (a commit can succeed while its acknowledgement is lost). On
    /// PostgreSQL a lost connection (a server restart, a network cut) is
    /// retried with backoff, reconnecting, for up to [`write_retry_window`].
    pub fn record_run_as(
        &mut self,
        experiment_id: i64,
        run: &RunRecord,
        context: &RecordingContext,
        uuid: &str,
    ) -> Result<i64> {
        let loc = self.location();
        if run.status.is_none() {
            bail!(
                "run {} (seq {}) of experiment {experiment_id} has no status; cannot record it",
                run.seq + 1,
                run.seq
            );
        }
        let what = format!("run {} (seq {}) of experiment {experiment_id} in {loc}", run.seq + 1, run.seq);
        let whole = WholeRun {
            record: Cow::Borrowed(run),
            uuid: Some(Cow::Borrowed(uuid)),
            shard: context.shard.map(|s| s.index),
            machine: context.machine.as_ref().map(Cow::Borrowed),
        };
        let window = write_retry_window();
        let deadline = std::time::Instant::now() + window;
        let mut attempt = 0u32;
        loop {
            let written = self.write(|q| {
                if let Some(stored) = q.query_opt("SELECT id FROM runs WHERE uuid = ?1", params![uuid])? {
                    return stored.get(0);
                }
                super::read::require_experiment(q, experiment_id, &loc)?;
                let put = put_run(q, experiment_id, &whole, Existing::Record)?;
                if let Some(shard) = context.shard {
                    if shard_count(q, experiment_id)?.is_some() {
                        heartbeat(q, experiment_id, shard.index)?;
                    }
                }
                Ok(put.id())
            });
            let transient = self.location.as_ref().is_some_and(|l| l.is_postgres());
            match written {
                Err(e) if transient && super::pg::is_connection_lost(&e) => {
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        let secs = window.as_secs();
                        return Err(
                            e.context(format!("cannot record {what}: the database did not come back within {secs} s"))
                        );
                    }
                    attempt += 1;
                    if attempt == 1 {
                        crate::output::diagnostic(&format!(
                            "lost the connection to {loc} while recording run {}; reconnecting and retrying for up \
                             to {} s",
                            run.seq + 1,
                            window.as_secs()
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(250 << attempt.min(5)).min(deadline - now));
                }
                Err(e) => return Err(e.context(format!("cannot record {what}"))),
                Ok(id) => {
                    if attempt > 0 {
                        crate::output::diagnostic(&format!(
                            "recorded run {} in {loc} after {attempt} retries",
                            run.seq + 1
                        ));
                    }
                    return Ok(id);
                }
            }
        }
    }
}

/// How long a run write is retried while the PostgreSQL server is away:
/// 60 s, or `FSLAB_TEST_STORE_RETRY_S` seconds (for tests only: lets a test
/// outlast the window quickly).
pub fn write_retry_window() -> std::time::Duration {
    let secs = std::env::var("FSLAB_TEST_STORE_RETRY_S").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    std::time::Duration::from_secs(secs)
}

/// Re-derives a campaign experiment's status (after a merge).
pub(super) fn refresh_campaign(q: &mut dyn Sql, experiment_id: i64) -> Result<()> {
    if let Some(count) = shard_count(q, experiment_id)? {
        super::lock_experiment(q, experiment_id)?;
        update_campaign_status(q, experiment_id, count)?;
    }
    Ok(())
}
