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
/// The host's heartbeat: a counter the relay rewrites every [`BEAT_EVERY`]
/// while it lives, so a waiting guest can tell a slow host from a dead one.
const BEAT: &str = "media-relay.beat";
const BEAT_EVERY: Duration = Duration::from_secs(1);
/// How often the guest looks for the answer.
const GUEST_POLL: Duration = Duration::from_millis(10);

/// How long the guest waits for an answer. A fixed 20 s was too short on a
/// starved host (load 22 on 2 cores: every hop, virtiofsd, the relay, the
/// media server, the TCG guest itself, gets a sliver of a CPU), yet a
/// longer fixed wait only delays the error when the host is gone. So the
/// guest waits as long as the host's heartbeat moves, and fails fast once
/// it stops: `silent` of no beat (30 missed beats, far longer than a
/// starved host keeps a sleeping thread waiting: a dead or frozen host)
/// ends the wait; `total` only bounds a host that beats but never answers
/// (a hung media server).
#[derive(Clone, Copy, Debug)]
struct Patience {
    silent: Duration,
    total: Duration,
}

const PATIENCE: Patience = Patience { silent: Duration::from_secs(30), total: Duration::from_secs(600) };

/// The answer in an `.ack` file: the value or the host's error message.
type Answer<T> = std::result::Result<T, String>;

/// The host side: answers the guest's requests for one served disk.
#[derive(Debug)]
pub struct Relay {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Answer requests in `exchange` for the server mounted at `mountpoint`.
    pub fn spawn(exchange: &Path, mountpoint: &Path) -> Result<Relay> {
        let stop = Arc::new(AtomicBool::new(false));
        let (beat_dir, beat_flag) = (exchange.to_path_buf(), stop.clone());
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
        let mut relay = Relay { stop, threads: vec![thread] };
        // Its own thread, so a slow answer (the server busy) is not silence.
        let beat = std::thread::Builder::new()
            .name("media-relay-beat".into())
            .spawn(move || beat_until(&beat_dir, &beat_flag))
            .context("starting the media relay's heartbeat")?;
        relay.threads.push(beat);
        Ok(relay)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Rewrite the heartbeat's counter every [`BEAT_EVERY`] until `stop`.
fn beat_until(exchange: &Path, stop: &AtomicBool) {
    let mut count: u64 = 0;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            count += 1;
            if let Err(e) = write_atomic(&exchange.join(BEAT), &count) {
                crate::output::diagnostic(&format!("fslab: media relay heartbeat: {e:#}"));
            }
            next = Instant::now() + BEAT_EVERY;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The guest's view of the heartbeat: when it last saw the counter move.
struct Pulse {
    last: Option<Vec<u8>>,
    moved: Instant,
    checked: Instant,
}

impl Pulse {
    fn new() -> Pulse {
        let now = Instant::now();
        Pulse { last: None, moved: now, checked: now }
    }

    /// How long the host has been silent; reads the beat at most twice a
    /// beat. Read before judging, so a guest that was itself stalled sees
    /// the beats it missed rather than mistaking its own stall for silence.
    fn silence(&mut self, exchange: &Path) -> Duration {
        if self.checked.elapsed() >= BEAT_EVERY / 2 {
            self.checked = Instant::now();
            let beat = std::fs::read(exchange.join(BEAT)).ok();
            if beat.is_some() && beat != self.last {
                self.last = beat;
                self.moved = Instant::now();
            }
        }
        self.moved.elapsed()
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
    ask_with(exchange, what, PATIENCE)
}

fn ask_with<T: DeserializeOwned>(exchange: &Path, what: &str, patience: Patience) -> Result<T> {
    let ack = ack_path(exchange, what);
    let _ = std::fs::remove_file(&ack);
    std::fs::write(request_path(exchange, what), b"")
        .with_context(|| format!("asking the host's media server ({what})"))?;
    let asked = Instant::now();
    let mut pulse = Pulse::new();
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
        let silence = pulse.silence(exchange);
        if silence > patience.silent {
            bail!(
                "the host's media relay is gone: no answer to {what} and no heartbeat ({BEAT}) for {:.0} s",
                silence.as_secs_f64()
            );
        }
        if asked.elapsed() > patience.total {
            bail!("the host's media server is alive but did not answer {what} within {:?}", patience.total);
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

    /// The guest tells a dead host from a slow one by the heartbeat: with no
    /// host it gives up after `silent`, not `total`; a host that beats is
    /// waited for past `silent`, and one that beats but never answers is
    /// given up on after `total`.
    #[test]
    fn timing_the_guest_waits_for_a_beating_host_and_not_for_a_dead_one() {
        let patience = Patience { silent: Duration::from_millis(2500), total: Duration::from_secs(60) };
        let dir = tempfile::tempdir().unwrap();
        let exchange = dir.path().to_path_buf();

        let t0 = Instant::now();
        let err = ask_with::<()>(&exchange, START, patience).unwrap_err().to_string();
        assert!(err.contains("is gone") && err.contains(BEAT), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(20), "gave up after {:?}", t0.elapsed());

        // A live host that answers only after twice the silence limit.
        let stop = Arc::new(AtomicBool::new(false));
        let beating = {
            let (exchange, stop) = (exchange.clone(), stop.clone());
            std::thread::spawn(move || beat_until(&exchange, &stop))
        };
        let host = {
            let exchange = exchange.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(5));
                while std::fs::metadata(request_path(&exchange, START)).is_err() {
                    std::thread::sleep(HOST_POLL);
                }
                answer(&exchange, START, || Ok(()));
            })
        };
        ask_with::<()>(&exchange, START, patience).unwrap();
        host.join().unwrap();

        // Alive, but never answering: `total` ends the wait.
        let patience = Patience { total: Duration::from_secs(4), ..patience };
        let err = ask_with::<()>(&exchange, STOP, patience).unwrap_err().to_string();
        assert!(err.contains("alive but did not answer"), "{err}");
        stop.store(true, Ordering::Relaxed);
        beating.join().unwrap();
    }
}
