//! Who runs an experiment, for `--resume`: it neither starts a duplicate
//! nor continues an experiment that is still running. Ownership itself
//! (the stored creator and the per-host registry) lives in
//! [`crate::store::owner`], so every reader sees the same status.

use anyhow::{anyhow, Result};

use crate::exit;
pub use crate::store::owner::{
    register, remove_stale_registrations, Lease, LeaseHolder, LeaseKey, Ownership, Running, REGISTRY_DIR,
};
use crate::store::Store;
use crate::stored::ExperimentStatus;
use crate::sys::identity::ProcessIdentity;

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
        let key = LeaseKey { experiment_id: id, shard: None };
        if let Some(holder) = store.lease_holder(key)? {
            if holder.owner != *ProcessIdentity::current() && !holder.can_be_taken_over(std::time::SystemTime::now()) {
                return Err(crate::store::owner::refusal(&format!("experiment {id} (`{name}`)"), &holder));
            }
        }
        if let Ownership::Running(owner) = store.ownership(id, row.environment.owner.as_ref()) {
            return Err(exit::usage(anyhow!(
                "experiment {id} (`{name}`) is still running (fslab pid {} on host {}); wait for it, or stop it \
                 and resume then",
                owner.pid,
                owner.hostname
            )));
        }
    }
    Ok(Some(id))
}

/// Claims `key` for this run (see [`crate::store::owner::lease`]): a live
/// holder is refused (exit 2) naming it; a gone one is taken over, and
/// `note` is told so.
pub fn claim(
    store: &mut Store,
    key: LeaseKey,
    workdir: &std::path::Path,
    what: &str,
    note: &mut dyn FnMut(String),
) -> Result<Lease> {
    let (lease, taken_over) = crate::store::owner::lease(store, key, workdir, what)?;
    if let Some(h) = taken_over {
        note(format!("took over {what} from {}: it is gone or stopped renewing", h.describe()));
    }
    Ok(lease)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_registry_lives_in_the_default_workdir() {
        assert_eq!(crate::store::owner::REGISTRY_ROOT, crate::testbed::DEFAULT_WORKDIR);
    }
}
