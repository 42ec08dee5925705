//! Testbeds: image file → loop device → mkfs → mount → throttle → queue
//! settings, and the teardown that undoes all of it.
//!
//! Everything a testbed creates is named `fslab-tb-<pid>-s<start>-<n>` (its
//! directory under the work directory, the image inside it, the mount point,
//! the cgroup), and its directory carries a marker file with the owner's
//! identity ([`crate::sys::marker`]), so [`crate::cleanup`] can find what a killed
//! fslab left behind, tell whether its owner is still alive, and never
//! delete a directory fslab did not make.

pub mod cgroup;
pub mod config;
pub mod device_optin;
pub mod filesystem;
pub mod image;
pub mod loopdev;
pub mod model_device;
pub mod mount;
pub mod space;
pub mod tuning;
pub mod workdirs;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::metric::Metric;
use crate::record::MountFacts;
use crate::sys::blockdev::{self, DevNum};
use crate::sys::exec::run_tool;
use crate::sys::marker::create_marked_dir;
pub use config::{ImageOptions, TestbedConfig, Throttle};
pub use device_optin::DeviceOptIn;
pub use filesystem::{FsKind, Medium};
pub use model_device::ModelDevice;
pub use workdirs::DEFAULT_WORKDIR;

/// Where a `dir:` testbed's workload runs, inside its fslab-owned directory.
const DIR_ROOT: &str = "work";

/// A provisioned, mounted filesystem. Dropping it tears it down; call
/// [`Testbed::teardown`] to see teardown errors.
#[derive(Debug)]
pub struct Testbed {
    /// `<workdir>/fslab-tb-<pid>-s<start>-<n>` (for `dir:PATH`, inside
    /// PATH): holds image, mount point and marker file.
    pub dir: PathBuf,
    pub mountpoint: PathBuf,
    /// The filesystem kind (its description: `kind.fs()`).
    pub kind: FsKind,
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
    /// Read-only images: the cached image the testbed was made from.
    pub prepared: Option<image::PreparedImage>,
    /// Metrics of provisioning itself (read-only images: `image_build_s`,
    /// `image_size_mb`, `image_ratio`), stored with the run's metrics.
    pub metrics: Vec<Metric>,
    /// What the run's record should say about the testbed (a `dir:`
    /// testbed's filesystem is not fresh).
    pub notes: Vec<String>,
    /// The media model serving the image (`device = { model = … }`).
    pub media: Option<crate::media::host::MediaServer>,
    loop_attached: bool,
    mounted: bool,
    owns_dir: bool,
    torn_down: bool,
}

/// Writes the content of a read-only image into the staging directory it is
/// given ([`image::prepare`]).
pub type Populate<'a> = &'a mut dyn FnMut(&Path) -> Result<()>;

impl Testbed {
    /// Build a fresh testbed for `config` under `workdir`.
    ///
    /// On any error, whatever was already created is torn down before the
    /// error is returned.
    pub fn provision(config: &TestbedConfig, workdir: &Path, device: Option<&DeviceOptIn>) -> Result<Testbed> {
        Testbed::provision_with(config, workdir, device, None)
    }

    /// [`provision`](Self::provision) of a read-only image testbed (squashfs,
    /// erofs) from `image`, packed beforehand by [`image::prepare`].
    /// Writable filesystems ignore it; read-only images fail without it.
    pub fn provision_with(
        config: &TestbedConfig,
        workdir: &Path,
        device: Option<&DeviceOptIn>,
        image: Option<&image::PreparedImage>,
    ) -> Result<Testbed> {
        if let FsKind::Dir(parent) = &config.fs {
            return Testbed::provision_dir(parent, config);
        }
        fs::create_dir_all(workdir).with_context(|| format!("creating work directory {}", workdir.display()))?;
        let (dir, name) = create_marked_dir(workdir)?;
        workdirs::record(workdir);
        let mountpoint = dir.join("mnt");
        let mut bed = Testbed::unbuilt(dir, mountpoint, config.fs.clone(), true);
        let built = if config.fs.is_read_only_image() {
            bed.build_image(config, &name, device, image)
        } else {
            bed.build(config, &name, device)
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

    /// `dir:PATH`: nothing is formatted or mounted, but every run gets a
    /// fresh, empty fslab-owned directory inside PATH (with a marker file,
    /// removed at teardown), so one run's files never meet the next's.
    fn provision_dir(parent: &Path, config: &TestbedConfig) -> Result<Testbed> {
        let (dir, _) = create_marked_dir(parent)?;
        workdirs::record(parent);
        let root = dir.join(DIR_ROOT);
        let mut bed = Testbed::unbuilt(dir, root, config.fs.clone(), true);
        if let Err(e) = fs::create_dir(&bed.mountpoint) {
            let _ = bed.teardown();
            return Err(e).with_context(|| format!("creating {}", bed.mountpoint.display()));
        }
        bed.notes.push(format!(
            "{}: ran in a fresh empty directory {} (removed after the run) on the existing filesystem, \
             which is not re-created between runs",
            config.fs,
            bed.mountpoint.display()
        ));
        Ok(bed)
    }

    /// A testbed with nothing created yet; `owns_dir` says whether teardown
    /// may delete `dir`.
    fn unbuilt(dir: PathBuf, mountpoint: PathBuf, kind: FsKind, owns_dir: bool) -> Testbed {
        Testbed {
            dir,
            mountpoint,
            kind,
            device: None,
            device_name: None,
            image: None,
            throttle: None,
            mount_facts: None,
            queue: Vec::new(),
            prepared: None,
            metrics: Vec::new(),
            notes: Vec::new(),
            media: None,
            loop_attached: false,
            mounted: false,
            owns_dir,
            torn_down: false,
        }
    }

    fn build(&mut self, config: &TestbedConfig, name: &str, device: Option<&DeviceOptIn>) -> Result<()> {
        fs::create_dir(&self.mountpoint).with_context(|| format!("creating {}", self.mountpoint.display()))?;
        if config.fs == FsKind::Tmpfs {
            let options = join_options(&format!("size={}", config.size.0), &config.mount);
            crate::sys::mount::mount("tmpfs", name, &self.mountpoint, &options)?;
            self.mounted = true;
            return self.read_back(&config.mount);
        }
        load_module(config)?;
        refuse_model_on_real_device(config, device)?;
        let mut claimed = None;
        let dev = match device {
            Some(opt_in) => {
                // Again right before mkfs: it may have been mounted or opened
                // since fslab started. Held until mkfs takes it over.
                claimed = Some(opt_in.claim()?);
                opt_in.path.clone()
            }
            None => {
                let image = self.dir.join(format!("{name}.img"));
                let file = fs::File::create(&image).with_context(|| format!("creating {}", image.display()))?;
                file.set_len(config.size.0).with_context(|| format!("sizing {}", image.display()))?;
                drop(file);
                self.image = Some(image.clone());
                self.attach(config, &image, false)?
            }
        };
        self.device = Some(dev.clone());
        let kernel_name = blockdev::kernel_name(&dev)?;
        self.device_name = Some(kernel_name.clone());
        let dev_str = dev.to_str().context("device path is not UTF-8")?;

        let (program, flags) = config.fs.fs().mkfs().context("not a block filesystem")?;
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(config.mkfs.iter().map(String::as_str));
        args.push(dev_str);
        // mkfs opens the device O_EXCL itself: hand it over at the last moment.
        drop(claimed);
        run_tool(program, &args).context(format!("formatting {dev_str} as {}", config.fs))?;

        crate::sys::mount::mount(config.fs.fstype(), dev_str, &self.mountpoint, &config.mount)?;
        self.mounted = true;
        self.read_back(&config.mount)?;
        self.tune(config, name, &dev, &kernel_name)
    }

    /// Read-only image: the packed image from the image cache, attached
    /// read-only (on the host), copied onto the device (`--device`, a VM
    /// disk the host cannot write), or already on the device (a VM disk the
    /// host wrote it onto); mounted `ro`, then the same queue settings and
    /// throttle as any block testbed.
    fn build_image(
        &mut self,
        config: &TestbedConfig,
        name: &str,
        device: Option<&DeviceOptIn>,
        prepared: Option<&image::PreparedImage>,
    ) -> Result<()> {
        load_module(config)?;
        let Some(prepared) = prepared else {
            bail!("a {} testbed is packed from a workload's files, and none was given", config.fs);
        };
        refuse_model_on_real_device(config, device)?;
        let format = config.fs.fs().image().context("not a read-only image filesystem")?;
        fs::create_dir(&self.mountpoint).with_context(|| format!("creating {}", self.mountpoint.display()))?;
        self.prepared = Some(prepared.clone());
        self.metrics = prepared.built.metrics();
        self.notes.push(prepared.note());

        let dev = match device {
            // The packed image is on the device (a VM's testbed disk), so
            // reads go through that device's queue, not a loop file.
            Some(opt_in) => {
                let claimed = opt_in.claim()?;
                if prepared.on_device {
                    if let Some(expected) = &prepared.verify {
                        let bytes = prepared.built.image_bytes;
                        let read = image::check_sha256(&opt_in.path, bytes)?;
                        let what = if bytes <= image::CHECK_WHOLE { "bytes" } else { "first and last MiB" };
                        if &read != expected {
                            bail!(
                                "{} does not hold image {} (sha256 of its {what} {read}, the image's {expected})",
                                opt_in.path.display(),
                                prepared.key,
                            );
                        }
                        self.notes.push(format!(
                            "the image's {what} read back from {}: sha256 {read} matches",
                            opt_in.path.display()
                        ));
                    }
                } else {
                    copy_onto(&prepared.path, &opt_in.path)?;
                }
                // The device's page cache may hold blocks from before the
                // image was written (by the host, behind this kernel's back).
                blockdev::flush_buffers(&claimed).with_context(|| format!("flushing {}", opt_in.path.display()))?;
                drop(claimed);
                opt_in.path.clone()
            }
            // A hard link under the testbed's marked name: the loop
            // device's backing file then carries the marker, so `fslab
            // cleanup` finds the device after a SIGKILL (same bytes, no copy).
            None => {
                let image = self.dir.join(format!("{name}.img"));
                if fs::hard_link(&prepared.path, &image).is_err() {
                    fs::copy(&prepared.path, &image)
                        .with_context(|| format!("copying the image to {}", image.display()))?;
                }
                self.image = Some(image.clone());
                self.attach(config, &image, true)?
            }
        };
        self.device = Some(dev.clone());
        let kernel_name = blockdev::kernel_name(&dev)?;
        self.device_name = Some(kernel_name.clone());
        let dev_str = dev.to_str().context("device path is not UTF-8")?;
        let requested = join_options("ro", &config.mount);
        if let Err(e) = crate::sys::mount::mount(config.fs.fstype(), dev_str, &self.mountpoint, &requested) {
            return Err(match format.mount_failure_hint(&config.mount) {
                Some(hint) => e.context(hint),
                None => e,
            });
        }
        self.mounted = true;
        self.read_back(&requested)?;
        self.tune(config, name, &dev, &kernel_name)
    }

    /// A loop device (direct I/O) on `image`, or, with a media model, on
    /// the model's FUSE file serving it, with requests no larger than the
    /// server takes (so the model sees the block layer's requests whole).
    fn attach(&mut self, config: &TestbedConfig, image: &Path, read_only: bool) -> Result<PathBuf> {
        crate::sys::modules::ensure_loaded("loop")?;
        let Some(spec) = &config.device else {
            let dev = loopdev::attach_with(image, read_only)?;
            self.loop_attached = true;
            return Ok(dev);
        };
        crate::sys::modules::ensure_loaded("fuse")?;
        let server = crate::media::host::MediaServer::start(spec, image, &self.dir.join("media"))?;
        let served = server.image();
        self.media = Some(server);
        let dev = loopdev::attach_with(&served, read_only)?;
        self.loop_attached = true;
        self.device = Some(dev.clone());
        let name = blockdev::kernel_name(&dev)?;
        let [(size_key, size), (rotational_key, rotational)] = spec.queue_settings();
        tuning::set_queue(&name, size_key, &size)?;
        if let Err(e) = tuning::set_queue(&name, rotational_key, &rotational) {
            self.notes.push(format!("media model: could not set the loop device's rotational flag: {e:#}"));
        }
        Ok(dev)
    }

    /// Queue settings, sysfs tunables and throttling of a mounted block testbed.
    fn tune(&mut self, config: &TestbedConfig, name: &str, dev: &Path, kernel_name: &str) -> Result<()> {
        let kernel_name = kernel_name.to_string();
        if let Some(kb) = config.read_ahead_kb {
            tuning::set_read_ahead_kb(&kernel_name, kb)?;
        }
        if let Some(scheduler) = &config.scheduler {
            tuning::set_scheduler(&kernel_name, scheduler)?;
        }
        if !config.sysfs.is_empty() {
            let dir = config.fs.fs().sysfs_dir(&kernel_name, &self.mountpoint)?;
            if !dir.is_dir() {
                bail!("{} does not exist", dir.display());
            }
            tuning::set_tunables(&dir, &config.sysfs)?;
        }
        self.queue = tuning::queue_settings(&kernel_name);
        if !config.throttle.is_empty() {
            let Some(flavor) = cgroup::detect() else {
                bail!("throttling needs the block cgroup (v1 blkio or v2 io controller), and this host has neither");
            };
            let devnum = DevNum::of(dev)?;
            self.throttle = Some(cgroup::ThrottleGroup::create(flavor, name, devnum, config.throttle)?);
        }
        Ok(())
    }

    /// Read the effective options back and fail if any requested one is missing.
    fn read_back(&mut self, requested: &str) -> Result<()> {
        let mut facts = mount::facts(&self.mountpoint)?
            .with_context(|| format!("{} is not in /proc/self/mountinfo after mounting", self.mountpoint.display()))?;
        if let Some(name) = &self.device_name {
            facts.fs_options = self.kind.fs().fs_options(name);
        }
        let verified = mount::verify_options(requested, &facts);
        self.mount_facts = Some(facts);
        verified
    }

    /// Why the run failed, when the host filesystem holding the image (or
    /// the `dir:` directory) is full: a full host disk reaches a workload
    /// as I/O errors from the loop device. Call before teardown frees it.
    pub fn host_full(&self) -> Option<String> {
        if self.image.is_none() && !matches!(self.kind, FsKind::Dir(_)) {
            return None;
        }
        space::full(&self.dir)
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
        let image = self.image.as_deref().or(self.prepared.as_ref().map(|p| p.path.as_path()));
        self.kind.fs().geometry(self.device.as_ref()?, image)
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
            match crate::sys::mount::unmount(&self.mountpoint) {
                Ok(()) => self.mounted = false,
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if self.loop_attached && !self.mounted {
            if let Some(dev) = &self.device {
                self.kind.fs().release(dev);
                match loopdev::detach(dev) {
                    Ok(()) => self.loop_attached = false,
                    Err(e) => errors.push(format!("{e:#}")),
                }
            }
        }
        if !self.loop_attached {
            if let Some(server) = &mut self.media {
                match server.stop() {
                    Ok(()) => self.media = None,
                    Err(e) => errors.push(format!("{e:#}")),
                }
            }
        }
        if self.owns_dir && !self.mounted && !self.loop_attached && self.media.is_none() {
            // Never delete through a mount (a workload may have mounted something inside).
            let inside = mount::mounted_under(&self.dir);
            if !inside.is_empty() {
                errors.push(format!("not removing {}: {} is mounted inside it", self.dir.display(), inside.join(", ")));
            } else if let Err(e) = fs::remove_dir_all(&self.dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    errors.push(format!("removing {}: {e}", self.dir.display()));
                }
            } else if let Some(parent) = self.dir.parent() {
                workdirs::forget_if_clean(parent);
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
            crate::output::diagnostic(&format!("fslab: {e:#} (run `fslab cleanup` to retry)"));
        }
    }
}

/// A media model serves fslab's own image; a real device (`--device`, a
/// VM's testbed disk) is its own medium.
fn refuse_model_on_real_device(config: &TestbedConfig, device: Option<&DeviceOptIn>) -> Result<()> {
    match (&config.device, device) {
        (Some(spec), Some(opt_in)) => bail!(
            "the variant's media model ({spec}) serves a testbed image; it cannot be used on the real device {}",
            opt_in.path.display()
        ),
        _ => Ok(()),
    }
}

fn join_options(first: &str, rest: &str) -> String {
    if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first},{rest}")
    }
}

/// The filesystem's kernel module, when the running kernel has it as one
/// (stock distribution kernels build most filesystems as modules).
fn load_module(config: &TestbedConfig) -> Result<()> {
    match config.fs.fs().module() {
        Some(module) => crate::sys::modules::ensure_loaded(module),
        None => Ok(()),
    }
}

/// Write `image` to the start of block device `device`, and flush it there.
fn copy_onto(image: &Path, device: &Path) -> Result<()> {
    let mut from = fs::File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let size = from.metadata()?.len();
    let capacity = blockdev::size_bytes(device)?;
    if size > capacity {
        bail!(
            "the packed image ({}) does not fit on {} ({}); give the testbed a larger `size`",
            crate::human::bytes(size as f64),
            device.display(),
            crate::human::bytes(capacity as f64)
        );
    }
    let mut to =
        fs::OpenOptions::new().write(true).open(device).with_context(|| format!("opening {}", device.display()))?;
    std::io::copy(&mut from, &mut to).with_context(|| format!("writing the image onto {}", device.display()))?;
    to.sync_all().with_context(|| format!("flushing {}", device.display()))
}
