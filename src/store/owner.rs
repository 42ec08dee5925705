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

use anyhow::{bail, Result};

use super::sql::{Sql, Value};
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
    /// Where it makes its testbeds (absent in files of older versions).
    #[serde(default)]
    workdir: Option<PathBuf>,
}

fn registry_file(store: &Path, id: i64) -> PathBuf {
    let mut h = Sha256::new();
    h.update(store.to_string_lossy().as_bytes());
    h.update(id.to_le_bytes());
    let key: String = h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    Path::new(REGISTRY_ROOT).join(REGISTRY_DIR).join(format!("{key}.json"))
}

/// The database a store lives in: its file, canonical, or its PostgreSQL
/// URL without password (None for in-memory stores).
fn store_path(store: &Store) -> Option<PathBuf> {
    match store.store_location()? {
        super::StoreLocation::Sqlite(p) => Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        pg => Some(PathBuf::from(pg.to_string())),
    }
}

/// This process runs experiment `id` of `store` while the guard lives.
pub struct Running {
    file: Option<PathBuf>,
    /// Other experiments running on this host in the same database or work
    /// directory, one line each ([`Running::sharing`]).
    sharing: Vec<String>,
}

impl Running {
    /// Warnings that other experiments measure on this machine at the same
    /// time, through the same database or work directory: their timings and
    /// this one's perturb each other.
    pub fn sharing(&self) -> &[String] {
        &self.sharing
    }
}

/// Register this process as running experiment `id` of `store` in
/// `workdir` (best effort: without a registry, only the creator is known).
pub fn register(store: &Store, id: i64, workdir: &Path) -> Running {
    remove_stale_registrations();
    let Some(path) = store_path(store) else { return Running { file: None, sharing: Vec::new() } };
    let workdir = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let sharing = others_sharing(&path, id, &workdir);
    let file = registry_file(&path, id);
    let registration = Registration {
        owner: ProcessIdentity::current().clone(),
        store: path,
        experiment_id: id,
        workdir: Some(workdir),
    };
    // Whole or not at all (a reader never sees a half-written file), in a
    // directory root may trust, never through a link.
    let written = file.parent().map_or(Ok(()), |d| crate::sys::trusted::ensure_dir_io(d).map(drop)).and_then(|()| {
        let json = serde_json::to_string(&registration).map_err(std::io::Error::other)?;
        crate::sys::trusted::write_replacing(&file, json.as_bytes())
    });
    Running { file: written.is_ok().then_some(file), sharing }
}

/// Live registrations of other processes in the same database or work
/// directory as experiment `id` of `store` in `workdir`, described.
fn others_sharing(store: &Path, id: i64, workdir: &Path) -> Vec<String> {
    let me = ProcessIdentity::current();
    let dir = Path::new(REGISTRY_ROOT).join(REGISTRY_DIR);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Some(other) =
            std::fs::read_to_string(entry.path()).ok().and_then(|t| serde_json::from_str::<Registration>(&t).ok())
        else {
            continue;
        };
        if &other.owner == me || other.owner.liveness() != Liveness::Running {
            continue;
        }
        let same_store = other.store == store;
        let same_workdir = other.workdir.as_deref() == Some(workdir);
        if (same_store && other.experiment_id == id) || !(same_store || same_workdir) {
            continue;
        }
        let place = match (same_store, same_workdir) {
            (true, true) => format!("the same database and work directory {}", workdir.display()),
            (true, false) => format!("the same database {}", store.display()),
            _ => format!("the same work directory {}", workdir.display()),
        };
        found.push(format!(
            "experiment {} of {} is being measured at the same time (fslab pid {}) in {place}: the two share \
             this machine and perturb each other's timings",
            other.experiment_id,
            other.store.display(),
            other.owner.pid
        ));
    }
    found
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

/// How long a lease lasts without a heartbeat: a holder that stops
/// renewing (its host died, the network to the database did) can be taken
/// over after this. Long beside [`LEASE_HEARTBEAT`] so a few missed beats
/// (a busy database) never hand a live holder's work to another process.
pub const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(120);

/// How often a holder renews its lease.
pub const LEASE_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// What is leased: a whole experiment, or one shard of a campaign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseKey {
    pub experiment_id: i64,
    /// K of `--shard K/N`; `None` for the whole experiment.
    pub shard: Option<usize>,
}

impl LeaseKey {
    fn shard_index(&self) -> i64 {
        self.shard.map_or(0, |k| k as i64)
    }

    fn describe(&self) -> String {
        match self.shard {
            Some(k) => format!("shard {k} of experiment {}", self.experiment_id),
            None => format!("experiment {}", self.experiment_id),
        }
    }
}

/// The process holding a lease, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHolder {
    pub owner: ProcessIdentity,
    /// The holder's fslab version.
    pub version: String,
    pub workdir: String,
    pub acquired_at: String,
    pub heartbeat_at: String,
    pub expires_at: String,
}

impl LeaseHolder {
    /// Whether another process may take the lease over: the holder is dead
    /// (on this host, or its host rebooted) or its lease expired unrenewed.
    /// The liveness rule is the one that decides `interrupted`.
    pub fn can_be_taken_over(&self, now: std::time::SystemTime) -> bool {
        let expired = humantime::parse_rfc3339(&self.expires_at).map_or(true, |t| t <= now);
        expired || self.owner.liveness() == Liveness::Gone
    }

    /// "fslab 0.1.0 pid 42 on host h since 2026-…Z (renewed 2026-…Z)".
    pub fn describe(&self) -> String {
        format!(
            "fslab {} pid {} on host {} since {} (lease renewed {}, expires {})",
            self.version, self.owner.pid, self.owner.hostname, self.acquired_at, self.heartbeat_at, self.expires_at
        )
    }
}

/// The outcome of [`Store::claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This process holds the lease now; it took it over from a holder
    /// that is gone or expired, if any.
    Acquired { taken_over: Option<LeaseHolder> },
    /// A live holder has it.
    Held(LeaseHolder),
}

fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

const HOLDER_COLUMNS: &str =
    "hostname, pid, start_time, boot_id, version, workdir, acquired_at, heartbeat_at, expires_at";

/// The row's holder is this very process (`pid`, `start_time`, boot, host).
const HELD_BY: &str = "experiment_id = ?1 AND shard_index = ?2 AND hostname = ?3 AND pid = ?4 \
                       AND start_time = ?5 AND boot_id = ?6";

fn holder_params(key: LeaseKey, me: &ProcessIdentity) -> Vec<Value> {
    vec![
        Value::Int(key.experiment_id),
        Value::Int(key.shard_index()),
        Value::from(me.hostname.as_str()),
        Value::Int(i64::from(me.pid)),
        Value::Int(me.start_time as i64),
        Value::from(me.boot_id.as_str()),
    ]
}

impl Store {
    /// Claims `key` for this process, working in `workdir`: takes a free
    /// lease, or one whose holder is gone or expired; reports a live
    /// holder's instead. One write transaction, so of two processes
    /// claiming at once exactly one gets it (SQLite: the write lock;
    /// PostgreSQL: the primary key, and a compare-and-swap on the holder
    /// for take-overs).
    pub fn claim(&mut self, key: LeaseKey, workdir: &Path) -> Result<Claim> {
        let me = ProcessIdentity::current().clone();
        let workdir = workdir.display().to_string();
        self.write(|q| {
            // A take-over that lost a race (the holder changed under it)
            // reads the winner and decides again; READ COMMITTED sees it.
            for _ in 0..5 {
                if let Some(claim) = try_claim(q, key, &me, &workdir)? {
                    return Ok(claim);
                }
            }
            bail!("{} changed hands repeatedly while claiming it", key.describe())
        })
    }

    /// Renews this process's lease on `key`; false when it no longer holds
    /// it (another process took it over).
    pub fn renew(&mut self, key: LeaseKey) -> Result<bool> {
        let me = ProcessIdentity::current().clone();
        self.write(|q| {
            let now = std::time::SystemTime::now();
            let mut p = holder_params(key, &me);
            p.extend([Value::from(rfc3339(now)), Value::from(rfc3339(now + LEASE_TTL))]);
            let n = q.execute(&format!("UPDATE leases SET heartbeat_at = ?7, expires_at = ?8 WHERE {HELD_BY}"), &p)?;
            Ok(n > 0)
        })
    }

    /// Gives up this process's lease on `key` (a no-op when not held).
    pub fn release(&mut self, key: LeaseKey) -> Result<()> {
        let me = ProcessIdentity::current().clone();
        self.write(|q| q.execute(&format!("DELETE FROM leases WHERE {HELD_BY}"), &holder_params(key, &me)).map(|_| ()))
    }

    /// The current holder of `key`, if any.
    pub fn lease_holder(&self, key: LeaseKey) -> Result<Option<LeaseHolder>> {
        self.read(|q| {
            q.query_opt(
                &format!("SELECT {HOLDER_COLUMNS} FROM leases WHERE experiment_id = ?1 AND shard_index = ?2"),
                &[Value::Int(key.experiment_id), Value::Int(key.shard_index())],
            )?
            .map(|r| read_holder(&r))
            .transpose()
        })
    }
}

/// One attempt of [`Store::claim`]: `None` when a take-over found the
/// holder changed since it was read.
fn try_claim(q: &mut dyn Sql, key: LeaseKey, me: &ProcessIdentity, workdir: &str) -> Result<Option<Claim>> {
    let now = std::time::SystemTime::now();
    let (now_s, expires) = (rfc3339(now), rfc3339(now + LEASE_TTL));
    let existing = q.query_opt(
        &format!("SELECT {HOLDER_COLUMNS} FROM leases WHERE experiment_id = ?1 AND shard_index = ?2"),
        &[Value::Int(key.experiment_id), Value::Int(key.shard_index())],
    )?;
    let holder = existing.map(|r| read_holder(&r)).transpose()?;
    let mut row = holder_params(key, me);
    row.extend([
        Value::from(env!("CARGO_PKG_VERSION")),
        Value::from(workdir),
        Value::from(now_s.as_str()),
        Value::from(now_s.as_str()),
        Value::from(expires.as_str()),
    ]);
    let Some(holder) = holder else {
        q.execute(
            "INSERT INTO leases (experiment_id, shard_index, hostname, pid, start_time, boot_id, version, \
                     workdir, acquired_at, heartbeat_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            &row,
        )?;
        return Ok(Some(Claim::Acquired { taken_over: None }));
    };
    if holder.owner != *me && !holder.can_be_taken_over(now) {
        return Ok(Some(Claim::Held(holder)));
    }
    // Compare-and-swap on the holder read above: a concurrent
    // take-over changes it, and this one then changes nothing.
    row.extend([
        Value::from(holder.owner.hostname.as_str()),
        Value::Int(i64::from(holder.owner.pid)),
        Value::Int(holder.owner.start_time as i64),
        Value::from(holder.owner.boot_id.as_str()),
    ]);
    let n = q.execute(
        "UPDATE leases SET hostname = ?3, pid = ?4, start_time = ?5, boot_id = ?6, version = ?7, \
                 workdir = ?8, acquired_at = ?9, heartbeat_at = ?10, expires_at = ?11 \
                 WHERE experiment_id = ?1 AND shard_index = ?2 AND hostname = ?12 AND pid = ?13 \
                 AND start_time = ?14 AND boot_id = ?15",
        &row,
    )?;
    if n == 0 {
        return Ok(None);
    }
    Ok(Some(Claim::Acquired { taken_over: (holder.owner != *me).then_some(holder) }))
}

fn read_holder(r: &super::sql::Row) -> Result<LeaseHolder> {
    let start_time: i64 = r.get("start_time")?;
    let pid: i64 = r.get("pid")?;
    Ok(LeaseHolder {
        owner: ProcessIdentity {
            pid: i32::try_from(pid).unwrap_or(-1),
            start_time: start_time as u64,
            boot_id: r.get("boot_id")?,
            hostname: r.get("hostname")?,
        },
        version: r.get("version")?,
        workdir: r.get("workdir")?,
        acquired_at: r.get("acquired_at")?,
        heartbeat_at: r.get("heartbeat_at")?,
        expires_at: r.get("expires_at")?,
    })
}

/// The refusal (exit 2) of a second process for `what`, which `holder`
/// holds and measures.
pub fn refusal(what: &str, holder: &LeaseHolder) -> anyhow::Error {
    crate::exit::usage(anyhow::anyhow!(
        "{what} is still running: it is being measured by {}; measuring it twice at once would perturb both \
         (wait for it, or stop it and --resume then)",
        holder.describe()
    ))
}

/// A lease this process holds while the guard lives: a background thread
/// renews it every [`LEASE_HEARTBEAT`] on its own connection, and releases
/// it when the guard is dropped (a killed process leaves it; its dead pid,
/// or the expiry, lets the next one take it over).
pub struct Lease {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Claims `key` (see [`Store::claim`]) and starts its heartbeat. A live
/// holder is a usage error (exit 2) naming it. `taken_over` reports the
/// gone or expired holder this process replaced.
pub fn lease(store: &mut Store, key: LeaseKey, workdir: &Path, what: &str) -> Result<(Lease, Option<LeaseHolder>)> {
    let taken_over = match store.claim(key, workdir)? {
        Claim::Held(holder) => return Err(refusal(what, &holder)),
        Claim::Acquired { taken_over } => taken_over,
    };
    let Some(location) = store.store_location().cloned() else {
        // In memory: no other process can see it.
        return Ok((Lease { stop: None, thread: None }, taken_over));
    };
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("fslab-lease".into())
        .spawn(move || heartbeat(&location, key, &stopped))
        .map_err(|e| anyhow::anyhow!("cannot start the lease heartbeat: {e}"))?;
    Ok((Lease { stop: Some(stop), thread: Some(thread) }, taken_over))
}

/// Renews `key` until told to stop (or the sender is gone), then releases it.
fn heartbeat(location: &super::StoreLocation, key: LeaseKey, stopped: &std::sync::mpsc::Receiver<()>) {
    let mut store = None;
    loop {
        let done = !matches!(stopped.recv_timeout(LEASE_HEARTBEAT), Err(std::sync::mpsc::RecvTimeoutError::Timeout));
        // A database that is briefly away is tried again at the next beat.
        if store.is_none() {
            store = Store::open_existing(location).ok();
        }
        if let Some(s) = store.as_mut() {
            let result = if done { s.release(key) } else { s.renew(key).map(|_| ()) };
            if result.is_err() {
                store = None;
            }
        }
        if done {
            return;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
