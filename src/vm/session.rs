//! One booted VM: [`VmSession::boot`], any number of
//! [`request`](VmSession::request)s, [`shutdown`](VmSession::shutdown).
//!
//! virtme-ng is run as `virtme-run` with an argument vector. Its `vng`
//! front end would do the same, but it joins its arguments into one `sh -c`
//! line without quoting, so a path with a space or a shell character would
//! break it or run as a command; `virtme-run` takes the same options
//! ([`virtme_args`] sets the ones `vng` would: overlays, `--mods auto`, …).
//!
//! Teardown (process group SIGKILL, then the cgroup, then the session
//! directory) runs on shutdown, on every VM failure, on drop (errors,
//! panics) and when fslab's cancel flag is set (Ctrl-C, SIGTERM), which
//! every wait polls. After a SIGKILL of fslab, `fslab cleanup` finds the
//! cgroup, the processes and the directory by the marker.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kinds::probe::GuestFacts;
use super::profile::{GuestSymbolsWanted, Profiler, RunProfile};
use super::protocol::{self, Ready, Reply, Request, Response, SessionInfo, READY_FILE, SESSION_FILE, SHUTDOWN};
use super::{console, hidden_in_guest, icount, kvm, tools, Accel, VmConfig, TCG_WARNING};
use crate::kernel::KernelArtifacts;
use crate::media::host::MediaServer;
use crate::media::relay::Relay;
use crate::sys::contain::{kill_group, spawn_contained};
use crate::sys::signals::cancelled;
use crate::testbed::cgroup;

/// How often the host looks for the agent's answer.
const POLL: Duration = Duration::from_millis(10);
/// The testbed disk's virtio serial (at most 20 bytes), which the guest finds it by.
pub const DISK_SERIAL: &str = "fslab-tb-disk";
/// How long a shutdown may take before the VM is killed.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The directories vng makes copy-on-write in the guest, so programs can
/// write to them (into guest memory) while the host's root stays read-only.
const OVERLAYS: &[&str] = &["/etc", "/lib", "/home", "/opt", "/srv", "/usr", "/var", "/tmp"];

/// What went wrong with a VM. Every failure but [`Failure::Handler`]
/// (the guest answered with an error) ends the session.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The agent did not report ready in time (kernel hung, or too slow).
    BootTimeout(Duration),
    /// QEMU (or virtme-run) exited: panic, OOM-killed agent, bad kernel, …
    Exited { during: String, status: String },
    /// The agent came up but its setup failed (module, disk).
    Setup(String),
    /// A request got no answer in time.
    RequestTimeout { kind: String, timeout: Duration },
    /// The user asked fslab to stop.
    Interrupted,
    /// The request's handler failed in the guest; the VM is still usable.
    Handler { kind: String, message: String },
    /// The session had already failed or was shut down.
    Dead,
}

/// A VM failure and the guest console's last lines (store them with the run).
#[derive(Clone, Debug)]
pub struct VmError {
    pub failure: Failure,
    pub console_tail: String,
    /// The session's marker name (empty when no session existed yet).
    pub session: String,
}

impl VmError {
    /// A failure outside any session (nothing booted, so no console).
    pub fn new(failure: Failure) -> VmError {
        VmError { failure, console_tail: String::new(), session: String::new() }
    }

    /// Whether the session survived (only handler errors leave it alive).
    pub fn vm_alive(&self) -> bool {
        matches!(self.failure, Failure::Handler { .. })
    }
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.failure {
            Failure::BootTimeout(t) => write!(
                f,
                "the guest did not become ready within {} s (the kernel hung, or the boot needs a longer boot timeout)",
                t.as_secs()
            )?,
            Failure::Exited { during, status } => {
                write!(f, "the VM stopped during {during} ({status})")?;
                if let Some(why) = console::diagnosis(&self.console_tail) {
                    write!(f, ": {why}")?;
                }
            }
            Failure::Setup(e) => write!(f, "the guest agent's setup failed: {e}")?,
            Failure::RequestTimeout { kind, timeout } => write!(
                f,
                "the guest did not answer the `{kind}` request within {} s; the VM was killed",
                timeout.as_secs()
            )?,
            Failure::Interrupted => return write!(f, "interrupted"),
            Failure::Handler { kind, message } => return write!(f, "guest `{kind}` request failed: {message}"),
            Failure::Dead => return write!(f, "this VM session already ended"),
        }
        if !self.console_tail.is_empty() {
            write!(f, "\n--- last lines of the guest console ---\n{}", self.console_tail)?;
        }
        Ok(())
    }
}

impl std::error::Error for VmError {}

/// What a session was, for storing with each run (the place a run happened).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSummary {
    /// `kvm` or `tcg`.
    pub accelerator: String,
    pub cpus: u32,
    pub memory_mib: u64,
    /// The guest's `uname -r` as the agent reported it.
    pub guest_release: String,
    /// From starting QEMU to the agent's ready.
    pub boot_s: f64,
    /// The TCG warning, a KVM probe that failed, missing containment, …
    pub warnings: Vec<String>,
    /// The virtme-run command line (for reproducing by hand).
    pub command: Vec<String>,
}

/// Where a boot's time went: the host's clock at virtme-run's start and at
/// QEMU's process start, the guest's (`/proc/uptime`, zero when the
/// kernel's clock starts) at init's and the agent's process starts, the
/// agent's first line and its ready. The parts add up to
/// [`VmSummary::boot_s`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BootPhases {
    /// virtme-run's start to QEMU's process start (virtme-ng's Python,
    /// virtiofsd's start).
    pub virtme_s: f64,
    /// QEMU's start to the guest kernel's clock start (QEMU's setup,
    /// firmware, the kernel's decompression), plus the host's notice of
    /// the ready file (at most one poll).
    pub firmware_s: f64,
    /// The kernel's clock start to init's start (the kernel's own boot).
    pub kernel_s: f64,
    /// Init's start to the agent's process start (the initramfs if any,
    /// virtme-ng's init script, its mounts).
    pub init_s: f64,
    /// The agent's process start to its first line of code (loading
    /// fslab's binary over virtiofs).
    pub agent_load_s: f64,
    /// The agent's first line to its ready (module loads, the testbed disk).
    pub agent_setup_s: f64,
}

/// The testbed disk of a session.
#[derive(Clone, Debug)]
pub struct GuestDisk {
    /// The image file on the host.
    pub image: PathBuf,
    pub serial: String,
    pub size_bytes: u64,
    /// Its device in the guest (`/dev/vda`), as the agent found it.
    pub device: String,
    /// `image` is a media server's file (see [`VmConfig::disk_media`]).
    pub served: bool,
    /// The key of the read-only image the host last wrote onto it.
    pub holds: Option<String>,
}

/// A booted VM whose agent answers requests. Dropping it kills the VM and
/// removes everything it created.
#[derive(Debug)]
pub struct VmSession {
    name: String,
    dir: PathBuf,
    exchange: PathBuf,
    console: PathBuf,
    cgroup: Option<PathBuf>,
    child: Option<Child>,
    disk: Option<GuestDisk>,
    /// The media server the disk is served by; stopped after the VM.
    media: Option<MediaServer>,
    /// Answers the guest's requests for the server's account.
    relay: Option<Relay>,
    accel: Accel,
    cpus: u32,
    memory_mib: u64,
    warnings: Vec<String>,
    command: Vec<String>,
    guest_release: String,
    boot_time: Duration,
    boot_phases: Option<BootPhases>,
    request_timeout: Duration,
    next_seq: u64,
    alive: bool,
    /// The instruction-counting plugin is loaded (TCG with the plugin installed).
    counting: bool,
    /// It also attributes them to functions ([`VmConfig::profile`]).
    profiler: Option<Profiler>,
}

/// Paths handed to virtme-ng end up in QEMU option lists (`file=…,`) and on
/// the kernel command line, where commas, spaces and quotes have meanings
/// of their own (virtme-ng itself rejects most of them for directories).
fn check_path(what: &str, path: &Path) -> Result<String> {
    let Some(text) = path.to_str() else { bail!("{what} {} is not a UTF-8 path", path.display()) };
    if !path.is_absolute() {
        bail!("{what} {text} must be an absolute path");
    }
    if let Some(bad) = text.chars().find(|c| !(c.is_ascii_alphanumeric() || "_+/.-".contains(*c))) {
        bail!("{what} {text} contains {bad:?}; the VM path only takes paths of letters, digits and _+/.-");
    }
    Ok(text.to_string())
}

impl VmSession {
    /// Boot `kernel` as `config` says, with the session's files in a new
    /// marker-named directory under `workdir`, and wait for the agent.
    /// VM failures are [`VmError`]s (inside the anyhow error; downcast to
    /// store the console tail).
    pub fn boot(kernel: &KernelArtifacts, config: &VmConfig, workdir: &Path) -> Result<VmSession> {
        if cancelled() {
            return Err(VmError::new(Failure::Interrupted).into());
        }
        let tools = tools::discover()?;
        let agent = match &config.agent {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("finding fslab's own executable for the guest agent")?,
        };
        let agent_str = check_path("the guest agent", &agent)?;
        let workdir_str = check_path("work directory", workdir)?;
        let image = kernel.image.to_str().context("kernel image path is not UTF-8")?.to_string();
        if image.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',' || c == '"' || c == '\'') {
            bail!("kernel image path {image} contains a space, comma or quote, which QEMU's -kernel cannot take");
        }
        if let Some(m) = &kernel.modules_dir {
            check_path("kernel modules directory", m)?;
        }
        for arg in &config.kernel_args {
            if arg.is_empty() || arg.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"') {
                bail!("kernel argument {arg:?} must be one word without quotes");
            }
        }
        if config.cpus == 0 || config.memory_mib < 128 {
            bail!("a VM needs at least 1 CPU and 128 MiB (got {} CPUs, {} MiB)", config.cpus, config.memory_mib);
        }

        crate::sys::trusted::ensure_dir(workdir).with_context(|| format!("the work directory {workdir_str}"))?;
        let (dir, name) = crate::sys::marker::create_marked_dir(workdir)?;
        let exchange = dir.join("exchange");
        let mut session = VmSession {
            name: name.clone(),
            exchange: exchange.clone(),
            console: dir.join("console.log"),
            dir: dir.clone(),
            cgroup: None,
            child: None,
            disk: None,
            media: None,
            relay: None,
            accel: Accel::Tcg,
            cpus: config.cpus,
            memory_mib: config.memory_mib,
            warnings: Vec::new(),
            command: Vec::new(),
            guest_release: String::new(),
            boot_time: Duration::ZERO,
            boot_phases: None,
            request_timeout: config.request_timeout,
            next_seq: 1,
            alive: false,
            counting: false,
            profiler: None,
        };
        // From here on, dropping `session` on an error removes what exists.
        fs::create_dir(&exchange)?;
        fs::create_dir(dir.join("tmp"))?;

        match cgroup::detect() {
            Some(cgroup::Flavor::V1(root) | cgroup::Flavor::V2(root)) => {
                let path = root.join(&name);
                fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
                session.cgroup = Some(path);
            }
            None => session.warnings.push(
                "no block cgroup hierarchy to contain the VM's processes; after a SIGKILL, `fslab cleanup` finds \
                 them by name only"
                    .to_string(),
            ),
        }
        let procs = session.cgroup.as_ref().map(|c| c.join("cgroup.procs"));

        if let Some(bytes) = config.disk_bytes {
            let mut disk = create_disk(&dir.join("disk.img"), bytes)?;
            if let Some(spec) = &config.disk_media {
                // Up before QEMU opens the disk; torn down after QEMU is gone.
                crate::sys::modules::ensure_loaded("fuse")?;
                let server = MediaServer::start(spec, &disk.image, &dir.join("media"))?;
                disk.image = server.image();
                disk.served = true;
                session.relay = Some(Relay::spawn(&exchange, &server.mountpoint)?);
                session.media = Some(server);
            }
            session.disk = Some(disk);
        }

        session.accel = match config.accel {
            Accel::Tcg => Accel::Tcg,
            requested => {
                match kvm::probe(&tools.qemu, &kernel.image, &dir, &format!("{name}-kvm-probe"), procs.as_deref()) {
                    Ok(()) => Accel::Kvm,
                    Err(_) if cancelled() => return Err(VmError::new(Failure::Interrupted).into()),
                    Err(why) if requested == Accel::Kvm => bail!("accelerator kvm was asked for, but {why}"),
                    Err(why) => {
                        session.warnings.push(format!("KVM is not usable for this guest ({why}); using TCG"));
                        Accel::Tcg
                    }
                }
            }
        };
        if session.accel == Accel::Tcg {
            session.warnings.push(TCG_WARNING.to_string());
        }

        let ro_dirs = guest_ro_dirs(config, kernel, &agent, &dir)?;
        let mut modules = config.modules.clone();
        if session.disk.is_some() && !modules.iter().any(|m| m == "virtio_blk") {
            modules.push("virtio_blk".to_string());
        }
        // Under TCG, count the guest's instructions when the plugin is
        // installed, and attribute them to functions unless told not to.
        let plugin = match (session.accel, icount::plugin()) {
            (Accel::Tcg, Some(so)) => match check_path("the instruction-count plugin", &so) {
                Ok(so) => {
                    let mut option =
                        format!("{so},out={}", check_path("session directory", &dir.join(icount::COUNT_FILE))?);
                    if config.profile {
                        option.push_str(&format!(
                            ",blocks={}",
                            check_path("session directory", &dir.join(icount::BLOCKS_FILE))?
                        ));
                        session.profiler = Some(Profiler::new(kernel, config.objects.as_deref()));
                    }
                    Some(option)
                }
                Err(e) => {
                    session.warnings.push(format!("{e:#}: guest instructions are not counted"));
                    None
                }
            },
            _ => None,
        };
        session.counting = plugin.is_some();
        let symbols = session.profiler.as_ref().map_or(GuestSymbolsWanted::None, Profiler::wanted);
        // udev is skipped unless asked for: a shim first on init's PATH.
        let shim = if config.udev { None } else { super::udev::shim_dir()? };
        let shim = shim.map(|d| check_path("the guest's shim directory", &d)).transpose()?;
        let mut kernel_args = config.kernel_args.clone();
        kernel_args.extend(shim.as_deref().map(super::udev::kernel_arg));
        let info = SessionInfo {
            modules,
            disk_serial: session.disk.as_ref().map(|d| d.serial.clone()),
            symbols,
            init_path_shim: shim,
        };
        protocol::write_atomic(&exchange.join(SESSION_FILE), &info)?;

        let args = virtme_args(&VirtmeArgs {
            image: &image,
            with_modules: kernel.modules_dir.is_some(),
            force_initramfs: needs_initramfs(&kernel.release, kernel.modules_dir.is_some()),
            name: &name,
            accel: session.accel,
            cpus: config.cpus,
            memory_mib: config.memory_mib,
            exchange: &check_path("exchange directory", &exchange)?,
            ro_dirs: &ro_dirs,
            kernel_args: &kernel_args,
            agent: &agent_str,
            disk: session.disk.as_ref(),
            plugin: plugin.as_deref(),
        });
        session.command = std::iter::once(tools.virtme_run.display().to_string()).chain(args.iter().cloned()).collect();

        let log = File::create(&session.console).context("creating the console log")?;
        let mut cmd = Command::new(&tools.virtme_run);
        cmd.args(&args)
            .env("PATH", tools.search_path())
            // virtme-ng's temporary files, virtiofsd's sockets among them, carry the marker.
            .env("TMPDIR", dir.join("tmp"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let started = Instant::now();
        let started_uptime = super::agent::uptime_s();
        session.child = Some(spawn_contained(cmd, procs.as_deref()).context("starting virtme-run")?);
        session.alive = true;

        let ready_path = exchange.join(READY_FILE);
        let ready: Ready = session.wait_for(
            started + config.boot_timeout,
            "boot",
            |_| protocol::read_if_present(&ready_path).map_err(|e| Failure::Setup(format!("{e:#}"))),
            Failure::BootTimeout(config.boot_timeout),
        )?;
        match ready {
            Ready::Ok { release, disk, init_exec_s, agent_exec_s, agent_started_s, ready_s } => {
                session.boot_time = started.elapsed();
                let boot_s = session.boot_time.as_secs_f64();
                session.boot_phases = qemu_started_uptime(&name).filter(|_| ready_s > 0.0).map(|qemu| {
                    let virtme_s = (qemu - started_uptime).max(0.0);
                    BootPhases {
                        virtme_s,
                        firmware_s: boot_s - virtme_s - ready_s,
                        kernel_s: init_exec_s,
                        init_s: agent_exec_s - init_exec_s,
                        agent_load_s: agent_started_s - agent_exec_s,
                        agent_setup_s: ready_s - agent_started_s,
                    }
                });
                session.guest_release = release;
                if let (Some(d), Some(device)) = (session.disk.as_mut(), disk) {
                    d.device = device;
                }
            }
            Ready::Error(e) => return Err(session.fail(Failure::Setup(e)).into()),
        }
        Ok(session)
    }

    /// Send a request of `kind` and wait (the session's request timeout) for
    /// the reply body.
    pub fn request(&mut self, kind: &str, body: Value) -> Result<Value> {
        self.request_with_timeout(kind, body, self.request_timeout)
    }

    /// [`request`](Self::request) with its own timeout. A handler error is a
    /// [`Failure::Handler`] and the session lives on; any other failure kills
    /// the VM first.
    pub fn request_with_timeout(&mut self, kind: &str, body: Value, timeout: Duration) -> Result<Value> {
        if !self.alive {
            return Err(VmError { session: self.name.clone(), ..VmError::new(Failure::Dead) }.into());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let request = Request { seq, kind: kind.to_string(), body };
        protocol::write_atomic(&protocol::request_path(&self.exchange, seq), &request)?;
        let response_path = protocol::response_path(&self.exchange, seq);
        let response: Response = self.wait_for(
            Instant::now() + timeout,
            &format!("the `{kind}` request"),
            |_| protocol::read_if_present(&response_path).map_err(|e| Failure::Setup(format!("{e:#}"))),
            Failure::RequestTimeout { kind: kind.to_string(), timeout },
        )?;
        let _ = fs::remove_file(&response_path);
        match response.reply {
            Reply::Ok(value) => Ok(value),
            Reply::Error(message) => Err(self.fail(Failure::Handler { kind: kind.to_string(), message }).into()),
        }
    }

    /// Write the packed read-only image `image` (cache key `key`) onto the
    /// start of the testbed disk, from the host, between runs. Some(true):
    /// written now; Some(false): the disk holds it already; None: the disk
    /// is a media server's file, which only the guest writes (through the
    /// model). The guest must flush its page cache of the disk before
    /// reading it ([`crate::sys::blockdev::flush_buffers`]).
    pub fn put_image(&mut self, image: &Path, key: &str) -> Result<Option<bool>> {
        let Some(disk) = self.disk.as_mut().filter(|d| !d.served) else { return Ok(None) };
        if disk.holds.as_deref() == Some(key) {
            return Ok(Some(false));
        }
        disk.holds = None;
        let mut from = File::open(image).with_context(|| format!("opening {}", image.display()))?;
        let size = from.metadata()?.len();
        if size > disk.size_bytes {
            bail!("the packed image ({size} bytes) does not fit on the VM's testbed disk ({} bytes)", disk.size_bytes);
        }
        let mut to = OpenOptions::new()
            .write(true)
            .open(&disk.image)
            .with_context(|| format!("opening {}", disk.image.display()))?;
        std::io::copy(&mut from, &mut to)
            .with_context(|| format!("writing the image onto {}", disk.image.display()))?;
        // QEMU reads the disk with O_DIRECT: the bytes must be on the file, not only in the page cache.
        to.sync_data().with_context(|| format!("flushing {}", disk.image.display()))?;
        disk.holds = Some(key.to_string());
        Ok(Some(true))
    }

    /// The guest's facts (the built-in `probe` request), naming the testbed disk.
    pub fn probe(&mut self) -> Result<GuestFacts> {
        let body = serde_json::json!({ "disk_serial": self.disk.as_ref().map(|d| d.serial.clone()) });
        let value = self.request("probe", body)?;
        serde_json::from_value(value).context("the guest's probe answer does not parse")
    }

    /// Ask the agent to stop, let the VM power off, then remove everything.
    pub fn shutdown(mut self) -> Result<()> {
        if self.alive {
            let asked = self.request_with_timeout(SHUTDOWN, Value::Null, SHUTDOWN_TIMEOUT);
            if asked.is_ok() {
                let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
                while let Some(child) = self.child.as_mut() {
                    if child.try_wait().ok().flatten().is_some() || Instant::now() >= deadline || cancelled() {
                        break;
                    }
                    sleep(POLL);
                }
            }
        }
        self.teardown()
    }

    /// The exchange directory (the same path in the guest). Requests may
    /// name files the caller puts here.
    pub fn exchange_dir(&self) -> &Path {
        &self.exchange
    }

    /// The marker name of this session (its directory, QEMU name, cgroup).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `Kvm` or `Tcg`, as resolved at boot.
    pub fn accelerator(&self) -> Accel {
        self.accel
    }

    /// Warnings to print and store with every run of this session.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn disk(&self) -> Option<&GuestDisk> {
        self.disk.as_ref()
    }

    /// Where the guest asks for the served disk's account
    /// ([`crate::media::relay`]): the exchange directory, if the disk is served.
    pub fn media_relay(&self) -> Option<&Path> {
        self.relay.as_ref().map(|_| self.exchange.as_path())
    }

    /// The guest instructions of the last run's measured part (see
    /// [`icount`]), taken once; None without the plugin or when the run did
    /// not reach its end.
    pub fn take_instructions(&mut self) -> Option<crate::metric::Metric> {
        if self.counting {
            icount::take(&self.dir)
        } else {
            None
        }
    }

    /// The last run's measured part by function (see [`super::profile`]),
    /// taken once; None unless the session attributes (the plugin and
    /// [`VmConfig::profile`]) and the run reached its end; an error when
    /// the plugin's file does not parse.
    pub fn take_profile(&mut self) -> Option<Result<RunProfile>> {
        let profiler = self.profiler.as_mut()?;
        let blocks = icount::take_blocks(&self.dir)?;
        Some(blocks.map(|b| profiler.profile(&b, &self.exchange)))
    }

    /// Where the boot's time went, when QEMU and the agent's clock were read.
    pub fn boot_phases(&self) -> Option<&BootPhases> {
        self.boot_phases.as_ref()
    }

    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    pub fn is_alive(&self) -> bool {
        self.alive
    }

    /// Pid of virtme-run (its process group holds QEMU and virtiofsd).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The last lines of the guest console so far.
    pub fn console_tail(&self) -> String {
        console::tail(&self.console)
    }

    pub fn summary(&self) -> VmSummary {
        VmSummary {
            accelerator: self.accel.as_str().to_string(),
            cpus: self.cpus,
            memory_mib: self.memory_mib,
            guest_release: self.guest_release.clone(),
            boot_s: self.boot_time.as_secs_f64(),
            warnings: self.warnings.clone(),
            command: self.command.clone(),
        }
    }

    /// Poll `check` until it yields, the VM exits, the user interrupts or
    /// `deadline` passes (then `on_timeout`).
    fn wait_for<T>(
        &mut self,
        deadline: Instant,
        during: &str,
        mut check: impl FnMut(&Self) -> std::result::Result<Option<T>, Failure>,
        on_timeout: Failure,
    ) -> std::result::Result<T, VmError> {
        loop {
            match check(self) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(failure) => return Err(self.fail(failure)),
            }
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                // The answer may have landed just before the VM stopped.
                if let Ok(Some(value)) = check(self) {
                    return Ok(value);
                }
                return Err(self.fail(Failure::Exited { during: during.to_string(), status: status.to_string() }));
            }
            if cancelled() {
                return Err(self.fail(Failure::Interrupted));
            }
            if Instant::now() >= deadline {
                return Err(self.fail(on_timeout));
            }
            sleep(POLL);
        }
    }

    /// The error for `failure`, with the console tail; ends the session
    /// unless only the handler failed.
    fn fail(&mut self, failure: Failure) -> VmError {
        let console_tail = console::tail(&self.console);
        if !matches!(failure, Failure::Handler { .. }) {
            if let Err(e) = self.teardown() {
                crate::output::diagnostic(&format!("fslab: tearing down VM {}: {e:#}", self.name));
            }
        }
        VmError { failure, console_tail, session: self.name.clone() }
    }

    /// Kill the VM's processes, remove its cgroup and directory. Idempotent.
    fn teardown(&mut self) -> Result<()> {
        self.alive = false;
        let mut errors = Vec::new();
        if let Some(mut child) = self.child.take() {
            kill_group(child.id() as libc::pid_t);
            let _ = child.wait();
        }
        if let Some(group) = self.cgroup.take() {
            // Kills whatever left the process group (nothing should).
            if let Err(e) = cgroup::remove_group(&group) {
                errors.push(format!("{e:#}"));
            }
        }
        // QEMU, which held the served file, is gone: unmount and stop.
        self.relay = None;
        if let Some(mut server) = self.media.take() {
            if let Err(e) = server.stop() {
                errors.push(format!("{e:#}"));
                // Keep the directory (and the mount in it) for `fslab cleanup`.
                bail!("VM teardown: {}", errors.join("; "));
            }
        }
        if self.dir.exists() {
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                errors.push(format!("removing {}: {e}", self.dir.display()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("VM teardown: {}", errors.join("; "))
        }
    }
}

impl Drop for VmSession {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            crate::output::diagnostic(&format!("fslab: {e:#}"));
        }
    }
}

/// A sparse image of `bytes`, checked to open with O_DIRECT: QEMU opens it
/// with `cache=none` so the host page cache never holds the guest's I/O.
/// The host's uptime when session `name`'s QEMU started (its `/proc` start
/// time, in clock ticks since the host booted).
fn qemu_started_uptime(name: &str) -> Option<f64> {
    use procfs_core::FromRead;
    let qemu = super::leftovers::vm_processes()
        .into_iter()
        .find(|p| p.cmdline.contains(name) && p.cmdline.contains("qemu-system") && !p.cmdline.contains("kvm-probe"))?;
    let stat = fs::read(format!("/proc/{}/stat", qemu.pid)).ok()?;
    let stat = procfs_core::process::Stat::from_read(stat.as_slice()).ok()?;
    // SAFETY: sysconf has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| stat.starttime as f64 / ticks as f64)
}

fn create_disk(path: &Path, bytes: u64) -> Result<GuestDisk> {
    check_path("testbed disk image", path)?;
    // tmpfs accepts O_DIRECT (since 6.6) but is the page cache itself.
    let dir = path.parent().unwrap_or(Path::new("/"));
    if let Ok(fs) = nix::sys::statfs::statfs(dir) {
        if fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC {
            bail!(
                "the work directory {} is on tmpfs: the VM's testbed disk image would live in host memory, not on a \
                 disk; choose a work directory on a disk filesystem",
                dir.display()
            );
        }
    }
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.set_len(bytes).with_context(|| format!("sizing {}", path.display()))?;
    drop(file);
    if let Err(e) = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path) {
        bail!(
            "the work directory's filesystem cannot do direct I/O on {} ({e}); the VM's testbed disk bypasses the \
             host page cache, so choose a work directory on a disk filesystem (not tmpfs)",
            path.display()
        );
    }
    Ok(GuestDisk {
        image: path.to_path_buf(),
        serial: DISK_SERIAL.to_string(),
        size_bytes: bytes,
        device: String::new(),
        served: false,
        holds: None,
    })
}

/// The read-only directories the guest gets: the caller's, plus the agent's
/// and the kernel's directories where virtme-ng would hide them. None may
/// contain the session directory (the exchange must stay writable).
fn guest_ro_dirs(config: &VmConfig, kernel: &KernelArtifacts, agent: &Path, session_dir: &Path) -> Result<Vec<String>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in &config.ro_dirs {
        if !dir.is_dir() {
            bail!("read-only directory {} for the guest does not exist", dir.display());
        }
        dirs.push(dir.clone());
    }
    let needed = agent.parent().map(Path::to_path_buf).into_iter().chain(kernel.guest_dirs.iter().cloned());
    for dir in needed {
        if hidden_in_guest(&dir) && !dirs.iter().any(|d| dir.starts_with(d)) {
            dirs.push(dir);
        }
    }
    let mut out = Vec::new();
    for dir in &dirs {
        if session_dir.starts_with(dir) || dir.starts_with(session_dir) {
            bail!(
                "read-only directory {} for the guest overlaps the VM's session directory {} (whose exchange must \
                 stay writable); export a narrower directory or use another work directory",
                dir.display(),
                session_dir.display()
            );
        }
        out.push(check_path("read-only directory for the guest", dir)?);
    }
    Ok(out)
}

/// Does a kernel of `release` need virtme-ng's initramfs to mount the
/// guest's root? With modules, virtme-ng builds one anyway (it loads them
/// there). Without, it passes `rootfstype=virtiofs root=ROOTFS` and lets the
/// kernel mount the root itself, which needs the kernel's
/// `mount_nodev_root()` ("init: allow mounting arbitrary non-blockdevice
/// filesystems as root", posted June 2021): 6.1 has it, 5.10 does not, and
/// there `prepare_namespace()` tries the tag as a block device and panics
/// with "VFS: Unable to mount root fs on unknown-block(0,0)". So every
/// kernel before 6.0 gets the initramfs (whose busybox mounts virtiofs from
/// user space; `CONFIG_VIRTIO_FS` must then be built in), at a small boot
/// cost where 5.15-5.19 would not have needed it.
fn needs_initramfs(release: &str, with_modules: bool) -> bool {
    if with_modules {
        return false;
    }
    let mut numbers = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(_)) => major < 6,
        _ => false,
    }
}

struct VirtmeArgs<'a> {
    image: &'a str,
    with_modules: bool,
    /// Mount the root from an initramfs (see [`needs_initramfs`]).
    force_initramfs: bool,
    name: &'a str,
    accel: Accel,
    cpus: u32,
    memory_mib: u64,
    exchange: &'a str,
    ro_dirs: &'a [String],
    kernel_args: &'a [String],
    agent: &'a str,
    disk: Option<&'a GuestDisk>,
    /// `-plugin` option text: the instruction-count plugin and its arguments.
    plugin: Option<&'a str>,
}

/// virtme-run's arguments. `--disable-microvm` keeps a PCI machine under
/// KVM too (virtme-ng's microvm has virtio-mmio devices; TCG always gets
/// q35), so the testbed disk is virtio-blk-pci either way;
/// `--show-boot-console` with `loglevel=4` puts kernel errors, panics and
/// the OOM killer into the console log without slowing the boot.
/// Modules udev must not load in a guest (see [`virtme_args`]).
const NOT_AUTOLOADED: &str = "modprobe.blacklist=kvm_amd,kvm_intel";

fn virtme_args(a: &VirtmeArgs) -> Vec<String> {
    let mut args: Vec<String> = vec!["--kimg".into(), a.image.into()];
    args.extend(["--mods".into(), if a.with_modules { "auto" } else { "none" }.into()]);
    if a.force_initramfs {
        args.push("--force-initramfs".into());
    }
    args.extend(["--name".into(), a.name.into()]);
    if a.accel == Accel::Tcg {
        args.push("--disable-kvm".into());
    }
    args.push("--disable-microvm".into());
    // Under TCG on a loaded host the boot-time check that the timer
    // interrupt arrives can time out and panic the guest ("IO-APIC + timer
    // doesn't work!", seen here at load 19): QEMU's emulated timer works, so
    // skip the check, as cloud images do.
    let no_timer_check = (a.accel == Accel::Tcg).then(|| "no_timer_check".to_string());
    args.extend(["--cpus".into(), a.cpus.to_string(), "--memory".into(), format!("{}M", a.memory_mib)]);
    args.extend(["--rwdir".into(), a.exchange.into()]);
    for dir in a.ro_dirs {
        args.extend(["--rodir".into(), dir.clone()]);
    }
    for dir in OVERLAYS {
        args.extend(["--overlay-rwdir".into(), dir.to_string()]);
    }
    args.extend(["--show-boot-console".into(), "--kopt".into(), "loglevel=4".into()]);
    // virtme-ng's init runs udev's coldplug and waits for it to settle, and
    // udev loads a module for every device and CPU feature it sees: with
    // the package's modules that includes kvm_amd or kvm_intel (and kvm),
    // whose loading took about 8 of a 24 s boot under TCG at load 12 (the
    // guest's kernel log). A guest of fslab never runs VMs itself;
    // blacklisting stops only udev's alias loads, not an explicit modprobe.
    args.extend(["--kopt".into(), NOT_AUTOLOADED.into()]);
    for karg in no_timer_check.iter().chain(a.kernel_args) {
        args.extend(["--kopt".into(), karg.clone()]);
    }
    // Both paths passed check_path: no quoting needed in virtme-ng's shell line.
    args.extend(["--script-sh".into(), format!("exec {} guest-agent --exchange {}", a.agent, a.exchange)]);
    // --qemu-opts takes everything after it, so it comes last.
    if a.disk.is_some() || a.plugin.is_some() {
        args.push("--qemu-opts".into());
    }
    if let Some(plugin) = a.plugin {
        args.extend(["-plugin".into(), plugin.into()]);
    }
    if let Some(disk) = a.disk {
        // A served disk takes QEMU's thread pool: without FUSE_ASYNC_DIO (the
        // serial media) io_submit on the FUSE file waits for the reply, which
        // would stall QEMU's event loop for the model's whole latency.
        // And no merging in QEMU, and no write-zeroes command (QEMU would
        // turn it into zero writes the guest's block trace never sees as
        // writes; without it the guest writes zeroes itself, as on the
        // host's loop device): the model sees the guest block layer's
        // requests, as the guest's block trace records them.
        let (aio, device_opts) =
            if disk.served { ("threads", ",request-merging=off,write-zeroes=off") } else { ("native", "") };
        args.extend([
            "-drive".into(),
            format!("file={},if=none,id=fslab-tb,format=raw,cache=none,aio={aio}", disk.image.display()),
            "-device".into(),
            format!("virtio-blk-pci,drive=fslab-tb,serial={}{device_opts}", disk.serial),
        ]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_shell_or_option_characters_are_refused() {
        assert!(check_path("x", Path::new("/var/tmp/fslab/fslab-tb-1-vm0-ab")).is_ok());
        for bad in ["/a b", "/a,b", "/a'b", "/a;b", "relative/x", "/a$b"] {
            assert!(check_path("x", Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn virtme_gets_the_disk_last_and_kvm_unless_tcg() {
        let disk = GuestDisk {
            image: "/w/s/disk.img".into(),
            serial: DISK_SERIAL.into(),
            size_bytes: 1 << 30,
            device: String::new(),
            served: false,
            holds: None,
        };
        let ro = vec!["/var/tmp/k".to_string()];
        let kargs = vec!["panic=1".to_string()];
        let args = VirtmeArgs {
            image: "/k/boot/vmlinuz-6.1",
            with_modules: true,
            force_initramfs: false,
            name: "fslab-tb-1-vm0-a",
            accel: Accel::Kvm,
            cpus: 2,
            memory_mib: 2048,
            exchange: "/w/s/exchange",
            ro_dirs: &ro,
            kernel_args: &kargs,
            agent: "/usr/bin/fslab",
            disk: Some(&disk),
            plugin: None,
        };
        let argv = virtme_args(&args);
        assert!(!argv.contains(&"--disable-kvm".to_string()));
        let at = |flag: &str| argv.iter().position(|a| a == flag).unwrap();
        assert_eq!(argv[at("--mods") + 1], "auto");
        assert_eq!(argv[at("--memory") + 1], "2048M");
        assert_eq!(argv[at("--rodir") + 1], "/var/tmp/k");
        assert_eq!(argv[at("--script-sh") + 1], "exec /usr/bin/fslab guest-agent --exchange /w/s/exchange");
        assert!(at("--qemu-opts") > at("--script-sh"));
        assert!(argv.last().unwrap().ends_with("serial=fslab-tb-disk"));
        assert!(argv.iter().any(|a| a.contains("cache=none,aio=native")));
        let tcg = virtme_args(&VirtmeArgs { accel: Accel::Tcg, disk: None, with_modules: false, ..args });
        assert!(!argv.contains(&"--force-initramfs".to_string()));
        let old = virtme_args(&VirtmeArgs { with_modules: false, force_initramfs: true, ..args });
        assert!(old.contains(&"--force-initramfs".to_string()));
        assert!(tcg.contains(&"--disable-kvm".to_string()) && !tcg.contains(&"--qemu-opts".to_string()));
        assert!(tcg.contains(&"no_timer_check".to_string()) && !argv.contains(&"no_timer_check".to_string()));
        assert!(argv.contains(&NOT_AUTOLOADED.to_string()) && tcg.contains(&NOT_AUTOLOADED.to_string()));
        assert_eq!(tcg[tcg.iter().position(|a| a == "--mods").unwrap() + 1], "none");
        let counted =
            virtme_args(&VirtmeArgs { accel: Accel::Tcg, plugin: Some("/p.so,out=/w/s/instructions"), ..args });
        let opts = counted.iter().position(|a| a == "--qemu-opts").unwrap();
        assert_eq!(counted[opts + 1..opts + 3], ["-plugin", "/p.so,out=/w/s/instructions"]);
        assert!(counted.last().unwrap().ends_with("serial=fslab-tb-disk"));
    }

    #[test]
    fn kernels_before_6_mount_their_root_from_an_initramfs_when_they_have_no_modules() {
        assert!(needs_initramfs("5.10.262", false));
        assert!(needs_initramfs("5.10.0-46-cloud-amd64", false));
        assert!(!needs_initramfs("5.10.0-46-cloud-amd64", true), "modules: virtme-ng makes one anyway");
        assert!(!needs_initramfs("6.1.176", false));
        assert!(!needs_initramfs("6.12.118+deb13-cloud-amd64", false));
        assert!(!needs_initramfs("garbage", false));
    }

    #[test]
    fn read_only_dirs_never_cover_the_session() {
        let kernel = KernelArtifacts {
            image: "/k/boot/vmlinuz".into(),
            modules_dir: Some("/var/tmp/c/kernels/x/lib/modules/r".into()),
            config: None,
            release: "r".into(),
            source: "k.deb".into(),
            sha256: String::new(),
            guest_dirs: vec!["/var/tmp/c/kernels/x".into()],
            package: None,
            build: None,
        };
        let config = VmConfig::default();
        let dirs = guest_ro_dirs(&config, &kernel, Path::new("/usr/bin/fslab"), Path::new("/var/tmp/w/s")).unwrap();
        // /usr/bin is visible in the guest anyway; the kernel's cache entry under /var/tmp is not.
        assert_eq!(dirs, vec!["/var/tmp/c/kernels/x".to_string()]);
        let agent_in_workdir = Path::new("/var/tmp/w/fslab");
        let err = guest_ro_dirs(&config, &kernel, agent_in_workdir, Path::new("/var/tmp/w/s")).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
    }

    #[test]
    fn a_disk_image_on_tmpfs_is_refused() {
        let shm = Path::new("/dev/shm");
        if nix::sys::statfs::statfs(shm).map(|s| s.filesystem_type()) != Ok(nix::sys::statfs::TMPFS_MAGIC) {
            crate::testsupport::skip("/dev/shm is not tmpfs here");
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        let err = create_disk(&dir.path().join("disk.img"), 1 << 20).unwrap_err().to_string();
        assert!(err.contains("is on tmpfs"), "{err}");
        let disk_dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let disk = create_disk(&disk_dir.path().join("disk.img"), 64 << 20).unwrap();
        let meta = fs::metadata(&disk.image).unwrap();
        assert_eq!(meta.len(), 64 << 20);
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) < 64, "the image is sparse");
    }

    #[test]
    fn errors_carry_the_console_tail_and_a_diagnosis() {
        let e = VmError {
            failure: Failure::Exited { during: "boot".into(), status: "exit status: 255".into() },
            console_tail: "[ 2.0] Kernel panic - not syncing: VFS: Unable to mount root fs".into(),
            session: "fslab-tb-1-vm0-a".into(),
        };
        let text = e.to_string();
        assert!(text.starts_with("the VM stopped during boot (exit status: 255): the guest kernel panicked"), "{text}");
        assert!(text.contains("--- last lines of the guest console ---\n[ 2.0] Kernel panic"), "{text}");
        assert!(!e.vm_alive());
        let handler = VmError {
            console_tail: "x".into(),
            ..VmError::new(Failure::Handler { kind: "run".into(), message: "boom".into() })
        };
        assert_eq!(handler.to_string(), "guest `run` request failed: boom");
        assert!(handler.vm_alive());
        assert_eq!(VmError::new(Failure::Interrupted).to_string(), "interrupted");
    }
}
