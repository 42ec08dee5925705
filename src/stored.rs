//! What an experiment stores besides its runs, as types: its status, the
//! plan it ran, the environment it ran in (host facts, the doctor's
//! findings, each variant's place and kernel, the owner process). The
//! runner writes these, the store keeps them as JSON text and hands them
//! back parsed, and every reader uses the fields, never string keys.
//!
//! The documents are read back from stores written by older fslab
//! versions, so fields added later default when absent. Parts owned by a
//! higher layer (the experiment's variant and workload configurations, the
//! planned runs, a variant's VM size) are kept as JSON values here: the
//! `experiment` module reads them with its own types.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::inspect::environment::Environment;
use crate::sys::identity::ProcessIdentity;

/// Where an experiment stands. The stored value is what its last writer
/// set; what the store returns for a `running` experiment whose owner is
/// gone is `Interrupted` (decided once, in `store::owner`).
///
/// Its text (`running`, …) is [`ExperimentStatus::as_str`] and
/// [`FromStr`], also for serde: the one conversion, whether the store
/// writes a column, a JSON document or a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum ExperimentStatus {
    /// What a new experiment is.
    #[default]
    Running,
    Complete,
    Interrupted,
    Failed,
}

impl ExperimentStatus {
    pub const ALL: [ExperimentStatus; 4] = [
        ExperimentStatus::Running,
        ExperimentStatus::Complete,
        ExperimentStatus::Interrupted,
        ExperimentStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Complete => "complete",
            ExperimentStatus::Interrupted => "interrupted",
            ExperimentStatus::Failed => "failed",
        }
    }

    /// Finished one way or another (not `running`).
    pub fn is_finished(self) -> bool {
        self != ExperimentStatus::Running
    }

    /// How far it got: running, then stopped (`failed`, `interrupted`),
    /// then `complete`. Merging two copies keeps the one further along.
    pub fn progress(self) -> u8 {
        match self {
            ExperimentStatus::Running => 1,
            ExperimentStatus::Failed | ExperimentStatus::Interrupted => 2,
            ExperimentStatus::Complete => 3,
        }
    }
}

impl From<ExperimentStatus> for &'static str {
    fn from(status: ExperimentStatus) -> &'static str {
        status.as_str()
    }
}

impl TryFrom<String> for ExperimentStatus {
    type Error = anyhow::Error;
    fn try_from(text: String) -> Result<Self> {
        text.parse()
    }
}

impl fmt::Display for ExperimentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExperimentStatus {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        ExperimentStatus::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = ExperimentStatus::ALL.iter().map(|v| v.as_str()).collect();
            anyhow!("unknown experiment status {s:?}; expected one of {}", names.join(", "))
        })
    }
}

/// The `plan` document: the resolved experiment as it ran and its first
/// rounds in run order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredPlan {
    #[serde(default)]
    pub experiment: StoredSpec,
    /// `experiment::PlannedRun`s of the fixed rounds (at most 10 000).
    #[serde(default)]
    pub first_rounds: Vec<Value>,
    /// How many runs the fixed rounds hold (absent in older stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_rounds_total: Option<usize>,
}

/// The resolved experiment (`experiment::Experiment` serialized): the
/// fields readers below the `experiment` module use, the rest kept as is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<StoredRepetitions>,
    /// `experiment::RunOrder` (`interleaved`, `grouped`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Value>,
    /// `experiment::VariantConfig`s (read as that type by
    /// `experiment::stored_variants`).
    #[serde(default)]
    pub variants: Vec<Value>,
    /// `experiment::WorkloadConfig`s.
    #[serde(default)]
    pub workloads: Vec<Value>,
    /// Everything else the experiment serializes (name, seed, workdir, …).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `repetitions = 5` or `{ min = 5, max = 20 }`, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StoredRepetitions {
    Fixed(u64),
    Adaptive { min: u64, max: u64 },
}

/// The `environment` document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredEnvironment {
    /// The host, as `inspect::environment::capture` saw it.
    #[serde(flatten)]
    pub host: Environment,
    /// Set by old versions when the capture failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Known-issue findings for the machine at run start (absent in older stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doctor: Option<StoredDoctor>,
    /// Per variant name: where it runs and with which kernel.
    #[serde(default)]
    pub kernels: BTreeMap<String, VariantKernel>,
    /// The process that created the experiment (absent in older stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ProcessIdentity>,
}

/// The doctor's verdict on the machine when the experiment started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredDoctor {
    /// `Facts::summary_lines`.
    #[serde(default)]
    pub facts: Vec<String>,
    #[serde(default)]
    pub findings: Vec<StoredFinding>,
    /// One line per benchmark-hostile finding.
    #[serde(default)]
    pub hostile: Vec<String>,
    /// Why facts or rules could not be read (then the rest is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One doctor finding (`inspect::doctor::Finding` as stored); a variant's
/// kernel findings carry only `id`, `title`, `severity` and `summary`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredFinding {
    pub id: String,
    #[serde(default)]
    pub title: String,
    /// `info`, `low`, `medium` or `high`.
    #[serde(default)]
    pub severity: String,
    #[serde(default)]
    pub benchmark_hostile: bool,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub advice: String,
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub references: Vec<String>,
    /// Kernel range the issue affects.
    #[serde(default)]
    pub affected: Option<String>,
    #[serde(default)]
    pub fixed_in: Option<String>,
    /// The finding's other fields (commits, assumptions, …), kept as written.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl From<&crate::inspect::Finding> for StoredFinding {
    fn from(f: &crate::inspect::Finding) -> StoredFinding {
        let mut rest = match serde_json::to_value(f) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        const TYPED: [&str; 10] = [
            "id",
            "title",
            "severity",
            "benchmark_hostile",
            "summary",
            "advice",
            "evidence",
            "references",
            "affected",
            "fixed_in",
        ];
        for key in TYPED {
            rest.remove(key);
        }
        StoredFinding {
            id: f.id.clone(),
            title: f.title.clone(),
            severity: f.severity.as_str().to_string(),
            benchmark_hostile: f.benchmark_hostile,
            summary: f.summary.clone(),
            advice: f.advice.clone(),
            evidence: f.evidence.clone(),
            references: f.references.clone(),
            affected: f.affected.clone(),
            fixed_in: f.fixed_in.clone(),
            rest,
        }
    }
}

/// Where a variant runs and its kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantKernel {
    /// `host` or `vm`.
    pub place: String,
    /// `uname -r` of the kernel.
    #[serde(default)]
    pub release: String,
    /// VM variants: the kernel as the user named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Where its config was read from.
    #[serde(default)]
    pub config_source: Option<String>,
    /// The config text.
    #[serde(default)]
    pub config: Option<String>,
    /// VM variants: `experiment::VmSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<Value>,
    /// The doctor's findings for this kernel's config and the variant's
    /// testbed; `None` when the config or rules could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<StoredFinding>>,
    /// VM variants: what the kernel source resolved to, as its kind records
    /// it (the archive package and version, the commit and its build, the
    /// files): exactly what ran. Stores written before the kinds were one
    /// registry kept `package` and `build` instead; those are not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::kernel::KernelSource>,
    /// VM variants: the image booted (in the kernel cache, for `kernel prune`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<std::path::PathBuf>,
}

/// The Debian package a kernel came from (the resolver's own record).
pub use crate::kernel::KernelPackage;

/// Parses stored document `field` of experiment `id`; the error names the
/// experiment, the document and the path inside it that did not parse.
pub fn parse<T: serde::de::DeserializeOwned>(id: i64, field: &str, text: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { String::new() } else { format!(" at `{path}`") };
        anyhow!("experiment {id}: stored {field} does not parse{at}: {}", e.into_inner())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_and_rejects_unknown() {
        for s in ExperimentStatus::ALL {
            assert_eq!(s.as_str().parse::<ExperimentStatus>().unwrap(), s);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        let e = "done".parse::<ExperimentStatus>().unwrap_err().to_string();
        assert!(e.contains("unknown experiment status \"done\""), "{e}");
        let e = serde_json::from_str::<ExperimentStatus>("\"done\"").unwrap_err().to_string();
        assert!(e.contains("unknown experiment status \"done\""), "{e}");
    }

    #[test]
    fn older_documents_parse_with_defaults() {
        let env: StoredEnvironment =
            parse(1, "environment", r#"{"kernel_release":"6.1","kernels":{"a":{"place":"host","findings":null}}}"#)
                .unwrap();
        assert_eq!(env.host.kernel_release, "6.1");
        assert_eq!(env.kernels["a"].findings, None);
        assert_eq!(env.kernels["a"].origin, None);
        assert!(env.owner.is_none());
        let plan: StoredPlan =
            parse(1, "plan", r#"{"experiment":{"repetitions":{"min":5,"max":20},"name":"x"}}"#).unwrap();
        assert_eq!(plan.experiment.repetitions, Some(StoredRepetitions::Adaptive { min: 5, max: 20 }));
        assert_eq!(plan.experiment.rest["name"], "x");
    }

    #[test]
    fn a_document_that_does_not_parse_names_experiment_and_field() {
        let e = parse::<StoredEnvironment>(7, "environment", r#"{"kernels":{"a":{"place":"vm","release":3}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("experiment 7: stored environment does not parse at `kernels.a.release`"), "{e}");
    }

    #[test]
    fn documents_round_trip() {
        let text = r#"{"experiment":{"baseline":"a","alpha":0.05,"theta":0.02,"repetitions":5,"order":"interleaved","variants":[{"name":"a","fs":"ext4"}],"workloads":[],"name":"n","seed":1},"first_rounds":[{"seq":0}],"first_rounds_total":1}"#;
        let plan: StoredPlan = parse(1, "plan", text).unwrap();
        let back: Value = serde_json::to_value(&plan).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(plan.experiment.variants[0]["fs"], "ext4");
    }
}
