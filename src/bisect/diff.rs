//! Split the difference between two variants into atomic changes.
//!
//! One [`Change`] per independently applicable setting:
//!
//! * **mount options**: the option string is split at commas; a token's key
//!   is the text before `=` (`commit=30` → `commit`, `noatime` → `noatime`).
//!   Each key whose token differs (added, removed or given another value) is
//!   one change. `relatime` → `noatime` is therefore two changes (remove one,
//!   add the other), which can be applied independently.
//! * **mkfs arguments**: grouped into `[flag, value]` when a `-flag` token is
//!   followed by a token that does not start with `-` (`["-E", "x=1"]`,
//!   `["-b", "4096"]`), else a token is a group of its own (`-F`, `-Ox`).
//!   A group's key is its first token; a flag repeated in one list gets a
//!   `#2`, `#3`… suffix. Each key whose group differs is one change. The
//!   value of a group (e.g. the comma list of `-E`) is not split further.
//! * **sysfs tunables**: one change per tunable name.
//! * **throttle**: one change per field (`read_bps`, `write_bps`,
//!   `read_iops`, `write_iops`).
//! * **read_ahead_kb**, **scheduler**, **size**: one change each.
//!
//! The filesystem type is not a setting: variants of different filesystems
//! cannot be bisected (an error).

use anyhow::{bail, Result};
use serde::Serialize;

use crate::experiment::VariantConfig;
use crate::units::Bytes;

/// Which setting a change touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingKind {
    MountOption,
    Mkfs,
    Sysfs,
    Throttle,
    ReadAheadKb,
    Scheduler,
    Size,
}

/// One atomic difference: `key` goes from `good` to `bad` (None = absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub kind: SettingKind,
    /// Mount option name, mkfs flag, sysfs tunable, throttle field; for
    /// read_ahead_kb, scheduler and size the setting's name.
    pub key: String,
    /// Value in the good variant, as text (mkfs groups joined by spaces).
    pub good: Option<String>,
    /// Value in the bad variant.
    pub bad: Option<String>,
    /// The raw tokens of the bad side, for mount options and mkfs groups.
    #[serde(skip)]
    bad_tokens: Vec<String>,
}

impl Change {
    fn new(kind: SettingKind, key: &str, good: Option<String>, bad: Option<String>) -> Change {
        Change { kind, key: key.to_string(), good, bad, bad_tokens: Vec::new() }
    }

    /// Short human label, e.g. `throttle.write_bps: none → 8MiB`.
    pub fn label(&self) -> String {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        let prefix = match self.kind {
            SettingKind::MountOption => "mount",
            SettingKind::Mkfs => "mkfs",
            SettingKind::Sysfs => "sysfs",
            SettingKind::Throttle => "throttle",
            SettingKind::ReadAheadKb | SettingKind::Scheduler | SettingKind::Size => {
                return format!("{}: {} → {}", self.key, side(&self.good), side(&self.bad))
            }
        };
        let tokens = matches!(self.kind, SettingKind::MountOption | SettingKind::Mkfs);
        match (&self.good, &self.bad) {
            (None, Some(b)) if tokens => format!("{prefix} +{b}"),
            (Some(g), None) if tokens => format!("{prefix} -{g}"),
            _ => format!("{prefix}.{}: {} → {}", self.key, side(&self.good), side(&self.bad)),
        }
    }
}

fn mount_tokens(mount: &str) -> Vec<(String, String)> {
    mount
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| (t.split('=').next().unwrap_or(t).to_string(), t.to_string()))
        .collect()
}

/// Group mkfs arguments as documented in the module: `(key, tokens)`.
pub fn mkfs_groups(args: &[String]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let tok = &args[i];
        let takes_value = tok.starts_with('-') && args.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        let group: Vec<String> = if takes_value { vec![tok.clone(), args[i + 1].clone()] } else { vec![tok.clone()] };
        i += group.len();
        let seen = groups.iter().filter(|(k, _)| k == tok || k.starts_with(&format!("{tok}#"))).count();
        let key = if seen == 0 { tok.clone() } else { format!("{tok}#{}", seen + 1) };
        groups.push((key, group));
    }
    groups
}

fn keyed_changes(kind: SettingKind, good: &[(String, Vec<String>)], bad: &[(String, Vec<String>)]) -> Vec<Change> {
    let mut keys: Vec<&String> = good.iter().map(|(k, _)| k).collect();
    for (k, _) in bad {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for key in keys {
        let g = good.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let b = bad.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        if g != b {
            let mut c = Change::new(kind, key, g.map(|v| v.join(" ")), b.map(|v| v.join(" ")));
            c.bad_tokens = b.cloned().unwrap_or_default();
            out.push(c);
        }
    }
    out
}

fn opt<T: ToString>(v: &Option<T>) -> Option<String> {
    v.as_ref().map(T::to_string)
}

/// Every atomic difference from `good` to `bad`, in a stable order: mount
/// options, mkfs groups, sysfs, throttle, read_ahead_kb, scheduler, size.
pub fn split(good: &VariantConfig, bad: &VariantConfig) -> Result<Vec<Change>> {
    if good.testbed.fs != bad.testbed.fs {
        bail!(
            "variants `{}` ({}) and `{}` ({}) use different filesystems; bisect-options only splits settings of one filesystem",
            good.name, good.testbed.fs, bad.name, bad.testbed.fs
        );
    }
    if good.kernel != bad.kernel || good.vm != bad.vm {
        let place = |v: &VariantConfig| v.kernel.as_ref().map_or("the host".to_string(), |k| k.release.clone());
        bail!(
            "variants `{}` ({}) and `{}` ({}) run on different kernels or VMs; bisect-options only splits testbed \
             settings (bisect kernels by commit with `fslab bisect-commits`)",
            good.name,
            place(good),
            bad.name,
            place(bad)
        );
    }
    let mut out = Vec::new();
    let single = |m: Vec<(String, String)>| m.into_iter().map(|(k, t)| (k, vec![t])).collect::<Vec<_>>();
    out.extend(keyed_changes(
        SettingKind::MountOption,
        &single(mount_tokens(&good.testbed.mount)),
        &single(mount_tokens(&bad.testbed.mount)),
    ));
    out.extend(keyed_changes(SettingKind::Mkfs, &mkfs_groups(&good.testbed.mkfs), &mkfs_groups(&bad.testbed.mkfs)));
    let sysfs =
        |v: &VariantConfig| v.testbed.sysfs.iter().map(|(k, x)| (k.clone(), vec![x.clone()])).collect::<Vec<_>>();
    out.extend(keyed_changes(SettingKind::Sysfs, &sysfs(good), &sysfs(bad)));
    let (gt, bt) = (&good.testbed.throttle, &bad.testbed.throttle);
    for (key, g, b) in [
        ("read_bps", opt(&gt.read_bps), opt(&bt.read_bps)),
        ("write_bps", opt(&gt.write_bps), opt(&bt.write_bps)),
        ("read_iops", opt(&gt.read_iops), opt(&bt.read_iops)),
        ("write_iops", opt(&gt.write_iops), opt(&bt.write_iops)),
    ] {
        if g != b {
            out.push(Change::new(SettingKind::Throttle, key, g, b));
        }
    }
    if good.testbed.read_ahead_kb != bad.testbed.read_ahead_kb {
        out.push(Change::new(
            SettingKind::ReadAheadKb,
            "read_ahead_kb",
            opt(&good.testbed.read_ahead_kb),
            opt(&bad.testbed.read_ahead_kb),
        ));
    }
    if good.testbed.scheduler != bad.testbed.scheduler {
        out.push(Change::new(
            SettingKind::Scheduler,
            "scheduler",
            good.testbed.scheduler.clone(),
            bad.testbed.scheduler.clone(),
        ));
    }
    if good.testbed.size != bad.testbed.size {
        out.push(Change::new(
            SettingKind::Size,
            "size",
            Some(good.testbed.size.to_string()),
            Some(bad.testbed.size.to_string()),
        ));
    }
    Ok(out)
}

/// `good` with every change in `changes` applied (their bad values), named `name`.
pub fn apply(good: &VariantConfig, bad: &VariantConfig, changes: &[&Change], name: &str) -> VariantConfig {
    let mut v = good.clone();
    v.name = name.to_string();
    let set_keyed = |groups: &mut Vec<(String, Vec<String>)>, c: &Change| match (
        groups.iter().position(|(k, _)| *k == c.key),
        c.bad.is_some(),
    ) {
        (Some(i), true) => groups[i].1 = c.bad_tokens.clone(),
        (Some(i), false) => drop(groups.remove(i)),
        (None, true) => groups.push((c.key.clone(), c.bad_tokens.clone())),
        (None, false) => {}
    };
    let mut mount: Vec<(String, Vec<String>)> =
        mount_tokens(&good.testbed.mount).into_iter().map(|(k, t)| (k, vec![t])).collect();
    let mut mkfs = mkfs_groups(&good.testbed.mkfs);
    for c in changes {
        match c.kind {
            SettingKind::MountOption => set_keyed(&mut mount, c),
            SettingKind::Mkfs => set_keyed(&mut mkfs, c),
            SettingKind::Sysfs => {
                let pos = v.testbed.sysfs.iter().position(|(k, _)| *k == c.key);
                match (pos, &c.bad) {
                    (Some(i), Some(b)) => v.testbed.sysfs[i].1 = b.clone(),
                    (Some(i), None) => drop(v.testbed.sysfs.remove(i)),
                    (None, Some(b)) => v.testbed.sysfs.push((c.key.clone(), b.clone())),
                    (None, None) => {}
                }
            }
            SettingKind::Throttle => match c.key.as_str() {
                "read_bps" => v.testbed.throttle.read_bps = bad.testbed.throttle.read_bps,
                "write_bps" => v.testbed.throttle.write_bps = bad.testbed.throttle.write_bps,
                "read_iops" => v.testbed.throttle.read_iops = bad.testbed.throttle.read_iops,
                _ => v.testbed.throttle.write_iops = bad.testbed.throttle.write_iops,
            },
            SettingKind::ReadAheadKb => v.testbed.read_ahead_kb = bad.testbed.read_ahead_kb,
            SettingKind::Scheduler => v.testbed.scheduler = bad.testbed.scheduler.clone(),
            SettingKind::Size => v.testbed.size = Bytes(bad.testbed.size.0),
        }
    }
    v.testbed.mount = mount.into_iter().flat_map(|(_, t)| t).collect::<Vec<_>>().join(",");
    v.testbed.mkfs = mkfs.into_iter().flat_map(|(_, t)| t).collect();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{FsKind, TestbedConfig};

    fn variant(name: &str) -> VariantConfig {
        let mut testbed = TestbedConfig::new(FsKind::Ext4);
        testbed.size = Bytes(256 << 20);
        VariantConfig { name: name.into(), testbed, kernel: None, vm: None }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mkfs_groups_keep_flag_and_value_together() {
        let g =
            mkfs_groups(&strings(&["-F", "-E", "lazy_itable_init=0,x=1", "-b", "4096", "-O^has_journal", "-E", "y=2"]));
        let keys: Vec<&str> = g.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["-F", "-E", "-b", "-O^has_journal", "-E#2"]);
        assert_eq!(g[1].1, strings(&["-E", "lazy_itable_init=0,x=1"]));
        assert_eq!(g[2].1, strings(&["-b", "4096"]));
    }

    #[test]
    fn split_finds_each_atomic_difference_and_apply_rebuilds_bad() {
        let mut good = variant("good");
        good.testbed.mount = "relatime,commit=5,data=ordered".into();
        good.testbed.mkfs = strings(&["-E", "lazy_itable_init=0", "-b", "4096"]);
        good.testbed.sysfs = vec![("mb_max_to_scan".into(), "200".into())];
        good.testbed.throttle.write_iops = Some(500);
        let mut bad = good.clone();
        bad.name = "bad".into();
        bad.testbed.mount = "noatime,commit=30,data=ordered".into();
        bad.testbed.mkfs = strings(&["-E", "lazy_itable_init=1", "-b", "4096", "-I", "128"]);
        bad.testbed.sysfs = vec![("mb_max_to_scan".into(), "2000".into()), ("mb_stats".into(), "1".into())];
        bad.testbed.throttle.write_bps = Some(Bytes(8 << 20));
        bad.testbed.throttle.write_iops = None;
        bad.testbed.read_ahead_kb = Some(16);
        bad.testbed.scheduler = Some("none".into());

        let changes = split(&good, &bad).unwrap();
        let described: Vec<(SettingKind, &str)> = changes.iter().map(|c| (c.kind, c.key.as_str())).collect();
        assert_eq!(
            described,
            [
                (SettingKind::MountOption, "relatime"),
                (SettingKind::MountOption, "commit"),
                (SettingKind::MountOption, "noatime"),
                (SettingKind::Mkfs, "-E"),
                (SettingKind::Mkfs, "-I"),
                (SettingKind::Sysfs, "mb_max_to_scan"),
                (SettingKind::Sysfs, "mb_stats"),
                (SettingKind::Throttle, "write_bps"),
                (SettingKind::Throttle, "write_iops"),
                (SettingKind::ReadAheadKb, "read_ahead_kb"),
                (SettingKind::Scheduler, "scheduler"),
            ]
        );
        assert_eq!(changes[3].good.as_deref(), Some("-E lazy_itable_init=0"));
        assert_eq!(changes[3].bad.as_deref(), Some("-E lazy_itable_init=1"));
        assert_eq!(changes[7].label(), format!("throttle.write_bps: none → {}", Bytes(8 << 20)));
        assert_eq!(changes[2].label(), "mount +noatime");

        // Nothing applied: good itself. Everything applied: bad's settings.
        let none = apply(&good, &bad, &[], "x");
        assert_eq!(none, VariantConfig { name: "x".into(), ..good.clone() });
        let all: Vec<&Change> = changes.iter().collect();
        let full = apply(&good, &bad, &all, "bad");
        assert_eq!(split(&full, &bad).unwrap(), vec![]);
        let mut opts: Vec<&str> = full.testbed.mount.split(',').collect();
        opts.sort();
        assert_eq!(opts, ["commit=30", "data=ordered", "noatime"]);
        assert_eq!(full.testbed.mkfs, bad.testbed.mkfs);

        // One change alone touches only its setting.
        let only = apply(&good, &bad, &[&changes[7]], "t");
        assert_eq!(only.testbed.throttle.write_bps, Some(Bytes(8 << 20)));
        assert_eq!(only.testbed.throttle.write_iops, Some(500));
        assert_eq!(only.testbed.mount, good.testbed.mount);
        let mount_only = apply(&good, &bad, &[&changes[1]], "m");
        assert_eq!(mount_only.testbed.mount, "relatime,commit=30,data=ordered");
    }

    #[test]
    fn identical_variants_have_no_changes_and_other_fs_is_an_error() {
        let good = variant("a");
        assert!(split(&good, &variant("b")).unwrap().is_empty());
        let mut xfs = variant("b");
        xfs.testbed.fs = FsKind::Xfs;
        assert!(split(&good, &xfs).unwrap_err().to_string().contains("different filesystems"));
    }
}
