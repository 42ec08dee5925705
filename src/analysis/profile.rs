//! The differential profile (`fslab compare --profile`, the report's
//! profile section): for each variant against the baseline, per function,
//! both sides' mean instruction counts, the difference, the change with
//! its interval and a verdict from the stats crate's comparison
//! ([`compare_family`]: Benjamini–Hochberg over the functions of one
//! comparison), the largest differences first.
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
    /// The change, its interval and verdict, as `compare` computes them.
    #[serde(flatten)]
    pub comparison: Comparison,
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
    let mut rows: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    let mut missing: HashMap<Key, usize> = HashMap::new();
    for (i, p) in all.iter().enumerate() {
        for e in &p.entries {
            let key = (Some(e.origin), e.symbol.clone(), e.unit.clone());
            rows.entry(key).or_insert_with(|| vec![0.0; all.len()])[i] = e.count as f64;
        }
    }
    for (key, values) in &rows {
        missing.insert(key.clone(), values.iter().filter(|&&x| x == 0.0).count());
    }
    rows.insert((None, OTHER.to_string(), None), all.iter().map(|p| p.other as f64).collect());
    let keys: Vec<Key> = rows.keys().cloned().collect();
    let split: Vec<(&[f64], &[f64])> = keys.iter().map(|k| rows[k].split_at(b.len())).collect();
    let items: Vec<(&[f64], &[f64], bool)> = split.iter().map(|&(x, y)| (x, y, false)).collect();
    let comparisons = compare_family(&items, cfg);
    let mean = |xs: &[f64]| if xs.is_empty() { f64::NAN } else { xs.iter().sum::<f64>() / xs.len() as f64 };
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
        rows: out,
    }
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
        assert_eq!(c.rows[0].comparison.verdict, Verdict::Regressed);
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
        // One family: the BH family is every row.
        assert_eq!(c.rows[0].comparison.decided_by.family_size, c.rows.len());
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
        assert!(c.rows.iter().all(|r| !matches!(r.comparison.verdict, Verdict::Regressed | Verdict::Improved)));
        // A variant without profiles, or a workload the baseline lacks, is no comparison.
        assert!(compare_profiles(&runs[..1], "base", &CompareConfig::default()).is_empty());
    }
}
