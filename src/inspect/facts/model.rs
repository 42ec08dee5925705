//! The fact model: what the doctor can know about a system, the flat keys
//! rules use ([`FACT_KEYS`]), looking facts up and setting them by key, and
//! the facts derived from others (effective `mb_optimize_scan`, CPUs per
//! XFS allocation group).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::parse::parse_cmdline;
use crate::fsinternal::btrfs::BtrfsFacts;
use crate::fsinternal::ext4::Ext4Facts;
use crate::fsinternal::xfs::XfsFacts;
use crate::fsinternal::FsInternalFacts;
use crate::inspect::kconfig::{KValue, KernelConfig};
use crate::inspect::version::KernelVersion;

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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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
    /// Size of the filesystem in bytes (live: blocks × block size;
    /// offline: `--fs-size`).
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// What the filesystem's kind reads of its internals (`ext4`, `xfs`,
    /// `btrfs` keys; see `fsinternal`).
    #[serde(flatten)]
    pub internals: FsInternalFacts,
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
    /// `/sys/block/mmcblkN/device/type` for MMC devices: `SD` or `MMC`.
    #[serde(default)]
    pub mmc_type: Option<String>,
}

/// What kind of storage the filesystem is on, as far as performance goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// SD card (an MMC device of type SD).
    Sdcard,
    /// eMMC (an MMC device of type MMC).
    Emmc,
    /// An MMC device of unknown type (SD card or eMMC).
    Mmc,
    /// Rotating disk.
    Hdd,
    /// Solid-state disk (SATA/SAS or NVMe).
    Ssd,
    /// Loop, device-mapper, RAM or network devices: the real medium is
    /// elsewhere.
    Other,
}

impl DeviceKind {
    /// Kinds a user can name (`--device-kind`, `device.kind=`).
    pub const NAMES: &'static str = "sdcard, emmc, mmc, hdd, ssd or other";

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Sdcard => "sdcard",
            DeviceKind::Emmc => "emmc",
            DeviceKind::Mmc => "mmc",
            DeviceKind::Hdd => "hdd",
            DeviceKind::Ssd => "ssd",
            DeviceKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "sdcard" | "sd" => DeviceKind::Sdcard,
            "emmc" => DeviceKind::Emmc,
            "mmc" => DeviceKind::Mmc,
            "hdd" => DeviceKind::Hdd,
            "ssd" | "nvme" => DeviceKind::Ssd,
            "other" => DeviceKind::Other,
            _ => return None,
        })
    }
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
    /// Whether the `ext4lazyinit` kernel thread exists. It zeroes inode
    /// tables of filesystems made with lazy_itable_init, and since 5.13 it
    /// also prefetches block bitmaps after every read-write mount, so its
    /// presence alone does not say which it is doing (see
    /// `Ext4Facts::itable_unzeroed_groups`).
    pub ext4_lazyinit_running: Option<bool>,
    /// The storage kind when a user said it (`--device-kind`); otherwise
    /// derived from the queue (see [`Facts::device_kind`]).
    #[serde(default)]
    pub device_kind: Option<DeviceKind>,
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
    fk("fs.size", FactKind::Int, "filesystem size in bytes"),
    fk("device.kind", FactKind::Text, "storage kind: sdcard, emmc, mmc (SD or eMMC), hdd, ssd, other (loop, dm, …); given, or derived from the queue"),
    fk("mount.", FactKind::Text, "an effective mount option (flags are \"\")"),
    fk("ext4.groups", FactKind::Int, "ext4 block-group count (read, or estimated from fs.size with mke2fs defaults)"),
    fk("ext4.block_size", FactKind::Int, "ext4 block size in bytes"),
    fk("ext4.mb_optimize_scan", FactKind::Bool, "effective mb_optimize_scan: reported by the kernel, else the mount option, else the default (on from 5.13 when groups >= 16)"),
    fk("ext4.lazyinit_running", FactKind::Bool, "the ext4lazyinit kernel thread exists (inode-table zeroing or, since 5.13, block-bitmap prefetch after a mount)"),
    fk("ext4.itable_unzeroed_groups", FactKind::Int, "block groups whose inode table is not yet zeroed (what lazy init still has to write)"),
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
            "fs.size" => known(fs.and_then(|f| f.size_bytes)),
            "device.kind" => known(self.device_kind().map(|(k, _)| k.as_str())),
            "ext4.groups" => known(self.ext4_block_groups().map(|(g, _)| g)),
            "ext4.block_size" => known(self.ext4().and_then(|e| e.block_size)),
            "ext4.mb_optimize_scan" => known(self.ext4_mb_optimize_scan().map(|(v, _)| v)),
            "ext4.lazyinit_running" => known(self.ext4_lazyinit_running),
            "ext4.itable_unzeroed_groups" => known(self.ext4().and_then(|e| e.itable_unzeroed_groups)),
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
        self.fs.as_ref().and_then(|f| f.internals.ext4.as_ref())
    }
    fn xfs(&self) -> Option<&XfsFacts> {
        self.fs.as_ref().and_then(|f| f.internals.xfs.as_ref())
    }
    fn btrfs(&self) -> Option<&BtrfsFacts> {
        self.fs.as_ref().and_then(|f| f.internals.btrfs.as_ref())
    }

    /// ext4 block groups and where the number comes from: read from the
    /// filesystem, else estimated from its size the way mke2fs lays it out
    /// by default (4 KiB blocks and 128 MiB groups from 512 MiB, 1 KiB
    /// blocks and 8 MiB groups below), for an ext4 (or not yet named)
    /// filesystem.
    pub fn ext4_block_groups(&self) -> Option<(u64, &'static str)> {
        let fs = self.fs.as_ref()?;
        if let Some(g) = fs.internals.ext4.as_ref().and_then(|e| e.block_groups) {
            return Some((g, "read from the filesystem"));
        }
        if !(fs.fstype.is_empty() || fs.fstype == "ext4") {
            return None;
        }
        let size = fs.size_bytes.filter(|&s| s > 0)?;
        let group = if size >= 512 << 20 { 128u64 << 20 } else { 8 << 20 };
        Some((size.div_ceil(group), "estimated from the filesystem size with mke2fs defaults"))
    }

    /// The storage kind and how it is known: as given, else from the queue
    /// (MMC devices by their type, then the rotational flag; loop,
    /// device-mapper, md, RAM and network block devices are `other`).
    pub fn device_kind(&self) -> Option<(DeviceKind, &'static str)> {
        if let Some(k) = self.device_kind {
            return Some((k, "given"));
        }
        let q = self.queue.as_ref().filter(|q| !q.device.is_empty())?;
        let d = q.device.as_str();
        if d.starts_with("mmcblk") {
            let kind = match q.mmc_type.as_deref() {
                Some("SD") => DeviceKind::Sdcard,
                Some("MMC") => DeviceKind::Emmc,
                _ => DeviceKind::Mmc,
            };
            return Some((kind, "MMC block device"));
        }
        if ["loop", "dm-", "md", "ram", "zram", "nbd", "rbd"].iter().any(|p| d.starts_with(p)) {
            return Some((DeviceKind::Other, "virtual block device"));
        }
        match q.rotational? {
            true => Some((DeviceKind::Hdd, "queue reports rotational")),
            false => Some((DeviceKind::Ssd, "queue reports non-rotational")),
        }
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
        if let Some(v) = fs.internals.ext4.as_ref().and_then(|e| e.mb_optimize_scan_reported) {
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
        let groups = self.ext4_block_groups()?.0;
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
            "fs.size" => {
                let b = crate::units::Bytes::parse(value.trim())
                    .map_err(|e| format!("fact {key}: `{value}` is not a size ({e})"))?;
                if b.0 == 0 {
                    return Err(format!("fact {key}: the size must be more than 0"));
                }
                self.fs_mut().size_bytes = Some(b.0);
            }
            "device.kind" => {
                self.device_kind = Some(
                    DeviceKind::parse(value).ok_or_else(|| bad(&format!("a device kind ({})", DeviceKind::NAMES)))?,
                )
            }
            "ext4.groups" => {
                let v = int()?;
                self.fs_mut().internals.ext4.get_or_insert_with(Default::default).block_groups = Some(v);
            }
            "ext4.block_size" => {
                let v = int()?;
                self.fs_mut().internals.ext4.get_or_insert_with(Default::default).block_size = Some(v);
            }
            "ext4.mb_optimize_scan" => {
                let v = boolean()?;
                self.fs_mut().internals.ext4.get_or_insert_with(Default::default).mb_optimize_scan_reported = Some(v);
            }
            "ext4.lazyinit_running" => self.ext4_lazyinit_running = Some(boolean()?),
            "ext4.itable_unzeroed_groups" => {
                let v = int()?;
                self.fs_mut().internals.ext4.get_or_insert_with(Default::default).itable_unzeroed_groups = Some(v);
            }
            "xfs.agcount" => {
                let v = int()?;
                self.fs_mut().internals.xfs.get_or_insert_with(Default::default).agcount = Some(v);
            }
            "xfs.agsize" => {
                let v = int()?;
                self.fs_mut().internals.xfs.get_or_insert_with(Default::default).agsize_blocks = Some(v);
            }
            "btrfs.data_profile" => {
                self.fs_mut().internals.btrfs.get_or_insert_with(Default::default).data_profile =
                    Some(value.to_lowercase())
            }
            "btrfs.metadata_profile" => {
                self.fs_mut().internals.btrfs.get_or_insert_with(Default::default).metadata_profile =
                    Some(value.to_lowercase())
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

    pub(crate) fn fs_mut(&mut self) -> &mut FsFacts {
        self.fs.get_or_insert_with(Default::default)
    }
    fn queue_mut(&mut self) -> &mut QueueFacts {
        self.queue.get_or_insert_with(Default::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filesystem's own facts sit next to `fstype` in the JSON, as they
    /// did before they moved to their `fsinternal` files.
    #[test]
    fn filesystem_facts_keep_their_json_shape() {
        let old = r#"{"path":null,"mount_point":null,"fstype":"xfs","source":null,"device_name":null,"mount_options":null,"size_bytes":null,"ext4":null,"xfs":{"agcount":4,"agsize_blocks":20480,"block_size":4096},"btrfs":null}"#;
        let fs: FsFacts = serde_json::from_str(old).unwrap();
        assert_eq!(fs.internals.xfs.as_ref().and_then(|x| x.agcount), Some(4));
        assert_eq!(serde_json::to_string(&fs).unwrap(), old);
        let bare: FsFacts = serde_json::from_str(r#"{"fstype":"ext4"}"#).unwrap();
        assert_eq!(bare.internals, FsInternalFacts::default());
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
}
