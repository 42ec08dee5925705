//! Monte-Carlo simulation of the verdict rules: the evidence behind every
//! error rate the module docs of [`crate`] claim (`fslab simulate`).
//!
//! An experiment draws log-normal run values (σ² = ln(1 + CV²)) for a
//! baseline and a variant whose true ratio is `1 + change` (a
//! lower-is-better metric, so `change > 0` is a regression), optionally
//! with a fraction of runs slowed by a factor (outliers) or a drift over
//! run order. Each adaptive experiment looks after every planned round and
//! stops at the first decisive verdict, exactly as the runner does. Every
//! table of issue 13 is computed twice: with the rule before the issue
//! ([`VerdictRule::Legacy`]: Welch on logs, unadjusted 95% CI at every look) and
//! with the rule `stats::compare` implements now ([`VerdictRule::Current`], run
//! through the same code as `compare`).
//!
//! Seeds are fixed per table and cell, so every run of `fslab simulate`
//! prints the same numbers for the same experiment count; threads only
//! split the work.

use std::fmt::Write as _;
use std::time::Instant;

use rand::distr::Distribution;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::compare::{compare, pooled_sd, verdicts, verdicts_at, CompareConfig, Stopping, Verdict};
use super::drift::trend;
use super::multiple::benjamini_hochberg;
use super::outliers::{modified_z_scores, outlier_indices};
use super::sequential::{Look, SequentialDesign, Spending, EFFICACY_SPENDING, EQUIVALENCE_SPENDING};
use super::summary::mean;
use super::welch::{normal_quantile, welch_t_test};

/// Equivalence band and level of every table (the θ = 2%, α = 0.05).
pub const THETA: f64 = 0.02;
pub const ALPHA: f64 = 0.05;

/// How big and how parallel a simulation is.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// Experiments per table cell (the tables use 20,000).
    pub experiments: usize,
    /// Worker threads.
    pub threads: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { experiments: 20_000, threads: 2 }
    }
}

/// What the runs of one simulated experiment look like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scenario {
    /// Coefficient of variation of a run.
    pub cv: f64,
    /// True relative change of the variant (0.02 = 2% slower).
    pub change: f64,
    /// Fraction of runs (either side) slowed by `outlier_factor`.
    pub outlier_rate: f64,
    pub outlier_factor: f64,
    /// Multiplicative drift per round, both sides (interleaved runs).
    pub drift_per_round: f64,
}

impl Scenario {
    pub fn new(cv: f64, change: f64) -> Scenario {
        Scenario { cv, change, outlier_rate: 0.0, outlier_factor: 1.0, drift_per_round: 0.0 }
    }

    fn with_outliers(self, rate: f64, factor: f64) -> Scenario {
        Scenario { outlier_rate: rate, outlier_factor: factor, ..self }
    }

    /// `n` baseline and `n` variant runs.
    fn draw(&self, n: usize, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<f64>) {
        let sigma = self.cv.mul_add(self.cv, 1.0).ln().sqrt();
        let normal = Normal::new(0.0, sigma.max(f64::MIN_POSITIVE)).expect("valid sigma");
        let side = |shift: f64, rng: &mut ChaCha8Rng| -> Vec<f64> {
            (0..n)
                .map(|round| {
                    let mut x = (shift + normal.sample(rng)).exp() * (self.drift_per_round * round as f64).exp();
                    if self.outlier_rate > 0.0 && uniform(rng) < self.outlier_rate {
                        x *= self.outlier_factor;
                    }
                    x
                })
                .collect()
        };
        let b = side(0.0, rng);
        let v = side(self.change.ln_1p(), rng);
        (b, v)
    }
}

fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    rand::distr::StandardUniform.sample(rng)
}

/// A verdict rule under test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VerdictRule {
    /// Before issue 13: Welch t on ln(values), `p < α` and the unadjusted
    /// 95% CI against the band, re-applied at every look.
    Legacy,
    /// What [`crate::compare`] implements.
    Current,
    /// A candidate group-sequential design: spending of the efficacy and
    /// equivalence boundaries, and whether the rank interval is used
    /// (else Welch at the nominal levels).
    Candidate { efficacy: Spending, equivalence: Spending, rank: bool, looks: usize },
    /// Anytime-valid confidence sequence: the scale-invariant t-test Bayes
    /// factor (normal prior on the standardized effect, variance 1) on the
    /// per-round log differences, an e-process under each band edge
    /// (Pérez-Ortiz et al. 2024), rejected at `1/α`-thresholds by Ville's
    /// inequality. Needs no planned looks.
    ConfidenceSequence,
}

impl VerdictRule {
    pub fn label(&self) -> String {
        match self {
            VerdictRule::Legacy => "before (Welch 95% every look)".to_string(),
            VerdictRule::Current => "after (fslab's rule)".to_string(),
            VerdictRule::Candidate { efficacy, equivalence, rank, looks } => format!(
                "{} / {} {}{}",
                efficacy.label(),
                equivalence.label(),
                if *rank { "rank" } else { "Welch" },
                if *looks < super::sequential::MAX_LOOKS { format!(", ≤ {looks} looks") } else { String::new() }
            ),
            VerdictRule::ConfidenceSequence => "confidence sequence (t-mixture)".to_string(),
        }
    }

    /// Rounds at which an adaptive experiment may stop.
    fn looks(&self, min: usize, max: usize) -> Vec<usize> {
        match self {
            VerdictRule::Legacy | VerdictRule::ConfidenceSequence => (min..=max).collect(),
            VerdictRule::Current => SequentialDesign::standard(min, max, ALPHA).looks.clone(),
            VerdictRule::Candidate { efficacy, equivalence, looks, .. } => {
                SequentialDesign::cached(min, max, ALPHA, *efficacy, *equivalence, *looks).looks.clone()
            }
        }
    }

    /// The verdict on the first `n` runs of each side of a `{min, max}` experiment.
    pub fn verdict(&self, b: &[f64], v: &[f64], min: usize, max: usize) -> Verdict {
        let cfg =
            CompareConfig { alpha: ALPHA, theta: THETA, stopping: Stopping::adaptive(min, max), ..Default::default() };
        match self {
            VerdictRule::Legacy => legacy_verdicts(&[(b, v)])[0],
            VerdictRule::Current => verdicts(&[(b, v, false)], &cfg)[0],
            VerdictRule::Candidate { efficacy, equivalence, rank, looks } => {
                let design = SequentialDesign::cached(min, max, ALPHA, *efficacy, *equivalence, *looks);
                let look = |n: usize| if max > min { design.look_at(n) } else { Look::fixed(n, ALPHA) };
                verdicts_at(&[(b, v, false)], &cfg, &look, *rank)[0]
            }
            VerdictRule::ConfidenceSequence => confidence_sequence_verdict(b, v),
        }
    }
}

/// The verdicts of the rule before issue 13, for a family of
/// lower-is-better metrics: Welch on logs, BH across the family, then
/// `p_adj < α` and the unadjusted `1 − α` CI beyond the band for R/I, the
/// CI inside the band for no-change. (Reproduced from the old
/// `stats::compare`; the before tables match the numbers.)
pub fn legacy_verdicts(items: &[(&[f64], &[f64])]) -> Vec<Verdict> {
    let tests: Vec<Option<(f64, f64, f64, f64)>> = items
        .iter()
        .map(|(b, v)| {
            let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
            let lv: Vec<f64> = v.iter().map(|x| x.ln()).collect();
            welch_t_test(&lb, &lv).map(|w| (w.diff, w.se, w.df, w.p_value))
        })
        .collect();
    let p: Vec<f64> = tests.iter().map(|t| t.map_or(1.0, |t| t.3)).collect();
    let adjusted = benjamini_hochberg(&p);
    let m = THETA.ln_1p();
    tests
        .iter()
        .zip(adjusted)
        .map(|(t, pa)| {
            let Some((d, se, df, _)) = *t else { return Verdict::Inconclusive };
            // lo > m ⇔ (d − m)/se > t_{1−α/2}: compared through the t
            // distribution's tail, which is much faster than its quantile.
            let beyond = |x: f64| student_sf(x / se, df) < ALPHA / 2.0;
            let significant = pa < ALPHA;
            if significant && beyond(d - m) {
                Verdict::Regressed
            } else if significant && beyond(-d - m) {
                Verdict::Improved
            } else if beyond(d + m) && beyond(m - d) {
                Verdict::NoChange
            } else {
                Verdict::Inconclusive
            }
        })
        .collect()
}

fn student_sf(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return 1.0;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => d.sf(t),
        Err(_) => 1.0,
    }
}

/// The runs-needed estimate before issue 13 (plug-in effect, δ floored at m/4).
fn legacy_runs_needed(b: &[f64], v: &[f64]) -> Option<usize> {
    let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
    let lv: Vec<f64> = v.iter().map(|x| x.ln()).collect();
    let sd = pooled_sd(&lb, &lv)?;
    let effect = mean(&lv) - mean(&lb);
    let m = THETA.ln_1p();
    let delta = (effect.abs() - m).abs().max(m / 4.0);
    let z = normal_quantile(1.0 - ALPHA / 2.0) + normal_quantile(0.8);
    let n = (2.0 * (z * sd / delta).powi(2)).ceil() as usize;
    Some(n.clamp(b.len().min(v.len()) + 1, 10_000))
}

/// The anytime-valid rule of [`VerdictRule::ConfidenceSequence`].
fn confidence_sequence_verdict(b: &[f64], v: &[f64]) -> Verdict {
    let d: Vec<f64> = b.iter().zip(v).map(|(x, y)| y.ln() - x.ln()).collect();
    let n = d.len();
    if n < 2 {
        return Verdict::Inconclusive;
    }
    let nf = n as f64;
    let mean_d = mean(&d);
    let s = (d.iter().map(|x| (x - mean_d).powi(2)).sum::<f64>() / (nf - 1.0)).sqrt();
    let nu = nf - 1.0;
    // Bayes factor against μ = mu0 with δ = (μ − mu0)/σ ~ N(0, 1).
    let bf = |mu0: f64| {
        let t = (mean_d - mu0) / (s / nf.sqrt());
        let g = 1.0;
        ((1.0 + t * t / nu) / (1.0 + t * t / (nu * (1.0 + nf * g)))).powf((nu + 1.0) / 2.0) / (1.0 + nf * g).sqrt()
    };
    // Each edge is rejected at 2/α: the same 2.5% per one-sided claim as
    // the group-sequential rule, by Ville's inequality.
    let reject = |mu0: f64| bf(mu0) >= 2.0 / ALPHA;
    let m = THETA.ln_1p();
    if mean_d > m && reject(m) {
        Verdict::Regressed
    } else if mean_d < -m && reject(-m) {
        Verdict::Improved
    } else if mean_d.abs() < m && reject(m) && reject(-m) {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    }
}

/// Verdict counts of many experiments of one cell.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SimTally {
    pub experiments: usize,
    pub regressed: usize,
    pub improved: usize,
    pub no_change: usize,
    pub inconclusive: usize,
    /// Sum over experiments of the runs per variant at the stop.
    pub runs: usize,
}

impl SimTally {
    fn add(&mut self, v: Verdict, runs: usize) {
        self.experiments += 1;
        self.runs += runs;
        match v {
            Verdict::Regressed => self.regressed += 1,
            Verdict::Improved => self.improved += 1,
            Verdict::NoChange => self.no_change += 1,
            Verdict::Inconclusive => self.inconclusive += 1,
        }
    }

    fn merge(&mut self, o: &SimTally) {
        self.experiments += o.experiments;
        self.regressed += o.regressed;
        self.improved += o.improved;
        self.no_change += o.no_change;
        self.inconclusive += o.inconclusive;
        self.runs += o.runs;
    }

    fn frac(&self, k: usize) -> f64 {
        k as f64 / self.experiments.max(1) as f64
    }

    pub fn regressed_rate(&self) -> f64 {
        self.frac(self.regressed)
    }
    pub fn false_change_rate(&self) -> f64 {
        self.frac(self.regressed + self.improved)
    }
    pub fn no_change_rate(&self) -> f64 {
        self.frac(self.no_change)
    }
    pub fn mean_runs(&self) -> f64 {
        self.runs as f64 / self.experiments.max(1) as f64
    }
}

/// A 64-bit mix of a cell seed and an experiment index (SplitMix64), so
/// experiments are independent of how threads split them.
fn seed_of(cell: u64, i: usize) -> u64 {
    let mut z = cell ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Stable seed of a cell from its description.
fn cell_seed(parts: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(parts.as_bytes());
    u64::from_le_bytes(h[..8].try_into().expect("8 bytes"))
}

/// Run `f(rng)` for every experiment of a cell on `sim.threads` threads and
/// merge the per-thread results.
fn parallel<T: Send + Default>(
    sim: &SimConfig,
    seed: u64,
    f: impl Fn(&mut ChaCha8Rng) -> T + Sync,
    merge: impl Fn(&mut T, T) + Sync,
) -> T {
    let threads = sim.threads.clamp(1, 64);
    let results: Vec<T> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                let merge = &merge;
                scope.spawn(move || {
                    let mut acc = T::default();
                    for i in (t..sim.experiments).step_by(threads) {
                        let mut rng = ChaCha8Rng::seed_from_u64(seed_of(seed, i));
                        merge(&mut acc, f(&mut rng));
                    }
                    acc
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("simulation thread")).collect()
    });
    let mut total = T::default();
    for r in results {
        merge(&mut total, r);
    }
    total
}

/// Simulate one cell: `{min, max}` repetitions (fixed when equal).
///
/// The runs depend only on `max` and the scenario, so rules and `min`
/// values are compared on the same simulated experiments (paired).
pub fn run_cell(rule: VerdictRule, min: usize, max: usize, scenario: Scenario, sim: &SimConfig) -> SimTally {
    let seed = cell_seed(&format!("{max}-{scenario:?}"));
    let looks = if max > min { rule.looks(min, max) } else { vec![max] };
    parallel(
        sim,
        seed,
        |rng| {
            let (b, v) = scenario.draw(max, rng);
            let mut t = SimTally::default();
            for &n in &looks {
                let verdict = rule.verdict(&b[..n], &v[..n], min, max);
                if verdict != Verdict::Inconclusive || n == max {
                    t.add(verdict, n);
                    break;
                }
            }
            t
        },
        |acc, t| acc.merge(&t),
    )
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn reps(min: usize, max: usize) -> String {
    if min == max {
        format!("fixed {max}")
    } else {
        format!("`{{min={min},max={max}}}`")
    }
}

/// The first table: optional stopping, before and after.
pub fn table_optional_stopping(sim: &SimConfig, out: &mut String) {
    let rows = [(20, 20, 0.10), (5, 20, 0.10), (30, 30, 0.10), (3, 30, 0.10), (3, 30, 0.03)];
    for rule in [VerdictRule::Legacy, VerdictRule::Current] {
        let _ = writeln!(out, "\n{}\n", rule.label());
        let _ = writeln!(
            out,
            "| `repetitions` | CV | A/A false R+I | +2% (band edge) false R | +2% false no-change |\n| --- | --- | --- | --- | --- |"
        );
        for (min, max, cv) in rows {
            let aa = run_cell(rule, min, max, Scenario::new(cv, 0.0), sim);
            let edge = run_cell(rule, min, max, Scenario::new(cv, THETA), sim);
            let _ = writeln!(
                out,
                "| {} | {:.0}% | {} | {} | {} |",
                reps(min, max),
                cv * 100.0,
                pct(aa.false_change_rate()),
                pct(edge.regressed_rate()),
                pct(edge.no_change_rate())
            );
        }
    }
}

/// Error rates over many `{min, max}` designs (after only).
pub fn table_any_design(sim: &SimConfig, out: &mut String) {
    let designs = [(2, 10), (3, 10), (5, 20), (3, 30), (10, 30), (5, 50), (2, 100)];
    let _ = writeln!(
        out,
        "\n| `repetitions` | CV | A/A false R+I | (fixed max) | A/A no-change | A/A mean runs | +2% false R | +2% false no-change |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for (min, max) in designs {
        for cv in [0.03, 0.10] {
            let aa = run_cell(VerdictRule::Current, min, max, Scenario::new(cv, 0.0), sim);
            let fixed = run_cell(VerdictRule::Current, max, max, Scenario::new(cv, 0.0), sim);
            let edge = run_cell(VerdictRule::Current, min, max, Scenario::new(cv, THETA), sim);
            let _ = writeln!(
                out,
                "| {} | {:.0}% | {} | {} | {} | {:.1} | {} | {} |",
                reps(min, max),
                cv * 100.0,
                pct(aa.false_change_rate()),
                pct(fixed.false_change_rate()),
                pct(aa.no_change_rate()),
                aa.mean_runs(),
                pct(edge.regressed_rate()),
                pct(edge.no_change_rate())
            );
        }
    }
}

/// Power and runs of adaptive designs against always running `max`.
pub fn table_power(sim: &SimConfig, out: &mut String) {
    let cells = [(0.05, 0.03), (0.10, 0.10)];
    let designs = [(5, 20), (3, 30), (10, 30), (5, 50)];
    let _ = writeln!(
        out,
        "\n| change / CV | `repetitions` | fixed-max power (before) | fixed-max power (after) | adaptive power | adaptive mean runs | runs saved |\n| --- | --- | --- | --- | --- | --- | --- |"
    );
    for (change, cv) in cells {
        for (min, max) in designs {
            let sc = Scenario::new(cv, change);
            let before = run_cell(VerdictRule::Legacy, max, max, sc, sim);
            let fixed = run_cell(VerdictRule::Current, max, max, sc, sim);
            let adaptive = run_cell(VerdictRule::Current, min, max, sc, sim);
            let _ = writeln!(
                out,
                "| +{:.0}% / {:.0}% | {} | {} | {} | {} | {:.1} of {max} | {:.1}% |",
                change * 100.0,
                cv * 100.0,
                reps(min, max),
                pct(before.regressed_rate()),
                pct(fixed.regressed_rate()),
                pct(adaptive.regressed_rate()),
                adaptive.mean_runs(),
                100.0 * (1.0 - adaptive.mean_runs() / max as f64)
            );
        }
    }
}

/// One-sided slow outliers: power and A/A false rates, before and after.
pub fn table_outliers(sim: &SimConfig, out: &mut String) {
    let _ = writeln!(out, "\n| scenario (n = 20 fixed) | before | after |\n| --- | --- | --- |");
    let rows: [(&str, Scenario, bool); 5] = [
        ("+5%, CV 1%, clean: regressed", Scenario::new(0.01, 0.05), true),
        ("+5%, CV 1%, 10% of runs ×1.5: regressed", Scenario::new(0.01, 0.05).with_outliers(0.1, 1.5), true),
        ("A/A, CV 1%, 10% of runs ×1.5: false R+I", Scenario::new(0.01, 0.0).with_outliers(0.1, 1.5), false),
        ("A/A, CV 3%, clean: false R+I", Scenario::new(0.03, 0.0), false),
        ("A/A, CV 10%, clean: false R+I", Scenario::new(0.10, 0.0), false),
    ];
    for (label, sc, power) in rows {
        let cell = |rule| {
            let t = run_cell(rule, 20, 20, sc, sim);
            pct(if power { t.regressed_rate() } else { t.false_change_rate() })
        };
        let _ = writeln!(out, "| {label} | {} | {} |", cell(VerdictRule::Legacy), cell(VerdictRule::Current));
    }
}

/// Outlier flags on clean data and on one ×1.5 run.
pub fn table_outlier_flags(sim: &SimConfig, out: &mut String) {
    let old_rule = |x: &[f64]| x.len() >= 3 && modified_z_scores(x).iter().any(|z| z.abs() > 3.5);
    let new_rule = |x: &[f64]| !outlier_indices(x).is_empty();
    let _ = writeln!(
        out,
        "\n| clean A/A, CV 3%: experiments with a flagged run | before (modified z > 3.5) | after (generalized ESD) |\n| --- | --- | --- |"
    );
    for n in [3, 5, 10, 20, 50] {
        let count = |rule: &(dyn Fn(&[f64]) -> bool + Sync)| {
            let hits = parallel(
                sim,
                cell_seed(&format!("flags-{n}")),
                |rng| {
                    let (b, v) = Scenario::new(0.03, 0.0).draw(n, rng);
                    usize::from(rule(&b) || rule(&v))
                },
                |a, b| *a += b,
            );
            pct(hits as f64 / sim.experiments as f64)
        };
        let _ = writeln!(out, "| n = {n} | {} | {} |", count(&old_rule), count(&new_rule));
    }
    let _ = writeln!(out, "\n| one run ×1.5 among 10 | flagged (before) | flagged (after) |\n| --- | --- | --- |");
    for cv in [0.01, 0.03, 0.10] {
        let count = |old: bool| {
            let hits = parallel(
                sim,
                cell_seed(&format!("flag-one-{cv}")),
                |rng| {
                    let (mut b, _) = Scenario::new(cv, 0.0).draw(10, rng);
                    b[0] *= 1.5;
                    let hit = if old { modified_z_scores(&b)[0].abs() > 3.5 } else { outlier_indices(&b).contains(&0) };
                    usize::from(hit)
                },
                |a, b| *a += b,
            );
            pct(hits as f64 / sim.experiments as f64)
        };
        let _ = writeln!(out, "| CV {:.0}% | {} | {} |", cv * 100.0, count(true), count(false));
    }
}

/// Smallest fixed n at which the right verdict (`regressed` for a change
/// beyond the band, `no-change` for none) has probability 80%.
fn simulated_need(rule: VerdictRule, sc: Scenario, sim: &SimConfig) -> usize {
    let power = |n: usize| {
        let t = run_cell(rule, n, n, sc, sim);
        if sc.change.abs() > THETA {
            t.regressed_rate()
        } else {
            t.no_change_rate()
        }
    };
    let (mut lo, mut hi) = (2usize, 4usize);
    while power(hi) < 0.8 {
        lo = hi;
        hi *= 2;
        if hi > 4096 {
            return hi;
        }
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if power(mid) >= 0.8 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// `runs_needed` after 5 runs against the simulated need.
pub fn table_runs_needed(sim: &SimConfig, out: &mut String) {
    let _ = writeln!(
        out,
        "\n| change / CV | rule | simulated need (80% power, fixed n) | median runs_needed after 5 (inconclusive only) | median, decided-at-5 counted as 5 |\n| --- | --- | --- | --- | --- |"
    );
    for (change, cv) in [(0.05, 0.03), (0.05, 0.10), (0.0, 0.03), (0.10, 0.10)] {
        let sc = Scenario::new(cv, change);
        for rule in [VerdictRule::Legacy, VerdictRule::Current] {
            let need = simulated_need(rule, sc, sim);
            let predictions: Vec<Option<usize>> = parallel(
                sim,
                cell_seed(&format!("runs-needed-{change}-{cv}")),
                |rng| {
                    let (b, v) = sc.draw(5, rng);
                    let p = match rule {
                        VerdictRule::Legacy => match legacy_verdicts(&[(&b, &v)])[0] {
                            Verdict::Inconclusive => legacy_runs_needed(&b, &v),
                            _ => None,
                        },
                        _ => {
                            compare(&b, &v, false, &CompareConfig { alpha: ALPHA, theta: THETA, ..Default::default() })
                                .runs_needed
                        }
                    };
                    vec![p]
                },
                |a: &mut Vec<Option<usize>>, b| a.extend(b),
            );
            let mut inconclusive: Vec<usize> = predictions.iter().flatten().copied().collect();
            let mut all: Vec<usize> = predictions.iter().map(|p| p.unwrap_or(5)).collect();
            let med = |v: &mut Vec<usize>| {
                v.sort_unstable();
                v.get(v.len() / 2).copied().unwrap_or(0)
            };
            let (mi, ma) = (med(&mut inconclusive), med(&mut all));
            let _ = writeln!(
                out,
                "| {:+.0}% / {:.0}% | {} | {need} | {mi} ({:+.0}%) | {ma} ({:+.0}%) |",
                change * 100.0,
                cv * 100.0,
                if rule == VerdictRule::Legacy { "before" } else { "after" },
                100.0 * (mi as f64 / need as f64 - 1.0),
                100.0 * (ma as f64 / need as f64 - 1.0)
            );
        }
    }
}

/// Multiplicity: ten metrics per comparison, two really +10%, eight on the
/// band edge (+2%, where `regressed` is a false claim).
pub fn table_multiplicity(sim: &SimConfig, out: &mut String) {
    #[derive(Default)]
    struct Acc {
        false_r: usize,
        true_r: usize,
        fdp: f64,
        n: usize,
    }
    let _ = writeln!(
        out,
        "\n| 10 metrics, n = 10, CV 3%: 2 at +10%, 8 at +2% | false R per edge metric | false discovery rate | power on the +10% metrics |\n| --- | --- | --- | --- |"
    );
    for rule in [VerdictRule::Legacy, VerdictRule::Current] {
        let acc = parallel(
            sim,
            cell_seed("multiplicity"),
            |rng| {
                let draws: Vec<(Vec<f64>, Vec<f64>)> =
                    (0..10).map(|i| Scenario::new(0.03, if i < 2 { 0.10 } else { THETA }).draw(10, rng)).collect();
                let v = match rule {
                    VerdictRule::Legacy => {
                        let items: Vec<(&[f64], &[f64])> = draws.iter().map(|(b, v)| (&b[..], &v[..])).collect();
                        legacy_verdicts(&items)
                    }
                    _ => {
                        let items: Vec<(&[f64], &[f64], bool)> =
                            draws.iter().map(|(b, v)| (&b[..], &v[..], false)).collect();
                        verdicts(&items, &CompareConfig { alpha: ALPHA, theta: THETA, ..Default::default() })
                    }
                };
                let true_r = v[..2].iter().filter(|&&x| x == Verdict::Regressed).count();
                let false_r = v[2..].iter().filter(|&&x| x == Verdict::Regressed).count();
                let fdp = if true_r + false_r > 0 { false_r as f64 / (true_r + false_r) as f64 } else { 0.0 };
                Acc { false_r, true_r, fdp, n: 1 }
            },
            |a, b| {
                a.false_r += b.false_r;
                a.true_r += b.true_r;
                a.fdp += b.fdp;
                a.n += b.n;
            },
        );
        let n = acc.n.max(1) as f64;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            if rule == VerdictRule::Legacy {
                "before (BH p, unadjusted 95% CI)"
            } else {
                "after (BH selection, FCR intervals)"
            },
            pct(acc.false_r as f64 / (8.0 * n)),
            pct(acc.fdp / n),
            pct(acc.true_r as f64 / (2.0 * n))
        );
    }
}

/// Drift flags: false alarms on clean data, detection of a steady drift.
pub fn table_drift(sim: &SimConfig, out: &mut String) {
    let _ = writeln!(out, "\n| baseline, 20 runs | drift flagged |\n| --- | --- |");
    let total = 1.05f64.ln() / 19.0;
    let rows = [
        ("clean, CV 1%", Scenario::new(0.01, 0.0)),
        ("clean, CV 10%", Scenario::new(0.10, 0.0)),
        ("+5% over the run, CV 1%", Scenario { drift_per_round: total, ..Scenario::new(0.01, 0.0) }),
        ("+5% over the run, CV 3%", Scenario { drift_per_round: total, ..Scenario::new(0.03, 0.0) }),
    ];
    for (label, sc) in rows {
        let hits = parallel(
            sim,
            cell_seed(&format!("drift-{label}")),
            |rng| usize::from(trend(&sc.draw(20, rng).0, THETA).is_some_and(|t| t.flagged)),
            |a, b| *a += b,
        );
        let _ = writeln!(out, "| {label} | {} |", pct(hits as f64 / sim.experiments as f64));
    }
}

/// The planning formulas against simulation: power of a design at a change.
pub fn table_plan(sim: &SimConfig, out: &mut String) {
    let _ = writeln!(
        out,
        "\n| design | change / CV | planned power (`fslab plan`) | simulated power |\n| --- | --- | --- | --- |"
    );
    let cells: [(usize, usize, f64, f64); 4] =
        [(5, 20, 0.05, 0.03), (5, 20, 0.10, 0.10), (10, 30, 0.08, 0.05), (20, 20, 0.05, 0.03)];
    for (min, max, change, cv) in cells {
        let design = SequentialDesign::standard(min, max, ALPHA);
        let planned = super::samplesize::design_power(&design, cv.mul_add(cv, 1.0).ln().sqrt(), change.ln_1p(), THETA);
        let sim_power = run_cell(VerdictRule::Current, min, max, Scenario::new(cv, change), sim).regressed_rate();
        let _ = writeln!(
            out,
            "| {} | +{:.0}% / {:.0}% | {} | {} |",
            reps(min, max),
            change * 100.0,
            cv * 100.0,
            pct(planned),
            pct(sim_power)
        );
    }
}

/// Candidate designs side by side (`fslab simulate --explore`): how the
/// rule was chosen.
pub fn table_explore(sim: &SimConfig, out: &mut String) {
    let all = super::sequential::MAX_LOOKS;
    let cand = |efficacy, equivalence, rank, looks| VerdictRule::Candidate { efficacy, equivalence, rank, looks };
    let rules = [
        VerdictRule::Legacy,
        cand(Spending::OBrienFleming, Spending::OBrienFleming, true, all),
        cand(Spending::OBrienFleming, Spending::Power(2.0), true, all),
        cand(Spending::OBrienFleming, Spending::Power(1.0), true, all),
        cand(Spending::OBrienFleming, Spending::Pocock, true, all),
        cand(Spending::Power(3.0), Spending::Power(2.0), true, all),
        cand(Spending::Power(6.0), Spending::Power(2.0), true, all),
        cand(Spending::Pocock, Spending::Pocock, true, all),
        cand(Spending::Power(3.0), Spending::Power(2.0), false, all),
        cand(Spending::Power(3.0), Spending::Power(2.0), true, 6),
        cand(Spending::Power(3.0), Spending::Power(2.0), true, 4),
        VerdictRule::ConfidenceSequence,
    ];
    for (min, max) in [(5, 20), (3, 30)] {
        let _ = writeln!(
            out,
            "\n{} (fixed {max} for reference: +5%/CV 3% power {}, +10%/CV 10% power {})\n\n| rule | A/A false R+I (CV 10%) | +2% false R (CV 3%) | +2% false NC (CV 3%) | A/A CV 1%: NC / runs | A/A CV 3%: NC / runs | +5%/CV 3%: power / runs | +10%/CV 10%: power / runs |\n| --- | --- | --- | --- | --- | --- | --- | --- |",
            reps(min, max),
            pct(run_cell(VerdictRule::Current, max, max, Scenario::new(0.03, 0.05), sim).regressed_rate()),
            pct(run_cell(VerdictRule::Current, max, max, Scenario::new(0.10, 0.10), sim).regressed_rate()),
        );
        for rule in rules {
            let aa10 = run_cell(rule, min, max, Scenario::new(0.10, 0.0), sim);
            let edge = run_cell(rule, min, max, Scenario::new(0.03, THETA), sim);
            let aa1 = run_cell(rule, min, max, Scenario::new(0.01, 0.0), sim);
            let aa3 = run_cell(rule, min, max, Scenario::new(0.03, 0.0), sim);
            let p5 = run_cell(rule, min, max, Scenario::new(0.03, 0.05), sim);
            let p10 = run_cell(rule, min, max, Scenario::new(0.10, 0.10), sim);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} / {:.1} | {} / {:.1} | {} / {:.1} | {} / {:.1} |",
                rule.label(),
                pct(aa10.false_change_rate()),
                pct(edge.regressed_rate()),
                pct(edge.no_change_rate()),
                pct(aa1.no_change_rate()),
                aa1.mean_runs(),
                pct(aa3.no_change_rate()),
                aa3.mean_runs(),
                pct(p5.regressed_rate()),
                p5.mean_runs(),
                pct(p10.regressed_rate()),
                p10.mean_runs()
            );
        }
    }
}

/// The boundaries themselves for typical designs: the nominal two-sided
/// levels of the intervals at each look (no simulation).
pub fn table_boundaries(_sim: &SimConfig, out: &mut String) {
    for (min, max) in [(5, 20), (3, 30), (10, 30)] {
        let d = SequentialDesign::standard(min, max, ALPHA);
        let _ = writeln!(
            out,
            "\n{}: {} looks\n\n| n | efficacy z | CI for regressed/improved | equivalence z | CI for no-change |\n| --- | --- | --- | --- | --- |",
            reps(min, max),
            d.looks.len()
        );
        let shown: Vec<usize> =
            (0..d.looks.len()).filter(|&i| i < 3 || i + 3 >= d.looks.len() || d.looks[i].is_multiple_of(5)).collect();
        for i in shown {
            let look = d.look_at(d.looks[i]);
            let _ = writeln!(
                out,
                "| {} | {:.3} | {:.4}% | {:.3} | {:.2}% |",
                d.looks[i],
                d.efficacy_z[i],
                100.0 * (1.0 - 2.0 * look.efficacy_level),
                d.equivalence_z[i],
                100.0 * (1.0 - 2.0 * look.equivalence_level)
            );
        }
    }
}

/// A table: name, title, and the function that computes it.
pub type SimTable = (&'static str, &'static str, fn(&SimConfig, &mut String));

/// Every table, by name, in the order `fslab simulate` prints them.
pub const TABLES: &[SimTable] = &[
    ("boundaries", "Sequential boundaries of typical designs", table_boundaries),
    ("optional-stopping", "Adaptive repetition: error rates before and after", table_optional_stopping),
    ("any-design", "Error rates for any {min, max} (after)", table_any_design),
    ("power", "Power and runs: adaptive against fixed max", table_power),
    ("outliers", "One-sided slow outliers", table_outliers),
    ("outlier-flags", "Outlier flags", table_outlier_flags),
    ("runs-needed", "runs_needed after 5 runs", table_runs_needed),
    ("multiplicity", "Benjamini–Hochberg and the CI level", table_multiplicity),
    ("drift", "Drift over run order", table_drift),
    ("plan", "Planning formulas against simulation", table_plan),
];

/// The exploration table (not part of the default set: it is the record of
/// how the design was chosen).
pub const EXPLORE: SimTable = ("explore", "Candidate sequential designs", table_explore);

/// The named tables (all of [`TABLES`] when `names` is empty), or which
/// name is unknown.
pub fn select(names: &[String]) -> Result<Vec<SimTable>, String> {
    let all: Vec<_> = TABLES.iter().copied().chain(std::iter::once(EXPLORE)).collect();
    if names.is_empty() {
        return Ok(TABLES.to_vec());
    }
    names
        .iter()
        .map(|n| {
            all.iter().find(|t| t.0 == n).copied().ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|t| t.0).collect();
                format!("unknown table `{n}` (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// What every table assumes, as one line.
pub fn heading(sim: &SimConfig) -> String {
    format!(
        "Simulation: {} experiments per cell, log-normal runs, θ = {:.0}%, α = {}, {} thread(s); spending {} (efficacy) / {} (equivalence).",
        sim.experiments,
        THETA * 100.0,
        ALPHA,
        sim.threads,
        EFFICACY_SPENDING.label(),
        EQUIVALENCE_SPENDING.label()
    )
}

/// Render the named tables (all of [`TABLES`] when `names` is empty) as
/// Markdown, with the time each took.
pub fn render(names: &[String], sim: &SimConfig) -> Result<String, String> {
    let mut out = heading(sim) + "\n";
    let start = Instant::now();
    for (name, title, table) in select(names)? {
        let t0 = Instant::now();
        let _ = writeln!(out, "\n## {title} (`{name}`)");
        table(sim, &mut out);
        let _ = writeln!(out, "\n({:.1} s)", t0.elapsed().as_secs_f64());
    }
    let _ = writeln!(out, "\nTotal {:.1} s.", start.elapsed().as_secs_f64());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small enough for a debug-build unit test: every table runs and the
    /// headline numbers point the right way.
    #[test]
    fn every_table_runs_at_a_small_size() {
        let sim = SimConfig { experiments: 200, threads: 2 };
        let text = render(&[], &sim).unwrap();
        for (name, _, _) in TABLES {
            assert!(text.contains(&format!("(`{name}`)")), "{text}");
        }
        assert!(render(&["nope".to_string()], &sim).unwrap_err().contains("optional-stopping"));
    }

    #[test]
    fn optional_stopping_is_fixed() {
        let sim = SimConfig { experiments: 2000, threads: 2 };
        let before = run_cell(VerdictRule::Legacy, 3, 30, Scenario::new(0.10, 0.0), &sim);
        let after = run_cell(VerdictRule::Current, 3, 30, Scenario::new(0.10, 0.0), &sim);
        // Before: about 10% false claims; after: about 1%.
        assert!(before.false_change_rate() > 0.06, "{before:?}");
        assert!(after.false_change_rate() < 0.03, "{after:?}");
    }

    #[test]
    fn same_seed_same_numbers_whatever_the_threads() {
        let sc = Scenario::new(0.03, 0.05);
        let one = run_cell(VerdictRule::Current, 5, 10, sc, &SimConfig { experiments: 300, threads: 1 });
        let three = run_cell(VerdictRule::Current, 5, 10, sc, &SimConfig { experiments: 300, threads: 3 });
        assert_eq!(one, three);
    }
}
