//! Where facts come from: this machine ([`Facts::gather`]: `/proc`,
//! `/sys`, the kernel config, mountinfo, geometry tools) or what a user
//! knows about another one ([`Facts::offline`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::model::{Facts, FactsMode, FsFacts, QueueFacts};
use super::parse::{merge_options, parse_mount_options, parse_scheduler, preempt_model};
use crate::fsinternal;
use crate::inspect::environment;
use crate::inspect::kconfig::KernelConfig;
use crate::inspect::version::KernelVersion;
use crate::sys::mountinfo;

impl Facts {
    /// Facts for another machine: its kernel config file, release string,
    /// mount options (`"rw,noatime,mb_optimize_scan=1"`) and filesystem
    /// type. Bad input (config lines, release, option lists) is an error
    /// naming where it is.
    ///
    /// The kernel command line is assumed to be empty (all boot-time
    /// defaults) so that config-driven rules can decide; override it with
    /// [`Facts::set`]`("kernel.cmdline", …)`. CPU count, memory, geometry
    /// and queue settings stay unknown unless set.
    pub fn offline(
        kconfig_path: Option<&Path>,
        kernel_release: Option<&str>,
        mount_options: Option<&str>,
        fs: Option<&str>,
    ) -> Result<Facts> {
        let kconfig = kconfig_path.map(KernelConfig::from_file).transpose()?;
        Facts::offline_with(kconfig, kernel_release, mount_options, fs)
    }

    /// [`Facts::offline`] with the kernel config already read (e.g. from a
    /// stored experiment).
    pub fn offline_with(
        kconfig: Option<KernelConfig>,
        kernel_release: Option<&str>,
        mount_options: Option<&str>,
        fs: Option<&str>,
    ) -> Result<Facts> {
        let mut facts = Facts::empty(FactsMode::Offline);
        facts.kernel_cmdline = Some(String::new());
        facts.notes.push("offline: kernel command line assumed empty (boot defaults)".to_string());
        if let Some(release) = kernel_release {
            facts.kernel_version =
                Some(KernelVersion::parse(release).map_err(|e| anyhow::anyhow!("--kernel-release: {e}"))?);
            facts.kernel_release = Some(release.trim().to_string());
        }
        if let Some(cfg) = kconfig {
            facts.kconfig_source = Some(cfg.source.clone());
            facts.kconfig = Some(cfg.options);
        }
        if let Some(t) = fs {
            let t = t.trim();
            if !is_filesystem_type(t) {
                bail!(
                    "--fs: `{t}` is not a Linux filesystem type (known: {}; or any type in /proc/filesystems)",
                    KNOWN_FS_TYPES.join(", ")
                );
            }
            facts.fs_mut().fstype = t.to_string();
        }
        if let Some(opts) = mount_options {
            let parsed = parse_mount_options(opts).map_err(|e| anyhow::anyhow!("--mount-options: {e}"))?;
            facts.fs_mut().mount_options = Some(parsed);
        }
        let (model, source) = preempt_model(facts.kconfig.as_ref(), None, None, None);
        facts.preempt_model = model;
        facts.preempt_source = source;
        Ok(facts)
    }

    /// Gather facts from this machine, and about the filesystem holding
    /// `path` when given. Fails only when `path` cannot be resolved or is
    /// on no mount; anything else that cannot be read is left unknown and
    /// explained in [`Facts::notes`].
    pub fn gather(path: Option<&Path>) -> Result<Facts> {
        let mut facts = Facts::empty(FactsMode::Live);
        let mut notes = Vec::new();
        let release = read_trimmed("/proc/sys/kernel/osrelease");
        if let Some(r) = &release {
            match KernelVersion::parse(r) {
                Ok(v) => facts.kernel_version = Some(v),
                Err(e) => notes.push(e),
            }
        }
        facts.kernel_release = release.clone();
        facts.kernel_cmdline = read_trimmed("/proc/cmdline");
        match environment::kernel_config_path(release.as_deref().unwrap_or("")) {
            Some(p) => match KernelConfig::from_file(&p) {
                Ok(cfg) => {
                    facts.kconfig_source = Some(cfg.source);
                    facts.kconfig = Some(cfg.options);
                }
                Err(e) => notes.push(format!("kernel config unreadable: {e:#}")),
            },
            None => notes.push(
                "kernel config not found (no /proc/config.gz, no /boot/config-<release>): config rules undetermined"
                    .to_string(),
            ),
        }
        let cpus = environment::online_cpus();
        facts.cpu_count = (cpus > 0).then_some(cpus);
        facts.mem_total_kb =
            std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| environment::meminfo_total_kb(&t));
        let debugfs = std::fs::read_to_string("/sys/kernel/debug/sched/preempt").ok();
        let uname_v = read_trimmed("/proc/sys/kernel/version");
        let (model, source) = preempt_model(
            facts.kconfig.as_ref(),
            facts.kernel_cmdline.as_deref(),
            debugfs.as_deref(),
            uname_v.as_deref(),
        );
        facts.preempt_model = model;
        facts.preempt_source = source;
        facts.ext4_lazyinit_running = Some(kernel_thread_running("ext4lazyinit"));

        if let Some(path) = path {
            let (fs, queue) = gather_fs(path, &mut notes)?;
            facts.fs = Some(fs);
            facts.queue = queue;
        }
        facts.notes = notes;
        Ok(facts)
    }
}

/// Filesystem types as the kernel names them (`/proc/filesystems`, the
/// `-t` of mount), for checking `--fs` offline: the other machine's kernel
/// may have types this one lacks, so this one's list alone is not enough.
pub const KNOWN_FS_TYPES: &[&str] = &[
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "squashfs", "erofs", "cramfs", "romfs", "vfat",
    "msdos", "exfat", "ntfs", "ntfs3", "hfs", "hfsplus", "iso9660", "udf", "jfs", "reiserfs", "nilfs2", "ocfs2",
    "gfs2", "ubifs", "jffs2", "zfs", "tmpfs", "ramfs", "overlay", "fuse", "fuseblk", "nfs", "nfs4", "cifs", "smb3",
    "ceph", "9p", "virtiofs",
];

/// A known type, or one this machine's kernel lists in `/proc/filesystems`.
fn is_filesystem_type(t: &str) -> bool {
    KNOWN_FS_TYPES.contains(&t)
        || std::fs::read_to_string("/proc/filesystems")
            .is_ok_and(|list| list.lines().filter_map(|l| l.split_whitespace().last()).any(|name| name == t))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Whether a process or kernel thread named `comm` exists.
fn kernel_thread_running(comm: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == comm))
}

/// Kernel block-device name (`sda2`) and whole-disk name (`sda`) for a
/// device number.
fn block_names(major: u32, minor: u32) -> Option<(String, String)> {
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let real = std::fs::canonicalize(&sys).ok()?;
    let name = real.file_name()?.to_string_lossy().into_owned();
    let disk = if real.join("partition").exists() {
        real.parent()?.file_name()?.to_string_lossy().into_owned()
    } else {
        name.clone()
    };
    Some((name, disk))
}

fn dev_numbers(rdev: u64) -> (u32, u32) {
    // glibc's encoding of dev_t.
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major as u32, minor as u32)
}

fn read_queue(disk: &str) -> QueueFacts {
    let dir = PathBuf::from(format!("/sys/block/{disk}/queue"));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().map(|s| s.trim().to_string());
    let num = |f: &str| read(f).and_then(|s| s.parse::<u64>().ok());
    let (scheduler, available) = read("scheduler").map(|s| parse_scheduler(&s)).unwrap_or_default();
    QueueFacts {
        device: disk.to_string(),
        rotational: read("rotational").map(|s| s == "1"),
        scheduler,
        available_schedulers: available,
        read_ahead_kb: num("read_ahead_kb"),
        nr_requests: num("nr_requests"),
        write_cache: read("write_cache"),
        wbt_lat_usec: num("wbt_lat_usec"),
        mmc_type: disk
            .starts_with("mmcblk")
            .then(|| std::fs::read_to_string(format!("/sys/block/{disk}/device/type")).ok())
            .flatten()
            .map(|t| t.trim().to_string()),
    }
}

fn gather_fs(path: &Path, notes: &mut Vec<String>) -> Result<(FsFacts, Option<QueueFacts>)> {
    let canon = std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let mounts = mountinfo::read()?;
    let m = mountinfo::find_mount(&mounts, &canon)
        .ok_or_else(|| anyhow::anyhow!("{} is on no mount in /proc/self/mountinfo", canon.display()))?;
    let mut fs = FsFacts {
        path: Some(canon.display().to_string()),
        mount_point: Some(m.mountpoint.clone()),
        fstype: m.fstype.clone(),
        source: Some(m.source.clone()),
        // statvfs of the path; ext4 replaces it with blocks × block size below.
        size_bytes: nix::sys::statvfs::statvfs(&canon)
            .ok()
            .and_then(|v| v.blocks().checked_mul(v.fragment_size()))
            .filter(|&b| b > 0),
        ..Default::default()
    };
    let mut options = BTreeMap::new();
    merge_options(&mut options, &m.mount_options);
    merge_options(&mut options, &m.super_options);

    // Device numbers: the mount source's rdev when it is a device node
    // (btrfs mounts carry an anonymous 0:N in mountinfo), else mountinfo's.
    let src_dev = std::fs::metadata(&m.source).ok().and_then(|md| {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        md.file_type().is_block_device().then(|| dev_numbers(md.rdev()))
    });
    let numbers = src_dev.or((m.major != 0).then_some((m.major, m.minor)));
    let names = numbers.and_then(|(a, b)| block_names(a, b));
    fs.device_name = names.as_ref().map(|(n, _)| n.clone());

    // What the filesystem's kind reads of its internals (ext4 geometry and
    // allocator state, XFS allocation groups, btrfs profiles).
    let mount = fsinternal::Mounted {
        source: Path::new(&m.source),
        mountpoint: &m.mountpoint,
        device_name: fs.device_name.as_deref(),
    };
    let mut found = fsinternal::Found::default();
    fs.internals = fsinternal::facts(&fs.fstype, &mount, &mut found);
    for list in &found.options {
        merge_options(&mut options, list);
    }
    if found.size_bytes.is_some() {
        fs.size_bytes = found.size_bytes;
    }
    notes.extend(found.notes);
    fs.mount_options = Some(options);
    let queue = match &names {
        Some((_, disk)) => Some(read_queue(disk)),
        None => {
            notes.push(format!("{} is not backed by a block device: no queue settings", m.source));
            None
        }
    };
    Ok((fs, queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::facts::model::{FactValue, Lookup, PreemptModel};
    use crate::sys::exec;

    #[test]
    fn offline_facts() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config");
        std::fs::write(&cfg, "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_SQUASHFS_DECOMP_SINGLE=y\n").unwrap();
        let f =
            Facts::offline(Some(&cfg), Some("5.15.32-vendor"), Some("ro,threads=single"), Some("squashfs")).unwrap();
        assert_eq!(f.mode, FactsMode::Offline);
        assert_eq!(f.kernel_version, Some(KernelVersion::new(5, 15, 32)));
        assert_eq!(f.preempt_model, Some(PreemptModel::Voluntary));
        assert_eq!(f.get("kconfig.SQUASHFS_DECOMP_SINGLE"), Lookup::Known(FactValue::Text("y".into())));
        assert_eq!(f.get("kconfig.SQUASHFS_DECOMP_MULTI"), Lookup::Absent);
        assert_eq!(f.get("mount.threads"), Lookup::Known(FactValue::Text("single".into())));
        assert_eq!(f.get("mount.noatime"), Lookup::Absent);
        assert_eq!(f.get("fs.type"), Lookup::Known(FactValue::Text("squashfs".into())));
        assert_eq!(f.get("cpu.count"), Lookup::Unknown);
        assert_eq!(f.get("cmdline.slub_debug"), Lookup::Absent);

        let e = Facts::offline(None, Some("banana"), None, None).unwrap_err().to_string();
        assert!(e.starts_with("--kernel-release:"), "{e}");
        let e = Facts::offline(None, None, None, Some("nonsensefs")).unwrap_err().to_string();
        assert!(e.starts_with("--fs: `nonsensefs` is not a Linux filesystem type (known: ext2, ext3, ext4"), "{e}");
        assert!(Facts::offline(None, None, None, Some("f2fs")).is_ok());
        let e = Facts::offline(None, None, Some("rw,,x"), None).unwrap_err().to_string();
        assert!(e.starts_with("--mount-options: option 2 is empty"), "{e}");
        std::fs::write(&cfg, "CONFIG_A=y\nnonsense\n").unwrap();
        let e = Facts::offline(Some(&cfg), None, None, None).unwrap_err().to_string();
        assert_eq!(e, format!("{}:2: expected `CONFIG_NAME=value`, `# CONFIG_NAME is not set`, a comment or a blank line, found `nonsense`", cfg.display()));
    }

    /// Unmounts on drop, so a failed assertion leaves no mount behind.
    struct MountGuard(PathBuf);
    impl Drop for MountGuard {
        fn drop(&mut self) {
            let _ = exec::run("umount", &[&self.0.to_string_lossy()], exec::DEFAULT_TIMEOUT);
        }
    }

    /// A loop-mounted scratch filesystem; unmounted, then deleted, on drop.
    struct LoopFs {
        _guard: MountGuard,
        mnt: PathBuf,
        _dir: tempfile::TempDir,
    }

    /// Make `fstype` on a sparse image and loop-mount it with `options`.
    /// `None` when this machine cannot (not root, tool missing).
    fn loop_mount(fstype: &str, size_mb: u64, mkfs: &[&str], options: &str) -> Option<LoopFs> {
        if !crate::testsupport::root_or_skip(&format!("the loop-mount facts test for {fstype}")) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        std::fs::File::create(&img).unwrap().set_len(size_mb << 20).unwrap();
        let img_s = img.to_string_lossy().to_string();
        let mut args: Vec<&str> = mkfs[1..].to_vec();
        args.push(&img_s);
        match exec::run(mkfs[0], &args, exec::DEFAULT_TIMEOUT) {
            Ok(o) if o.success => {}
            Ok(o) => panic!("{} failed: {}", mkfs[0], o.stderr),
            Err(e) => {
                crate::testsupport::skip(&format!("{}: {e}", mkfs[0]));
                return None;
            }
        }
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mnt_s = mnt.to_string_lossy().to_string();
        let opts = if options.is_empty() { "loop".to_string() } else { format!("loop,{options}") };
        match exec::run("mount", &["-o", &opts, "-t", fstype, &img_s, &mnt_s], exec::DEFAULT_TIMEOUT) {
            Ok(o) if o.success => {}
            other => {
                crate::testsupport::skip(&format!("cannot loop-mount {fstype} here ({other:?})"));
                return None;
            }
        }
        Some(LoopFs { _guard: MountGuard(mnt.clone()), mnt, _dir: dir })
    }

    /// Loop-mount a fresh filesystem and gather facts for a path inside.
    fn gather_on_loop(fstype: &str, size_mb: u64, mkfs: &[&str]) -> Option<Facts> {
        let fs = loop_mount(fstype, size_mb, mkfs, "")?;
        std::fs::create_dir(fs.mnt.join("sub")).unwrap();
        Some(Facts::gather(Some(&fs.mnt.join("sub"))).unwrap())
    }

    /// The ext4lazyinit thread runs for two reasons; the doctor must tell
    /// them apart. A lazily made filesystem, mounted with a long wait
    /// between groups (`init_itable=1000`), keeps the thread zeroing inode
    /// tables; a second filesystem made with lazy_itable_init=0 is mounted
    /// meanwhile. Only the first may get the [HIGH] finding; the second gets
    /// the low bitmap-prefetch note.
    #[test]
    fn lazyinit_is_flagged_only_where_inode_tables_are_zeroed() {
        let lazy = ["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=1"];
        let Some(a) = loop_mount("ext4", 2048, &lazy, "init_itable=1000") else { return };
        let eager = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"];
        let Some(b) = loop_mount("ext4", 1024, &eager, "") else { return };
        let rules = crate::inspect::builtin_rules().unwrap();
        let ids = |f: &Facts| -> Vec<String> {
            crate::inspect::doctor(f, &rules).findings.into_iter().map(|x| x.id).collect()
        };

        let fa = Facts::gather(Some(&a.mnt)).unwrap();
        assert_eq!(fa.ext4_lazyinit_running, Some(true), "{:#?}", fa);
        let unzeroed = fa.fs.as_ref().unwrap().internals.ext4.as_ref().unwrap().itable_unzeroed_groups;
        assert!(unzeroed.is_some_and(|n| n > 0 && n <= 16), "{fa:#?}");
        assert!(ids(&fa).contains(&"ext4-lazyinit-running".to_string()), "{:?}", ids(&fa));

        let fb = Facts::gather(Some(&b.mnt)).unwrap();
        assert_eq!(fb.ext4_lazyinit_running, Some(true), "a's zeroing keeps the thread alive");
        assert_eq!(fb.fs.as_ref().unwrap().internals.ext4.as_ref().unwrap().itable_unzeroed_groups, Some(0), "{fb:#?}");
        let found = ids(&fb);
        assert!(!found.contains(&"ext4-lazyinit-running".to_string()), "{found:?}");
        assert!(found.contains(&"ext4-lazyinit-bitmap-prefetch".to_string()), "{found:?}");
        assert!(fb.summary_lines().iter().any(|l| l.contains("inode tables all zeroed")), "{:?}", fb.summary_lines());
    }

    #[test]
    fn gather_on_loop_mounted_filesystems() {
        if let Some(f) = gather_on_loop("ext4", 64, &["mkfs.ext4", "-F", "-q"]) {
            let fs = f.fs.as_ref().unwrap();
            assert_eq!(fs.fstype, "ext4");
            assert!(fs.device_name.as_deref().is_some_and(|d| d.starts_with("loop")), "{fs:?}");
            let e = fs.internals.ext4.as_ref().unwrap();
            assert_eq!(e.block_groups, Some(8), "{f:#?}");
            assert_eq!(e.mb_optimize_scan_reported, Some(false), "{f:#?}");
            assert_eq!(f.ext4_mb_optimize_scan().map(|x| x.0), Some(false));
            // /proc/fs/ext4/<dev>/options lists defaults such as data=ordered.
            assert_eq!(f.get("mount.data"), Lookup::Known(FactValue::Text("ordered".into())), "{f:#?}");
            let q = f.queue.as_ref().unwrap();
            assert!(q.device.starts_with("loop") && q.read_ahead_kb.is_some(), "{q:?}");
        }
        if let Some(f) = gather_on_loop("xfs", 320, &["mkfs.xfs", "-q", "-f", "-d", "agcount=4"]) {
            let x = f.fs.as_ref().unwrap().internals.xfs.as_ref().unwrap();
            assert_eq!(x.agcount, Some(4), "{f:#?}");
            assert!(x.agsize_blocks.is_some());
        }
        if let Some(f) = gather_on_loop("btrfs", 256, &["mkfs.btrfs", "-q", "-f", "-m", "dup", "-d", "single"]) {
            let b = f.fs.as_ref().unwrap().internals.btrfs.as_ref().unwrap();
            assert_eq!(b.metadata_profile.as_deref(), Some("dup"), "{f:#?}");
            assert_eq!(b.data_profile.as_deref(), Some("single"), "{f:#?}");
            assert!(f.queue.is_some(), "btrfs device found through the mount source: {f:#?}");
        }
    }

    #[test]
    fn gather_live_root() {
        let f = Facts::gather(Some(Path::new("/"))).unwrap();
        assert!(f.kernel_release.is_some());
        assert!(f.cpu_count.unwrap_or(0) > 0);
        let fs = f.fs.as_ref().unwrap();
        assert!(!fs.fstype.is_empty());
        assert!(fs.mount_options.as_ref().is_some_and(|m| !m.is_empty()));
        assert!(!f.summary_lines().is_empty());
        let json = serde_json::to_string(&f).unwrap();
        let back: Facts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
        assert!(Facts::gather(Some(Path::new("/nonexistent/fslab"))).is_err());
    }
}
