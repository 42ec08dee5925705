//! The exchange directory: how the host and the guest agent talk.
//!
//! One directory, shared read-write over virtiofs at the same path on both
//! sides. Every file is written to a dot-name first and renamed into place,
//! so a reader sees a whole file or none.
//!
//! ```text
//! host  writes session.json          (before boot: disk serial, modules to load)
//! guest writes ready.json            (modules loaded, disk present — or the error)
//! host  writes req-000001.json       {"seq":1,"kind":"probe","body":{…}}
//! guest writes resp-000001.json      {"seq":1,"reply":{"ok":…}} or {"reply":{"error":"…"}}
//! …                                  (seq counts up; one request at a time)
//! host  writes req-00000N.json       {"kind":"shutdown"}: the agent answers and exits,
//!                                    and the VM powers off
//! ```
//!
//! Each side deletes what it has read. Payloads too big for JSON belong in
//! files of their own in the exchange directory, named in the body.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SESSION_FILE: &str = "session.json";
pub const READY_FILE: &str = "ready.json";
/// The request kind that ends the agent.
pub const SHUTDOWN: &str = "shutdown";

/// What the agent must do before it reports ready.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SessionInfo {
    /// Kernel modules to load (`sys::modules::ensure_loaded`).
    pub modules: Vec<String>,
    /// Serial of the testbed disk to wait for, when the VM has one.
    pub disk_serial: Option<String>,
    /// The kernel symbols the host needs for run profiles
    /// ([`super::profile::SymbolExport`]).
    #[serde(default)]
    pub symbols: super::profile::GuestSymbolsWanted,
    /// The directory put first on init's `PATH` for [`super::udev`]'s shim,
    /// which the agent takes out of its own `PATH`.
    #[serde(default)]
    pub init_path_shim: Option<String>,
}

/// The agent's first word.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Ready {
    /// Up: the guest's `uname -r` and the testbed disk's device, if any;
    /// the guest's clock (`/proc/uptime`, seconds since the kernel's clock
    /// started) when init and the agent's process started, when the
    /// agent's code began and when it was ready, for the boot's phases.
    Ok {
        release: String,
        disk: Option<String>,
        #[serde(default)]
        init_exec_s: f64,
        #[serde(default)]
        agent_exec_s: f64,
        #[serde(default)]
        agent_started_s: f64,
        #[serde(default)]
        ready_s: f64,
    },
    /// Setup failed (a module would not load, the disk never appeared).
    Error(String),
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Request {
    pub seq: u64,
    pub kind: String,
    #[serde(default)]
    pub body: Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Ok(Value),
    /// The handler's error, with its whole context chain.
    Error(String),
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Response {
    pub seq: u64,
    pub reply: Reply,
}

pub fn request_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("req-{seq:06}.json"))
}

pub fn response_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("resp-{seq:06}.json"))
}

/// Write `value` as JSON to `path` atomically (dot-file, then rename).
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let name = path.file_name().context("exchange file has a name")?.to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let text = serde_json::to_vec(value)?;
    fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", tmp.display()))?;
    Ok(())
}

/// Read and parse `path` if it exists (None when it does not yet).
pub fn read_if_present<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes).with_context(|| format!("{} is not a valid message", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = request_path(dir.path(), 7);
        assert!(path.ends_with("req-000007.json"));
        assert_eq!(read_if_present::<Request>(&path).unwrap(), None);
        let req = Request { seq: 7, kind: "probe".into(), body: serde_json::json!({"x": 1}) };
        write_atomic(&path, &req).unwrap();
        assert_eq!(read_if_present::<Request>(&path).unwrap(), Some(req));
        // Nothing but the final file is left.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let resp = Response { seq: 7, reply: Reply::Error("no".into()) };
        let text = serde_json::to_string(&resp).unwrap();
        assert_eq!(text, r#"{"seq":7,"reply":{"error":"no"}}"#);
        fs::write(&path, "{half").unwrap();
        assert!(read_if_present::<Request>(&path).unwrap_err().to_string().contains("req-000007.json"));
    }
}
