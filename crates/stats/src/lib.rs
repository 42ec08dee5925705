//! Statistics and verdicts: summaries of repeated runs, A/B comparisons of a
//! variant against a baseline, and the rules that turn numbers into a verdict.
//!
//! Pure computation, no I/O. Every public function accepts any input (empty
//! slices, one value, zero variance, NaN, non-positive values) without
//! panicking; quantities that are undefined for the given data come back as
//! `NaN` (serde_json writes those as `null`) or as `None`.
//!
//! # The verdict rule and its measured error rates
//!
//! Every number below is from `fslab simulate` ([`verdict_sim`]: 20,000
//! simulated experiments per cell, log-normal runs, θ = 2%, α = 0.05,
//! through the same code as `compare`); BENCHMARKS.md keeps the tables.
//!
//! * **Estimate and interval** ([`compare`]): all values positive and at
//!   least 4 runs per side → Hodges–Lehmann shift of ln(values) with its
//!   distribution-free Moses interval ([`hodges_lehmann`],
//!   [`moses_interval`]), robust to a minority of slow runs: with 10% of
//!   runs ×1.5, a real +5% at CV 1%, n = 20 is `regressed` in 99.7% of
//!   experiments (15.5% under the earlier Welch rule), A/A false claims
//!   unchanged (1.0% at CV 10%). Fewer runs → Welch on ln(values); some
//!   value ≤ 0 → Welch on raw values; every value equal on both sides →
//!   `no-change` (equal constants).
//! * **Verdict**: `regressed`/`improved` when the interval lies beyond ±θ,
//!   `no-change` when the equivalence interval lies inside ±θ, else
//!   `inconclusive` with [`runs_needed`].
//! * **Fixed n**: one look at level α. A/A false `regressed`+`improved`
//!   1.0% (n = 20, CV 10%); false `regressed` at the band edge 2.4%.
//! * **Sequential** (`repetitions = { min, max }`, [`sequential`]):
//!   group-sequential boundaries, Kim–DeMets spending `(α/2)t³` for
//!   `regressed`/`improved` and `(α/2)t²` for `no-change`, a look after
//!   every round (at most 50 looks). Optional stopping under the old rule
//!   gave 7.1–9.6% A/A false claims and 8.9–12.1% band-edge false
//!   `regressed`; now, for every design simulated from `{2, 10}` to
//!   `{2, 100}` at CV 3% and 10%: band-edge false `regressed` 2.2–2.7%,
//!   A/A false claims ≤ 1.2% except `{2|3, 10}` at CV 10% (2.0%, where
//!   fixed n = 10 itself gives 1.6%). Power within 2.6 points of fixed
//!   `max` under the same rule, with 15.7–53% fewer runs on average.
//! * **Multiplicity** ([`benjamini_hochberg`]): BH across the metrics of
//!   one (workload, variant) comparison selects which may claim a change,
//!   and a selected metric's interval is widened to the false-coverage-rate
//!   level `1 − α·R/m` (Benjamini & Yekutieli 2005), so BH changes verdicts:
//!   10 metrics, 8 on the band edge: false discovery rate 2.6% (6.3% with
//!   BH p beside an unadjusted CI), power on the real ones 99.3%.
//! * **Outlier flags** ([`outlier_indices`]): generalized ESD on ln(values)
//!   at 1.25% per side; clean A/A experiments with any flag 2.4–3.2% at
//!   n = 3…50 (49/37/23/19% under the old MAD rule); a ×1.5 run among 10 is
//!   flagged in 100% at CV 1% and 3%. Flags never drop a run.
//! * **Drift** ([`trend`]): Mann–Kendall on the baseline's run order, shown
//!   when p < 1% and the Theil–Sen change over the run exceeds θ: ≤ 0.9%
//!   of clean experiments, 99.8% of a +5% drift at CV 1%.
//! * **Planning** ([`runs_needed`], [`design_power`], [`detectable_change`]):
//!   after 5 inconclusive runs the median `runs_needed` is within ±25% of
//!   the simulated need at +5% (CV 3% and 10%); the power `fslab plan`
//!   predicts for a design is within 0.3 points of the simulated one.
//!
//! Building blocks: [`summarize`], [`welch_t_test`], [`mann_whitney_exact`],
//! [`modified_z_scores`]; and, for history, [`changepoint`], [`gate`],
//! [`oracle`] with their own simulation in [`simulation`].

pub mod changepoint;
mod compare;
mod drift;
pub mod gate;
pub mod history;
mod mannwhitney;
mod multiple;
pub mod multisect;
pub mod oracle;
mod outliers;
pub mod percentile;
mod robust;
mod samplesize;
pub mod sequential;
pub mod simulation;
mod summary;
pub mod verdict_sim;
mod welch;

pub use compare::{
    compare, compare_family, noise_sd, CompareConfig, CompareMethod, Comparison, DecisionRule, Stopping, Verdict,
};
pub use drift::{trend, Trend, DRIFT_ALPHA};
pub use mannwhitney::mann_whitney_exact;
pub use multiple::benjamini_hochberg;
pub use outliers::{max_outliers, modified_z_scores, outlier_indices, OUTLIER_ALPHA, OUTLIER_Z};
pub use robust::{hodges_lehmann, moses_interval, moses_rank};
pub use samplesize::{
    design_power, detectable_change, runs_needed, runs_to_detect, runs_to_show_no_change, RANK_EFFICIENCY,
    RUNS_NEEDED_ASSURANCE, RUNS_NEEDED_CAP,
};
pub use sequential::{Look, SequentialDesign, Spending};
pub use summary::{summarize, MeanKind, Summary};
pub use welch::{normal_quantile, t_quantile, welch_t_test, WelchTest};
