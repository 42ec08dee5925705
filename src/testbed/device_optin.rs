//! `--device PATH --destroy-data`: the one case where fslab formats
//! something it did not create, so fslab itself checks, before anything is
//! written, that the device really is a spare block device. mkfs's own
//! refusals are not relied on (mkfs formats a regular file without a word,
//! and `-F` flags override its checks).
//!
//! Refused, each with the exact reason: a path that is not a block device;
//! a read-only device; a device that is mounted, holds a mounted partition,
//! is swap or holds swap; a device any mount or swap depends on through
//! stacking (device-mapper/md `slaves`, a loop device over it, a partition
//! of it); a device something is stacked on even when unmounted (`holders`,
//! a loop device backed by it); a device another process has open
//! exclusively (`O_EXCL`, which is also how the kernel marks what a mounted
//! filesystem or a dm/md array holds); and a device (or a partition of it)
//! any other process has open at all, read-only or read-write, through a
//! file descriptor or a memory mapping (`/proc/*/fd`, `/proc/*/maps`, as
//! `fuser` and `lsof` look), named by pid and command.
//!
//! udev is let settle first (its probes open new devices briefly), and the
//! exclusive open is held from the checks until mkfs starts: mkfs opens
//! the device `O_EXCL` itself, so fslab cannot hold its own open across
//! the `exec`; that handover (a fork and exec) is the only window left.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::mount;
use crate::sys::blockdev::DevNum;

/// A block device the user explicitly handed over with `--device PATH
/// --destroy-data`, checked by [`DeviceOptIn::new`].
#[derive(Clone, Debug)]
pub struct DeviceOptIn {
    pub path: PathBuf,
}

impl DeviceOptIn {
    /// `path`, if it is a block device fslab may format (see the module
    /// docs); otherwise an error saying exactly why not.
    pub fn new(path: &Path) -> Result<DeviceOptIn> {
        let opt_in = DeviceOptIn { path: path.to_path_buf() };
        opt_in.check()?;
        Ok(opt_in)
    }

    /// Check again (before each mkfs: what was free when fslab started may
    /// have been mounted since).
    pub fn check(&self) -> Result<()> {
        self.claim().map(drop)
    }

    /// [`check`](Self::check), keeping the device open exclusively until the
    /// returned file is dropped (right before mkfs, which opens it `O_EXCL`
    /// itself), so nothing can mount or claim it in between.
    pub fn claim(&self) -> Result<fs::File> {
        claim(&self.path).with_context(|| format!("refusing to format --device {}", self.path.display()))
    }
}

/// The checks of [`DeviceOptIn::new`] on the running host.
pub fn check(path: &Path) -> Result<()> {
    claim(path).map(drop)
}

/// [`check`], returning the exclusive open of the device.
fn claim(path: &Path) -> Result<fs::File> {
    let meta = fs::metadata(path).with_context(|| format!("{} cannot be used", path.display()))?;
    let kind = meta.file_type();
    if !kind.is_block_device() {
        let what = if kind.is_file() {
            "a regular file"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() {
            "a character device"
        } else {
            "not a device"
        };
        bail!("{} is {what}, not a block device", path.display());
    }
    let dev = DevNum { major: libc::major(meta.rdev()), minor: libc::minor(meta.rdev()) };
    settle_udev();
    let host = Host::read();
    if let Some(reason) = host.refusal(dev) {
        bail!("{} {reason}", path.display());
    }
    // An exclusive open fails with EBUSY while a mounted filesystem, a dm/md
    // array or another process (mkfs, a partitioner) holds it; once it
    // succeeds, nothing else can mount or claim it while fslab holds it.
    let claimed = match fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => bail!(
            "{} is in use: another process or the kernel holds it open exclusively (O_EXCL open: {e})",
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("opening {}", path.display()))?,
    };
    // Plain opens do not conflict with O_EXCL: look for them in every
    // other process, as fuser does.
    let mut family = vec![dev];
    family.extend(host.partitions(dev));
    let openers = openers(&family, std::process::id());
    if !openers.is_empty() {
        let (one, many) = ("process", "processes");
        let named: Vec<String> = openers.iter().map(|(pid, comm)| format!("{pid} ({comm})")).collect();
        bail!(
            "{} is in use: {} {} {} it open",
            path.display(),
            if named.len() == 1 { one } else { many },
            named.join(", "),
            if named.len() == 1 { "has" } else { "have" }
        );
    }
    Ok(claimed)
}

/// Wait (up to 10 s) for udev to finish processing events: its probes of a
/// new or changed device hold it open for a moment. Without udev (or
/// `udevadm`) there is nothing to wait for.
fn settle_udev() {
    let _ = std::process::Command::new("udevadm")
        .args(["settle", "--timeout=10"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Processes other than `me` with any of `devices` open through a file
/// descriptor or a memory mapping, as (pid, command), by pid. Processes
/// that exit while being read are skipped.
fn openers(devices: &[DevNum], me: u32) -> Vec<(u32, String)> {
    let is_ours = |path: &Path| block_rdev(path).is_some_and(|d| devices.contains(&d));
    let mut found: Vec<(u32, String)> = Vec::new();
    let Ok(proc_dir) = fs::read_dir("/proc") else { return found };
    for entry in proc_dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let by_fd = fs::read_dir(dir.join("fd")).into_iter().flatten().flatten().any(|fd| is_ours(&fd.path()));
        let by_map = || {
            fs::read_to_string(dir.join("maps")).unwrap_or_default().lines().any(|line| {
                // address perms offset dev inode path
                line.split_whitespace().nth(5).is_some_and(|p| p.starts_with('/') && is_ours(Path::new(p)))
            })
        };
        if by_fd || by_map() {
            let comm = read_trim(&dir.join("comm")).unwrap_or_else(|| "?".to_string());
            found.push((pid, comm));
        }
    }
    found.sort();
    found
}

/// What the kernel says about block devices and their users.
pub struct Host {
    /// `/sys/dev/block` (a fake tree in tests): `MAJ:MIN` → device directory.
    pub sys_dev_block: PathBuf,
    /// `/proc/self/mountinfo`.
    pub mountinfo: String,
    /// `/proc/swaps`.
    pub swaps: String,
}

/// Something that uses block devices: a mount or a swap area.
struct User {
    /// Why the device itself is refused (`is mounted at /x`).
    direct: String,
    /// Why a device beneath it is (`holds the filesystem mounted at /x`).
    held: String,
    devices: Vec<DevNum>,
}

impl Host {
    pub fn read() -> Host {
        Host {
            sys_dev_block: PathBuf::from("/sys/dev/block"),
            mountinfo: fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
            swaps: fs::read_to_string("/proc/swaps").unwrap_or_default(),
        }
    }

    /// Why `dev` must not be formatted, or None.
    pub fn refusal(&self, dev: DevNum) -> Option<String> {
        let dir = self.dir(dev);
        if !dir.exists() {
            return Some(format!("({dev}) is not a block device the kernel knows"));
        }
        if read_trim(&dir.join("ro")).as_deref() == Some("1") {
            return Some("is read-only".to_string());
        }
        // Mounts and swap areas, and everything beneath them.
        for user in self.users() {
            for start in &user.devices {
                if let Some(path) = self.path_down(*start, dev) {
                    if path.len() == 1 {
                        return Some(user.direct.clone());
                    }
                    let through: Vec<String> = path[..path.len() - 1].iter().map(|d| self.name(*d)).collect();
                    return Some(format!("{} (through {})", user.held, through.join(" → ")));
                }
            }
        }
        // Stacked on, even when nothing is mounted: dm/md holders of the
        // device or of its partitions, loop devices backed by either.
        let mut family = vec![dev];
        family.extend(self.partitions(dev));
        for member in &family {
            let of = if member == &dev { String::new() } else { format!(" (its partition {})", self.name(*member)) };
            let holders = list_names(&self.dir(*member).join("holders"));
            if !holders.is_empty() {
                let named: Vec<String> = holders.iter().map(|h| self.describe_holder(*member, h)).collect();
                return Some(format!("is in use{of}: {} stacked on it", named.join(", ")));
            }
            for (lo, backing) in self.loop_devices() {
                if backing == Some(*member) {
                    return Some(format!("is in use{of}: loop device {} is backed by it", self.name(lo)));
                }
            }
        }
        None
    }

    fn dir(&self, dev: DevNum) -> PathBuf {
        self.sys_dev_block.join(dev.to_string())
    }

    /// Kernel name (`loop3`, `sda1`, `dm-0`), or `MAJ:MIN`.
    fn name(&self, dev: DevNum) -> String {
        fs::canonicalize(self.dir(dev))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dev.to_string())
    }

    fn describe_holder(&self, of: DevNum, holder: &str) -> String {
        let dm_name = read_trim(&self.dir(of).join("holders").join(holder).join("dm/name"));
        match dm_name {
            Some(n) => format!("{holder} (device-mapper `{n}`)"),
            None if holder.starts_with("md") => format!("{holder} (md RAID)"),
            None => holder.to_string(),
        }
    }

    /// Partitions of a whole disk (none for a partition).
    fn partitions(&self, dev: DevNum) -> Vec<DevNum> {
        let Ok(dir) = fs::canonicalize(self.dir(dev)) else { return Vec::new() };
        fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("partition").is_file())
            .filter_map(|e| read_devnum(&e.path().join("dev")))
            .collect()
    }

    /// The devices `dev` is built on: dm/md slaves, the whole disk of a
    /// partition, the backing device of a loop device.
    fn lower(&self, dev: DevNum) -> Vec<DevNum> {
        let dir = self.dir(dev);
        let mut out: Vec<DevNum> = list_names(&dir.join("slaves"))
            .iter()
            .filter_map(|s| read_devnum(&dir.join("slaves").join(s).join("dev")))
            .collect();
        if dir.join("partition").is_file() {
            if let Some(disk) = fs::canonicalize(&dir).ok().and_then(|p| read_devnum(&p.join("../dev"))) {
                out.push(disk);
            }
        }
        if let Some(backing) = self.loop_backing(dev) {
            out.push(backing);
        }
        out
    }

    /// The shortest chain `from → … → to` through [`lower`](Self::lower).
    fn path_down(&self, from: DevNum, to: DevNum) -> Option<Vec<DevNum>> {
        let mut seen = HashSet::new();
        let mut queue = std::collections::VecDeque::from([vec![from]]);
        while let Some(path) = queue.pop_front() {
            let last = *path.last()?;
            if last == to {
                return Some(path);
            }
            if !seen.insert(last) || path.len() > 16 {
                continue;
            }
            for next in self.lower(last) {
                let mut longer = path.clone();
                longer.push(next);
                queue.push_back(longer);
            }
        }
        None
    }

    /// Every mount and swap area with the devices it sits on.
    fn users(&self) -> Vec<User> {
        let mut users = Vec::new();
        for line in self.mountinfo.lines() {
            let Some(mount) = mount::parse_mountinfo(line).pop() else { continue };
            let mut devices = Vec::new();
            if let Some(d) = line.split(' ').nth(2).and_then(parse_devnum).filter(|d| d.major != 0) {
                devices.push(d);
            }
            // btrfs and others report an anonymous 0:N; the source names the device.
            if let Some(d) = block_rdev(Path::new(&mount.source)) {
                if !devices.contains(&d) {
                    devices.push(d);
                }
            }
            if !devices.is_empty() {
                let root = if mount.mountpoint == "/" { ": the host's root filesystem" } else { "" };
                users.push(User {
                    direct: format!("is mounted at {}{root}", mount.mountpoint),
                    held: format!("holds the filesystem mounted at {}{root}", mount.mountpoint),
                    devices,
                });
            }
        }
        for line in self.swaps.lines().skip(1) {
            let Some(file) = line.split_whitespace().next() else { continue };
            let path = Path::new(file);
            let device = block_rdev(path).or_else(|| self.device_of_file(path));
            if let Some(d) = device {
                users.push(User {
                    direct: format!("is swap ({file})"),
                    held: format!("holds swap ({file})"),
                    devices: vec![d],
                });
            }
        }
        users
    }

    /// Every attached loop device with the device its backing file is on.
    fn loop_devices(&self) -> Vec<(DevNum, Option<DevNum>)> {
        fs::read_dir(&self.sys_dev_block)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| parse_devnum(&e.file_name().to_string_lossy()))
            .filter(|d| self.dir(*d).join("loop/backing_file").is_file())
            .map(|d| (d, self.loop_backing(d)))
            .collect()
    }

    /// A loop device's backing device: the device node it is attached to,
    /// or the device holding the filesystem its backing file is in.
    fn loop_backing(&self, dev: DevNum) -> Option<DevNum> {
        let file = read_trim(&self.dir(dev).join("loop/backing_file"))?;
        let file = Path::new(file.trim_end_matches(" (deleted)"));
        block_rdev(file).or_else(|| self.device_of_file(file))
    }

    /// The block device of the filesystem `file` is on (through mountinfo
    /// for filesystems with anonymous device numbers).
    fn device_of_file(&self, file: &Path) -> Option<DevNum> {
        let st = fs::metadata(file).ok()?.dev();
        let d = DevNum { major: libc::major(st), minor: libc::minor(st) };
        if d.major != 0 {
            return Some(d);
        }
        self.mountinfo.lines().find_map(|line| {
            (parse_devnum(line.split(' ').nth(2)?)? == d).then_some(())?;
            block_rdev(Path::new(&mount::parse_mountinfo(line).pop()?.source))
        })
    }
}

/// The device number of a block device node.
fn block_rdev(path: &Path) -> Option<DevNum> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type()
        .is_block_device()
        .then(|| DevNum { major: libc::major(meta.rdev()), minor: libc::minor(meta.rdev()) })
}

fn parse_devnum(text: &str) -> Option<DevNum> {
    let (major, minor) = text.trim().split_once(':')?;
    Some(DevNum { major: major.parse().ok()?, minor: minor.parse().ok()? })
}

fn read_devnum(path: &Path) -> Option<DevNum> {
    parse_devnum(&fs::read_to_string(path).ok()?)
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn list_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    //! Device-mapper and md cannot be set up on this test host (no dm/md
    //! driver), so their sysfs shape is built as a fake tree here; loop
    //! stacking, partitions, mounts and O_EXCL are tested for real in
    //! `tests/it/safety/device.rs`.
    use super::*;

    /// `/sys/devices/virtual/block/<name>` with `dev`, plus the
    /// `/sys/dev/block/MAJ:MIN` symlink.
    fn device(root: &Path, name: &str, dev: &str) -> PathBuf {
        let dir = root.join("devices").join(name);
        fs::create_dir_all(dir.join("holders")).unwrap();
        fs::create_dir_all(dir.join("slaves")).unwrap();
        fs::write(dir.join("dev"), format!("{dev}\n")).unwrap();
        fs::write(dir.join("ro"), "0\n").unwrap();
        std::os::unix::fs::symlink(&dir, root.join("dev/block").join(dev)).unwrap();
        dir
    }

    fn host(root: &Path, mountinfo: &str) -> Host {
        Host { sys_dev_block: root.join("dev/block"), mountinfo: mountinfo.to_string(), swaps: String::new() }
    }

    #[test]
    fn device_mapper_stacking_is_seen_through_holders_and_slaves() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        fs::create_dir_all(root.join("dev/block")).unwrap();
        let loop0 = device(root, "loop0", "7:0");
        let dm = device(root, "dm-0", "253:0");
        fs::create_dir_all(dm.join("dm")).unwrap();
        fs::write(dm.join("dm/name"), "vg-data\n").unwrap();
        std::os::unix::fs::symlink(&loop0, dm.join("slaves/loop0")).unwrap();
        std::os::unix::fs::symlink(&dm, loop0.join("holders/dm-0")).unwrap();
        device(root, "loop1", "7:1");
        let loop0_dev = DevNum { major: 7, minor: 0 };

        // Unmounted dm on top: in use through holders.
        let why = host(root, "").refusal(loop0_dev).unwrap();
        assert!(why.contains("dm-0 (device-mapper `vg-data`) stacked on it"), "{why}");
        // Mounted dm on top: the mount depends on loop0 through dm-0.
        let mounted = "27 1 253:0 / /srv/data rw,relatime - ext4 /dev/mapper/vg-data rw\n";
        let why = host(root, mounted).refusal(loop0_dev).unwrap();
        assert_eq!(why, "holds the filesystem mounted at /srv/data (through dm-0)");
        // The host's root on it.
        let why = host(root, "27 1 253:0 / / rw - ext4 /dev/dm-0 rw\n").refusal(loop0_dev).unwrap();
        assert!(why.contains("the host's root filesystem"), "{why}");
        // An unrelated device is fine.
        assert_eq!(host(root, mounted).refusal(DevNum { major: 7, minor: 1 }), None);
    }

    #[test]
    fn partitions_count_as_the_disk() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        fs::create_dir_all(root.join("dev/block")).unwrap();
        let disk = device(root, "sdz", "8:0");
        let part = disk.join("sdz1");
        fs::create_dir_all(part.join("holders")).unwrap();
        fs::write(part.join("dev"), "8:1\n").unwrap();
        fs::write(part.join("partition"), "1\n").unwrap();
        std::os::unix::fs::symlink(&part, root.join("dev/block/8:1")).unwrap();
        let mounted = "30 1 8:1 / /boot/efi rw - vfat /dev/sdz1 rw\n";
        let why = host(root, mounted).refusal(DevNum { major: 8, minor: 0 }).unwrap();
        assert_eq!(why, "holds the filesystem mounted at /boot/efi (through sdz1)");
        // Formatting the partition itself: mounted.
        let why = host(root, mounted).refusal(DevNum { major: 8, minor: 1 }).unwrap();
        assert_eq!(why, "is mounted at /boot/efi");
    }
}
