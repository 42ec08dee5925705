//! One point of a metric's history: an experiment's runs of one workload ×
//! variant × metric, reduced to what a series over experiments needs.

use serde::Serialize;

use super::{summarize, t_quantile};

/// An experiment's result for one metric, as a point of a history.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HistoryPoint {
    /// mmtests-style mean of the runs (harmonic for rates, arithmetic for
    /// times; see [`crate::Summary::mean`]).
    pub mean: f64,
    /// Lower end of the 95% CI of the mean, `mean − t·sd/√n`; NaN for n < 2.
    pub ci_low: f64,
    /// Upper end of the 95% CI of the mean; NaN for n < 2.
    pub ci_high: f64,
    /// Sample standard deviation of the runs; NaN for n < 2.
    pub stddev: f64,
    /// Finite run values behind the point.
    pub n: usize,
}

impl HistoryPoint {
    /// The point of one experiment's run values (non-finite values ignored).
    ///
    /// The CI uses the t quantile with n − 1 degrees of freedom around the
    /// mmtests mean; for a harmonic mean this is the arithmetic-mean CI
    /// recentred, close enough at the CVs benchmarks have (it is for display
    /// and the gate's noise check, not a test).
    pub fn from_values(values: &[f64], higher_is_better: bool) -> HistoryPoint {
        let s = summarize(values, higher_is_better);
        let half =
            if s.n >= 2 { t_quantile(0.975, (s.n - 1) as f64) * s.stddev / (s.n as f64).sqrt() } else { f64::NAN };
        HistoryPoint { mean: s.mean, ci_low: s.mean - half, ci_high: s.mean + half, stddev: s.stddev, n: s.n }
    }

    /// Standard error of the mean, `sd/√n`; NaN for n < 2.
    pub fn se(&self) -> f64 {
        if self.n >= 2 {
            self.stddev / (self.n as f64).sqrt()
        } else {
            f64::NAN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference, scipy 1.16.3:
    //   x=[10.2,10.5,9.9,10.1,10.4]; scipy.stats.t.interval(0.95, 4, loc=np.mean(x), scale=scipy.stats.sem(x))
    //   = (9.92355678349334, 10.516443216506662)
    #[test]
    fn point_matches_scipy_interval() {
        let p = HistoryPoint::from_values(&[10.2, 10.5, 9.9, 10.1, 10.4], false);
        assert_eq!(p.n, 5);
        assert!((p.mean - 10.22).abs() < 1e-12);
        assert!((p.ci_low - 9.92355678349334).abs() < 1e-9, "{}", p.ci_low);
        assert!((p.ci_high - 10.516443216506662).abs() < 1e-9, "{}", p.ci_high);
        assert!((p.se() - p.stddev / 5f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn degenerate_points() {
        let one = HistoryPoint::from_values(&[3.0, f64::NAN], true);
        assert_eq!((one.n, one.mean), (1, 3.0));
        assert!(one.ci_low.is_nan() && one.ci_high.is_nan() && one.se().is_nan());
        let none = HistoryPoint::from_values(&[], true);
        assert_eq!(none.n, 0);
        assert!(none.mean.is_nan());
        // Rates use the harmonic mean: 2 / (1/1 + 1/4) = 1.6.
        assert!((HistoryPoint::from_values(&[1.0, 4.0], true).mean - 1.6).abs() < 1e-12);
    }
}
