//! How many runs a comparison needs: the `runs_needed` hint of an
//! inconclusive comparison, and planning before any run (`fslab plan`).
//!
//! All formulas work on ln(values), where the noise is the standard
//! deviation `σ` of ln(run value) (≈ the CV for small CVs) and a change is
//! `δ = ln(ratio)`. The band edge is `m = ln(1 + θ)`. The rank interval the
//! verdict uses has asymptotic efficiency [`RANK_EFFICIENCY`] = 3/π against
//! the t interval on normal data, so its standard error is
//! `σ √(2 / (n · 3/π))` with `n` runs per variant.

use super::sequential::{normal_sf, SequentialDesign};
use super::welch::{normal_quantile, t_quantile};

/// Upper bound on [`runs_needed`]: beyond this the honest answer is "reduce
/// the noise", not "run more".
pub const RUNS_NEEDED_CAP: usize = 10_000;

/// Asymptotic efficiency of the Hodges–Lehmann / Moses interval against the
/// t interval for normal data (3/π).
pub const RANK_EFFICIENCY: f64 = 3.0 / std::f64::consts::PI;

/// Predictive probability of a decisive verdict that [`runs_needed`] aims for.
///
/// With 5 runs the true change is poorly known (at CV 10% its standard
/// error is 6%). Chosen in the simulation (`fslab simulate runs-needed`,
/// 20,000 experiments, and a scan of 0.64–0.72 on 12,000): at 0.66 the
/// median prediction after 5 inconclusive runs is 23 against a simulated
/// need of 19 at +5%/CV 3% (+21%) and 160 against 196 at +5%/CV 10%
/// (−18%); 0.72 overshot by +68%/+31%, 0.64 undershot CV 10% by −31%.
/// Plugging in the observed change instead undershoots by half at CV 10%.
pub const RUNS_NEEDED_ASSURANCE: f64 = 0.66;

/// Standard error of the log-ratio estimate with `n` runs per variant.
fn standard_error(sd_log: f64, n: f64) -> f64 {
    sd_log * (2.0 / (n * RANK_EFFICIENCY)).sqrt()
}

/// Estimated runs per variant after which a comparison is likely decisive.
///
/// * `sd_log`: pooled standard deviation of ln(values) observed so far.
/// * `effect_log`: observed ln(ratio).
/// * `theta`: equivalence band half-width as a fraction (0.02 = ±2%).
/// * `alpha`: the verdict's two-sided level; `current_n` runs per variant so far.
///
/// Predictive rule: given the data, the true change is taken as
/// `N(effect_log, se_n²)` (flat prior) and the estimate after `N` runs as
/// `N(effect_log, se_n² − se_N²)`. The verdict at `N` is decisive when that
/// estimate is beyond the band by `z_{1−α/2} se_N` or inside it by as much;
/// the result is the smallest `N > current_n` where that has probability
/// [`RUNS_NEEDED_ASSURANCE`], capped at [`RUNS_NEEDED_CAP`].
///
/// `None` when there is no usable noise estimate (`sd_log` not finite or
/// not positive) or the effect is undefined.
pub fn runs_needed(sd_log: f64, effect_log: f64, theta: f64, alpha: f64, current_n: usize) -> Option<usize> {
    runs_needed_at(sd_log, effect_log, theta, alpha, current_n, RUNS_NEEDED_ASSURANCE)
}

/// [`runs_needed`] for another assurance (how the simulation chose it).
pub(crate) fn runs_needed_at(
    sd_log: f64,
    effect_log: f64,
    theta: f64,
    alpha: f64,
    current_n: usize,
    assurance: f64,
) -> Option<usize> {
    if !sd_log.is_finite() || sd_log <= 0.0 || !effect_log.is_finite() || alpha <= 0.0 || alpha >= 1.0 || alpha.is_nan()
    {
        return None;
    }
    let m = if theta.is_finite() && theta > 0.0 { theta.ln_1p() } else { 0.0 };
    let z = normal_quantile(1.0 - alpha / 2.0);
    let n0 = current_n.max(1) as f64;
    let v0 = standard_error(sd_log, n0).powi(2);
    let decisive = |n: usize| -> f64 {
        let se_n = standard_error(sd_log, n as f64);
        let s = (v0 - se_n * se_n).max(0.0).sqrt();
        if s == 0.0 {
            return 0.0;
        }
        let c = m + z * se_n;
        let w = m - z * se_n;
        let beyond = normal_sf((c - effect_log) / s) + normal_sf((c + effect_log) / s);
        let inside = if w > 0.0 { normal_sf((-w - effect_log) / s) - normal_sf((w - effect_log) / s) } else { 0.0 };
        beyond + inside
    };
    let floor = current_n.saturating_add(1).clamp(2, RUNS_NEEDED_CAP);
    if decisive(floor) >= assurance {
        return Some(floor);
    }
    let mut lo = floor;
    let mut hi = floor;
    loop {
        if hi >= RUNS_NEEDED_CAP {
            if decisive(RUNS_NEEDED_CAP) < assurance {
                return Some(RUNS_NEEDED_CAP);
            }
            hi = RUNS_NEEDED_CAP;
            break;
        }
        lo = hi;
        hi = (hi * 2).min(RUNS_NEEDED_CAP);
        if decisive(hi) >= assurance {
            break;
        }
    }
    // decisive(lo) < target ≤ decisive(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if decisive(mid) >= assurance {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Runs per variant a fixed-n experiment needs to show `regressed` (or
/// `improved`) with probability `power` when the true change is
/// `effect_log` and the noise `sd_log`: `2 (z_{1−α/2} + z_power)² σ² /
/// (3/π · (|δ| − m)²)`, rounded up. `None` for a change inside the band or
/// no noise estimate.
pub fn runs_to_detect(sd_log: f64, effect_log: f64, theta: f64, alpha: f64, power: f64) -> Option<usize> {
    let m = theta.max(0.0).ln_1p();
    let gap = effect_log.abs() - m;
    if sd_log.is_nan() || sd_log <= 0.0 || gap.is_nan() || gap <= 0.0 || !gap.is_finite() {
        return None;
    }
    let z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power);
    let n = 2.0 * (z * sd_log / gap).powi(2) / RANK_EFFICIENCY;
    n.is_finite().then(|| (n.ceil() as usize).clamp(2, RUNS_NEEDED_CAP))
}

/// Runs per variant a fixed-n experiment needs to show `no-change` with
/// probability `power` when nothing changed: the interval must fit inside
/// ±m, `n = 2 σ² (z_{1−α/2} + z_{(1+power)/2})² / (3/π · m²)`.
pub fn runs_to_show_no_change(sd_log: f64, theta: f64, alpha: f64, power: f64) -> Option<usize> {
    let m = theta.max(0.0).ln_1p();
    if sd_log.is_nan() || sd_log <= 0.0 || m.is_nan() || m <= 0.0 {
        return None;
    }
    let z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile((1.0 + power) / 2.0);
    let n = 2.0 * (z * sd_log / m).powi(2) / RANK_EFFICIENCY;
    n.is_finite().then(|| (n.ceil() as usize).clamp(2, RUNS_NEEDED_CAP))
}

/// Standard error at `max` runs per variant, widened by the t quantile with
/// the 2·max − 2 degrees of freedom of two samples over the normal one: the
/// boundaries are normal-theory, the intervals small-sample.
fn planning_error(sd_log: f64, max: usize) -> f64 {
    let df = (2 * max).saturating_sub(2).max(1) as f64;
    let z = normal_quantile(0.975);
    standard_error(sd_log, max as f64) * t_quantile(0.975, df) / z
}

/// Probability that `design` ends `regressed` (or `improved`) when the true
/// change is `effect_log` and the noise `sd_log`, from the boundary
/// crossing probabilities (normal approximation with a small-sample
/// widening; `fslab simulate`'s `plan` table checks it).
pub fn design_power(design: &SequentialDesign, sd_log: f64, effect_log: f64, theta: f64) -> f64 {
    let m = theta.max(0.0).ln_1p();
    let se_max = planning_error(sd_log, design.max);
    if se_max.is_nan() || se_max <= 0.0 {
        return f64::NAN;
    }
    design.efficacy_power((effect_log.abs() - m) / se_max)
}

/// Smallest change (as a fraction: 0.09 = 9%) that `design` detects with
/// probability `power` at noise `sd_log`.
pub fn detectable_change(design: &SequentialDesign, sd_log: f64, theta: f64, power: f64) -> f64 {
    let m = theta.max(0.0).ln_1p();
    let se_max = planning_error(sd_log, design.max);
    if se_max.is_nan() || se_max <= 0.0 || power.is_nan() || power <= 0.0 || power >= 1.0 {
        return f64::NAN;
    }
    // Drift (in standard errors at max) giving `power`; crossing grows with it.
    let (mut lo, mut hi) = (0.0, 20.0);
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if design.efficacy_power(mid) < power {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (m + hi * se_max).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference, scipy 1.17.1 (scripts/stats-reference.py samplesize):
    //   z = norm.ppf(.975) + norm.ppf(.8); m = np.log1p(.02); eff = 3/np.pi
    //   np.ceil(2*(z*0.03/(np.log(1.05)-m))**2/eff) = 18.0
    //   np.ceil(2*(z*0.1/(np.log(1.05)-m))**2/eff) = 196.0
    //   zq = norm.ppf(.975) + norm.ppf(.9)
    //   np.ceil(2*(zq*0.1/m)**2/eff) = 562.0
    #[test]
    fn fixed_n_formulas_match_reference() {
        let e = 1.05f64.ln();
        assert_eq!(runs_to_detect(0.03, e, 0.02, 0.05, 0.8), Some(18));
        assert_eq!(runs_to_detect(0.1, e, 0.02, 0.05, 0.8), Some(196));
        assert_eq!(runs_to_detect(0.1, 0.01, 0.02, 0.05, 0.8), None);
        assert_eq!(runs_to_show_no_change(0.1, 0.02, 0.05, 0.8), Some(562));
        assert_eq!(runs_to_show_no_change(0.0, 0.02, 0.05, 0.8), None);
    }

    #[test]
    fn predictive_runs_needed_behaves() {
        // More noise, more runs; a clear effect needs few.
        let a = runs_needed(0.03, 1.05f64.ln(), 0.02, 0.05, 5).unwrap();
        let b = runs_needed(0.1, 1.05f64.ln(), 0.02, 0.05, 5).unwrap();
        assert!(a > 5 && b > a, "{a} {b}");
        assert_eq!(runs_needed(0.001, 1.5f64.ln(), 0.02, 0.05, 5), Some(6));
        // Effect exactly on the band edge: many runs.
        assert!(runs_needed(0.05, 1.02f64.ln(), 0.02, 0.05, 5).unwrap() > 50);
        assert_eq!(runs_needed(0.0, 0.1, 0.02, 0.05, 5), None);
        assert_eq!(runs_needed(f64::NAN, 0.1, 0.02, 0.05, 5), None);
        assert_eq!(runs_needed(0.1, f64::NAN, 0.02, 0.05, 5), None);
        assert_eq!(runs_needed(0.1, 0.0, 0.02, f64::NAN, 5), None);
        // Absurd noise: the flat prior then makes huge changes plausible,
        // which would be decided quickly; the answer stays a bounded number.
        assert!(runs_needed(1e6, 0.0, 0.02, 0.05, 5).unwrap() <= RUNS_NEEDED_CAP);
        assert_eq!(runs_needed(0.1, 0.0, 0.02, 0.05, usize::MAX), Some(RUNS_NEEDED_CAP));
    }

    #[test]
    fn design_power_and_detectable_change() {
        let fixed = SequentialDesign::standard(20, 20, 0.05);
        // The change detected with 80% power at max has power 0.8.
        let d = detectable_change(&fixed, 0.1, 0.02, 0.8);
        assert!((design_power(&fixed, 0.1, d.ln_1p(), 0.02) - 0.8).abs() < 1e-6, "{d}");
        // At CV 10% twenty runs only see large changes.
        assert!(d > 0.10 && d < 0.14, "{d}");
        let adaptive = SequentialDesign::standard(5, 20, 0.05);
        assert!(detectable_change(&adaptive, 0.1, 0.02, 0.8) > d);
    }
}
