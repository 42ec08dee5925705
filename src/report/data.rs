//! Everything a report shows, gathered from the store in one place so the
//! HTML and Markdown renderers only format.

use anyhow::Result;

use super::summary::Headline;
use crate::analysis::{compare_config_from_spec, compare_series, emulated_variants, ComparisonRow, Roles};
use crate::experiment::{VariantConfig, WorkloadConfig};
use crate::monitor::MonitorData;
use crate::store::{MetricSeries, Store, StoredExperiment, StoredRun};

/// The verdict rows of one experiment, with the settings that produced them.
#[derive(Clone, Debug)]
pub struct ComparisonData {
    pub baseline: String,
    /// Equivalence band as a fraction (0.02 = ±2%).
    pub theta: f64,
    pub alpha: f64,
    /// Variant names in experiment order.
    pub variants: Vec<String>,
    /// Workload metrics first, then evidence, per (workload, variant);
    /// which rows decide is [`crate::analysis::Roles`]'s.
    pub rows: Vec<ComparisonRow>,
}

impl ComparisonData {
    /// True when `row` decides its workload (the others, such as CPU time
    /// beside wall time, and evidence not named in `decisive`, are shown
    /// with their own verdicts but decide nothing).
    pub fn is_decisive(&self, row: &ComparisonRow) -> bool {
        row.decisive
    }

    /// The workload-metric rows (side metrics included), then the evidence rows.
    pub fn split_evidence(&self) -> (Vec<&ComparisonRow>, Vec<&ComparisonRow>) {
        self.rows.iter().partition(|r| !r.evidence)
    }
}

/// The workloads of an experiment as it ran: from the stored plan (older
/// stores: the experiment file's text); empty when neither can be read
/// (then every workload metric decides, and no evidence).
pub fn experiment_workloads(experiment: &StoredExperiment) -> Vec<WorkloadConfig> {
    match crate::experiment::stored_workloads(&experiment.plan.experiment) {
        Some(w) => w,
        None => {
            let path = experiment.spec_path.as_deref().map(std::path::Path::new);
            crate::experiment::parse(&experiment.spec_text, path).map(|p| p.workloads).unwrap_or_default()
        }
    }
}

/// The comparison `fslab compare` prints for experiment `id`: the baseline
/// (argument, else the experiment's, else its first variant), θ (argument as
/// a fraction, else the experiment's) and α from the stored plan.
pub fn comparison_for(store: &Store, id: i64, baseline: Option<&str>, theta: Option<f64>) -> Result<ComparisonData> {
    let experiment = store.experiment(id)?;
    comparison_of(store, &experiment, baseline, theta)
}

fn comparison_of(
    store: &Store,
    experiment: &StoredExperiment,
    baseline: Option<&str>,
    theta: Option<f64>,
) -> Result<ComparisonData> {
    let id = experiment.id;
    let spec = &experiment.plan.experiment;
    let variants: Vec<String> = experiment.variants.iter().map(|v| v.name.clone()).collect();
    let baseline = match baseline {
        Some(b) => {
            if !variants.iter().any(|v| v == b) {
                return Err(crate::exit::usage(anyhow::anyhow!("experiment {id} has no variant `{b}`")));
            }
            b.to_string()
        }
        None => spec.baseline.clone().or_else(|| variants.first().cloned()).unwrap_or_default(),
    };
    // α, θ and the sequential design of `{ min, max }` as the experiment ran.
    let mut cfg = compare_config_from_spec(spec);
    cfg.theta = theta.unwrap_or(cfg.theta);
    let (workloads, emulated) = (experiment_workloads(experiment), emulated_variants(store, id)?);
    let roles = Roles { workloads: &workloads, emulated_variants: &emulated };
    let rows = compare_series(&store.metric_series(id)?, &baseline, &cfg, roles);
    Ok(ComparisonData { baseline, theta: cfg.theta, alpha: cfg.alpha, variants, rows })
}

/// One run with its monitor samples and extra evidence.
#[derive(Clone, Debug)]
pub struct RunData {
    pub run: StoredRun,
    /// `None` when the run had no monitor.
    pub monitor: Option<MonitorData>,
    /// `(kind, JSON)` pairs from [`Store::run_extras`].
    pub extras: Vec<(String, serde_json::Value)>,
}

/// Everything the experiment report shows.
#[derive(Clone, Debug)]
pub struct ReportData {
    /// With its stored plan and environment.
    pub experiment: StoredExperiment,
    pub comparison: ComparisonData,
    pub series: Vec<MetricSeries>,
    pub runs: Vec<RunData>,
    /// Where each variant ran.
    pub places: super::places::Places,
}

impl ReportData {
    /// Reads experiment `id` with all its runs, samples and extras.
    pub fn load(store: &Store, id: i64, baseline: Option<&str>, theta: Option<f64>) -> Result<ReportData> {
        let experiment = store.experiment(id)?;
        let comparison = comparison_of(store, &experiment, baseline, theta)?;
        let series = store.metric_series(id)?;
        let mut runs = Vec::new();
        for run in store.runs(id)? {
            let monitor = store.monitor(run.id)?;
            let extras = store.run_extras(run.id)?;
            runs.push(RunData { run, monitor, extras });
        }
        let places = super::places::Places::load(store, id, &experiment.environment)?;
        Ok(ReportData { experiment, comparison, series, runs, places })
    }

    /// The answer the report opens with.
    pub fn headline(&self) -> Headline {
        Headline::new(&self.comparison, self.runs.iter().map(|r| &r.run))
    }

    /// The differential profiles of the runs that stored one, against the
    /// report's baseline, with the experiment's α, θ and design
    /// ([`crate::analysis::profile`]); empty without profiles.
    pub fn profiles(&self) -> Result<Vec<crate::analysis::profile::ProfileComparison>> {
        let mut runs = Vec::new();
        for r in self.runs.iter().filter(|r| r.run.status == crate::record::RunStatus::Ok) {
            if let Some(p) = crate::analysis::profile::profile_of(&r.run, &r.extras) {
                runs.push(p?);
            }
        }
        let mut cfg = compare_config_from_spec(&self.experiment.plan.experiment);
        cfg.theta = self.comparison.theta;
        Ok(crate::analysis::profile::compare_profiles(&runs, &self.comparison.baseline, &cfg))
    }

    /// Variant names in experiment order, then any only seen in runs.
    pub fn variant_names(&self) -> Vec<String> {
        let mut names = self.comparison.variants.clone();
        for r in &self.runs {
            if !names.contains(&r.run.variant) {
                names.push(r.run.variant.clone());
            }
        }
        names
    }

    /// The variant's configuration as it ran: from the stored plan, else
    /// its stored variant row; `None` when neither is one this version reads.
    pub fn variant_config(&self, name: &str) -> Option<VariantConfig> {
        let planned = crate::experiment::stored_variants(&self.experiment.plan.experiment).unwrap_or_default();
        let rows = self.experiment.variants.iter().filter_map(|v| serde_json::from_str(&v.config_json).ok());
        planned.into_iter().chain(rows).find(|v: &VariantConfig| v.name == name)
    }
}

/// A sweep point parsed from a `<name>-<number>` label.
pub fn sweep_point(label: &str) -> Option<(&str, f64)> {
    let (name, num) = label.rsplit_once('-')?;
    if name.is_empty() || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let x: f64 = num.parse().ok()?;
    x.is_finite().then_some((name, x))
}

/// Arithmetic mean and its 95% Student-t confidence interval.
pub fn mean_ci(values: &[f64]) -> (f64, (f64, f64)) {
    let xs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, (f64::NAN, f64::NAN));
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, (f64::NAN, f64::NAN));
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = crate::stats::t_quantile(0.975, (n - 1) as f64) * (var / n as f64).sqrt();
    (mean, (mean - half, mean + half))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_labels() {
        assert_eq!(sweep_point("shell1-8"), Some(("shell1", 8.0)));
        assert_eq!(sweep_point("filemix-16"), Some(("filemix", 16.0)));
        assert_eq!(sweep_point("wall_s"), None);
        assert_eq!(sweep_point("-3"), None);
        assert_eq!(sweep_point("a-"), None);
        assert_eq!(sweep_point("a-1e5"), None);
    }

    #[test]
    fn ci_of_mean() {
        let (m, (lo, hi)) = mean_ci(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((hi - 2.0 - 2.484).abs() < 0.01 && (2.0 - lo - 2.484).abs() < 0.01);
        assert!(mean_ci(&[]).0.is_nan());
        assert!(mean_ci(&[1.0]).1 .0.is_nan());
    }
}
