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
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
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
            if run.experiment_uuid != experiment_uuid {
                continue;
            }
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
