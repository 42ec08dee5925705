//! `fslab cleanup`: find what a killed fslab left behind and remove it when
//! its owner is gone.
//!
//! A system-wide job above the modules that make the leftovers (testbeds,
//! VMs, the block-trace monitor), so none of them owns the others' cleanup;
//! `fslab cleanup` and the runner's preflight call it.
//!
//! Mounts, loop devices, cgroups, v1 root throttle rules, tracefs
//! instances and VM processes are kernel objects: they are found system-wide by the marker
//! in their names, and the owner identity in the name (pid and start time)
//! says whether they are stale. Files are different: a directory is only
//! ever deleted when it is in a work directory fslab knows
//! ([`crate::testbed::workdirs::known`], or one named on the command line) and
//! carries fslab's marker file with a matching identity; temporaries in a
//! work directory's input cache are named with the identity of the process
//! writing them.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use std::time::Duration;

use crate::media::connection::Connection;
use crate::media::serve::IMAGE_FILE;
use crate::sys::blockdev::DevNum;
use crate::sys::marker::{dir_owner, owner, stale, DirOwner, MARKER};
use crate::testbed::mount::mounted_under;
use crate::testbed::{cgroup, loopdev, mount};

/// What a cleanup pass did (`fslab cleanup`'s document).
#[derive(Debug, Default, serde::Serialize)]
pub struct CleanupReport {
    pub removed: Vec<String>,
    /// Leftovers whose owning fslab process is still running (left alone).
    pub in_use: Vec<String>,
    /// Directories named like testbeds that fslab did not make (left alone).
    pub not_ours: Vec<String>,
    /// What could not be removed, and why (also said on stderr).
    pub errors: Vec<String>,
}

impl CleanupReport {
    fn note(&mut self, what: String, result: anyhow::Result<()>) {
        match result {
            Ok(()) => self.removed.push(what),
            Err(e) => self.errors.push(format!("{what}: {e:#}")),
        }
    }
}

/// Remove stale fslab leftovers: testbed directories and cache temporaries
/// in `workdirs`; mounts, loop devices, cgroups, root throttle rules and
/// trace instances system-wide. With `all`, leftovers of running fslab
/// processes are removed too (never a directory without fslab's marker).
pub fn cleanup(workdirs: &[PathBuf], all: bool) -> CleanupReport {
    run(workdirs, all, None)
}

/// `fslab cleanup --workdir X…`: the same, but only what belongs to the
/// named work directories: their testbed directories with the cgroups,
/// VMs, mounts (FUSE servers' too), loop devices and trace instances of
/// those testbeds; nothing of other work directories, and no system-wide
/// rules.
pub fn cleanup_only(workdirs: &[PathBuf], all: bool) -> CleanupReport {
    let scope: Vec<PathBuf> = workdirs.iter().map(|w| fs::canonicalize(w).unwrap_or_else(|_| w.clone())).collect();
    run(&scope, all, Some(&scope))
}

/// What a dead fslab left in one work directory (or `dir:` path): its
/// stale testbed directories with their mounts, loop devices and cgroups,
/// and stale temporaries of its input cache. Live fslab processes' testbeds
/// and everything outside `workdir` are left alone; `run` and `--resume`
/// call this before the first run.
pub fn cleanup_workdir(workdir: &Path) -> CleanupReport {
    cleanup_only(&[workdir.to_path_buf()], false)
}

/// With `within`, only what belongs to those (canonical) directories.
fn run(workdirs: &[PathBuf], all: bool, within: Option<&[PathBuf]>) -> CleanupReport {
    let mut report = CleanupReport::default();

    // Testbed directories: whose are they?
    let mut stale_dirs: Vec<PathBuf> = Vec::new();
    for workdir in workdirs {
        for entry in fs::read_dir(workdir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if !name.starts_with(MARKER) || !path.is_dir() || path.is_symlink() {
                continue;
            }
            match dir_owner(&path) {
                DirOwner::Stale(_) => stale_dirs.push(path),
                DirOwner::Running(_) if all => stale_dirs.push(path),
                DirOwner::Running(o) => report.in_use.push(format!("directory {} (pid {})", path.display(), o.pid)),
                DirOwner::Elsewhere(o) => {
                    report.in_use.push(format!("directory {} (made on host {})", path.display(), o.hostname));
                }
                // Empty and stale by its name: nothing to lose (a crash
                // between mkdir and writing the marker).
                DirOwner::NotOurs(_) if stale(&name, all) && fs::remove_dir(&path).is_ok() => {
                    report.removed.push(format!("empty directory {}", path.display()));
                }
                DirOwner::NotOurs(why) => report.not_ours.push(format!("{} ({why})", path.display())),
            }
        }
    }
    let stale_names: HashSet<String> =
        stale_dirs.iter().filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    let in_scope = |path: &str| within.is_none_or(|w| w.iter().any(|w| Path::new(path).starts_with(w)));

    // A media server that is stopped, or slower than anyone will wait,
    // holds every request to its mount, and with them the workload's
    // processes (in D state) and the unmount of the filesystem on it:
    // abort the connections of stale media mounts first (what was on them
    // is discarded anyway), so nothing below waits on a server.
    // Loop devices are found by their backing file's path, which an
    // aborted server's exit can take away (its mount is detached lazily
    // while the loop device holds the file): list them before aborting.
    let servers = media_server_processes();
    let loop_devices = marked_loop_devices(&servers);
    let aborted = abort_stale_media(&mut report, all, &in_scope, &loop_devices);
    // Servers whose mount is gone serve no one but a stale loop device: a
    // stopped one never exits by itself.
    stale_media_servers(&mut report, all, &in_scope, Duration::ZERO);

    // cgroups first: killing their processes frees the mounts.
    let flavor = cgroup::detect();
    if let Some(cgroup::Flavor::V1(root) | cgroup::Flavor::V2(root)) = &flavor {
        for entry in fs::read_dir(root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(MARKER) || !entry.path().is_dir() {
                continue;
            }
            if within.is_some() && !stale_names.contains(&name) {
                continue;
            }
            if stale(&name, all) {
                report.note(format!("cgroup {}", entry.path().display()), cgroup::remove_group(&entry.path()));
            } else {
                report.in_use.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }

    // VM processes that no cgroup held (see crate::vm::leftovers): in a
    // scoped cleanup, those of the work directories' stale sessions.
    {
        for process in crate::vm::leftovers::vm_processes() {
            if within.is_some_and(|w| !crate::vm::leftovers::belongs_to(&process, w, &stale_names)) {
                continue;
            }
            let what =
                format!("VM process {} ({})", process.pid, process.cmdline.chars().take(120).collect::<String>());
            if stale(&process.cmdline, all) {
                report.note(what, crate::vm::leftovers::kill(&process));
            } else {
                report.in_use.push(what);
            }
        }
    }

    // Media servers' FUSE mounts hold the loop devices' backing files:
    // they go after the loop devices.
    unmount_marked(&mut report, all, &in_scope, &aborted, |m| !is_media(m));

    for MarkedLoop { device, path, .. } in loop_devices {
        let path_str = path.to_string_lossy();
        if !in_scope(&path_str) {
            continue;
        }
        if stale(&path_str, all) {
            if let (Some(cgroup::Flavor::V1(root)), Ok(dev)) = (&flavor, DevNum::of(&device)) {
                let _ = cgroup::clear_v1_rules(root, dev);
            }
            report.note(format!("loop device {} ({})", device.display(), path.display()), loopdev::detach(&device));
        } else {
            report.in_use.push(format!("loop device {}", device.display()));
        }
    }

    unmount_marked(&mut report, all, &in_scope, &aborted, is_media);
    stale_media_servers(&mut report, all, &in_scope, SERVER_EXIT_GRACE);

    if within.is_none() {
        system_wide(&mut report, &flavor, all);
    } else {
        // Trace instances belong to no directory, but their names carry
        // the owner's identity: those of the processes that left stale
        // testbeds here go with them, as `fslab cleanup` would remove them.
        let owners: HashSet<(i32, Option<u64>)> = stale_names.iter().filter_map(|n| owner(n)).collect();
        for dir in crate::monitor::blocktrace::marker_instances() {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if owner(&name).is_some_and(|o| owners.contains(&o)) && stale(&name, all) {
                report.note(
                    format!("trace instance {}", dir.display()),
                    crate::monitor::blocktrace::remove_instance(&dir),
                );
            }
        }
    }

    for path in stale_dirs {
        // Never delete through a mount that is still there.
        let inside = mounted_under(&path);
        if !inside.is_empty() {
            report.errors.push(format!("{} still has {} mounted; not removing it", path.display(), inside.join(", ")));
            continue;
        }
        report.note(format!("directory {}", path.display()), fs::remove_dir_all(&path).map_err(Into::into));
    }

    for workdir in workdirs {
        cache_temporaries(&mut report, &workdir.join("cache"), all);
        // Cleaned: the registry of work directories forgets it.
        crate::testbed::workdirs::forget_if_clean(workdir);
    }
    report
}

/// A media server's mount (see [`crate::media::serve`]): type `fuse`
/// (`fuse.fslab-media` when mounted through fusermount), source `fslab-media`.
fn is_media(m: &mount::MountInfoLine) -> bool {
    m.fstype.starts_with("fuse") && m.source == crate::media::serve::SUBTYPE
}

/// The stale media mounts (marker-named, owner gone, in scope).
fn stale_media_mounts(all: bool, in_scope: &dyn Fn(&str) -> bool) -> Vec<mount::MountInfoLine> {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    mount::parse_mountinfo(&text)
        .into_iter()
        .filter(|m| is_media(m) && m.mountpoint.contains(MARKER) && in_scope(&m.mountpoint))
        .filter(|m| stale(&format!("{} {}", m.mountpoint, m.source), all))
        .collect()
}

/// A loop device on an image fslab made.
struct MarkedLoop {
    device: PathBuf,
    /// The image's path, with fslab's marker (its owner and scope are read
    /// from it).
    path: PathBuf,
    /// What the kernel keeps of the backing file, for a media server's
    /// image (None for other images, or when it cannot be read).
    backing: Option<loopdev::Backing>,
}

/// Every attached loop device on an image fslab made. The path is the
/// `/sys` backing file's when that carries the marker. A media server's
/// mount detached lazily (the server's answer to SIGHUP, which the kernel
/// sends a stopped server when fslab's death orphans its process group)
/// makes that read `/image`; the path is then the one the device was
/// attached by, or, where the kernel cut that to 63 bytes, the image of the
/// one media server whose image path it begins.
fn marked_loop_devices(servers: &[MediaServerProcess]) -> Vec<MarkedLoop> {
    let attached_path = |attached_as: &str| -> Option<PathBuf> {
        if attached_as.len() < loopdev::ATTACHED_AS_MAX {
            return Some(PathBuf::from(attached_as));
        }
        let mut images = servers
            .iter()
            .map(|s| Path::new(&s.mountpoint).join(IMAGE_FILE))
            .filter(|image| image.to_string_lossy().starts_with(attached_as));
        match (images.next(), images.next()) {
            (Some(image), None) => Some(image),
            _ => None,
        }
    };
    loopdev::attached()
        .into_iter()
        .filter_map(|(device, shown)| {
            // Only a served image's device (`…/media/image`, or `/image`
            // once detached) needs its status: no other device is opened.
            let served = shown.file_name().is_some_and(|n| n == IMAGE_FILE);
            let backing = if served { loopdev::backing(&device).ok() } else { None };
            let path = if shown.to_string_lossy().contains(MARKER) {
                shown
            } else {
                attached_path(&backing.as_ref()?.attached_as)?
            };
            path.to_string_lossy().contains(MARKER).then_some(MarkedLoop { device, path, backing })
        })
        .collect()
}

/// The testbed directory `path` lies in (itself or its nearest marker-named
/// ancestor).
fn testbed_of(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n.to_string_lossy().starts_with(MARKER)))
        .map(Path::to_path_buf)
}

/// Abort the FUSE connection of every stale media server: those of media
/// mounts, and those in no mountinfo of this namespace (detached, or
/// mounted in another) that a stale loop device on a served image still
/// holds, found by the device number of the image's filesystem. Errors are
/// reported; an abort is not a removal, so it is not listed as one.
/// Returns the testbed directories whose connection was aborted.
fn abort_stale_media(
    report: &mut CleanupReport,
    all: bool,
    in_scope: &dyn Fn(&str) -> bool,
    loop_devices: &[MarkedLoop],
) -> Vec<PathBuf> {
    let mut connections: Vec<(Connection, PathBuf)> = stale_media_mounts(all, in_scope)
        .iter()
        .map(|m| (Connection::of_line(m), PathBuf::from(&m.mountpoint)))
        .collect();
    // Every filesystem mounted here: a mounted FUSE filesystem that is not
    // a media mount is not fslab's to abort (a work directory on sshfs).
    // Unknown when mountinfo cannot be read: then none is aborted.
    let mounted: Option<HashSet<DevNum>> = fs::read_to_string(crate::sys::mountinfo::PATH)
        .map(|t| mount::parse_mountinfo(&t).iter().map(|m| DevNum { major: m.major, minor: m.minor }).collect())
        .ok();
    for l in loop_devices {
        let Some(backing) = &l.backing else { continue };
        let path_str = l.path.to_string_lossy();
        let served = l.path.file_name().is_some_and(|n| n == IMAGE_FILE);
        let unmounted = mounted.as_ref().is_some_and(|m| !m.contains(&backing.filesystem));
        if !served || !unmounted || !in_scope(&path_str) || !stale(&path_str, all) {
            continue;
        }
        // A dead server's connection ended with it.
        let connection = Connection::of_device(backing.filesystem);
        if connection.exists() {
            connections.push((connection, l.path.clone()));
        }
    }
    let mut aborted = Vec::new();
    for (connection, at) in connections {
        match connection.abort() {
            Ok(()) => aborted.extend(testbed_of(&at)),
            Err(e) => report.errors.push(format!("FUSE connection {} of {}: {e:#}", connection.name(), at.display())),
        }
    }
    aborted
}

/// How long a stale media server gets to exit once its mount is gone.
const SERVER_EXIT_GRACE: Duration = Duration::from_secs(2);

/// A running `fslab media-serve … --mountpoint <testbed>/media`.
struct MediaServerProcess {
    pid: i32,
    /// Its `--mountpoint`, which carries fslab's marker.
    mountpoint: String,
}

/// Every running media server whose mount point carries fslab's marker.
fn media_server_processes() -> Vec<MediaServerProcess> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if args.get(1).map(String::as_str) != Some("media-serve") {
            continue;
        }
        let Some(at) = args.iter().position(|a| a == "--mountpoint").and_then(|i| args.get(i + 1)) else {
            continue;
        };
        if at.contains(MARKER) {
            found.push(MediaServerProcess { pid, mountpoint: at.clone() });
        }
    }
    found
}

/// Media servers whose testbed's owner is gone and that outlived their
/// mount (given `grace` to exit once it went): a stopped one never exits by
/// itself. Killed (SIGKILL reaches a stopped process; the server's end of
/// /dev/fuse closing aborts its connection too).
fn stale_media_servers(report: &mut CleanupReport, all: bool, in_scope: &dyn Fn(&str) -> bool, grace: Duration) {
    let servers = || -> Vec<MediaServerProcess> {
        let mounted: Vec<String> = fs::read_to_string("/proc/self/mountinfo")
            .map(|t| mount::parse_mountinfo(&t).into_iter().map(|m| m.mountpoint).collect())
            .unwrap_or_default();
        media_server_processes()
            .into_iter()
            .filter(|s| in_scope(&s.mountpoint) && stale(&s.mountpoint, all) && !mounted.contains(&s.mountpoint))
            .collect()
    };
    let deadline = std::time::Instant::now() + grace;
    while !servers().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for MediaServerProcess { pid, mountpoint } in servers() {
        let killed = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        report.note(format!("media server process {pid} ({mountpoint})"), killed.map_err(Into::into));
    }
}

/// Unmount the marker-named mounts `which` selects whose owner is gone,
/// deepest first (in case anything was mounted inside a testbed).
///
/// In a testbed whose media connection was aborted (`aborted`), a mount
/// still busy (a dead run's workload still inside, its I/O now failing) is
/// detached lazily: the kernel frees it, and the loop device and FUSE mount
/// under it, when the last user goes; waiting for that could be forever.
fn unmount_marked(
    report: &mut CleanupReport,
    all: bool,
    in_scope: &dyn Fn(&str) -> bool,
    aborted: &[PathBuf],
    which: impl Fn(&mount::MountInfoLine) -> bool,
) {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else { return };
    let mut mounts: Vec<_> = mount::parse_mountinfo(&text)
        .into_iter()
        .filter(|m| m.mountpoint.contains(MARKER) || m.source.starts_with(MARKER))
        .filter(|m| in_scope(&m.mountpoint) && which(m))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.mountpoint.len()));
    for m in mounts {
        let key = format!("{} {}", m.mountpoint, m.source);
        if stale(&key, all) {
            let target = Path::new(&m.mountpoint);
            let unmounted = crate::sys::mount::unmount(target).or_else(|e| {
                if !aborted.iter().any(|dir| target.starts_with(dir)) {
                    return Err(e);
                }
                nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH)
                    .map_err(|detach| e.context(format!("detaching it lazily failed too: {detach}")))
            });
            report.note(format!("mount {}", m.mountpoint), unmounted);
        } else {
            report.in_use.push(format!("mount {}", m.mountpoint));
        }
    }
}

/// Leftovers that belong to no work directory: v1 root rules on detached
/// loop devices, trace instances.
fn system_wide(report: &mut CleanupReport, flavor: &Option<cgroup::Flavor>, all: bool) {
    if let Some(cgroup::Flavor::V1(root)) = flavor {
        let attached: Vec<DevNum> = loopdev::attached().iter().filter_map(|(d, _)| DevNum::of(d).ok()).collect();
        for dev in cgroup::v1_root_rules(root) {
            if dev.major == 7 && !attached.contains(&dev) {
                report.note(format!("root throttle rule for {dev}"), cgroup::clear_v1_rules(root, dev));
            }
        }
    }
    // Private trace instances of the block-trace monitor.
    for dir in crate::monitor::blocktrace::marker_instances() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if stale(&name, all) {
            report.note(format!("trace instance {}", dir.display()), crate::monitor::blocktrace::remove_instance(&dir));
        } else {
            report.in_use.push(format!("trace instance {}", dir.display()));
        }
    }
}

/// Half-written inputs (`.<name>.fslab-tb-<pid>-s<start>-<n>.tmp`, files
/// or trees) whose writer is gone.
fn cache_temporaries(report: &mut CleanupReport, cache: &Path, all: bool) {
    for entry in fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.contains(MARKER) || !name.ends_with(".tmp") || !stale(&name, all) {
            continue;
        }
        let path = entry.path();
        let removed =
            if path.is_dir() && !path.is_symlink() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        report.note(format!("temporary input {}", path.display()), removed.map_err(Into::into));
    }
}
