//! A guest run's media account, kept by the server on the host.
//!
//! A VM's testbed disk is served on the host (`VmConfig::disk_media`), but
//! only the guest knows when its measured part starts and stops. The guest's
//! `Media` run monitor asks across the VM's exchange directory (shared
//! read-write with the guest): it writes `media-start.req` / `media-stop.req`
//! and waits for the matching `.ack`; the host's [`Relay`] thread, owned by
//! the VM session, answers by resetting the account (pacing on) or by
//! reading it and pausing. So a guest run's `media/` metrics cover its
//! measured part, paced only then, exactly as on the host.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::evidence::Evidence;
use super::serve;

const START: &str = "media-start";
const STOP: &str = "media-stop";
/// How often the host looks for a request.
const HOST_POLL: Duration = Duration::from_millis(5);
/// How often, and how long, the guest waits for the answer.
const GUEST_POLL: Duration = Duration::from_millis(10);
const GUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The answer in an `.ack` file: the value or the host's error message.
type Answer<T> = std::result::Result<T, String>;

/// The host side: answers the guest's requests for one served disk.
#[derive(Debug)]
pub struct Relay {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// Answer requests in `exchange` for the server mounted at `mountpoint`.
    pub fn spawn(exchange: &Path, mountpoint: &Path) -> Result<Relay> {
        let stop = Arc::new(AtomicBool::new(false));
        let (exchange, mountpoint, flag) = (exchange.to_path_buf(), mountpoint.to_path_buf(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("media-relay".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    answer(&exchange, START, || serve::reset_evidence(&mountpoint));
                    answer(&exchange, STOP, || {
                        let evidence = serve::read_evidence(&mountpoint);
                        serve::pause(&mountpoint).and(evidence)
                    });
                    std::thread::sleep(HOST_POLL);
                }
            })
            .context("starting the media relay thread")?;
        Ok(Relay { stop, thread: Some(thread) })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn request_path(exchange: &Path, what: &str) -> PathBuf {
    exchange.join(format!("{what}.req"))
}

fn ack_path(exchange: &Path, what: &str) -> PathBuf {
    exchange.join(format!("{what}.ack"))
}

/// If the guest asked for `what`, do it and write the answer.
fn answer<T: Serialize>(exchange: &Path, what: &str, act: impl FnOnce() -> Result<T>) {
    if std::fs::remove_file(request_path(exchange, what)).is_err() {
        return;
    }
    let answer: Answer<T> = act().map_err(|e| format!("{e:#}"));
    if let Err(e) = write_atomic(&ack_path(exchange, what), &answer) {
        crate::output::diagnostic(&format!("fslab: media relay: {e:#}"));
    }
}

fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(value)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", tmp.display()))
}

/// The guest side: ask the host for `what` and wait for its answer.
fn ask<T: DeserializeOwned>(exchange: &Path, what: &str) -> Result<T> {
    let ack = ack_path(exchange, what);
    let _ = std::fs::remove_file(&ack);
    std::fs::write(request_path(exchange, what), b"")
        .with_context(|| format!("asking the host's media server ({what})"))?;
    let deadline = Instant::now() + GUEST_TIMEOUT;
    loop {
        match std::fs::read(&ack) {
            Ok(bytes) => {
                let _ = std::fs::remove_file(&ack);
                let answer: Answer<T> =
                    serde_json::from_slice(&bytes).with_context(|| format!("{} is not an answer", ack.display()))?;
                return answer.map_err(|e| anyhow!("the host's media server: {e}"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", ack.display())),
        }
        if Instant::now() > deadline {
            bail!("the host's media server did not answer {what} within {GUEST_TIMEOUT:?}");
        }
        std::thread::sleep(GUEST_POLL);
    }
}

/// In the guest: start a new, paced account (just before the measured part).
pub fn guest_start(exchange: &Path) -> Result<()> {
    ask(exchange, START)
}

/// In the guest: the account since [`guest_start`]; pacing stops.
pub fn guest_stop(exchange: &Path) -> Result<Evidence> {
    ask(exchange, STOP)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The protocol without a server: the host side answers what the guest
    /// asks, errors travel back as errors.
    #[test]
    fn a_request_gets_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let exchange = dir.path().to_path_buf();
        let host = {
            let exchange = exchange.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                let (mut started, mut stopped) = (false, false);
                while !(started && stopped) && Instant::now() < deadline {
                    answer(&exchange, START, || {
                        started = true;
                        Ok(())
                    });
                    answer(&exchange, STOP, || -> Result<Evidence> {
                        stopped = true;
                        bail!("no server")
                    });
                    std::thread::sleep(HOST_POLL);
                }
            })
        };
        guest_start(&exchange).unwrap();
        let err = guest_stop(&exchange).unwrap_err().to_string();
        assert!(err.contains("no server"), "{err}");
        host.join().unwrap();
        assert_eq!(std::fs::read_dir(&exchange).unwrap().count(), 0, "requests and answers are removed");
    }
}
