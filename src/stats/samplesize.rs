//! How many runs would turn an inconclusive comparison into a decisive one.

use super::welch::normal_quantile;

/// Upper bound on [`runs_needed`]: beyond this the honest answer is "reduce
/// the noise", not "run more".
pub const RUNS_NEEDED_CAP: usize = 10_000;

/// Estimated runs per variant for a comparison to become decisive.
///
/// * `sd_log`: pooled standard deviation of ln(values) (≈ the CV for small
///   CVs), the noise level observed so far.
/// * `effect_log`: observed ln(ratio) of the geometric means.
/// * `theta`: equivalence band half-width as a fraction (0.02 = ±2%).
///
/// A comparison is decisive once the CI of ln(ratio) lies entirely outside
/// the band `±m`, `m = ln(1+theta)` (a real change) or entirely inside it
/// (no change). Assuming the true effect equals the observed one, the CI
/// half-width must shrink below the distance from the effect to the nearer
/// band edge, `δ = | |effect_log| - m |`. With per-variant n, the two-sample
/// standard error is `sd_log * sqrt(2/n)`, and the usual power calculation
/// gives
///
/// `n = ceil(2 * ((z_{1-alpha/2} + z_{power}) * sd_log / δ)^2)`.
///
/// An effect sitting exactly on the band edge would need infinitely many
/// runs; δ is floored at `m/4` (a quarter of the band) so the estimate stays
/// an informative order of magnitude instead of pinning at the cap. The
/// result is at least `current_n + 1` (and 2) and at most
/// [`RUNS_NEEDED_CAP`]. `None` when there is no usable noise estimate
/// (`sd_log` not finite or not positive) or the effect is undefined.
pub fn runs_needed(
    sd_log: f64,
    effect_log: f64,
    theta: f64,
    alpha: f64,
    power: f64,
    current_n: usize,
) -> Option<usize> {
    if !sd_log.is_finite() || sd_log <= 0.0 || !effect_log.is_finite() {
        return None;
    }
    let m = if theta.is_finite() && theta > 0.0 { theta.ln_1p() } else { 0.0 };
    let delta = (effect_log.abs() - m).abs().max(m / 4.0);
    let floor = current_n.saturating_add(1).clamp(2, RUNS_NEEDED_CAP);
    if delta <= 0.0 {
        return Some(RUNS_NEEDED_CAP);
    }
    let z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power);
    if !z.is_finite() {
        return None;
    }
    let n = 2.0 * (z * sd_log / delta).powi(2);
    let n = if n.is_finite() { n.ceil().min(RUNS_NEEDED_CAP as f64) as usize } else { RUNS_NEEDED_CAP };
    Some(n.max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8); m = np.log1p(0.02)
    //   2*(z*0.1/m)**2               = 400.3059476615405   -> 401
    //   2*(z*0.05/(np.log(1.1)-m))**2 = 6.883303076625382  -> 7
    #[test]
    fn formula_matches_reference() {
        // No observed effect: must shrink the CI inside the ±2% band.
        assert_eq!(runs_needed(0.1, 0.0, 0.02, 0.05, 0.8, 5), Some(401));
        // A 10% effect: must push the CI past the band edge.
        assert_eq!(runs_needed(0.05, 1.1f64.ln(), 0.02, 0.05, 0.8, 3), Some(7));
        // Symmetric in the sign of the effect.
        assert_eq!(runs_needed(0.05, -(1.1f64.ln()), 0.02, 0.05, 0.8, 3), Some(7));
    }

    #[test]
    fn floors_caps_and_nones() {
        // Tiny noise would need fewer runs than we have: still current n + 1.
        assert_eq!(runs_needed(0.001, 0.0, 0.02, 0.05, 0.8, 10), Some(11));
        // Effect on the band edge: floored delta keeps it finite and below the cap.
        let edge = runs_needed(0.02, 0.02f64.ln_1p(), 0.02, 0.05, 0.8, 5).unwrap();
        assert!(edge > 5 && edge < RUNS_NEEDED_CAP, "{edge}");
        // Zero band and zero effect: undecidable, capped.
        assert_eq!(runs_needed(0.1, 0.0, 0.0, 0.05, 0.8, 5), Some(RUNS_NEEDED_CAP));
        // Enormous noise is capped.
        assert_eq!(runs_needed(1e6, 0.0, 0.02, 0.05, 0.8, 5), Some(RUNS_NEEDED_CAP));
        assert_eq!(runs_needed(0.0, 0.1, 0.02, 0.05, 0.8, 5), None);
        assert_eq!(runs_needed(f64::NAN, 0.1, 0.02, 0.05, 0.8, 5), None);
        assert_eq!(runs_needed(0.1, f64::NAN, 0.02, 0.05, 0.8, 5), None);
        assert_eq!(runs_needed(0.1, 0.0, 0.02, f64::NAN, 0.8, 5), None);
        assert_eq!(runs_needed(0.1, 0.0, 0.02, 0.05, 0.8, usize::MAX), Some(RUNS_NEEDED_CAP));
    }
}
