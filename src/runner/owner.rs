//! Who runs an experiment, for `--resume`: it neither starts a duplicate
//! nor continues an experiment that is still running. Ownership itself
//! (the stored creator and the per-host registry) lives in
//! [`crate::store::owner`], so every reader sees the same status.

use anyhow::{anyhow, Result};

use crate::exit;
pub use crate::store::owner::{register, remove_stale_registrations, Ownership, Running, REGISTRY_DIR};
use crate::store::Store;
use crate::stored::ExperimentStatus;

/// How `--resume` treats an experiment with nothing to resume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Start a new experiment.
    No,
    /// Continue the newest unfinished one; none is an error (exit 2).
    Required,
    /// Continue it if there is one, else start.
    OrStart,
}

/// The experiment to continue, if any: the newest unfinished one with this
/// name and file. `Required` with none is a usage error (exit 2), and one
/// that is still running is never continued (that would run it twice).
pub fn resumable(store: &Store, name: &str, spec_hash: &str, resume: Resume) -> Result<Option<i64>> {
    if resume == Resume::No {
        return Ok(None);
    }
    let Some(id) = store.find_unfinished(name, spec_hash)? else {
        if resume == Resume::Required {
            let db = store.path().map_or("the database".to_string(), |p| p.display().to_string());
            return Err(exit::usage(anyhow!(
                "nothing to resume: {db} holds no unfinished experiment `{name}` from this file (same name and \
                 content); run without --resume to start it, or use --resume-or-start"
            )));
        }
        return Ok(None);
    };
    let row = store.experiment(id)?;
    if row.status == ExperimentStatus::Running {
        if let Ownership::Running(owner) = store.ownership(id, row.environment.owner.as_ref()) {
            return Err(exit::usage(anyhow!(
                "experiment {id} (`{name}`) is still running (fslab pid {}); wait for it, or stop it and resume then",
                owner.pid
            )));
        }
    }
    Ok(Some(id))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_registry_lives_in_the_default_workdir() {
        assert_eq!(crate::store::owner::REGISTRY_ROOT, crate::testbed::DEFAULT_WORKDIR);
    }
}
