//! Variant-vs-baseline comparison and the verdict rule.

use std::fmt;

use serde::Serialize;

use super::mannwhitney::mann_whitney_exact;
use super::multiple::benjamini_hochberg;
use super::robust::{count_le, count_lt, hodges_lehmann, mann_whitney_p_no_ties, moses_interval, moses_rank};
use super::samplesize::runs_needed;
use super::sequential::{Look, SequentialDesign};
use super::summary::{finite, mean, sample_var, summarize, Summary};
use super::welch::{t_quantile, welch_t_test, WelchTest};

/// Thresholds for [`compare`]. Out-of-range values (NaN, alpha or power
/// outside (0, 1), negative theta) are replaced by the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CompareConfig {
    /// Significance level: the fixed-n CI is `1 - alpha`. Default 0.05.
    pub alpha: f64,
    /// Equivalence band half-width as a fraction: changes within ±theta
    /// count as "no change". Default 0.02 (±2%).
    pub theta: f64,
    /// Target power for planning (`fslab plan`). Default 0.8.
    pub power: f64,
    /// Whether the runs were collected with sequential looks. Default fixed.
    pub stopping: Stopping,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig { alpha: 0.05, theta: 0.02, power: 0.8, stopping: Stopping::Fixed }
    }
}

/// How the runs of a comparison were collected, which decides the levels
/// its intervals use (see [`crate::sequential`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Stopping {
    /// A fixed number of runs: one look at level α.
    #[default]
    Fixed,
    /// `repetitions = { min, max }`: a look after every round from `min`
    /// to `max`, with group-sequential boundaries.
    Sequential { min: usize, max: usize },
}

impl Stopping {
    /// The stopping rule of `repetitions = { min, max }` (fixed when equal).
    pub fn adaptive(min: usize, max: usize) -> Stopping {
        if max > min {
            Stopping::Sequential { min, max }
        } else {
            Stopping::Fixed
        }
    }
}

impl CompareConfig {
    /// The config with every unusable field replaced by its default.
    fn sanitized(&self) -> CompareConfig {
        let d = CompareConfig::default();
        let unit = |x: f64| x > 0.0 && x < 1.0;
        CompareConfig {
            alpha: if unit(self.alpha) { self.alpha } else { d.alpha },
            theta: if self.theta.is_finite() && self.theta >= 0.0 { self.theta } else { d.theta },
            power: if unit(self.power) { self.power } else { d.power },
            stopping: self.stopping,
        }
    }

    /// The sequential design of `stopping`, if any.
    pub fn design(&self) -> Option<std::sync::Arc<SequentialDesign>> {
        match self.stopping {
            Stopping::Sequential { min, max } if max > min => Some(SequentialDesign::standard(min, max, self.alpha)),
            _ => None,
        }
    }

    /// The look reached with `n` runs per variant.
    pub fn look(&self, n: usize) -> Look {
        match self.design() {
            Some(d) => d.look_at(n),
            None => Look::fixed(n, self.alpha),
        }
    }
}

/// What a comparison concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Significantly worse, by more than the equivalence band.
    Regressed,
    /// Significantly better, by more than the equivalence band.
    Improved,
    /// The whole (equivalence) CI lies inside the equivalence band.
    NoChange,
    /// Not enough evidence either way; see [`Comparison::runs_needed`].
    Inconclusive,
}

impl Verdict {
    /// The serialized name: "regressed", "improved", "no-change", "inconclusive".
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no-change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the p-value and CI of a [`Comparison`] were obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompareMethod {
    /// All values positive: Hodges–Lehmann shift of ln(values) with its
    /// distribution-free (Moses) interval, Mann–Whitney p. Robust to a
    /// minority of outlier runs.
    LogRank,
    /// All values positive but too few runs for a rank interval at level α
    /// (fewer than 4 per side at α = 0.05): Welch t-test on ln(values).
    LogWelch,
    /// Some value `<= 0` (logs undefined, a ratio of means would flip sign):
    /// Welch t-test on raw values; the estimate is the difference of the
    /// arithmetic means relative to |baseline mean| (`ratio = 1 + (mv −
    /// mb)/|mb|`, so ratio > 1 always means the values went up), with the
    /// Welch interval of that difference scaled the same way.
    RawWelchDelta,
    /// Every value on both sides is the same number: `no-change`.
    Constant,
    /// Fewer than two finite values on a side: no test possible.
    InsufficientData,
}

/// Which rule decided a [`Comparison`]: the look its data reached and the
/// levels used there.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DecisionRule {
    /// Fixed n or sequential looks.
    pub stopping: Stopping,
    /// The look and its nominal one-sided levels.
    pub look: Look,
    /// Metrics compared together (Benjamini–Hochberg family size).
    pub family_size: usize,
    /// Of those, how many BH selected at this look's level: the interval of
    /// a selected metric is widened to level `1 − a · selected / family_size`
    /// (false-coverage-rate interval, Benjamini & Yekutieli 2005).
    pub selected: usize,
}

impl DecisionRule {
    /// E.g. "fixed n = 5" or "sequential 5..20, look 8 of 16 at n = 12".
    pub fn describe(&self) -> String {
        match self.stopping {
            Stopping::Fixed => format!("fixed n = {}", self.look.n),
            Stopping::Sequential { min, max } => format!(
                "sequential {min}..{max}, look {} of {} at n = {}{}",
                self.look.index,
                self.look.count,
                self.look.n,
                if self.look.is_final() { " (final)" } else { "" }
            ),
        }
    }
}

/// A variant compared with a baseline on one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Summary of the baseline runs.
    #[serde(rename = "baseline_summary")]
    pub baseline: Summary,
    /// Summary of the variant runs.
    #[serde(rename = "variant_summary")]
    pub variant: Summary,
    /// `(variant.mean / baseline.mean - 1) * 100` with the mmtests-style
    /// means. If the two summaries ended up with different mean kinds (one
    /// side had non-positive values), arithmetic means are used for both.
    pub change_pct: f64,
    /// The primary ratio estimate, variant / baseline: exp(Hodges–Lehmann
    /// shift of the logs) under [`CompareMethod::LogRank`], the ratio of
    /// geometric means under `LogWelch`, `1 + (mv − mb)/|mb|` under
    /// `RawWelchDelta`. The CI always contains it.
    pub ratio: f64,
    /// Why the interval is of a different kind or cannot be computed
    /// (difference-based for values ≤ 0; too few runs; baseline mean 0),
    /// for the row's notes. None for the usual ratio intervals.
    pub interval_note: Option<String>,
    /// Lower end of the CI of `ratio` at level `ci_level`, as % change.
    pub ci_low_pct: f64,
    /// Upper end of that CI, as % change.
    pub ci_high_pct: f64,
    /// Two-sided level of `[ci_low_pct, ci_high_pct]`: `1 − α` at a fixed-n
    /// look, higher at an early sequential look or after the
    /// false-coverage-rate adjustment. `regressed`/`improved` need this
    /// interval beyond the band.
    pub ci_level: f64,
    /// Lower end of the interval the `no-change` test used, as % change.
    pub equivalence_low_pct: f64,
    /// Upper end of that interval, as % change.
    pub equivalence_high_pct: f64,
    /// Two-sided level of the `no-change` interval.
    pub equivalence_level: f64,
    /// Two-sided p-value of no change from the primary test (Mann–Whitney
    /// under `LogRank`, Welch otherwise). 1 when no test is possible; never NaN.
    pub p_value: f64,
    /// Benjamini–Hochberg adjusted p-value across the family compared
    /// together; equals `p_value` when compared alone.
    pub p_adjusted: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// Which rule decided, at which look.
    pub decided_by: DecisionRule,
    /// Only when inconclusive: estimated runs per variant after which a
    /// decisive verdict is likely (see [`crate::runs_needed`]).
    /// `None` also when there is no noise estimate.
    pub runs_needed: Option<usize>,
    /// Two-sided exact Mann–Whitney U p-value, once both sides have at least
    /// 4 values (with 3 per side the smallest possible p is 0.1).
    pub mann_whitney_p: Option<f64>,
    /// Two-sided Welch t-test p-value (on ln(values) when all are positive).
    pub welch_p: Option<f64>,
    /// Mann–Whitney and Welch disagree on significance at alpha (both judged
    /// on unadjusted p-values): worth a look at the raw runs.
    pub disagreement: bool,
    /// Direction of the metric, as passed in.
    pub higher_is_better: bool,
    /// How `p_value` and the CI were obtained.
    pub method: CompareMethod,
}

/// The data in the form the verdict rule reads it.
struct Evidence {
    method: CompareMethod,
    hib: bool,
    /// Ascending ln(values) (log methods) or values (raw), finite only.
    x: Vec<f64>,
    y: Vec<f64>,
    /// Welch on `x`/`y`.
    welch: Option<WelchTest>,
    /// Raw method: ratio of means and its delta-method standard error.
    raw_ratio: f64,
    raw_se: f64,
    p_value: f64,
    /// Runs per variant the look is judged at.
    n_look: usize,
}

/// One-sided tests of an interval at level `a` against the band.
#[derive(Clone, Copy, Debug, Default)]
struct BandTests {
    /// The whole interval lies above the band (ratio > 1 + θ).
    above: bool,
    /// The whole interval lies below the band (ratio < 1/(1 + θ)).
    below: bool,
    /// The whole interval lies inside the band.
    inside: bool,
}

impl Evidence {
    /// `rank`: allow the rank interval (false only for the simulation's
    /// Welch-only candidate rule).
    fn prepare(baseline: &[f64], variant: &[f64], hib: bool, alpha: f64, rank: bool) -> Evidence {
        let b = finite(baseline);
        let v = finite(variant);
        let n_look = b.len().min(v.len());
        let mut ev = Evidence {
            method: CompareMethod::InsufficientData,
            hib,
            x: Vec::new(),
            y: Vec::new(),
            welch: None,
            raw_ratio: f64::NAN,
            raw_se: f64::NAN,
            p_value: 1.0,
            n_look,
        };
        if b.len() < 2 || v.len() < 2 {
            (ev.x, ev.y) = (b, v);
            return ev;
        }
        if b.iter().chain(&v).all(|&x| x == b[0]) {
            ev.method = CompareMethod::Constant;
            return ev;
        }
        let positive = b.iter().chain(&v).all(|&x| x > 0.0);
        let (mut x, mut y) = if positive {
            (b.iter().map(|x| x.ln()).collect::<Vec<f64>>(), v.iter().map(|x| x.ln()).collect::<Vec<f64>>())
        } else {
            (b.clone(), v.clone())
        };
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        ev.welch = welch_t_test(&x, &y);
        if positive {
            ev.method = if rank && moses_rank(x.len(), y.len(), alpha / 2.0) >= 1 {
                CompareMethod::LogRank
            } else {
                CompareMethod::LogWelch
            };
            ev.p_value = match ev.method {
                CompareMethod::LogRank => rank_p_value(&x, &y),
                _ => ev.welch.map_or(1.0, |w| w.p_value),
            };
        } else {
            // Logs are undefined: Welch on raw values, and the ratio of means
            // R = mv/mb with the delta-method variance
            //   Var(R) ≈ (Var(mv) + R² Var(mb)) / mb²,
            // written this way (rather than R²·(CVv² + CVb²)) so mv = 0 is fine.
            let (mb, mv) = (mean(&b), mean(&v));
            ev.method = CompareMethod::RawWelchDelta;
            // The difference of means, relative to |mb| so that its sign
            // (and the verdict's direction) is the direction the values
            // moved even when they are negative; its standard error is
            // Welch's, scaled the same way (a ratio's delta-method error
            // collapses to 0 when the variant mean is 0).
            ev.raw_ratio = relative_ratio(mv, mb);
            ev.raw_se = ev.welch.map_or(f64::NAN, |w| w.se) / mb.abs();
            ev.p_value = ev.welch.map_or(1.0, |w| w.p_value);
        }
        if ev.p_value.is_nan() {
            ev.p_value = 1.0;
        }
        ev.x = x;
        ev.y = y;
        ev
    }

    /// The band tests of the two-sided `1 − 2a` interval.
    fn band_tests(&self, a: f64, theta: f64) -> BandTests {
        let m = theta.ln_1p();
        match self.method {
            CompareMethod::InsufficientData => BandTests::default(),
            CompareMethod::Constant => BandTests { inside: true, ..BandTests::default() },
            CompareMethod::LogRank => {
                let k = moses_rank(self.x.len(), self.y.len(), a);
                if k == 0 {
                    return BandTests::default();
                }
                let pairs = self.x.len() * self.y.len();
                // D_(k) > m  ⇔  fewer than k differences ≤ m, and so on.
                let le_hi = count_le(&self.x, &self.y, m);
                let lt_lo = count_lt(&self.x, &self.y, -m);
                BandTests { above: le_hi < k, below: lt_lo > pairs - k, inside: lt_lo < k && le_hi > pairs - k }
            }
            CompareMethod::LogWelch => match self.welch.and_then(|w| t_interval(w.diff, w.se, w.df, a)) {
                Some((lo, hi)) => BandTests { above: lo > m, below: hi < -m, inside: lo >= -m && hi <= m },
                None => BandTests::default(),
            },
            CompareMethod::RawWelchDelta => {
                let (hi_edge, lo_edge) = (1.0 + theta, 1.0 / (1.0 + theta));
                match self.welch.and_then(|w| t_interval(self.raw_ratio, self.raw_se, w.df, a)) {
                    Some((lo, hi)) => {
                        BandTests { above: lo > hi_edge, below: hi < lo_edge, inside: lo >= lo_edge && hi <= hi_edge }
                    }
                    None => BandTests::default(),
                }
            }
        }
    }

    /// The `1 − 2a` interval of the ratio, as (low, high) ratios.
    fn ratio_interval(&self, a: f64) -> (f64, f64) {
        match self.method {
            CompareMethod::InsufficientData => {
                if self.x.iter().chain(&self.y).all(|&v| v > 0.0) {
                    (0.0, f64::INFINITY)
                } else {
                    (f64::NEG_INFINITY, f64::INFINITY)
                }
            }
            CompareMethod::Constant => (1.0, 1.0),
            CompareMethod::LogRank => {
                let (lo, hi) = moses_interval(&self.x, &self.y, moses_rank(self.x.len(), self.y.len(), a));
                (lo.exp(), hi.exp())
            }
            CompareMethod::LogWelch => match self.welch.and_then(|w| t_interval(w.diff, w.se, w.df, a)) {
                Some((lo, hi)) => (lo.exp(), hi.exp()),
                None => (0.0, f64::INFINITY),
            },
            CompareMethod::RawWelchDelta => self
                .welch
                .and_then(|w| t_interval(self.raw_ratio, self.raw_se, w.df, a))
                .unwrap_or((f64::NEG_INFINITY, f64::INFINITY)),
        }
    }

    /// Point estimate of the ratio.
    fn ratio(&self) -> f64 {
        match self.method {
            CompareMethod::Constant => 1.0,
            CompareMethod::LogRank => hodges_lehmann(&self.x, &self.y).exp(),
            CompareMethod::LogWelch => self.welch.map_or(f64::NAN, |w| w.diff.exp()),
            CompareMethod::RawWelchDelta => self.raw_ratio,
            CompareMethod::InsufficientData => f64::NAN,
        }
    }
}

/// `est ± t_{1−a, df} · se`; the point when `se == 0`; None when undefined.
fn t_interval(est: f64, se: f64, df: f64, a: f64) -> Option<(f64, f64)> {
    if !est.is_finite() || !se.is_finite() {
        return None;
    }
    if se == 0.0 {
        return Some((est, est));
    }
    let q = t_quantile(1.0 - a, df);
    q.is_finite().then_some((est - q * se, est + q * se))
}

/// Two-sided Mann–Whitney p of ascending samples: the cached exact table
/// without ties, the tie-aware exact test otherwise.
fn rank_p_value(x: &[f64], y: &[f64]) -> f64 {
    let ties = x.windows(2).any(|w| w[0] == w[1])
        || y.windows(2).any(|w| w[0] == w[1])
        || count_le(x, y, 0.0) != count_lt(x, y, 0.0);
    if !ties {
        if let Some(p) = mann_whitney_p_no_ties(x, y) {
            return p;
        }
    }
    mann_whitney_exact(x, y)
}

/// The verdict of one metric of a family, and the levels used.
struct Decision {
    verdict: Verdict,
    look: Look,
    /// One-sided level of the efficacy interval (after FCR widening).
    efficacy_level: f64,
    selected: usize,
}

/// The verdict rule for a family of metrics of one comparison.
///
/// With `a_k` the efficacy level and `b_k` the equivalence level of the
/// look each metric's data reached (`α/2` each at a fixed-n look; see
/// [`crate::sequential`]), and `R` the number of metrics whose
/// Benjamini–Hochberg adjusted p is at most `2 a_k`:
/// * Regressed / Improved: the metric is among the `R`, and its interval at
///   two-sided level `1 − 2 a_k R / m` (the false-coverage-rate interval of
///   Benjamini & Yekutieli) lies beyond the band on the worse / better side.
/// * NoChange: its interval at level `1 − 2 b_k` lies inside the band. Not
///   adjusted for multiplicity: a `no-change` claim is about one metric.
/// * Inconclusive otherwise.
fn decide_family(
    evidence: &[Evidence],
    cfg: &CompareConfig,
    look_of: &dyn Fn(usize) -> Look,
) -> (Vec<f64>, Vec<Decision>) {
    let p: Vec<f64> = evidence.iter().map(|e| e.p_value).collect();
    let adjusted = benjamini_hochberg(&p);
    let looks: Vec<Look> = evidence.iter().map(|e| look_of(e.n_look)).collect();
    let m = evidence.len();
    let is_selected = |i: usize| {
        !matches!(evidence[i].method, CompareMethod::InsufficientData | CompareMethod::Constant)
            && adjusted[i] <= 2.0 * looks[i].efficacy_level
    };
    let selected = (0..m).filter(|&i| is_selected(i)).count();
    let decisions = (0..m)
        .map(|i| {
            let ev = &evidence[i];
            let look = looks[i];
            let efficacy_level =
                if is_selected(i) { look.efficacy_level * selected as f64 / m as f64 } else { look.efficacy_level };
            let eff = ev.band_tests(efficacy_level, cfg.theta);
            let (worse, better) = if ev.hib { (eff.below, eff.above) } else { (eff.above, eff.below) };
            let verdict = if is_selected(i) && worse {
                Verdict::Regressed
            } else if is_selected(i) && better {
                Verdict::Improved
            } else if ev.band_tests(look.equivalence_level, cfg.theta).inside {
                Verdict::NoChange
            } else {
                Verdict::Inconclusive
            };
            Decision { verdict, look, efficacy_level, selected }
        })
        .collect();
    (adjusted, decisions)
}

/// Compare `variant` against `baseline` on one metric: a family of one
/// (see [`compare_family`] for the rule).
///
/// Degenerate input: fewer than two finite values on a side → Inconclusive
/// with `p_value = 1`; every value the same on both sides → NoChange; zero
/// variance on both sides with different values → the CI is the point
/// ratio; any value `<= 0` → see [`CompareMethod::RawWelchDelta`].
/// Non-finite values are ignored.
pub fn compare(baseline: &[f64], variant: &[f64], higher_is_better: bool, cfg: &CompareConfig) -> Comparison {
    compare_family(&[(baseline, variant, higher_is_better)], cfg).pop().expect("one item in, one out")
}

/// Several metrics of ONE variant-vs-baseline comparison, as
/// `(baseline, variant, higher_is_better)`. Output order = input order.
///
/// Verdict rule, with band `[1/(1+θ), 1+θ]` on the ratio (`±ln(1+θ)` in
/// log space): the "worse" direction is ratio > 1 for lower-is-better
/// metrics and ratio < 1 for higher-is-better ones.
/// * Regressed / Improved: selected by Benjamini–Hochberg across the family
///   at the look's level and the whole false-coverage-rate interval beyond
///   the band on the worse / better side (a tiny but significant change is
///   still not a regression: it is below what we care about).
/// * NoChange: the whole equivalence interval inside the band.
/// * Inconclusive: otherwise, with [`Comparison::runs_needed`].
///
/// Intervals: Hodges–Lehmann/Moses on ln(values) ([`CompareMethod::LogRank`]),
/// falling back to Welch when there are too few runs for a rank interval
/// or logs are undefined. Levels: `α` at a fixed-n look; the
/// group-sequential boundaries of [`crate::sequential`] when
/// `cfg.stopping` is sequential.
pub fn compare_family(items: &[(&[f64], &[f64], bool)], cfg: &CompareConfig) -> Vec<Comparison> {
    let cfg = cfg.sanitized();
    let evidence: Vec<Evidence> =
        items.iter().map(|&(b, v, hib)| Evidence::prepare(b, v, hib, cfg.alpha, true)).collect();
    let (adjusted, decisions) = decide_family(&evidence, &cfg, &|n| cfg.look(n));
    items
        .iter()
        .zip(evidence)
        .zip(decisions.into_iter().zip(adjusted))
        .map(|((&(b, v, hib), ev), (d, p_adjusted))| describe(b, v, hib, &ev, &d, p_adjusted, items.len(), &cfg))
        .collect()
}

/// Only the verdicts of [`compare_family`] (same rule, same code), without
/// the summaries, estimates and intervals: what the simulation needs.
pub(crate) fn verdicts(items: &[(&[f64], &[f64], bool)], cfg: &CompareConfig) -> Vec<Verdict> {
    let cfg = cfg.sanitized();
    verdicts_at(items, &cfg, &|n| cfg.look(n), true)
}

/// [`verdicts`] with the levels of any design (`look_of`) and optionally
/// without the rank interval: how the simulation tries candidate rules.
pub(crate) fn verdicts_at(
    items: &[(&[f64], &[f64], bool)],
    cfg: &CompareConfig,
    look_of: &dyn Fn(usize) -> Look,
    rank: bool,
) -> Vec<Verdict> {
    let cfg = cfg.sanitized();
    let evidence: Vec<Evidence> =
        items.iter().map(|&(b, v, hib)| Evidence::prepare(b, v, hib, cfg.alpha, rank)).collect();
    decide_family(&evidence, &cfg, look_of).1.into_iter().map(|d| d.verdict).collect()
}

/// Everything the user sees about one decided metric.
#[allow(clippy::too_many_arguments)]
fn describe(
    baseline: &[f64],
    variant: &[f64],
    hib: bool,
    ev: &Evidence,
    d: &Decision,
    p_adjusted: f64,
    family_size: usize,
    cfg: &CompareConfig,
) -> Comparison {
    let bs = summarize(baseline, hib);
    let vs = summarize(variant, hib);
    let b = finite(baseline);
    let v = finite(variant);
    let change_pct = if bs.mean_kind == vs.mean_kind { pct(vs.mean, bs.mean) } else { pct(mean(&v), mean(&b)) };
    let interval_note = interval_note(ev, &b);
    let mann_whitney_p = if b.len() >= 4 && v.len() >= 4 { Some(mann_whitney_exact(&b, &v)) } else { None };
    let welch_p = ev.welch.map(|w| w.p_value).filter(|p| !p.is_nan());
    let disagreement = match (mann_whitney_p, welch_p) {
        (Some(mw), Some(w)) => (mw < cfg.alpha) != (w < cfg.alpha),
        _ => false,
    };
    let ratio = if ev.method == CompareMethod::InsufficientData && !b.is_empty() && !v.is_empty() {
        // No test, but a point ratio still says something.
        if b.iter().chain(&v).all(|&x| x > 0.0) {
            vs.geomean / bs.geomean
        } else {
            relative_ratio(mean(&v), mean(&b))
        }
    } else {
        ev.ratio()
    };
    let (lo, hi) = ev.ratio_interval(d.efficacy_level);
    let (eq_lo, eq_hi) = ev.ratio_interval(d.look.equivalence_level);
    let runs_needed = match d.verdict {
        Verdict::Inconclusive => noise_for_planning(baseline, variant, &bs, &vs)
            .and_then(|sd| runs_needed(sd, effect_for_planning(ratio), cfg.theta, cfg.alpha, ev.n_look)),
        _ => None,
    };
    Comparison {
        baseline: bs,
        variant: vs,
        change_pct,
        ratio,
        interval_note,
        ci_low_pct: (lo - 1.0) * 100.0,
        ci_high_pct: (hi - 1.0) * 100.0,
        ci_level: 1.0 - 2.0 * d.efficacy_level,
        equivalence_low_pct: (eq_lo - 1.0) * 100.0,
        equivalence_high_pct: (eq_hi - 1.0) * 100.0,
        equivalence_level: 1.0 - 2.0 * d.look.equivalence_level,
        p_value: ev.p_value,
        p_adjusted,
        verdict: d.verdict,
        decided_by: DecisionRule { stopping: cfg.stopping, look: d.look, family_size, selected: d.selected },
        runs_needed,
        mann_whitney_p,
        welch_p,
        disagreement,
        higher_is_better: hib,
        method: ev.method,
    }
}

/// The noise a runs-needed or planning estimate assumes from two sides'
/// runs: pooled standard deviation of ln(values) with flagged outlier runs
/// left out (relative sd when logs are undefined).
pub fn noise_sd(baseline: &[f64], variant: &[f64]) -> Option<f64> {
    noise_for_planning(baseline, variant, &summarize(baseline, false), &summarize(variant, false))
}

/// ln(ratio) for the runs-needed estimate (NaN when the ratio is not positive).
fn effect_for_planning(ratio: f64) -> f64 {
    if ratio > 0.0 {
        ratio.ln()
    } else {
        f64::NAN
    }
}

/// The noise a runs-needed estimate should assume: the pooled standard
/// deviation of ln(values) (relative sd when logs are undefined) over the
/// runs not flagged as outliers, over the sides with at least two such runs
/// (so a single run on one side still lets the other inform it).
pub(crate) fn noise_for_planning(baseline: &[f64], variant: &[f64], bs: &Summary, vs: &Summary) -> Option<f64> {
    let keep = |values: &[f64], flagged: &[usize]| -> Vec<f64> {
        values.iter().enumerate().filter(|(i, x)| x.is_finite() && !flagged.contains(i)).map(|(_, &x)| x).collect()
    };
    let b = keep(baseline, &bs.outliers);
    let v = keep(variant, &vs.outliers);
    let positive = b.iter().chain(&v).all(|&x| x > 0.0);
    if positive {
        let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
        let lv: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        pooled_sd(&lb, &lv)
    } else {
        let mb = mean(&b);
        pooled_sd(&b, &v).map(|s| s / mb.abs()).filter(|s| s.is_finite())
    }
}

/// `(x / y - 1) * 100`, NaN when undefined.
/// Relative change of `x` from `y`, in %, signed by the direction the value
/// moved: `(x − y)/|y|` (the same as `x/y − 1` for positive values; from
/// −5 to −7 is −40%, not +40%).
fn pct(x: f64, y: f64) -> f64 {
    if y == 0.0 || !x.is_finite() || !y.is_finite() {
        return f64::NAN;
    }
    if y > 0.0 && x >= 0.0 {
        return (x / y - 1.0) * 100.0;
    }
    (x - y) / y.abs() * 100.0
}

/// `1 + (x − y)/|y|`: a "ratio" that is above 1 exactly when `x > y`, also
/// for negative values; NaN when `y` is 0 (no relative change exists).
fn relative_ratio(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        return f64::NAN;
    }
    if y > 0.0 && x >= 0.0 {
        return x / y;
    }
    1.0 + (x - y) / y.abs()
}

/// What the row says about its interval when it is not the usual ratio
/// interval (see [`Comparison::interval_note`]).
fn interval_note(ev: &Evidence, baseline: &[f64]) -> Option<String> {
    match ev.method {
        CompareMethod::InsufficientData => Some("fewer than 2 runs on a side: no interval".to_string()),
        CompareMethod::RawWelchDelta if mean(baseline) == 0.0 => {
            Some("baseline mean is 0: no relative change or interval".to_string())
        }
        CompareMethod::RawWelchDelta if !ev.raw_se.is_finite() => {
            Some("values ≤ 0 and the spread overflows: no interval".to_string())
        }
        CompareMethod::RawWelchDelta => {
            Some("values ≤ 0: difference of means relative to |baseline mean|, Welch interval".to_string())
        }
        _ => None,
    }
}

/// Pooled sample standard deviation over the sides that have at least two
/// values; `None` when neither does.
pub(crate) fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut ss = 0.0;
    let mut dof = 0usize;
    for xs in [a, b] {
        if xs.len() >= 2 {
            ss += sample_var(xs) * (xs.len() - 1) as f64;
            dof += xs.len() - 1;
        }
    }
    if dof == 0 {
        return None;
    }
    let sd = (ss / dof as f64).sqrt();
    (sd.is_finite() && sd > 0.0).then_some(sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    fn cfg() -> CompareConfig {
        CompareConfig::default()
    }

    // Baseline ~10 s, variant ~12 s: a clear 20% slowdown with ~2% noise.
    const B: [f64; 5] = [10.2, 10.5, 9.9, 10.1, 10.4];
    const V: [f64; 5] = [12.1, 12.6, 11.8, 12.3, 12.0];

    // Reference: scripts/stats-reference.py compare (scipy 1.17.1 / numpy 2.4.6):
    //   D = np.sort(np.subtract.outer(np.log(V), np.log(B)).ravel())
    //   np.exp(np.median(D)) = 1.188118811881188
    //   k = 3 at 0.025 for 5+5 (SciPy's exact U distribution): np.exp(D[2]), np.exp(D[-3])
    //     = 1.142857142857143, 1.2424242424242427
    //   scipy.stats.mannwhitneyu(V, B, method='exact').pvalue = 0.007936507936507936
    //   scipy.stats.ttest_ind(np.log(V), np.log(B), equal_var=False).pvalue = 3.386208626697191e-06
    #[test]
    fn rank_ratio_ci_and_p_match_reference() {
        let c = compare(&B, &V, false, &cfg());
        assert_eq!(c.method, CompareMethod::LogRank);
        assert!(close(c.ratio, 1.188118811881188, 1e-12), "{}", c.ratio);
        assert!(close(c.ci_low_pct, (1.142857142857143 - 1.0) * 100.0, 1e-9), "{}", c.ci_low_pct);
        assert!(close(c.ci_high_pct, (1.2424242424242427 - 1.0) * 100.0, 1e-9), "{}", c.ci_high_pct);
        assert_eq!((c.ci_level, c.equivalence_level), (0.95, 0.95));
        assert!(close(c.p_value, 0.007936507936507936, 1e-12), "{}", c.p_value);
        assert_eq!(c.p_adjusted, c.p_value);
        assert!(close(c.mann_whitney_p.unwrap(), 0.007936507936507936, 1e-12));
        assert!(close(c.welch_p.unwrap(), 3.386208626697191e-06, 1e-8));
        // Arithmetic means for lower-is-better: 12.16 / 10.22.
        assert!(close(c.change_pct, (12.16 / 10.22 - 1.0) * 100.0, 1e-12), "{}", c.change_pct);
        assert!(!c.disagreement);
        assert_eq!(c.decided_by.describe(), "fixed n = 5");
    }

    #[test]
    fn clear_slowdown_verdicts_in_all_directions() {
        let c = cfg();
        // Times went up 20%: regressed.
        assert_eq!(compare(&B, &V, false, &c).verdict, Verdict::Regressed);
        // The same numbers as rates (higher is better): improved.
        assert_eq!(compare(&B, &V, true, &c).verdict, Verdict::Improved);
        // Data reversed: times went down → improved; rates went down → regressed.
        assert_eq!(compare(&V, &B, false, &c).verdict, Verdict::Improved);
        assert_eq!(compare(&V, &B, true, &c).verdict, Verdict::Regressed);
        let r = compare(&B, &V, false, &c);
        assert_eq!(r.runs_needed, None);
        assert!(r.ci_low_pct > 2.0);
    }

    #[test]
    fn tiny_noise_is_no_change() {
        let b = [100.0, 100.3, 99.8, 100.1, 99.9, 100.2, 99.7, 100.0, 100.1, 99.9];
        let v = [100.1, 99.9, 100.2, 99.8, 100.0, 100.3, 99.9, 100.1, 99.7, 100.0];
        for hib in [false, true] {
            let c = compare(&b, &v, hib, &cfg());
            assert_eq!(c.verdict, Verdict::NoChange, "{c:?}");
            assert!(c.equivalence_low_pct > -2.0 && c.equivalence_high_pct < 2.0);
            assert_eq!(c.runs_needed, None);
        }
    }

    #[test]
    fn high_noise_small_n_is_inconclusive_with_runs_needed() {
        let b = [10.0, 13.0, 8.0, 12.0];
        let v = [11.0, 14.5, 9.0, 10.5];
        let c = compare(&b, &v, false, &cfg());
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        let n = c.runs_needed.expect("noise estimate available");
        assert!(n > 10 && n <= crate::RUNS_NEEDED_CAP, "{n}");
        // Quieter runs with the same small change need more runs to show
        // it is inside the band than to show a clear change elsewhere.
        let quiet = compare(&[10.0, 10.1, 9.9, 10.05], &[10.25, 10.1, 10.3, 10.2], false, &cfg());
        assert_eq!(quiet.verdict, Verdict::Inconclusive, "{quiet:?}");
        assert!(quiet.runs_needed.unwrap() > 4);
    }

    // Reference: scripts/stats-reference.py compare (scipy 1.17.1):
    //   p1 = scipy.stats.mannwhitneyu(v, b, method='exact').pvalue = 0.02857142857142857
    //   p2 = scipy.stats.mannwhitneyu(n2, n1, method='exact').pvalue = 0.8857142857142857
    //   scipy.stats.false_discovery_control([p1,p2,p2,p2,p2], method='bh')
    //     = [0.14285714285714285, 0.8857142857142857, ...]
    #[test]
    fn family_adjustment_can_demote_a_regression() {
        let b = [10.0, 10.6, 9.5, 10.3];
        let v = [11.2, 12.4, 10.9, 11.8];
        let n1 = [5.0, 5.1, 4.9, 5.05];
        let n2 = [5.02, 4.95, 5.08, 4.97];
        let alone = compare(&b, &v, false, &cfg());
        assert!(close(alone.p_value, 0.02857142857142857, 1e-12), "{}", alone.p_value);
        assert_eq!(alone.verdict, Verdict::Regressed);

        let items: Vec<(&[f64], &[f64], bool)> =
            vec![(&b, &v, false), (&n1, &n2, false), (&n1, &n2, false), (&n1, &n2, false), (&n1, &n2, false)];
        let fam = compare_family(&items, &cfg());
        assert_eq!(fam.len(), 5);
        assert!(close(fam[0].p_adjusted, 0.14285714285714285, 1e-12), "{}", fam[0].p_adjusted);
        assert!(close(fam[1].p_adjusted, 0.8857142857142857, 1e-12));
        assert_eq!(fam[0].p_value, alone.p_value);
        assert_eq!(fam[0].verdict, Verdict::Inconclusive);
        assert_eq!((fam[0].decided_by.family_size, fam[0].decided_by.selected), (5, 0));
        assert!(fam[0].runs_needed.is_some());

        let one = compare_family(&[(&b[..], &v[..], false)], &cfg());
        assert_eq!(one[0], alone);
        assert!(compare_family(&[], &cfg()).is_empty());
    }

    // Benjamini–Yekutieli: with R of m metrics selected, the selected ones
    // are judged on intervals at level 1 − αR/m.
    #[test]
    fn selected_metrics_get_false_coverage_rate_intervals() {
        let b: Vec<f64> = (0..10).map(|i| 10.0 + 0.01 * i as f64).collect();
        let slow: Vec<f64> = b.iter().map(|x| x * 1.3).collect();
        let same: Vec<f64> = b.iter().rev().map(|x| x + 0.005).collect();
        let items: Vec<(&[f64], &[f64], bool)> =
            vec![(&b, &slow, false), (&b, &slow, false), (&b, &same, false), (&b, &same, false), (&b, &same, false)];
        let fam = compare_family(&items, &cfg());
        assert_eq!(fam[0].decided_by.selected, 2);
        assert!(close(fam[0].ci_level, 1.0 - 0.05 * 2.0 / 5.0, 1e-12), "{}", fam[0].ci_level);
        assert_eq!(fam[0].verdict, Verdict::Regressed);
        // Not selected: the plain interval, and no-change is judged on its own.
        assert!(close(fam[2].ci_level, 0.95, 1e-12));
        assert_eq!(fam[2].verdict, Verdict::NoChange);
        let alone = compare(&b, &slow, false, &cfg());
        assert!(alone.ci_low_pct > fam[0].ci_low_pct - 1e-9);
    }

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   b=[10,10.1,10.2,10.3,10.4]; v=[10.5,10.6,10.7,10.8,30]
    //   scipy.stats.ttest_ind(np.log(v), np.log(b), equal_var=False).pvalue = 0.29357062548124496
    //   scipy.stats.mannwhitneyu(v, b, method='exact').pvalue = 0.007936507936507936
    #[test]
    fn outlier_makes_tests_disagree() {
        let b = [10.0, 10.1, 10.2, 10.3, 10.4];
        let v = [10.5, 10.6, 10.7, 10.8, 30.0];
        let c = compare(&b, &v, false, &cfg());
        assert!(close(c.welch_p.unwrap(), 0.29357062548124496, 1e-8), "{:?}", c.welch_p);
        assert!(close(c.p_value, 0.007936507936507936, 1e-12));
        assert!(c.disagreement);
        assert_eq!(c.variant.outliers, vec![4]);
        // The 30 s run does not drag the estimate: about +3%, not +40%.
        assert!(c.ratio > 1.02 && c.ratio < 1.05, "{}", c.ratio);
        assert!(c.change_pct > 40.0);
    }

    // Reference p, scipy 1.17.1 / numpy 2.4.6:
    //   b=np.array([0.0,2.0,1.5,1.0,2.5]); v=np.array([3.0,2.5,4.0,3.5,2.0])
    //   r = scipy.stats.ttest_ind(v, b, equal_var=False)  -> p = 0.02152400418154051, df = 7.711133400200603
    // The interval is Welch's interval of mv − mb = 1.6 (se = sqrt(0.925/5 +
    // 0.625/5)), divided by |mb| = 1.4, around 1 + 1.6/1.4.
    #[test]
    fn non_positive_values_fall_back_to_raw_welch_delta() {
        let b = [0.0, 2.0, 1.5, 1.0, 2.5];
        let v = [3.0, 2.5, 4.0, 3.5, 2.0];
        let c = compare(&b, &v, false, &cfg());
        assert_eq!(c.method, CompareMethod::RawWelchDelta);
        assert!(close(c.p_value, 0.02152400418154051, 1e-8), "{}", c.p_value);
        assert!(close(c.ratio, 2.142857142857143, 1e-12));
        let half = t_quantile(0.975, 7.711133400200603) * (0.31f64).sqrt() / 1.4 * 100.0;
        assert!(close(c.ci_low_pct, (c.ratio - 1.0) * 100.0 - half, 1e-8), "{}", c.ci_low_pct);
        assert!(close(c.ci_high_pct, (c.ratio - 1.0) * 100.0 + half, 1e-8), "{}", c.ci_high_pct);
        // The whole interval is above the band (the ratio's delta-method
        // interval, wider by the ratio's own variance, straddled it).
        assert!(c.ci_low_pct > 5.0, "{}", c.ci_low_pct);
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!(c.baseline.geomean.is_nan());
        assert!(c.interval_note.as_deref().unwrap().contains("difference of means"));
    }

    /// Issue 20 item 2: a lower-is-better metric going from about −5 to
    /// about −7 went down, which is better; a ratio of means (+40%) said
    /// the opposite.
    #[test]
    fn negative_values_follow_the_metrics_direction() {
        let b = [-5.0, -5.1, -4.9, -5.05, -4.95];
        let v = [-7.0, -7.1, -6.9, -7.05, -6.95];
        let lower = compare(&b, &v, false, &cfg());
        assert_eq!(lower.method, CompareMethod::RawWelchDelta);
        assert!(close(lower.change_pct, -40.0, 1e-9), "{}", lower.change_pct);
        assert!(close(lower.ratio, 0.6, 1e-9), "{}", lower.ratio);
        assert!(lower.ci_high_pct < 0.0, "{lower:?}");
        assert_eq!(lower.verdict, Verdict::Improved);
        let higher = compare(&b, &v, true, &cfg());
        assert_eq!(higher.verdict, Verdict::Regressed);
        assert!(close(higher.change_pct, -40.0, 1e-9));
        // Upwards through zero: from −1 to +1 is +200% of |−1|.
        let up = compare(&[-1.0, -1.02, -0.98, -1.01, -0.99], &[1.0, 1.02, 0.98, 1.01, 0.99], true, &cfg());
        assert!(close(up.change_pct, 200.0, 1e-9), "{}", up.change_pct);
        assert_eq!(up.verdict, Verdict::Improved);
    }

    /// Issue 20 item 3: every interval contains its estimate and is finite,
    /// or the comparison says why not.
    #[test]
    fn degenerate_intervals_contain_the_estimate_or_say_why_not() {
        // user_s: a baseline with one 3.6 ms run, a variant of zeros. The
        // ratio's delta-method error was 0 here: CI [-100%, -100%].
        let c = compare(&[0.0, 0.0036], &[0.0, 0.0], false, &cfg());
        assert!(c.ci_low_pct < -100.0 && c.ci_high_pct > 0.0, "{c:?}");
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // Values near f64::MAX: the means overflowed to `–` next to a verdict.
        let big = compare(&[1e308, 1.01e308, 0.99e308, 1e308], &[1.7e308, 1.71e308, 1.69e308, 1.7e308], false, &cfg());
        assert!(big.baseline.mean.is_finite() && big.variant.mean.is_finite(), "{big:?}");
        assert!(close(big.change_pct, 70.0, 1e-6), "{}", big.change_pct);
        assert!(big.baseline.stddev.is_finite() && big.baseline.stddev > 0.0, "{big:?}");
        let cases: Vec<(Vec<f64>, Vec<f64>)> = vec![
            (vec![0.0, 0.0036], vec![0.0, 0.0]),
            (vec![0.0, 0.0], vec![0.0, 0.0036]),
            (vec![0.0, 0.0, 0.0], vec![1.0, 2.0, 3.0]),
            (vec![-1.0, 1.0], vec![2.0, 3.0]),
            (vec![5.0], vec![6.0, 7.0]),
            (vec![1e308, 1e308], vec![1.7e308, 1.7e308]),
            (vec![1e-308, 2e-308], vec![3e-308, 4e-308]),
            (vec![-3.0, -3.0], vec![-3.0, -2.0]),
            (vec![2.0, 2.0, 2.0], vec![3.0, 3.0, 3.0]),
            (vec![1.0, f64::NAN, 2.0], vec![f64::INFINITY, 3.0, 4.0]),
        ];
        for (b, v) in &cases {
            for hib in [false, true] {
                let c = compare(b, v, hib, &cfg());
                let est = (c.ratio - 1.0) * 100.0;
                let computable = est.is_finite() && c.ci_low_pct.is_finite() && c.ci_high_pct.is_finite();
                if computable {
                    assert!(c.ci_low_pct <= est && est <= c.ci_high_pct, "{b:?} {v:?}: {c:?}");
                } else {
                    assert!(c.interval_note.is_some(), "{b:?} {v:?}: no interval and no reason: {c:?}");
                    assert!(matches!(c.verdict, Verdict::Inconclusive), "{b:?} {v:?}: {c:?}");
                }
            }
        }
    }

    #[test]
    fn zero_variance_sides() {
        let same = compare(&[5.0, 5.0, 5.0], &[5.0, 5.0], false, &cfg());
        assert_eq!((same.p_value, same.ratio, same.verdict), (1.0, 1.0, Verdict::NoChange));
        assert_eq!((same.ci_low_pct, same.ci_high_pct), (0.0, 0.0));

        let slower = compare(&[5.0, 5.0, 5.0], &[6.0, 6.0, 6.0], false, &cfg());
        assert_eq!(slower.p_value, 0.0);
        assert!(close(slower.ratio, 1.2, 1e-12));
        assert!(close(slower.ci_low_pct, 20.0, 1e-9) && close(slower.ci_high_pct, 20.0, 1e-9));
        assert_eq!(slower.verdict, Verdict::Regressed);

        // Exact but within the band: no change even though p = 0.
        let tiny = compare(&[5.0, 5.0], &[5.05, 5.05], false, &cfg());
        assert_eq!((tiny.p_value, tiny.verdict), (0.0, Verdict::NoChange));

        // The same constant on both sides (a counter that stayed 0) is no
        // change, not inconclusive forever.
        let zeros = compare(&[0.0, 0.0, 0.0], &[0.0, 0.0], false, &cfg());
        assert_eq!(zeros.method, CompareMethod::Constant);
        assert_eq!((zeros.p_value, zeros.verdict, zeros.ratio), (1.0, Verdict::NoChange, 1.0));
        let adaptive = CompareConfig { stopping: Stopping::adaptive(2, 20), ..cfg() };
        assert_eq!(compare(&[0.0, 0.0], &[0.0, 0.0], true, &adaptive).verdict, Verdict::NoChange);
        // Different constants with a zero: ratio undefined, inconclusive.
        let z = compare(&[0.0, 0.0], &[1.0, 1.0], false, &cfg());
        assert_eq!(z.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn too_few_values_are_inconclusive_without_nan_p() {
        let inputs: [(&[f64], &[f64]); 6] = [
            (&[], &[]),
            (&[1.0], &[2.0]),
            (&[1.0, 1.1, 0.9], &[2.0]),
            (&[f64::NAN, 1.0], &[f64::NAN, f64::INFINITY, 2.0]),
            (&[-1.0], &[0.0, 3.0]),
            (&[f64::NAN; 4], &[1.0, 2.0]),
        ];
        for (b, v) in inputs {
            for hib in [false, true] {
                let c = compare(b, v, hib, &cfg());
                assert_eq!(c.method, CompareMethod::InsufficientData, "{b:?} {v:?}");
                assert_eq!(c.verdict, Verdict::Inconclusive);
                assert_eq!((c.p_value, c.p_adjusted), (1.0, 1.0));
                assert_eq!(c.mann_whitney_p, None);
                assert!(!c.disagreement);
            }
        }
        // One side with noise information still yields an estimate.
        let c = compare(&[1.0, 1.1, 0.9], &[2.0], false, &cfg());
        assert!(c.runs_needed.unwrap() >= 2);
        assert_eq!(compare(&[1.0], &[2.0], false, &cfg()).runs_needed, None);
        assert!(close(compare(&[1.0], &[2.0], false, &cfg()).ratio, 2.0, 1e-12));
    }

    #[test]
    fn three_runs_use_welch_four_use_ranks() {
        // 3 + 3 runs cannot give a 95% rank interval (smallest p is 0.1).
        let c = compare(&[10.0, 10.1, 9.9], &[12.0, 12.2, 11.9], false, &cfg());
        assert_eq!((c.method, c.verdict), (CompareMethod::LogWelch, Verdict::Regressed));
        let c = compare(&[10.0, 10.1, 9.9, 10.05], &[12.0, 12.2, 11.9, 12.1], false, &cfg());
        assert_eq!((c.method, c.verdict), (CompareMethod::LogRank, Verdict::Regressed));
    }

    #[test]
    fn sequential_looks_use_stricter_levels() {
        let b = [10.0, 10.3, 9.8, 10.1, 10.2];
        let v = [10.6, 10.9, 10.4, 10.7, 10.8];
        assert_eq!(compare(&b, &v, false, &cfg()).verdict, Verdict::Regressed);
        let seq = CompareConfig { stopping: Stopping::adaptive(5, 20), ..cfg() };
        let c = compare(&b, &v, false, &seq);
        // At the first of 16 looks almost nothing is spent: not yet decisive.
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(c.ci_level > 0.999, "{}", c.ci_level);
        assert_eq!(c.decided_by.describe(), "sequential 5..20, look 1 of 16 at n = 5");
        assert_eq!(Stopping::adaptive(5, 5), Stopping::Fixed);
        assert_eq!(seq.look(20).index, 16);
    }

    // The verdict counts pairs; the reported interval is computed from
    // order statistics. They must tell the same story.
    #[test]
    fn band_tests_agree_with_the_reported_intervals() {
        use rand::distr::Distribution;
        use rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let normal = statrs::distribution::Normal::new(0.0, 0.03).unwrap();
        for trial in 0..300 {
            let n = 4 + trial % 9;
            let shift = [0.0, 0.02, 0.05, -0.03][trial % 4];
            let b: Vec<f64> = (0..n).map(|_| normal.sample(&mut rng).exp()).collect();
            let v: Vec<f64> = (0..n + trial % 3).map(|_| (shift + normal.sample(&mut rng)).exp()).collect();
            let ev = Evidence::prepare(&b, &v, false, 0.05, true);
            for a in [0.025, 0.01, 0.001] {
                let t = ev.band_tests(a, 0.02);
                let (lo, hi) = ev.ratio_interval(a);
                assert_eq!(t.above, lo > 1.02, "{b:?} {v:?} {a}");
                assert_eq!(t.below, hi < 1.0 / 1.02, "{b:?} {v:?} {a}");
                assert_eq!(t.inside, lo >= 1.0 / 1.02 && hi <= 1.02, "{b:?} {v:?} {a} {lo} {hi}");
            }
        }
    }

    #[test]
    fn bad_config_is_sanitized() {
        let bad = CompareConfig { alpha: f64::NAN, theta: -1.0, power: 2.0, stopping: Stopping::Fixed };
        let c = compare(&B, &V, false, &bad);
        assert_eq!(c, compare(&B, &V, false, &cfg()));
        // theta = 0 is allowed: nothing is ever "no change" unless exact.
        let strict = CompareConfig { theta: 0.0, ..cfg() };
        let b = [100.0, 100.3, 99.8, 100.1, 99.9];
        assert_eq!(compare(&b, &b, false, &strict).verdict, Verdict::Inconclusive);
        assert_eq!(compare(&b, &b, false, &cfg()).verdict, Verdict::NoChange);
    }

    #[test]
    fn verdicts_only_matches_the_full_comparison() {
        let items: Vec<(&[f64], &[f64], bool)> = vec![(&B, &V, false), (&B, &B, true), (&[1.0], &[2.0], false)];
        let full: Vec<Verdict> = compare_family(&items, &cfg()).iter().map(|c| c.verdict).collect();
        assert_eq!(verdicts(&items, &cfg()), full);
    }

    #[test]
    fn verdict_names() {
        let all = [Verdict::Regressed, Verdict::Improved, Verdict::NoChange, Verdict::Inconclusive];
        let names = ["regressed", "improved", "no-change", "inconclusive"];
        for (v, n) in all.iter().zip(names) {
            assert_eq!(v.to_string(), n);
            assert_eq!(serde_json::to_string(v).unwrap(), format!("\"{n}\""));
        }
        assert_eq!(serde_json::to_string(&MeanKindProbe).unwrap(), "[\"harmonic\",\"arithmetic\"]");
        // A whole comparison serializes (NaN fields become null).
        let json = serde_json::to_string(&compare(&[], &[1.0], true, &cfg())).unwrap();
        assert!(json.contains("\"verdict\":\"inconclusive\""), "{json}");
        assert!(json.contains("\"method\":\"insufficient-data\""), "{json}");
        assert!(json.contains("\"decided_by\":{\"stopping\":{\"kind\":\"fixed\"}"), "{json}");
    }

    struct MeanKindProbe;
    impl Serialize for MeanKindProbe {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use crate::MeanKind;
            [MeanKind::Harmonic, MeanKind::Arithmetic].serialize(s)
        }
    }
}
