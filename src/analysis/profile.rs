//! The differential profile (`fslab compare --profile`, the report's
//! profile section): for each variant against the baseline, per function,
//! both sides' mean instruction counts, the difference, the change with
//! its interval and a verdict from the stats crate's comparison
//! ([`compare_family`]: Benjamini–Hochberg over the functions of one
//! comparison), the largest differences first.
//!
//! Which functions are tested: those of at least [`TESTED_SHARE`] of the
//! window, by the pooled mean of both sides; the rest are shown (their
//! differences still add up) but get no verdict. A filter on a statistic
//! that ignores which side a run is on leaves the rank test's p-values
//! uniform under no change, so BH still controls the false discovery rate
//! among the tested ("independent filtering", Bourgon, Gentleman and
//! Huber, PNAS 2010), while a family of every function would leave none
//! decidable at a few runs: the smallest p of 5 runs against 5 is 0.008,
//! and BH over m functions needs p ≤ 0.05·R/m.
//!
//! Exact by construction: a run's stored profile ([`RunProfile`]) is its
//! functions above the stored share plus a remainder, adding up to its
//! total; a function a run did not store counts 0 there (its instructions
//! are in that run's remainder, which is a row of its own), so every run's
//! row values add up to its total, and the rows' differences of means add
//! up to the difference of the totals' means. [`ProfileRow::runs_below_share`]
//! says where a function was below the share.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::record::RunStatus;
use crate::stats::{compare_family, CompareConfig, Comparison};
use crate::store::{Store, StoredRun};
use crate::vm::profile::{background, Background, Origin, RunProfile, EXTRA};

/// The name of the remainder row.
pub const OTHER: &str = "other";
/// Rows of at least this share of the window (pooled mean over both sides'
/// runs, against the pooled mean total) are tested; the rest are shown.
pub const TESTED_SHARE: f64 = 1e-3;

/// How the counts of a comparison were taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CountKind {
    /// Every run counted every instruction (TCG plugin).
    Exact,
    /// Some run was sampled: its counts are estimates.
    Sampled,
}

/// One run's profile, with what names the run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledRun {
    pub variant: String,
    pub workload: String,
    pub seq: usize,
    pub profile: RunProfile,
}

/// One function (or the remainder) of one comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileRow {
    pub symbol: String,
    /// None for the remainder ([`OTHER`]).
    pub origin: Option<Origin>,
    /// The module, or the built kernel's source directory.
    pub unit: Option<String>,
    /// The guest's idle loop or timer tick.
    pub background: Option<Background>,
    /// Arithmetic means over the runs (lower is better).
    pub mean_baseline: f64,
    pub mean_variant: f64,
    /// `mean_variant − mean_baseline`; the rows' add up to the total's.
    pub difference: f64,
    /// This row's part of the total's difference (may exceed ±1 when rows
    /// cancel).
    pub share_of_difference: f64,
    /// Runs (of both sides) in which the function was below the stored
    /// share and counts 0.
    pub runs_below_share: usize,
    /// Set when the row is `inconclusive` only for the family's sake: its
    /// own interval lies beyond ±θ, but with this few runs the rank test's
    /// smallest p times the tested rows exceeds α (5 runs against 5 cannot
    /// go below 0.008, so one mover among 41 cannot pass Benjamini–Hochberg).
    /// The runs per side at which that p could pass.
    pub runs_to_decide: Option<usize>,
    /// The change, its interval and verdict, as `compare` computes them;
    /// None for a row below [`TESTED_SHARE`] (not tested).
    #[serde(flatten)]
    pub comparison: Option<Comparison>,
}

impl ProfileRow {
    /// The verdict, when the row was tested.
    pub fn verdict(&self) -> Option<crate::stats::Verdict> {
        self.comparison.as_ref().map(|c| c.verdict)
    }
}

/// One variant against the baseline on one workload.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileComparison {
    pub workload: String,
    pub baseline: String,
    pub variant: String,
    pub counting: CountKind,
    pub n_baseline: usize,
    pub n_variant: usize,
    /// Means of the runs' totals (`vm/instructions` when exact).
    pub total_baseline: f64,
    pub total_variant: f64,
    /// What the rows' differences add up to.
    pub difference: f64,
    pub change_pct: f64,
    pub theta: f64,
    pub alpha: f64,
    /// Rows tested: one Benjamini–Hochberg family.
    pub tested: usize,
    /// Every function seen in a run, and the remainder; largest |difference| first.
    pub rows: Vec<ProfileRow>,
}

impl ProfileComparison {
    /// What the first `n` rows carry: their differences' sum, and its part
    /// of the total's difference.
    pub fn coverage(&self, n: usize) -> (f64, f64) {
        let listed: f64 = self.rows.iter().take(n).map(|r| r.difference).sum();
        (listed, listed / self.difference)
    }
}

/// The stored profile of a run with its extras, if any.
pub fn profile_of(run: &StoredRun, extras: &[(String, serde_json::Value)]) -> Option<Result<ProfiledRun>> {
    let (_, json) = extras.iter().find(|(k, _)| k == EXTRA)?;
    Some(
        serde_json::from_value::<RunProfile>(json.clone())
            .with_context(|| {
                format!("the profile of run {} ({} / {}) does not parse", run.seq + 1, run.variant, run.workload)
            })
            .map(|profile| ProfiledRun {
                variant: run.variant.clone(),
                workload: run.workload.clone(),
                seq: run.seq,
                profile,
            }),
    )
}

/// The profiles of experiment `id`'s successful runs.
pub fn load(store: &Store, id: i64) -> Result<Vec<ProfiledRun>> {
    let mut out = Vec::new();
    for run in store.runs(id)?.into_iter().filter(|r| r.status == RunStatus::Ok) {
        if let Some(p) = profile_of(&run, &store.run_extras(run.id)?) {
            out.push(p?);
        }
    }
    Ok(out)
}

type Key = (Option<Origin>, String, Option<String>);

/// Every variant with profiles against `baseline`, per workload, in the
/// order the runs name them.
pub fn compare_profiles(runs: &[ProfiledRun], baseline: &str, cfg: &CompareConfig) -> Vec<ProfileComparison> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in runs.iter().filter(|r| r.variant != baseline) {
        let has_baseline = runs.iter().any(|b| b.variant == baseline && b.workload == r.workload);
        if has_baseline && !pairs.contains(&(&r.workload, &r.variant)) {
            pairs.push((&r.workload, &r.variant));
        }
    }
    pairs
        .into_iter()
        .map(|(workload, variant)| {
            let side = |v: &str| -> Vec<&RunProfile> {
                runs.iter().filter(|r| r.workload == workload && r.variant == v).map(|r| &r.profile).collect()
            };
            compare_pair(workload, baseline, variant, &side(baseline), &side(variant), cfg)
        })
        .collect()
}

fn compare_pair(
    workload: &str,
    baseline: &str,
    variant: &str,
    b: &[&RunProfile],
    v: &[&RunProfile],
    cfg: &CompareConfig,
) -> ProfileComparison {
    // Every function any run stored, with each run's count (0 where absent).
    let all: Vec<&RunProfile> = b.iter().chain(v).copied().collect();
    // A kernel function's source directory names it only when every run
    // has them: a kernel fslab built gets them when its object directory
    // still holds that very build, which variants of one tree take turns
    // at. Otherwise a function is its name (same-named static functions
    // counted together), and the directory is kept as a label.
    let grouped = all.iter().all(|p| p.entries.iter().any(|e| e.origin == Origin::Kernel && e.unit.is_some()));
    let mut labels: HashMap<String, String> = HashMap::new();
    let mut rows: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    let mut missing: HashMap<Key, usize> = HashMap::new();
    for (i, p) in all.iter().enumerate() {
        for e in &p.entries {
            let unit = match (e.origin, grouped) {
                (Origin::Kernel, false) => {
                    if let Some(dir) = &e.unit {
                        labels.entry(e.symbol.clone()).or_insert_with(|| dir.clone());
                    }
                    None
                }
                _ => e.unit.clone(),
            };
            rows.entry((Some(e.origin), e.symbol.clone(), unit)).or_insert_with(|| vec![0.0; all.len()])[i] +=
                e.count as f64;
        }
    }
    for (key, values) in &rows {
        missing.insert(key.clone(), values.iter().filter(|&&x| x == 0.0).count());
    }
    rows.insert((None, OTHER.to_string(), None), all.iter().map(|p| p.other as f64).collect());
    let keys: Vec<Key> = rows.keys().cloned().collect();
    let split: Vec<(&[f64], &[f64])> = keys.iter().map(|k| rows[k].split_at(b.len())).collect();
    let mean = |xs: &[f64]| if xs.is_empty() { f64::NAN } else { xs.iter().sum::<f64>() / xs.len() as f64 };
    // Tested: pooled over both sides, so the filter does not look at which side is which.
    let pooled_total = mean(&all.iter().map(|p| p.total as f64).collect::<Vec<_>>());
    let tested: Vec<bool> = keys.iter().map(|k| mean(&rows[k]) >= TESTED_SHARE * pooled_total).collect();
    let items: Vec<(&[f64], &[f64], bool)> =
        split.iter().zip(&tested).filter(|(_, &t)| t).map(|(&(x, y), _)| (x, y, false)).collect();
    let mut decided = compare_family(&items, cfg).into_iter();
    let comparisons: Vec<Option<Comparison>> = tested.iter().map(|&t| if t { decided.next() } else { None }).collect();
    let totals = |side: &[&RunProfile]| mean(&side.iter().map(|p| p.total as f64).collect::<Vec<_>>());
    let (total_baseline, total_variant) = (totals(b), totals(v));
    let difference = total_variant - total_baseline;
    let mut out: Vec<ProfileRow> = keys
        .into_iter()
        .zip(split)
        .zip(comparisons)
        .map(|(((origin, symbol, unit), (x, y)), comparison)| {
            let (mean_baseline, mean_variant) = (mean(x), mean(y));
            let runs_below_share = missing.get(&(origin, symbol.clone(), unit.clone())).copied().unwrap_or(0);
            let unit = match origin {
                Some(Origin::Kernel) if unit.is_none() => labels.get(&symbol).cloned(),
                _ => unit,
            };
            ProfileRow {
                background: origin.and_then(|_| background(&symbol)),
                symbol,
                origin,
                unit,
                mean_baseline,
                mean_variant,
                difference: mean_variant - mean_baseline,
                share_of_difference: (mean_variant - mean_baseline) / difference,
                runs_below_share,
                runs_to_decide: comparison.as_ref().and_then(|c| runs_to_decide(c, cfg)),
                comparison,
            }
        })
        .collect();
    out.sort_by(|a, b| b.difference.abs().total_cmp(&a.difference.abs()).then_with(|| a.symbol.cmp(&b.symbol)));
    let sampled = all.iter().any(|p| !p.counting.is_exact());
    ProfileComparison {
        workload: workload.to_string(),
        baseline: baseline.to_string(),
        variant: variant.to_string(),
        counting: if sampled { CountKind::Sampled } else { CountKind::Exact },
        n_baseline: b.len(),
        n_variant: v.len(),
        total_baseline,
        total_variant,
        difference,
        change_pct: (total_variant / total_baseline - 1.0) * 100.0,
        theta: cfg.theta,
        alpha: cfg.alpha,
        tested: items.len(),
        rows: out,
    }
}

/// The smallest two-sided p of the exact rank test with `n` runs per side
/// and no ties: the most extreme of the `C(2n, n)` arrangements, either way.
fn smallest_rank_p(n: usize) -> f64 {
    let arrangements = (1..=n).fold(1.0_f64, |c, k| c * (n + k) as f64 / k as f64);
    2.0 / arrangements
}

/// See [`ProfileRow::runs_to_decide`].
fn runs_to_decide(c: &Comparison, cfg: &CompareConfig) -> Option<usize> {
    let beyond = c.ci_low_pct > cfg.theta * 100.0 || c.ci_high_pct < -cfg.theta / (1.0 + cfg.theta) * 100.0;
    let blocked =
        c.verdict == crate::stats::Verdict::Inconclusive && c.method == crate::stats::CompareMethod::LogRank && beyond;
    if !blocked {
        return None;
    }
    // BH at best ranks it among the selected, or first.
    let needed = cfg.alpha * c.decided_by.selected.max(1) as f64 / c.decided_by.family_size as f64;
    (c.decided_by.look.n..=100).find(|&n| smallest_rank_p(n) <= needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Verdict;
    use crate::vm::profile::{Counting, ProfileEntry, MIN_SHARE};

    fn entry(symbol: &str, origin: Origin, count: u64) -> ProfileEntry {
        ProfileEntry { symbol: symbol.into(), origin, unit: None, count }
    }

    /// A run of `reads` reads: 45 instructions of read_zero each, a fixed
    /// part, a function only some runs stored, and a remainder.
    fn run(variant: &str, seq: usize, reads: u64, jitter: u64, rare: Option<u64>) -> ProfiledRun {
        let mut entries = vec![
            entry("read_zero", Origin::Kernel, 45 * reads + jitter),
            entry("user", Origin::User, 2_000_000 + 3 * jitter),
            entry("do_idle", Origin::Kernel, 700 + jitter),
        ];
        entries.extend(rare.map(|c| entry("rare_fn", Origin::Kernel, c)));
        let other = 1_000 + jitter;
        let total = entries.iter().map(|e| e.count).sum::<u64>() + other;
        ProfiledRun {
            variant: variant.into(),
            workload: "reads".into(),
            seq,
            profile: RunProfile {
                counting: Counting::Exact,
                total,
                entries,
                other,
                other_entries: 3,
                min_share: MIN_SHARE,
                symbols: "test".into(),
            },
        }
    }

    /// One side's functions carry their source directory (its kernel's
    /// object directory held that build), the other's do not: a function
    /// is one row, labelled with its directory, not two rows of 0 against
    /// all. Two copies of a name in one run (static functions of two
    /// directories) count together.
    #[test]
    fn a_side_without_directories_still_matches_function_by_function() {
        let mut runs = Vec::new();
        for i in 0..5u64 {
            let mut base = run("base", i as usize, 100_000, i * 17, None);
            base.profile.entries[0].unit = Some("drivers/char".into());
            runs.push(base);
            let mut more = run("more", 5 + i as usize, 150_000, i * 13, None);
            more.profile.entries[2].count -= 100;
            more.profile.entries.push(entry("do_idle", Origin::Kernel, 100));
            runs.push(more);
        }
        let c = &compare_profiles(&runs, "base", &CompareConfig::default())[0];
        let read_zero: Vec<&ProfileRow> = c.rows.iter().filter(|r| r.symbol == "read_zero").collect();
        assert_eq!(read_zero.len(), 1, "{:?}", c.rows);
        assert_eq!(read_zero[0].unit.as_deref(), Some("drivers/char"));
        assert_eq!(read_zero[0].verdict(), Some(Verdict::Regressed));
        let idle = c.rows.iter().find(|r| r.symbol == "do_idle").unwrap();
        assert!((idle.mean_variant - idle.mean_baseline - (13.0 - 17.0) * 2.0).abs() < 1e-9, "{idle:?}");
    }

    #[test]
    fn the_rows_add_up_to_the_totals_difference_and_the_mover_comes_first() {
        let mut runs = Vec::new();
        for i in 0..5u64 {
            runs.push(run("base", i as usize, 100_000, i * 17, (i % 2 == 0).then_some(5_000)));
            runs.push(run("more", 5 + i as usize, 150_000, i * 13, None));
        }
        let cfg = CompareConfig::default();
        let c = &compare_profiles(&runs, "base", &cfg)[0];
        assert_eq!((c.variant.as_str(), c.n_baseline, c.n_variant, c.counting), ("more", 5, 5, CountKind::Exact));
        assert_eq!(c.rows[0].symbol, "read_zero");
        assert_eq!(c.rows[0].verdict(), Some(Verdict::Regressed));
        assert!((c.rows[0].difference - 45.0 * 50_000.0).abs() < 100.0, "{}", c.rows[0].difference);
        let sum: f64 = c.rows.iter().map(|r| r.difference).sum();
        assert!((sum - c.difference).abs() < 1e-6 * c.difference.abs(), "{sum} vs {}", c.difference);
        let (listed, part) = c.coverage(1);
        assert_eq!(listed, c.rows[0].difference);
        assert!(part > 0.99 && part < 1.01, "{part}");
        // Stored by 3 of 10 runs: counted 0 in the other 7.
        let rare = c.rows.iter().find(|r| r.symbol == "rare_fn").unwrap();
        assert_eq!(rare.runs_below_share, 7);
        let other = c.rows.iter().find(|r| r.origin.is_none()).unwrap();
        assert_eq!(other.symbol, OTHER);
        assert_eq!(c.rows.iter().find(|r| r.symbol == "do_idle").unwrap().background, Some(Background::Idle));
        // One family: the rows of at least 0.1% of the window; do_idle (700 of 7.6 M), rare_fn and
        // the remainder are shown, not tested.
        let tested = c.rows.iter().filter(|r| r.comparison.is_some()).count();
        assert_eq!((c.tested, tested), (2, 2), "read_zero and user");
        assert_eq!(c.rows[0].comparison.as_ref().unwrap().decided_by.family_size, 2);
        assert_eq!(c.rows.iter().find(|r| r.symbol == "do_idle").unwrap().verdict(), None);
    }

    /// What the README says of power: one function that moved among 40
    /// tested ones is `inconclusive` at 5 runs per side (the rank test's
    /// smallest p, 0.008, times 40 is above α), which the row says with the
    /// runs that would decide, and `regressed` at 7.
    #[test]
    fn a_lone_mover_among_forty_needs_seven_runs() {
        let profile = |mover: u64, jitter: u64| {
            let mut entries: Vec<ProfileEntry> =
                (0..39).map(|i| entry(&format!("f{i}"), Origin::Kernel, 100_000 + jitter * (i % 3))).collect();
            entries.push(entry("mover", Origin::Kernel, mover + jitter));
            let total = entries.iter().map(|e| e.count).sum();
            RunProfile {
                counting: Counting::Exact,
                total,
                entries,
                other: 0,
                other_entries: 0,
                min_share: MIN_SHARE,
                symbols: "test".into(),
            }
        };
        let verdict = |n: usize| {
            let mut runs = Vec::new();
            for i in 0..n as u64 {
                for (variant, mover) in [("base", 100_000), ("slow", 110_000)] {
                    let profile = profile(mover, i * 7);
                    runs.push(ProfiledRun { variant: variant.into(), workload: "w".into(), seq: 0, profile });
                }
            }
            let c = compare_profiles(&runs, "base", &CompareConfig::default()).remove(0);
            assert_eq!((c.tested, c.rows[0].symbol.as_str()), (40, "mover"));
            (c.rows[0].verdict(), c.rows[0].runs_to_decide)
        };
        assert_eq!(verdict(5), (Some(Verdict::Inconclusive), Some(7)));
        assert_eq!(verdict(7), (Some(Verdict::Regressed), None));
        assert!((smallest_rank_p(5) - 2.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn an_a_a_pair_decides_nothing_and_sampled_runs_say_so() {
        let mut runs = Vec::new();
        for i in 0..5u64 {
            runs.push(run("base", i as usize, 100_000, i * 17, None));
            runs.push(run("again", 5 + i as usize, 100_000, (4 - i) * 17, None));
        }
        runs[1].profile.counting = Counting::Sampled { event: "instructions".into(), period: 1000, samples: 5 };
        let c = &compare_profiles(&runs, "base", &CompareConfig::default())[0];
        assert_eq!(c.counting, CountKind::Sampled);
        assert!(c.rows.iter().all(|r| !matches!(r.verdict(), Some(Verdict::Regressed | Verdict::Improved))));
        // A variant without profiles, or a workload the baseline lacks, is no comparison.
        assert!(compare_profiles(&runs[..1], "base", &CompareConfig::default()).is_empty());
    }
}
