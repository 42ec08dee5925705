//! The experiment file: serde types that mirror the TOML exactly.
//!
//! Every table denies unknown keys so a typo is an error naming its line,
//! never a silently ignored setting.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::units::{Bytes, Seconds};

/// The whole experiment file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub repetitions: Option<Spanned<Repetitions>>,
    #[serde(default)]
    pub order: Option<RunOrder>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub workdir: Option<String>,
    /// Variant the others are compared against (default: the first).
    #[serde(default)]
    pub baseline: Option<Spanned<String>>,
    /// Equivalence band as a fraction (0.02 = ±2%).
    #[serde(default)]
    pub theta: Option<Spanned<f64>>,
    /// Significance level.
    #[serde(default)]
    pub alpha: Option<Spanned<f64>>,
    /// Monitor sampling interval (default 1s, at least 100ms).
    #[serde(default)]
    pub sample_interval: Option<Spanned<Seconds>>,
    #[serde(default)]
    pub defaults: Option<Spanned<VariantTable>>,
    #[serde(default)]
    pub variant: Vec<VariantTable>,
    #[serde(default)]
    pub workload: Vec<WorkloadTable>,
}

/// `repetitions = 5` or `repetitions = { min = 5, max = 20 }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Repetitions {
    Fixed(u32),
    Adaptive { min: u32, max: u32 },
}

/// How runs of different variants are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOrder {
    /// Each round runs every variant once (A B A B …): drift hits all equally.
    #[default]
    Interleaved,
    /// Each round's runs shuffled with the seed.
    Randomized,
    /// All runs of a variant back to back (A A … B B …).
    Grouped,
}

/// One `[[variant]]` table, or the `[defaults]` table (which has no `name`).
/// Every setting is optional so `[defaults]` can supply it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantTable {
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub fs: Option<Spanned<String>>,
    #[serde(default)]
    pub size: Option<Spanned<Bytes>>,
    #[serde(default)]
    pub mkfs: Option<Vec<String>>,
    #[serde(default)]
    pub mount: Option<Spanned<String>>,
    #[serde(default)]
    pub throttle: Option<Throttle>,
    #[serde(default)]
    pub read_ahead_kb: Option<u32>,
    #[serde(default)]
    pub scheduler: Option<Spanned<String>>,
    /// Filesystem sysfs tunables by name (ext4 `mb_max_to_scan`, …).
    #[serde(default)]
    pub sysfs: Option<Spanned<BTreeMap<String, toml::Value>>>,
    // read-only images (squashfs, erofs)
    /// Image compressor (`gzip`, `zstd`, `lz4hc`, …, or `none`).
    #[serde(default)]
    pub compressor: Option<Spanned<String>>,
    /// Compression level, where the compressor has one.
    #[serde(default)]
    pub level: Option<Spanned<i64>>,
    /// squashfs data block size.
    #[serde(default)]
    pub block_size: Option<Spanned<Bytes>>,
    /// squashfs fragment blocks (false → `-no-fragments`).
    #[serde(default)]
    pub fragments: Option<Spanned<bool>>,
    /// erofs physical cluster size (`mkfs.erofs -C`).
    #[serde(default)]
    pub pcluster_size: Option<Spanned<Bytes>>,
}

/// Block-cgroup throttle limits; bandwidths per second, IOPS per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    #[serde(default)]
    pub read_bps: Option<Bytes>,
    #[serde(default)]
    pub write_bps: Option<Bytes>,
    #[serde(default)]
    pub read_iops: Option<u64>,
    #[serde(default)]
    pub write_iops: Option<u64>,
}

impl Throttle {
    pub fn is_empty(&self) -> bool {
        self.read_bps.is_none() && self.write_bps.is_none() && self.read_iops.is_none() && self.write_iops.is_none()
    }
}

/// Cache state at the start of the measured part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// Fresh filesystem and page cache dropped before the measured part.
    #[default]
    Cold,
    /// Fresh filesystem, caches left as preparation left them.
    Warm,
}

/// One `[[workload]]` table. Keys of every kind live here; each kind
/// rejects the keys that are not its own (see `experiment::validate`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadTable {
    pub kind: Spanned<String>,
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub timeout: Option<Seconds>,
    #[serde(default)]
    pub cache: Option<CachePolicy>,
    // untar
    #[serde(default)]
    pub profile: Option<Spanned<String>>,
    #[serde(default)]
    pub scale: Option<Spanned<f64>>,
    #[serde(default)]
    pub list: Option<Spanned<String>>,
    #[serde(default)]
    pub compressibility: Option<Spanned<f64>>,
    #[serde(default)]
    pub sync: Option<Spanned<bool>>,
    // command
    #[serde(default)]
    pub command: Option<Spanned<String>>,
    #[serde(default)]
    pub prepare: Option<Spanned<String>>,
    #[serde(default)]
    pub cleanup: Option<Spanned<String>>,
    // shell1
    #[serde(default)]
    pub concurrency: Option<Spanned<Vec<i64>>>,
    #[serde(default)]
    pub duration: Option<Spanned<Seconds>>,
    // metadata
    #[serde(default)]
    pub files: Option<Spanned<i64>>,
    #[serde(default)]
    pub file_size: Option<Spanned<Bytes>>,
    #[serde(default)]
    pub dirs: Option<Spanned<i64>>,
    #[serde(default)]
    pub threads: Option<Spanned<i64>>,
    #[serde(default)]
    pub fsync: Option<Spanned<bool>>,
    // fio
    #[serde(default)]
    pub job: Option<Spanned<BTreeMap<String, toml::Value>>>,
    #[serde(default)]
    pub jobfile: Option<Spanned<String>>,
    // filemix
    #[serde(default)]
    pub users: Option<Spanned<Vec<i64>>>,
    #[serde(default)]
    pub seed: Option<Spanned<i64>>,
    #[serde(default)]
    pub working_set: Option<Spanned<Bytes>>,
    // coldstart
    #[serde(default)]
    pub readers: Option<Spanned<Vec<i64>>>,
}

impl WorkloadTable {
    /// The kind-specific keys that are set, with their byte spans, so a kind
    /// can reject keys that belong to another kind.
    pub fn specific_keys(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut keys = Vec::new();
        macro_rules! collect {
            ($($field:ident),*) => {
                $(if let Some(v) = &self.$field { keys.push((stringify!($field), v.span())); })*
            };
        }
        collect!(
            profile,
            scale,
            list,
            compressibility,
            sync,
            command,
            prepare,
            cleanup,
            concurrency,
            duration,
            files,
            file_size,
            dirs,
            threads,
            fsync,
            job,
            jobfile,
            users,
            seed,
            working_set
        );
        if let Some(v) = &self.readers {
            keys.push(("readers", v.span()));
        }
        keys
    }
}
