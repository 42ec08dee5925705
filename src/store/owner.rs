//! Who is running an experiment, decided once here so that every reader
//! of the store (`list`, `report`, `history`, `check`, `compare --by`)
//! sees the same status: a `running` experiment whose owners are all gone
//! (killed, or the host rebooted) reads back as `interrupted`.
//!
//! The creating process's identity (pid, start time, boot id, hostname) is
//! stored in the experiment's environment ([`StoredEnvironment::owner`]).
//! A resume is done by another process, and the stored environment is not
//! rewritten; so every process running an experiment also registers itself
//! in a small per-host directory ([`REGISTRY_DIR`] under the default work
//! directory), removed when it ends. An experiment is running if either
//! names a live process. A campaign runs on many machines: its shards'
//! heartbeats tell instead.
//!
//! [`StoredEnvironment::owner`]: crate::stored::StoredEnvironment::owner

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Store;
use crate::stored::ExperimentStatus;
use crate::sys::identity::{Liveness, ProcessIdentity};

/// fslab's default work directory (`testbed::DEFAULT_WORKDIR`, which sits
/// above the store; a test in `runner::owner` keeps the two equal).
pub const REGISTRY_ROOT: &str = "/var/tmp/fslab";

/// Under [`REGISTRY_ROOT`]: one file per running experiment.
pub const REGISTRY_DIR: &str = ".fslab-running";

/// One file of the registry.
#[derive(Serialize, Deserialize)]
struct Registration {
    owner: ProcessIdentity,
    store: PathBuf,
    experiment_id: i64,
}

fn registry_file(store: &Path, id: i64) -> PathBuf {
    let mut h = Sha256::new();
    h.update(store.to_string_lossy().as_bytes());
    h.update(id.to_le_bytes());
    let key: String = h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    Path::new(REGISTRY_ROOT).join(REGISTRY_DIR).join(format!("{key}.json"))
}

/// The database file a store lives in, canonical (None for in-memory stores).
fn store_path(store: &Store) -> Option<PathBuf> {
    store.path().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// This process runs experiment `id` of `store` while the guard lives.
pub struct Running {
    file: Option<PathBuf>,
}

/// Register this process as running experiment `id` (best effort: without
/// a registry, only the creator is known).
pub fn register(store: &Store, id: i64) -> Running {
    remove_stale_registrations();
    let Some(path) = store_path(store) else { return Running { file: None } };
    let file = registry_file(&path, id);
    let registration = Registration { owner: ProcessIdentity::current().clone(), store: path, experiment_id: id };
    let written = file.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
        let json = serde_json::to_string(&registration).map_err(std::io::Error::other)?;
        // Whole or not at all: a reader never sees a half-written file.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, &file))
    });
    Running { file: written.is_ok().then_some(file) }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            // Only ours: a resume by another process may have replaced it.
            if registered_owner(file).as_ref() == Some(ProcessIdentity::current()) {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

/// Remove registrations of fslab processes that are gone (killed ones
/// leave theirs); returns how many.
pub fn remove_stale_registrations() -> usize {
    let dir = Path::new(REGISTRY_ROOT).join(REGISTRY_DIR);
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "json") {
            continue;
        }
        let gone = registered_owner(&entry.path()).is_none_or(|o| o.liveness() == Liveness::Gone);
        if gone && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn registered_owner(file: &Path) -> Option<ProcessIdentity> {
    let text = std::fs::read_to_string(file).ok()?;
    serde_json::from_str::<Registration>(&text).ok().map(|r| r.owner)
}

/// What the recorded owners of an experiment say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// An owner runs on this host.
    Running(ProcessIdentity),
    /// An owner ran on another host: cannot be checked from here.
    Elsewhere(ProcessIdentity),
    /// Every recorded owner is gone.
    Gone,
    /// No owner recorded (older stores).
    Unknown,
}

impl Store {
    /// The owners of experiment `id` (its `creator`, from the stored
    /// environment, and the registered process, if any), checked.
    pub fn ownership(&self, id: i64, creator: Option<&ProcessIdentity>) -> Ownership {
        let registered = store_path(self).and_then(|p| registered_owner(&registry_file(&p, id)));
        let owners: Vec<ProcessIdentity> = registered.into_iter().chain(creator.cloned()).collect();
        if owners.is_empty() {
            return Ownership::Unknown;
        }
        let mut elsewhere = None;
        for owner in owners {
            match owner.liveness() {
                Liveness::Running => return Ownership::Running(owner),
                Liveness::Elsewhere => elsewhere = elsewhere.or(Some(owner)),
                Liveness::Gone => {}
            }
        }
        elsewhere.map_or(Ownership::Gone, Ownership::Elsewhere)
    }

    /// The status every reader sees: `stored`, except that a `running`
    /// experiment whose owners are all gone (for a campaign: no shard runs
    /// or is missing) is `interrupted`.
    pub(super) fn effective_status(
        &self,
        id: i64,
        stored: ExperimentStatus,
        creator: Option<&ProcessIdentity>,
    ) -> ExperimentStatus {
        if stored != ExperimentStatus::Running {
            return stored;
        }
        if let Ok(Some(campaign)) = self.campaign_status(id) {
            let alive = !campaign.running.is_empty() || !campaign.missing.is_empty();
            return if alive { ExperimentStatus::Running } else { ExperimentStatus::Interrupted };
        }
        if self.ownership(id, creator) == Ownership::Gone {
            ExperimentStatus::Interrupted
        } else {
            ExperimentStatus::Running
        }
    }
}
