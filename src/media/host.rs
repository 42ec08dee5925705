//! A testbed's media server: `fslab media-serve`, a child process serving
//! the image through FUSE.
//!
//! A separate process, not a thread of fslab: when fslab is SIGKILLed while
//! one of its threads waits on the testbed's device (a `sync` during
//! preparation), a server inside the same process dies with it, but the
//! process cannot finish exiting (its blocked thread waits on a FUSE
//! request only its own dead server could answer) and hangs in D state
//! until the connection is aborted by hand. A child keeps answering; the
//! parent's I/O completes and it exits. The child runs in a process group
//! of its own (a terminal's Ctrl-C does not reach it) and serves until its
//! mount goes away: teardown (or `fslab cleanup`, after detaching the loop
//! device on it) unmounts it, and it exits. Its command line and mount point
//! carry the testbed's marker-named directory.
//!
//! fslab never waits on its own FUSE mount without a deadline. A watchdog
//! thread looks at the server while it serves: when it died, was stopped
//! (SIGSTOP) for [`STOPPED_GRACE`], or still has requests waiting
//! [`OVERDUE_GRACE`] after the phase's deadline (a model too slow for the
//! workload's timeout) or after a stop signal, it aborts the FUSE
//! connection ([`Connection::abort`]), which fails every waiting request, so
//! a workload's `sync` in D state, the loop device and fslab itself move
//! on; the device is then *lost* and [`MediaServer::check`] fails the run
//! with the reason. What fslab asks the server itself (the evidence,
//! reset, pause) is asked from a thread it can abandon, with a deadline
//! after which it aborts the connection the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::connection::Connection;
use super::evidence::Evidence;
use super::serve::{self, IMAGE_FILE};
use super::DeviceSpec;
use crate::sys::signals;

/// How long the server may take to mount.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the server may stay stopped (SIGSTOP, a debugger) before its
/// device counts as gone: long enough for a `kill -STOP; kill -CONT` pair.
pub const STOPPED_GRACE: Duration = Duration::from_secs(2);
/// How long requests may still wait on the server after the phase's
/// deadline or a stop signal, for the workload's processes to be killed
/// and what they left in flight to drain.
pub const OVERDUE_GRACE: Duration = Duration::from_secs(3);
/// How long fslab waits for the server to answer it (the evidence, reset,
/// pause), besides twice the model's slowest request: a serial medium
/// answers in turn, after what the loop device already sent.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the watchdog looks.
const WATCH_EVERY: Duration = Duration::from_millis(100);

pub struct MediaServer {
    pub spec: DeviceSpec,
    /// Where the server is mounted: `<testbed>/media`.
    pub mountpoint: PathBuf,
    shared: Arc<Shared>,
    watchdog: Option<JoinHandle<()>>,
    /// Stopped (or never started): nothing more to do.
    stopped: bool,
}

/// What the server and its watchdog share.
struct Shared {
    child: Mutex<Child>,
    pid: u32,
    /// The FUSE connection, known once the server mounted.
    connection: Mutex<Option<Connection>>,
    /// Why the device went away, once it did (the first reason).
    lost: Mutex<Option<String>>,
    /// The current phase's deadline (the workload's timeout).
    deadline: Mutex<Option<Instant>>,
    /// The watchdog ends (the server is being stopped: its exit is expected).
    quit: AtomicBool,
}

impl Shared {
    fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Abort the connection and keep `why` as the reason the device went
    /// away (unless it had gone already).
    fn give_up(&self, why: String) {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        if lost.is_some() {
            return;
        }
        let aborted = match &*self.connection.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(connection) => connection.abort().map(|()| "its FUSE connection was aborted".to_string()),
            None => Err(anyhow!("the server never mounted")),
        };
        *lost = Some(match aborted {
            Ok(done) => format!("{why}; {done}"),
            Err(e) => format!("{why}; {e:#}"),
        });
    }

    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child.lock().unwrap_or_else(|e| e.into_inner()).try_wait().ok().flatten()
    }

    /// Lose the device if the server has exited (it serves until stopped).
    fn look(&self) {
        if self.lost().is_none() && !self.quit.load(Ordering::Relaxed) {
            if let Some(status) = self.exited() {
                self.give_up(format!("the media server (pid {}) exited while serving the device ({status})", self.pid));
            }
        }
    }

    /// Watch the server until [`Shared::quit`] or it is lost.
    fn watch(&self) {
        let mut stopped_since: Option<Instant> = None;
        let mut cancelled_at: Option<Instant> = None;
        while !self.quit.load(Ordering::Relaxed) && self.lost().is_none() {
            let now = Instant::now();
            self.look();
            if self.lost().is_some() {
                return;
            }
            if process_stopped(self.pid) {
                if now - *stopped_since.get_or_insert(now) >= STOPPED_GRACE {
                    self.give_up(format!(
                        "the media server (pid {}) was stopped (SIGSTOP) for {} s and did not answer",
                        self.pid,
                        STOPPED_GRACE.as_secs()
                    ));
                    return;
                }
            } else {
                stopped_since = None;
            }
            if signals::cancelled() {
                cancelled_at.get_or_insert(now);
            }
            let deadline = *self.deadline.lock().unwrap_or_else(|e| e.into_inner());
            let overdue = match (deadline, cancelled_at) {
                (_, Some(at)) if now - at >= OVERDUE_GRACE => Some("fslab was asked to stop"),
                (Some(d), _) if now > d + OVERDUE_GRACE => Some("the workload's timeout passed"),
                _ => None,
            };
            if let Some(when) = overdue {
                let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner()).clone();
                // Unknown (no fusectl) counts as waiting: the run is over anyway.
                let waiting = connection.and_then(|c| c.waiting()).unwrap_or(1);
                if waiting > 0 {
                    self.give_up(format!(
                        "{waiting} request(s) still waited on the media server {} s after {when} \
                         (the model is slower than the run may take)",
                        OVERDUE_GRACE.as_secs()
                    ));
                    return;
                }
            }
            std::thread::sleep(WATCH_EVERY);
        }
    }
}

/// Whether `pid` is stopped by a signal or a tracer (state `T` or `t`).
fn process_stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name, which may hold anything.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some("T" | "t"))
}

impl std::fmt::Debug for MediaServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaServer")
            .field("spec", &self.spec.to_string())
            .field("mountpoint", &self.mountpoint)
            .finish()
    }
}

/// The fslab executable that serves: `FSLAB_BIN` when set (tests, whose
/// own executable is the test harness), else this one.
fn fslab_bin() -> Result<PathBuf> {
    match std::env::var_os("FSLAB_BIN") {
        Some(path) => Ok(PathBuf::from(path)),
        None => std::env::current_exe().context("finding fslab's own executable for the media server"),
    }
}

impl MediaServer {
    /// Serve `image` as `spec` at `mountpoint` (created here, empty); its
    /// stderr goes to `<mountpoint>.log`.
    pub fn start(spec: &DeviceSpec, image: &Path, mountpoint: &Path) -> Result<MediaServer> {
        std::fs::create_dir(mountpoint).with_context(|| format!("creating {}", mountpoint.display()))?;
        let log_path = mountpoint.with_extension("log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut cmd = Command::new(fslab_bin()?);
        cmd.arg("media-serve")
            .arg("--spec")
            .arg(serde_json::to_string(spec)?)
            .arg("--image")
            .arg(image)
            .arg("--mountpoint")
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = crate::sys::contain::spawn_contained(cmd, None).context("starting the media server")?;
        let shared = Arc::new(Shared {
            pid: child.id(),
            child: Mutex::new(child),
            connection: Mutex::new(None),
            lost: Mutex::new(None),
            deadline: Mutex::new(None),
            quit: AtomicBool::new(false),
        });
        let mut server = MediaServer {
            spec: spec.clone(),
            mountpoint: mountpoint.to_path_buf(),
            shared,
            watchdog: None,
            stopped: false,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // The mount first (mountinfo, which never blocks), then the file.
            if let Ok(connection) = Connection::of_mount(mountpoint) {
                *server.shared.connection.lock().unwrap_or_else(|e| e.into_inner()) = Some(connection);
                break;
            }
            if server.shared.exited().is_some() || Instant::now() > deadline {
                let _ = server.stop();
                let why = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("the media server did not come up at {}: {}", mountpoint.display(), why.trim());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let shared = Arc::clone(&server.shared);
        server.watchdog = Some(
            std::thread::Builder::new()
                .name("media-watchdog".into())
                .spawn(move || shared.watch())
                .context("starting the media server's watchdog")?,
        );
        let image = server.image();
        server.ask("its image", move |_| match std::fs::metadata(&image) {
            Ok(m) if m.is_file() => Ok(()),
            Ok(_) => bail!("{} is not a file", image.display()),
            Err(e) => Err(e).with_context(|| format!("reading {}", image.display())),
        })?;
        Ok(server)
    }

    /// The served image: what the loop device is attached to.
    pub fn image(&self) -> PathBuf {
        self.mountpoint.join(IMAGE_FILE)
    }

    /// The run's account so far.
    pub fn evidence(&self) -> Result<Evidence> {
        self.ask("the evidence", serve::read_evidence)
    }

    /// Start a new account and pace replies at the medium's speed.
    pub fn reset_evidence(&self) -> Result<()> {
        self.ask("a new account", serve::reset_evidence)
    }

    /// Stop pacing (the model still charges every request).
    pub fn pause(&self) -> Result<()> {
        self.ask("to stop pacing", serve::pause)
    }

    /// Requests still waiting when `deadline` has passed (by
    /// [`OVERDUE_GRACE`]) lose the device: set it to a phase's deadline (the
    /// workload's timeout), None between phases.
    pub fn watch_deadline(&self, deadline: Option<Instant>) {
        *self.shared.deadline.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
    }

    /// Fails when the device went away (the server died, was stopped, or
    /// did not answer in time), saying why.
    pub fn check(&self) -> Result<()> {
        // Not only the watchdog's last look: a run that ended right after
        // the server died must not pass for one that did not see it.
        self.shared.look();
        match self.shared.lost() {
            Some(why) => bail!("the testbed's device went away: {why}"),
            None => Ok(()),
        }
    }

    /// `what` asked of the server by `ask` (which reads or writes the
    /// mount), on a thread this one can abandon: at
    /// [`ANSWER_TIMEOUT`] plus twice the model's slowest request, or when
    /// the watchdog finds the server gone, the connection is aborted
    /// (which also ends that thread's wait) and the device is lost.
    fn ask<T: Send + 'static>(&self, what: &str, ask: impl FnOnce(&Path) -> Result<T> + Send + 'static) -> Result<T> {
        self.check()?;
        let (tx, rx) = mpsc::channel();
        let mountpoint = self.mountpoint.clone();
        std::thread::Builder::new()
            .name("media-ask".into())
            .spawn(move || {
                let _ = tx.send(ask(&mountpoint));
            })
            .context("starting a thread to ask the media server")?;
        let limit = ANSWER_TIMEOUT + Duration::from_secs_f64(2.0 * self.spec.slowest_request_s().min(1e6));
        let deadline = Instant::now() + limit;
        loop {
            match rx.recv_timeout(WATCH_EVERY) {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) => {
                    // A connection the kernel ended (the server's end of
                    // /dev/fuse closed) is a device gone, not a hiccup.
                    let gone = e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| {
                        matches!(io.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED | libc::ENODEV))
                    });
                    if gone {
                        self.shared.give_up(format!("the media server's FUSE connection is gone ({e:#})"));
                    }
                    self.check()?;
                    return Err(e);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the thread asking the media server for {what} died")
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.check()?;
                    if Instant::now() > deadline {
                        self.shared.give_up(format!(
                            "the media server did not answer fslab's request for {what} within {}",
                            crate::human::duration_s(limit.as_secs_f64())
                        ));
                        self.check()?;
                        bail!("the media server did not answer fslab's request for {what}");
                    }
                }
            }
        }
    }

    /// Unmount and let the server exit; call after the loop device on it
    /// is detached. Safe to call more than once.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        // Its exit is expected from here on.
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
        let lost = self.shared.lost().is_some();
        if let Err(e) = crate::sys::mount::unmount(&self.mountpoint) {
            if self.shared.exited().is_none() && !lost {
                return Err(e.context("stopping the media server"));
            }
        }
        let mut child = self.shared.child.lock().unwrap_or_else(|e| e.into_inner());
        // A lost server may be stopped or stuck: it gets no time to exit.
        let deadline = Instant::now() + if lost { Duration::ZERO } else { Duration::from_secs(10) };
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.stopped = true;
                if lost {
                    return Ok(());
                }
                bail!("the media server at {} did not exit after unmounting; killed", self.mountpoint.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stopped = true;
        Ok(())
    }
}

impl Drop for MediaServer {
    fn drop(&mut self) {
        if !self.stopped {
            if let Err(e) = self.stop() {
                crate::output::diagnostic(&format!("fslab: {e:#} (run `fslab cleanup` to retry)"));
            }
        }
    }
}
