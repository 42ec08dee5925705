//! Checks before the first run, so an experiment that cannot work stops
//! with a clear reason (and the right exit status) instead of failing every
//! run: privileges, system directories, the tools testbeds need, free
//! space; and the leftovers of a killed fslab in the same work directory,
//! which are removed (and said so) before anything new is created there.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use super::{Observer, RunOptions};
use crate::cleanup;
use crate::exit;
use crate::experiment::{Experiment, FsKind};
use crate::sys::exec::have_program;
use crate::sys::trusted;
use crate::testbed::{space, workdirs, Medium};
use crate::units::Bytes;
use crate::workload::Workload;

/// Error text when provisioning needs privileges fslab does not have.
pub const NEEDS_ROOT: &str = "fslab needs root to create loop devices, run mkfs, mount filesystems and set \
cgroup throttles (it only touches images it creates under its work directory). Run it as root, e.g. `sudo fslab …`.";

/// Fail early, with a clear message (exit 3), when not root and root is needed.
pub fn check_privileges(exp: &Experiment) -> Result<()> {
    let needs_root = exp.variants.iter().any(|v| !matches!(v.testbed.fs, FsKind::Dir(_)));
    if needs_root && !nix::unistd::geteuid().is_root() {
        return Err(exit::environment(anyhow!(NEEDS_ROOT)));
    }
    Ok(())
}

/// System directories as work directory or `dir:` testbed are refused
/// (exit 2) unless `--allow-system-dir`.
pub fn check_system_dirs(exp: &Experiment, opts: &RunOptions) -> Result<()> {
    if opts.allow_system_dir {
        return Ok(());
    }
    let mut problems: Vec<String> = exp
        .system_paths
        .iter()
        .filter(|(key, _)| !(key == "workdir" && opts.workdir.is_some()))
        .map(|(_, msg)| msg.clone())
        .collect();
    if let Some(why) = opts.workdir.as_deref().and_then(workdirs::system_dir) {
        problems.push(format!("--workdir: {why}: fslab creates testbeds and its input cache there"));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(exit::usage(anyhow!(
        "refusing to use a system directory:\n  {}\n(pass --allow-system-dir if you really mean it)",
        problems.join("\n  ")
    )))
}

/// The directories a run writes in as root (the work directory and its
/// input cache, `dir:` testbeds, the kernel cache when a variant boots a
/// kernel, the per-host registry of running experiments) must be owned by
/// root or this user and reached through no link or directory another user
/// could change (exit 2 naming the owner: [`trusted`]). A real run creates
/// what is missing (0755); a dry run checks what exists and creates nothing.
pub fn check_trusted_dirs(exp: &Experiment, create: bool) -> Result<()> {
    let mut places =
        vec![("the work directory".to_string(), exp.workdir.clone()), ("the input cache".to_string(), exp.cache_dir())];
    // Only root writes it (for other users it is best effort).
    if nix::unistd::geteuid().is_root() {
        let registry = Path::new(crate::store::owner::REGISTRY_ROOT).join(crate::store::owner::REGISTRY_DIR);
        places.push(("the registry of running experiments".to_string(), registry));
    }
    for v in &exp.variants {
        if let FsKind::Dir(path) = &v.testbed.fs {
            places.push((format!("the `dir:` testbed of variant `{}`", v.name), path.clone()));
        }
    }
    if exp.variants.iter().any(|v| v.kernel.is_some()) {
        places.push(("the kernel cache".to_string(), exp.kernel_cache.clone()));
    }
    for (what, dir) in places {
        let checked = if create { trusted::ensure_dir(&dir).map(drop) } else { trusted::check_existing(&dir) };
        checked.map_err(|e| exit::usage(anyhow::Error::new(e).context(what)))?;
    }
    Ok(())
}

/// The host tools the testbeds need (mkfs, packers, losetup, mount) must be
/// installed (exit 3 otherwise), so a missing one is one clear error, not
/// a failure of every run.
pub fn check_tools(exp: &Experiment, opts: &RunOptions) -> Result<()> {
    let mut missing: Vec<String> = Vec::new();
    for v in &exp.variants {
        let fs = v.testbed.fs.fs();
        let mut tools: Vec<&str> = Vec::new();
        match fs.medium() {
            Medium::Block => {
                tools.extend(fs.mkfs().map(|(program, _)| program));
                tools.extend(["mount", "umount"]);
                if opts.device.is_none() {
                    tools.push("losetup");
                }
            }
            Medium::Image => {
                if let (Some(format), Some(options)) = (fs.image(), &v.testbed.image) {
                    let packer = format.pack_command(options, &[], Path::new("/staging"), Path::new("/image.img"));
                    tools.extend(packer.ok().map(|(program, _)| program));
                }
                tools.extend(["losetup", "mount", "umount"]);
            }
            Medium::Memory => tools.extend(["mount", "umount"]),
            Medium::Directory => {}
        }
        for tool in tools {
            let line = format!("{tool} (variant `{}`, fs = \"{}\")", v.name, v.testbed.fs);
            if !have_program(tool) && !missing.iter().any(|m| m.starts_with(&format!("{tool} "))) {
                missing.push(line);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(exit::environment(anyhow!(
        "missing tools: {} (install them, e.g. ./scripts/test installs xfsprogs, btrfs-progs, squashfs-tools, erofs-utils)",
        missing.join(", ")
    )))
}

/// A media model serves its testbed's image through FUSE on the host (for
/// host and VM runs alike), so the kernel's FUSE device must work: checked
/// once here (exit 3 naming the variant and the fix) instead of failing
/// every run at its first mkfs. Opening `/dev/fuse` is what the server does
/// first; it creates nothing.
pub fn check_media(exp: &Experiment) -> Result<()> {
    let Some(v) = exp.variants.iter().find(|v| v.testbed.device.is_some()) else { return Ok(()) };
    let model = v.testbed.device.as_ref().map(|d| d.name.clone()).unwrap_or_default();
    let why = match crate::sys::modules::ensure_loaded("fuse") {
        Err(e) => Some(format!("{e:#}")),
        Ok(()) => fuse_device_problem(),
    };
    match why {
        None => Ok(()),
        Some(why) => Err(exit::environment(anyhow!(
            "variant `{}` uses the media model `{model}`, which serves the testbed's image through FUSE, and FUSE \
             does not work here: {why} (load the `fuse` kernel module; in a container, pass /dev/fuse in, e.g. \
             `docker run --device /dev/fuse`; or drop `device` from the experiment file)",
            v.name
        ))),
    }
}

/// The kernel's FUSE device.
const FUSE_DEVICE: &str = "/dev/fuse";

/// Why `/dev/fuse` cannot serve: absent, not the character device, or not
/// openable read-write.
fn fuse_device_problem() -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(FUSE_DEVICE) {
        Err(e) => return Some(format!("{FUSE_DEVICE}: {e}")),
        Ok(m) if !m.file_type().is_char_device() => return Some(format!("{FUSE_DEVICE} is not a character device")),
        Ok(_) => {}
    }
    let opened = std::fs::OpenOptions::new().read(true).write(true).open(FUSE_DEVICE);
    opened.err().map(|e| format!("opening {FUSE_DEVICE}: {e}"))
}

/// What one run of a variant may write to a host filesystem: the place and
/// the bytes, with the sentence that explains them.
struct Need {
    place: PathBuf,
    bytes: u64,
    why: String,
    /// A sparse image can grow up to this.
    ceiling: Option<u64>,
}

/// Space a filesystem of `size` takes for itself before any data: journal
/// or log, inode tables written at mkfs (ext4 with `lazy_itable_init=0`),
/// allocation metadata. 1/32 of the size plus 64 MiB covers ext4, XFS and
/// btrfs at their defaults.
fn fs_overhead(size: u64) -> u64 {
    size / 32 + (64 << 20)
}

/// Free space of the work directory (and `dir:` paths) against what the
/// largest run may write there (exit 3 when short, a warning when a sparse
/// image could outgrow it). Inputs are already in the cache by now.
pub fn check_space(
    exp: &Experiment,
    opts: &RunOptions,
    workloads: &[Box<dyn Workload>],
    observer: &mut dyn Observer,
) -> Result<()> {
    let data = workloads.iter().filter_map(|w| w.footprint()).max().unwrap_or(0);
    let mut needs: Vec<Need> = Vec::new();
    for v in &exp.variants {
        let t = &v.testbed;
        let need = match t.fs.medium() {
            Medium::Block if opts.device.is_some() => continue,
            Medium::Block => {
                let bytes = (fs_overhead(t.size.0) + data).min(t.size.0);
                let why = format!(
                    "variant `{}`: filesystem overhead ~{} + workload data ~{} in its sparse {} image",
                    v.name,
                    Bytes(fs_overhead(t.size.0).min(t.size.0)),
                    Bytes(data),
                    t.size
                );
                Need { place: exp.workdir.clone(), bytes, why, ceiling: Some(t.size.0) }
            }
            // The staging tree plus the packed image (at most as large).
            Medium::Image => Need {
                place: exp.workdir.clone(),
                bytes: 2 * data + (16 << 20),
                why: format!("variant `{}`: the staging tree ~{} and its packed image", v.name, Bytes(data)),
                ceiling: None,
            },
            Medium::Memory => continue,
            Medium::Directory => match &t.fs {
                FsKind::Dir(path) => Need {
                    place: path.clone(),
                    bytes: data,
                    why: format!("variant `{}`: workload data ~{} in {}", v.name, Bytes(data), path.display()),
                    ceiling: None,
                },
                _ => continue,
            },
        };
        needs.push(need);
    }
    for need in &needs {
        let Ok(have) = space::of(&need.place) else { continue };
        if have.free < need.bytes {
            return Err(exit::environment(anyhow!(
                "not enough free space in {}: {} free, but {} needs about {}; free space there or use --workdir \
                 on a larger filesystem",
                need.place.display(),
                Bytes(have.free),
                need.why,
                Bytes(need.bytes)
            )));
        }
    }
    // The largest image per work directory can fill up: warn once.
    if let Some(need) = needs.iter().filter(|n| n.ceiling.is_some()).max_by_key(|n| n.ceiling) {
        let ceiling = need.ceiling.unwrap_or(0);
        if let Ok(have) = space::of(&need.place) {
            if have.free < ceiling {
                observer.message(&format!(
                    "warning: {} has {} free and a sparse image can grow to {}: a run that fills its filesystem \
                     will fail with the work directory full",
                    need.place.display(),
                    Bytes(have.free),
                    Bytes(ceiling)
                ));
            }
        }
    }
    Ok(())
}

/// Remove what a killed fslab left in this experiment's work directory and
/// `dir:` paths (testbeds whose owner is gone, their mounts, loop devices,
/// cgroups, half-written inputs), and say so. Other places are left to
/// `fslab cleanup`.
pub fn clean_stale(exp: &Experiment, observer: &mut dyn Observer) {
    let mut places = vec![exp.workdir.clone()];
    for v in &exp.variants {
        if let FsKind::Dir(path) = &v.testbed.fs {
            places.push(path.clone());
        }
    }
    for place in places {
        if !place.is_dir() {
            continue;
        }
        let report = cleanup::cleanup_workdir(&place);
        if !report.removed.is_empty() {
            observer.message(&format!(
                "removed what a killed fslab left in {}: {}",
                place.display(),
                report.removed.join(", ")
            ));
        }
        for error in &report.errors {
            observer.message(&format!(
                "warning: could not remove a killed fslab's leftover: {error} (try `fslab cleanup`)"
            ));
        }
    }
}
