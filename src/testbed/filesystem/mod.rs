//! Filesystem kinds. Each kind is one file describing itself behind
//! [`Filesystem`] (how it is made, where its tunables and internals live,
//! what its image options are); [`filesystems!`] below is the one list that
//! names them all, and everything else (parsing `fs = "…"`, error messages,
//! provisioning, snapshots, docs) goes through that list.

mod btrfs;
mod dir;
mod erofs;
mod ext4;
mod squashfs;
mod tmpfs;
mod xfs;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::config::ImageOptions;
use crate::fsinternal::FsSnapshot;
use crate::keys::{Source, Table};

pub use erofs::parse_compressors as erofs_help_compressors;

/// What a testbed of a kind is made on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    /// A writable filesystem made with mkfs on a block device (a loop device
    /// over an image fslab creates, or a user's `--device`).
    Block,
    /// A read-only image packed from the workload's tree, loop-mounted `ro`.
    Image,
    /// Memory (tmpfs): no block device, no throttle.
    Memory,
    /// An existing directory: nothing is provisioned.
    Directory,
}

/// One kind of filesystem fslab can build testbeds of.
pub trait Filesystem: Sync {
    /// The name in experiment files, `mount -t` and `/proc/self/mountinfo`.
    fn name(&self) -> &'static str;

    fn medium(&self) -> Medium;

    /// One line for documentation and `--help`.
    fn about(&self) -> &'static str;

    /// The kernel module that provides it, loaded when it is not built in.
    fn module(&self) -> Option<&'static str> {
        Some(self.name())
    }

    /// mkfs program and its "force, quiet" flags (block kinds).
    fn mkfs(&self) -> Option<(&'static str, &'static [&'static str])> {
        None
    }

    /// Directory of a mounted testbed's sysfs tunables.
    fn sysfs_dir(&self, _device: &str, _mountpoint: &Path) -> Result<PathBuf> {
        bail!("{} has no sysfs tunables", self.name())
    }

    /// Effective options the kernel reports outside mountinfo (ext4's
    /// `/proc/fs/ext4/<dev>/options`), for the dropped-option check.
    fn fs_options(&self, _device: &str) -> Option<String> {
        None
    }

    /// Geometry text for the record (`dumpe2fs -h`, `xfs_info`, …) of the
    /// filesystem on `device` (or in `image`, for image kinds).
    fn geometry(&self, device: &Path, _image: Option<&Path>) -> Option<String> {
        crate::fsinternal::geometry(self.name(), device).ok().filter(|g| !g.is_empty())
    }

    /// Filesystem-internal snapshot of a mounted testbed, for kinds whose
    /// internals fslab reads (those `fsinternal` lists).
    fn snapshot(&self, device: &str, mountpoint: &Path) -> Option<Result<FsSnapshot>> {
        crate::fsinternal::reads(self.name()).then(|| crate::fsinternal::snapshot(self.name(), device, mountpoint))
    }

    /// Called after unmount, before the device is detached.
    fn release(&self, _device: &Path) {}

    /// Read-only image kinds: how images of this kind are packed.
    fn image(&self) -> Option<&dyn ImageFormat> {
        None
    }
}

/// The `compressor` and `level` keys both image formats have: a compressor
/// the packer knows (`default` when absent) and a level in that compressor's
/// range (`levels` is `None` for a compressor that takes no level).
fn resolve_compression(
    fs: &str,
    compressor: &Option<Spanned<String>>,
    default: &str,
    known: &[&str],
    level: &Option<Spanned<i64>>,
    levels: fn(&str) -> Option<RangeInclusive<i64>>,
    src: &Source,
) -> Result<(String, Option<u32>)> {
    let compressor = match compressor {
        None => default.to_string(),
        Some(c) if known.contains(&c.get_ref().as_str()) => c.get_ref().clone(),
        Some(c) => {
            let msg = format!("unknown {fs} compressor `{}` (one of {})", c.get_ref(), known.join(", "));
            return Err(src.err(c.span(), "compressor", msg));
        }
    };
    let Some(l) = level else { return Ok((compressor, None)) };
    let Some(range) = levels(&compressor) else {
        return Err(src.err(l.span(), "level", format!("{fs} compressor `{compressor}` takes no level")));
    };
    if !range.contains(l.get_ref()) {
        let msg = format!("{fs} {compressor} takes a level from {} to {}", range.start(), range.end());
        return Err(src.err(l.span(), "level", msg));
    }
    Ok((compressor, Some(*l.get_ref() as u32)))
}

/// How a read-only image kind is packed, and the variant keys that say so.
pub trait ImageFormat: Sync {
    /// Variant keys only image kinds take (the union over image kinds is
    /// split off a variant's table before its common keys are parsed).
    fn keys(&self) -> &'static [&'static str];

    /// Check this kind's keys (already split off the variant's table) and
    /// apply the packer's defaults.
    fn resolve(&self, keys: Table, src: &Source) -> Result<ImageOptions>;

    /// The packer program and its full argument list.
    fn pack_command(
        &self,
        options: &ImageOptions,
        extra: &[String],
        staging: &Path,
        image: &Path,
    ) -> Result<(&'static str, Vec<String>)>;

    /// The argument that makes the packer print its version (part of an
    /// image's cache key: another packer version may pack other bytes).
    fn version_arg(&self) -> &'static str {
        "--version"
    }

    /// Checks before packing that only the host can answer (e.g. whether
    /// this mkfs.erofs was built with the compressor).
    fn check_host(&self, _options: &ImageOptions) -> Result<()> {
        Ok(())
    }

    /// Why the mount options cannot work, if they cannot (checked at parse time).
    fn check_mount(&self, mount: &str) -> std::result::Result<(), String> {
        for option in mount.split(',').filter(|o| !o.is_empty()) {
            if option == "rw" {
                return Err("`rw`: an image is read-only".to_string());
            }
        }
        Ok(())
    }

    /// A hint to add when mounting with `mount` options failed.
    fn mount_failure_hint(&self, _mount: &str) -> Option<String> {
        None
    }

    /// The packing options as one line (dry run, report).
    fn describe(&self, options: &ImageOptions) -> String;
}

/// Declares the filesystem kinds: each `Variant => module::Type` line adds
/// a kind (its file implements [`Filesystem`] for `Type`).
macro_rules! filesystems {
    ($($variant:ident => $module:ident::$ty:ident),* $(,)?) => {
        /// What a variant's testbed is.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase", tag = "type", content = "path")]
        pub enum FsKind {
            $($variant,)*
            /// An existing directory: no provisioning, no throttling.
            Dir(PathBuf),
        }

        /// Every kind that is named by itself (all but `dir:PATH`).
        const NAMED: &[&dyn Filesystem] = &[$(&$module::$ty),*];

        impl FsKind {
            /// The kind's description.
            pub fn fs(&self) -> &'static dyn Filesystem {
                match self {
                    $(FsKind::$variant => &$module::$ty,)*
                    FsKind::Dir(_) => &dir::Dir,
                }
            }

            fn named(name: &str) -> Option<FsKind> {
                match name {
                    $(n if n == $module::$ty.name() => Some(FsKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

filesystems! {
    Ext4 => ext4::Ext4,
    Xfs => xfs::Xfs,
    Btrfs => btrfs::Btrfs,
    Tmpfs => tmpfs::Tmpfs,
    Squashfs => squashfs::Squashfs,
    Erofs => erofs::Erofs,
}

impl FsKind {
    /// `ext4`, `xfs`, …, or `dir:/absolute/path` (which must exist).
    pub fn parse(value: &str) -> std::result::Result<FsKind, String> {
        let value = value.trim();
        if let Some(kind) = FsKind::named(value) {
            return Ok(kind);
        }
        if let Some(dir) = value.strip_prefix("dir:") {
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() || !dir.is_dir() {
                return Err(format!("`{}` is not an existing absolute directory", dir.display()));
            }
            return Ok(FsKind::Dir(dir));
        }
        Err(format!("unknown filesystem `{value}` ({} or dir:/path)", names().join(", ")))
    }

    /// The name `mount -t` and `/proc/self/mountinfo` use.
    pub fn fstype(&self) -> &'static str {
        self.fs().name()
    }

    pub fn medium(&self) -> Medium {
        self.fs().medium()
    }

    /// Backed by a block device (a loop device over an image, or `--device`).
    pub fn is_block(&self) -> bool {
        matches!(self.medium(), Medium::Block | Medium::Image)
    }

    /// A read-only image packed from the workload's tree
    /// ([`crate::workload::Workload::populate`]) before it is mounted.
    pub fn is_read_only_image(&self) -> bool {
        self.medium() == Medium::Image
    }
}

impl std::fmt::Display for FsKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsKind::Dir(p) => write!(f, "dir:{}", p.display()),
            other => f.write_str(other.fstype()),
        }
    }
}

/// Names of the kinds, in list order.
pub fn names() -> Vec<&'static str> {
    NAMED.iter().map(|fs| fs.name()).collect()
}

/// Every kind's description, in list order, `dir` last (docs, doctor).
pub fn all() -> impl Iterator<Item = &'static dyn Filesystem> {
    NAMED.iter().copied().chain(std::iter::once(&dir::Dir as &dyn Filesystem))
}

/// Every key some image kind takes (split off a variant before its common
/// keys are parsed, so a misplaced one gets a message naming its owner).
pub fn image_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = Vec::new();
    for fs in NAMED {
        for key in fs.image().map_or(&[][..], |i| i.keys()) {
            if !keys.contains(key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// The image kinds that take `key`.
pub fn image_kinds_with(key: &str) -> Vec<&'static str> {
    NAMED.iter().filter(|fs| fs.image().is_some_and(|i| i.keys().contains(&key))).map(|fs| fs.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kind_parses_back_and_round_trips_through_json() {
        for name in names() {
            let kind = FsKind::parse(name).unwrap();
            assert_eq!(kind.fstype(), name);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<FsKind>(&json).unwrap(), kind);
        }
        assert!(FsKind::parse("zfs").unwrap_err().contains("ext4, xfs, btrfs"));
        assert_eq!(FsKind::parse("dir:/").unwrap(), FsKind::Dir(PathBuf::from("/")));
        assert_eq!(serde_json::to_value(FsKind::Ext4).unwrap(), serde_json::json!({"type": "ext4"}));
    }

    #[test]
    fn image_keys_name_their_owners() {
        assert_eq!(image_kinds_with("compressor"), vec!["squashfs", "erofs"]);
        assert_eq!(image_kinds_with("block_size"), vec!["squashfs"]);
        assert_eq!(image_kinds_with("pcluster_size"), vec!["erofs"]);
    }
}
