//! Outlier flags: Rosner's generalized ESD test, and the modified z-score.
//!
//! A flag asks a human to look at a run; it never drops one (the verdict's
//! rank interval is robust to a minority of wild runs anyway). The flag
//! must therefore be rare on clean data at every n: the earlier rule
//! (modified z-score > 3.5 from n = 3) flagged at least one run in 49/37/23/19%
//! of clean A/A experiments at n = 3/5/10/20. The generalized extreme
//! studentized deviate test (Rosner 1983) controls the chance of flagging
//! anything in a clean normal sample at [`OUTLIER_ALPHA`] whatever n, and
//! still finds several outliers at once (testing up to [`max_outliers`]
//! removes the masking a single Grubbs test suffers from).
//!
//! Runs are tested on the log scale when all values are positive (slow runs
//! are multiplicative). Measured by `fslab simulate` (see the module docs
//! of [`crate`]): ≤ 4% of clean A/A experiments (both sides) get a
//! flag at any n, and a single ×1.5 run among 10 is flagged in 100% of
//! experiments at CV 1% and 3%.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use super::summary::{finite, mean, median};
use super::welch::t_quantile;

/// Chance that a clean normal sample of any size gets a flag (per side).
pub const OUTLIER_ALPHA: f64 = 0.0125;

/// |modified z-score| the old rule flagged above (Iglewicz & Hoaglin 1993);
/// [`modified_z_scores`] stays available as a descriptive score.
pub const OUTLIER_Z: f64 = 3.5;

/// 0.6745 is the 0.75 quantile of the standard normal: it makes MAD-based
/// scores comparable to ordinary z-scores for normal data.
const MAD_SCALE: f64 = 0.6745;

/// Consistency constant for the mean-absolute-deviation fallback:
/// E|X-μ| = σ·sqrt(2/π) ≈ 0.7979σ, and 1/0.7979 ≈ 1.253314.
const MEANAD_SCALE: f64 = 1.253314;

/// Modified z-scores `0.6745 * (x - median) / MAD`, one per input value.
///
/// Median and MAD are computed over the finite values only; non-finite
/// inputs get a NaN score. When the MAD is 0 (more than half the values are
/// identical) the score falls back to `(x - median) / (1.253314 * MeanAD)`,
/// MeanAD being the mean absolute deviation from the median (the IBM SPSS
/// convention), so a lone deviating value is still scored. When that is 0
/// too, every finite value equals the median and scores 0.
pub fn modified_z_scores(values: &[f64]) -> Vec<f64> {
    let xs = finite(values);
    if xs.is_empty() {
        return vec![f64::NAN; values.len()];
    }
    let med = median(&xs);
    let dev: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev);
    let mean_ad = mean(&dev);
    values
        .iter()
        .map(|&x| {
            if !x.is_finite() {
                f64::NAN
            } else if mad > 0.0 {
                MAD_SCALE * (x - med) / mad
            } else if mean_ad > 0.0 {
                (x - med) / (MEANAD_SCALE * mean_ad)
            } else {
                0.0
            }
        })
        .collect()
}

/// How many outliers the ESD test looks for among `n` values: a fifth of
/// them (at least one), leaving at least two values to estimate the spread.
pub fn max_outliers(n: usize) -> usize {
    if n < 3 {
        return 0;
    }
    (n / 5).max(1).min(n - 2)
}

static CRITICAL: LazyLock<Mutex<HashMap<usize, Vec<f64>>>> = LazyLock::new(Default::default);

/// Rosner's critical values λ_1..λ_r for `n` values at [`OUTLIER_ALPHA`]:
/// `λ_i = (n−i) t_{p, n−i−1} / √((n−i−1+t²)(n−i+1))`, `p = 1 − α/(2(n−i+1))`.
fn critical_values(n: usize) -> Vec<f64> {
    if let Some(v) = CRITICAL.lock().unwrap_or_else(|p| p.into_inner()).get(&n) {
        return v.clone();
    }
    let v: Vec<f64> = (1..=max_outliers(n))
        .map(|i| {
            let rest = (n - i) as f64;
            let p = 1.0 - OUTLIER_ALPHA / (2.0 * (rest + 1.0));
            let t = t_quantile(p, rest - 1.0);
            rest * t / ((rest - 1.0 + t * t) * (rest + 1.0)).sqrt()
        })
        .collect();
    CRITICAL.lock().unwrap_or_else(|p| p.into_inner()).insert(n, v.clone());
    v
}

/// Indices of values the generalized ESD test flags as outliers.
///
/// Non-finite values are ignored (their indices are never flagged). The
/// test runs on ln(values) when every finite value is positive, else on the
/// values. Fewer than three finite values, or all of them equal, never
/// produce outliers.
pub fn outlier_indices(values: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..values.len()).filter(|&i| values[i].is_finite()).collect();
    let n = idx.len();
    if n < 3 {
        return Vec::new();
    }
    let logs = idx.iter().all(|&i| values[i] > 0.0);
    let x = |i: usize| if logs { values[i].ln() } else { values[i] };
    let lambda = critical_values(n);
    let mut removed = Vec::new();
    let mut found = 0;
    for (step, &crit) in lambda.iter().enumerate() {
        let m = idx.iter().map(|&i| x(i)).sum::<f64>() / idx.len() as f64;
        let ss: f64 = idx.iter().map(|&i| (x(i) - m).powi(2)).sum();
        let sd = (ss / (idx.len() - 1) as f64).sqrt();
        if !(sd > 0.0 && sd.is_finite()) {
            break;
        }
        let (pos, r) = idx
            .iter()
            .enumerate()
            .map(|(p, &i)| (p, (x(i) - m).abs() / sd))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("at least three values");
        removed.push(idx.remove(pos));
        if r > crit {
            found = step + 1;
        }
    }
    let mut out: Vec<usize> = removed.into_iter().take(found).collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   x = np.array([10.1, 10.3, 9.8, 10.0, 10.2, 14.9, 10.1, 9.9])
    //   0.6745 * (x - np.median(x)) / scipy.stats.median_abs_deviation(x)
    #[test]
    fn modified_z_matches_scipy_mad() {
        let x = [10.1, 10.3, 9.8, 10.0, 10.2, 14.9, 10.1, 9.9];
        let want = [
            0.0,
            0.8993333333333413,
            -1.349,
            -0.44966666666666666,
            0.44966666666666666,
            21.58400000000008,
            0.0,
            -0.8993333333333333,
        ];
        let got = modified_z_scores(&x);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{g} vs {w}");
        }
        assert_eq!(outlier_indices(&x), vec![5]);
    }

    // MAD is 0 here (scipy.stats.median_abs_deviation([5,5,5,5,5,9]) == 0.0).
    // Reference for the fallback, numpy 2.4.6:
    //   x = np.array([5.,5,5,5,5,9]); d = np.abs(x - np.median(x))
    //   (x - np.median(x)) / (1.253314 * d.mean())  -> [0,0,0,0,0,4.78730789]
    #[test]
    fn zero_mad_falls_back_to_mean_absolute_deviation() {
        let z = modified_z_scores(&[5.0, 5.0, 5.0, 5.0, 5.0, 9.0]);
        assert!(z[..5].iter().all(|&v| v == 0.0));
        assert!((z[5] - 4.78730789).abs() < 1e-6, "{}", z[5]);
        assert_eq!(outlier_indices(&[5.0, 5.0, 5.0, 5.0, 5.0, 9.0]), vec![5]);
    }

    // Reference: scripts/stats-reference.py esd (Rosner's procedure written
    // out with scipy.stats.t.ppf, scipy 1.17.1):
    //   critical values n=10, alpha=0.0125: [2.460271454610584, 2.367770412496432]
    //   critical values n=20, alpha=0.0125: [2.964490026871655, 2.9324694199645327,
    //                                        2.8979179346079027, 2.860465809574546]
    //   ESD on np.log([10.0,10.2,9.9,10.1,15.0,10.05,9.95,14.8,10.15,10.0]) -> [4, 7]
    //   ESD on np.log([5,5,5,5,5,9]) -> [5];  ESD on [0,-1,1,0.5,80] -> [4]
    #[test]
    fn esd_matches_reference() {
        let c = critical_values(10);
        assert!((c[0] - 2.460271454610584).abs() < 1e-9 && (c[1] - 2.367770412496432).abs() < 1e-9, "{c:?}");
        let c = critical_values(20);
        let want = [2.964490026871655, 2.9324694199645327, 2.8979179346079027, 2.860465809574546];
        for (g, w) in c.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{c:?}");
        }
        // Two slow runs among ten: both found (one Grubbs test would be masked).
        let x = [10.0, 10.2, 9.9, 10.1, 15.0, 10.05, 9.95, 14.8, 10.15, 10.0];
        assert_eq!(outlier_indices(&x), vec![4, 7]);
    }

    #[test]
    fn constant_and_degenerate_inputs() {
        assert_eq!(modified_z_scores(&[4.0, 4.0, 4.0]), vec![0.0, 0.0, 0.0]);
        assert!(modified_z_scores(&[]).is_empty());
        let z = modified_z_scores(&[f64::NAN, 1.0]);
        assert!(z[0].is_nan() && z[1] == 0.0);
        assert!(modified_z_scores(&[f64::NAN])[0].is_nan());
        // Two values cannot have an outlier, however far apart.
        assert!(outlier_indices(&[1.0, 1000.0]).is_empty());
        assert!(outlier_indices(&[4.0, 4.0, 4.0, 4.0]).is_empty());
        assert!(outlier_indices(&[0.0, -1.0, 1.0, 0.5, 80.0, f64::NAN]) == vec![4]);
        assert_eq!((max_outliers(2), max_outliers(3), max_outliers(10), max_outliers(20)), (0, 1, 2, 4));
    }
}
