//! Statistics and verdicts: summaries of repeated runs, A/B comparisons of a
//! variant against a baseline, and the rules that turn numbers into a verdict.
//!
//! Pure computation, no I/O. Every public function accepts any input (empty
//! slices, one value, zero variance, NaN, non-positive values) without
//! panicking; quantities that are undefined for the given data come back as
//! `NaN` (serde_json writes those as `null`) or as `None`.
//!
//! RULES-PLACEHOLDER

pub mod changepoint;
mod compare;
mod drift;
pub mod gate;
pub mod history;
mod mannwhitney;
mod multiple;
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
