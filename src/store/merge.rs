//! `fslab merge`: copying experiments from one store into another, for
//! machines that could not reach the shared database.
//!
//! An experiment is matched in the target by its campaign (shards of one
//! campaign, each recorded in its own file, become one experiment) or else
//! by its uuid (copies of one store). Runs are matched by seq within it and
//! written through the same code as live runs. Merging is idempotent: a
//! second merge of the same sources finds everything there and adds
//! nothing. Two different ok runs at the same seq are a conflict: the merge
//! of that experiment stops and nothing of it is written.

use std::fmt;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::campaign::{put_shard, ShardRow};
use super::columns::from_row;
use super::read::{experiment_row, variants, workloads};
use super::runs::{load_run, put_run, Existing, Put};
use super::sql::{params, Sql};
use super::tags::{insert_tags, read_tags};
use super::write::{insert_experiment, refresh_campaign, ExperimentRow};
use super::Store;
use crate::stored::ExperimentStatus;

/// What a merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MergeReport {
    pub experiments_added: usize,
    /// Source experiments that were already in the target (same campaign or uuid).
    pub experiments_matched: usize,
    pub runs_added: usize,
    /// Failed runs in the target replaced by ok runs from the source.
    pub runs_replaced: usize,
    /// Runs already in the target with the same content.
    pub runs_unchanged: usize,
    /// Source runs not taken because the target's run at that seq wins
    /// (it is ok and the source's failed, or both failed).
    pub runs_kept: usize,
    pub shards_updated: usize,
    pub tags_added: usize,
}

impl MergeReport {
    /// Whether the merge changed the target at all.
    pub fn changed(&self) -> bool {
        self.experiments_added + self.runs_added + self.runs_replaced + self.shards_updated + self.tags_added > 0
    }

    fn add(&mut self, o: &MergeReport) {
        self.experiments_added += o.experiments_added;
        self.experiments_matched += o.experiments_matched;
        self.runs_added += o.runs_added;
        self.runs_replaced += o.runs_replaced;
        self.runs_unchanged += o.runs_unchanged;
        self.runs_kept += o.runs_kept;
        self.shards_updated += o.shards_updated;
        self.tags_added += o.tags_added;
    }
}

impl fmt::Display for MergeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} experiments added, {} matched; {} runs added, {} replaced failed ones, {} already there, \
             {} not taken; {} shard records updated, {} tags added",
            self.experiments_added,
            self.experiments_matched,
            self.runs_added,
            self.runs_replaced,
            self.runs_unchanged,
            self.runs_kept,
            self.shards_updated,
            self.tags_added
        )
    }
}

/// Runs copied per target transaction: large enough to be fast, small
/// enough that an interrupted merge loses little (and resumes by merging again).
const RUNS_PER_TRANSACTION: usize = 200;

/// Copies every experiment of `source` into `target`.
pub fn merge(target: &mut Store, source: &Store) -> Result<MergeReport> {
    let ids: Vec<i64> = source.list_experiments()?.iter().map(|e| e.id).collect();
    let mut report = MergeReport::default();
    for id in ids {
        let r = merge_experiment(target, source, id)?;
        report.add(&r);
    }
    Ok(report)
}

/// One source experiment as read for merging.
struct SourceExperiment {
    row: ExperimentRow,
    variants: Vec<super::VariantRow>,
    workloads: Vec<super::WorkloadRow>,
    tags: Vec<(String, String)>,
    shards: Vec<ShardRow>,
    run_ids: Vec<i64>,
}

fn read_source(q: &mut dyn Sql, id: i64) -> Result<SourceExperiment> {
    let row = experiment_row(q, id)?.with_context(|| format!("no experiment {id}"))?;
    let shards = q
        .query("SELECT * FROM shards WHERE experiment_id = ?1 ORDER BY shard_index", params![id])?
        .iter()
        .map(from_row)
        .collect::<Result<_>>()?;
    let run_ids = q
        .query("SELECT id FROM runs WHERE experiment_id = ?1 ORDER BY seq", params![id])?
        .iter()
        .map(|r| r.get(0))
        .collect::<Result<_>>()?;
    Ok(SourceExperiment {
        variants: variants(q, id)?,
        workloads: workloads(q, id)?,
        tags: read_tags(q, id)?,
        row,
        shards,
        run_ids,
    })
}

fn merge_experiment(target: &mut Store, source: &Store, source_id: i64) -> Result<MergeReport> {
    let (src_loc, dst_loc) = (source.location(), target.location());
    let src = source.snapshot(|q| read_source(q, source_id))?;
    let what = format!(
        "experiment {} {:?} (uuid {}) from {src_loc} into {dst_loc}",
        source_id,
        src.row.name,
        src.row.uuid.as_deref().unwrap_or("?")
    );
    let mut report = MergeReport::default();
    let target_id = target
        .write(|q| {
            let mut r = MergeReport::default();
            let id = match find_target(q, &src.row)? {
                Some(id) => {
                    check_same(q, id, &src)?;
                    r.experiments_matched = 1;
                    id
                }
                None => {
                    r.experiments_added = 1;
                    insert_experiment(q, &src.row, &src.variants, &src.workloads)?
                }
            };
            r.tags_added = insert_tags(q, id, &src.tags)?;
            for s in &src.shards {
                // Machine ids are per store: the shard's machine is known
                // through its runs; the row keeps its host name.
                let s = ShardRow { machine_id: None, ..s.clone() };
                r.shards_updated += usize::from(put_shard(q, id, &s)?);
            }
            if src.row.campaign.is_none() {
                adopt_status(q, id, &src.row)?;
            }
            report = r;
            Ok(id)
        })
        .with_context(|| format!("cannot merge {what}"))?;

    for chunk in src.run_ids.chunks(RUNS_PER_TRANSACTION) {
        let runs = source.snapshot(|q| chunk.iter().map(|&id| load_run(q, id)).collect::<Result<Vec<_>>>())?;
        let counts = target
            .write(|q| {
                let mut r = MergeReport::default();
                for run in &runs {
                    match put_run(q, target_id, run, Existing::Merge)? {
                        Put::Inserted(_) => r.runs_added += 1,
                        Put::Replaced(_) => r.runs_replaced += 1,
                        Put::Unchanged(_) => r.runs_unchanged += 1,
                        Put::Kept(_) => r.runs_kept += 1,
                    }
                }
                Ok(r)
            })
            .with_context(|| format!("cannot merge {what}"))?;
        report.add(&counts);
    }
    target.write(|q| refresh_campaign(q, target_id)).with_context(|| format!("cannot merge {what}"))?;
    Ok(report)
}

/// The target experiment a source experiment merges into, if any.
fn find_target(q: &mut dyn Sql, src: &ExperimentRow) -> Result<Option<i64>> {
    let row = match &src.campaign {
        Some(c) => q.query_opt("SELECT id FROM experiments WHERE campaign = ?1", params![c.as_str()])?,
        None => q.query_opt("SELECT id FROM experiments WHERE uuid = ?1", params![src.uuid.clone()])?,
    };
    row.map(|r| r.get(0)).transpose()
}

/// Refuses to merge into an experiment that is a different one.
fn check_same(q: &mut dyn Sql, id: i64, src: &SourceExperiment) -> Result<()> {
    let dst = experiment_row(q, id)?.with_context(|| format!("no experiment {id}"))?;
    let whose = match &src.row.campaign {
        Some(c) => format!("campaign {c:?}"),
        None => format!("uuid {}", src.row.uuid.as_deref().unwrap_or("?")),
    };
    if dst.spec_hash != src.row.spec_hash || dst.name != src.row.name {
        bail!(
            "conflict: the target's experiment {id} has the same {whose} but is {:?} with spec hash {}, \
             the source's is {:?} with spec hash {}",
            dst.name,
            dst.spec_hash,
            src.row.name,
            src.row.spec_hash
        );
    }
    if dst.shard_count != src.row.shard_count {
        bail!(
            "conflict: {whose} has {:?} shards in the target and {:?} in the source",
            dst.shard_count,
            src.row.shard_count
        );
    }
    let same_rows = |a: &[(String, String)], b: &[(String, String)]| a == b;
    let names = |v: &[super::VariantRow]| v.iter().map(|v| (v.name.clone(), v.config_json.clone())).collect::<Vec<_>>();
    let labels =
        |v: &[super::WorkloadRow]| v.iter().map(|w| (w.label.clone(), w.config_json.clone())).collect::<Vec<_>>();
    if !same_rows(&names(&variants(q, id)?), &names(&src.variants))
        || !same_rows(&labels(&workloads(q, id)?), &labels(&src.workloads))
    {
        bail!("conflict: {whose} has different variants or workloads in the target and the source");
    }
    Ok(())
}

/// A copy of a finished experiment finishes an unfinished one.
fn adopt_status(q: &mut dyn Sql, id: i64, src: &ExperimentRow) -> Result<()> {
    let r = q.query_one("SELECT status FROM experiments WHERE id = ?1", params![id])?;
    let status: ExperimentStatus = r.get(0)?;
    if src.status.progress() > status.progress() {
        q.execute(
            "UPDATE experiments SET status = ?1, finished_at = ?2 WHERE id = ?3",
            params![src.status, src.finished_at.clone(), id],
        )?;
    }
    Ok(())
}
