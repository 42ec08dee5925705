//! The guest side: `fslab guest-agent --exchange DIR`, started by virtme-ng
//! as the guest's command. It loads the modules the session asks for,
//! waits for the testbed disk, says it is ready, then answers requests
//! (see [`protocol`](super::protocol)) until a `shutdown` request. When it
//! returns, virtme-ng powers the VM off.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::kinds::{self, probe, Handler};
use super::profile::SymbolExport;
use super::protocol::{self, Ready, Reply, Request, Response, SessionInfo, READY_FILE, SESSION_FILE, SHUTDOWN};
use crate::sys::modules::ensure_all_loaded;

/// How often the agent looks for the next request right after answering
/// one (requests often come in bursts), and after [`BUSY_WINDOW`] of quiet.
/// Each look is a virtiofs lookup, which under TCG is not free: polling
/// every 10 ms kept an idle 2-CPU guest at ~25% of a host core, every
/// second at ~1.5%; a VM kept for later runs must not load the host while
/// another variant measures.
const POLL_BUSY: Duration = Duration::from_millis(10);
const POLL_IDLE: Duration = Duration::from_millis(500);
const BUSY_WINDOW: Duration = Duration::from_secs(2);
/// How long the testbed disk may take to appear after `virtio_blk` loads.
const DISK_WAIT: Duration = Duration::from_secs(30);

/// Serve `exchange` until shutdown, answering the built-in kinds and
/// `extra` (kinds of layers above the VM, such as the runner's `run`). An
/// error means setup failed (and was reported in `ready.json`) or the
/// exchange broke.
pub fn run(exchange: &Path, extra: &[(&str, Handler)]) -> Result<()> {
    let info: SessionInfo = protocol::read_if_present(&exchange.join(SESSION_FILE))?
        .with_context(|| format!("{} has no {SESSION_FILE}", exchange.display()))?;
    if let Some(dir) = &info.init_path_shim {
        super::udev::leave_path(dir);
    }
    let agent_started_s = uptime_s();
    let ready = match setup(&info) {
        Ok(disk) => Ready::Ok {
            release: crate::sys::kernel_release(),
            disk,
            init_exec_s: init_exec_s(),
            agent_exec_s: process_started_s("self"),
            agent_started_s,
            ready_s: uptime_s(),
        },
        Err(e) => Ready::Error(format!("{e:#}")),
    };
    protocol::write_atomic(&exchange.join(READY_FILE), &ready)?;
    if let Ready::Error(e) = ready {
        bail!("guest setup failed: {e}");
    }
    // After ready, so the boot is not longer for it; before the first
    // request is read, so the host has the symbols for the first profile.
    let mut symbols = SymbolExport::new(info.symbols);
    symbols.refresh(exchange)?;
    let mut seq = 1;
    let mut host_checked = Instant::now();
    let mut last_answer = Instant::now();
    loop {
        let path = protocol::request_path(exchange, seq);
        let Some(request) = protocol::read_if_present::<Request>(&path)? else {
            // The host removes the exchange when it gives up on this VM.
            if host_checked.elapsed() > Duration::from_secs(1) {
                if !exchange.join(SESSION_FILE).exists() {
                    bail!("the host removed {}; stopping", exchange.display());
                }
                host_checked = Instant::now();
            }
            sleep(if last_answer.elapsed() < BUSY_WINDOW { POLL_BUSY } else { POLL_IDLE });
            continue;
        };
        let _ = fs::remove_file(&path);
        let done = request.kind == SHUTDOWN;
        let reply = if done { Reply::Ok(Value::Null) } else { answer(&request, extra) };
        // A request may have loaded modules (a mount): their symbols go
        // out before the answer, so the host's profile of it has them.
        if !done {
            symbols.refresh(exchange)?;
        }
        protocol::write_atomic(&protocol::response_path(exchange, seq), &Response { seq, reply })?;
        if done {
            return Ok(());
        }
        seq += 1;
        last_answer = Instant::now();
    }
}

/// Seconds since this kernel's clock started (`/proc/uptime`); 0 unknown.
pub(super) fn uptime_s() -> f64 {
    let text = fs::read_to_string("/proc/uptime").unwrap_or_default();
    text.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0)
}

/// When the kernel started its first userspace program, on the same clock:
/// its `Run … as init process` line in the kernel log (`/dev/kmsg`, whose
/// records carry their time; pid 1's own start time is the kernel thread's,
/// long before). 0 unknown.
fn init_exec_s() -> f64 {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut kmsg) = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg") else {
        return 0.0;
    };
    // One record per read; EAGAIN at the end of the buffer.
    let mut record = vec![0u8; 8192];
    while let Ok(n) = kmsg.read(&mut record) {
        let line = String::from_utf8_lossy(&record[..n]);
        let Some((head, message)) = line.split_once(';') else { continue };
        if message.starts_with("Run ") && message.contains(" as init process") {
            let usec = head.split(',').nth(2).and_then(|t| t.parse::<u64>().ok());
            return usec.map_or(0.0, |us| us as f64 / 1e6);
        }
    }
    0.0
}

/// When process `pid` started (`/proc/PID/stat`), on the same clock; 0 unknown.
pub(super) fn process_started_s(pid: &str) -> f64 {
    use procfs_core::FromRead;
    let stat = fs::read(format!("/proc/{pid}/stat")).ok();
    let stat = stat.and_then(|s| procfs_core::process::Stat::from_read(s.as_slice()).ok());
    // SAFETY: sysconf has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    stat.filter(|_| ticks > 0).map_or(0.0, |s| s.starttime as f64 / ticks as f64)
}

/// Load the modules, wait for the disk; the disk's device path.
fn setup(info: &SessionInfo) -> Result<Option<String>> {
    // A kernel without loadable modules (fslab's `minimal` builds) has built
    // in all it has, and a built-in driver without parameters is not in
    // /sys/module: modprobe would fail. A missing filesystem fails at mount.
    let modular = std::path::Path::new("/proc/modules").exists();
    if modular {
        // One modprobe for all: each process start costs under emulation.
        let mut modules = info.modules.clone();
        if info.disk_serial.is_some() {
            modules.push("virtio_blk".to_string());
        }
        ensure_all_loaded(&modules)?;
    }
    let Some(serial) = &info.disk_serial else { return Ok(None) };
    let started = Instant::now();
    loop {
        if let Some(disk) = probe::disk_by_serial(serial) {
            return Ok(Some(disk.path));
        }
        if started.elapsed() > DISK_WAIT {
            bail!("no block device with serial {serial} appeared within {} s", DISK_WAIT.as_secs());
        }
        sleep(Duration::from_millis(50));
    }
}

/// Run the handler of `request.kind`; a panic in it is an error reply, not
/// a dead agent.
fn answer(request: &Request, extra: &[(&str, Handler)]) -> Reply {
    let found =
        kinds::handler(&request.kind).or_else(|| extra.iter().find(|(k, _)| *k == request.kind).map(|(_, h)| *h));
    let Some(handler) = found else {
        let mut known = kinds::names();
        known.extend(extra.iter().map(|(k, _)| *k));
        return Reply::Error(format!(
            "the guest agent knows no request kind `{}` (known: {}, {SHUTDOWN})",
            request.kind,
            known.join(", ")
        ));
    };
    let body = request.body.clone();
    match catch_unwind(AssertUnwindSafe(|| handler(body))) {
        Ok(Ok(value)) => Reply::Ok(value),
        Ok(Err(e)) => Reply::Error(format!("{e:#}")),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Reply::Error(format!("the `{}` handler panicked: {message}", request.kind))
        }
    }
}
