//! The CI gate's decision rule: is the newest result a regression?
//!
//! Two baselines:
//! * **History** ([`check_history`]): a prediction interval from the last
//!   ≤ [`GateConfig::max_history`] comparable results, one point per
//!   experiment ([`HistoryPoint`]). Like Perfherder and Bencher (a t-test
//!   of the newest point against a recent window), with the window
//!   restarting after the history's last change point ([`detect`]) so an
//!   accepted earlier step neither widens the interval nor hides behind it.
//! * **One named experiment** ([`check_experiment`]): the runs of both
//!   experiments through [`compare_family`], the same verdicts as `fslab
//!   compare`.
//!
//! Both give one [`GateResult`] per metric and a [`GateReport`] whose
//! [`GateReport::exit_status`] is what `fslab check` exits with: 1 when a
//! decisive metric regressed, else 0. The error rates of both rules are
//! measured by [`crate::simulation::gate_error_rates`] (`fslab
//! simulate-changepoints`).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::changepoint::{detect, ChangePointConfig};
use super::history::HistoryPoint;
use super::{benjamini_hochberg, compare_family, t_quantile, CompareConfig, Comparison, Verdict};

/// Thresholds of the gate. Unusable values are replaced by the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GateConfig {
    /// Significance level (after Benjamini–Hochberg across the decisive
    /// metrics of one check); the prediction interval is `1 − alpha`.
    /// Default 0.01.
    pub alpha: f64,
    /// Changes within ±theta (a fraction) are never a regression or an
    /// improvement, however significant. Default 0.02, as `fslab compare`.
    pub theta: f64,
    /// Most history points in the baseline window. Default 64.
    pub max_history: usize,
    /// Fewest baseline points (after a restart at a change point) for a
    /// decision; fewer → inconclusive. Default 5, at least 3.
    pub min_history: usize,
    /// Start the window after the last change point of the history.
    /// Default true.
    pub restart_at_change_point: bool,
    /// Change-point detection used for that restart.
    pub changepoint: ChangePointConfig,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            alpha: 0.01,
            theta: 0.02,
            max_history: 64,
            min_history: 5,
            restart_at_change_point: true,
            changepoint: ChangePointConfig::default(),
        }
    }
}

impl GateConfig {
    fn sanitized(&self) -> GateConfig {
        let d = GateConfig::default();
        let min_history = if self.min_history >= 3 { self.min_history } else { d.min_history };
        GateConfig {
            alpha: if self.alpha > 0.0 && self.alpha < 1.0 { self.alpha } else { d.alpha },
            theta: if self.theta >= 0.0 && self.theta.is_finite() { self.theta } else { d.theta },
            max_history: if self.max_history == 0 { d.max_history } else { self.max_history.max(min_history) },
            min_history,
            restart_at_change_point: self.restart_at_change_point,
            changepoint: self.changepoint.sanitized(),
        }
    }

    fn compare_config(&self) -> CompareConfig {
        CompareConfig { alpha: self.alpha, theta: self.theta, ..CompareConfig::default() }
    }
}

/// What the gate concluded for one metric (or, in [`GateReport::outcome`],
/// for the whole check).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateOutcome {
    /// Significantly worse than the baseline, by more than theta.
    Regression,
    /// Significantly better, by more than theta.
    Improvement,
    /// Within the baseline's noise (or within theta).
    Ok,
    /// No decision possible: too little baseline, no value, no test.
    Inconclusive,
}

impl GateOutcome {
    /// The serialized name.
    pub fn as_str(&self) -> &'static str {
        match self {
            GateOutcome::Regression => "regression",
            GateOutcome::Improvement => "improvement",
            GateOutcome::Ok => "ok",
            GateOutcome::Inconclusive => "inconclusive",
        }
    }
}

impl std::fmt::Display for GateOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scale the history rule worked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// ln(mean): every mean positive; intervals are multiplicative.
    Log,
    /// The means themselves (some mean ≤ 0).
    Raw,
}

/// The numbers behind a history decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HistoryEvidence {
    /// Index into the given history where the baseline window starts.
    pub window_start: usize,
    /// Points in the baseline window (finite means only).
    pub baseline_points: usize,
    /// Index into the given history of the change point the window restarted
    /// at, if it did.
    pub change_point: Option<usize>,
    /// Centre of the baseline: geometric mean of the point means (log scale)
    /// or their mean (raw scale).
    pub baseline_mean: f64,
    /// Standard deviation of the baseline means, in scale units (log: about
    /// the CV of the experiment means).
    pub baseline_stddev: f64,
    /// The `1 − alpha` prediction interval for the newest mean, in the
    /// metric's unit.
    pub interval_low: f64,
    pub interval_high: f64,
    /// The point under test.
    pub newest: HistoryPoint,
    pub scale: Scale,
    /// `(newest − centre) / prediction sd`, on the scale.
    pub t: f64,
    /// Degrees of freedom: baseline points − 1.
    pub df: f64,
}

/// What a gate decision rests on: the metric's history, or this experiment's own comparison (not the `evidence` metrics of a run).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "against", rename_all = "kebab-case")]
// One per gate decision, never in bulk: the size of `Comparison` does not matter.
#[allow(clippy::large_enum_variant)]
pub enum GateBasis {
    History(HistoryEvidence),
    Experiment(Comparison),
    /// No decision was possible (see [`GateResult::note`]).
    None,
}

/// One metric's gate decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateResult {
    pub name: String,
    pub higher_is_better: bool,
    /// Only decisive metrics fail the gate.
    pub decisive: bool,
    pub outcome: GateOutcome,
    /// `(newest / baseline − 1) · 100`.
    pub change_pct: f64,
    /// Two-sided p-value; 1 when no test was possible.
    pub p_value: f64,
    /// Benjamini–Hochberg across the decisive metrics of the check (the
    /// others form their own family).
    pub p_adjusted: f64,
    /// Why the outcome is inconclusive, when it is.
    pub note: Option<String>,
    pub evidence: GateBasis,
}

/// The whole check, in input order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateReport {
    pub config: GateConfig,
    pub metrics: Vec<GateResult>,
}

impl GateReport {
    /// Summary over the decisive metrics: regression if any regressed, else
    /// inconclusive if any could not be decided, else improvement if any
    /// improved, else ok (also when there are no decisive metrics).
    pub fn outcome(&self) -> GateOutcome {
        let has = |o| self.metrics.iter().any(|m| m.decisive && m.outcome == o);
        [GateOutcome::Regression, GateOutcome::Inconclusive, GateOutcome::Improvement]
            .into_iter()
            .find(|&o| has(o))
            .unwrap_or(GateOutcome::Ok)
    }

    /// A decisive metric regressed.
    pub fn failed(&self) -> bool {
        self.outcome() == GateOutcome::Regression
    }

    /// `fslab check`'s exit status: 1 when [`GateReport::failed`], else 0
    /// (2, bad usage, is the command's).
    pub fn exit_status(&self) -> u8 {
        u8::from(self.failed())
    }
}

/// One metric's history for [`check_history`].
#[derive(Clone, Copy, Debug)]
pub struct MetricHistory<'a> {
    pub name: &'a str,
    pub higher_is_better: bool,
    pub decisive: bool,
    /// Earlier comparable results, oldest first, without the newest.
    pub history: &'a [HistoryPoint],
    pub newest: HistoryPoint,
}

/// One metric's runs for [`check_experiment`].
#[derive(Clone, Copy, Debug)]
pub struct MetricRuns<'a> {
    pub name: &'a str,
    pub higher_is_better: bool,
    pub decisive: bool,
    /// Run values of the named baseline experiment.
    pub baseline: &'a [f64],
    /// Run values of the newest experiment.
    pub newest: &'a [f64],
}

/// The newest result of each metric against its history.
///
/// Rule, per metric:
/// 1. Baseline window: the last `max_history` points with a finite mean;
///    with `restart_at_change_point`, only those after the window's last
///    change point. Fewer than `min_history` → inconclusive.
/// 2. On ln(mean) (raw means if any is ≤ 0): centre `x̄` and sd `s` of the
///    window's k means; prediction sd `s_p = √(s²(1 + 1/k) + e)`, where `e`
///    is how much the newest point's own squared standard error exceeds the
///    window's average (fewer or noisier runs widen the interval; more
///    runs never narrow it below the history's spread).
/// 3. `t = (y − x̄) / s_p`, two-sided p from Student's t with k − 1 df;
///    `s_p = 0` gives p = 0 for any difference, 1 for none.
/// 4. Benjamini–Hochberg across the decisive metrics (and separately across
///    the rest); regression / improvement when `p_adjusted < alpha` and the
///    change exceeds theta in the worse / better direction, else ok.
pub fn check_history(metrics: &[MetricHistory], cfg: &GateConfig) -> GateReport {
    let cfg = cfg.sanitized();
    let analysed: Vec<Analysed> = metrics.iter().map(|m| analyse_history(m, &cfg)).collect();
    finish(analysed, cfg)
}

/// The newest experiment's runs of each metric against a named experiment's,
/// by [`compare_family`] (Welch on logs, BH, the verdict rule of `fslab
/// compare` with this config's alpha and theta), within the decisive metrics
/// and separately within the rest.
pub fn check_experiment(metrics: &[MetricRuns], cfg: &GateConfig) -> GateReport {
    let cfg = cfg.sanitized();
    let mut results: Vec<Option<GateResult>> = vec![None; metrics.len()];
    for decisive in [true, false] {
        let idx: Vec<usize> = (0..metrics.len()).filter(|&i| metrics[i].decisive == decisive).collect();
        let items: Vec<(&[f64], &[f64], bool)> =
            idx.iter().map(|&i| (metrics[i].baseline, metrics[i].newest, metrics[i].higher_is_better)).collect();
        for (&i, c) in idx.iter().zip(compare_family(&items, &cfg.compare_config())) {
            let m = &metrics[i];
            let outcome = match c.verdict {
                Verdict::Regressed => GateOutcome::Regression,
                Verdict::Improved => GateOutcome::Improvement,
                Verdict::NoChange => GateOutcome::Ok,
                Verdict::Inconclusive => GateOutcome::Inconclusive,
            };
            let note = (outcome == GateOutcome::Inconclusive).then(|| match c.runs_needed {
                Some(n) => format!("not decisive; about {n} runs per side would likely decide it"),
                None => "too few runs to compare".to_string(),
            });
            results[i] = Some(GateResult {
                name: m.name.to_string(),
                higher_is_better: m.higher_is_better,
                decisive,
                outcome,
                change_pct: c.change_pct,
                p_value: c.p_value,
                p_adjusted: c.p_adjusted,
                note,
                evidence: GateBasis::Experiment(c),
            });
        }
    }
    GateReport { config: cfg, metrics: results.into_iter().flatten().collect() }
}

/// A history decision before the family adjustment.
struct Analysed {
    result: GateResult,
    /// Newest / baseline on the metric's scale (1 + relative change).
    ratio: f64,
}

fn inconclusive(m: &MetricHistory, note: String) -> Analysed {
    Analysed {
        result: GateResult {
            name: m.name.to_string(),
            higher_is_better: m.higher_is_better,
            decisive: m.decisive,
            outcome: GateOutcome::Inconclusive,
            change_pct: f64::NAN,
            p_value: 1.0,
            p_adjusted: 1.0,
            note: Some(note),
            evidence: GateBasis::None,
        },
        ratio: f64::NAN,
    }
}

fn analyse_history(m: &MetricHistory, cfg: &GateConfig) -> Analysed {
    if !m.newest.mean.is_finite() {
        return inconclusive(m, "the newest result has no value".into());
    }
    let finite: Vec<usize> = (0..m.history.len()).filter(|&i| m.history[i].mean.is_finite()).collect();
    let mut window = &finite[finite.len().saturating_sub(cfg.max_history)..];
    if window.len() < cfg.min_history {
        return inconclusive(m, format!("{} comparable results; the gate needs {}", window.len(), cfg.min_history));
    }
    let mut change_point = None;
    if cfg.restart_at_change_point {
        let means: Vec<f64> = window.iter().map(|&i| m.history[i].mean).collect();
        if let Some(c) = detect(&means, &cfg.changepoint).change_points.last() {
            change_point = Some(window[c.index]);
            window = &window[c.index..];
            if window.len() < cfg.min_history {
                return inconclusive(
                    m,
                    format!(
                        "the history changed level {} results ago (at point {}); the gate needs {} since",
                        window.len(),
                        window[0],
                        cfg.min_history
                    ),
                );
            }
        }
    }
    let points: Vec<&HistoryPoint> = window.iter().map(|&i| &m.history[i]).collect();
    let scale = if m.newest.mean > 0.0 && points.iter().all(|p| p.mean > 0.0) { Scale::Log } else { Scale::Raw };
    let on_scale = |p: &HistoryPoint| match scale {
        Scale::Log => (p.mean.ln(), p.se() / p.mean),
        Scale::Raw => (p.mean, p.se()),
    };
    let (vals, ses): (Vec<f64>, Vec<f64>) = points.iter().map(|p| on_scale(p)).unzip();
    let k = vals.len() as f64;
    // Identical means must give exactly zero spread, not rounding noise.
    let (centre, var) = if vals.iter().all(|&v| v == vals[0]) {
        (vals[0], 0.0)
    } else {
        let c = vals.iter().sum::<f64>() / k;
        (c, vals.iter().map(|v| (v - c) * (v - c)).sum::<f64>() / (k - 1.0))
    };
    let (y, se_new) = on_scale(&m.newest);
    let known: Vec<f64> = ses.iter().copied().filter(|s| s.is_finite()).collect();
    let excess = if se_new.is_finite() && !known.is_empty() {
        let typical = known.iter().map(|s| s * s).sum::<f64>() / known.len() as f64;
        (se_new * se_new - typical).max(0.0)
    } else {
        0.0
    };
    let sd_pred = (var * (1.0 + 1.0 / k) + excess).sqrt();
    let diff = y - centre;
    let df = k - 1.0;
    let (t, p_value, half) = if sd_pred == 0.0 {
        (if diff == 0.0 { 0.0 } else { diff.signum() * f64::INFINITY }, if diff == 0.0 { 1.0 } else { 0.0 }, 0.0)
    } else {
        let t = diff / sd_pred;
        let p = StudentsT::new(0.0, 1.0, df).map_or(1.0, |d| (2.0 * d.sf(t.abs())).clamp(0.0, 1.0));
        (t, p, t_quantile(1.0 - cfg.alpha / 2.0, df) * sd_pred)
    };
    let (baseline_mean, lo, hi, ratio) = match scale {
        Scale::Log => (centre.exp(), (centre - half).exp(), (centre + half).exp(), diff.exp()),
        Scale::Raw => (centre, centre - half, centre + half, 1.0 + diff / centre.abs()),
    };
    let evidence = HistoryEvidence {
        window_start: window[0],
        baseline_points: window.len(),
        change_point,
        baseline_mean,
        baseline_stddev: var.sqrt(),
        interval_low: lo,
        interval_high: hi,
        newest: m.newest,
        scale,
        t,
        df,
    };
    Analysed {
        result: GateResult {
            name: m.name.to_string(),
            higher_is_better: m.higher_is_better,
            decisive: m.decisive,
            outcome: GateOutcome::Ok,
            change_pct: (ratio - 1.0) * 100.0,
            p_value,
            p_adjusted: p_value,
            note: None,
            evidence: GateBasis::History(evidence),
        },
        ratio,
    }
}

/// Family adjustment and the outcome of every decided history metric.
fn finish(mut analysed: Vec<Analysed>, cfg: GateConfig) -> GateReport {
    for decisive in [true, false] {
        let idx: Vec<usize> = (0..analysed.len()).filter(|&i| analysed[i].result.decisive == decisive).collect();
        let p: Vec<f64> = idx.iter().map(|&i| analysed[i].result.p_value).collect();
        for (&i, pa) in idx.iter().zip(benjamini_hochberg(&p)) {
            analysed[i].result.p_adjusted = pa;
        }
    }
    let metrics = analysed
        .into_iter()
        .map(|Analysed { mut result, ratio }| {
            if result.outcome != GateOutcome::Inconclusive {
                let up = ratio > 1.0 + cfg.theta;
                let down = ratio < 1.0 / (1.0 + cfg.theta);
                let (worse, better) = if result.higher_is_better { (down, up) } else { (up, down) };
                let significant = result.p_adjusted < cfg.alpha;
                result.outcome = if significant && worse {
                    GateOutcome::Regression
                } else if significant && better {
                    GateOutcome::Improvement
                } else {
                    GateOutcome::Ok
                };
            }
            result
        })
        .collect();
    GateReport { config: cfg, metrics }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    const Z: [f64; 20] =
        [0.3, -1.2, 0.8, 0.1, -0.5, 1.4, -0.9, 0.2, 0.6, -0.3, -1.6, 0.9, 0.0, 0.4, -0.7, 1.1, -0.2, 0.5, -1.0, 0.7];

    fn point(mean: f64, stddev: f64, n: usize) -> HistoryPoint {
        let half = if n >= 2 { t_quantile(0.975, (n - 1) as f64) * stddev / (n as f64).sqrt() } else { f64::NAN };
        HistoryPoint { mean, ci_low: mean - half, ci_high: mean + half, stddev, n }
    }

    /// 20 experiments around 100 with a 1% spread of means, 5 runs of sd 2 each.
    fn history() -> Vec<HistoryPoint> {
        Z.iter().map(|z| point(100.0 * (1.0 + 0.01 * z), 2.0, 5)).collect()
    }

    fn one<'a>(history: &'a [HistoryPoint], newest: HistoryPoint, hib: bool) -> MetricHistory<'a> {
        MetricHistory { name: "untar/total_s", higher_is_better: hib, decisive: true, history, newest }
    }

    fn evidence(r: &GateResult) -> &HistoryEvidence {
        match &r.evidence {
            GateBasis::History(e) => e,
            other => panic!("{other:?}"),
        }
    }

    // Reference, numpy 2.2.0 / scipy 1.16.3:
    //   z = Z; means = [100*(1+0.01*x) for x in z]; v = np.log(means); k = 20
    //   c = v.mean(); s = v.std(ddof=1); sp = s*np.sqrt(1+1/k)
    //   np.exp(c) = 100.02682511867567, s = 0.008177882884201725
    //   y=108: t = (np.log(y)-c)/sp = 9.152067285871407, 2*scipy.stats.t.sf(t, 19) = 2.150203019318578e-08
    //   y=101: t = 1.155406294331976, p = 0.2622479541003396
    //   np.exp(c ∓ scipy.stats.t.ppf(0.995, 19)*sp) = (97.65728302136152, 102.45386144045762)
    //   y=96 (5 runs of sd 2 are a larger log se than the history's average, typ):
    //     e = (2/np.sqrt(5)/96)**2 - np.mean((2/np.sqrt(5)/means)**2); sp = np.sqrt(s*s*(1+1/k)+e)
    //     t = -4.680842532875346, p = 0.00016281332662047935
    #[test]
    fn prediction_interval_matches_scipy() {
        let h = history();
        let cfg = GateConfig::default();
        let r = check_history(&[one(&h, point(108.0, 2.0, 5), false)], &cfg);
        let m = &r.metrics[0];
        let e = evidence(m);
        assert_eq!((e.baseline_points, e.window_start, e.change_point, e.scale), (20, 0, None, Scale::Log));
        assert!(close(e.baseline_mean, 100.02682511867567, 1e-12), "{}", e.baseline_mean);
        assert!(close(e.baseline_stddev, 0.008177882884201725, 1e-10));
        assert!(close(e.t, 9.152067285871407, 1e-10), "{}", e.t);
        assert!(close(m.p_value, 2.150203019318578e-08, 1e-6), "{}", m.p_value);
        assert!(close(e.interval_low, 97.65728302136152, 1e-10) && close(e.interval_high, 102.45386144045762, 1e-10));
        assert!(close(m.change_pct, (108.0 / 100.02682511867567 - 1.0) * 100.0, 1e-10));
        assert_eq!(m.outcome, GateOutcome::Regression);
        assert_eq!((r.outcome(), r.exit_status()), (GateOutcome::Regression, 1));

        let within = check_history(&[one(&h, point(101.0, 2.0, 5), false)], &cfg);
        assert!(close(within.metrics[0].p_value, 0.2622479541003396, 1e-8));
        assert_eq!((within.outcome(), within.exit_status()), (GateOutcome::Ok, 0));

        let faster = check_history(&[one(&h, point(96.0, 2.0, 5), false)], &cfg);
        assert!(close(faster.metrics[0].p_value, 0.00016281332662047935, 1e-6));
        assert_eq!((faster.outcome(), faster.exit_status()), (GateOutcome::Improvement, 0));
        // The same numbers as a rate: 108 is better, 96 is worse.
        assert_eq!(check_history(&[one(&h, point(108.0, 2.0, 5), true)], &cfg).outcome(), GateOutcome::Improvement);
        assert_eq!(check_history(&[one(&h, point(96.0, 2.0, 5), true)], &cfg).exit_status(), 1);
    }

    // Reference (as above): newest 106 from 2 runs of sd 6: its squared log
    // se (6/√2/106)² exceeds the history's mean (2/√5/mean_i)² by e, and
    //   sp = np.sqrt(s*s*(1+1/k) + e) = 0.03990298202035978
    //   t = 1.4535428174400977, p = 0.16239177130761226
    // (with 5 runs of sd 2 the same mean has p = 1.3418791270785367e-06).
    #[test]
    fn a_noisier_newest_point_widens_the_interval() {
        let h = history();
        let cfg = GateConfig::default();
        let wide = &check_history(&[one(&h, point(106.0, 6.0, 2), false)], &cfg).metrics[0];
        assert!(close(evidence(wide).t, 1.4535428174400977, 1e-9), "{}", evidence(wide).t);
        assert!(close(wide.p_value, 0.16239177130761226, 1e-7));
        assert_eq!(wide.outcome, GateOutcome::Ok);
        let narrow = &check_history(&[one(&h, point(106.0, 2.0, 5), false)], &cfg).metrics[0];
        assert!(close(narrow.p_value, 1.3418791270785367e-06, 1e-6));
        assert_eq!(narrow.outcome, GateOutcome::Regression);
        // More runs than usual never narrow it below the history's spread.
        let precise = &check_history(&[one(&h, point(101.0, 0.1, 50), false)], &cfg).metrics[0];
        assert!(close(precise.p_value, 0.2622479541003396, 1e-8));
    }

    #[test]
    fn small_significant_changes_are_ok() {
        // A tight history (0.1% spread): +1.5% is far outside the interval but within theta.
        let h: Vec<HistoryPoint> = Z.iter().map(|z| point(100.0 * (1.0 + 0.001 * z), 0.2, 5)).collect();
        let m = &check_history(&[one(&h, point(101.5, 0.2, 5), false)], &GateConfig::default()).metrics[0];
        assert!(m.p_value < 1e-10);
        assert_eq!(m.outcome, GateOutcome::Ok);
        let strict = GateConfig { theta: 0.0, ..Default::default() };
        assert_eq!(check_history(&[one(&h, point(101.5, 0.2, 5), false)], &strict).exit_status(), 1);
    }

    #[test]
    fn the_window_restarts_after_the_last_change_point() {
        // 40 experiments at 100, then an accepted 10% speed-up: 20 at 90.
        let mut h: Vec<HistoryPoint> = (0..40).map(|i| point(100.0 * (1.0 + 0.01 * Z[i % 20]), 2.0, 5)).collect();
        h.extend((0..20).map(|i| point(90.0 * (1.0 + 0.01 * Z[(i + 7) % 20]), 2.0, 5)));
        // Back to 100 is a regression against the new level...
        let r = check_history(&[one(&h, point(100.0, 2.0, 5), false)], &GateConfig::default());
        let e = evidence(&r.metrics[0]);
        assert_eq!((e.change_point, e.window_start, e.baseline_points), (Some(40), 40, 20));
        assert_eq!(r.outcome(), GateOutcome::Regression);
        // ...which the whole window, widened by the step, would miss.
        let flat = GateConfig { restart_at_change_point: false, ..Default::default() };
        let r = check_history(&[one(&h, point(100.0, 2.0, 5), false)], &flat);
        assert_eq!((evidence(&r.metrics[0]).baseline_points, r.outcome()), (60, GateOutcome::Ok));
        // Only the last 64 points count.
        let mut long = h.clone();
        long.splice(0..0, (0..30).map(|_| point(1000.0, 2.0, 5)));
        let r = check_history(&[one(&long, point(100.0, 2.0, 5), false)], &flat);
        assert_eq!((evidence(&r.metrics[0]).baseline_points, evidence(&r.metrics[0]).window_start), (64, 26));
    }

    #[test]
    fn too_little_comparable_history_is_inconclusive() {
        let cfg = GateConfig::default();
        let h = history();
        let r = check_history(&[one(&h[..4], point(150.0, 2.0, 5), false)], &cfg);
        assert_eq!(
            (r.metrics[0].outcome, r.outcome(), r.exit_status()),
            (GateOutcome::Inconclusive, GateOutcome::Inconclusive, 0)
        );
        assert_eq!(r.metrics[0].note.as_deref(), Some("4 comparable results; the gate needs 5"));
        assert_eq!(r.metrics[0].p_value, 1.0);
        // NaN means do not count.
        let mut holes = h.clone();
        for p in holes.iter_mut().skip(3) {
            p.mean = f64::NAN;
        }
        assert_eq!(
            check_history(&[one(&holes, point(150.0, 2.0, 5), false)], &cfg).outcome(),
            GateOutcome::Inconclusive
        );
        assert_eq!(
            check_history(&[one(&h, point(f64::NAN, 2.0, 5), false)], &cfg).outcome(),
            GateOutcome::Inconclusive
        );
        // A level change 3 results ago leaves too short a window.
        let mut recent = h.clone();
        recent.extend([point(130.0, 2.0, 5), point(131.0, 2.0, 5), point(129.0, 2.0, 5)]);
        let r = check_history(&[one(&recent, point(130.0, 2.0, 5), false)], &cfg);
        assert_eq!(r.outcome(), GateOutcome::Inconclusive);
        assert_eq!(
            r.metrics[0].note.as_deref(),
            Some("the history changed level 3 results ago (at point 20); the gate needs 5 since")
        );
    }

    #[test]
    fn family_adjustment_and_decisive_metrics() {
        let h = history();
        let cfg = GateConfig::default();
        // +2.7% alone: p ≈ 0.005 → regression.
        let alone = check_history(&[one(&h, point(102.7, 2.0, 5), false)], &cfg);
        let p = alone.metrics[0].p_value;
        assert!(p < 0.01 && p > 0.0025 && alone.failed(), "{p}");
        // Among 4 decisive metrics that did not move, BH makes it 4p > alpha: ok.
        let quiet = one(&h, point(100.0, 2.0, 5), false);
        let r = check_history(&[one(&h, point(102.7, 2.0, 5), false), quiet, quiet, quiet], &cfg);
        assert!(close(r.metrics[0].p_adjusted, 4.0 * p, 1e-12), "{:?}", r.metrics[0]);
        assert_eq!((r.metrics[0].outcome, r.exit_status()), (GateOutcome::Ok, 0));
        // A non-decisive regression is reported, is not in the family, and does not fail the gate.
        let side = MetricHistory { decisive: false, name: "untar/sys_s", ..one(&h, point(120.0, 2.0, 5), false) };
        let r = check_history(&[one(&h, point(100.5, 2.0, 5), false), side], &cfg);
        assert_eq!(r.metrics[1].outcome, GateOutcome::Regression);
        assert_eq!(r.metrics[1].p_adjusted, r.metrics[1].p_value);
        assert_eq!((r.outcome(), r.exit_status()), (GateOutcome::Ok, 0));
        assert_eq!(check_history(&[], &cfg).exit_status(), 0);
    }

    #[test]
    fn raw_scale_and_exact_history() {
        let cfg = GateConfig::default();
        // A metric that can be 0 or negative (a delta): raw means.
        let h: Vec<HistoryPoint> = Z.iter().map(|z| point(z * 0.5, 0.3, 5)).collect();
        let m = &check_history(&[one(&h, point(0.1, 0.3, 5), false)], &cfg).metrics[0];
        assert_eq!(evidence(m).scale, Scale::Raw);
        assert_eq!(m.outcome, GateOutcome::Ok);
        // No spread at all: any difference beyond theta is decided, none is ok.
        let exact = vec![point(10.0, 0.0, 5); 10];
        let r = check_history(&[one(&exact, point(11.0, 0.0, 5), false)], &cfg);
        assert_eq!((r.metrics[0].p_value, r.outcome()), (0.0, GateOutcome::Regression));
        assert!(close(evidence(&r.metrics[0]).interval_low, 10.0, 1e-12));
        let r = check_history(&[one(&exact, point(10.0, 0.0, 5), false)], &cfg);
        assert_eq!((r.metrics[0].p_value, r.outcome()), (1.0, GateOutcome::Ok));
    }

    #[test]
    fn against_one_experiment() {
        // `fslab compare`'s clear 20% slowdown (see compare.rs).
        const B: [f64; 5] = [10.2, 10.5, 9.9, 10.1, 10.4];
        const V: [f64; 5] = [12.1, 12.6, 11.8, 12.3, 12.0];
        let (b, v): (&'static [f64], &'static [f64]) = (&B, &V);
        let cfg = GateConfig::default();
        let runs = |baseline: &'static [f64], newest: &'static [f64], hib| MetricRuns {
            name: "untar/total_s",
            higher_is_better: hib,
            decisive: true,
            baseline,
            newest,
        };
        let r = check_experiment(&[runs(b, v, false)], &cfg);
        assert_eq!((r.outcome(), r.exit_status()), (GateOutcome::Regression, 1));
        let GateBasis::Experiment(c) = &r.metrics[0].evidence else { panic!() };
        assert_eq!(c.verdict, Verdict::Regressed);
        assert_eq!(r.metrics[0].change_pct, c.change_pct);
        assert_eq!(check_experiment(&[runs(v, b, false)], &cfg).outcome(), GateOutcome::Improvement);
        const STEADY: [f64; 10] = [100.0, 100.3, 99.8, 100.1, 99.9, 100.2, 99.7, 100.0, 100.1, 99.9];
        assert_eq!(check_experiment(&[runs(&STEADY, &STEADY, false)], &cfg).outcome(), GateOutcome::Ok);
        let few = check_experiment(&[runs(&b[..1], v, false)], &cfg);
        assert_eq!((few.outcome(), few.exit_status()), (GateOutcome::Inconclusive, 0));
        assert!(few.metrics[0].note.is_some());
        // A noisy, undecided pair: the note is a whole sentence (it was cut
        // off at "would be").
        let noisy = check_experiment(&[runs(&[100.0, 104.0, 98.0, 102.0], &[101.0, 97.0, 103.0, 99.5], false)], &cfg);
        let note = noisy.metrics[0].note.clone().unwrap_or_default();
        assert!(note.ends_with("runs per side would likely decide it"), "{note}");
        // Order kept across the decisive / other families.
        let side = MetricRuns { decisive: false, name: "untar/sys_s", ..runs(b, v, false) };
        let r = check_experiment(&[side, runs(&STEADY, &STEADY, false)], &cfg);
        assert_eq!(r.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["untar/sys_s", "untar/total_s"]);
        assert_eq!((r.metrics[0].outcome, r.exit_status()), (GateOutcome::Regression, 0));
    }

    #[test]
    fn report_serializes_for_ci() {
        let h = history();
        let r = check_history(
            &[one(&h, point(108.0, 2.0, 5), false), one(&h[..2], point(1.0, 0.0, 1), false)],
            &GateConfig::default(),
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["metrics"][0]["outcome"], "regression");
        assert_eq!(json["metrics"][0]["evidence"]["against"], "history");
        assert_eq!(json["metrics"][0]["evidence"]["scale"], "log");
        assert_eq!(json["metrics"][1]["evidence"]["against"], "none");
        assert!(json["metrics"][1]["change_pct"].is_null());
        assert_eq!(json["config"]["max_history"], 64);
        for (o, s) in [
            (GateOutcome::Regression, "regression"),
            (GateOutcome::Ok, "ok"),
            (GateOutcome::Inconclusive, "inconclusive"),
            (GateOutcome::Improvement, "improvement"),
        ] {
            assert_eq!(o.to_string(), s);
        }
    }

    #[test]
    fn bad_config_is_sanitized() {
        let bad = GateConfig { alpha: 0.0, theta: f64::NAN, max_history: 0, min_history: 1, ..Default::default() };
        assert_eq!(bad.sanitized(), GateConfig::default().sanitized());
        let h = history();
        let m = one(&h, point(104.0, 2.0, 5), false);
        assert_eq!(check_history(&[m], &bad).metrics, check_history(&[m], &GateConfig::default()).metrics);
    }
}
