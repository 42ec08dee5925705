//! Outlier flagging with the Iglewicz–Hoaglin modified z-score.
//!
//! Median/MAD based rather than mean/stddev based because a single wild run
//! inflates the stddev enough to hide itself; the median and MAD barely move.

use super::summary::{finite, mean, median};

/// |modified z-score| above which a value is flagged (Iglewicz & Hoaglin 1993).
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

/// Indices of values whose |modified z-score| exceeds [`OUTLIER_Z`].
/// Fewer than three finite values never produce outliers (nothing to be an
/// outlier from).
pub fn outlier_indices(values: &[f64]) -> Vec<usize> {
    if values.iter().filter(|x| x.is_finite()).count() < 3 {
        return Vec::new();
    }
    modified_z_scores(values).iter().enumerate().filter(|(_, z)| z.abs() > OUTLIER_Z).map(|(i, _)| i).collect()
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

    #[test]
    fn constant_and_degenerate_inputs() {
        assert_eq!(modified_z_scores(&[4.0, 4.0, 4.0]), vec![0.0, 0.0, 0.0]);
        assert!(modified_z_scores(&[]).is_empty());
        let z = modified_z_scores(&[f64::NAN, 1.0]);
        assert!(z[0].is_nan() && z[1] == 0.0);
        assert!(modified_z_scores(&[f64::NAN])[0].is_nan());
        // Two values cannot have an outlier, however far apart.
        assert!(outlier_indices(&[1.0, 1000.0]).is_empty());
    }
}
