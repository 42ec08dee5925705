//! Kernels under test, booted in virtual machines.
//!
//! A [`VmSession`] boots a kernel ([`crate::kernel::KernelArtifacts`]) with
//! QEMU driven by virtme-ng: the host's root filesystem is the guest's,
//! shared read-only over virtiofs, and the guest's only command is the same
//! `fslab` binary in agent mode ([`agent`]). The host then sends requests
//! and reads responses through one shared exchange directory
//! ([`protocol`]), as many as it likes, and finally shuts the VM down. The
//! testbed disk the guest measures is a virtio-blk disk backed by an image
//! file the session creates on the host (`cache=none,aio=native`: no host
//! page cache), never a file on the shared root.
//!
//! * [`tools`]: finding virtme-ng, QEMU, the Rust virtiofsd, kmod, …
//! * [`icount`]: guest instructions in a run's measured part (TCG plugin).
//! * [`profile`]: those instructions by kernel function (a run's profile).
//! * [`kvm`]: does KVM really work for this guest (a time-bounded boot)?
//! * [`session`]: boot, request, shutdown, teardown on every path out.
//! * [`agent`], [`kinds`]: the guest side and the request kinds it answers.
//! * [`leftovers`]: VM processes a SIGKILLed fslab left, for `fslab cleanup`.
//! * [`udev`]: the guest's init skips udev unless asked (`vm.udev`).
//!
//! Everything a session creates carries fslab's marker
//! (`fslab-tb-<pid>-vm<n>-<nanos>`): its directory under the work directory
//! (exchange, disk image, console log, virtme-ng's temporary files and so
//! virtiofsd's sockets), the QEMU process name, and the cgroup that holds
//! virtme-run, QEMU and virtiofsd.

pub mod agent;
pub mod console;
pub mod icount;
pub mod kinds;
pub mod kvm;
pub mod leftovers;
pub mod profile;
pub mod protocol;
pub mod session;
pub mod tools;
pub mod udev;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

pub use kinds::probe::GuestFacts;
pub use session::{BootPhases, Failure, VmError, VmSession, VmSummary};

/// Stored and printed with every result of a session that ran under TCG.
pub const TCG_WARNING: &str = "timings are emulated: the guest ran under QEMU's software emulation (TCG, no KVM), \
     which is many times slower than hardware and changes the relative cost of CPU, memory and I/O; compare it only \
     with variants that ran the same way";

/// How the guest's CPU is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM when the probe shows it works for this guest, else TCG (with a warning).
    Auto,
    /// KVM or fail.
    Kvm,
    /// Software emulation, no probe.
    Tcg,
}

impl Accel {
    pub fn parse(text: &str) -> Result<Accel> {
        match text {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            other => bail!("accelerator `{other}` is not one of auto, kvm, tcg"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How to boot a VM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmConfig {
    pub cpus: u32,
    pub memory_mib: u64,
    pub accel: Accel,
    /// Host directories the guest must see as they are on the host, read-only.
    /// Needed for anything under a directory virtme-ng hides in the guest
    /// ([`HIDDEN_IN_GUEST`], e.g. fslab's default work dir under /var/tmp);
    /// the agent binary's and the kernel's directories are added by the
    /// session itself. None of them may contain the session directory.
    pub ro_dirs: Vec<PathBuf>,
    /// Size of the testbed disk the session creates, if any.
    pub disk_bytes: Option<u64>,
    /// Modules the agent loads before it reports ready (`virtio_blk` is
    /// added when there is a disk).
    pub modules: Vec<String>,
    /// From starting QEMU to the agent's `ready`.
    pub boot_timeout: Duration,
    /// Default for each request (see [`VmSession::request_with_timeout`]).
    pub request_timeout: Duration,
    /// Extra kernel command line words.
    pub kernel_args: Vec<String>,
    /// The fslab binary the guest runs; None: this process's own executable.
    pub agent: Option<PathBuf>,
    /// Serve the testbed disk through this media model: the disk's image is
    /// served on the host by `fslab media-serve` and QEMU opens the served
    /// file, so every guest request reaches the model.
    pub disk_media: Option<crate::media::DeviceSpec>,
    /// When the guest's instructions are counted (TCG with the plugin):
    /// also attribute them to kernel functions, a [`profile::RunProfile`]
    /// per run. False keeps the plain count alone.
    #[serde(default = "attribute_by_default")]
    pub profile: bool,
    /// The object directory of a kernel fslab built: profiles group its
    /// functions by source directory (when it holds this very build).
    #[serde(default)]
    pub objects: Option<PathBuf>,
    /// Let virtme-ng's init run udev in the guest (coldplug, then wait for
    /// it to settle). Off by default: fslab's agent loads the modules it
    /// needs and finds its disk by serial, and the settle was 5-7 s of an
    /// 11-15 s boot under TCG (BENCHMARKS.md, issue 27).
    #[serde(default)]
    pub udev: bool,
}

fn attribute_by_default() -> bool {
    true
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            cpus: 2,
            memory_mib: 2048,
            accel: Accel::Auto,
            ro_dirs: Vec::new(),
            disk_bytes: None,
            modules: Vec::new(),
            boot_timeout: Duration::from_secs(180),
            request_timeout: Duration::from_secs(600),
            kernel_args: Vec::new(),
            agent: None,
            disk_media: None,
            udev: false,
            profile: true,
            objects: None,
        }
    }
}

/// Directories virtme-ng-init covers with an empty tmpfs in the guest (or
/// that are the guest's own), so host files under them are invisible there
/// unless exported as a read-only directory at the same path.
pub const HIDDEN_IN_GUEST: &[&str] =
    &["/var/tmp", "/var/cache", "/var/log", "/var/lib/private", "/var/lib/apt", "/run", "/dev", "/proc", "/sys"];

/// Is `path` invisible in the guest unless exported?
pub fn hidden_in_guest(path: &Path) -> bool {
    HIDDEN_IN_GUEST.iter().any(|h| path.starts_with(h))
}
