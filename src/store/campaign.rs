//! Campaigns: one experiment run as N shards (`fslab run --shard K/N`), on
//! as many machines, all joining one experiment in a shared store.
//!
//! The store keeps which shards joined, their state and a heartbeat, so
//! `compare` and `report` can say which shards are missing or still
//! running. The slicing of the run matrix itself belongs to the planner.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::columns::{from_row, insert_one};
use super::machines::machine_id;
use super::sql::{int, params, Sql, Value};
use super::write::{check_new_experiment, insert_experiment, ExperimentRow};
use super::{now_rfc3339, NewExperiment, Store};
use crate::inspect::machine::Machine;
use crate::stored::ExperimentStatus;

/// `K/N`: shard K (1-based) of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl FromStr for Shard {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Shard> {
        let bad = || anyhow!("shard {s:?} is not K/N with 1 <= K <= N (e.g. 2/8)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One shard that joined a campaign.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardRow {
    #[serde(rename = "shard_index")]
    pub index: usize,
    #[serde(rename = "shard_count")]
    pub count: usize,
    pub state: ExperimentStatus,
    pub hostname: String,
    pub machine_id: Option<i64>,
    /// RFC 3339 UTC.
    pub joined_at: String,
    /// Last sign of life: joining, each recorded run, [`Store::shard_heartbeat`].
    pub heartbeat_at: String,
    pub finished_at: Option<String>,
}

/// Where a campaign stands ([`Store::campaign_status`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CampaignStatus {
    pub experiment_id: i64,
    pub campaign: String,
    pub shard_count: usize,
    /// Shards that joined, by index.
    pub shards: Vec<ShardRow>,
    /// Indices (1-based) of shards that never joined.
    pub missing: Vec<usize>,
    /// Shards whose state is `running` and that beat within [`STALE_AFTER`].
    pub running: Vec<usize>,
    /// Shards still `running` but silent for longer than [`STALE_AFTER`]:
    /// probably killed; `--resume` on their machine continues them.
    pub stale: Vec<usize>,
    /// Shards that ended `interrupted` or `failed`.
    pub unfinished: Vec<usize>,
}

impl CampaignStatus {
    /// Every shard joined and completed.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.shards.iter().all(|s| s.state == ExperimentStatus::Complete)
    }

    /// One line for people, e.g. `campaign c1: 3/4 shards complete; missing 4`.
    pub fn describe(&self) -> String {
        let done = self.shards.iter().filter(|s| s.state == ExperimentStatus::Complete).count();
        let mut line = format!("campaign {}: {done}/{} shards complete", self.campaign, self.shard_count);
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
        for (what, v) in [
            ("missing", &self.missing),
            ("running", &self.running),
            ("silent", &self.stale),
            ("stopped", &self.unfinished),
        ] {
            if !v.is_empty() {
                line.push_str(&format!("; {what} {}", list(v)));
            }
        }
        line
    }
}

/// A running shard that has not beaten for this long counts as stale.
/// Generous because one run (a heartbeat each) may take many minutes.
pub const STALE_AFTER: Duration = Duration::from_secs(30 * 60);

/// The CI systems whose run id makes a default campaign id: all shards of
/// one CI run (matrix, array job) share it.
const CI_RUN_IDS: &[&[&str]] = &[
    &["GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"],
    &["SLURM_ARRAY_JOB_ID"],
    &["CI_PIPELINE_ID"],
    &["BUILDKITE_BUILD_ID"],
    &["FSLAB_CAMPAIGN_RUN"],
];

/// The campaign id for `--shard`: `explicit` (`--campaign ID`) if given,
/// else the spec hash's first 12 characters with the CI run id (GitHub
/// Actions, Slurm array job, GitLab pipeline, Buildkite, or
/// `FSLAB_CAMPAIGN_RUN`), so every shard of one CI run computes the same.
pub fn campaign_id(spec_hash: &str, explicit: Option<&str>) -> Result<String> {
    if let Some(id) = explicit {
        if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
            bail!("--campaign {id:?}: must be 1-200 printable characters");
        }
        return Ok(id.to_string());
    }
    let short: String = spec_hash.chars().take(12).collect();
    for vars in CI_RUN_IDS {
        let values: Vec<String> = vars.iter().filter_map(|v| std::env::var(v).ok()).filter(|v| !v.is_empty()).collect();
        if values.len() == vars.len() {
            return Ok(format!("{short}-{}", values.join(".")));
        }
    }
    bail!(
        "--shard needs a campaign id that every shard agrees on: pass --campaign ID \
         (or run under a CI that sets GITHUB_RUN_ID, SLURM_ARRAY_JOB_ID, CI_PIPELINE_ID or BUILDKITE_BUILD_ID, \
         or set FSLAB_CAMPAIGN_RUN)"
    )
}

fn read_shards(q: &mut dyn Sql, experiment_id: i64) -> Result<Vec<ShardRow>> {
    q.query("SELECT * FROM shards WHERE experiment_id = ?1 ORDER BY shard_index", params![experiment_id])?
        .iter()
        .map(from_row)
        .collect()
}

/// The experiment status a campaign's shards add up to.
fn derived_status(shards: &[ShardRow], count: usize) -> ExperimentStatus {
    let all_joined = (1..=count).all(|k| shards.iter().any(|s| s.index == k));
    let any = |state: ExperimentStatus| shards.iter().any(|s| s.state == state);
    if all_joined && shards.iter().all(|s| s.state == ExperimentStatus::Complete) {
        ExperimentStatus::Complete
    } else if !all_joined || any(ExperimentStatus::Running) {
        // Shards still to come count as running: the campaign is not over.
        ExperimentStatus::Running
    } else if any(ExperimentStatus::Failed) {
        ExperimentStatus::Failed
    } else {
        ExperimentStatus::Interrupted
    }
}

/// Sets the experiment's status from its shards (inside a transaction).
pub(super) fn update_campaign_status(q: &mut dyn Sql, experiment_id: i64, count: usize) -> Result<()> {
    let shards = read_shards(q, experiment_id)?;
    let status = derived_status(&shards, count);
    let row = q.query_one("SELECT status, finished_at FROM experiments WHERE id = ?1", params![experiment_id])?;
    let (old, finished): (ExperimentStatus, Option<String>) = (row.get(0)?, row.get(1)?);
    if old != status {
        // The campaign finished when its last shard did.
        let finished_at = status
            .is_finished()
            .then(|| shards.iter().filter_map(|s| s.finished_at.clone()).max().unwrap_or_else(now_rfc3339));
        q.execute(
            "UPDATE experiments SET status = ?1, finished_at = ?2 WHERE id = ?3",
            params![status, finished_at, experiment_id],
        )?;
    } else if status == ExperimentStatus::Running && finished.is_some() {
        q.execute("UPDATE experiments SET finished_at = NULL WHERE id = ?1", params![experiment_id])?;
    }
    Ok(())
}

/// Writes (or, merging, updates) one shard row.
pub(super) fn put_shard(q: &mut dyn Sql, experiment_id: i64, s: &ShardRow) -> Result<bool> {
    let existing = q
        .query_opt(
            "SELECT * FROM shards WHERE experiment_id = ?1 AND shard_index = ?2",
            &[Value::Int(experiment_id), int(s.index)?],
        )?
        .map(|r| from_row::<ShardRow>(&r))
        .transpose()?;
    match existing {
        None => {
            insert_one(q, "shards", &[("experiment_id", Value::Int(experiment_id))], s, None)?;
            Ok(true)
        }
        Some(old) if advances(&old, s) => {
            q.execute(
                "UPDATE shards SET state = ?1, hostname = ?2, machine_id = ?3, heartbeat_at = ?4, finished_at = ?5
                 WHERE experiment_id = ?6 AND shard_index = ?7",
                &[
                    Value::from(s.state),
                    Value::from(&s.hostname),
                    Value::from(s.machine_id),
                    Value::from(&s.heartbeat_at),
                    Value::from(s.finished_at.clone()),
                    Value::Int(experiment_id),
                    int(s.index)?,
                ],
            )?;
            Ok(true)
        }
        Some(_) => Ok(false),
    }
}

/// Whether merging `new` over `old` tells something newer: a later state
/// (complete beats stopped beats running), or the same state heard later.
fn advances(old: &ShardRow, new: &ShardRow) -> bool {
    (new.state.progress(), &new.heartbeat_at) > (old.state.progress(), &old.heartbeat_at)
}

impl Store {
    /// Joins shard `shard` of campaign `campaign`: creates the campaign's
    /// experiment from `new` if no shard has yet, else checks that `new` is
    /// the same experiment (same spec hash, same shard count); marks the
    /// shard running (also when it resumes after a kill). Returns the
    /// experiment id, which every shard shares.
    pub fn join_campaign(
        &mut self,
        new: &NewExperiment,
        campaign: &str,
        shard: Shard,
        machine: Option<&Machine>,
    ) -> Result<i64> {
        check_new_experiment(new)?;
        let loc = self.location();
        self.write(|q| {
            let existing = q.query_opt(
                "SELECT id, spec_hash, shard_count FROM experiments WHERE campaign = ?1",
                params![campaign],
            )?;
            let id = match existing {
                Some(r) => {
                    let (id, hash, count): (i64, String, Option<usize>) = (r.get(0)?, r.get(1)?, r.get(2)?);
                    if hash != new.spec_hash {
                        bail!(
                            "campaign {campaign:?} is experiment {id}, run from a different experiment file \
                             (spec hash {hash}, this one {}); use another --campaign",
                            new.spec_hash
                        );
                    }
                    if count != Some(shard.count) {
                        bail!(
                            "campaign {campaign:?} runs as {} shards, not {}; every shard must use the same N",
                            count.map_or("?".into(), |c| c.to_string()),
                            shard.count
                        );
                    }
                    id
                }
                None => {
                    let row = ExperimentRow {
                        campaign: Some(campaign.to_string()),
                        shard_count: Some(shard.count),
                        ..ExperimentRow::new(new)
                    };
                    insert_experiment(q, &row, &new.variants, &new.workloads)?
                }
            };
            super::lock_experiment(q, id)?;
            let now = now_rfc3339();
            let machine_id = machine.map(|m| machine_id(q, m)).transpose()?;
            let existing = q.query_opt(
                "SELECT joined_at FROM shards WHERE experiment_id = ?1 AND shard_index = ?2",
                &[Value::Int(id), int(shard.index)?],
            )?;
            let hostname = machine.map(|m| m.hostname.clone()).unwrap_or_default();
            match existing {
                None => {
                    let row = ShardRow {
                        index: shard.index,
                        count: shard.count,
                        state: ExperimentStatus::Running,
                        hostname,
                        machine_id,
                        joined_at: now.clone(),
                        heartbeat_at: now,
                        finished_at: None,
                    };
                    insert_one(q, "shards", &[("experiment_id", Value::Int(id))], &row, None)?;
                }
                Some(_) => {
                    q.execute(
                        "UPDATE shards SET state = 'running', hostname = ?1, machine_id = ?2, heartbeat_at = ?3,
                                           finished_at = NULL
                         WHERE experiment_id = ?4 AND shard_index = ?5",
                        &[
                            Value::from(hostname),
                            Value::from(machine_id),
                            Value::from(now),
                            Value::Int(id),
                            int(shard.index)?,
                        ],
                    )?;
                }
            }
            if let Some(m) = machine {
                super::tags::insert_tags(q, id, &super::tags::automatic_tags(m))?;
            }
            update_campaign_status(q, id, shard.count)?;
            Ok(id)
        })
        .with_context(|| format!("cannot join shard {shard} of campaign {campaign:?} in {loc}"))
    }

    /// The experiment of campaign `campaign`, if any shard joined it here.
    pub fn find_campaign(&self, campaign: &str) -> Result<Option<i64>> {
        let loc = self.location();
        self.read(|q| {
            q.query_opt("SELECT id FROM experiments WHERE campaign = ?1", params![campaign])?
                .map(|r| r.get(0))
                .transpose()
        })
        .with_context(|| format!("cannot search campaigns in {loc}"))
    }

    /// Records that shard `index` is alive (also done by every run it records).
    pub fn shard_heartbeat(&mut self, experiment_id: i64, index: usize) -> Result<()> {
        let loc = self.location();
        self.write(|q| heartbeat(q, experiment_id, index))
            .with_context(|| format!("cannot record the heartbeat of shard {index} in {loc}"))
    }

    /// Ends shard `index` with `state` (`complete`, `interrupted` or
    /// `failed`; `running` when it resumes) and sets the experiment's status
    /// from all its shards: complete only when every shard joined and
    /// completed.
    pub fn finish_shard(&mut self, experiment_id: i64, index: usize, state: ExperimentStatus) -> Result<()> {
        let loc = self.location();
        self.write(|q| {
            let count = shard_count(q, experiment_id)?
                .with_context(|| format!("experiment {experiment_id} is not a campaign"))?;
            super::lock_experiment(q, experiment_id)?;
            let now = now_rfc3339();
            let finished = state.is_finished().then(|| now.clone());
            let n = q.execute(
                "UPDATE shards SET state = ?1, heartbeat_at = ?2, finished_at = ?3 WHERE experiment_id = ?4 AND shard_index = ?5",
                &[Value::from(state), Value::from(now), Value::from(finished), Value::Int(experiment_id), int(index)?],
            )?;
            if n == 0 {
                bail!("shard {index} never joined experiment {experiment_id}");
            }
            update_campaign_status(q, experiment_id, count)
        })
        .with_context(|| format!("cannot end shard {index} of experiment {experiment_id} in {loc}"))
    }

    /// Which shards of a campaign joined, are missing, running or silent;
    /// `None` for an experiment that is not a campaign.
    pub fn campaign_status(&self, experiment_id: i64) -> Result<Option<CampaignStatus>> {
        let loc = self.location();
        self.snapshot(|q| {
            let r =
                q.query_opt("SELECT campaign, shard_count FROM experiments WHERE id = ?1", params![experiment_id])?;
            let Some(r) = r else { bail!("no experiment {experiment_id} in {loc}") };
            let (Some(campaign), Some(count)) = (r.get::<Option<String>, _>(0)?, r.get::<Option<usize>, _>(1)?) else {
                return Ok(None);
            };
            let shards = read_shards(q, experiment_id)?;
            let now = SystemTime::now();
            let silent = |s: &ShardRow| {
                humantime::parse_rfc3339(&s.heartbeat_at)
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                    .is_some_and(|age| age > STALE_AFTER)
            };
            let pick = |f: &dyn Fn(&ShardRow) -> bool| shards.iter().filter(|s| f(s)).map(|s| s.index).collect();
            Ok(Some(CampaignStatus {
                experiment_id,
                campaign,
                shard_count: count,
                missing: (1..=count).filter(|k| !shards.iter().any(|s| s.index == *k)).collect(),
                running: pick(&|s| s.state == ExperimentStatus::Running && !silent(s)),
                stale: pick(&|s| s.state == ExperimentStatus::Running && silent(s)),
                unfinished: pick(&|s| matches!(s.state, ExperimentStatus::Failed | ExperimentStatus::Interrupted)),
                shards,
            }))
        })
        .with_context(|| format!("cannot read campaign of experiment {experiment_id} from {loc}"))
    }
}

pub(super) fn shard_count(q: &mut dyn Sql, experiment_id: i64) -> Result<Option<usize>> {
    let r = q.query_opt("SELECT shard_count FROM experiments WHERE id = ?1", params![experiment_id])?;
    match r {
        Some(r) => r.get(0),
        None => bail!("no experiment {experiment_id}"),
    }
}

pub(super) fn heartbeat(q: &mut dyn Sql, experiment_id: i64, index: usize) -> Result<()> {
    let n = q.execute(
        "UPDATE shards SET heartbeat_at = ?1 WHERE experiment_id = ?2 AND shard_index = ?3",
        &[Value::from(now_rfc3339()), Value::Int(experiment_id), int(index)?],
    )?;
    if n == 0 {
        bail!("shard {index} never joined experiment {experiment_id}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parsing() {
        assert_eq!("2/8".parse::<Shard>().unwrap(), Shard { index: 2, count: 8 });
        assert_eq!(Shard { index: 1, count: 1 }.to_string(), "1/1");
        for bad in ["0/4", "5/4", "x/4", "3", "1/0", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn campaign_ids() {
        assert_eq!(campaign_id("abcdef0123456789", Some("nightly-42")).unwrap(), "nightly-42");
        assert!(campaign_id("abc", Some("")).is_err());
    }
}
