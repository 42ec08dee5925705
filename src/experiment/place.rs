//! Where a variant's runs happen: on the host (no `kernel` key), or in a
//! virtual machine booting the variant's own kernel (`kernel = "…"`, sized
//! and run as `vm = { … }` says).

use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::kernel::source::ParseContext;
use crate::kernel::KernelSource;
use crate::keys::Source;
use crate::testbed::{FsKind, Medium};
use crate::units::{Bytes, Seconds};
use crate::vm::Accel;

/// A variant's kernel, as the file names it (paths absolute), checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelSpec {
    pub source: KernelSource,
    /// The release the image's header (or the package's name) gives.
    pub release: String,
}

/// When a kernel variant's VM is booted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootPolicy {
    /// One VM per variant, booted for its first run and kept for the rest
    /// (each run still gets a fresh filesystem and, when cold, dropped
    /// caches); a kernel that fails to boot fails the variant's runs at once.
    #[default]
    PerVariant,
    /// A fresh VM for every run: nothing carries over from run to run.
    PerRun,
}

/// How a kernel variant's VM is sized and run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSpec {
    pub cpus: u32,
    pub memory_mib: u64,
    pub accel: Accel,
    pub boot: BootPolicy,
    /// From starting QEMU to the guest being ready.
    pub boot_timeout: Duration,
    /// Extra kernel command line words.
    pub cmdline: Vec<String>,
    /// Run the VM's first run once unrecorded before it (`vm.warmup`);
    /// None: when the VM runs under TCG and is kept for several runs.
    /// Measured (BENCHMARKS.md, issue 27): a fresh guest's first run
    /// counted 1-8% more instructions (a process exiting, unmapping, the
    /// allocator settling), an outlier in five runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<bool>,
    /// Let the guest's init run udev (`vm.udev`, off by default: see
    /// [`crate::vm::VmConfig::udev`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udev: bool,
}

impl VmSpec {
    /// Does a VM of this spec run a warm-up run ([`VmSpec::warmup`])?
    /// `emulated`: it came up under TCG.
    pub fn warms_up(&self, emulated: bool) -> bool {
        self.warmup.unwrap_or(emulated && self.boot == BootPolicy::PerVariant)
    }
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            cpus: 2,
            memory_mib: 2048,
            accel: Accel::Auto,
            boot: BootPolicy::PerVariant,
            boot_timeout: Duration::from_secs(300),
            cmdline: Vec::new(),
            warmup: None,
            udev: false,
        }
    }
}

/// `vm = { … }` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmKeys {
    cpus: Option<Spanned<u32>>,
    memory: Option<Spanned<Bytes>>,
    accel: Option<Spanned<String>>,
    boot: Option<Spanned<String>>,
    boot_timeout: Option<Spanned<Seconds>>,
    cmdline: Option<Spanned<Vec<String>>>,
    warmup: Option<bool>,
    udev: Option<bool>,
}

/// Most vCPUs and memory a guest may be given.
const MAX_CPUS: u32 = 256;
const MIN_MEMORY_MIB: u64 = 256;

/// Resolve `kernel` (any form of [`KernelSource`]) and `vm`.
/// Without a kernel the variant runs on the host and `vm` (often inherited
/// from `[defaults]`) does not apply.
pub fn resolve(
    src: &Source,
    kernel: Option<&Spanned<toml::Value>>,
    vm: Option<&Spanned<VmKeys>>,
    fs: &FsKind,
    kernel_cache: &std::path::Path,
) -> Result<(Option<KernelSpec>, Option<VmSpec>)> {
    let Some(kernel) = kernel else { return Ok((None, None)) };
    if fs.medium() == Medium::Directory {
        return Err(src.err(
            kernel.span(),
            "kernel",
            format!("cannot be used with fs = \"{fs}\": the guest builds its own testbed"),
        ));
    }
    let cx = ParseContext { src, span: kernel.span(), cache: kernel_cache };
    let source = KernelSource::parse(kernel.get_ref(), &cx)?;
    let release = source.release().to_string();
    Ok((Some(KernelSpec { source, release }), Some(resolve_vm(src, vm)?)))
}

fn resolve_vm(src: &Source, vm: Option<&Spanned<VmKeys>>) -> Result<VmSpec> {
    let mut spec = VmSpec::default();
    let Some(vm) = vm else { return Ok(spec) };
    let k = vm.get_ref();
    if let Some(c) = &k.cpus {
        if !(1..=MAX_CPUS).contains(c.get_ref()) {
            return Err(src.err(c.span(), "vm.cpus", format!("must be between 1 and {MAX_CPUS}")));
        }
        spec.cpus = *c.get_ref();
    }
    if let Some(m) = &k.memory {
        let mib = m.get_ref().0 >> 20;
        if mib < MIN_MEMORY_MIB {
            return Err(src.err(m.span(), "vm.memory", format!("must be at least {MIN_MEMORY_MIB}MiB")));
        }
        spec.memory_mib = mib;
    }
    if let Some(a) = &k.accel {
        spec.accel = Accel::parse(a.get_ref()).map_err(|e| src.err(a.span(), "vm.accel", e))?;
    }
    if let Some(b) = &k.boot {
        spec.boot = match b.get_ref().as_str() {
            "per-variant" => BootPolicy::PerVariant,
            "per-run" => BootPolicy::PerRun,
            _ => return Err(src.err(b.span(), "vm.boot", "must be `per-variant` or `per-run`")),
        };
    }
    if let Some(t) = &k.boot_timeout {
        if t.get_ref().0 < Duration::from_secs(5) {
            return Err(src.err(t.span(), "vm.boot_timeout", "must be at least 5s"));
        }
        spec.boot_timeout = t.get_ref().0;
    }
    if let Some(c) = &k.cmdline {
        if let Some(word) = c.get_ref().iter().find(|w| w.is_empty() || w.contains(char::is_whitespace)) {
            return Err(src.err(c.span(), "vm.cmdline", format!("{word:?} is not one kernel command line word")));
        }
        spec.cmdline = c.get_ref().clone();
    }
    spec.warmup = k.warmup;
    spec.udev = k.udev.unwrap_or(false);
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By default a VM warms up under TCG when it is kept for several runs;
    /// `vm.warmup` decides either way.
    #[test]
    fn a_vm_warms_up_under_tcg_unless_told() {
        let spec = VmSpec::default();
        assert!(spec.warms_up(true) && !spec.warms_up(false));
        let per_run = VmSpec { boot: BootPolicy::PerRun, ..VmSpec::default() };
        assert!(!per_run.warms_up(true), "a fresh VM per run carries nothing over to warm");
        let off = VmSpec { warmup: Some(false), ..VmSpec::default() };
        assert!(!off.warms_up(true));
        let on = VmSpec { warmup: Some(true), ..VmSpec::default() };
        assert!(on.warms_up(false));
    }

    /// udev is skipped in the guest unless `vm.udev = true`; a value that
    /// is not a boolean is an error naming the line.
    #[test]
    fn vm_udev_is_off_unless_set() {
        #[derive(Deserialize)]
        struct File {
            vm: Spanned<VmKeys>,
        }
        let vm = |text: &str| -> Result<VmSpec> {
            let file: File = toml::from_str(text)?;
            let src = Source { text, origin: "exp.toml", base_dir: std::path::Path::new("/") };
            resolve_vm(&src, Some(&file.vm))
        };
        assert!(!vm("vm = { cpus = 2 }").unwrap().udev);
        assert!(vm("vm = { udev = true }").unwrap().udev);
        assert!(vm("vm = { udev = \"yes\" }").is_err());
    }
}
