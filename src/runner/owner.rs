//! Who is running an experiment, so that a killed one shows as
//! `interrupted` instead of `running` forever, and `--resume` neither
//! starts a duplicate nor continues an experiment that is still running.
//!
//! The creating process's identity (pid, start time, boot id, hostname) is
//! stored in the experiment's environment JSON under [`OWNER_KEY`]. A
//! resume is done by another process, and the stored environment is not
//! rewritten; so every process running an experiment also registers itself
//! in a small per-host directory ([`REGISTRY_DIR`] under the default work
//! directory), removed when it ends. An experiment whose status says
//! `running` is running if either names a live process, and interrupted
//! when both are gone.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::exit;
use crate::store::Store;
use crate::sys::identity::{Liveness, ProcessIdentity};
use crate::testbed::DEFAULT_WORKDIR;

/// The environment JSON key holding the creator's [`ProcessIdentity`].
pub const OWNER_KEY: &str = "owner";

/// Under [`DEFAULT_WORKDIR`]: one file per running experiment.
pub const REGISTRY_DIR: &str = ".fslab-running";

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
    Path::new(DEFAULT_WORKDIR).join(REGISTRY_DIR).join(format!("{key}.json"))
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
/// a registry, `list` only knows the creator).
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
    let dir = Path::new(DEFAULT_WORKDIR).join(REGISTRY_DIR);
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

/// The creator recorded in an experiment's environment JSON.
pub fn creator(environment_json: &str) -> Option<ProcessIdentity> {
    let env: serde_json::Value = serde_json::from_str(environment_json).ok()?;
    serde_json::from_value(env.get(OWNER_KEY)?.clone()).ok()
}

/// What the recorded owners of experiment `id` say.
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

/// The owners of experiment `id` of `store` (its creator, from
/// `environment_json`, and the registered process, if any), checked.
pub fn ownership(store: &Store, id: i64, environment_json: &str) -> Ownership {
    let registered = store_path(store).and_then(|p| registered_owner(&registry_file(&p, id)));
    let owners: Vec<ProcessIdentity> = registered.into_iter().chain(creator(environment_json)).collect();
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

/// The status to show: `interrupted` for a `running` experiment whose
/// owners are all gone (killed, or the host rebooted).
pub fn effective_status(store: &Store, id: i64, status: &str, environment_json: &str) -> String {
    // A campaign runs on many machines: its shards' heartbeats tell, not its creator.
    if status == "running" {
        if let Ok(Some(campaign)) = store.campaign_status(id) {
            let alive = !campaign.running.is_empty() || !campaign.missing.is_empty();
            return if alive { "running" } else { "interrupted" }.to_string();
        }
    }
    if status == "running" && ownership(store, id, environment_json) == Ownership::Gone {
        "interrupted".to_string()
    } else {
        status.to_string()
    }
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
    if row.status == "running" {
        if let Ownership::Running(owner) = ownership(store, id, &row.environment_json) {
            return Err(exit::usage(anyhow!(
                "experiment {id} (`{name}`) is still running (fslab pid {}); wait for it, or stop it and resume then",
                owner.pid
            )));
        }
    }
    Ok(Some(id))
}
