//! Hidden subcommands of the VM path: `fslab guest-agent` (what a VM
//! session runs inside the guest) and `fslab vm-probe` (boot a kernel,
//! print what the guest looks like, measure boot and round trip; for
//! trying a kernel by hand, the VM tests and the benchmarks).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use super::{offer, FormatArgs};
use fslab::experiment::DEFAULT_WORKDIR;
use fslab::kernel::{self, KernelSource};
use fslab::output::{self, diagnostic};
use fslab::report::documents::vm::{QemuMemory, VmProbe};
use fslab::report::{render, Format};
use fslab::units::{Bytes, Seconds};
use fslab::vm::{self, Accel, Failure, VmConfig, VmError, VmSession};

#[derive(Subcommand, Debug)]
pub enum GuestCommand {
    /// Serve a VM session's requests inside the guest (started by the session).
    #[command(hide = true)]
    GuestAgent(AgentArgs),
    /// Boot a kernel in a VM, probe the guest, print what it found (JSON by default), shut down.
    #[command(hide = true)]
    VmProbe(Box<ProbeArgs>),
}

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The session's exchange directory (same path on host and guest).
    #[arg(long)]
    exchange: PathBuf,
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Json, Format::Text]).default_value("json")))]
pub struct ProbeArgs {
    /// Kernel image, build tree, linux-image-*.deb or a Debian archive kernel (debian:6.1-cloud).
    kernel: PathBuf,
    /// Modules directory for a kernel image.
    #[arg(long)]
    modules: Option<PathBuf>,
    /// Config file for a kernel image.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Work directory for the session (disk image, exchange, console).
    #[arg(long, default_value = DEFAULT_WORKDIR)]
    workdir: PathBuf,
    #[command(flatten)]
    kernel_cache: super::KernelCacheArg,
    /// The kernel cache (the spelling before --kernel-cache; still accepted).
    #[arg(long = "cache", value_name = "DIR", hide = true)]
    old_cache: Option<PathBuf>,
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    #[arg(long, default_value = "2GiB", value_parser = Bytes::parse)]
    memory: Bytes,
    /// auto, kvm or tcg.
    #[arg(long, default_value = "auto", value_parser = Accel::parse)]
    accel: Accel,
    /// Attach a testbed disk of this size.
    #[arg(long, value_parser = Bytes::parse)]
    disk: Option<Bytes>,
    /// Kernel module the guest loads before it is ready (repeatable).
    #[arg(long = "load")]
    modules_to_load: Vec<String>,
    /// Extra kernel command line word (repeatable).
    #[arg(long = "append")]
    kernel_args: Vec<String>,
    /// Read-only host directory for the guest (repeatable).
    #[arg(long = "ro-dir")]
    ro_dirs: Vec<PathBuf>,
    /// Let the guest's init run udev's coldplug and settle (fslab skips it by default).
    #[arg(long)]
    udev: bool,
    #[arg(long, default_value = "180s", value_parser = Seconds::parse)]
    boot_timeout: Seconds,
    #[arg(long, default_value = "600s", value_parser = Seconds::parse)]
    request_timeout: Seconds,
    /// Round trips of the `ping` request to time after the probe.
    #[arg(long, default_value_t = 0)]
    pings: usize,
    /// Keep the VM up this long after probing (Ctrl-C ends it early).
    #[arg(long, value_parser = Seconds::parse)]
    hold: Option<Seconds>,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn dispatch(command: GuestCommand) -> Result<ExitCode> {
    match command {
        GuestCommand::GuestAgent(args) => {
            vm::agent::run(&args.exchange, &[(fslab::runner::guest::RUN, fslab::runner::guest::handle)])?;
            Ok(ExitCode::SUCCESS)
        }
        GuestCommand::VmProbe(args) => vm_probe(*args),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    Ok(if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) })
}

fn vm_probe(args: ProbeArgs) -> Result<ExitCode> {
    anyhow::ensure!(nix::unistd::geteuid().is_root(), "{}", fslab::runner::NEEDS_ROOT);
    fslab::sys::signals::install()?;
    let flag = args.kernel_cache.kernel_cache.clone().or(args.old_cache.clone());
    let cache = absolute(&kernel::cache_dir(flag.as_deref(), &args.workdir))?;
    let kernel_arg = args.kernel.to_string_lossy().into_owned();
    // As a file would name it: the path (or reference), with its modules and config.
    let value = if args.modules.is_none() && args.config.is_none() {
        toml::Value::String(kernel_arg)
    } else {
        let mut t = toml::Table::new();
        t.insert("image".into(), toml::Value::String(kernel_arg));
        for (key, path) in [("modules", &args.modules), ("config", &args.config)] {
            if let Some(p) = path {
                t.insert(key.into(), toml::Value::String(p.to_string_lossy().into_owned()));
            }
        }
        toml::Value::Table(t)
    };
    let source = KernelSource::from_argument(&value, &cache)?;
    let kernel = kernel::resolve(&source, &cache)?;
    let config = VmConfig {
        cpus: args.cpus,
        memory_mib: args.memory.0 >> 20,
        accel: args.accel,
        ro_dirs: args.ro_dirs.iter().map(|d| absolute(d)).collect::<Result<_>>()?,
        disk_bytes: args.disk.map(|b| b.0),
        modules: args.modules_to_load.clone(),
        boot_timeout: args.boot_timeout.0,
        request_timeout: args.request_timeout.0,
        kernel_args: args.kernel_args.clone(),
        agent: None,
        disk_media: None,
        udev: args.udev,
        profile: true,
        objects: None,
    };
    diagnostic(&format!("vm-probe: booting {} ({})", kernel.release, kernel.source));
    match probe_session(&kernel, &config, &absolute(&args.workdir)?, &args) {
        Ok(report) => {
            output::print(&render(args.format.chosen(), &report)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.downcast_ref::<VmError>().is_some_and(|v| v.failure == Failure::Interrupted) => {
            diagnostic("vm-probe: interrupted; the VM was torn down");
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(e),
    }
}

fn probe_session(
    kernel: &kernel::KernelArtifacts,
    config: &VmConfig,
    workdir: &Path,
    args: &ProbeArgs,
) -> Result<VmProbe> {
    let mut session = VmSession::boot(kernel, config, workdir)?;
    diagnostic(&format!(
        "vm-probe: ready after {:.1} s ({}), session {}",
        session.boot_time().as_secs_f64(),
        session.accelerator().as_str(),
        session.name()
    ));
    for warning in session.warnings() {
        diagnostic(&format!("vm-probe: warning: {warning}"));
    }
    let started = Instant::now();
    let facts = session.probe()?;
    let probe_s = started.elapsed().as_secs_f64();
    let mut pings = Vec::new();
    for i in 0..args.pings {
        let started = Instant::now();
        let back = session.request("ping", serde_json::json!({ "n": i }))?;
        anyhow::ensure!(back == serde_json::json!({ "n": i }), "ping {i} came back as {back}");
        pings.push(started.elapsed().as_secs_f64());
    }
    let qemu_memory = qemu_memory(session.name());
    if let Some(hold) = &args.hold {
        diagnostic(&format!("vm-probe: holding for {} s", hold.0.as_secs_f64()));
        let until = Instant::now() + hold.0;
        while Instant::now() < until {
            if fslab::sys::signals::cancelled() {
                drop(session);
                return Err(VmError::new(Failure::Interrupted).into());
            }
            sleep(Duration::from_millis(50));
        }
    }
    let summary = session.summary();
    let boot_phases = session.boot_phases().cloned();
    let shutdown_started = Instant::now();
    session.shutdown().context("shutting the VM down")?;
    Ok(VmProbe {
        kernel: kernel.clone(),
        vm: summary,
        boot_phases,
        facts,
        probe_s,
        ping_s: pings,
        shutdown_s: shutdown_started.elapsed().as_secs_f64(),
        qemu_memory_kib: qemu_memory,
    })
}

/// VmRSS and RssShmem (guest RAM is a shared memfd) of the session's QEMU, in KiB.
fn qemu_memory(name: &str) -> Option<QemuMemory> {
    let qemu = vm::leftovers::vm_processes()
        .into_iter()
        .find(|p| p.cmdline.contains(name) && p.cmdline.contains("qemu-system") && !p.cmdline.contains("kvm-probe"))?;
    use procfs_core::FromRead;
    let status = std::fs::read(format!("/proc/{}/status", qemu.pid))
        .ok()
        .and_then(|text| procfs_core::process::Status::from_read(text.as_slice()).ok());
    let field = |pick: fn(&procfs_core::process::Status) -> Option<u64>| status.as_ref().and_then(pick);
    Some(QemuMemory { rss: field(|s| s.vmrss), rss_shmem: field(|s| s.rssshmem), rss_anon: field(|s| s.rssanon) })
}
