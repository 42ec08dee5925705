//! What fslab knows of the inside of filesystems, one file per filesystem
//! with internals: [`ext4`], [`xfs`], [`btrfs`]. Each implements
//! [`Internals`] (the snapshot taken before and after a measured run, its
//! delta and headline metrics, the geometry text stored with a testbed, the
//! doctor's facts of a mounted filesystem of its type) and is one line in
//! [`internals!`] below. Everything else that depends on a filesystem's
//! internals (testbed snapshots and geometry, the doctor, stored extras)
//! looks its type up in that list; a filesystem without internals needs
//! nothing here.
//!
//! What each one reads without debugfs:
//!
//! * ext4: `/proc/fs/ext4/<dev>/mb_structs_summary` (both the 5.13–6.0
//!   `fragment_size_tree` layout and the 6.1+ `avg_fragment_size_lists`
//!   layout) and a summary of `/proc/fs/ext4/<dev>/mb_groups`.
//! * XFS: the per-mount `/sys/fs/xfs/<dev>/stats/stats`, parsed by line name.
//! * btrfs: `/sys/fs/btrfs/<uuid>/allocation/*` space counters and
//!   `commit_stats`.
//!
//! [`snapshot`] reads the live files, [`delta`] subtracts two snapshots and
//! [`FsDelta::metrics`] turns a delta into a few headline [`Metric`]s.
//!
//! Parsers never panic on malformed input: they return a [`ParseError`]
//! naming the file and the 1-based line.

use std::fmt;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// A malformed line (or file) in one of the parsed kernel files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Path (or label) of the file that was being parsed.
    pub file: String,
    /// 1-based line number; 0 when the problem concerns the whole file.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

pub(crate) fn perr(file: &str, line: usize, message: impl Into<String>) -> ParseError {
    ParseError { file: file.to_string(), line, message: message.into() }
}

/// Parse an unsigned decimal counter, reporting the file and line on failure.
pub(crate) fn parse_u64(tok: &str, file: &str, line: usize, what: &str) -> Result<u64, ParseError> {
    tok.trim()
        .parse::<u64>()
        .map_err(|_| perr(file, line, format!("{what}: expected an unsigned integer, found {tok:?}")))
}

/// `after - before` without overflow, saturating at the i64 range.
pub(crate) fn sub(after: u64, before: u64) -> i64 {
    let d = after as i128 - before as i128;
    d.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Element-wise `after - before`; a missing element counts as 0.
pub(crate) fn sub_vec(after: &[u64], before: &[u64]) -> Vec<i64> {
    let n = after.len().max(before.len());
    (0..n).map(|i| sub(after.get(i).copied().unwrap_or(0), before.get(i).copied().unwrap_or(0))).collect()
}

pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))
}

/// One filesystem with internals fslab reads. Its file implements this for
/// a unit type, and one line in [`internals!`] lists it.
pub trait Internals {
    /// The type as mountinfo and `mount -t` name it; its metrics' prefix.
    const NAME: &'static str;
    /// Older types the same kernel driver mounts and whose snapshot and
    /// geometry read alike (the doctor's facts are for [`Self::NAME`] only:
    /// its rules are written for it).
    const ALSO: &'static [&'static str] = &[];

    /// What is read before and after a run (stored as an extra).
    type Snapshot: Clone + Debug + PartialEq + Serialize + DeserializeOwned;
    /// `after - before` (stored as an extra).
    type Delta: Clone + Debug + PartialEq + Serialize;
    /// What the doctor learns of a mounted filesystem of this type.
    type Facts: Clone + Debug + Default + PartialEq + Serialize + DeserializeOwned;

    /// The live snapshot of the filesystem on `device` (a kernel name,
    /// no `/dev/`). Errors: a file that should exist cannot be read or is
    /// malformed.
    fn read(roots: &Roots, device: &str) -> Result<Self::Snapshot>;

    fn delta(before: &Self::Snapshot, after: &Self::Snapshot) -> Self::Delta;

    /// A few headline numbers, named `<NAME>.…`.
    fn metrics(delta: &Self::Delta) -> Vec<Metric>;

    /// Geometry text of the filesystem on `device` (a block device or an
    /// image file), or the tool's own error.
    fn geometry(device: &Path) -> Result<String>;

    /// The doctor's facts of a mounted filesystem of this type (`None` when
    /// nothing could be read); why a fact is missing goes to `found.notes`.
    fn facts(mount: &Mounted, found: &mut Found) -> Option<Self::Facts>;
}

/// A mounted filesystem the doctor asks about.
#[derive(Clone, Copy, Debug)]
pub struct Mounted<'a> {
    /// Mount source, usually a block device.
    pub source: &'a Path,
    pub mountpoint: &'a str,
    /// Kernel name of the block device (`sda2`, `loop3`), when known.
    pub device_name: Option<&'a str>,
}

/// What [`Internals::facts`] found besides its own facts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    /// Kernel-produced option lists to merge into the mount options (ext4's
    /// `/proc/fs/ext4/<dev>/options` lists defaults mountinfo omits).
    pub options: Vec<String>,
    /// The filesystem's own size, better than statvfs's (blocks × block size).
    pub size_bytes: Option<u64>,
    /// Why a fact could not be read.
    pub notes: Vec<String>,
}

/// One filesystem-internal snapshot of a mounted filesystem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsSnapshot {
    pub fstype: String,
    /// Kernel name of the block device (`loop0`, `mmcblk1p2`, `dm-3`).
    pub device: String,
    pub mountpoint: PathBuf,
    pub data: FsData,
}

/// Where the kernel's proc and sys filesystems are (tests point these at fixture trees).
#[derive(Clone, Debug)]
pub struct Roots {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots { proc: PathBuf::from("/proc"), sys: PathBuf::from("/sys") }
    }
}

/// Change between two snapshots of the same filesystem.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FsDelta {
    pub fstype: String,
    pub device: String,
    pub data: FsDeltaData,
}

/// Whether `I`'s files describe a filesystem of type `fstype`.
fn serves<I: Internals>(fstype: &str) -> bool {
    fstype == I::NAME || I::ALSO.contains(&fstype)
}

/// Declares the filesystems with internals: each `Variant => module::Type`
/// line adds one (its file implements [`Internals`] for `Type`). The
/// snapshot, delta and facts types and every lookup by type are derived
/// from the list.
macro_rules! internals {
    ($($variant:ident => $module:ident::$ty:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Filesystem-specific content of a snapshot.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum FsData {
            $($variant(<$module::$ty as Internals>::Snapshot),)*
            /// Nothing is collected for this filesystem type.
            Unsupported {
                reason: String,
            },
        }

        // One delta per run, built once and stored: the size of the largest
        // filesystem's delta costs nothing worth a Box in every variant.
        #[allow(clippy::large_enum_variant)]
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum FsDeltaData {
            $($variant(<$module::$ty as Internals>::Delta),)*
            /// The snapshots cannot be compared (unsupported fs, or different kinds).
            Unavailable {
                reason: String,
            },
        }

        /// The doctor's facts of each filesystem with internals, one field
        /// per filesystem (flattened into the doctor's filesystem facts, so
        /// their JSON has `ext4`, `xfs`, … next to `fstype`).
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        pub struct FsInternalFacts {
            $(pub $module: Option<<$module::$ty as Internals>::Facts>,)*
        }

        /// Every filesystem type whose internals fslab reads, with the
        /// module that reads it (`("ext3", "ext4")`): the one file, here and
        /// in `testbed/filesystem/`, that may name the type.
        pub fn types() -> Vec<(&'static str, &'static str)> {
            let mut out = Vec::new();
            $(
                let module = stringify!($module);
                out.push((<$module::$ty as Internals>::NAME, module));
                out.extend(<$module::$ty as Internals>::ALSO.iter().map(|t| (*t, module)));
            )*
            out
        }

        /// Whether fslab reads the internals of filesystems of type `fstype`.
        pub fn reads(fstype: &str) -> bool {
            false $(|| serves::<$module::$ty>(fstype))*
        }

        fn read(roots: &Roots, fstype: &str, device: &str) -> Option<Result<FsData>> {
            $(if serves::<$module::$ty>(fstype) {
                return Some(<$module::$ty as Internals>::read(roots, device).map(FsData::$variant));
            })*
            None
        }

        /// `after - before`.
        pub fn delta(before: &FsSnapshot, after: &FsSnapshot) -> FsDelta {
            let data = match (&before.data, &after.data) {
                $((FsData::$variant(b), FsData::$variant(a)) => {
                    FsDeltaData::$variant(<$module::$ty as Internals>::delta(b, a))
                })*
                (FsData::Unsupported { reason }, _) | (_, FsData::Unsupported { reason }) => {
                    FsDeltaData::Unavailable { reason: reason.clone() }
                }
                #[allow(unreachable_patterns)]
                _ => FsDeltaData::Unavailable {
                    reason: format!("snapshots of different filesystems ({} vs {})", before.fstype, after.fstype),
                },
            };
            FsDelta { fstype: after.fstype.clone(), device: after.device.clone(), data }
        }

        impl FsDelta {
            /// A few headline numbers; names are prefixed with the filesystem
            /// (`ext4.`, `xfs.`, `btrfs.`). Empty when nothing is comparable.
            pub fn metrics(&self) -> Vec<Metric> {
                match &self.data {
                    $(FsDeltaData::$variant(d) => <$module::$ty as Internals>::metrics(d),)*
                    FsDeltaData::Unavailable { .. } => Vec::new(),
                }
            }
        }

        /// Geometry text of the filesystem on `device` (a block device or an
        /// image file): `dumpe2fs -h` for ext2/3/4, `xfs_info` (or `xfs_db`)
        /// for XFS, `btrfs inspect-internal dump-super` for btrfs; empty for
        /// other types. Fails with the tool's own message.
        pub fn geometry(fstype: &str, device: &Path) -> Result<String> {
            $(if serves::<$module::$ty>(fstype) {
                return <$module::$ty as Internals>::geometry(device);
            })*
            Ok(String::new())
        }

        /// The doctor's facts of a mounted filesystem of type `fstype`
        /// (empty for types without internals).
        pub fn facts(fstype: &str, mount: &Mounted, found: &mut Found) -> FsInternalFacts {
            let mut facts = FsInternalFacts::default();
            $(if fstype == <$module::$ty as Internals>::NAME {
                facts.$module = <$module::$ty as Internals>::facts(mount, found);
            })*
            facts
        }
    };
}

internals! {
    Ext4 => ext4::Ext4Internals,
    Xfs => xfs::XfsInternals,
    Btrfs => btrfs::BtrfsInternals,
}

/// Snapshot the live filesystem-internal state of a mounted filesystem.
///
/// `device_kernel_name` is the block device's kernel name (no `/dev/`).
/// Unknown filesystem types give `FsData::Unsupported`, not an error.
/// Errors: a file that should exist cannot be read or is malformed.
pub fn snapshot(fstype: &str, device_kernel_name: &str, mountpoint: &Path) -> Result<FsSnapshot> {
    snapshot_with_roots(&Roots::default(), fstype, device_kernel_name, mountpoint)
}

/// [`snapshot`] with the proc/sys roots given explicitly.
pub fn snapshot_with_roots(
    roots: &Roots,
    fstype: &str,
    device_kernel_name: &str,
    mountpoint: &Path,
) -> Result<FsSnapshot> {
    let dev = device_kernel_name.trim_start_matches("/dev/");
    let data = read(roots, fstype, dev).unwrap_or_else(|| {
        Ok(FsData::Unsupported { reason: format!("no filesystem-internal snapshot for {fstype}") })
    })?;
    Ok(FsSnapshot { fstype: fstype.to_string(), device: dev.to_string(), mountpoint: mountpoint.to_path_buf(), data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::exec;

    #[test]
    fn parse_error_names_file_and_line() {
        assert_eq!(perr("/proc/x", 7, "bad").to_string(), "/proc/x:7: bad");
        assert_eq!(perr("/proc/x", 0, "empty").to_string(), "/proc/x: empty");
        let e = parse_u64("12a", "f", 3, "count").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("f", 3));
    }

    #[test]
    fn subtraction_saturates_and_pads() {
        assert_eq!(sub(5, 7), -2);
        assert_eq!(sub(u64::MAX, 0), i64::MAX);
        assert_eq!(sub(0, u64::MAX), i64::MIN);
        assert_eq!(sub_vec(&[5, 1], &[2]), vec![3, 1]);
        assert_eq!(sub_vec(&[1], &[0, 4]), vec![1, -4]);
    }

    #[test]
    fn unsupported_fs_is_not_an_error() {
        let roots = Roots { proc: PathBuf::from("/nonexistent"), sys: PathBuf::from("/nonexistent") };
        let s = snapshot_with_roots(&roots, "vfat", "sdb1", Path::new("/mnt")).unwrap();
        assert!(matches!(s.data, FsData::Unsupported { .. }));
        assert!(delta(&s, &s).metrics().is_empty());
        assert!(snapshot_with_roots(&roots, "ext4", "sdb1", Path::new("/mnt")).is_err());
    }

    #[test]
    fn ext4_summary_tabs_optional_and_sections_strict() {
        let tabbed = "optimize_scan: 1\nmax_free_order_lists:\n\tlist_order_0_groups: 2\navg_fragment_size_lists:\n\tlist_order_0_groups: 3\n";
        let plain = tabbed.replace('\t', "");
        let a = ext4::parse_mb_structs_summary(tabbed, "t").unwrap();
        assert_eq!(a, ext4::parse_mb_structs_summary(&plain, "p").unwrap());
        assert_eq!(a.avg_fragment_size_lists, Some(vec![3]));
        // tree_* outside the tree section is an error with its line.
        let e = ext4::parse_mb_structs_summary("max_free_order_lists:\ntree_min: 1\n", "x").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn xfs_stats_reject_non_names() {
        let e = xfs::parse_stats("extent_alloc 1 2\n42 1 2\n", "s").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn geometry_of_unknown_fs_is_empty() {
        assert_eq!(geometry("tmpfs", Path::new("/nonexistent")).unwrap(), "");
    }

    #[test]
    fn geometry_error_names_the_command() {
        let err = geometry("ext4", Path::new("/nonexistent/fslab.img")).unwrap_err();
        assert!(err.to_string().contains("dumpe2fs -h /nonexistent/fslab.img"), "{err}");
    }

    #[test]
    fn ext4_geometry_of_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("ext4.img");
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(64 << 20).unwrap();
        drop(f);
        let img_s = img.to_string_lossy().to_string();
        match exec::run("mkfs.ext4", &["-F", "-q", &img_s], exec::DEFAULT_TIMEOUT) {
            Err(exec::RunError::NotFound) => {
                crate::testsupport::skip("mkfs.ext4 not installed");
                return;
            }
            Ok(o) => assert!(o.success, "mkfs.ext4 failed: {}", o.stderr),
            Err(e) => panic!("mkfs.ext4: {e}"),
        }
        let text = geometry("ext4", &img).unwrap();
        assert!(text.contains("Block count:"), "{text}");
        assert!(text.contains("Blocks per group:"), "{text}");
    }

    #[test]
    fn xfs_geometry_of_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(320 << 20).unwrap();
        drop(f);
        let img_s = img.to_string_lossy().to_string();
        match exec::run("mkfs.xfs", &["-q", "-f", &img_s], exec::DEFAULT_TIMEOUT) {
            Err(exec::RunError::NotFound) => {
                crate::testsupport::skip("mkfs.xfs not installed");
                return;
            }
            Ok(o) => assert!(o.success, "mkfs.xfs failed: {}", o.stderr),
            Err(e) => panic!("mkfs.xfs: {e}"),
        }
        let text = geometry("xfs", &img).unwrap();
        assert!(text.contains("agcount="), "{text}");
    }

    #[test]
    fn btrfs_geometry_of_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("btrfs.img");
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(256 << 20).unwrap();
        drop(f);
        let img_s = img.to_string_lossy().to_string();
        match exec::run("mkfs.btrfs", &["-q", "-f", &img_s], exec::DEFAULT_TIMEOUT) {
            Err(exec::RunError::NotFound) => {
                crate::testsupport::skip("mkfs.btrfs not installed");
                return;
            }
            Ok(o) => assert!(o.success, "mkfs.btrfs failed: {}", o.stderr),
            Err(e) => panic!("mkfs.btrfs: {e}"),
        }
        let text = geometry("btrfs", &img).unwrap();
        assert!(text.contains("num_devices"), "{text}");
    }
}
