//! Experiment files: parse, validate, resolve defaults, plan the runs.
//!
//! [`load`] turns a TOML file into an [`Experiment`] whose every value has
//! been checked; errors name the file, line, column and key.

pub mod plan;
mod quick;
pub mod spec;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use plan::{plan_rounds, PlannedRun};
pub use quick::make_quick;
pub use spec::{CachePolicy, Repetitions, RunOrder, Throttle};

use crate::units::Bytes;

/// Where fslab puts images, mount points and caches unless told otherwise.
pub const DEFAULT_WORKDIR: &str = "/var/tmp/fslab";

/// A validated experiment, ready to plan and run.
#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    /// The file it came from (None for built-in experiments).
    pub source_path: Option<PathBuf>,
    #[serde(skip)]
    pub source_text: String,
    /// SHA-256 of the source text: `--resume` only continues the same file.
    pub spec_hash: String,
    pub repetitions: Repetitions,
    pub order: RunOrder,
    pub seed: u64,
    pub workdir: PathBuf,
    /// Name of the variant every other variant is compared against.
    pub baseline: String,
    pub theta: f64,
    pub alpha: f64,
    pub sample_interval: Duration,
    pub variants: Vec<VariantConfig>,
    pub workloads: Vec<WorkloadConfig>,
}

/// What a variant's testbed is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "type", content = "path")]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
    Tmpfs,
    /// A read-only squashfs image built from the workload's tree.
    Squashfs,
    /// A read-only erofs image built from the workload's tree.
    Erofs,
    /// An existing directory: no provisioning, no throttling.
    Dir(PathBuf),
}

impl FsKind {
    /// The name `mount -t` and `/proc/self/mountinfo` use.
    pub fn fstype(&self) -> &str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
            FsKind::Tmpfs => "tmpfs",
            FsKind::Squashfs => "squashfs",
            FsKind::Erofs => "erofs",
            FsKind::Dir(_) => "dir",
        }
    }

    /// Backed by an image on a loop device (or a user-named device).
    pub fn is_block(&self) -> bool {
        matches!(self, FsKind::Ext4 | FsKind::Xfs | FsKind::Btrfs | FsKind::Squashfs | FsKind::Erofs)
    }

    /// A read-only image packed from the workload's tree
    /// ([`crate::workload::Workload::populate`]) before it is mounted.
    pub fn is_read_only_image(&self) -> bool {
        matches!(self, FsKind::Squashfs | FsKind::Erofs)
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

/// A variant with `[defaults]` applied and every value checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantConfig {
    pub name: String,
    pub fs: FsKind,
    pub size: Bytes,
    pub mkfs: Vec<String>,
    pub mount: String,
    pub throttle: Throttle,
    pub read_ahead_kb: Option<u32>,
    pub scheduler: Option<String>,
    /// Filesystem sysfs tunables, values as written to sysfs.
    pub sysfs: Vec<(String, String)>,
    /// How a read-only image is packed; None for writable filesystems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageOptions>,
}

/// Packing options of a read-only image (squashfs, erofs), defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageOptions {
    /// `gzip`, `lzo`, `lz4`, `xz`, `zstd` (squashfs); `lz4`, `lz4hc`,
    /// `lzma`, `deflate`, `libdeflate`, `zstd` (erofs); `none` for both.
    pub compressor: String,
    /// Compression level (squashfs gzip/zstd, erofs lz4hc/lzma/deflate/zstd).
    pub level: Option<u32>,
    /// squashfs data block size in bytes (`-b`).
    pub block_size: Option<u64>,
    /// squashfs fragment blocks; false adds `-no-fragments`.
    pub fragments: bool,
    /// erofs physical cluster size in bytes (`-C`).
    pub pcluster_size: Option<u64>,
}

/// A workload with its kind-specific parameters checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadConfig {
    /// Unique label within the experiment (the `name` key, else the kind).
    pub label: String,
    pub timeout: Option<Duration>,
    pub cache: CachePolicy,
    pub params: WorkloadParams,
}

impl WorkloadConfig {
    pub fn kind(&self) -> &'static str {
        match self.params {
            WorkloadParams::Untar { .. } => "untar",
            WorkloadParams::Command { .. } => "command",
            WorkloadParams::Shell1 { .. } => "shell1",
            WorkloadParams::Metadata { .. } => "metadata",
            WorkloadParams::Fio { .. } => "fio",
            WorkloadParams::Filemix { .. } => "filemix",
            WorkloadParams::Coldstart { .. } => "coldstart",
        }
    }

    /// Metrics adaptive repetition waits on, as patterns of
    /// [`crate::analysis::is_decisive`] (`*` wildcard, `!` excludes); None
    /// means every metric. CPU-time side metrics (`user_s`, `sys_s`, fio's
    /// `usr_cpu_pct`/`sys_cpu_pct`) and phase splits are reported but rarely
    /// decisive, so they do not hold an experiment open.
    pub fn decisive_metrics(&self) -> Option<&'static [&'static str]> {
        match self.params {
            WorkloadParams::Untar { .. } => Some(&["total_s"]),
            // wall_s and every metric the command reports itself.
            WorkloadParams::Command { .. } => Some(&["*", "!user_s", "!sys_s"]),
            WorkloadParams::Metadata { .. } => Some(&["create_files_per_s", "stat_files_per_s", "unlink_files_per_s"]),
            // Throughput and latency of every job and direction; p99.9 is a
            // tail too noisy to wait for.
            WorkloadParams::Fio { .. } => Some(&["*/bw_kib_s", "*/iops", "*/clat_mean_us", "*/clat_p99_us"]),
            WorkloadParams::Shell1 { .. } => None,
            // Only `filemix-<users>` metrics exist, all decisive.
            WorkloadParams::Filemix { .. } => None,
            // Names carry the reader count (`coldstart-4/total_s`).
            WorkloadParams::Coldstart { .. } => None,
        }
    }
}

/// Where the untar workload's content list comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UntarSource {
    Profile(String),
    List(PathBuf),
}

/// Kind-specific workload parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WorkloadParams {
    Untar {
        source: UntarSource,
        scale: f64,
        compressibility: f64,
        sync: bool,
    },
    Command {
        command: String,
        prepare: Option<String>,
        cleanup: Option<String>,
    },
    /// UnixBench "Shell Scripts": `concurrency` looping copies for `duration`.
    Shell1 {
        concurrency: Vec<u32>,
        duration: Duration,
    },
    /// fs_mark-style create / stat / unlink of `files` files.
    Metadata {
        files: u64,
        file_size: u64,
        dirs: u64,
        threads: u32,
        fsync: bool,
    },
    /// fio with an inline job or a job file.
    Fio {
        job: FioJob,
    },
    /// reaim "disk"-style job mix: `users` concurrent users for `duration`,
    /// job sequence drawn from `seed` (None: the experiment's seed), each
    /// user's files totalling `working_set` bytes.
    Filemix {
        users: Vec<u32>,
        duration: Duration,
        seed: Option<u64>,
        working_set: u64,
    },
    /// Library-loading cold start: `readers` processes mmap a /usr/lib-like tree.
    Coldstart {
        files: u64,
        scale: f64,
        compressibility: f64,
        readers: Vec<u32>,
    },
}

/// Where a `fio` workload's job comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FioJob {
    /// One job: its name and `option=value` pairs, passed as `--option=value`.
    Inline { name: String, options: Vec<(String, String)> },
    /// A fio job file (absolute, or relative to the experiment file).
    File(PathBuf),
}

/// Built-in untar profiles.
pub const UNTAR_PROFILES: &[&str] = &["rpi-firmware", "small", "synthetic"];

/// Read and validate an experiment file.
pub fn load(path: &Path) -> Result<Experiment> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, Some(path))
}

/// Validate experiment text. `path` names the file in errors and anchors
/// relative paths (`list = "..."`); None means built in.
pub fn parse(text: &str, path: Option<&Path>) -> Result<Experiment> {
    let origin = path.map_or_else(|| "<built-in>".to_string(), |p| p.display().to_string());
    let file: spec::ExperimentFile = toml::from_str(text).map_err(|e| {
        let location = e.span().map(|s| validate::location(text, s.start)).unwrap_or_default();
        anyhow::anyhow!("{origin}{location}: {}", e.message().trim())
    })?;
    let mut experiment = validate::resolve(file, text, &origin, path)?;
    experiment.source_path = path.map(Path::to_path_buf);
    experiment.source_text = text.to_string();
    experiment.spec_hash = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    Ok(experiment)
}

impl Experiment {
    /// Rounds to run before any adaptive decision.
    pub fn min_rounds(&self) -> usize {
        match self.repetitions {
            Repetitions::Fixed(n) => n as usize,
            Repetitions::Adaptive { min, .. } => min as usize,
        }
    }

    /// Most rounds this experiment may run.
    pub fn max_rounds(&self) -> usize {
        match self.repetitions {
            Repetitions::Fixed(n) => n as usize,
            Repetitions::Adaptive { max, .. } => max as usize,
        }
    }

    pub fn variant(&self, name: &str) -> Option<&VariantConfig> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Cache for generated workload inputs, shared by experiments.
    pub fn cache_dir(&self) -> PathBuf {
        self.workdir.join("cache")
    }
}
