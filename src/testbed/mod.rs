//! Testbeds: image file → loop device → mkfs → mount → throttle → queue
//! settings, and the teardown that undoes all of it.
//!
//! Everything a testbed creates is named `fslab-tb-<pid>-<n>` (its
//! directory under the work directory, the image inside it, the mount point,
//! the cgroup), so [`cleanup`] can find what a killed fslab left behind and
//! tell from the pid whether its owner is still alive.

pub mod cgroup;
pub mod cleanup;
pub mod device;
pub mod image;
pub mod loopdev;
pub mod mount;
pub mod tuning;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::experiment::{FsKind, VariantConfig};
use crate::metric::Metric;
use crate::record::MountFacts;
use crate::workload::process::run_tool;
use device::DevNum;

/// Prefix of every name fslab gives to what it creates.
pub const MARKER: &str = "fslab-tb-";

/// A block device the user explicitly handed over with `--device PATH --destroy-data`.
#[derive(Clone, Debug)]
pub struct DeviceOptIn {
    pub path: PathBuf,
}

/// A provisioned, mounted filesystem. Dropping it tears it down; call
/// [`Testbed::teardown`] to see teardown errors.
#[derive(Debug)]
pub struct Testbed {
    /// `<workdir>/fslab-tb-<pid>-<n>`: holds image, mount point and marker.
    pub dir: PathBuf,
    pub mountpoint: PathBuf,
    pub fstype: String,
    /// The block device (loop or user device); None for tmpfs and dir.
    pub device: Option<PathBuf>,
    /// Kernel name of the device (`loop3`), for diskstats and sysfs.
    pub device_name: Option<String>,
    /// The image file, when fslab created one.
    pub image: Option<PathBuf>,
    pub throttle: Option<cgroup::ThrottleGroup>,
    pub mount_facts: Option<MountFacts>,
    /// Queue settings in effect after tuning.
    pub queue: Vec<(String, String)>,
    /// Read-only images: the tree the image was packed from (removed with
    /// the testbed).
    pub staging: Option<PathBuf>,
    /// Metrics of provisioning itself (read-only images: `image_build_s`,
    /// `image_size_mb`, `image_ratio`), stored with the run's metrics.
    pub metrics: Vec<Metric>,
    loop_attached: bool,
    mounted: bool,
    owns_dir: bool,
    torn_down: bool,
}

/// Writes the content of a read-only image into the staging directory it is given.
pub type Populate<'a> = &'a mut dyn FnMut(&Path) -> Result<()>;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A name no other live testbed on this host has.
fn unique_name() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{MARKER}{}-{}-{nanos:x}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// mkfs program and its "force, quiet" flags per filesystem.
fn mkfs_command(fs: &FsKind) -> Option<(&'static str, &'static [&'static str])> {
    match fs {
        FsKind::Ext4 => Some(("mkfs.ext4", &["-F", "-q"])),
        FsKind::Xfs => Some(("mkfs.xfs", &["-f", "-q"])),
        FsKind::Btrfs => Some(("mkfs.btrfs", &["-f", "-q"])),
        _ => None,
    }
}

impl Testbed {
    /// Build a fresh testbed for `variant` under `workdir`.
    ///
    /// On any error, whatever was already created is torn down before the
    /// error is returned.
    pub fn provision(variant: &VariantConfig, workdir: &Path, device: Option<&DeviceOptIn>) -> Result<Testbed> {
        Testbed::provision_with(variant, workdir, device, None)
    }

    /// [`provision`](Self::provision), with `populate` writing the content
    /// of a read-only image (squashfs, erofs) into an empty staging
    /// directory before the image is packed. Writable filesystems never call
    /// it; read-only images fail without it.
    pub fn provision_with(
        variant: &VariantConfig,
        workdir: &Path,
        device: Option<&DeviceOptIn>,
        populate: Option<Populate<'_>>,
    ) -> Result<Testbed> {
        if let FsKind::Dir(dir) = &variant.fs {
            return Ok(Testbed::existing_dir(dir));
        }
        fs::create_dir_all(workdir).with_context(|| format!("creating work directory {}", workdir.display()))?;
        let name = unique_name();
        let dir = workdir.join(&name);
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mountpoint = dir.join("mnt");
        let mut bed = Testbed::unbuilt(dir, mountpoint, variant.fs.fstype(), true);
        let built = if variant.fs.is_read_only_image() {
            bed.build_image(variant, &name, device, populate)
        } else {
            bed.build(variant, &name, device)
        };
        match built {
            Ok(()) => Ok(bed),
            Err(e) => {
                if let Err(te) = bed.teardown() {
                    return Err(e.context(format!("teardown after the failure also failed: {te:#}")));
                }
                Err(e)
            }
        }
    }

    fn existing_dir(dir: &Path) -> Testbed {
        Testbed::unbuilt(dir.to_path_buf(), dir.to_path_buf(), "dir", false)
    }

    /// A testbed with nothing created yet; `owns_dir` says whether teardown
    /// may delete `dir`.
    fn unbuilt(dir: PathBuf, mountpoint: PathBuf, fstype: &str, owns_dir: bool) -> Testbed {
        Testbed {
            dir,
            mountpoint,
            fstype: fstype.to_string(),
            device: None,
            device_name: None,
            image: None,
            throttle: None,
            mount_facts: None,
            queue: Vec::new(),
            staging: None,
            metrics: Vec::new(),
            loop_attached: false,
            mounted: false,
            owns_dir,
            torn_down: false,
        }
    }

    fn build(&mut self, variant: &VariantConfig, name: &str, device: Option<&DeviceOptIn>) -> Result<()> {
        fs::create_dir(&self.mountpoint).with_context(|| format!("creating {}", self.mountpoint.display()))?;
        if variant.fs == FsKind::Tmpfs {
            let options = join_options(&format!("size={}", variant.size.0), &variant.mount);
            mount::mount("tmpfs", name, &self.mountpoint, &options)?;
            self.mounted = true;
            return self.read_back(&variant.mount);
        }
        let dev = match device {
            Some(opt_in) => opt_in.path.clone(),
            None => {
                let image = self.dir.join(format!("{name}.img"));
                let file = fs::File::create(&image).with_context(|| format!("creating {}", image.display()))?;
                file.set_len(variant.size.0).with_context(|| format!("sizing {}", image.display()))?;
                drop(file);
                self.image = Some(image.clone());
                let dev = loopdev::attach(&image)?;
                self.loop_attached = true;
                dev
            }
        };
        self.device = Some(dev.clone());
        let kernel_name = device::kernel_name(&dev)?;
        self.device_name = Some(kernel_name.clone());
        let dev_str = dev.to_str().context("device path is not UTF-8")?;

        let (program, flags) = mkfs_command(&variant.fs).context("not a block filesystem")?;
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(variant.mkfs.iter().map(String::as_str));
        args.push(dev_str);
        run_tool(program, &args).context(format!("formatting {dev_str} as {}", variant.fs))?;

        mount::mount(variant.fs.fstype(), dev_str, &self.mountpoint, &variant.mount)?;
        self.mounted = true;
        self.read_back(&variant.mount)?;
        self.tune(variant, name, &dev, &kernel_name)
    }

    /// Read-only image: populate a staging tree, pack it, attach the image
    /// read-only, mount it `ro`, then the same queue settings and throttle
    /// as any block testbed.
    fn build_image(
        &mut self,
        variant: &VariantConfig,
        name: &str,
        device: Option<&DeviceOptIn>,
        populate: Option<Populate<'_>>,
    ) -> Result<()> {
        if device.is_some() {
            bail!("a {} testbed is an image file fslab builds; it cannot use --device", variant.fs);
        }
        let Some(populate) = populate else {
            bail!("a {} testbed is packed from a workload's files, and none was given", variant.fs);
        };
        let options =
            variant.image.clone().with_context(|| format!("variant `{}` has no image options", variant.name))?;
        fs::create_dir(&self.mountpoint).with_context(|| format!("creating {}", self.mountpoint.display()))?;
        let staging = self.dir.join("staging");
        fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
        self.staging = Some(staging.clone());
        populate(&staging).context("writing the image content")?;
        let image = self.dir.join(format!("{name}.img"));
        self.image = Some(image.clone());
        let built = image::build(&variant.fs, &options, &variant.mkfs, &staging, &image)?;
        self.metrics = built.metrics();

        let dev = loopdev::attach_with(&image, true)?;
        self.loop_attached = true;
        self.device = Some(dev.clone());
        let kernel_name = device::kernel_name(&dev)?;
        self.device_name = Some(kernel_name.clone());
        let dev_str = dev.to_str().context("device path is not UTF-8")?;
        let requested = join_options("ro", &variant.mount);
        if let Err(e) = mount::mount(variant.fs.fstype(), dev_str, &self.mountpoint, &requested) {
            return Err(match squashfs_threads_hint(variant) {
                Some(hint) => e.context(hint),
                None => e,
            });
        }
        self.mounted = true;
        self.read_back(&requested)?;
        self.tune(variant, name, &dev, &kernel_name)
    }

    /// Queue settings, sysfs tunables and throttling of a mounted block testbed.
    fn tune(&mut self, variant: &VariantConfig, name: &str, dev: &Path, kernel_name: &str) -> Result<()> {
        let kernel_name = kernel_name.to_string();
        if let Some(kb) = variant.read_ahead_kb {
            tuning::set_read_ahead_kb(&kernel_name, kb)?;
        }
        if let Some(scheduler) = &variant.scheduler {
            tuning::set_scheduler(&kernel_name, scheduler)?;
        }
        if !variant.sysfs.is_empty() {
            let dir = tuning::fs_sysfs_dir(variant.fs.fstype(), &kernel_name, &self.mountpoint)?;
            tuning::set_tunables(&dir, &variant.sysfs)?;
        }
        self.queue = tuning::queue_settings(&kernel_name);
        if !variant.throttle.is_empty() {
            let Some(flavor) = cgroup::detect() else {
                bail!("throttling needs the block cgroup (v1 blkio or v2 io controller), and this host has neither");
            };
            let devnum = DevNum::of(dev)?;
            self.throttle = Some(cgroup::ThrottleGroup::create(flavor, name, devnum, variant.throttle)?);
        }
        Ok(())
    }

    /// Read the effective options back and fail if any requested one is missing.
    fn read_back(&mut self, requested: &str) -> Result<()> {
        let mut facts = mount::facts(&self.mountpoint)?
            .with_context(|| format!("{} is not in /proc/self/mountinfo after mounting", self.mountpoint.display()))?;
        if facts.fstype == "ext4" {
            if let Some(name) = &self.device_name {
                facts.fs_options = ext4_options(name);
            }
        }
        let verified = mount::verify_options(requested, &facts);
        self.mount_facts = Some(facts);
        verified
    }

    /// The directory workloads work in.
    pub fn root(&self) -> &Path {
        &self.mountpoint
    }

    /// `cgroup.procs` of the throttle group, if the testbed is throttled.
    pub fn cgroup_procs(&self) -> Option<PathBuf> {
        self.throttle.as_ref().map(cgroup::ThrottleGroup::procs_file)
    }

    /// Filesystem geometry text for the record (empty for tmpfs and dir).
    pub fn geometry(&self) -> Option<String> {
        let device = self.device.as_ref()?;
        if self.fstype == "squashfs" {
            // The superblock summary: compressor, block size, fragments, counts.
            let image = self.image.as_ref()?.to_str()?;
            return run_tool("unsquashfs", &["-s", image]).ok().filter(|g| !g.is_empty());
        }
        crate::inspect::environment::geometry(&self.fstype, device).ok().filter(|g| !g.is_empty())
    }

    /// Undo everything, in reverse order, attempting every step even when an
    /// earlier one fails. Safe to call more than once.
    pub fn teardown(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        let mut errors: Vec<String> = Vec::new();
        if let Some(group) = &mut self.throttle {
            // Kill leftovers and lift limits first so unmount's flush is not throttled.
            match group.remove() {
                Ok(()) => self.throttle = None,
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if self.mounted {
            match mount::unmount(&self.mountpoint) {
                Ok(()) => self.mounted = false,
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if self.loop_attached && !self.mounted {
            if let Some(dev) = &self.device {
                if self.fstype == "btrfs" {
                    // btrfs keeps scanned devices registered; let go of ours.
                    if let Some(d) = dev.to_str() {
                        let _ = run_tool("btrfs", &["device", "scan", "--forget", d]);
                    }
                }
                match loopdev::detach(dev) {
                    Ok(()) => self.loop_attached = false,
                    Err(e) => errors.push(format!("{e:#}")),
                }
            }
        }
        if self.owns_dir && !self.mounted && !self.loop_attached {
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    errors.push(format!("removing {}: {e}", self.dir.display()));
                }
            }
        }
        if errors.is_empty() {
            self.torn_down = true;
            Ok(())
        } else {
            bail!("teardown of {} incomplete: {}", self.dir.display(), errors.join("; "))
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("fslab: {e:#} (run `fslab cleanup` to retry)");
        }
    }
}

/// `/proc/fs/ext4/<dev>/options`, plus `mb_optimize_scan=N` from
/// `mb_structs_summary`: the options file prints mb_optimize_scan only when
/// it is on, and the summary says which allocator scan is really in effect.
fn ext4_options(name: &str) -> Option<String> {
    let mut options = fs::read_to_string(format!("/proc/fs/ext4/{name}/options")).ok()?;
    let summary = fs::read_to_string(format!("/proc/fs/ext4/{name}/mb_structs_summary")).unwrap_or_default();
    let scan = summary.lines().find_map(|l| l.strip_prefix("optimize_scan:")).map(str::trim);
    if let Some(scan) = scan {
        if !options.lines().any(|l| l.starts_with("mb_optimize_scan=")) {
            options.push_str(&format!("mb_optimize_scan={scan}\n"));
        }
    }
    Some(options)
}

fn join_options(first: &str, rest: &str) -> String {
    if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first},{rest}")
    }
}

/// Why a squashfs mount with `threads=` may have failed: the kernel only
/// takes the option when built with SQUASHFS_CHOICE_DECOMP_BY_MOUNT (6.2+).
fn squashfs_threads_hint(variant: &VariantConfig) -> Option<String> {
    if variant.fs != FsKind::Squashfs || !variant.mount.split(',').any(|o| o.starts_with("threads=")) {
        return None;
    }
    let config = crate::inspect::kconfig::KernelConfig::load_running().ok()?;
    (!config.is_enabled("SQUASHFS_CHOICE_DECOMP_BY_MOUNT")).then(|| {
        "squashfs `threads=` needs a kernel with CONFIG_SQUASHFS_CHOICE_DECOMP_BY_MOUNT=y (Linux 6.2+); \
         the running kernel's decompressor is fixed at build time"
            .to_string()
    })
}
