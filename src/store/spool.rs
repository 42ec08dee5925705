//! Runs that could not be written: when the database stays away longer
//! than the write retry window ([`super::write::write_retry_window`]), the
//! measured run is kept as a file in the work directory's `spool/`
//! (`<run uuid>.json`), and the next `fslab run --resume` of the same
//! experiment stores it (idempotent on the run's uuid) before measuring, so
//! a measurement is never lost to a transient fault.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{Shard, Store};
use crate::record::RunRecord;

/// One spooled run: which experiment of which store it belongs to, and
/// the run as it would have been recorded.
#[derive(Debug, Serialize, Deserialize)]
pub struct SpooledRun {
    /// The store's location, as errors name it (no password).
    pub store: String,
    /// The experiment's stable uuid (its id may differ after a merge).
    pub experiment_uuid: String,
    pub run_uuid: String,
    pub shard: Option<Shard>,
    pub record: RunRecord,
}

/// The spool directory of a work directory.
pub fn dir(workdir: &Path) -> PathBuf {
    workdir.join("spool")
}

/// Whether `err` is a lost (or refused) database connection, the fault a
/// spool file is for.
pub fn is_connection_lost(err: &anyhow::Error) -> bool {
    super::pg::is_connection_lost(err)
}

/// Writes `run` to `workdir`'s spool (whole or not at all); returns its path.
pub fn write(workdir: &Path, run: &SpooledRun) -> Result<PathBuf> {
    let dir = dir(workdir);
    crate::sys::trusted::ensure_dir(&dir)?;
    let file = dir.join(format!("{}.json", run.run_uuid));
    let tmp = dir.join(format!(".{}.tmp", run.run_uuid));
    std::fs::write(&tmp, serde_json::to_vec_pretty(run)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

impl Store {
    /// Stores the runs spooled in `workdir` for experiment `id` (uuid
    /// `experiment_uuid`), removing each file once it is stored; returns a
    /// line per run for the user. Files of other experiments stay.
    pub fn store_spooled(&mut self, workdir: &Path, id: i64, experiment_uuid: &str) -> Result<Vec<String>> {
        self.store_spool(workdir, &mut |_, uuid| Ok((uuid == experiment_uuid).then_some(id)))
    }

    /// `fslab merge --spool WORKDIR`: stores every run spooled in `workdir`
    /// whose experiment (by uuid) is in this store; files of experiments it
    /// does not hold stay (and are said to).
    pub fn merge_spool(&mut self, workdir: &Path) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        let stored = self.store_spool(workdir, &mut |store, uuid| {
            let id = store.experiment_by_uuid(uuid)?;
            if id.is_none() {
                lines.push(format!(
                    "left in the spool: a run of experiment {uuid}, which {} does not hold",
                    store.location()
                ));
            }
            Ok(id)
        })?;
        lines.splice(0..0, stored);
        Ok(lines)
    }

    /// Stores each spooled run of `workdir` that `experiment` (given the
    /// store and the run's experiment uuid) places in an experiment here.
    fn store_spool(
        &mut self,
        workdir: &Path,
        experiment: &mut dyn FnMut(&Store, &str) -> Result<Option<i64>>,
    ) -> Result<Vec<String>> {
        let mut stored = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir(workdir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let run: SpooledRun =
                serde_json::from_str(&text).with_context(|| format!("{} is not a spooled run", file.display()))?;
            let Some(id) = experiment(self, &run.experiment_uuid)? else { continue };
            let context = super::RecordingContext { shard: run.shard, ..self.recording_context().clone() };
            self.record_run_as(id, &run.record, &context, &run.run_uuid)
                .with_context(|| format!("storing the spooled run {}", file.display()))?;
            std::fs::remove_file(&file).with_context(|| format!("removing {}", file.display()))?;
            stored.push(format!(
                "stored run {} kept in {} while the database was away",
                run.record.seq + 1,
                file.display()
            ));
        }
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{full_run, new_exp, test_dbs};

    #[test]
    fn merge_stores_the_spooled_runs_of_experiments_it_holds() {
        for db in test_dbs("spool") {
            let mut store = db.open();
            let id = store.create_experiment(&new_exp("spooled", "h3")).unwrap();
            let uuid = store.experiment(id).unwrap().uuid;
            let work = tempfile::tempdir().unwrap();
            let spooled = |experiment_uuid: &str, seq: usize| SpooledRun {
                store: "elsewhere".into(),
                experiment_uuid: experiment_uuid.into(),
                run_uuid: uuid::Uuid::new_v4().to_string(),
                shard: None,
                record: full_run(seq),
            };
            let mine = write(work.path(), &spooled(&uuid, 0)).unwrap();
            let other = write(work.path(), &spooled("not-here", 1)).unwrap();
            let lines = store.merge_spool(work.path()).unwrap();
            assert_eq!(lines.len(), 2, "{lines:?}");
            assert!(lines[0].starts_with("stored run 1 kept in") && lines[1].contains("not-here"), "{lines:?}");
            assert_eq!(store.runs(id).unwrap().len(), 1, "{}", db.backend);
            assert!(!mine.exists() && other.exists());
            // Again: nothing more is stored.
            store.merge_spool(work.path()).unwrap();
            assert_eq!(store.runs(id).unwrap().len(), 1);
        }
    }
}
