//! Facts the doctor's rules are evaluated against: kernel, config,
//! preemption model, CPUs, memory, and for one path its filesystem, mount
//! options, geometry and block-queue settings.
//!
//! Facts are gathered live ([`Facts::gather`]) or assembled from what a
//! user knows about another machine ([`Facts::offline`], [`Facts::set`]).
//! Anything that could not be learned stays `None`; rules treat it as
//! unknown rather than guessing.
//!
//! Rules see facts through flat keys (see [`FACT_KEYS`]), e.g.
//! `kconfig.SQUASHFS_DECOMP_SINGLE`, `mount.mb_optimize_scan`,
//! `queue.read_ahead_kb`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::environment;
use super::kconfig::{KValue, KernelConfig};
use super::version::KernelVersion;
use crate::sys::exec;

/// Preemption model of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreemptModel {
    None,
    Voluntary,
    Full,
    Lazy,
    Rt,
}

impl PreemptModel {
    /// Lower-case name (`none`, `voluntary`, `full`, `lazy`, `rt`).
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptModel::None => "none",
            PreemptModel::Voluntary => "voluntary",
            PreemptModel::Full => "full",
            PreemptModel::Lazy => "lazy",
            PreemptModel::Rt => "rt",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "none" => PreemptModel::None,
            "voluntary" => PreemptModel::Voluntary,
            "full" => PreemptModel::Full,
            "lazy" => PreemptModel::Lazy,
            "rt" => PreemptModel::Rt,
            _ => return None,
        })
    }
}

/// How the facts were obtained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactsMode {
    /// Read from this machine.
    #[default]
    Live,
    /// Supplied by the user for another machine.
    Offline,
}

/// ext4 geometry and state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ext4Facts {
    /// Number of block groups.
    pub block_groups: Option<u64>,
    pub block_size: Option<u64>,
    pub block_count: Option<u64>,
    /// `optimize_scan` as the kernel reports it in
    /// `/proc/fs/ext4/<dev>/mb_structs_summary` (live only).
    pub mb_optimize_scan_reported: Option<bool>,
}

/// XFS geometry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct XfsFacts {
    pub agcount: Option<u64>,
    /// Allocation group size in filesystem blocks.
    pub agsize_blocks: Option<u64>,
    pub block_size: Option<u64>,
}

/// btrfs block-group profiles (`single`, `dup`, `raid1`, …).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BtrfsFacts {
    pub data_profile: Option<String>,
    pub metadata_profile: Option<String>,
    pub system_profile: Option<String>,
}

/// The filesystem holding the inspected path.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FsFacts {
    /// The path asked about.
    pub path: Option<String>,
    pub mount_point: Option<String>,
    /// Filesystem type (`ext4`, `xfs`, …).
    pub fstype: String,
    /// Mount source, usually a block device (`/dev/sda2`).
    pub source: Option<String>,
    /// Kernel name of the block device (`sda2`, `loop3`, `dm-0`).
    pub device_name: Option<String>,
    /// Effective mount options: per-mount and superblock options from
    /// mountinfo, plus `/proc/fs/ext4/<dev>/options` (which lists defaults
    /// too). Flags map to `""`. `None` when unknown.
    pub mount_options: Option<BTreeMap<String, String>>,
    pub ext4: Option<Ext4Facts>,
    pub xfs: Option<XfsFacts>,
    pub btrfs: Option<BtrfsFacts>,
}

/// Settings of the block queue under the filesystem
/// (`/sys/block/<dev>/queue`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueFacts {
    /// Whole-disk kernel name whose queue was read (`sda`, `mmcblk0`).
    pub device: String,
    pub rotational: Option<bool>,
    /// Active I/O scheduler.
    pub scheduler: Option<String>,
    pub available_schedulers: Vec<String>,
    pub read_ahead_kb: Option<u64>,
    pub nr_requests: Option<u64>,
    /// `write back` or `write through`.
    pub write_cache: Option<String>,
    /// Writeback-throttling latency target (0 = off).
    pub wbt_lat_usec: Option<u64>,
}

/// Everything the doctor knows about a system.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub mode: FactsMode,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<KernelVersion>,
    pub kernel_cmdline: Option<String>,
    /// Where the config came from.
    pub kconfig_source: Option<String>,
    /// Options without `CONFIG_`; `None` when no config was available.
    pub kconfig: Option<BTreeMap<String, KValue>>,
    pub preempt_model: Option<PreemptModel>,
    /// How the preemption model was determined.
    pub preempt_source: Option<String>,
    pub cpu_count: Option<usize>,
    pub mem_total_kb: Option<u64>,
    /// Whether the `ext4lazyinit` kernel thread exists (it zeroes inode
    /// tables in the background and disturbs benchmarks).
    pub ext4_lazyinit_running: Option<bool>,
    pub fs: Option<FsFacts>,
    pub queue: Option<QueueFacts>,
    /// What could not be gathered, and why.
    pub notes: Vec<String>,
}

/// A fact as a rule sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum FactValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl FactValue {
    /// Numeric view: numbers, and text that parses as a decimal or `0x`
    /// number (kconfig `HZ=250`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            FactValue::Int(i) => Some(*i as f64),
            FactValue::Float(f) => Some(*f),
            FactValue::Bool(_) => None,
            FactValue::Text(t) => {
                let t = t.trim();
                if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    i64::from_str_radix(h, 16).ok().map(|v| v as f64)
                } else {
                    t.parse::<f64>().ok()
                }
            }
        }
    }
}

impl fmt::Display for FactValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FactValue::Bool(b) => write!(f, "{b}"),
            FactValue::Int(i) => write!(f, "{i}"),
            FactValue::Float(x) => write!(f, "{x:.2}"),
            FactValue::Text(t) if t.is_empty() => write!(f, "(set)"),
            FactValue::Text(t) => write!(f, "{t}"),
        }
    }
}

/// Result of looking a fact up.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// The fact has this value.
    Known(FactValue),
    /// The source is known and does not contain it (a mount option that is
    /// not set, a config option the file does not mention).
    Absent,
    /// Nothing is known about it.
    Unknown,
}

/// Kind of value a fact key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FactKind {
    Bool,
    Int,
    Float,
    Text,
}

/// Documentation of one fact key (or key family, ending in `.`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FactKey {
    /// Key, or prefix ending in `.` for families (`kconfig.`).
    pub key: &'static str,
    pub kind: FactKind,
    pub description: &'static str,
}

const fn fk(key: &'static str, kind: FactKind, description: &'static str) -> FactKey {
    FactKey { key, kind, description }
}

/// Every key rules may use. Families (ending in `.`) take any suffix.
pub const FACT_KEYS: &[FactKey] = &[
    fk("kernel.release", FactKind::Text, "uname -r"),
    fk("kernel.version", FactKind::Text, "mainline version X.Y.Z parsed from the release"),
    fk("kernel.cmdline", FactKind::Text, "the kernel command line"),
    fk("cmdline.", FactKind::Text, "one kernel command-line parameter (flags are \"\")"),
    fk("kconfig.", FactKind::Text, "a config option without CONFIG_: y, m, n, string or number; unmentioned options are absent (= n)"),
    fk("preempt.model", FactKind::Text, "none, voluntary, full, lazy or rt"),
    fk("cpu.count", FactKind::Int, "online CPUs"),
    fk("mem.total_kb", FactKind::Int, "MemTotal in KiB"),
    fk("fs.type", FactKind::Text, "filesystem type of the inspected path"),
    fk("fs.source", FactKind::Text, "mount source (device)"),
    fk("fs.mount_point", FactKind::Text, "mount point"),
    fk("mount.", FactKind::Text, "an effective mount option (flags are \"\")"),
    fk("ext4.groups", FactKind::Int, "ext4 block-group count"),
    fk("ext4.block_size", FactKind::Int, "ext4 block size in bytes"),
    fk("ext4.mb_optimize_scan", FactKind::Bool, "effective mb_optimize_scan: reported by the kernel, else the mount option, else the default (on from 5.13 when groups >= 16)"),
    fk("ext4.lazyinit_running", FactKind::Bool, "the ext4lazyinit thread is running"),
    fk("xfs.agcount", FactKind::Int, "XFS allocation groups"),
    fk("xfs.agsize", FactKind::Int, "XFS allocation group size in blocks"),
    fk("xfs.cpus_per_ag", FactKind::Float, "online CPUs per XFS allocation group"),
    fk("btrfs.data_profile", FactKind::Text, "btrfs data profile (single, dup, raid1, …)"),
    fk("btrfs.metadata_profile", FactKind::Text, "btrfs metadata profile"),
    fk("queue.device", FactKind::Text, "whole-disk kernel name of the device (sda, mmcblk0, loop3)"),
    fk("queue.rotational", FactKind::Bool, "the device reports itself rotational"),
    fk("queue.scheduler", FactKind::Text, "active I/O scheduler"),
    fk("queue.read_ahead_kb", FactKind::Int, "read-ahead in KiB"),
    fk("queue.nr_requests", FactKind::Int, "queue depth limit"),
    fk("queue.write_cache", FactKind::Text, "write back or write through"),
    fk("queue.wbt_lat_usec", FactKind::Int, "writeback-throttling target latency (0 = off)"),
];

/// The documentation entry for `key`, or `None` if rules may not use it.
pub fn fact_key(key: &str) -> Option<&'static FactKey> {
    FACT_KEYS.iter().find(|k| {
        if k.key.ends_with('.') {
            key.len() > k.key.len() && key.starts_with(k.key)
        } else {
            key == k.key
        }
    })
}

/// Smallest group count at which ext4 turns `mb_optimize_scan` on by
/// default (`MB_DEFAULT_LINEAR_SCAN_THRESHOLD`).
pub const EXT4_OPTIMIZE_SCAN_MIN_GROUPS: u64 = 16;

/// First kernel with `mb_optimize_scan` (commit 196e402adf2e).
pub const EXT4_OPTIMIZE_SCAN_SINCE: KernelVersion = KernelVersion::new(5, 13, 0);

fn known<T: Into<FactValue>>(v: Option<T>) -> Lookup {
    v.map_or(Lookup::Unknown, |v| Lookup::Known(v.into()))
}

impl From<bool> for FactValue {
    fn from(b: bool) -> Self {
        FactValue::Bool(b)
    }
}
impl From<u64> for FactValue {
    fn from(v: u64) -> Self {
        FactValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<usize> for FactValue {
    fn from(v: usize) -> Self {
        FactValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for FactValue {
    fn from(v: f64) -> Self {
        FactValue::Float(v)
    }
}
impl From<String> for FactValue {
    fn from(v: String) -> Self {
        FactValue::Text(v)
    }
}
impl From<&str> for FactValue {
    fn from(v: &str) -> Self {
        FactValue::Text(v.to_string())
    }
}

fn map_lookup(map: Option<&BTreeMap<String, String>>, name: &str) -> Lookup {
    match map {
        None => Lookup::Unknown,
        Some(m) => m.get(name).map_or(Lookup::Absent, |v| Lookup::Known(FactValue::Text(v.clone()))),
    }
}

impl Facts {
    /// Facts with nothing known, for building offline facts by hand.
    pub fn empty(mode: FactsMode) -> Self {
        Facts { mode, ..Default::default() }
    }

    /// Look a fact up by key (see [`FACT_KEYS`]).
    pub fn get(&self, key: &str) -> Lookup {
        let fs = self.fs.as_ref();
        let q = self.queue.as_ref();
        if let Some(name) = key.strip_prefix("kconfig.") {
            return match &self.kconfig {
                None => Lookup::Unknown,
                Some(m) => {
                    m.get(name).map_or(Lookup::Absent, |v| Lookup::Known(FactValue::Text(v.as_plain().to_string())))
                }
            };
        }
        if let Some(name) = key.strip_prefix("mount.") {
            return map_lookup(fs.and_then(|f| f.mount_options.as_ref()), name);
        }
        if let Some(name) = key.strip_prefix("cmdline.") {
            let params = self.kernel_cmdline.as_deref().map(parse_cmdline);
            return map_lookup(params.as_ref(), name);
        }
        match key {
            "kernel.release" => known(self.kernel_release.clone()),
            "kernel.version" => known(self.kernel_version.map(|v| v.to_string())),
            "kernel.cmdline" => known(self.kernel_cmdline.clone()),
            "preempt.model" => known(self.preempt_model.map(|m| m.as_str())),
            "cpu.count" => known(self.cpu_count),
            "mem.total_kb" => known(self.mem_total_kb),
            "fs.type" => known(fs.map(|f| f.fstype.clone()).filter(|t| !t.is_empty())),
            "fs.source" => known(fs.and_then(|f| f.source.clone())),
            "fs.mount_point" => known(fs.and_then(|f| f.mount_point.clone())),
            "ext4.groups" => known(self.ext4().and_then(|e| e.block_groups)),
            "ext4.block_size" => known(self.ext4().and_then(|e| e.block_size)),
            "ext4.mb_optimize_scan" => known(self.ext4_mb_optimize_scan().map(|(v, _)| v)),
            "ext4.lazyinit_running" => known(self.ext4_lazyinit_running),
            "xfs.agcount" => known(self.xfs().and_then(|x| x.agcount)),
            "xfs.agsize" => known(self.xfs().and_then(|x| x.agsize_blocks)),
            "xfs.cpus_per_ag" => known(self.xfs_cpus_per_ag()),
            "btrfs.data_profile" => known(self.btrfs().and_then(|b| b.data_profile.clone())),
            "btrfs.metadata_profile" => known(self.btrfs().and_then(|b| b.metadata_profile.clone())),
            "queue.device" => known(q.map(|q| q.device.clone()).filter(|d| !d.is_empty())),
            "queue.rotational" => known(q.and_then(|q| q.rotational)),
            "queue.scheduler" => known(q.and_then(|q| q.scheduler.clone())),
            "queue.read_ahead_kb" => known(q.and_then(|q| q.read_ahead_kb)),
            "queue.nr_requests" => known(q.and_then(|q| q.nr_requests)),
            "queue.write_cache" => known(q.and_then(|q| q.write_cache.clone())),
            "queue.wbt_lat_usec" => known(q.and_then(|q| q.wbt_lat_usec)),
            _ => Lookup::Unknown,
        }
    }

    fn ext4(&self) -> Option<&Ext4Facts> {
        self.fs.as_ref().and_then(|f| f.ext4.as_ref())
    }
    fn xfs(&self) -> Option<&XfsFacts> {
        self.fs.as_ref().and_then(|f| f.xfs.as_ref())
    }
    fn btrfs(&self) -> Option<&BtrfsFacts> {
        self.fs.as_ref().and_then(|f| f.btrfs.as_ref())
    }

    /// Online CPUs per XFS allocation group.
    pub fn xfs_cpus_per_ag(&self) -> Option<f64> {
        let ag = self.xfs()?.agcount.filter(|&a| a > 0)?;
        Some(self.cpu_count? as f64 / ag as f64)
    }

    /// Effective `mb_optimize_scan` of an ext4 filesystem and why: what the
    /// kernel reports, else an explicit mount option, else the kernel's
    /// default (off before 5.13; from 5.13 on when the filesystem has at
    /// least 16 block groups).
    pub fn ext4_mb_optimize_scan(&self) -> Option<(bool, String)> {
        let fs = self.fs.as_ref().filter(|f| f.fstype == "ext4")?;
        if let Some(v) = fs.ext4.as_ref().and_then(|e| e.mb_optimize_scan_reported) {
            return Some((v, "as reported in mb_structs_summary".to_string()));
        }
        if let Some(v) = fs.mount_options.as_ref().and_then(|m| m.get("mb_optimize_scan")) {
            return match v.as_str() {
                "0" => Some((false, "mount option mb_optimize_scan=0".to_string())),
                "1" => Some((true, "mount option mb_optimize_scan=1".to_string())),
                _ => None,
            };
        }
        let version = self.kernel_version?;
        if version < EXT4_OPTIMIZE_SCAN_SINCE {
            return Some((false, format!("kernel {version} predates mb_optimize_scan")));
        }
        let groups = fs.ext4.as_ref()?.block_groups?;
        let on = groups >= EXT4_OPTIMIZE_SCAN_MIN_GROUPS;
        Some((
            on,
            format!("default: {groups} block groups {} {EXT4_OPTIMIZE_SCAN_MIN_GROUPS}", if on { ">=" } else { "<" }),
        ))
    }

    /// Set a fact from text, as `fslab doctor --set KEY=VALUE` and the
    /// rule fixtures do. Setting a `kconfig.` or `mount.` key on facts
    /// without a config or option list starts an empty one, so every other
    /// option of that family becomes absent.
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        let bad = |what: &str| format!("fact {key}: `{value}` is not {what}");
        let int = || value.trim().parse::<u64>().map_err(|_| bad("a non-negative integer"));
        let boolean = || match value.trim() {
            "true" | "1" | "yes" | "y" => Ok(true),
            "false" | "0" | "no" | "n" => Ok(false),
            _ => Err(bad("true or false")),
        };
        if let Some(name) = key.strip_prefix("kconfig.") {
            if name.is_empty() {
                return Err("fact kconfig.: missing option name".to_string());
            }
            let line = format!("CONFIG_{name}={value}");
            let parsed = KernelConfig::parse(&line, key).map_err(|e| e.message)?;
            let map = self.kconfig.get_or_insert_with(BTreeMap::new);
            map.extend(parsed.options);
            return Ok(());
        }
        if let Some(name) = key.strip_prefix("mount.") {
            if name.is_empty() {
                return Err("fact mount.: missing option name".to_string());
            }
            self.fs_mut().mount_options.get_or_insert_with(BTreeMap::new).insert(name.to_string(), value.to_string());
            return Ok(());
        }
        if let Some(name) = key.strip_prefix("cmdline.") {
            if name.is_empty() {
                return Err("fact cmdline.: missing parameter name".to_string());
            }
            let mut cmdline = self.kernel_cmdline.take().unwrap_or_default();
            if !cmdline.is_empty() {
                cmdline.push(' ');
            }
            if value.is_empty() {
                cmdline.push_str(name);
            } else {
                cmdline.push_str(&format!("{name}={value}"));
            }
            self.kernel_cmdline = Some(cmdline);
            return Ok(());
        }
        match key {
            "kernel.release" | "kernel.version" => {
                let v = KernelVersion::parse(value)?;
                self.kernel_version = Some(v);
                self.kernel_release = Some(value.trim().to_string());
            }
            "kernel.cmdline" => self.kernel_cmdline = Some(value.to_string()),
            "preempt.model" => {
                self.preempt_model =
                    Some(PreemptModel::parse(value).ok_or_else(|| bad("none, voluntary, full, lazy or rt"))?);
                self.preempt_source = Some("set by user".to_string());
            }
            "cpu.count" => self.cpu_count = Some(int()? as usize),
            "mem.total_kb" => self.mem_total_kb = Some(int()?),
            "fs.type" => self.fs_mut().fstype = value.trim().to_string(),
            "fs.source" => self.fs_mut().source = Some(value.to_string()),
            "fs.mount_point" => self.fs_mut().mount_point = Some(value.to_string()),
            "ext4.groups" => {
                let v = int()?;
                self.fs_mut().ext4.get_or_insert_with(Default::default).block_groups = Some(v);
            }
            "ext4.block_size" => {
                let v = int()?;
                self.fs_mut().ext4.get_or_insert_with(Default::default).block_size = Some(v);
            }
            "ext4.mb_optimize_scan" => {
                let v = boolean()?;
                self.fs_mut().ext4.get_or_insert_with(Default::default).mb_optimize_scan_reported = Some(v);
            }
            "ext4.lazyinit_running" => self.ext4_lazyinit_running = Some(boolean()?),
            "xfs.agcount" => {
                let v = int()?;
                self.fs_mut().xfs.get_or_insert_with(Default::default).agcount = Some(v);
            }
            "xfs.agsize" => {
                let v = int()?;
                self.fs_mut().xfs.get_or_insert_with(Default::default).agsize_blocks = Some(v);
            }
            "btrfs.data_profile" => {
                self.fs_mut().btrfs.get_or_insert_with(Default::default).data_profile = Some(value.to_lowercase())
            }
            "btrfs.metadata_profile" => {
                self.fs_mut().btrfs.get_or_insert_with(Default::default).metadata_profile = Some(value.to_lowercase())
            }
            "queue.device" => self.queue_mut().device = value.to_string(),
            "queue.rotational" => self.queue_mut().rotational = Some(boolean()?),
            "queue.scheduler" => self.queue_mut().scheduler = Some(value.to_string()),
            "queue.read_ahead_kb" => self.queue_mut().read_ahead_kb = Some(int()?),
            "queue.nr_requests" => self.queue_mut().nr_requests = Some(int()?),
            "queue.write_cache" => self.queue_mut().write_cache = Some(value.to_string()),
            "queue.wbt_lat_usec" => self.queue_mut().wbt_lat_usec = Some(int()?),
            _ if fact_key(key).is_some() => return Err(format!("fact {key} is derived and cannot be set")),
            _ => return Err(format!("unknown fact `{key}`")),
        }
        Ok(())
    }

    fn fs_mut(&mut self) -> &mut FsFacts {
        self.fs.get_or_insert_with(Default::default)
    }
    fn queue_mut(&mut self) -> &mut QueueFacts {
        self.queue.get_or_insert_with(Default::default)
    }

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
        let mut facts = Facts::empty(FactsMode::Offline);
        facts.kernel_cmdline = Some(String::new());
        facts.notes.push("offline: kernel command line assumed empty (boot defaults)".to_string());
        if let Some(release) = kernel_release {
            facts.kernel_version =
                Some(KernelVersion::parse(release).map_err(|e| anyhow::anyhow!("--kernel-release: {e}"))?);
            facts.kernel_release = Some(release.trim().to_string());
        }
        if let Some(path) = kconfig_path {
            let cfg = KernelConfig::from_file(path)?;
            facts.kconfig_source = Some(cfg.source.clone());
            facts.kconfig = Some(cfg.options);
        }
        if let Some(t) = fs {
            let t = t.trim();
            if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_') {
                bail!("--fs: `{t}` is not a filesystem type");
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

    /// Short human summary, one fact per line.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let unknown = || "unknown".to_string();
        out.push(format!(
            "kernel      {}{}",
            self.kernel_release.clone().unwrap_or_else(unknown),
            self.kernel_version.map(|v| format!(" (version {v})")).unwrap_or_default()
        ));
        out.push(format!(
            "config      {}",
            match (&self.kconfig_source, &self.kconfig) {
                (Some(s), Some(m)) => format!("{s} ({} options)", m.len()),
                (None, Some(m)) => format!("{} options", m.len()),
                _ => unknown(),
            }
        ));
        out.push(format!(
            "preemption  {}{}",
            self.preempt_model.map(|m| m.as_str().to_string()).unwrap_or_else(unknown),
            self.preempt_source.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ));
        out.push(format!(
            "cpus        {}   memory {}",
            self.cpu_count.map(|c| c.to_string()).unwrap_or_else(unknown),
            self.mem_total_kb.map(|m| format!("{:.1} GiB", m as f64 / 1048576.0)).unwrap_or_else(unknown)
        ));
        if let Some(fs) = &self.fs {
            out.push(format!(
                "filesystem  {} on {}{}",
                if fs.fstype.is_empty() { "?" } else { &fs.fstype },
                fs.source.clone().unwrap_or_else(|| "?".into()),
                fs.mount_point.as_ref().map(|m| format!(" at {m}")).unwrap_or_default()
            ));
            if let Some(opts) = &fs.mount_options {
                let joined: Vec<String> =
                    opts.iter().map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") }).collect();
                out.push(format!("options     {}", joined.join(",")));
            }
            if let Some(e) = &fs.ext4 {
                let mut s =
                    format!("ext4        {} block groups", e.block_groups.map_or("?".into(), |g| g.to_string()));
                if let Some((on, why)) = self.ext4_mb_optimize_scan() {
                    s.push_str(&format!(", mb_optimize_scan {} ({why})", if on { "on" } else { "off" }));
                }
                out.push(s);
            }
            if let Some(x) = &fs.xfs {
                out.push(format!(
                    "xfs         agcount {}, agsize {} blocks{}",
                    x.agcount.map_or("?".into(), |v| v.to_string()),
                    x.agsize_blocks.map_or("?".into(), |v| v.to_string()),
                    self.xfs_cpus_per_ag().map(|r| format!(", {r:.1} CPUs per AG")).unwrap_or_default()
                ));
            }
            if let Some(b) = &fs.btrfs {
                out.push(format!(
                    "btrfs       data {}, metadata {}, system {}",
                    b.data_profile.as_deref().unwrap_or("?"),
                    b.metadata_profile.as_deref().unwrap_or("?"),
                    b.system_profile.as_deref().unwrap_or("?")
                ));
            }
        }
        if let Some(q) = &self.queue {
            let opt = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
            out.push(format!(
                "queue       {}: rotational {}, scheduler {}, read_ahead_kb {}, nr_requests {}, write cache {}",
                q.device,
                q.rotational.map_or("?".into(), |r| if r { "yes".to_string() } else { "no".to_string() }),
                q.scheduler.as_deref().unwrap_or("?"),
                opt(q.read_ahead_kb),
                opt(q.nr_requests),
                q.write_cache.as_deref().unwrap_or("?")
            ));
        }
        if let Some(l) = self.ext4_lazyinit_running {
            out.push(format!("ext4lazyinit {}", if l { "running" } else { "not running" }));
        }
        out
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Work out the preemption model, most authoritative source first:
/// debugfs `sched/preempt`, then `preempt=` on the command line (only with
/// `PREEMPT_DYNAMIC`), then the config, then the `uname -v` banner.
pub(crate) fn preempt_model(
    kconfig: Option<&BTreeMap<String, KValue>>,
    cmdline: Option<&str>,
    debugfs: Option<&str>,
    uname_v: Option<&str>,
) -> (Option<PreemptModel>, Option<String>) {
    if let Some(m) = debugfs.and_then(parse_debugfs_preempt) {
        return (Some(m), Some("/sys/kernel/debug/sched/preempt".to_string()));
    }
    let on = |name: &str| kconfig.is_some_and(|k| k.get(name) == Some(&KValue::Yes));
    if kconfig.is_some() {
        if on("PREEMPT_RT") || on("PREEMPT_RT_FULL") {
            return (Some(PreemptModel::Rt), Some("kernel config: PREEMPT_RT=y".to_string()));
        }
        if on("PREEMPT_DYNAMIC") {
            if let Some(m) =
                cmdline.map(parse_cmdline).and_then(|p| p.get("preempt").cloned()).and_then(|v| PreemptModel::parse(&v))
            {
                return (Some(m), Some(format!("command line preempt={}", m.as_str())));
            }
        }
        for (name, model) in [
            ("PREEMPT_LAZY", PreemptModel::Lazy),
            ("PREEMPT", PreemptModel::Full),
            ("PREEMPT_VOLUNTARY", PreemptModel::Voluntary),
            ("PREEMPT_NONE", PreemptModel::None),
        ] {
            if on(name) {
                return (Some(model), Some(format!("kernel config: {name}=y")));
            }
        }
    }
    if let Some(v) = uname_v {
        if v.contains("PREEMPT_RT") {
            return (Some(PreemptModel::Rt), Some("uname -v".to_string()));
        }
        if v.split_whitespace().any(|w| w == "PREEMPT") {
            return (Some(PreemptModel::Full), Some("uname -v".to_string()));
        }
    }
    (None, None)
}

/// `none voluntary (full) lazy` → `Full`.
pub(crate) fn parse_debugfs_preempt(text: &str) -> Option<PreemptModel> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
        .and_then(PreemptModel::parse)
}

/// Kernel command-line parameters before `--` (what follows goes to init).
/// Double quotes group a value with spaces.
pub(crate) fn parse_cmdline(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    for c in cmdline.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            c if c.is_whitespace() && !in_quotes => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    for w in words {
        if w == "--" {
            break;
        }
        match w.split_once('=') {
            Some((k, v)) => out.insert(k.to_string(), v.to_string()),
            None => out.insert(w, String::new()),
        };
    }
    out
}

/// Parse a user-supplied mount option list (`rw,noatime,commit=60`).
/// Errors name the item position.
pub fn parse_mount_options(s: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(out);
    }
    for (i, item) in s.split(',').enumerate() {
        let item = item.trim();
        let pos = i + 1;
        if item.is_empty() {
            return Err(format!("option {pos} is empty (doubled or trailing comma?) in `{s}`"));
        }
        let (name, value) = item.split_once('=').unwrap_or((item, ""));
        if name.is_empty() {
            return Err(format!("option {pos} (`{item}`) has no name"));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err(format!("option {pos} (`{item}`): `{name}` is not an option name"));
        }
        if item.contains('=') && value.is_empty() {
            return Err(format!("option {pos} (`{item}`) has an empty value"));
        }
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}

/// Lenient option-list merge for kernel-produced lists (mountinfo,
/// `/proc/fs/ext4/*/options`, which is one option per line).
fn merge_options(into: &mut BTreeMap<String, String>, list: &str) {
    for item in list.split([',', '\n']).map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        into.insert(k.to_string(), v.to_string());
    }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    pub major: u32,
    pub minor: u32,
    /// Root of the mount within its filesystem.
    pub root: String,
    pub mount_point: String,
    /// Per-mount options (field 6).
    pub mount_options: String,
    pub fstype: String,
    pub source: String,
    /// Superblock options (after the ` - ` separator).
    pub super_options: String,
}

/// Undo mountinfo's octal escapes (`\040` for space).
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse `/proc/self/mountinfo` text. Malformed lines are errors naming
/// the line (the kernel never writes them; a fixture might).
pub fn parse_mountinfo(text: &str, source: &str) -> Result<Vec<MountInfo>> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what: &str| anyhow::anyhow!("{source}:{}: {what}", idx + 1);
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-").ok_or_else(|| bad("no ` - ` separator"))?;
        if sep < 6 || fields.len() < sep + 3 {
            return Err(bad("too few fields"));
        }
        let (major, minor) = fields[2].split_once(':').ok_or_else(|| bad("bad major:minor"))?;
        out.push(MountInfo {
            major: major.parse().map_err(|_| bad("bad major number"))?,
            minor: minor.parse().map_err(|_| bad("bad minor number"))?,
            root: unescape_mountinfo(fields[3]),
            mount_point: unescape_mountinfo(fields[4]),
            mount_options: fields[5].to_string(),
            fstype: fields[sep + 1].to_string(),
            source: unescape_mountinfo(fields[sep + 2]),
            super_options: fields.get(sep + 3).map(|s| s.to_string()).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The mount that holds `path` (already canonical): the longest mount
/// point that is a path prefix; among equals the last one (it is on top).
pub fn find_mount<'a>(mounts: &'a [MountInfo], path: &Path) -> Option<&'a MountInfo> {
    let mut best: Option<&MountInfo> = None;
    for m in mounts {
        if path.starts_with(Path::new(&m.mount_point))
            && best.is_none_or(|b| m.mount_point.len() >= b.mount_point.len())
        {
            best = Some(m);
        }
    }
    best
}

/// ext4 geometry from `dumpe2fs -h` text.
pub fn parse_dumpe2fs(text: &str) -> Ext4Facts {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().parse().ok()).flatten()
        })
    };
    let block_count = field("Block count");
    let per_group = field("Blocks per group").filter(|&g| g > 0);
    let first = field("First block").unwrap_or(0);
    let block_groups = match (block_count, per_group) {
        (Some(c), Some(g)) if c > first => Some((c - first).div_ceil(g)),
        _ => None,
    };
    Ext4Facts { block_groups, block_size: field("Block size"), block_count, mb_optimize_scan_reported: None }
}

/// XFS geometry from `xfs_info` / `xfs_db -c info` text.
pub fn parse_xfs_info(text: &str) -> XfsFacts {
    let field = |name: &str, line_prefix: Option<&str>| -> Option<u64> {
        text.lines().filter(|l| line_prefix.is_none_or(|p| l.trim_start().starts_with(p))).find_map(|l| {
            l.split(|c: char| c.is_whitespace() || c == ',')
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        })
    };
    XfsFacts {
        agcount: field("agcount", None),
        agsize_blocks: field("agsize", None),
        block_size: field("bsize", Some("data")),
    }
}

/// btrfs profiles from `btrfs filesystem df` text
/// (`Data, single: total=…`).
pub fn parse_btrfs_df(text: &str) -> BtrfsFacts {
    let mut out = BtrfsFacts::default();
    for line in text.lines() {
        let Some((head, _)) = line.split_once(':') else { continue };
        let Some((kind, profile)) = head.split_once(',') else { continue };
        let profile = Some(profile.trim().to_lowercase());
        match kind.trim() {
            "Data" => out.data_profile = profile,
            "Metadata" => out.metadata_profile = profile,
            "System" => out.system_profile = profile,
            _ => {}
        }
    }
    out
}

/// `none [mq-deadline] kyber` → (`mq-deadline`, all three).
pub fn parse_scheduler(text: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let mut all = Vec::new();
    for w in text.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            active = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    // A queue with a single scheduler prints it without brackets.
    if active.is_none() && all.len() == 1 {
        active = all.first().cloned();
    }
    (active, all)
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
    }
}

fn gather_fs(path: &Path, notes: &mut Vec<String>) -> Result<(FsFacts, Option<QueueFacts>)> {
    let canon = std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let mounts = parse_mountinfo(&text, "/proc/self/mountinfo")?;
    let m = find_mount(&mounts, &canon)
        .ok_or_else(|| anyhow::anyhow!("{} is on no mount in /proc/self/mountinfo", canon.display()))?;
    let mut fs = FsFacts {
        path: Some(canon.display().to_string()),
        mount_point: Some(m.mount_point.clone()),
        fstype: m.fstype.clone(),
        source: Some(m.source.clone()),
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

    if fs.fstype == "ext4" {
        let mut ext4 = Ext4Facts::default();
        if let Some(name) = &fs.device_name {
            let proc_dir = PathBuf::from(format!("/proc/fs/ext4/{name}"));
            match std::fs::read_to_string(proc_dir.join("options")) {
                Ok(t) => merge_options(&mut options, &t),
                Err(e) => notes.push(format!("{}/options: {e}", proc_dir.display())),
            }
            if let Ok(t) = std::fs::read_to_string(proc_dir.join("mb_structs_summary")) {
                ext4.mb_optimize_scan_reported =
                    t.lines().find_map(|l| l.trim().strip_prefix("optimize_scan:").map(|v| v.trim() == "1"));
            }
        }
        match environment::geometry("ext4", Path::new(&m.source)) {
            Ok(t) => {
                let g = parse_dumpe2fs(&t);
                ext4.block_groups = g.block_groups;
                ext4.block_size = g.block_size;
                ext4.block_count = g.block_count;
            }
            Err(e) => notes.push(format!("ext4 geometry: {e:#}")),
        }
        fs.ext4 = Some(ext4);
    } else if fs.fstype == "xfs" {
        match environment::geometry("xfs", Path::new(&m.source)) {
            Ok(t) => fs.xfs = Some(parse_xfs_info(&t)),
            Err(e) => notes.push(format!("xfs geometry: {e:#}")),
        }
    } else if fs.fstype == "btrfs" {
        match exec::run("btrfs", &["filesystem", "df", "-b", &m.mount_point], exec::DEFAULT_TIMEOUT) {
            Ok(o) if o.success => fs.btrfs = Some(parse_btrfs_df(&o.stdout)),
            Ok(o) => notes.push(format!(
                "btrfs filesystem df {}: {}",
                m.mount_point,
                exec::first_line(&o.stderr).unwrap_or("failed")
            )),
            Err(e) => notes.push(format!("btrfs filesystem df: {e}")),
        }
    }
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

    #[test]
    fn mountinfo_parsing_and_lookup() {
        let text = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
36 27 7:3 / /mnt/my\\040disk rw,noatime shared:1 master:2 - xfs /dev/loop3 rw,attr2,inode64
40 36 7:4 / /mnt/my\\040disk/inner rw - btrfs /dev/loop4 rw,space_cache=v2
";
        let m = parse_mountinfo(text, "mi").unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[2].mount_point, "/mnt/my disk");
        assert_eq!(m[2].fstype, "xfs");
        assert_eq!(m[2].source, "/dev/loop3");
        assert_eq!(m[2].super_options, "rw,attr2,inode64");
        assert_eq!((m[2].major, m[2].minor), (7, 3));
        assert_eq!(find_mount(&m, Path::new("/mnt/my disk/x")).unwrap().fstype, "xfs");
        assert_eq!(find_mount(&m, Path::new("/mnt/my disk/inner/y")).unwrap().fstype, "btrfs");
        assert_eq!(find_mount(&m, Path::new("/mnt/my diskette")).unwrap().fstype, "ext4");
        assert_eq!(find_mount(&m, Path::new("/proc/1")).unwrap().fstype, "proc");
        let e = parse_mountinfo("1 2 3:4 / /x rw\n", "mi").unwrap_err();
        assert_eq!(e.to_string(), "mi:1: no ` - ` separator");
        let e = parse_mountinfo("\n1 2 a:4 / /x rw - ext4 /dev/x rw\n", "mi").unwrap_err();
        assert_eq!(e.to_string(), "mi:2: bad major number");
    }

    #[test]
    fn dumpe2fs_geometry() {
        let text = "Filesystem volume name:   <none>\nBlock count:              65536\nFirst block:              1\nBlock size:               1024\nBlocks per group:         8192\n";
        let g = parse_dumpe2fs(text);
        assert_eq!(g.block_groups, Some(8));
        assert_eq!(g.block_size, Some(1024));
        let big = "Block count:              7864320\nFirst block:              0\nBlock size:               4096\nBlocks per group:         32768\n";
        assert_eq!(parse_dumpe2fs(big).block_groups, Some(240));
        assert_eq!(parse_dumpe2fs("").block_groups, None);
    }

    #[test]
    fn xfs_and_btrfs_geometry() {
        let xfs = "meta-data=/dev/loop0             isize=512    agcount=4, agsize=20480 blks\n         =                       sectsz=512   attr=2, projid32bit=1\ndata     =                       bsize=4096   blocks=81920, imaxpct=25\nnaming   =version 2              bsize=4096   ascii-ci=0, ftype=1\n";
        let x = parse_xfs_info(xfs);
        assert_eq!((x.agcount, x.agsize_blocks, x.block_size), (Some(4), Some(20480), Some(4096)));
        let df = "Data, single: total=8388608, used=0\nSystem, DUP: total=8388608, used=16384\nMetadata, DUP: total=33554432, used=131072\nGlobalReserve, single: total=5767168, used=0\n";
        let b = parse_btrfs_df(df);
        assert_eq!(b.data_profile.as_deref(), Some("single"));
        assert_eq!(b.metadata_profile.as_deref(), Some("dup"));
        assert_eq!(b.system_profile.as_deref(), Some("dup"));
    }

    #[test]
    fn scheduler_cmdline_and_preempt() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq"),
            (Some("mq-deadline".to_string()), vec!["none".into(), "mq-deadline".into(), "kyber".into(), "bfq".into()])
        );
        assert_eq!(parse_scheduler("none").0.as_deref(), Some("none"));
        assert_eq!(parse_scheduler("[none] mq-deadline").0.as_deref(), Some("none"));
        let p = parse_cmdline("ro quiet slub_debug=FZ preempt=full x=\"a b\" -- init=1 slub_debug=-");
        assert_eq!(p.get("slub_debug").map(String::as_str), Some("FZ"));
        assert_eq!(p.get("quiet").map(String::as_str), Some(""));
        assert_eq!(p.get("x").map(String::as_str), Some("a b"));
        assert!(!p.contains_key("init"));
        assert_eq!(parse_debugfs_preempt("none voluntary (full) lazy\n"), Some(PreemptModel::Full));
        assert_eq!(parse_debugfs_preempt("none voluntary full"), None);

        let cfg = |t: &str| KernelConfig::parse(t, "c").unwrap().options;
        let dynamic = cfg("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        assert_eq!(preempt_model(Some(&dynamic), None, None, None).0, Some(PreemptModel::Voluntary));
        assert_eq!(preempt_model(Some(&dynamic), Some("preempt=full"), None, None).0, Some(PreemptModel::Full));
        assert_eq!(
            preempt_model(Some(&dynamic), Some("preempt=full"), Some("none (voluntary) full"), None).0,
            Some(PreemptModel::Voluntary)
        );
        let fixed = cfg("CONFIG_PREEMPT_NONE=y\n");
        assert_eq!(preempt_model(Some(&fixed), Some("preempt=full"), None, None).0, Some(PreemptModel::None));
        let rt = cfg("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n");
        assert_eq!(preempt_model(Some(&rt), None, None, None).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_RT Tue")).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT Tue")).0, Some(PreemptModel::Full));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_DYNAMIC")).0, None);
    }

    #[test]
    fn mount_option_lists() {
        let m = parse_mount_options("rw,noatime,commit=60,mb_optimize_scan=1").unwrap();
        assert_eq!(m.get("commit").map(String::as_str), Some("60"));
        assert_eq!(m.get("noatime").map(String::as_str), Some(""));
        assert!(parse_mount_options("").unwrap().is_empty());
        for (bad, msg) in [
            ("rw,,noatime", "option 2 is empty"),
            ("rw,=1", "option 2 (`=1`) has no name"),
            ("rw,commit=", "option 2 (`commit=`) has an empty value"),
            ("a b", "option 1 (`a b`): `a b` is not an option name"),
        ] {
            let e = parse_mount_options(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

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
        let e = Facts::offline(None, None, Some("rw,,x"), None).unwrap_err().to_string();
        assert!(e.starts_with("--mount-options: option 2 is empty"), "{e}");
        std::fs::write(&cfg, "CONFIG_A=y\nnonsense\n").unwrap();
        let e = Facts::offline(Some(&cfg), None, None, None).unwrap_err().to_string();
        assert_eq!(e, format!("{}:2: expected `CONFIG_NAME=value`, `# CONFIG_NAME is not set`, a comment or a blank line, found `nonsense`", cfg.display()));
    }

    #[test]
    fn set_and_derived_facts() {
        let mut f = Facts::empty(FactsMode::Offline);
        f.set("kernel.release", "5.15.0-91-generic").unwrap();
        f.set("fs.type", "ext4").unwrap();
        assert_eq!(f.get("ext4.mb_optimize_scan"), Lookup::Unknown);
        f.set("ext4.groups", "80").unwrap();
        assert_eq!(f.get("ext4.mb_optimize_scan"), Lookup::Known(FactValue::Bool(true)));
        f.set("ext4.groups", "8").unwrap();
        assert_eq!(f.get("ext4.mb_optimize_scan"), Lookup::Known(FactValue::Bool(false)));
        f.set("mount.mb_optimize_scan", "1").unwrap();
        assert_eq!(f.get("ext4.mb_optimize_scan"), Lookup::Known(FactValue::Bool(true)));
        f.set("kernel.release", "5.10.0").unwrap();
        assert!(f.ext4_mb_optimize_scan().unwrap().0, "explicit option wins over version");

        let mut x = Facts::empty(FactsMode::Offline);
        x.set("fs.type", "xfs").unwrap();
        x.set("xfs.agcount", "4").unwrap();
        assert_eq!(x.get("xfs.cpus_per_ag"), Lookup::Unknown);
        x.set("cpu.count", "144").unwrap();
        assert_eq!(x.get("xfs.cpus_per_ag"), Lookup::Known(FactValue::Float(36.0)));

        assert!(f.set("cpu.count", "many").unwrap_err().contains("not a non-negative integer"));
        assert!(f.set("xfs.cpus_per_ag", "3").unwrap_err().contains("derived"));
        assert!(f.set("bogus.key", "3").unwrap_err().contains("unknown fact"));
        assert!(f.set("kconfig.HZ", "fast").is_err());
        assert!(f.set("preempt.model", "sometimes").is_err());
        f.set("cmdline.slub_debug", "FZ").unwrap();
        f.set("cmdline.quiet", "").unwrap();
        assert_eq!(f.get("cmdline.slub_debug"), Lookup::Known(FactValue::Text("FZ".into())));
        assert_eq!(f.get("cmdline.quiet"), Lookup::Known(FactValue::Text("".into())));
        for k in FACT_KEYS {
            assert!(fact_key(k.key).is_some() || k.key.ends_with('.'));
        }
        assert!(fact_key("kconfig.").is_none() && fact_key("kconfig.X").is_some());
    }

    /// Unmounts on drop, so a failed assertion leaves no mount behind.
    struct MountGuard(PathBuf);
    impl Drop for MountGuard {
        fn drop(&mut self) {
            let _ = exec::run("umount", &[&self.0.to_string_lossy()], exec::DEFAULT_TIMEOUT);
        }
    }

    /// Make `fstype` on a sparse image, loop-mount it, gather facts for a
    /// path inside. `None` when this machine cannot (not root, tool missing).
    fn gather_on_loop(fstype: &str, size_mb: u64, mkfs: &[&str]) -> Option<Facts> {
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
        match exec::run("mount", &["-o", "loop", "-t", fstype, &img_s, &mnt_s], exec::DEFAULT_TIMEOUT) {
            Ok(o) if o.success => {}
            other => {
                crate::testsupport::skip(&format!("cannot loop-mount {fstype} here ({other:?})"));
                return None;
            }
        }
        let _guard = MountGuard(mnt.clone());
        std::fs::create_dir(mnt.join("sub")).unwrap();
        Some(Facts::gather(Some(&mnt.join("sub"))).unwrap())
    }

    #[test]
    fn gather_on_loop_mounted_filesystems() {
        if let Some(f) = gather_on_loop("ext4", 64, &["mkfs.ext4", "-F", "-q"]) {
            let fs = f.fs.as_ref().unwrap();
            assert_eq!(fs.fstype, "ext4");
            assert!(fs.device_name.as_deref().is_some_and(|d| d.starts_with("loop")), "{fs:?}");
            let e = fs.ext4.as_ref().unwrap();
            assert_eq!(e.block_groups, Some(8), "{f:#?}");
            assert_eq!(e.mb_optimize_scan_reported, Some(false), "{f:#?}");
            assert_eq!(f.ext4_mb_optimize_scan().map(|x| x.0), Some(false));
            // /proc/fs/ext4/<dev>/options lists defaults such as data=ordered.
            assert_eq!(f.get("mount.data"), Lookup::Known(FactValue::Text("ordered".into())), "{f:#?}");
            let q = f.queue.as_ref().unwrap();
            assert!(q.device.starts_with("loop") && q.read_ahead_kb.is_some(), "{q:?}");
        }
        if let Some(f) = gather_on_loop("xfs", 320, &["mkfs.xfs", "-q", "-f", "-d", "agcount=4"]) {
            let x = f.fs.as_ref().unwrap().xfs.as_ref().unwrap();
            assert_eq!(x.agcount, Some(4), "{f:#?}");
            assert!(x.agsize_blocks.is_some());
        }
        if let Some(f) = gather_on_loop("btrfs", 256, &["mkfs.btrfs", "-q", "-f", "-m", "dup", "-d", "single"]) {
            let b = f.fs.as_ref().unwrap().btrfs.as_ref().unwrap();
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
