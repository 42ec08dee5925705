//! What a mount turned out to be: the effective options read back and
//! checked against the requested ones, mount points under a directory.
//! Mounting and unmounting themselves are [`crate::sys::mount`]'s.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::record::MountFacts;

/// One line of `/proc/self/mountinfo` (the shared parser's type).
pub use crate::sys::mountinfo::MountInfo as MountInfoLine;

/// Parse mountinfo text leniently (lines that are not mountinfo are
/// skipped); octal escapes in paths are decoded. See [`crate::sys::mountinfo`].
pub fn parse_mountinfo(text: &str) -> Vec<MountInfoLine> {
    crate::sys::mountinfo::parse_lenient(text)
}

/// The kernel's view of the mount at `target` (the last one, if stacked).
pub fn facts(target: &Path) -> Result<Option<MountFacts>> {
    let text = std::fs::read_to_string(crate::sys::mountinfo::PATH).context("reading /proc/self/mountinfo")?;
    let target = target.to_string_lossy();
    Ok(parse_mountinfo(&text).into_iter().rev().find(|m| m.mountpoint == target).map(|m| MountFacts {
        source: m.source,
        fstype: m.fstype,
        mount_options: m.mount_options,
        super_options: m.super_options,
        fs_options: None,
    }))
}

/// Options that mount(8) consumes or that the kernel never echoes back.
const NOT_ECHOED: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "async",
    "strictatime",
    "loud",
    "rw",
    "exec",
    "suid",
    "dev",
];

/// Every requested option must be visible in the effective options
/// (mountinfo per-mount and superblock options, plus the ext4 options file).
/// An option the kernel silently dropped is an error.
pub fn verify_options(requested: &str, facts: &MountFacts) -> Result<()> {
    let mut effective: Vec<&str> = facts.mount_options.split(',').chain(facts.super_options.split(',')).collect();
    if let Some(extra) = &facts.fs_options {
        effective.extend(extra.lines().map(str::trim));
    }
    for option in requested.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if NOT_ECHOED.contains(&option) {
            continue;
        }
        let present = effective.iter().any(|e| {
            *e == option
                // btrfs echoes `compress=zstd` as `compress=zstd:3`.
                || e.strip_prefix(option).is_some_and(|rest| rest.starts_with(':'))
                // sizes may be echoed in other units (`logbsize=256k`): compare keys only for those.
                || (option.contains('=') && size_equal(option, e))
        });
        if !present {
            bail!(
                "mount option `{option}` is not in effect: the kernel reports `{}`{}",
                [facts.mount_options.as_str(), facts.super_options.as_str()].join(" | "),
                facts
                    .fs_options
                    .as_ref()
                    .map(|o| format!(" and fs options `{}`", o.lines().collect::<Vec<_>>().join(",")))
                    .unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// `key=256k` vs `key=262144`: same key and same byte count.
fn size_equal(requested: &str, effective: &str) -> bool {
    let (Some((rk, rv)), Some((ek, ev))) = (requested.split_once('='), effective.split_once('=')) else { return false };
    if rk != ek {
        return false;
    }
    match (crate::units::Bytes::parse(rv), crate::units::Bytes::parse(ev)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Mount points at or below `dir`.
pub fn mounted_under(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    parse_mountinfo(&text).into_iter().map(|m| m.mountpoint).filter(|p| Path::new(p).starts_with(&dir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "36 35 98:0 / /mnt/with\\040space rw,noatime master:1 - ext4 /dev/loop3 rw,errors=continue\n\
                          37 35 98:0 / /plain rw - tmpfs fslab-tb-1 rw,size=1024k\n";

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let lines = parse_mountinfo(SAMPLE);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].mountpoint, "/mnt/with space");
        assert_eq!(lines[0].mount_options, "rw,noatime");
        assert_eq!(lines[0].fstype, "ext4");
        assert_eq!(lines[0].source, "/dev/loop3");
        assert_eq!(lines[1].super_options, "rw,size=1024k");
        // An escape above \377 is no byte: kept as text (this overflowed a u8 before).
        let odd = parse_mountinfo("38 35 98:0 / /mnt/a\\777 rw - ext4 /dev/loop4 rw\nnot mountinfo\n");
        assert_eq!(odd.len(), 1);
        assert_eq!(odd[0].mountpoint, "/mnt/a\\777");
    }

    fn facts_of(mount: &str, sup: &str, fs: Option<&str>) -> MountFacts {
        MountFacts {
            source: "/dev/loop0".into(),
            fstype: "ext4".into(),
            mount_options: mount.into(),
            super_options: sup.into(),
            fs_options: fs.map(str::to_string),
        }
    }

    #[test]
    fn options_hidden_in_mountinfo_are_found_in_fs_options() {
        let f = facts_of("rw,noatime", "rw", Some("rw\nmb_optimize_scan=0\ndata=ordered\n"));
        verify_options("noatime,mb_optimize_scan=0", &f).unwrap();
        let err = verify_options("noatime,mb_optimize_scan=1", &f).unwrap_err().to_string();
        assert!(err.contains("mb_optimize_scan=1"), "{err}");
    }

    #[test]
    fn btrfs_compress_level_and_sizes_match() {
        verify_options("compress=zstd", &facts_of("rw", "rw,compress=zstd:3", None)).unwrap();
        verify_options("logbsize=256k", &facts_of("rw", "rw,logbsize=262144", None)).unwrap();
        assert!(verify_options("logbsize=128k", &facts_of("rw", "rw,logbsize=262144", None)).is_err());
        verify_options("defaults,noauto", &facts_of("rw", "rw", None)).unwrap();
    }
}
