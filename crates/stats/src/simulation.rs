//! Monte-Carlo error rates of the change-point detector and the CI gate, on
//! synthetic series whose truth is known. `fslab simulate-changepoints` runs
//! these and prints the tables kept in BENCHMARKS.md.
//!
//! Noise models:
//! * change points: i.i.d. noise of sd 1 around a level (Gaussian, or
//!   Student t with 3 df scaled to sd 1 for heavy tails) and one step of
//!   `k` sd; the detector is scale-free, so only `k` matters.
//! * gate: each experiment is `runs` runs of `μ·exp(b + w)`, with a
//!   per-experiment offset `b ~ N(0, between)` (boot-to-boot drift) and
//!   per-run noise `w ~ N(0, cv)`; a lower-is-better time metric; the newest
//!   experiment is multiplied by `1 + step`.
//! * bisection oracle: runs of `μ·exp(w)`, `w ~ N(0, 2%)`, the bad end `k`
//!   noise sd above the good one, the candidate at good, at bad or halfway.
//! * whole bisections: `n` commits on a line after the good end, the first
//!   bad one uniform among them, each commit's runs the good or the bad
//!   level as above; each step measures 1 or `k` commits chosen by
//!   [`crate::multisect::pick`] and asks the oracle as `bisect-commits`
//!   does (a round more of the commits still unknown and of both ends,
//!   undecided commits skipped).

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;

use super::changepoint::{detect, ChangePointConfig};
use super::gate::{check_experiment, check_history, GateConfig, GateOutcome, MetricHistory, MetricRuns};
use super::history::HistoryPoint;
use super::multisect;
use super::oracle::{classify, Side};

/// Normal and Student-t draws from ChaCha8. Box–Muller by hand: the crate
/// has `rand_core` but not `rand_distr`, and two draws need no dependency.
struct Draws(ChaCha8Rng);

impl Draws {
    fn new(seed: u64) -> Draws {
        Draws(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in (0, 1].
    fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Student t with 3 df, scaled to sd 1 (its variance is 3).
    fn t3(&mut self) -> f64 {
        let z = self.normal();
        let chi2: f64 = (0..3).map(|_| self.normal().powi(2)).sum();
        z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
    }

    fn noise(&mut self, noise: Noise) -> f64 {
        match noise {
            Noise::Gaussian => self.normal(),
            Noise::HeavyTailed => self.t3(),
        }
    }
}

/// Noise distribution of a synthetic series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Noise {
    Gaussian,
    /// Student t, 3 degrees of freedom, scaled to sd 1.
    HeavyTailed,
}

/// Where the step of a change-point scenario is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepAt {
    /// No step: every change point is false.
    Nowhere,
    /// Uniformly between a quarter and three quarters of the series.
    Middle,
    /// This many points before the end.
    FromEnd(usize),
}

/// One row of the change-point table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangePointAccuracy {
    pub noise: Noise,
    /// Step size in noise sd (0 for stationary series).
    pub step_sd: f64,
    pub step_at: StepAt,
    /// Points per series.
    pub length: usize,
    pub series: usize,
    /// Series with a change point within ±2 points of the step, %.
    pub found_pct: f64,
    /// Series with a change point exactly at the step, %.
    pub exact_pct: f64,
    /// Mean |position error| of the change point nearest the step, over
    /// series that have one within ±10.
    pub mean_abs_error: f64,
    /// Change points farther than 10 points from the step (all of them on
    /// stationary series), per 1,000 points.
    pub false_per_1000: f64,
}

/// The scenarios of the change-point table: stationary series, steps of
/// 2, 3 and 5 sd in the middle of a 100-point series, a 3 sd step 10 and 5
/// points before the end, and heavy-tailed noise.
pub fn changepoint_scenarios() -> Vec<(Noise, f64, StepAt, usize)> {
    use Noise::*;
    vec![
        (Gaussian, 0.0, StepAt::Nowhere, 200),
        (HeavyTailed, 0.0, StepAt::Nowhere, 200),
        (Gaussian, 2.0, StepAt::Middle, 100),
        (Gaussian, 3.0, StepAt::Middle, 100),
        (Gaussian, 5.0, StepAt::Middle, 100),
        (Gaussian, 3.0, StepAt::FromEnd(10), 100),
        (Gaussian, 3.0, StepAt::FromEnd(5), 100),
        (HeavyTailed, 3.0, StepAt::Middle, 100),
    ]
}

/// Run one change-point scenario on `series` synthetic series.
pub fn changepoint_accuracy(
    cfg: &ChangePointConfig,
    (noise, step_sd, step_at, length): (Noise, f64, StepAt, usize),
    series: usize,
    seed: u64,
) -> ChangePointAccuracy {
    let mut draws = Draws::new(seed);
    let (mut found, mut exact, mut near, mut abs_err, mut false_cps) = (0usize, 0usize, 0usize, 0usize, 0usize);
    for _ in 0..series {
        let step = match step_at {
            StepAt::Nowhere => None,
            StepAt::Middle => Some(length / 4 + draws.below(length / 2 + 1)),
            StepAt::FromEnd(k) => Some(length - k),
        };
        let xs: Vec<f64> = (0..length)
            .map(|i| draws.noise(noise) + if step.is_some_and(|s| i >= s) { step_sd } else { 0.0 })
            .collect();
        let cps = detect(&xs, cfg).change_points;
        let dist = |c: usize| step.map_or(usize::MAX, |s| c.abs_diff(s));
        false_cps += cps.iter().filter(|c| dist(c.index) > 10).count();
        if let Some(best) = cps.iter().map(|c| dist(c.index)).min() {
            if best <= 10 {
                near += 1;
                abs_err += best;
            }
            found += usize::from(best <= 2);
            exact += usize::from(best == 0);
        }
    }
    let pct = |k: usize| 100.0 * k as f64 / series as f64;
    ChangePointAccuracy {
        noise,
        step_sd,
        step_at,
        length,
        series,
        found_pct: if step_at == StepAt::Nowhere { f64::NAN } else { pct(found) },
        exact_pct: if step_at == StepAt::Nowhere { f64::NAN } else { pct(exact) },
        mean_abs_error: if near == 0 { f64::NAN } else { abs_err as f64 / near as f64 },
        false_per_1000: 1000.0 * false_cps as f64 / (series * length) as f64,
    }
}

/// What the gate is checked against in a [`GateRates`] row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateAgainst {
    /// The last `history` experiments.
    History,
    /// One earlier experiment.
    Experiment,
}

/// One row of the gate table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateRates {
    pub against: GateAgainst,
    /// Per-run coefficient of variation.
    pub cv: f64,
    /// Sd of the per-experiment offset, as a fraction of the mean.
    pub between: f64,
    pub runs: usize,
    /// Baseline experiments (1 against an experiment).
    pub history: usize,
    /// Checks per column.
    pub checks: usize,
    /// Regression verdicts on an unchanged newest experiment, per 1,000 checks.
    pub false_alarms_per_1000: f64,
    /// Improvement verdicts on an unchanged newest experiment, per 1,000.
    pub false_improvements_per_1000: f64,
    /// Inconclusive verdicts on an unchanged newest experiment, %.
    pub inconclusive_pct: f64,
    /// Regression verdicts for a 5% slowdown, %.
    pub detected_5_pct: f64,
    /// Regression verdicts for a 10% slowdown, %.
    pub detected_10_pct: f64,
}

/// The scenarios of the gate table: `(against, cv, between, runs, history)`.
pub fn gate_scenarios() -> Vec<(GateAgainst, f64, f64, usize, usize)> {
    let mut v = Vec::new();
    for cv in [0.01, 0.02, 0.05] {
        v.push((GateAgainst::History, cv, cv / 2.0, 5, 64));
    }
    v.push((GateAgainst::History, 0.02, 0.01, 5, 10));
    v.push((GateAgainst::History, 0.02, 0.0, 5, 64));
    for cv in [0.01, 0.02, 0.05] {
        v.push((GateAgainst::Experiment, cv, 0.0, 5, 1));
    }
    v.push((GateAgainst::Experiment, 0.02, 0.01, 5, 1));
    v
}

/// Run one gate scenario: `checks` gate checks each on unchanged, +5% and
/// +10% newest experiments.
pub fn gate_error_rates(
    cfg: &GateConfig,
    (against, cv, between, runs, history): (GateAgainst, f64, f64, usize, usize),
    checks: usize,
    seed: u64,
) -> GateRates {
    let mut draws = Draws::new(seed);
    let experiment = |draws: &mut Draws, factor: f64| -> Vec<f64> {
        let b = between * draws.normal();
        (0..runs).map(|_| 100.0 * factor * (b + cv * draws.normal()).exp()).collect()
    };
    let outcomes = |draws: &mut Draws, step: f64| -> Vec<GateOutcome> {
        (0..checks)
            .map(|_| {
                let newest = experiment(draws, 1.0 + step);
                let report = match against {
                    GateAgainst::History => {
                        let points: Vec<HistoryPoint> =
                            (0..history).map(|_| HistoryPoint::from_values(&experiment(draws, 1.0), false)).collect();
                        let m = MetricHistory {
                            name: "t",
                            higher_is_better: false,
                            decisive: true,
                            history: &points,
                            newest: HistoryPoint::from_values(&newest, false),
                        };
                        check_history(&[m], cfg)
                    }
                    GateAgainst::Experiment => {
                        let baseline = experiment(draws, 1.0);
                        let m = MetricRuns {
                            name: "t",
                            higher_is_better: false,
                            decisive: true,
                            baseline: &baseline,
                            newest: &newest,
                        };
                        check_experiment(&[m], cfg)
                    }
                };
                report.outcome()
            })
            .collect()
    };
    let same = outcomes(&mut draws, 0.0);
    let five = outcomes(&mut draws, 0.05);
    let ten = outcomes(&mut draws, 0.10);
    let count = |v: &[GateOutcome], o| v.iter().filter(|&&x| x == o).count() as f64;
    let per_1000 = |v: &[GateOutcome], o| 1000.0 * count(v, o) / checks as f64;
    let pct = |v: &[GateOutcome], o| 100.0 * count(v, o) / checks as f64;
    GateRates {
        against,
        cv,
        between,
        runs,
        history,
        checks,
        false_alarms_per_1000: per_1000(&same, GateOutcome::Regression),
        false_improvements_per_1000: per_1000(&same, GateOutcome::Improvement),
        inconclusive_pct: pct(&same, GateOutcome::Inconclusive),
        detected_5_pct: pct(&five, GateOutcome::Regression),
        detected_10_pct: pct(&ten, GateOutcome::Regression),
    }
}

/// Where the candidate of an oracle scenario really is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OracleTruth {
    Good,
    Bad,
    /// Halfway between the ends: no right answer; it should stay unknown.
    Halfway,
}

/// One row of the oracle table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OracleRates {
    /// Bad end above good, in run noise sd.
    pub step_sd: f64,
    pub truth: OracleTruth,
    /// Runs per side before the first question, and the most after rounds.
    pub start_runs: usize,
    pub max_runs: usize,
    /// Error level per step; each question uses `alpha / questions`.
    pub alpha: f64,
    pub steps: usize,
    /// Steps answered good / bad, %.
    pub good_pct: f64,
    pub bad_pct: f64,
    /// Steps still unknown at `max_runs`, %.
    pub undecided_pct: f64,
    /// Mean runs per side when the step ended.
    pub mean_runs: f64,
}

/// The scenarios of the oracle table: `(step_sd, truth)`.
pub fn oracle_scenarios() -> Vec<(f64, OracleTruth)> {
    let mut v = Vec::new();
    for step in [2.0, 3.0, 5.0] {
        v.push((step, OracleTruth::Good));
        v.push((step, OracleTruth::Bad));
    }
    v.push((3.0, OracleTruth::Halfway));
    v
}

/// One oracle scenario: each step starts with `start_runs` runs of good,
/// bad and the candidate and adds one run to each until the oracle decides
/// or `max_runs` is reached, as `bisect-commits` would.
pub fn oracle_rates(
    (step_sd, truth): (f64, OracleTruth),
    (start_runs, max_runs): (usize, usize),
    alpha: f64,
    steps: usize,
    seed: u64,
) -> OracleRates {
    const CV: f64 = 0.02;
    let mut draws = Draws::new(seed);
    let questions = (max_runs.max(start_runs) - start_runs + 1) as f64;
    let level = |shift: f64, d: &mut Draws| 100.0 * (shift * CV + CV * d.normal()).exp();
    let at = match truth {
        OracleTruth::Good => 0.0,
        OracleTruth::Bad => step_sd,
        OracleTruth::Halfway => step_sd / 2.0,
    };
    let (mut good, mut bad, mut runs_total) = (0usize, 0usize, 0usize);
    for _ in 0..steps {
        let (mut g, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            let target = if c.is_empty() { start_runs.max(2) } else { c.len() + 1 };
            while c.len() < target {
                g.push(level(0.0, &mut draws));
                b.push(level(step_sd, &mut draws));
                c.push(level(at, &mut draws));
            }
            let side = classify(&g, &b, &c, alpha / questions).side;
            if side != Side::Unknown || c.len() >= max_runs {
                good += usize::from(side == Side::Good);
                bad += usize::from(side == Side::Bad);
                runs_total += c.len();
                break;
            }
        }
    }
    let pct = |k: usize| 100.0 * k as f64 / steps as f64;
    OracleRates {
        step_sd,
        truth,
        start_runs,
        max_runs,
        alpha,
        steps,
        good_pct: pct(good),
        bad_pct: pct(bad),
        undecided_pct: pct(steps - good - bad),
        mean_runs: runs_total as f64 / steps as f64,
    }
}

/// One row of the bisection table: many simulated bisections of one shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BisectionRates {
    /// Commits after the good end, the last being the bad end.
    pub commits: usize,
    /// Commits measured per step.
    pub per_step: usize,
    /// Bad end above good, in run noise sd.
    pub step_sd: f64,
    pub start_runs: usize,
    pub max_runs: usize,
    /// Error level of one step's answer (each question: `alpha / questions`).
    pub alpha: f64,
    pub bisections: usize,
    /// Steps to the answer (each measures up to `per_step` commits at once).
    pub mean_steps: f64,
    pub max_steps: usize,
    /// Commits measured (builds), per bisection.
    pub mean_commits: f64,
    /// Runs of candidates and ends, per bisection.
    pub mean_runs: f64,
    /// The first bad commit named right, %.
    pub right_pct: f64,
    /// A wrong commit named, %.
    pub wrong_pct: f64,
    /// Only a range (skipped, undecided commits), %.
    pub range_pct: f64,
}

/// The scenarios of the bisection table: `(commits, step_sd, per_step)`.
pub fn bisection_scenarios() -> Vec<(usize, f64, usize)> {
    let mut v = Vec::new();
    for commits in [16, 64, 1024] {
        for per_step in [1, 2, 3, 7] {
            v.push((commits, 5.0, per_step));
        }
    }
    for per_step in [1, 3] {
        v.push((64, 3.0, per_step));
    }
    v
}

/// Simulate `bisections` bisections of one scenario.
pub fn bisection_rates(
    (commits, step_sd, per_step): (usize, f64, usize),
    (start_runs, max_runs): (usize, usize),
    alpha: f64,
    bisections: usize,
    seed: u64,
) -> BisectionRates {
    const CV: f64 = 0.02;
    let mut draws = Draws::new(seed);
    let level = |bad: bool, d: &mut Draws| 100.0 * ((if bad { step_sd } else { 0.0 }) * CV + CV * d.normal()).exp();
    let questions = (max_runs.max(start_runs) - start_runs + 1) as f64;
    let start = start_runs.max(2);
    let (mut steps_total, mut max_steps, mut commits_total, mut runs_total) = (0usize, 0usize, 0usize, 0usize);
    let (mut right, mut wrong) = (0usize, 0usize);
    for _ in 0..bisections {
        let first_bad = 1 + draws.below(commits);
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for _ in 0..start {
            good.push(level(false, &mut draws));
            bad.push(level(true, &mut draws));
        }
        runs_total += 2 * start;
        let (mut low, mut high) = (1usize, commits);
        let mut skipped: Vec<usize> = Vec::new();
        let mut steps = 0;
        while low < high {
            let n = high - low + 1;
            let pickable: Vec<(usize, usize)> =
                (low..high).filter(|p| !skipped.contains(p)).map(|p| (p, p - low + 1)).collect();
            let picks = multisect::pick(&pickable, n, per_step);
            if picks.is_empty() {
                break;
            }
            steps += 1;
            commits_total += picks.len();
            let mut values: Vec<Vec<f64>> =
                picks.iter().map(|&p| (0..start).map(|_| level(p >= first_bad, &mut draws)).collect()).collect();
            runs_total += start * picks.len();
            let mut sides = vec![Side::Unknown; picks.len()];
            loop {
                for (i, v) in values.iter().enumerate() {
                    if sides[i] == Side::Unknown {
                        sides[i] = classify(&good, &bad, v, alpha / questions).side;
                    }
                }
                let open: Vec<usize> = (0..picks.len()).filter(|&i| sides[i] == Side::Unknown).collect();
                if open.is_empty() || open.iter().all(|&i| values[i].len() >= max_runs) {
                    break;
                }
                // One more round of every open commit and of both ends.
                for &i in &open {
                    values[i].push(level(picks[i] >= first_bad, &mut draws));
                }
                good.push(level(false, &mut draws));
                bad.push(level(true, &mut draws));
                runs_total += open.len() + 2;
            }
            let mut good_at = Vec::new();
            let mut bad_at = Vec::new();
            for (i, &p) in picks.iter().enumerate() {
                match sides[i] {
                    Side::Good => good_at.push(p),
                    Side::Bad => bad_at.push(p),
                    Side::Unknown => skipped.push(p),
                }
            }
            (low, high) = multisect::narrow_linear(low, high, &good_at, &bad_at);
        }
        steps_total += steps;
        max_steps = max_steps.max(steps);
        if low == high {
            if low == first_bad {
                right += 1;
            } else {
                wrong += 1;
            }
        }
    }
    let pct = |k: usize| 100.0 * k as f64 / bisections as f64;
    let per = |k: usize| k as f64 / bisections as f64;
    BisectionRates {
        commits,
        per_step,
        step_sd,
        start_runs,
        max_runs,
        alpha,
        bisections,
        mean_steps: per(steps_total),
        max_steps,
        mean_commits: per(commits_total),
        mean_runs: per(runs_total),
        right_pct: pct(right),
        wrong_pct: pct(wrong),
        range_pct: pct(bisections - right - wrong),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Small runs of the simulations (the full ones are `fslab
    // simulate-changepoints`, recorded in BENCHMARKS.md): they must at least
    // see big steps and rarely cry wolf.
    #[test]
    fn big_steps_are_found_and_stationary_series_stay_quiet() {
        let cfg = ChangePointConfig::default();
        let five = changepoint_accuracy(&cfg, (Noise::Gaussian, 5.0, StepAt::Middle, 100), 60, 1);
        assert!(five.found_pct >= 95.0, "{five:?}");
        assert!(five.mean_abs_error < 0.5, "{five:?}");
        let flat = changepoint_accuracy(&cfg, (Noise::Gaussian, 0.0, StepAt::Nowhere, 200), 30, 2);
        assert!(flat.false_per_1000 < 5.0, "{flat:?}");
        assert!(flat.found_pct.is_nan());
        // Same seed, same numbers.
        assert_eq!(changepoint_accuracy(&cfg, (Noise::HeavyTailed, 3.0, StepAt::FromEnd(5), 60), 20, 3), {
            changepoint_accuracy(&cfg, (Noise::HeavyTailed, 3.0, StepAt::FromEnd(5), 60), 20, 3)
        });
    }

    #[test]
    fn gate_sees_a_ten_percent_slowdown_at_one_percent_noise() {
        let cfg = GateConfig::default();
        let h = gate_error_rates(&cfg, (GateAgainst::History, 0.01, 0.005, 5, 20), 40, 4);
        assert!(h.detected_10_pct >= 95.0 && h.false_alarms_per_1000 <= 25.0, "{h:?}");
        let e = gate_error_rates(&cfg, (GateAgainst::Experiment, 0.01, 0.0, 5, 1), 40, 5);
        assert!(e.detected_10_pct >= 95.0 && e.false_alarms_per_1000 <= 25.0, "{e:?}");
    }

    #[test]
    fn oracle_finds_the_side_of_a_clear_step() {
        let r = oracle_rates((5.0, OracleTruth::Bad), (3, 10), 0.01, 100, 6);
        assert!(r.bad_pct >= 95.0 && r.good_pct == 0.0, "{r:?}");
        assert!(r.mean_runs >= 3.0 && r.mean_runs <= 10.0);
        let h = oracle_rates((3.0, OracleTruth::Halfway), (3, 6), 0.01, 100, 7);
        assert!(h.undecided_pct >= 80.0 && (h.mean_runs - 6.0).abs() < 0.5, "{h:?}");
    }

    #[test]
    fn multisection_takes_fewer_steps_for_the_same_answer() {
        let one = bisection_rates((64, 5.0, 1), (3, 10), 0.01, 200, 8);
        let three = bisection_rates((64, 5.0, 3), (3, 10), 0.01, 200, 8);
        assert!(one.right_pct >= 95.0 && three.right_pct >= 95.0, "{one:?} {three:?}");
        // log2 64 = 6 steps against log4 64 = 3.
        assert!((5.5..=6.5).contains(&one.mean_steps), "{one:?}");
        assert!(three.mean_steps <= 3.5 && three.max_steps <= 4, "{three:?}");
        assert!(three.mean_commits > one.mean_commits, "more commits measured for fewer steps: {three:?}");
    }

    #[test]
    fn draws_have_unit_variance() {
        let mut d = Draws::new(9);
        for noise in [Noise::Gaussian, Noise::HeavyTailed] {
            let xs: Vec<f64> = (0..20_000).map(|_| d.noise(noise)).collect();
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
            assert!(m.abs() < 0.05 && (v - 1.0).abs() < 0.15, "{noise:?}: mean {m} var {v}");
        }
    }
}
