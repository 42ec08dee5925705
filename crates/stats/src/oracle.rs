//! The three-valued oracle of commit bisection: is a candidate's result the
//! good end's or the bad end's, or can't we tell yet?
//!
//! Chromium's Pinpoint asks, per pair of sample sets, "different / same /
//! unknown → add runs". With two known ends the question has a sharper
//! form: on which side of the midpoint between the ends does the candidate
//! lie? On ln(values) (raw values if any is ≤ 0), with means `g`, `b`, `c`
//! and step `Δ = b − g`:
//!
//! `d = c − (g + b)/2`, `se² = s_c²/n_c + (s_g²/n_g + s_b²/n_b)/4`,
//! Welch–Satterthwaite df, and one-sided t-tests at `alpha`: `d` beyond the
//! midpoint towards good → [`Side::Good`], towards bad → [`Side::Bad`],
//! neither → [`Side::Unknown`] (the caller adds a round to all three and
//! asks again, up to a bound, then reports the step undecided).
//!
//! A candidate exactly like one end is `|Δ|/2` from the midpoint, so the
//! runs needed depend on the step against the noise, not on the candidate.
//! Each call is wrong (the far side) with probability ≤ `alpha`; a caller
//! that asks up to `k` times per step should pass `alpha / k`. Measured by
//! [`crate::simulation::oracle_rates`].

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::summary::{finite, mean, sample_var};
use super::welch_t_test;

/// The oracle's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// Significantly closer to the good end: the regression is not in yet.
    Good,
    /// Significantly closer to the bad end.
    Bad,
    /// Not yet separable: add rounds.
    Unknown,
}

/// The answer with the numbers behind it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classification {
    pub side: Side,
    /// Where the candidate sits between the ends, on the scale used: 0 at
    /// the good end's mean, 1 at the bad end's.
    pub position: f64,
    /// `1 − 2·alpha` interval of `position` (the step's own uncertainty
    /// left out: for display).
    pub position_low: f64,
    pub position_high: f64,
    /// `(bad / good − 1) · 100` on the scale's means (geometric on logs).
    pub step_pct: f64,
    /// One-sided p-value of the side chosen (or the smaller one when unknown).
    pub p_value: f64,
    /// Decided, but also significantly different (Welch, two-sided, alpha)
    /// from the end it was put with: a partial step or a second change.
    pub partial: bool,
}

/// Classify `candidate` between the `good` and `bad` ends' run values.
/// Fewer than two finite values on any side, or ends with equal means,
/// give [`Side::Unknown`] with NaN numbers.
pub fn classify(good: &[f64], bad: &[f64], candidate: &[f64], alpha: f64) -> Classification {
    let alpha = if alpha > 0.0 && alpha < 0.5 { alpha } else { 0.01 };
    let unknown = Classification {
        side: Side::Unknown,
        position: f64::NAN,
        position_low: f64::NAN,
        position_high: f64::NAN,
        step_pct: f64::NAN,
        p_value: 1.0,
        partial: false,
    };
    let (g, b, c) = (finite(good), finite(bad), finite(candidate));
    if g.len() < 2 || b.len() < 2 || c.len() < 2 {
        return unknown;
    }
    let log = g.iter().chain(&b).chain(&c).all(|&x| x > 0.0);
    let scale = |xs: &[f64]| -> Vec<f64> {
        if log {
            xs.iter().map(|x| x.ln()).collect()
        } else {
            xs.to_vec()
        }
    };
    let (g, b, c) = (scale(&g), scale(&b), scale(&c));
    let (mg, mb, mc) = (mean(&g), mean(&b), mean(&c));
    let step = mb - mg;
    if step == 0.0 || !step.is_finite() {
        return unknown;
    }
    let w = |xs: &[f64], f: f64| f * f * sample_var(xs) / xs.len() as f64;
    let parts = [(w(&c, 1.0), c.len()), (w(&g, 0.5), g.len()), (w(&b, 0.5), b.len())];
    let se2: f64 = parts.iter().map(|p| p.0).sum();
    let d = (mc - (mg + mb) / 2.0) * step.signum(); // > 0: towards bad
    let (p_bad, p_good, half) = if se2 == 0.0 {
        (if d > 0.0 { 0.0 } else { 1.0 }, if d < 0.0 { 0.0 } else { 1.0 }, 0.0)
    } else {
        let df = se2 * se2 / parts.iter().map(|&(v, n)| v * v / (n as f64 - 1.0)).sum::<f64>();
        match StudentsT::new(0.0, 1.0, df) {
            Ok(t) => {
                let z = d / se2.sqrt();
                (t.sf(z), t.cdf(z), t.inverse_cdf(1.0 - alpha) * se2.sqrt())
            }
            Err(_) => (1.0, 1.0, f64::INFINITY),
        }
    };
    let side = if p_bad < alpha {
        Side::Bad
    } else if p_good < alpha {
        Side::Good
    } else {
        Side::Unknown
    };
    let differs = |end: &[f64]| welch_t_test(end, &c).is_some_and(|t| t.p_value < alpha);
    let partial = match side {
        Side::Good => differs(&g),
        Side::Bad => differs(&b),
        Side::Unknown => false,
    };
    let pos = |x: f64| 0.5 + x / step.abs();
    Classification {
        side,
        position: pos(d),
        position_low: pos(d - half),
        position_high: pos(d + half),
        step_pct: if log { (step.exp() - 1.0) * 100.0 } else { (mb / mg - 1.0) * 100.0 },
        p_value: match side {
            Side::Bad => p_bad,
            Side::Good => p_good,
            Side::Unknown => p_bad.min(p_good),
        },
        partial,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: [f64; 5] = [10.2, 10.5, 9.9, 10.1, 10.4];
    const BAD: [f64; 5] = [12.1, 12.6, 11.8, 12.3, 12.0];

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference, numpy 2.2.0 / scipy 1.16.3:
    //   g,b = np.log(GOOD), np.log(BAD); c = np.log([10.3, 10.0, 10.6, 10.2])
    //   w = [c.var(ddof=1)/4, g.var(ddof=1)/5/4, b.var(ddof=1)/5/4]; se2 = sum(w)
    //   df = se2**2 / (w[0]**2/3 + w[1]**2/4 + w[2]**2/4)
    //   d = c.mean() - (g.mean()+b.mean())/2; z = d/np.sqrt(se2)
    //   scipy.stats.t.cdf(z, df) = 0.000839411433552195 (df = 5.535499091624859)
    //   step = b.mean()-g.mean(); q = scipy.stats.t.ppf(0.99, df)
    //   0.5 + d/step = 0.030872813177035885, 0.5 + (d ∓ q*np.sqrt(se2))/step
    //     = (-0.23595017722519707, 0.29769580357926895), np.expm1(step)*100 = 18.978634516042085
    #[test]
    fn candidate_like_good_is_good() {
        let c = classify(&GOOD, &BAD, &[10.3, 10.0, 10.6, 10.2], 0.01);
        assert_eq!(c.side, Side::Good);
        assert!(close(c.p_value, 0.000839411433552195, 1e-8), "{c:?}");
        assert!(close(c.position, 0.030872813177035885, 1e-9), "{c:?}");
        assert!(close(c.position_low, -0.23595017722519707, 1e-9) && close(c.position_high, 0.29769580357926895, 1e-9));
        assert!(close(c.step_pct, 18.978634516042085, 1e-12));
        assert!(!c.partial);
        // Like bad, and the same for a higher-is-better metric (direction does not matter).
        assert_eq!(classify(&GOOD, &BAD, &[12.2, 11.9, 12.4], 0.01).side, Side::Bad);
        assert_eq!(classify(&BAD, &GOOD, &[12.2, 11.9, 12.4], 0.01).side, Side::Good);
    }

    #[test]
    fn halfway_and_noisy_candidates_are_unknown() {
        let c = classify(&GOOD, &BAD, &[11.1, 11.2, 11.0, 11.15], 0.01);
        assert_eq!(c.side, Side::Unknown, "{c:?}");
        assert!(c.position_low < 0.5 && c.position_high > 0.5);
        assert_eq!(classify(&GOOD, &BAD, &[9.0, 13.5], 0.01).side, Side::Unknown);
    }

    #[test]
    fn partial_steps_are_flagged() {
        // 30% of the way to bad, precisely measured: good side, but not good.
        let c = classify(&GOOD, &BAD, &[10.8, 10.82, 10.79, 10.81, 10.8, 10.78], 0.01);
        assert_eq!((c.side, c.partial), (Side::Good, true), "{c:?}");
    }

    #[test]
    fn degenerate_input_is_unknown() {
        for (g, b, c) in [(&GOOD[..1], &BAD[..], &GOOD[..]), (&GOOD, &GOOD, &BAD), (&[], &[], &[])] {
            let r = classify(g, b, c, 0.01);
            assert_eq!(r.side, Side::Unknown);
            assert!(r.position.is_nan());
        }
        // Exact values: decided without noise.
        assert_eq!(classify(&[1.0, 1.0], &[2.0, 2.0], &[1.0, 1.0], 0.01).side, Side::Good);
        assert_eq!(classify(&[1.0, 1.0], &[4.0, 4.0], &[2.0, 2.0], 0.01).side, Side::Unknown);
        // Zero or negative values: raw scale.
        assert_eq!(classify(&[0.0, 0.1, -0.1], &[5.0, 5.1, 4.9], &[5.05, 4.95], 0.01).side, Side::Bad);
    }
}
