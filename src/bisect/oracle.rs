//! The test ddmin asks: "does good + these changes regress?", answered by a
//! real experiment through the runner and the statistical verdict.
//!
//! Each question is one stored experiment with two variants, the good one
//! (baseline) and the candidate, on the workload of the chosen metric only,
//! with adaptive repetitions: the runner adds rounds while a comparison is
//! inconclusive, up to the maximum. The verdict on the chosen metric maps to
//! an [`Outcome`]: `regressed` → fail, `no-change`/`improved` → pass,
//! `inconclusive` after the maximum (or no usable runs) → unresolved, which
//! ddmin treats as "not reproduced" and the report counts.
//!
//! What a candidate is depends on the bisection: `bisect-options` applies
//! testbed settings ([`super::diff::apply`]), `bisect-kconfig` builds a
//! kernel with good's config plus some options ([`super::kconfig`]). The
//! oracle only asks its [`MakeCandidate`] for the variant of a set.

use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::ddmin::Outcome;
use super::BisectConfig;
use crate::analysis::{compare_series, Roles};
use crate::experiment::{Experiment, Repetitions, VariantConfig};
use crate::runner::{self, Observer, RunOptions};
use crate::stats::{CompareConfig, Verdict};
use crate::store::Store;

/// `WORKLOAD/METRIC`, e.g. `untar/total_s` or `read/vm/instructions` (split at the first `/`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MetricRef {
    pub workload: String,
    pub metric: String,
}

impl FromStr for MetricRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // A workload label has no `/` (experiment::validate::check_name);
        // a metric name may (`coldstart-4/total_s`, `media/gc_mb`).
        match s.split_once('/') {
            Some((w, m)) if !w.is_empty() && !m.is_empty() => {
                Ok(MetricRef { workload: w.to_string(), metric: m.to_string() })
            }
            _ => Err(format!("`{s}`: expected WORKLOAD/METRIC, e.g. untar/total_s")),
        }
    }
}

impl std::fmt::Display for MetricRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.workload, self.metric)
    }
}

/// One oracle question and its answer, with the experiment that holds the runs.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// Indices into the list of changes (empty for none).
    pub set: Vec<usize>,
    pub changes: Vec<String>,
    pub experiment_id: i64,
    pub experiment_name: String,
    pub candidate: String,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub rounds: usize,
    /// None when the metric had no values for one side.
    pub verdict: Option<Verdict>,
    pub mean_good: Option<f64>,
    pub mean_candidate: Option<f64>,
    pub change_pct: Option<f64>,
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub outcome: Outcome,
    /// Why the trial ran nothing: its candidate could not be made (e.g. a
    /// kernel config Kconfig would not give), or its runs were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Trial {
    pub fn runs(&self) -> usize {
        self.runs_ok + self.runs_failed
    }
}

/// The candidate variant of a set of changes, named `name`; `Ok(Err(why))`
/// when that candidate cannot be made (the trial is unresolved, nothing runs).
pub type MakeCandidate<'a> = Box<dyn FnMut(&[usize], &str) -> Result<std::result::Result<VariantConfig, String>> + 'a>;

/// What differs between the bisections that ask the oracle, as data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bisection {
    /// `bisect-options`: candidates are testbed settings, cheap to make.
    Options,
    /// `bisect-kconfig`: candidates are kernels; a rerun answers every
    /// step from its stored experiment.
    Kconfig,
}

impl Bisection {
    /// The command: names the trial experiments and messages.
    pub fn command(self) -> &'static str {
        match self {
            Bisection::Options => "bisect-options",
            Bisection::Kconfig => "bisect-kconfig",
        }
    }

    /// Answer a trial whose experiment (same name and spec) is stored
    /// complete from its runs, without running it again.
    fn reuses_stored(self) -> bool {
        match self {
            Bisection::Options => false,
            Bisection::Kconfig => true,
        }
    }
}

/// Runs candidate experiments; remembers every trial.
pub struct Oracle<'a> {
    pub bisection: Bisection,
    pub base: &'a Experiment,
    pub good: VariantConfig,
    /// One label per change, indexed by a trial's set.
    pub labels: Vec<String>,
    pub make: MakeCandidate<'a>,
    pub metric: MetricRef,
    pub repetitions: Repetitions,
    pub store: &'a mut Store,
    pub options: RunOptions,
    pub observer: &'a mut dyn Observer,
    pub trials: Vec<Trial>,
}

impl<'a> Oracle<'a> {
    /// The oracle of `bisection` over `labels` (one per change) of `base`,
    /// with `cfg`'s metric, repetitions and run options.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        bisection: Bisection,
        base: &'a Experiment,
        cfg: &BisectConfig,
        good: VariantConfig,
        labels: Vec<String>,
        make: MakeCandidate<'a>,
        store: &'a mut Store,
        observer: &'a mut dyn Observer,
    ) -> Result<Oracle<'a>> {
        Ok(Oracle {
            bisection,
            base,
            good,
            labels,
            make,
            metric: cfg.metric.clone(),
            repetitions: cfg.trial_repetitions(base)?,
            store,
            options: cfg.run_options.clone(),
            observer,
            trials: Vec::new(),
        })
    }
}

impl Oracle<'_> {
    /// Good against `bad` (the set of all changes).
    pub fn confirm(&mut self, bad: VariantConfig) -> Result<Trial> {
        let all: Vec<usize> = (0..self.labels.len()).collect();
        let title = format!("{} vs {} (confirm)", self.good.name, bad.name);
        self.trial(&all, bad, &title)
    }

    /// good + the changes at `set`.
    pub fn test(&mut self, set: &[usize]) -> Result<Outcome> {
        let labels: Vec<String> = set.iter().map(|&i| self.labels[i].clone()).collect();
        let name = format!("{} + [{}]", self.good.name, labels.join("; "));
        let title = format!("trial {}: {}", self.trials.len(), name);
        match (self.make)(set, &name)? {
            Ok(candidate) => Ok(self.trial(set, candidate, &title)?.outcome),
            Err(why) => {
                self.observer.message(&format!("{}: {title}: not run: {why}", self.bisection.command()));
                self.trials.push(Trial {
                    set: set.to_vec(),
                    changes: labels,
                    experiment_id: 0,
                    experiment_name: String::new(),
                    candidate: name,
                    runs_ok: 0,
                    runs_failed: 0,
                    rounds: 0,
                    verdict: None,
                    mean_good: None,
                    mean_candidate: None,
                    change_pct: None,
                    ci_low_pct: None,
                    ci_high_pct: None,
                    p_adjusted: None,
                    outcome: Outcome::Unresolved,
                    note: Some(why),
                });
                Ok(Outcome::Unresolved)
            }
        }
    }

    fn experiment(&self, candidate: VariantConfig, title: &str) -> Result<Experiment> {
        let command = self.bisection.command();
        let mut exp = self.base.clone();
        exp.name = format!("{command} {}: {title}", self.base.name);
        exp.description = Some(format!(
            "fslab {command} trial on {}: is `{}` regressed against `{}`?",
            self.metric, candidate.name, self.good.name
        ));
        exp.source_text = format!(
            "# fslab {command} trial, derived from the experiment below\n# {title}\n# candidate: {}\n{}",
            serde_json::to_string(&candidate)?,
            self.base.source_text
        );
        exp.spec_hash = Sha256::digest(exp.source_text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        exp.repetitions = self.repetitions;
        exp.baseline = self.good.name.clone();
        exp.variants = vec![self.good.clone(), candidate];
        exp.workloads.retain(|w| w.label == self.metric.workload);
        if exp.workloads.is_empty() {
            let labels: Vec<&str> = self.base.workloads.iter().map(|w| w.label.as_str()).collect();
            bail!(
                "--metric {}: no workload `{}` (workloads: {})",
                self.metric,
                self.metric.workload,
                labels.join(", ")
            );
        }
        Ok(exp)
    }

    fn trial(&mut self, set: &[usize], candidate: VariantConfig, title: &str) -> Result<Trial> {
        let exp = self.experiment(candidate, title)?;
        let candidate = exp.variants[1].name.clone();
        let command = self.bisection.command();
        let stored = match self.bisection.reuses_stored() {
            true => self.store.find_complete(&exp.name, &exp.spec_hash)?,
            false => None,
        };
        let summary = match stored {
            Some(id) => {
                self.observer.message(&format!("{command}: {title}: stored as experiment {id}, not run again"));
                let runs = self.store.runs(id)?;
                let ok = runs.iter().filter(|r| r.status == crate::record::RunStatus::Ok).count();
                runner::RunSummary {
                    experiment_id: id,
                    runs_ok: ok,
                    runs_failed: runs.len() - ok,
                    runs_skipped: runs.len(),
                    rounds: runs.iter().map(|r| r.round).max().unwrap_or(0),
                    interrupted: false,
                }
            }
            None => {
                self.observer.message(&format!("{command}: {title}"));
                runner::run(&exp, self.store, &self.options, self.observer)
                    .with_context(|| format!("running {}", exp.name))?
            }
        };
        if summary.interrupted {
            bail!(
                "interrupted during experiment {} ({}); finished trials are in the store",
                summary.experiment_id,
                exp.name
            );
        }
        let series = self.store.metric_series(summary.experiment_id)?;
        let cfg = CompareConfig { alpha: exp.alpha, theta: exp.theta, ..CompareConfig::default() };
        let rows = compare_series(&series, &self.good.name, &cfg, Roles::default());
        let row = rows
            .iter()
            .find(|r| r.workload == self.metric.workload && r.metric == self.metric.metric && r.variant == candidate);
        if row.is_none() {
            let known: Vec<String> =
                series.iter().filter(|s| s.variant == self.good.name).map(|s| s.metric.clone()).collect();
            if !known.is_empty() && !known.contains(&self.metric.metric) {
                return Err(anyhow!(
                    "--metric {}: workload `{}` reports no metric `{}` (it reports: {})",
                    self.metric,
                    self.metric.workload,
                    self.metric.metric,
                    known.join(", ")
                ));
            }
        }
        let outcome = match row.map(|r| r.verdict) {
            Some(Verdict::Regressed) => Outcome::Fail,
            Some(Verdict::NoChange | Verdict::Improved) => Outcome::Pass,
            Some(Verdict::Inconclusive) | None => Outcome::Unresolved,
        };
        let trial = Trial {
            set: set.to_vec(),
            changes: set.iter().map(|&i| self.labels[i].clone()).collect(),
            experiment_id: summary.experiment_id,
            experiment_name: exp.name.clone(),
            candidate,
            runs_ok: summary.runs_ok,
            runs_failed: summary.runs_failed,
            rounds: summary.rounds,
            verdict: row.map(|r| r.verdict),
            mean_good: row.map(|r| r.mean_baseline),
            mean_candidate: row.map(|r| r.mean_variant),
            change_pct: row.map(|r| r.change_pct),
            ci_low_pct: row.map(|r| r.ci_low_pct),
            ci_high_pct: row.map(|r| r.ci_high_pct),
            p_adjusted: row.map(|r| r.p_adjusted),
            outcome,
            note: stored.map(|id| format!("stored runs of experiment {id}")),
        };
        self.observer.message(&format!(
            "{command}: experiment {} → {} ({} runs)",
            trial.experiment_id,
            trial.verdict.map_or("no verdict".to_string(), |v| v.to_string()),
            trial.runs()
        ));
        self.trials.push(trial.clone());
        Ok(trial)
    }
}

#[cfg(test)]
mod tests {
    use super::MetricRef;

    #[test]
    fn the_workload_ends_at_the_first_slash_because_metric_names_hold_slashes() {
        let m: MetricRef = "coldstart/coldstart-4/total_s".parse().unwrap();
        assert_eq!((m.workload.as_str(), m.metric.as_str()), ("coldstart", "coldstart-4/total_s"));
        assert_eq!(m.to_string(), "coldstart/coldstart-4/total_s");
        let m: MetricRef = "untar/total_s".parse().unwrap();
        assert_eq!((m.workload.as_str(), m.metric.as_str()), ("untar", "total_s"));
        assert!("total_s".parse::<MetricRef>().is_err() && "/x".parse::<MetricRef>().is_err());
    }
}
