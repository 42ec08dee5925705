//! Statistics and verdicts: summaries of repeated runs, A/B comparisons of a
//! variant against a baseline, and the rules that turn numbers into a verdict.
//!
//! Pure computation, no I/O. Every public function accepts any input (empty
//! slices, one value, zero variance, NaN, non-positive values) without
//! panicking; quantities that are undefined for the given data come back as
//! `NaN` (serde_json writes those as `null`) or as `None`.
//!
//! * [`summarize`]: mmtests-style mean, spread, median, geometric mean and
//!   flagged (never dropped) outliers.
//! * [`compare`] / [`compare_family`]: Welch t-test on log values, CI of the
//!   geometric-mean ratio, Benjamini–Hochberg across a family of metrics,
//!   exact Mann–Whitney as a rank-based cross-check, and a [`Verdict`] with an
//!   equivalence band.
//! * Building blocks: [`welch_t_test`], [`mann_whitney_exact`],
//!   [`benjamini_hochberg`], [`modified_z_scores`], [`runs_needed`].

pub mod changepoint;
mod compare;
pub mod gate;
pub mod history;
mod mannwhitney;
mod multiple;
pub mod oracle;
mod outliers;
pub mod percentile;
mod samplesize;
pub mod simulation;
mod summary;
mod welch;

pub use compare::{compare, compare_family, CompareConfig, CompareMethod, Comparison, Verdict};
pub use mannwhitney::mann_whitney_exact;
pub use multiple::benjamini_hochberg;
pub use outliers::{modified_z_scores, outlier_indices, OUTLIER_Z};
pub use samplesize::{runs_needed, RUNS_NEEDED_CAP};
pub use summary::{summarize, MeanKind, Summary};
pub use welch::{normal_quantile, t_quantile, welch_t_test, WelchTest};
