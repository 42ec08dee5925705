//! Welch's unequal-variance t-test and the distribution quantiles it needs.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::summary::{finite, mean, sample_var};

/// Result of [`welch_t_test`]. Differences are `b - a` (variant minus baseline).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WelchTest {
    /// `mean(b) - mean(a)`.
    pub diff: f64,
    /// Standard error of `diff`: `sqrt(var_a/n_a + var_b/n_b)`.
    pub se: f64,
    /// Welch–Satterthwaite degrees of freedom (`n_a + n_b - 2` when `se == 0`).
    pub df: f64,
    /// `diff / se` (±inf when `se == 0` and `diff != 0`, 0 when both are 0).
    pub t: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

impl WelchTest {
    /// Two-sided `1 - alpha` confidence interval of `diff`. With `se == 0`
    /// the interval collapses to the point `diff`.
    pub fn ci(&self, alpha: f64) -> (f64, f64) {
        if self.se == 0.0 {
            return (self.diff, self.diff);
        }
        let q = t_quantile(1.0 - alpha / 2.0, self.df);
        (self.diff - q * self.se, self.diff + q * self.se)
    }
}

/// Welch's t-test of `b` against `a` (two-sided), on the finite values.
///
/// `None` when either side has fewer than two finite values (no variance
/// estimate). Zero variance on both sides gives `p = 1` if the means are
/// equal and `p = 0` otherwise: the data are then exact, not noisy.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<WelchTest> {
    let a = finite(a);
    let b = finite(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let diff = mean(&b) - mean(&a);
    let (wa, wb) = (sample_var(&a) / na, sample_var(&b) / nb);
    let se2 = wa + wb;
    let se = se2.sqrt();
    if !diff.is_finite() || !se.is_finite() {
        // Overflowing sums of huge values: nothing meaningful to say.
        return Some(WelchTest { diff, se, df: na + nb - 2.0, t: 0.0, p_value: 1.0 });
    }
    if se == 0.0 {
        let (t, p_value) = if diff == 0.0 { (0.0, 1.0) } else { (diff.signum() * f64::INFINITY, 0.0) };
        return Some(WelchTest { diff, se, df: na + nb - 2.0, t, p_value });
    }
    let df = se2 * se2 / (wa * wa / (na - 1.0) + wb * wb / (nb - 1.0));
    let t = diff / se;
    let p_value = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => 1.0,
    };
    Some(WelchTest { diff, se, df, t, p_value })
}

/// Quantile of Student's t with `df` degrees of freedom. Falls back to the
/// normal quantile for infinite/huge df; NaN for p outside (0, 1) or bad df
/// (statrs panics there, so it is never called with them).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df.is_infinite() || df > 1e7 {
        return normal_quantile(p);
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => dist.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Standard normal quantile; NaN for p outside (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    Normal::standard().inverse_cdf(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ln(xs: &[f64]) -> Vec<f64> {
        xs.iter().map(|x| x.ln()).collect()
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference, scipy 1.17.1 / numpy 2.4.6:
    //   b = [10.2,10.5,9.9,10.1,10.4]; v = [12.1,12.6,11.8,12.3,12.0]
    //   r = scipy.stats.ttest_ind(np.log(v), np.log(b), equal_var=False)
    //   r.pvalue = 3.386208626697191e-06, r.statistic = 11.350628917994301,
    //   r.df = 7.965889356855181,
    //   r.confidence_interval(0.95) = (0.13844338422261473, 0.20910411402111648)
    #[test]
    fn welch_on_logs_matches_scipy() {
        let b = [10.2, 10.5, 9.9, 10.1, 10.4];
        let v = [12.1, 12.6, 11.8, 12.3, 12.0];
        let w = welch_t_test(&ln(&b), &ln(&v)).unwrap();
        assert!(close(w.p_value, 3.386208626697191e-06, 1e-8), "{}", w.p_value);
        assert!(close(w.t, 11.350628917994301, 1e-10), "{}", w.t);
        assert!(close(w.df, 7.965889356855181, 1e-10), "{}", w.df);
        let (lo, hi) = w.ci(0.05);
        assert!(close(lo, 0.13844338422261473, 1e-9), "{lo}");
        assert!(close(hi, 0.20910411402111648, 1e-9), "{hi}");
    }

    // Reference, scipy 1.17.1, unequal n and variances, not significant:
    //   b = [101,98,105,99,102,97,100]; v = [103,110,96,108,99]
    //   r = scipy.stats.ttest_ind(np.log(v), np.log(b), equal_var=False)
    //   p = 0.3587524415822357, t = 1.005391846445473, df = 5.252611319783368,
    //   ci95 = (-0.042026217943999855, 0.09731476030642416)
    //   r = scipy.stats.ttest_ind(v, b, equal_var=False)
    //   p = 0.3476152811318803, t = 1.032033135104417, df = 5.20373077708124,
    //   r.confidence_interval(0.90) = (-2.7270244753921977, 8.555595903963617)
    #[test]
    fn welch_unequal_sizes_matches_scipy() {
        let b = [101.0, 98.0, 105.0, 99.0, 102.0, 97.0, 100.0];
        let v = [103.0, 110.0, 96.0, 108.0, 99.0];
        let w = welch_t_test(&ln(&b), &ln(&v)).unwrap();
        assert!(close(w.p_value, 0.3587524415822357, 1e-9), "{}", w.p_value);
        assert!(close(w.t, 1.005391846445473, 1e-10));
        assert!(close(w.df, 5.252611319783368, 1e-10));
        let (lo, hi) = w.ci(0.05);
        assert!(close(lo, -0.042026217943999855, 1e-8), "{lo}");
        assert!(close(hi, 0.09731476030642416, 1e-8), "{hi}");

        let w = welch_t_test(&b, &v).unwrap();
        assert!(close(w.p_value, 0.3476152811318803, 1e-9), "{}", w.p_value);
        assert!(close(w.df, 5.20373077708124, 1e-10));
        let (lo, hi) = w.ci(0.10);
        assert!(close(lo, -2.7270244753921977, 1e-8), "{lo}");
        assert!(close(hi, 8.555595903963617, 1e-8), "{hi}");
    }

    // Reference, scipy 1.17.1: scipy.stats.t.ppf(0.975, 3.0) = 3.1824463052837078,
    // scipy.stats.t.ppf(0.995, 2.5) = 7.163728138948783,
    // scipy.stats.norm.ppf(0.975) = 1.959963984540054, norm.ppf(0.8) = 0.8416212335729143
    #[test]
    fn quantiles_match_scipy() {
        assert!(close(t_quantile(0.975, 3.0), 3.1824463052837078, 1e-10));
        assert!(close(t_quantile(0.995, 2.5), 7.163728138948783, 1e-9));
        assert!(close(normal_quantile(0.975), 1.959963984540054, 1e-12));
        assert!(close(normal_quantile(0.8), 0.8416212335729143, 1e-12));
        assert!(close(t_quantile(0.975, f64::INFINITY), 1.959963984540054, 1e-12));
        for (p, df) in [(0.0, 3.0), (1.0, 3.0), (f64::NAN, 3.0), (0.5, 0.0), (0.5, f64::NAN), (2.0, -1.0)] {
            assert!(t_quantile(p, df).is_nan());
        }
        assert!(normal_quantile(1.0).is_nan() && normal_quantile(f64::NAN).is_nan());
    }

    #[test]
    fn degenerate_samples() {
        assert!(welch_t_test(&[1.0], &[1.0, 2.0]).is_none());
        assert!(welch_t_test(&[], &[]).is_none());
        assert!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
        let same = welch_t_test(&[3.0, 3.0], &[3.0, 3.0, 3.0]).unwrap();
        assert_eq!((same.p_value, same.ci(0.05)), (1.0, (0.0, 0.0)));
        let diff = welch_t_test(&[3.0, 3.0], &[4.0, 4.0]).unwrap();
        assert_eq!((diff.p_value, diff.ci(0.05)), (0.0, (1.0, 1.0)));
        // Overflow to infinity must not produce a NaN p-value.
        let huge = welch_t_test(&[f64::MAX, f64::MAX], &[1.0, 2.0]).unwrap();
        assert!(!huge.p_value.is_nan());
    }
}
