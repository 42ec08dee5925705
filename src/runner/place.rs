//! Where each run happens: on the host ([`single::execute`]), or — for a
//! variant with a `kernel` — inside a VM booting that kernel, driven over
//! the guest agent's `run` request ([`super::guest`]). The runner's loop
//! (interleaving, adaptive rounds, resume, the store) is the same for both.
//!
//! With the default boot policy a variant's VM is booted for its first
//! run and kept for the rest (each run still formats a fresh filesystem
//! on the VM's testbed disk); a VM that dies is booted again for the next
//! run, and a kernel that fails to boot fails the variant's later runs at
//! once with the same error instead of waiting for the boot timeout again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use super::guest::{GuestRun, RUN};
use super::single::{self, RunEnv};
use super::{Observer, RunOptions};
use crate::experiment::{BootPolicy, Experiment, PlannedRun, VariantConfig};
use crate::inspect::{KernelConfig, Rule};
use crate::kernel::{self, KernelArtifacts};
use crate::metric::Metric;
use crate::record::{RunPlace, RunRecord, RunStatus};
use crate::stored::{StoredFinding, VariantKernel};
use crate::vm::{self, VmConfig, VmSession};
use crate::workload::Workload;

/// Added to a workload's timeout for a VM run: provisioning, packing
/// images and the round trip, which under emulation are slow.
const VM_RUN_SLACK: Duration = Duration::from_secs(600);

/// The least time from a VM's warm-up run's start to its first measured
/// run's (see where it is used).
const WARMUP_SETTLE: Duration = Duration::from_secs(5);

/// The kernel variants' resolved kernels and their VMs.
pub struct KernelVms {
    kernels: HashMap<usize, KernelArtifacts>,
    vms: HashMap<usize, VariantVm>,
}

enum VariantVm {
    Up {
        session: Box<VmSession>,
        /// Boot time, reported with the first run the VM carries out.
        boot_s: Option<f64>,
        /// Why it took a second boot, reported with that first run too.
        boot_retry: Option<String>,
        /// Its first run is still to be run once unrecorded before it
        /// ([`crate::experiment::VmSpec::warms_up`]).
        warm_up: bool,
    },
    /// The kernel did not boot: the error, for its later runs.
    Broken(String),
}

/// `fslab run` checks this before anything else when a variant has a kernel.
pub fn check_vm_tools(exp: &Experiment) -> Result<()> {
    if exp.variants.iter().all(|v| v.kernel.is_none()) {
        return Ok(());
    }
    vm::tools::discover().map(|_| ()).map_err(|missing| {
        crate::exit::environment(anyhow!(
            "variants with a `kernel` run in VMs, and this machine lacks what that needs:\n{missing}"
        ))
    })
}

impl KernelVms {
    /// Resolve every kernel variant's kernel (a package is unpacked into
    /// the cache once): a kernel that cannot be used fails here, before
    /// any run starts.
    pub fn prepare(exp: &Experiment) -> Result<KernelVms> {
        let mut kernels = HashMap::new();
        let cache = kernel_cache(exp);
        // Said up front: a cold build can hold the first run back for most of an hour.
        for (i, outlook) in crate::experiment::run_plan::kernel_builds(exp) {
            let name = &exp.variants[i].name;
            crate::output::diagnostic(&format!("fslab: the kernel of variant `{name}`: {}", outlook.describe()));
        }
        let specs = exp.variants.iter().enumerate().filter_map(|(i, v)| v.kernel.as_ref().map(|k| (i, &k.source)));
        for i in kernel::resolve_order(specs) {
            let v = &exp.variants[i];
            let spec = v.kernel.as_ref().expect("resolve_order yields kernel variants");
            let artifacts =
                kernel::resolve(&spec.source, &cache).with_context(|| format!("the kernel of variant `{}`", v.name))?;
            kernels.insert(i, artifacts);
        }
        Ok(KernelVms { kernels, vms: HashMap::new() })
    }

    /// Per variant: where it runs and with which kernel (and its config
    /// text and the doctor's findings for it), for the experiment's
    /// environment, so `kconfig diff` and the doctor can speak per variant
    /// from the store alone. Each config file is read once.
    pub fn environment(&self, exp: &Experiment) -> BTreeMap<String, VariantKernel> {
        let host_release = crate::sys::kernel_release();
        let host_config = crate::inspect::environment::kernel_config_path(&host_release);
        let host_text = host_config.as_deref().and_then(|p| KernelConfig::read_text(p).ok());
        let rules = crate::inspect::builtin_rules().ok();
        let mut out = BTreeMap::new();
        for (i, v) in exp.variants.iter().enumerate() {
            let mut entry = match self.kernels.get(&i) {
                Some(k) => VariantKernel {
                    place: "vm".to_string(),
                    release: k.release.clone(),
                    source: Some(k.source.clone()),
                    config_source: k.config.as_ref().map(|p| p.display().to_string()),
                    config: k.config.as_deref().and_then(|p| KernelConfig::read_text(p).ok()),
                    vm: v.vm.as_ref().and_then(|spec| serde_json::to_value(spec).ok()),
                    origin: v.kernel.as_ref().map(|spec| spec.source.clone()),
                    image: Some(k.image.clone()),
                    ..VariantKernel::default()
                },
                None => VariantKernel {
                    place: "host".to_string(),
                    release: host_release.clone(),
                    config_source: host_config.as_ref().map(|p| p.display().to_string()),
                    config: host_text.clone(),
                    ..VariantKernel::default()
                },
            };
            if let (Some(text), Some(rules)) = (&entry.config, &rules) {
                entry.findings = variant_findings(v, &entry.release, text, entry.config_source.as_deref(), rules);
            }
            out.insert(v.name.clone(), entry);
        }
        out
    }

    /// Run `planned` where its variant runs.
    pub fn execute(
        &mut self,
        exp: &Experiment,
        planned: &PlannedRun,
        workload: &mut dyn Workload,
        opts: &RunOptions,
        observer: &mut dyn Observer,
    ) -> RunRecord {
        let variant = &exp.variants[planned.variant];
        let config = &exp.workloads[planned.workload];
        if variant.kernel.is_none() {
            let env = RunEnv {
                workdir: exp.workdir.clone(),
                cache_dir: exp.cache_dir(),
                sample_interval: exp.sample_interval,
                device: opts.device.as_ref().map(|d| d.path.clone()),
                media_relay: None,
                image: None,
            };
            return single::execute(&env, planned, variant, config, workload);
        }
        let record = self.in_vm(exp, planned, workload, observer);
        if variant.vm.as_ref().is_some_and(|v| v.boot == BootPolicy::PerRun) {
            self.shut_down(planned.variant, observer);
        }
        record
    }

    fn in_vm(
        &mut self,
        exp: &Experiment,
        planned: &PlannedRun,
        workload: &mut dyn Workload,
        observer: &mut dyn Observer,
    ) -> RunRecord {
        let variant = &exp.variants[planned.variant];
        let config = &exp.workloads[planned.workload];
        let failed = |e: anyhow::Error| single::failed(planned, variant, config, &e);
        if let Some(VariantVm::Broken(why)) = self.vms.get(&planned.variant) {
            return failed(anyhow!("the kernel of variant `{}` did not boot earlier in this run: {why}", variant.name));
        }
        if !matches!(self.vms.get(&planned.variant), Some(VariantVm::Up { .. })) {
            match self.boot_twice(exp, planned.variant, observer) {
                Ok((session, boot_retry)) => {
                    let boot_s = Some(session.boot_time().as_secs_f64());
                    let emulated = session.accelerator() == vm::Accel::Tcg;
                    let warm_up = variant.vm.as_ref().is_some_and(|spec| spec.warms_up(emulated));
                    let session = Box::new(session);
                    self.vms.insert(planned.variant, VariantVm::Up { session, boot_s, boot_retry, warm_up });
                }
                Err(e) => {
                    let record = failed(e);
                    let why = record.error.clone().unwrap_or_default();
                    // An interrupted boot says nothing about the kernel.
                    if !crate::sys::signals::cancelled() {
                        self.vms.insert(planned.variant, VariantVm::Broken(why));
                    }
                    return record;
                }
            }
        }
        let Some(VariantVm::Up { session, boot_s, boot_retry, warm_up }) = self.vms.get_mut(&planned.variant) else {
            unreachable!("booted above")
        };
        // A read-only image is packed once on the host and written onto the
        // VM's testbed disk (unless it is there already), not packed in the guest.
        let image = match variant.testbed.fs.is_read_only_image() {
            false => None,
            true => match image_for_guest(exp, variant, workload, session) {
                Ok(image) => Some(image),
                Err(e) => return failed(e.context(format!("preparing the image of variant `{}`", variant.name))),
            },
        };
        let request = GuestRun {
            planned: *planned,
            image,
            variant: variant.clone(),
            workload: config.clone(),
            seed: exp.seed,
            cache_dir: exp.cache_dir(),
            sample_interval: exp.sample_interval,
            device: session.disk().map(|d| PathBuf::from(&d.device)),
            media_relay: session.media_relay().map(Path::to_path_buf),
        };
        let timeout = config.timeout.unwrap_or(single::DEFAULT_TIMEOUT) + VM_RUN_SLACK;
        let run = |session: &mut VmSession| {
            serde_json::to_value(&request)
                .map_err(anyhow::Error::from)
                .and_then(|body| session.request_with_timeout(RUN, body, timeout))
                .and_then(|reply| serde_json::from_value::<RunRecord>(reply).context("the guest's run record"))
        };
        // The fresh guest's first run does work the later ones do not:
        // run it once unrecorded, its counts dropped. A warm-up that fails
        // leaves the measured run to fail (or not) on its own, with a note.
        let mut warmup = None;
        if std::mem::take(warm_up) {
            observer.message(&format!("variant `{}`: a warm-up run, not recorded", variant.name));
            let started = std::time::Instant::now();
            let outcome = run(session);
            let _ = (session.take_instructions(), session.take_profile());
            let failure = match outcome {
                Ok(r) if r.status == Some(RunStatus::Ok) => None,
                Ok(r) => Some(r.error.unwrap_or_else(|| "no error given".to_string())),
                Err(e) => Some(format!("{e:#}")),
            };
            // The fresh guest also settles by the clock, not by runs: a
            // measured run 1.6-2 s after the warm-up's start at times
            // counted a process's exit (+4 M user instructions and its
            // unmapping, +8%); none did after 3.5 s or more (BENCHMARKS.md).
            while started.elapsed() < WARMUP_SETTLE && !crate::sys::signals::cancelled() {
                std::thread::sleep(Duration::from_millis(100));
            }
            warmup = Some((started.elapsed().as_secs_f64(), failure));
        }
        let answer = run(session);

        let summary = session.summary();
        let instructions = session.take_instructions();
        let profile = session.take_profile();
        let mut record = match answer {
            Ok(record) => record,
            Err(e) => failed(e.context(format!("running in the VM of variant `{}`", variant.name))),
        };
        if record.status == Some(RunStatus::Ok) {
            let work = store_profile(&mut record, profile, instructions.as_ref());
            record.metrics.extend(instructions);
            record.metrics.extend(work);
        }
        if let Some((_, Some(why))) = &warmup {
            record.notes.push(format!("the VM's warm-up run before this one failed: {why}"));
        }
        let guest_release = record.place.as_ref().map(|p| p.kernel_release.clone());
        record.place = Some(RunPlace {
            kind: "vm".to_string(),
            kernel_release: guest_release.filter(|r| !r.is_empty()).unwrap_or(summary.guest_release),
            accelerator: Some(summary.accelerator),
            cpus: Some(summary.cpus),
            memory_mib: Some(summary.memory_mib),
            cmdline: variant.vm.as_ref().map(|spec| spec.cmdline.clone()).unwrap_or_default(),
            boot_s: boot_s.take(),
            warmup_s: warmup.map(|(seconds, _)| seconds),
            warnings: boot_retry.take().into_iter().chain(summary.warnings).collect(),
        });
        if !session.is_alive() {
            // Died during the run (panic, OOM, timeout): the next run boots a new one.
            self.vms.remove(&planned.variant);
        }
        record
    }

    /// Boot the variant's VM, and once more if that fails (unless the
    /// experiment was interrupted): under emulation a guest can crash in
    /// its first second where hardware would not (a 6.12 guest once died in
    /// `hrtimer_start_range_ns` on an instruction TCG split), and one such
    /// crash would otherwise fail every run of the variant. A kernel that
    /// cannot boot fails twice and is reported as before; a second boot
    /// that came up carries the first failure as a warning of its run.
    fn boot_twice(
        &self,
        exp: &Experiment,
        index: usize,
        observer: &mut dyn Observer,
    ) -> Result<(VmSession, Option<String>)> {
        let first = match self.boot(exp, index, observer) {
            Ok(session) => return Ok((session, None)),
            Err(e) if crate::sys::signals::cancelled() => return Err(e),
            Err(e) => e,
        };
        let name = &exp.variants[index].name;
        let first_line = format!("{first:#}").lines().next().unwrap_or_default().to_string();
        observer.message(&format!("warning: variant `{name}`: {first_line}; booting it once more"));
        match self.boot(exp, index, observer) {
            Ok(session) => Ok((session, Some(format!("the first boot failed, a second one came up: {first_line}")))),
            Err(second) => Err(second.context("booted twice, and both boots failed (the second's error follows)")),
        }
    }

    fn boot(&self, exp: &Experiment, index: usize, observer: &mut dyn Observer) -> Result<VmSession> {
        let variant = &exp.variants[index];
        let kernel = self.kernels.get(&index).context("the variant's kernel was not resolved")?;
        let spec = variant.vm.clone().unwrap_or_default();
        let mut config = vm_config(exp, variant, &spec);
        // A kernel fslab built: its profiles group functions by source directory.
        config.objects = kernel.build.as_ref().map(|b| b.object_dir(&kernel_cache(exp)));
        // Shown read-only in the guest, so it must exist (a workload without inputs never made it).
        crate::sys::trusted::ensure_dir(&exp.cache_dir()).context("the input cache")?;
        observer.message(&format!(
            "booting kernel {} for variant `{}` ({} CPUs, {} MiB, accel {})",
            kernel.release,
            variant.name,
            spec.cpus,
            spec.memory_mib,
            spec.accel.as_str()
        ));
        let session = VmSession::boot(kernel, &config, &exp.workdir)
            .with_context(|| format!("booting kernel {} for variant `{}`", kernel.release, variant.name))?;
        observer.message(&format!(
            "variant `{}`: guest {} up in {:.1} s ({})",
            variant.name,
            session.summary().guest_release,
            session.boot_time().as_secs_f64(),
            session.accelerator().as_str()
        ));
        for w in session.warnings() {
            observer.message(&format!("warning: variant `{}`: {w}", variant.name));
        }
        Ok(session)
    }

    fn shut_down(&mut self, index: usize, observer: &mut dyn Observer) {
        if let Some(VariantVm::Up { session, .. }) = self.vms.remove(&index) {
            if let Err(e) = (*session).shutdown() {
                observer.message(&format!("warning: shutting down a VM: {e:#}"));
            }
        }
    }

    /// Shut every VM down (dropping a session kills it; this asks first).
    pub fn shut_down_all(&mut self, observer: &mut dyn Observer) {
        let up: Vec<usize> = self.vms.keys().copied().collect();
        for index in up {
            self.shut_down(index, observer);
        }
    }
}

/// The cached image of `variant`'s testbed with `workload`'s content, put
/// onto `session`'s testbed disk by the host when it can write that disk
/// (the guest then checks the bytes the first time it sees them).
fn image_for_guest(
    exp: &Experiment,
    variant: &VariantConfig,
    workload: &mut dyn Workload,
    session: &mut VmSession,
) -> Result<crate::testbed::image::PreparedImage> {
    let mut image = single::prepare_image(&variant.testbed, &exp.cache_dir(), workload)?;
    if let Some(written_now) = session.put_image(&image.path, &image.key)? {
        image.on_device = true;
        if written_now {
            image.verify = Some(crate::testbed::image::check_sha256(&image.path, image.built.image_bytes)?);
        }
    }
    Ok(image)
}

/// Where unpacked kernels are kept ([`kernel::cache_dir`]). Entries are
/// named by the package's content hash, so one cache can serve every
/// experiment (a package unpacks to hundreds of MB).
fn kernel_cache(exp: &Experiment) -> PathBuf {
    exp.kernel_cache.clone()
}

/// Stores the run's profile (extra [`vm::profile::EXTRA`]), or says in the
/// run's notes why there is none: the plugin's file did not parse, or its
/// total is not the window's count (both come from one snapshot, so that
/// would be a bug). Returns the window's count without the guest's
/// background ([`crate::metric::WORK_INSTRUCTIONS`]) from a stored profile
/// that can tell it apart.
fn store_profile(
    record: &mut RunRecord,
    profile: Option<Result<vm::profile::RunProfile>>,
    instructions: Option<&Metric>,
) -> Option<Metric> {
    let profile = match profile {
        None => return None,
        Some(Err(e)) => {
            record.notes.push(format!("no profile of this run: {e:#}"));
            return None;
        }
        Some(Ok(p)) => p,
    };
    if let Some(count) = instructions.map(|m| m.value as u64).filter(|&c| c != profile.total) {
        let total = profile.total;
        record.notes.push(format!("no profile of this run: it counts {total} instructions, the run {count}"));
        return None;
    }
    if let Err(e) = record.put_extra(vm::profile::EXTRA, &profile) {
        record.notes.push(format!("no profile of this run: {e:#}"));
        return None;
    }
    let work = profile.work()?;
    Some(Metric::lower(crate::metric::WORK_INSTRUCTIONS, "insn", work as f64))
}

/// The VM of `variant`: sized as its `vm` says, a testbed disk as large as
/// its testbed, the filesystem's module loaded, the input cache (and the
/// experiment file's directory, for input files it names) shown read-only.
fn vm_config(exp: &Experiment, variant: &VariantConfig, spec: &crate::experiment::VmSpec) -> VmConfig {
    let mut ro_dirs = vec![exp.cache_dir()];
    let named = exp.source_path.as_deref().and_then(Path::parent).map(Path::to_path_buf).into_iter();
    let named =
        named.chain(exp.workloads.iter().flat_map(|w| named_dirs(&serde_json::to_value(w).unwrap_or_default())));
    for dir in named {
        // The guest has its own /proc, /sys and /dev: sharing the host's over them breaks its boot.
        if ["/proc", "/sys", "/dev"].iter().any(|p| dir.starts_with(p)) {
            continue;
        }
        let covered = ro_dirs.iter().any(|d| dir.starts_with(d));
        if vm::hidden_in_guest(&dir) && !exp.workdir.starts_with(&dir) && !dir.starts_with(&exp.workdir) && !covered {
            ro_dirs.retain(|d| !d.starts_with(&dir));
            ro_dirs.push(dir);
        }
    }
    VmConfig {
        cpus: spec.cpus,
        memory_mib: spec.memory_mib,
        accel: spec.accel,
        ro_dirs,
        disk_bytes: Some(disk_bytes(variant)),
        modules: variant.testbed.fs.fs().module().map(str::to_string).into_iter().collect(),
        boot_timeout: spec.boot_timeout,
        request_timeout: VM_RUN_SLACK,
        kernel_args: spec.cmdline.clone(),
        agent: None,
        disk_media: variant.testbed.device.clone(),
        udev: spec.udev,
        profile: true,
        objects: None,
    }
}

/// Existing directories that absolute paths in a workload's settings (a
/// list file, a job file, paths inside a `command`) point into: the guest
/// sees the host's root, but not what lives under the directories
/// virtme-ng covers (`/var/tmp`, `/run`, …), so those are shown read-only.
fn named_dirs(config: &Value) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut strings = Vec::new();
    collect_strings(config, &mut strings);
    for text in strings {
        let tokens = text.split(|c: char| c.is_whitespace() || "\"'`$(){};|&<>=,".contains(c));
        for token in tokens.filter(|t| t.starts_with('/')) {
            let dir = Path::new(token).ancestors().find(|a| a.is_dir()).map(Path::to_path_buf);
            if let Some(dir) = dir.filter(|d| d.as_os_str() != "/" && !out.contains(d)) {
                out.push(dir);
            }
        }
    }
    out
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The VM's testbed disk: as large as the testbed; read-only images are as
/// large as their content, unknown until packed in the guest, so they get
/// a disk they fit on (the image file is sparse: unused space costs nothing).
fn disk_bytes(variant: &VariantConfig) -> u64 {
    const READ_ONLY_IMAGE_DISK: u64 = 8 << 30;
    if variant.testbed.fs.is_read_only_image() {
        READ_ONLY_IMAGE_DISK
    } else {
        variant.testbed.size.0
    }
}

/// The doctor's findings for a variant's kernel config and testbed (offline
/// facts: the config, release, filesystem and mount options), so findings
/// that differ between kernels can stand next to the verdict.
fn variant_findings(
    variant: &VariantConfig,
    release: &str,
    config: &str,
    source: Option<&str>,
    rules: &[Rule],
) -> Option<Vec<StoredFinding>> {
    let source = source.unwrap_or("the variant's kernel config");
    let kconfig = KernelConfig::parse(config, source).ok()?;
    let facts = crate::inspect::Facts::offline_with(
        Some(kconfig),
        Some(release),
        Some(&variant.testbed.mount).filter(|m| !m.is_empty()).map(String::as_str),
        Some(variant.testbed.fs.fstype()),
    )
    .ok()?;
    let brief = |f: &crate::inspect::Finding| StoredFinding {
        id: f.id.clone(),
        title: f.title.clone(),
        severity: f.severity.as_str().to_string(),
        summary: f.summary.clone(),
        ..StoredFinding::default()
    };
    Some(crate::inspect::doctor(&facts, rules).findings.iter().map(brief).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::icount::BlockCounts;
    use crate::vm::profile::{attribute, RunProfile};

    fn profile(total: u64) -> RunProfile {
        attribute(&BlockCounts { total, user: total, kernel: vec![] }, None, None, "none")
    }

    /// A profile is stored only when it adds up to the run's count; else
    /// the run keeps its count and its notes say why there is no profile.
    #[test]
    fn a_profile_is_stored_when_it_adds_up_and_a_note_says_why_not() {
        let count = Metric::lower(vm::icount::METRIC, "insn", 1000.0);
        let mut record = RunRecord::default();
        let work = store_profile(&mut record, Some(Ok(profile(1000))), Some(&count));
        assert_eq!(work, None, "no kernel function named: no work count");
        let stored: RunProfile = record.extra(vm::profile::EXTRA).unwrap().unwrap();
        assert_eq!((stored.total, record.notes.len()), (1000, 0));

        let mut record = RunRecord::default();
        store_profile(&mut record, Some(Ok(profile(999))), Some(&count));
        assert!(record.extra::<RunProfile>(vm::profile::EXTRA).is_none());
        assert_eq!(record.notes, ["no profile of this run: it counts 999 instructions, the run 1000"]);

        let mut record = RunRecord::default();
        store_profile(&mut record, Some(Err(anyhow!("blocks:5: expected `<hex address> <count>`"))), Some(&count));
        assert_eq!(record.notes, ["no profile of this run: blocks:5: expected `<hex address> <count>`"]);

        let mut record = RunRecord::default();
        store_profile(&mut record, None, Some(&count));
        assert!(record.extras.is_empty() && record.notes.is_empty(), "no profiling, nothing to say");
    }
}
