//! Per-variant summary of repeated measurements.

use serde::Serialize;

use super::outliers::outlier_indices;

/// Which mean [`Summary::mean`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MeanKind {
    /// Harmonic mean: the right average of rates (higher-is-better) measured
    /// over equal amounts of work.
    Harmonic,
    /// Arithmetic mean: the right average of times (lower-is-better).
    Arithmetic,
}

impl MeanKind {
    /// The mmtests row label: `Hmean` or `Amean`.
    pub fn label(self) -> &'static str {
        match self {
            MeanKind::Harmonic => "Hmean",
            MeanKind::Arithmetic => "Amean",
        }
    }
}

/// Summary statistics of one variant's repeated runs of one metric.
///
/// Non-finite inputs (NaN, ±inf) are ignored: `n` counts only the finite
/// values used. Fields undefined for the data (everything when `n == 0`,
/// `stddev`/`cv` when `n == 1`, `geomean` when a value is `<= 0`) are NaN.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of finite values summarised.
    pub n: usize,
    /// mmtests-style mean, see [`MeanKind`].
    pub mean: f64,
    /// Which mean `mean` is.
    pub mean_kind: MeanKind,
    /// Sample standard deviation (n-1 denominator).
    pub stddev: f64,
    /// Coefficient of variation: `stddev / |arithmetic mean|`.
    pub cv: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median (average of the two middle values for even n).
    pub median: f64,
    /// Geometric mean; NaN unless every value is positive.
    pub geomean: f64,
    /// Indices into the input slice whose |modified z-score| exceeds
    /// [`crate::OUTLIER_Z`]. Flagged for a human, never dropped.
    pub outliers: Vec<usize>,
}

/// Summarise repeated measurements, mmtests-style: harmonic mean for
/// higher-is-better rates, arithmetic mean for lower-is-better times.
///
/// `stddev` is the sample (n-1) standard deviation; `cv = stddev /
/// |arithmetic mean|` (0 when stddev is 0). `outliers` holds indices with
/// |modified z-score| > 3.5 (Iglewicz–Hoaglin, `0.6745*(x-median)/MAD`);
/// they are flagged, never dropped.
///
/// The harmonic mean is only defined for positive values; if any value is
/// `<= 0` the arithmetic mean is used instead and `mean_kind` says so.
pub fn summarize(values: &[f64], higher_is_better: bool) -> Summary {
    let xs = finite(values);
    let n = xs.len();
    let outliers = outlier_indices(values);
    if n == 0 {
        return Summary {
            n,
            mean: f64::NAN,
            mean_kind: if higher_is_better { MeanKind::Harmonic } else { MeanKind::Arithmetic },
            stddev: f64::NAN,
            cv: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            median: f64::NAN,
            geomean: f64::NAN,
            outliers,
        };
    }
    let amean = mean(&xs);
    let all_positive = xs.iter().all(|&x| x > 0.0);
    let (mean_v, mean_kind) = if higher_is_better && all_positive {
        (harmonic_mean(&xs), MeanKind::Harmonic)
    } else {
        (amean, MeanKind::Arithmetic)
    };
    let stddev = sample_sd(&xs);
    let cv = if stddev == 0.0 {
        0.0
    } else if amean == 0.0 {
        f64::NAN
    } else {
        stddev / amean.abs()
    };
    Summary {
        n,
        mean: mean_v,
        mean_kind,
        stddev,
        cv,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        median: median(&xs),
        geomean: if all_positive { geometric_mean(&xs) } else { f64::NAN },
        outliers,
    }
}

/// The finite values of `values`, in order.
pub(crate) fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|x| x.is_finite()).collect()
}

/// Arithmetic mean; NaN for an empty slice.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let n = xs.len() as f64;
    let sum = xs.iter().sum::<f64>();
    if sum.is_finite() {
        return sum / n;
    }
    // The sum overflowed (values near f64::MAX): the same mean from the
    // values divided first. An infinite input stays infinite.
    xs.iter().map(|x| x / n).sum::<f64>()
}

/// Sample standard deviation (n-1), finite whenever the spread is: the
/// variance of values near f64::MAX overflows, its square root need not.
pub(crate) fn sample_sd(xs: &[f64]) -> f64 {
    let var = sample_var(xs);
    if var.is_finite() || var.is_nan() {
        return var.sqrt();
    }
    let scale = xs.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let scaled: Vec<f64> = xs.iter().map(|x| x / scale).collect();
    sample_var(&scaled).sqrt() * scale
}

/// Sample variance (n-1); NaN for fewer than two values.
pub(crate) fn sample_var(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    // Identical values: exactly 0, not the 1e-32 rounding residue of their
    // mean, so "zero variance" cases are recognised as such downstream.
    if xs.iter().all(|&x| x == xs[0]) {
        return 0.0;
    }
    let m = mean(xs);
    // Two-pass formula: avoids the cancellation of sum(x^2) - n*m^2 for the
    // tightly clustered values benchmarks produce.
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64
}

/// Median; NaN for an empty slice. NaNs must already be filtered out.
pub(crate) fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Harmonic mean of positive values.
pub(crate) fn harmonic_mean(xs: &[f64]) -> f64 {
    xs.len() as f64 / xs.iter().map(|x| 1.0 / x).sum::<f64>()
}

/// Geometric mean of positive values, via logs so large products do not overflow.
pub(crate) fn geometric_mean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    const X: [f64; 5] = [120.0, 95.5, 101.2, 99.8, 130.4];

    // References, scipy 1.17.1 / numpy 2.4.6, x = [120.0, 95.5, 101.2, 99.8, 130.4]:
    //   scipy.stats.hmean(x)              = 107.8173807361889
    //   scipy.stats.gmean(x)              = 108.58120388841297
    //   np.std(x, ddof=1)                 = 15.049651158747835
    //   np.std(x, ddof=1) / np.mean(x)    = 0.13759052074188916
    //   np.median(x)                      = 101.2
    #[test]
    fn harmonic_mean_and_spread_match_scipy() {
        let s = summarize(&X, true);
        assert_eq!(s.mean_kind, MeanKind::Harmonic);
        assert!(close(s.mean, 107.8173807361889, 1e-12), "{}", s.mean);
        assert!(close(s.geomean, 108.58120388841297, 1e-12), "{}", s.geomean);
        assert!(close(s.stddev, 15.049651158747835, 1e-12), "{}", s.stddev);
        assert!(close(s.cv, 0.13759052074188916, 1e-12), "{}", s.cv);
        assert_eq!(s.median, 101.2);
        assert_eq!((s.min, s.max, s.n), (95.5, 130.4, 5));
        assert!(s.outliers.is_empty());
    }

    // np.mean(x) = 109.38 for the same x.
    #[test]
    fn lower_is_better_uses_arithmetic_mean() {
        let s = summarize(&X, false);
        assert_eq!(s.mean_kind, MeanKind::Arithmetic);
        assert!(close(s.mean, 109.38, 1e-12), "{}", s.mean);
    }

    #[test]
    fn non_positive_rates_fall_back_to_arithmetic() {
        let s = summarize(&[0.0, 2.0, 4.0], true);
        assert_eq!(s.mean_kind, MeanKind::Arithmetic);
        assert_eq!(s.mean, 2.0);
        assert!(s.geomean.is_nan());
        assert_eq!(s.stddev, 2.0);
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let e = summarize(&[], true);
        assert_eq!(e.n, 0);
        assert!(e.mean.is_nan() && e.median.is_nan() && e.stddev.is_nan());

        let one = summarize(&[3.0], false);
        assert_eq!((one.n, one.mean, one.median, one.min, one.max), (1, 3.0, 3.0, 3.0, 3.0));
        assert!(one.stddev.is_nan() && one.cv.is_nan());

        let same = summarize(&[2.0, 2.0, 2.0], true);
        assert_eq!((same.stddev, same.cv, same.mean), (0.0, 0.0, 2.0));

        let zeros = summarize(&[0.0, 0.0], false);
        assert_eq!((zeros.mean, zeros.cv), (0.0, 0.0));
    }

    #[test]
    fn non_finite_values_are_ignored_but_indices_kept() {
        let v = [f64::NAN, 10.0, 10.1, f64::INFINITY, 9.9, 10.0, 50.0];
        let s = summarize(&v, false);
        assert_eq!(s.n, 5);
        assert_eq!(s.min, 9.9);
        assert_eq!(s.max, 50.0);
        // Index into the original slice, not into the filtered values.
        assert_eq!(s.outliers, vec![6]);
    }
}
