//! Group-sequential boundaries: when adaptive repetition may stop.
//!
//! An adaptive experiment (`repetitions = { min, max }`) looks at its data
//! after round `min`, `min + 1`, …, `max` and stops as soon as every
//! decisive comparison has a verdict. Re-applying the fixed-n rule at every
//! look inflates the error rates (optional stopping); instead each look `k`
//! gets its own nominal level from an *α-spending function* (Lan & DeMets
//! 1983): with information fraction `t_k = n_k / max`, the probability that a
//! one-sided test statistic with no real effect crosses its boundary for
//! the first time at look `k` is `α(t_k) − α(t_{k−1})`, so the chance of
//! ever crossing, whatever look the experiment stops at, is at most `α(1)`.
//!
//! Two families of boundaries, each one-sided at level `α/2`:
//!
//! * **efficacy** (`regressed` / `improved`, one each side): Kim–DeMets
//!   power-family spending `α(t) = (α/2) t³` ([`EFFICACY_SPENDING`]), the
//!   O'Brien–Fleming-type shape: almost nothing is spent early, so the last
//!   look keeps nearly the fixed-n level and power. (In the simulation it
//!   is within half a point of the power of Lan–DeMets O'Brien–Fleming
//!   spending with 1–3% fewer
//!   runs; see `fslab simulate explore`.)
//! * **equivalence** (`no-change`): the test that the CI lies inside the
//!   band is a pair of one-sided tests against the band edges; its error
//!   (`no-change` when the true change sits on the band edge) is spent
//!   with the cheaper [`EQUIVALENCE_SPENDING`] `(α/2) t²`, so that a true
//!   `no-change` can stop early (at CV 1%, after 9.5 instead of 10.6 runs
//!   for `{5, 20}`) while keeping most of the `no-change` verdicts at `max`
//!   that linear or Pocock spending would lose.
//!
//! The boundaries `z_k` solve the spending equations under the canonical
//! joint distribution of the look statistics (`Z_k` standard normal with
//! `Cov(Z_j, Z_k) = √(t_j / t_k)`), by the recursive numerical integration of
//! Armitage, McPherson & Rowe (1969) as laid out in Jennison & Turnbull,
//! *Group Sequential Methods* (2000), ch. 19: the density of `Z_k` on the
//! continuation region is carried on a grid from look to look (Simpson's
//! rule), and each `z_k` is found by bisection. Hand-written because no
//! maintained Rust crate computes them.
//!
//! A boundary is used through its nominal one-sided level `Φ̄(z_k)`: the
//! rank interval of [`super::robust`] (or the Welch t interval at small n)
//! is computed at that level, which carries the z-scale design over to
//! unknown noise (the "nominal significance level" approach of Jennison &
//! Turnbull); the simulation checks that the error rates still hold.
//!
//! The boundaries depend only on `(min, max, α)`, so a comparison read back
//! from the store recomputes the look its data reached from the number of
//! runs. More than [`MAX_LOOKS`] rounds are thinned to that many evenly
//! spaced looks; the runner only stops at a look ([`SequentialDesign::is_look`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde::Serialize;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use super::welch::normal_quantile;

/// At most this many looks in any design (bounds the boundary computation).
pub const MAX_LOOKS: usize = 50;

/// Looks of the standard design: rounds evenly spaced from `min` to `max`.
pub const STANDARD_LOOKS: usize = MAX_LOOKS;

/// Error spending of the efficacy (`regressed` / `improved`) boundaries.
pub const EFFICACY_SPENDING: Spending = Spending::Power(3.0);

/// Error spending of the equivalence (`no-change`) boundaries.
pub const EQUIVALENCE_SPENDING: Spending = Spending::Power(2.0);

/// How a one-sided error rate is spent over the information fraction `t`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spending {
    /// Lan–DeMets O'Brien–Fleming type: `2 − 2Φ(z_{1−a/2} / √t)`.
    OBrienFleming,
    /// Lan–DeMets Pocock type: `a · ln(1 + (e − 1) t)`.
    Pocock,
    /// Kim–DeMets power family: `a · t^ρ` (ρ = 1 spends evenly).
    Power(f64),
}

impl Spending {
    /// Cumulative error spent by information fraction `t` for total `level`.
    pub fn cumulative(self, level: f64, t: f64) -> f64 {
        if t.is_nan() || t <= 0.0 {
            return 0.0;
        }
        let t = t.min(1.0);
        match self {
            Spending::OBrienFleming => 2.0 * normal_sf(normal_quantile(1.0 - level / 2.0) / t.sqrt()),
            Spending::Pocock => level * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            Spending::Power(rho) => level * t.powf(rho),
        }
    }

    /// Short name for tables.
    pub fn label(self) -> String {
        match self {
            Spending::OBrienFleming => "OBF".to_string(),
            Spending::Pocock => "Pocock".to_string(),
            Spending::Power(rho) => format!("t^{rho}"),
        }
    }
}

/// Where a comparison stands in its design: which look, and the nominal
/// one-sided levels its intervals use there.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Look {
    /// 1-based index of the look the data reached.
    pub index: usize,
    /// Number of planned looks (1 for a fixed design).
    pub count: usize,
    /// Runs per variant the look is planned at.
    pub n: usize,
    /// Nominal one-sided level of each efficacy test (`α/2` at a fixed-n look).
    pub efficacy_level: f64,
    /// Nominal one-sided level of each equivalence test (`α/2` at a fixed-n look).
    pub equivalence_level: f64,
}

impl Look {
    /// The single look of a fixed-n comparison.
    pub fn fixed(n: usize, alpha: f64) -> Look {
        Look { index: 1, count: 1, n, efficacy_level: alpha / 2.0, equivalence_level: alpha / 2.0 }
    }

    /// True for the last planned look (and for fixed designs).
    pub fn is_final(&self) -> bool {
        self.index >= self.count
    }
}

/// A group-sequential design: looks and their boundaries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SequentialDesign {
    pub min: usize,
    pub max: usize,
    pub alpha: f64,
    pub efficacy_spending: Spending,
    pub equivalence_spending: Spending,
    /// Runs per variant at each look, increasing, the last one `max`.
    pub looks: Vec<usize>,
    /// z boundary of each one-sided efficacy test, per look.
    pub efficacy_z: Vec<f64>,
    /// z boundary of each one-sided equivalence test, per look.
    pub equivalence_z: Vec<f64>,
}

type DesignKey = (usize, usize, u64, String, String);

static DESIGNS: LazyLock<Mutex<HashMap<DesignKey, Arc<SequentialDesign>>>> = LazyLock::new(Default::default);

impl SequentialDesign {
    /// The design fslab uses for `repetitions = { min, max }` at level
    /// `alpha` (cached: computing it takes milliseconds).
    pub fn standard(min: usize, max: usize, alpha: f64) -> Arc<SequentialDesign> {
        Self::cached(min, max, alpha, EFFICACY_SPENDING, EQUIVALENCE_SPENDING, STANDARD_LOOKS)
    }

    /// Any design, cached by its parameters.
    pub fn cached(
        min: usize,
        max: usize,
        alpha: f64,
        efficacy: Spending,
        equivalence: Spending,
        looks: usize,
    ) -> Arc<SequentialDesign> {
        let key = (min, max, alpha.to_bits(), format!("{efficacy:?}/{looks}"), format!("{equivalence:?}"));
        if let Some(d) = DESIGNS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Arc::clone(d);
        }
        let design = Arc::new(Self::new(min, max, alpha, efficacy, equivalence, looks));
        DESIGNS.lock().unwrap_or_else(|p| p.into_inner()).insert(key, Arc::clone(&design));
        design
    }

    /// Compute the design with at most `looks` looks (2 ..= [`MAX_LOOKS`]).
    /// `min` is raised to at least 1 and `max` to at least `min`; `alpha`
    /// outside (0, 1) becomes 0.05.
    pub fn new(
        min: usize,
        max: usize,
        alpha: f64,
        efficacy: Spending,
        equivalence: Spending,
        looks: usize,
    ) -> SequentialDesign {
        let alpha = if alpha > 0.0 && alpha < 1.0 { alpha } else { 0.05 };
        let min = min.max(1);
        let max = max.max(min);
        let looks = planned_looks(min, max, looks.clamp(2, MAX_LOOKS));
        let t: Vec<f64> = looks.iter().map(|&n| n as f64 / max as f64).collect();
        let half = alpha / 2.0;
        let efficacy_z = boundaries(&t, |x| efficacy.cumulative(half, x));
        let equivalence_z = boundaries(&t, |x| equivalence.cumulative(half, x));
        SequentialDesign {
            min,
            max,
            alpha,
            efficacy_spending: efficacy,
            equivalence_spending: equivalence,
            looks,
            efficacy_z,
            equivalence_z,
        }
    }

    /// True when the runner may stop after `n` rounds.
    pub fn is_look(&self, n: usize) -> bool {
        self.looks.binary_search(&n).is_ok()
    }

    /// The look data with `n` runs per variant has reached: the last planned
    /// look at or below `n` (the first look when `n` is below it).
    pub fn look_at(&self, n: usize) -> Look {
        let i = self.looks.partition_point(|&l| l <= n).max(1) - 1;
        Look {
            index: i + 1,
            count: self.looks.len(),
            n: self.looks[i],
            efficacy_level: normal_sf(self.efficacy_z[i]),
            equivalence_level: normal_sf(self.equivalence_z[i]),
        }
    }

    /// Probability of crossing the upper efficacy boundary at some look
    /// when the standardized effect beyond the band edge is `drift`
    /// (`E Z_k = drift · √t_k`; see [`crossing_probability`]).
    pub fn efficacy_power(&self, drift: f64) -> f64 {
        let t: Vec<f64> = self.looks.iter().map(|&n| n as f64 / self.max as f64).collect();
        crossing_probability(&t, &self.efficacy_z, drift).iter().sum()
    }
}

/// Rounds the runner looks at: every round from `min` to `max`, or `count`
/// evenly spaced ones (always including both ends).
fn planned_looks(min: usize, max: usize, count: usize) -> Vec<usize> {
    let k = max - min + 1;
    if k <= count {
        return (min..=max).collect();
    }
    let mut looks: Vec<usize> =
        (0..count).map(|j| min + ((max - min) as f64 * j as f64 / (count - 1) as f64).round() as usize).collect();
    looks.dedup();
    looks
}

/// Standard normal upper tail.
pub(crate) fn normal_sf(z: f64) -> f64 {
    if z == f64::INFINITY {
        return 0.0;
    }
    Normal::standard().sf(z)
}

/// Grid edge below which the density of a look statistic is dropped (mass < 1e-15).
const Z_FLOOR: f64 = 8.0;
/// Boundaries are capped here: beyond, nothing is left to spend.
const Z_CAP: f64 = 8.0;

/// The density of the look statistic on the continuation region, carried
/// from look to look: abscissae and Simpson-weighted density values.
struct Grid {
    z: Vec<f64>,
    mass: Vec<f64>,
}

impl Grid {
    /// Simpson grid on `[lo, hi]` with spacing at most `h`, values from `f`.
    fn simpson(lo: f64, hi: f64, h: f64, f: impl Fn(f64) -> f64) -> Grid {
        if hi <= lo {
            return Grid { z: Vec::new(), mass: Vec::new() };
        }
        let intervals = (((hi - lo) / h / 2.0).ceil() as usize).max(1) * 2;
        let step = (hi - lo) / intervals as f64;
        let mut z = Vec::with_capacity(intervals + 1);
        let mut mass = Vec::with_capacity(intervals + 1);
        for i in 0..=intervals {
            let x = lo + step * i as f64;
            let w = if i == 0 || i == intervals {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            z.push(x);
            mass.push(w * step / 3.0 * f(x));
        }
        Grid { z, mass }
    }
}

/// One transition between looks, `t0 → t1`, with drift `eta`:
/// `Z_1 | Z_0 = z ~ N(r z + mu, s²)`.
struct Step {
    r: f64,
    mu: f64,
    s: f64,
}

impl Step {
    fn new(t0: f64, t1: f64, eta: f64) -> Step {
        let dt = t1 - t0;
        Step { r: (t0 / t1).sqrt(), mu: eta * dt / t1.sqrt(), s: (dt / t1).sqrt() }
    }

    /// P(Z_1 ≥ c and no earlier crossing).
    fn cross(&self, g: &Grid, c: f64) -> f64 {
        g.z.iter().zip(&g.mass).map(|(&z, &w)| w * normal_sf((c - self.r * z - self.mu) / self.s)).sum()
    }

    /// Density of Z_1 on the continuation region at `x`.
    fn density(&self, g: &Grid, x: f64) -> f64 {
        let phi = Normal::standard();
        g.z.iter().zip(&g.mass).map(|(&z, &w)| w * phi.pdf((x - self.r * z - self.mu) / self.s)).sum::<f64>() / self.s
    }
}

/// Grid spacing for look `k`: fine enough for the density (0.05) and for
/// the kernel of the next transition (a quarter of its spread in `z_k`).
fn spacing(t: &[f64], k: usize) -> f64 {
    match t.get(k + 1) {
        Some(&next) => (((next - t[k]) / t[k]).sqrt() / 4.0).min(0.05),
        None => 0.05,
    }
}

/// One-sided upper boundaries for looks at information fractions `t`
/// (increasing, in (0, 1]) such that the first crossing at look `k` has
/// probability `spend(t_k) − spend(t_{k−1})` under no effect. Looks that get
/// nothing to spend have boundary [`Z_CAP`].
pub fn boundaries(t: &[f64], spend: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(t.len());
    let mut spent = 0.0;
    let mut grid: Option<Grid> = None;
    for (k, &tk) in t.iter().enumerate() {
        let target = (spend(tk) - spent).max(0.0);
        let c = match &grid {
            None => {
                if target <= normal_sf(Z_CAP) {
                    Z_CAP
                } else {
                    normal_quantile(1.0 - target).min(Z_CAP)
                }
            }
            Some(g) => {
                let step = Step::new(t[k - 1], tk, 0.0);
                if step.cross(g, Z_CAP) >= target {
                    Z_CAP
                } else {
                    // cross() decreases in c.
                    let (mut lo, mut hi) = (-Z_FLOOR, Z_CAP);
                    for _ in 0..60 {
                        let mid = 0.5 * (lo + hi);
                        if step.cross(g, mid) > target {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    0.5 * (lo + hi)
                }
            }
        };
        spent += match &grid {
            None => normal_sf(c),
            Some(g) => Step::new(t[k - 1], tk, 0.0).cross(g, c),
        };
        out.push(c);
        grid = Some(advance(grid.as_ref(), t, k, c, 0.0));
    }
    out
}

/// The grid of look `k` (continuation region below `c`), from look `k−1`'s.
fn advance(prev: Option<&Grid>, t: &[f64], k: usize, c: f64, eta: f64) -> Grid {
    let center = eta * t[k].sqrt();
    let lo = center - Z_FLOOR;
    let h = spacing(t, k);
    match prev {
        None => Grid::simpson(lo, c, h, |x| Normal::standard().pdf(x - center)),
        Some(g) => {
            let step = Step::new(t[k - 1], t[k], eta);
            Grid::simpson(lo, c, h, |x| step.density(g, x))
        }
    }
}

/// Probability of first crossing each upper boundary `c_k` at information
/// fractions `t` when `E Z_k = drift · √t_k`.
pub fn crossing_probability(t: &[f64], c: &[f64], drift: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(t.len());
    let mut grid: Option<Grid> = None;
    for (k, (&tk, &ck)) in t.iter().zip(c).enumerate() {
        let p = match &grid {
            None => normal_sf(ck - drift * tk.sqrt()),
            Some(g) => Step::new(t[k - 1], tk, drift).cross(g, ck),
        };
        out.push(p);
        grid = Some(advance(grid.as_ref(), t, k, ck, drift));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    // Reference: scripts/stats-reference.py gs-bounds (SciPy 1.17.1 /
    // NumPy 2.4.6: each boundary solved with scipy.optimize.brentq on
    // scipy.stats.multivariate_normal(cov = canonical √(t_j/t_k)).cdf):
    //   OBF 5 looks a=0.025: [4.8769 3.357 2.6803 2.2898 2.031]
    //   Pocock 4 looks a=0.025: [2.3683 2.3675 2.3582 2.35]
    //   OBF looks n=3..8 of 8, a=0.025: [3.4786 2.9795 2.6443 2.4012 2.2146 2.0658]
    //   linear t^1 looks n=3..8 of 8, a=0.025: [2.3505 2.4681 2.4406 2.4006 2.3595 2.3201]
    #[test]
    fn boundaries_match_scipy_multivariate_normal() {
        let cases: [(&[f64], Spending, &[f64]); 4] = [
            (&[0.2, 0.4, 0.6, 0.8, 1.0], Spending::OBrienFleming, &[4.8769, 3.357, 2.6803, 2.2898, 2.031]),
            (&[0.25, 0.5, 0.75, 1.0], Spending::Pocock, &[2.3683, 2.3675, 2.3582, 2.35]),
            (
                &[3.0 / 8.0, 0.5, 5.0 / 8.0, 0.75, 7.0 / 8.0, 1.0],
                Spending::OBrienFleming,
                &[3.4786, 2.9795, 2.6443, 2.4012, 2.2146, 2.0658],
            ),
            (
                &[3.0 / 8.0, 0.5, 5.0 / 8.0, 0.75, 7.0 / 8.0, 1.0],
                Spending::Power(1.0),
                &[2.3505, 2.4681, 2.4406, 2.4006, 2.3595, 2.3201],
            ),
        ];
        for (t, spending, want) in cases {
            let z = boundaries(t, |x| spending.cumulative(0.025, x));
            for (g, w) in z.iter().zip(want) {
                assert!(close(*g, *w, 1.5e-4), "{spending:?}: {z:?} vs {want:?}");
            }
            // The crossing probabilities add up to the level.
            let total: f64 = crossing_probability(t, &z, 0.0).iter().sum();
            assert!(close(total, 0.025, 1e-6), "{total}");
        }
    }

    #[test]
    fn single_look_is_the_fixed_test() {
        let z = boundaries(&[1.0], |x| Spending::OBrienFleming.cumulative(0.025, x));
        assert!(close(z[0], 1.959963984540054, 1e-9), "{z:?}");
        let d = SequentialDesign::new(5, 5, 0.05, EFFICACY_SPENDING, EQUIVALENCE_SPENDING, STANDARD_LOOKS);
        let look = d.look_at(5);
        assert_eq!((look.index, look.count, look.n), (1, 1, 5));
        assert!(close(look.efficacy_level, 0.025, 1e-9));
        assert!(close(look.equivalence_level, 0.025, 1e-9));
    }

    #[test]
    fn power_at_known_drift() {
        // One look: P(Z + 2.8016 ≥ 1.96) = Φ(0.8416) = 0.8.
        let p = crossing_probability(&[1.0], &[1.959963984540054], 1.959963984540054 + 0.8416212335729143);
        assert!(close(p[0], 0.8, 1e-9), "{p:?}");
        // OBF over 5 looks loses little power against the fixed test.
        let t = [0.2, 0.4, 0.6, 0.8, 1.0];
        let z = boundaries(&t, |x| Spending::OBrienFleming.cumulative(0.025, x));
        let power: f64 = crossing_probability(&t, &z, 2.8016).iter().sum();
        assert!(power > 0.78 && power < 0.8, "{power}");
    }

    #[test]
    fn looks_are_every_round_or_thinned() {
        let d = SequentialDesign::standard(3, 30, 0.05);
        assert_eq!(d.looks, (3..=30).collect::<Vec<_>>());
        assert!(d.is_look(3) && d.is_look(30) && !d.is_look(2) && !d.is_look(31));
        // Boundaries fall towards the end; the last is close to the fixed 1.96.
        assert!(d.efficacy_z.windows(2).all(|w| w[0] >= w[1] - 1e-9), "{:?}", d.efficacy_z);
        assert!(*d.efficacy_z.last().unwrap() > 1.96 && *d.efficacy_z.last().unwrap() < 2.2);
        let long = SequentialDesign::standard(2, 500, 0.05);
        assert_eq!(long.looks.len(), MAX_LOOKS);
        assert_eq!((long.looks[0], *long.looks.last().unwrap()), (2, 500));
        assert!(long.is_look(500) && !long.is_look(3));
        // Data between looks use the last look reached; beyond max, the last.
        assert_eq!(long.look_at(4).n, 2);
        assert_eq!(long.look_at(10_000).index, MAX_LOOKS);
        assert_eq!(long.look_at(0).index, 1);
    }

    #[test]
    fn degenerate_parameters_do_not_panic() {
        let d = SequentialDesign::new(0, 0, f64::NAN, EFFICACY_SPENDING, EQUIVALENCE_SPENDING, STANDARD_LOOKS);
        assert_eq!((d.min, d.max, d.alpha), (1, 1, 0.05));
        let d = SequentialDesign::new(10, 3, 0.05, EFFICACY_SPENDING, EQUIVALENCE_SPENDING, STANDARD_LOOKS);
        assert_eq!(d.looks, vec![10]);
        assert_eq!(Spending::OBrienFleming.cumulative(0.025, 0.0), 0.0);
        assert_eq!(Spending::Pocock.cumulative(0.025, f64::NAN), 0.0);
    }
}
