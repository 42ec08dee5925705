//! Variant-vs-baseline comparison and the verdict rule.

use std::fmt;

use serde::Serialize;

use super::mannwhitney::mann_whitney_exact;
use super::multiple::benjamini_hochberg;
use super::samplesize::runs_needed;
use super::summary::{finite, mean, sample_var, summarize, Summary};
use super::welch::{t_quantile, welch_t_test};

/// Thresholds for [`compare`]. Out-of-range values (NaN, alpha or power
/// outside (0, 1), negative theta) are replaced by the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CompareConfig {
    /// Significance level; the CI is `1 - alpha`. Default 0.05.
    pub alpha: f64,
    /// Equivalence band half-width as a fraction: changes within ±theta
    /// count as "no change". Default 0.02 (±2%).
    pub theta: f64,
    /// Target power for [`Comparison::runs_needed`]. Default 0.8.
    pub power: f64,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig { alpha: 0.05, theta: 0.02, power: 0.8 }
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
    /// The whole CI lies inside the equivalence band.
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
    /// All values positive: Welch t-test on ln(values); the CI of the mean
    /// log difference, exponentiated, is the CI of the geometric-mean ratio.
    LogWelch,
    /// Some value `<= 0` (logs undefined): Welch t-test on raw values; ratio
    /// of arithmetic means with a delta-method CI.
    RawWelchDelta,
    /// Fewer than two finite values on a side: no test possible.
    InsufficientData,
}

/// A variant compared with a baseline on one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Summary of the baseline runs.
    pub baseline: Summary,
    /// Summary of the variant runs.
    pub variant: Summary,
    /// `(variant.mean / baseline.mean - 1) * 100` with the mmtests-style
    /// means. If the two summaries ended up with different mean kinds (one
    /// side had non-positive values), arithmetic means are used for both.
    pub change_pct: f64,
    /// Ratio of geometric means, variant / baseline (ratio of arithmetic
    /// means under [`CompareMethod::RawWelchDelta`]).
    pub ratio: f64,
    /// Lower end of the `1 - alpha` CI of `ratio`, as % change.
    pub ci_low_pct: f64,
    /// Upper end of the `1 - alpha` CI of `ratio`, as % change.
    pub ci_high_pct: f64,
    /// Two-sided Welch t-test p-value (on ln(values) under `LogWelch`).
    /// 1 when no test is possible; never NaN.
    pub p_value: f64,
    /// Benjamini–Hochberg adjusted p-value across the family compared
    /// together; equals `p_value` when compared alone.
    pub p_adjusted: f64,
    /// The verdict, decided on `p_adjusted` and the CI.
    pub verdict: Verdict,
    /// Only when inconclusive: estimated runs per variant to become decisive
    /// given the observed noise (see [`crate::stats::runs_needed`]). `None`
    /// also when there is no noise estimate.
    pub runs_needed: Option<usize>,
    /// Two-sided exact Mann–Whitney U p-value, once both sides have at least
    /// 4 values (with 3 per side the smallest possible p is 0.1).
    pub mann_whitney_p: Option<f64>,
    /// Mann–Whitney and Welch disagree on significance at alpha (both judged
    /// on unadjusted p-values): worth a look at the raw runs.
    pub disagreement: bool,
    /// Direction of the metric, as passed in.
    pub higher_is_better: bool,
    /// How `p_value` and the CI were obtained.
    pub method: CompareMethod,
}

/// What [`decide`] needs beyond the public fields.
struct Evidence {
    lo_ratio: f64,
    hi_ratio: f64,
    effect_log: f64,
    sd_log: Option<f64>,
    n_current: usize,
}

/// Compare `variant` against `baseline` on one metric.
///
/// Verdict rule, with band `[1/(1+θ), 1+θ]` on the ratio (i.e. `±ln(1+θ)`
/// in log space, symmetric): the "worse" direction is ratio > 1 for
/// lower-is-better metrics and ratio < 1 for higher-is-better ones.
/// * Regressed / Improved: `p_adjusted < alpha` and the whole CI lies beyond
///   the band on the worse / better side.
/// * NoChange: the whole CI lies inside the band (a tiny but significant
///   change is still "no change": it is below what we care about).
/// * Inconclusive: otherwise, with [`Comparison::runs_needed`].
///
/// Degenerate input: fewer than two finite values on a side → Inconclusive
/// with `p_value = 1`; zero variance on both sides → the CI is the point
/// ratio and `p` is 0 if the means differ, else 1; any value `<= 0` → see
/// [`CompareMethod::RawWelchDelta`]. Non-finite values are ignored.
pub fn compare(baseline: &[f64], variant: &[f64], higher_is_better: bool, cfg: &CompareConfig) -> Comparison {
    let cfg = cfg.sanitized();
    // A family of one: the BH-adjusted p equals the raw p.
    let (mut c, ev) = analyse(baseline, variant, higher_is_better, &cfg);
    decide(&mut c, &ev, &cfg);
    c
}

/// Several metrics of ONE variant-vs-baseline comparison, as
/// `(baseline, variant, higher_is_better)`: each is computed as by
/// [`compare`], then Benjamini–Hochberg is applied across their p-values and
/// the verdicts are decided on the adjusted p. Output order = input order.
pub fn compare_family(items: &[(&[f64], &[f64], bool)], cfg: &CompareConfig) -> Vec<Comparison> {
    let cfg = cfg.sanitized();
    let mut analysed: Vec<(Comparison, Evidence)> = items.iter().map(|&(b, v, hib)| analyse(b, v, hib, &cfg)).collect();
    let p: Vec<f64> = analysed.iter().map(|(c, _)| c.p_value).collect();
    let adj = benjamini_hochberg(&p);
    for ((c, ev), pa) in analysed.iter_mut().zip(adj) {
        c.p_adjusted = pa;
        decide(c, ev, &cfg);
    }
    analysed.into_iter().map(|(c, _)| c).collect()
}

/// Everything except the verdict (which needs the family-adjusted p).
fn analyse(baseline: &[f64], variant: &[f64], hib: bool, cfg: &CompareConfig) -> (Comparison, Evidence) {
    let bs = summarize(baseline, hib);
    let vs = summarize(variant, hib);
    let b = finite(baseline);
    let v = finite(variant);

    let change_pct = if bs.mean_kind == vs.mean_kind { pct(vs.mean, bs.mean) } else { pct(mean(&v), mean(&b)) };
    let mann_whitney_p = if b.len() >= 4 && v.len() >= 4 { Some(mann_whitney_exact(&b, &v)) } else { None };
    let n_current = b.len().max(v.len());
    let positive = b.iter().chain(v.iter()).all(|&x| x > 0.0);

    let (ratio, lo, hi, p_value, method, effect_log, sd_log);
    if positive {
        let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
        let lv: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let d = mean(&lv) - mean(&lb); // NaN when a side is empty
        ratio = d.exp();
        effect_log = d;
        sd_log = pooled_sd(&lb, &lv);
        match welch_t_test(&lb, &lv) {
            Some(w) => {
                let (l, h) = w.ci(cfg.alpha);
                (lo, hi, p_value, method) = (l.exp(), h.exp(), w.p_value, CompareMethod::LogWelch);
            }
            // The ratio of positive numbers can be anything in (0, inf).
            None => (lo, hi, p_value, method) = (0.0, f64::INFINITY, 1.0, CompareMethod::InsufficientData),
        }
    } else {
        // Logs are undefined: Welch on raw values, and the ratio of means
        // R = mv/mb with the delta-method variance
        //   Var(R) ≈ (Var(mv) + R² Var(mb)) / mb²,
        // written this way (rather than R²·(CVv² + CVb²)) so mv = 0 is fine.
        // The CI is R ± t_{1-α/2, Welch df} · se(R).
        let (mb, mv) = (mean(&b), mean(&v));
        ratio = if mb != 0.0 { mv / mb } else { f64::NAN };
        effect_log = if ratio > 0.0 { ratio.ln() } else { f64::NAN };
        // Relative noise (CV of the pooled runs) stands in for the log sd.
        sd_log = pooled_sd(&b, &v).map(|s| s / mb.abs()).filter(|s| s.is_finite());
        match welch_t_test(&b, &v) {
            Some(w) if ratio.is_finite() => {
                let var_r =
                    (sample_var(&v) / v.len() as f64 + ratio * ratio * sample_var(&b) / b.len() as f64) / (mb * mb);
                let se = var_r.sqrt();
                let (l, h) = if se == 0.0 {
                    (ratio, ratio)
                } else {
                    let q = t_quantile(1.0 - cfg.alpha / 2.0, w.df);
                    (ratio - q * se, ratio + q * se)
                };
                (lo, hi, p_value, method) = (l, h, w.p_value, CompareMethod::RawWelchDelta);
            }
            // Baseline mean 0: the test stands but the ratio is undefined.
            Some(w) => {
                (lo, hi, p_value, method) = (f64::NEG_INFINITY, f64::INFINITY, w.p_value, CompareMethod::RawWelchDelta)
            }
            None => {
                (lo, hi, p_value, method) = (f64::NEG_INFINITY, f64::INFINITY, 1.0, CompareMethod::InsufficientData)
            }
        }
    }
    let p_value = if p_value.is_nan() { 1.0 } else { p_value };
    let disagreement = match mann_whitney_p {
        Some(mw) => (mw < cfg.alpha) != (p_value < cfg.alpha),
        None => false,
    };
    let c = Comparison {
        baseline: bs,
        variant: vs,
        change_pct,
        ratio,
        ci_low_pct: (lo - 1.0) * 100.0,
        ci_high_pct: (hi - 1.0) * 100.0,
        p_value,
        p_adjusted: p_value,
        verdict: Verdict::Inconclusive,
        runs_needed: None,
        mann_whitney_p,
        disagreement,
        higher_is_better: hib,
        method,
    };
    (c, Evidence { lo_ratio: lo, hi_ratio: hi, effect_log, sd_log, n_current })
}

/// Apply the verdict rule (see [`compare`]) and, if inconclusive, estimate
/// the runs needed.
fn decide(c: &mut Comparison, ev: &Evidence, cfg: &CompareConfig) {
    let band_hi = 1.0 + cfg.theta;
    let band_lo = 1.0 / band_hi;
    let significant = c.p_adjusted < cfg.alpha;
    let (lo, hi) = (ev.lo_ratio, ev.hi_ratio);
    // NaN bounds fail every comparison below and end up Inconclusive.
    c.verdict = if c.method == CompareMethod::InsufficientData {
        Verdict::Inconclusive
    } else if significant && lo > band_hi {
        if c.higher_is_better {
            Verdict::Improved
        } else {
            Verdict::Regressed
        }
    } else if significant && hi < band_lo {
        if c.higher_is_better {
            Verdict::Regressed
        } else {
            Verdict::Improved
        }
    } else if lo >= band_lo && hi <= band_hi {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
    c.runs_needed = match (c.verdict, ev.sd_log) {
        (Verdict::Inconclusive, Some(sd)) => {
            runs_needed(sd, ev.effect_log, cfg.theta, cfg.alpha, cfg.power, ev.n_current)
        }
        _ => None,
    };
}

/// `(x / y - 1) * 100`, NaN when undefined.
fn pct(x: f64, y: f64) -> f64 {
    if y == 0.0 || !x.is_finite() || !y.is_finite() {
        return f64::NAN;
    }
    (x / y - 1.0) * 100.0
}

/// Pooled sample standard deviation over the sides that have at least two
/// values (so a single run on one side still lets the other inform the noise
/// estimate); `None` when neither does.
fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
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
    sd.is_finite().then_some(sd)
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

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   r = scipy.stats.ttest_ind(np.log(V), np.log(B), equal_var=False)
    //   r.pvalue = 3.386208626697191e-06
    //   np.exp(r.confidence_interval(0.95)) = (1.148484657377806, 1.2325733200147737)
    //   scipy.stats.gmean(V) / scipy.stats.gmean(B) = exp(mean log diff)
    //   scipy.stats.mannwhitneyu(V, B, method='exact').pvalue = 0.007936507936507936
    #[test]
    fn log_welch_ratio_ci_and_p_match_scipy() {
        let c = compare(&B, &V, false, &cfg());
        assert_eq!(c.method, CompareMethod::LogWelch);
        assert!(close(c.p_value, 3.386208626697191e-06, 1e-8), "{}", c.p_value);
        assert_eq!(c.p_adjusted, c.p_value);
        assert!(close(c.ci_low_pct, (1.148484657377806 - 1.0) * 100.0, 1e-9), "{}", c.ci_low_pct);
        assert!(close(c.ci_high_pct, (1.2325733200147737 - 1.0) * 100.0, 1e-9), "{}", c.ci_high_pct);
        assert!(close(c.ratio, c.variant.geomean / c.baseline.geomean, 1e-12));
        // Arithmetic means for lower-is-better: 12.16 / 10.22.
        assert!(close(c.change_pct, (12.16 / 10.22 - 1.0) * 100.0, 1e-12), "{}", c.change_pct);
        assert!(close(c.mann_whitney_p.unwrap(), 0.007936507936507936, 1e-12));
        assert!(!c.disagreement);
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
            assert!(c.ci_low_pct > -2.0 && c.ci_high_pct < 2.0);
            assert_eq!(c.runs_needed, None);
        }
    }

    // Expected runs_needed, numpy 2.4.6 / scipy 1.17.1:
    //   b=np.log([10,13,8,12.]); v=np.log([11,14.5,9,10.5])
    //   sd=np.sqrt((b.var(ddof=1)*3+v.var(ddof=1)*3)/6)       # 0.2074 pooled log sd
    //   d=v.mean()-b.mean(); m=np.log1p(.02)                  # d = 0.0472
    //   z=scipy.stats.norm.ppf(.975)+scipy.stats.norm.ppf(.8)
    //   np.ceil(2*(z*sd/max(abs(abs(d)-m), m/4))**2)           # 901.0
    #[test]
    fn high_noise_small_n_is_inconclusive_with_runs_needed() {
        let b = [10.0, 13.0, 8.0, 12.0];
        let v = [11.0, 14.5, 9.0, 10.5];
        let c = compare(&b, &v, false, &cfg());
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        let n = c.runs_needed.expect("noise estimate available");
        assert_eq!(n, 901);
        assert!(n <= crate::stats::RUNS_NEEDED_CAP);
        // Rerunning with that many would at least not be absurd: more noise → more runs.
        let noisier = compare(&[10.0, 16.0, 6.0, 13.0], &[11.0, 17.0, 7.0, 9.0], false, &cfg());
        assert!(noisier.runs_needed.unwrap() > n);
    }

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   b=[10.0,10.6,9.5,10.3]; v=[11.2,12.4,10.9,11.8]
    //   n1=[5.0,5.1,4.9,5.05]; n2=[5.02,4.95,5.08,4.97]
    //   p1 = scipy.stats.ttest_ind(np.log(v), np.log(b), equal_var=False).pvalue = 0.011060501886016618
    //     np.exp(ci95) = (1.0456860405871697, 1.2549876396448025)   (beyond +2%)
    //   p2 = scipy.stats.ttest_ind(np.log(n2), np.log(n1), equal_var=False).pvalue = 0.8943248347579495
    //   scipy.stats.false_discovery_control([p1,p2,p2,p2,p2], method='bh')
    //     = [0.055302509430083094, 0.8943248347579495, ...]
    #[test]
    fn family_adjustment_can_demote_a_regression() {
        let b = [10.0, 10.6, 9.5, 10.3];
        let v = [11.2, 12.4, 10.9, 11.8];
        let n1 = [5.0, 5.1, 4.9, 5.05];
        let n2 = [5.02, 4.95, 5.08, 4.97];
        let alone = compare(&b, &v, false, &cfg());
        assert!(close(alone.p_value, 0.011060501886016618, 1e-8), "{}", alone.p_value);
        assert_eq!(alone.verdict, Verdict::Regressed);

        let items: Vec<(&[f64], &[f64], bool)> =
            vec![(&b, &v, false), (&n1, &n2, false), (&n1, &n2, false), (&n1, &n2, false), (&n1, &n2, false)];
        let fam = compare_family(&items, &cfg());
        assert_eq!(fam.len(), 5);
        assert!(close(fam[0].p_adjusted, 0.055302509430083094, 1e-8), "{}", fam[0].p_adjusted);
        assert!(close(fam[1].p_adjusted, 0.8943248347579495, 1e-8));
        assert_eq!(fam[0].p_value, alone.p_value);
        assert_eq!(fam[0].verdict, Verdict::Inconclusive);
        assert!(fam[0].runs_needed.is_some());

        let one = compare_family(&[(&b[..], &v[..], false)], &cfg());
        assert_eq!(one[0], alone);
        assert!(compare_family(&[], &cfg()).is_empty());
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
        assert!(close(c.p_value, 0.29357062548124496, 1e-8), "{}", c.p_value);
        assert!(close(c.mann_whitney_p.unwrap(), 0.007936507936507936, 1e-12));
        assert!(c.disagreement);
        assert_eq!(c.variant.outliers, vec![4]);
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    // Reference, scipy 1.17.1 / numpy 2.4.6 (delta-method CI written out, as
    // SciPy has no ratio-of-means CI):
    //   b=np.array([0.0,2.0,1.5,1.0,2.5]); v=np.array([3.0,2.5,4.0,3.5,2.0])
    //   r = scipy.stats.ttest_ind(v, b, equal_var=False)  -> p = 0.02152400418154051, df = 7.711133400200603
    //   R = v.mean()/b.mean() = 2.142857142857143
    //   se = np.sqrt(v.var(ddof=1)/5 + R*R*b.var(ddof=1)/5) / b.mean()
    //   R -/+ scipy.stats.t.ppf(0.975, r.df)*se = (0.5061928236788464, 3.779521462035439)
    #[test]
    fn non_positive_values_fall_back_to_raw_welch_delta() {
        let b = [0.0, 2.0, 1.5, 1.0, 2.5];
        let v = [3.0, 2.5, 4.0, 3.5, 2.0];
        let c = compare(&b, &v, false, &cfg());
        assert_eq!(c.method, CompareMethod::RawWelchDelta);
        assert!(close(c.p_value, 0.02152400418154051, 1e-8), "{}", c.p_value);
        assert!(close(c.ratio, 2.142857142857143, 1e-12));
        assert!(close(c.ci_low_pct, (0.5061928236788464 - 1.0) * 100.0, 1e-8), "{}", c.ci_low_pct);
        assert!(close(c.ci_high_pct, (3.779521462035439 - 1.0) * 100.0, 1e-8), "{}", c.ci_high_pct);
        // CI straddles the band although p < alpha: not decisive.
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.runs_needed.is_some());
        assert!(c.baseline.geomean.is_nan());
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

        let zeros = compare(&[0.0, 0.0], &[0.0, 0.0], false, &cfg());
        assert_eq!(zeros.method, CompareMethod::RawWelchDelta);
        assert_eq!((zeros.p_value, zeros.verdict), (1.0, Verdict::Inconclusive));
        assert!(zeros.ratio.is_nan());
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
        assert!(c.runs_needed.unwrap() > 3);
        assert_eq!(compare(&[1.0], &[2.0], false, &cfg()).runs_needed, None);
        assert!(close(compare(&[1.0], &[2.0], false, &cfg()).ratio, 2.0, 1e-12));
    }

    #[test]
    fn mann_whitney_needs_four_per_side() {
        assert_eq!(compare(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0], false, &cfg()).mann_whitney_p, None);
        assert!(compare(&[1.0, 2.0, 3.0, 4.0], &[4.0, 5.0, 6.0, 7.0], false, &cfg()).mann_whitney_p.is_some());
    }

    #[test]
    fn bad_config_is_sanitized() {
        let bad = CompareConfig { alpha: f64::NAN, theta: -1.0, power: 2.0 };
        let c = compare(&B, &V, false, &bad);
        assert_eq!(c, compare(&B, &V, false, &cfg()));
        // theta = 0 is allowed: nothing is ever "no change" unless exact.
        let strict = CompareConfig { theta: 0.0, ..cfg() };
        let b = [100.0, 100.3, 99.8, 100.1, 99.9];
        assert_eq!(compare(&b, &b, false, &strict).verdict, Verdict::Inconclusive);
        assert_eq!(compare(&b, &b, false, &cfg()).verdict, Verdict::NoChange);
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
    }

    struct MeanKindProbe;
    impl Serialize for MeanKindProbe {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use crate::stats::MeanKind;
            [MeanKind::Harmonic, MeanKind::Arithmetic].serialize(s)
        }
    }
}
