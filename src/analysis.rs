//! From stored per-run metrics to comparison rows: every variant against
//! the baseline, for every workload metric, with Benjamini–Hochberg across
//! the metrics of one (workload, variant) comparison.

use serde::Serialize;

use crate::stats::{compare_family, CompareConfig, Comparison, MeanKind, Verdict};
use crate::store::MetricSeries;

/// One metric of one variant against the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct ComparisonRow {
    pub workload: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub baseline: String,
    pub variant: String,
    pub n_baseline: usize,
    pub n_variant: usize,
    /// mmtests-style mean: harmonic for rates, arithmetic for times.
    pub mean_kind: MeanKind,
    pub mean_baseline: f64,
    pub mean_variant: f64,
    pub change_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    pub p_value: f64,
    pub p_adjusted: f64,
    pub verdict: Verdict,
    pub runs_needed: Option<usize>,
    pub mann_whitney_p: Option<f64>,
    /// Welch and Mann-Whitney disagree on significance.
    pub disagreement: bool,
    pub cv_baseline: f64,
    pub cv_variant: f64,
    /// Indices (in run order) of runs flagged as outliers; never dropped.
    pub outliers_baseline: Vec<usize>,
    pub outliers_variant: Vec<usize>,
    /// Per-run values, in run order.
    pub values_baseline: Vec<f64>,
    pub values_variant: Vec<f64>,
}

/// Compare every non-baseline variant with `baseline`.
///
/// `series` must hold one entry per (workload, metric, variant) as the store
/// returns them; the row order follows it.
pub fn compare_series(series: &[MetricSeries], baseline: &str, cfg: &CompareConfig) -> Vec<ComparisonRow> {
    let mut workloads: Vec<&str> = Vec::new();
    let mut variants: Vec<&str> = Vec::new();
    for s in series {
        if !workloads.contains(&s.workload.as_str()) {
            workloads.push(&s.workload);
        }
        if s.variant != baseline && !variants.contains(&s.variant.as_str()) {
            variants.push(&s.variant);
        }
    }
    let mut rows = Vec::new();
    for workload in &workloads {
        for variant in &variants {
            // Metrics present for both sides of this comparison.
            let pairs: Vec<(&MetricSeries, &MetricSeries)> = series
                .iter()
                .filter(|s| s.workload == *workload && s.variant == baseline)
                .filter_map(|b| {
                    series
                        .iter()
                        .find(|v| v.workload == *workload && v.variant == *variant && v.metric == b.metric)
                        .map(|v| (b, v))
                })
                .collect();
            // Sweep points in numeric order: filemix-1, filemix-8, filemix-16.
            let mut pairs = pairs;
            pairs.sort_by_key(|(a, _)| natural_key(&a.metric));
            let items: Vec<(&[f64], &[f64], bool)> =
                pairs.iter().map(|(b, v)| (b.values.as_slice(), v.values.as_slice(), b.higher_is_better)).collect();
            let comparisons = compare_family(&items, cfg);
            for ((b, v), c) in pairs.into_iter().zip(comparisons) {
                rows.push(row(b, v, c));
            }
        }
    }
    rows
}

fn row(b: &MetricSeries, v: &MetricSeries, c: Comparison) -> ComparisonRow {
    ComparisonRow {
        workload: b.workload.clone(),
        metric: b.metric.clone(),
        unit: b.unit.clone(),
        higher_is_better: b.higher_is_better,
        baseline: b.variant.clone(),
        variant: v.variant.clone(),
        n_baseline: c.baseline.n,
        n_variant: c.variant.n,
        mean_kind: c.baseline.mean_kind,
        mean_baseline: c.baseline.mean,
        mean_variant: c.variant.mean,
        change_pct: c.change_pct,
        ci_low_pct: c.ci_low_pct,
        ci_high_pct: c.ci_high_pct,
        p_value: c.p_value,
        p_adjusted: c.p_adjusted,
        verdict: c.verdict,
        runs_needed: c.runs_needed,
        mann_whitney_p: c.mann_whitney_p,
        disagreement: c.disagreement,
        cv_baseline: c.baseline.cv,
        cv_variant: c.variant.cv,
        outliers_baseline: c.baseline.outliers.clone(),
        outliers_variant: c.variant.outliers.clone(),
        values_baseline: b.values.clone(),
        values_variant: v.values.clone(),
    }
}

/// Sort key that orders embedded numbers by value (`x-8` before `x-16`).
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// True when no row that matters is inconclusive (adaptive repetition may
/// stop). `is_decisive(workload, metric)` says whether a row matters.
pub fn all_decisive(rows: &[ComparisonRow], is_decisive: impl Fn(&str, &str) -> bool) -> bool {
    rows.iter().filter(|r| is_decisive(&r.workload, &r.metric)).all(|r| r.verdict != Verdict::Inconclusive)
}

#[cfg(test)]
mod tests {
    use super::natural_key;

    #[test]
    fn sweep_points_sort_by_number() {
        let mut names = vec!["filemix-16", "filemix-1", "filemix-8", "coldstart-2/p50_s", "coldstart-10/p50_s", "abc"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(
            names,
            vec!["abc", "coldstart-2/p50_s", "coldstart-10/p50_s", "filemix-1", "filemix-8", "filemix-16"]
        );
    }
}
