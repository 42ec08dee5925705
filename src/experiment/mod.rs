//! Experiment files: parse, validate, resolve defaults, plan the runs.
//!
//! [`load`] turns a TOML file into an [`Experiment`] whose every value has
//! been checked; errors name the file, line, column and key.

pub mod place;
mod quick;
pub mod run_plan;
pub mod spec;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use place::{BootPolicy, KernelSpec, VmSpec};
pub use quick::make_quick;
pub use run_plan::{plan_rounds, PlannedRun};
pub use spec::{CachePolicy, Repetitions, RunOrder};

use crate::keys::Source;
pub use crate::testbed::{FsKind, ImageOptions, TestbedConfig, Throttle};
pub use crate::workload::fio::FioJob;
pub use crate::workload::untar::UntarSource;
use crate::workload::BuildEnv;
pub use crate::workload::WorkloadParams;

pub use crate::testbed::DEFAULT_WORKDIR;

/// A parsed and validated experiment file, ready to plan and run: not what
/// the store reads back (that is a [`StoredExperiment`](crate::store::StoredExperiment)).
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// Where its kernels are downloaded, unpacked and built
    /// ([`crate::kernel::cache_dir`]: the one rule every command follows).
    pub kernel_cache: PathBuf,
    /// Name of the variant every other variant is compared against.
    pub baseline: String,
    pub theta: f64,
    pub alpha: f64,
    pub sample_interval: Duration,
    pub variants: Vec<VariantConfig>,
    pub workloads: Vec<WorkloadConfig>,
    /// System directories the file names (`workdir`, `dir:` variants), as
    /// `(key, located message)`: the runner refuses them unless forced
    /// (`--allow-system-dir`).
    #[serde(skip)]
    pub system_paths: Vec<(String, String)>,
}

/// A variant with `[defaults]` applied and every value checked: a name and
/// the testbed it runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantConfig {
    pub name: String,
    #[serde(flatten)]
    pub testbed: TestbedConfig,
    /// The kernel its runs boot in a VM; None: they run on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSpec>,
    /// How that VM is sized and run (set exactly when `kernel` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmSpec>,
}

/// A workload with its kind-specific parameters checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadConfig {
    /// Unique label within the experiment (the `name` key, else the kind).
    pub label: String,
    pub timeout: Option<Duration>,
    pub cache: CachePolicy,
    pub params: WorkloadParams,
    /// Evidence metrics the file names in `decisive = [...]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisive: Vec<String>,
}

/// Used when a workload sets no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

impl WorkloadConfig {
    /// How long one of its phases may take: `timeout`, or [`DEFAULT_TIMEOUT`].
    pub fn timeout_or_default(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    pub fn kind(&self) -> &'static str {
        self.params.kind()
    }

    /// Does `metric` decide adaptive repetition? CPU-time side metrics and
    /// phase splits are reported but do not hold an experiment open; nor
    /// does evidence, unless named in `decisive`.
    pub fn is_decisive(&self, metric: &str) -> bool {
        self.decides(metric, &[])
    }

    /// [`WorkloadConfig::is_decisive`] for a comparison that ran under
    /// emulation with guest instructions counted (`emulated`: the count
    /// both sides have, one of [`crate::metric::EMULATED_DECIDERS`], and
    /// [`crate::metric::EMULATED_DEVICE_TIME`] where both have it): then
    /// only those decide, unless the file names `decisive` or the
    /// workload runs for a fixed time ([`crate::workload::Kind::FIXED_TIME`]:
    /// its instruction count measures the host, not the kernel). The whole
    /// rule is [`crate::analysis::Roles`].
    pub fn decides(&self, metric: &str, emulated: &[&str]) -> bool {
        if !emulated.is_empty() && self.decisive.is_empty() && !self.params.fixed_time() {
            return emulated.contains(&metric);
        }
        if crate::metric::is_evidence(metric) {
            self.decisive.iter().any(|d| d == metric)
        } else {
            self.params.is_decisive(metric)
        }
    }

    /// The runnable workload.
    pub fn build(&self, seed: u64) -> Box<dyn crate::workload::Workload> {
        self.params.build(&BuildEnv { seed, cold: self.cache == CachePolicy::Cold })
    }
}

/// The workloads of a stored plan as this version reads them; `None` when
/// they do not parse (a store written by an older version), so callers can
/// fall back to the experiment file's text.
pub fn stored_workloads(spec: &crate::stored::StoredSpec) -> Option<Vec<WorkloadConfig>> {
    if spec.workloads.is_empty() {
        return None;
    }
    spec.workloads.iter().map(|w| serde_json::from_value(w.clone()).ok()).collect()
}

/// The variants of a stored plan as this version reads them; `None` when
/// they do not parse (a store written by another version): a report then
/// shows what it cannot read as unknown rather than guess from JSON keys.
pub fn stored_variants(spec: &crate::stored::StoredSpec) -> Option<Vec<VariantConfig>> {
    spec.variants.iter().map(|v| serde_json::from_value(v.clone()).ok()).collect()
}

/// Read and validate an experiment file.
pub fn load(path: &Path) -> Result<Experiment> {
    load_with(path, &Overrides::default())
}

/// What the command line sets over the file before it is checked: the
/// work directory and the kernel cache decide where a file's kernels are
/// looked up, unpacked and built, so they apply before, not after.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--workdir`.
    pub workdir: Option<PathBuf>,
    /// `--kernel-cache`.
    pub kernel_cache: Option<PathBuf>,
}

/// [`load`] with the command line's [`Overrides`].
pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Experiment> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_with(&text, Some(path), overrides)
}

/// Validate experiment text. `path` names the file in errors and anchors
/// relative paths (`list = "..."`); None means built in.
pub fn parse(text: &str, path: Option<&Path>) -> Result<Experiment> {
    parse_with(text, path, &Overrides::default())
}

/// [`parse`] with the command line's [`Overrides`].
pub fn parse_with(text: &str, path: Option<&Path>, overrides: &Overrides) -> Result<Experiment> {
    let origin = path.map_or_else(|| "<built-in>".to_string(), |p| p.display().to_string());
    let base_dir = path.and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let src = Source { text, origin: &origin, base_dir: &base_dir };
    let mut experiment = validate::resolve(&src, overrides)?;
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
