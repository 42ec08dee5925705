//! Running one experiment as a fleet: `fslab run FILE --shard K/N
//! [--campaign ID]` runs a deterministic slice of the run matrix, every
//! shard joining one experiment (the campaign) in a shared store, and every
//! run carries the identity of the machine it ran on.
//!
//! The unit of slicing is a *block*: one workload in one round, with all of
//! its variants. A shard always runs whole blocks, so on its own machine it
//! still compares every variant against the baseline, interleaved as the
//! file asks; blocks are dealt round-robin in plan order (round, then
//! workload), so the shards' shares differ by at most one block and every
//! shard spreads over the rounds. Every machine computes the same slicing
//! from the file alone: nothing is coordinated but the store.

use std::sync::OnceLock;

use anyhow::{anyhow, Result};

use super::owner::Resume;
use crate::exit;
use crate::experiment::{Experiment, PlannedRun};
use crate::inspect::machine::Machine;
use crate::store::{campaign, MetricSeries, NewExperiment, RecordingContext, Shard, Store};

/// `--shard K/N` with its campaign id (what every shard of it agrees on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CampaignShard {
    pub campaign: String,
    pub shard: Shard,
}

impl CampaignShard {
    /// Shard `shard` of the campaign named `explicit` (`--campaign`), or by
    /// default of the one derived from the file's hash and the CI run id.
    pub fn new(exp: &Experiment, shard: Shard, explicit: Option<&str>) -> Result<CampaignShard> {
        Ok(CampaignShard { campaign: campaign::campaign_id(&exp.spec_hash, explicit)?, shard })
    }
}

/// The block a planned run belongs to: its workload in its round.
pub fn block(exp: &Experiment, run: &PlannedRun) -> usize {
    run.round * exp.workloads.len() + run.workload
}

/// Whether `run` is in `shard`'s slice (every run is without a shard).
pub fn owns(exp: &Experiment, shard: Option<Shard>, run: &PlannedRun) -> bool {
    shard.is_none_or(|s| block(exp, run) % s.count == s.index - 1)
}

/// `shard`'s slice of `runs`, in plan order.
pub fn slice<'a>(
    exp: &'a Experiment,
    shard: Option<Shard>,
    runs: impl Iterator<Item = PlannedRun> + 'a,
) -> impl Iterator<Item = PlannedRun> + 'a {
    runs.filter(move |r| owns(exp, shard, r))
}

/// How many runs of rounds `first..first + count` are `shard`'s.
pub fn runs_in(exp: &Experiment, shard: Option<Shard>, first: usize, count: usize) -> usize {
    let workloads = exp.workloads.len();
    let blocks = (first * workloads..(first + count) * workloads)
        .filter(|b| shard.is_none_or(|s| b % s.count == s.index - 1))
        .count();
    blocks * exp.variants.len()
}

/// The adaptive rounds to plan next, starting at round `next`: one round
/// without a shard; with one, up to and including the next round holding a
/// block of this shard (rounds between are other shards' to add). `None`
/// when this shard owns nothing more before the experiment's last round.
pub fn next_rounds(exp: &Experiment, shard: Option<Shard>, next: usize) -> Option<usize> {
    (next..exp.max_rounds()).find(|&round| runs_in(exp, shard, round, 1) > 0).map(|last| last + 1 - next)
}

/// The machine this process runs on, captured once per process (the first
/// caller's `backing` names the disk under the testbeds).
pub fn this_machine(backing: Option<&std::path::Path>) -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(|| Machine::capture(backing))
}

/// Attaches this machine (and `shard`) to every run `store` records from
/// now on; keeps a machine the caller already set.
pub fn set_context(store: &mut Store, exp: &Experiment, device: Option<&std::path::Path>, shard: Option<Shard>) {
    let machine = match store.recording_context().machine.clone() {
        Some(m) => m,
        None => {
            let workdir = exp.workdir.ancestors().find(|p| p.exists()).map(std::path::Path::to_path_buf);
            this_machine(device.or(workdir.as_deref())).clone()
        }
    };
    store.set_recording_context(RecordingContext { machine: Some(machine), shard });
}

/// Joins (or, after a kill, rejoins) the campaign: the experiment id every
/// shard shares. `--resume` needs the campaign to exist already.
pub fn join(store: &mut Store, c: &CampaignShard, new: &NewExperiment, resume: Resume) -> Result<i64> {
    if resume == Resume::Required && store.find_campaign(&c.campaign)?.is_none() {
        return Err(exit::usage(anyhow!(
            "nothing to resume: {} holds no campaign {:?}; run without --resume to start shard {}",
            store.location(),
            c.campaign,
            c.shard
        )));
    }
    let machine = store.recording_context().machine.clone();
    store.join_campaign(new, &c.campaign, c.shard, machine.as_ref())
}

/// The comparisons that decide whether a shard adds rounds: the whole
/// campaign's runs on this machine's hardware (comparisons never mix
/// machines), or every run without a shard.
pub fn deciding_series(store: &Store, experiment_id: i64) -> Result<Vec<MetricSeries>> {
    match (&store.recording_context().shard, &store.recording_context().machine) {
        (Some(_), Some(machine)) => store.metric_series_on(experiment_id, &machine.hardware()),
        _ => store.metric_series(experiment_id),
    }
}

/// For `--dry-run`: which part of the plan this shard runs.
pub fn describe(exp: &Experiment, c: &CampaignShard) -> String {
    let (min, max) = (exp.min_rounds(), exp.max_rounds());
    let mine = runs_in(exp, Some(c.shard), 0, min);
    let all = runs_in(exp, None, 0, min);
    let blocks = min * exp.workloads.len();
    let mut line = format!(
        "shard {} of campaign {}: {mine} of the {all} runs of the first {min} rounds \
         (blocks of one workload × all variants in one round, dealt round-robin: {} of {blocks})",
        c.shard,
        c.campaign,
        mine / exp.variants.len().max(1)
    );
    if max > min {
        line.push_str(&format!("; adds its own blocks of rounds {}..{max} while undecided", min + 1));
    }
    if mine == 0 {
        line.push_str(&format!("; warning: only {blocks} blocks for {} shards, this one has none", c.shard.count));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::run_plan_iter::planned;
    use std::collections::{BTreeSet, HashSet};

    fn exp(order: &str, variants: usize, workloads: usize, reps: &str) -> Experiment {
        let mut text = format!("name = \"s\"\nrepetitions = {reps}\norder = \"{order}\"\nseed = 5\n");
        for v in 0..variants {
            text.push_str(&format!("[[variant]]\nname = \"v{v}\"\nfs = \"tmpfs\"\n"));
        }
        for w in 0..workloads {
            text.push_str(&format!("[[workload]]\nkind = \"command\"\ncommand = \"true {w}\"\n"));
        }
        crate::experiment::parse(&text, None).unwrap()
    }

    fn shard(index: usize, count: usize) -> Option<Shard> {
        Some(Shard { index, count })
    }

    #[test]
    fn shards_partition_the_plan_in_plan_order() {
        for order in ["interleaved", "randomized", "grouped"] {
            for (v, w, reps, n) in [(2, 1, "8", 4), (3, 2, "5", 4), (2, 3, "4", 3), (1, 1, "3", 5), (4, 2, "6", 1)] {
                let e = exp(order, v, w, reps);
                let all: Vec<PlannedRun> = planned(&e, 0, e.min_rounds()).collect();
                let mut seen = HashSet::new();
                let mut sizes = Vec::new();
                for k in 1..=n {
                    let mine: Vec<PlannedRun> = slice(&e, shard(k, n), planned(&e, 0, e.min_rounds())).collect();
                    assert_eq!(mine.len(), runs_in(&e, shard(k, n), 0, e.min_rounds()), "{order} {k}/{n}");
                    // In plan order: the shard's runs are a subsequence of the plan.
                    let positions: Vec<usize> = mine.iter().map(|r| all.iter().position(|a| a == r).unwrap()).collect();
                    assert!(positions.windows(2).all(|p| p[0] < p[1]), "{order} {k}/{n}");
                    // Whole blocks: every variant of each (round, workload) it holds.
                    let blocks: BTreeSet<(usize, usize)> = mine.iter().map(|r| (r.round, r.workload)).collect();
                    assert_eq!(blocks.len() * v, mine.len(), "{order} {k}/{n}");
                    for r in &mine {
                        assert!(seen.insert(r.seq), "seq {} in two shards", r.seq);
                    }
                    sizes.push(mine.len());
                }
                assert_eq!(seen.len(), all.len(), "{order}: the shards cover the plan");
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= v, "{order} {v}x{w}x{reps}/{n}: shares {sizes:?} differ by more than a block");
            }
        }
    }

    #[test]
    fn the_slicing_is_the_same_everywhere() {
        // Seqs are positions in the plan, the same on every machine: pin one slicing.
        let e = exp("interleaved", 2, 3, "2");
        let seqs = |k| slice(&e, shard(k, 4), planned(&e, 0, 2)).map(|r| r.seq).collect::<Vec<_>>();
        assert_eq!(seqs(1), vec![0, 1, 8, 9]);
        assert_eq!(seqs(2), vec![2, 3, 10, 11]);
        assert_eq!(seqs(3), vec![4, 5]);
        assert_eq!(seqs(4), vec![6, 7]);
    }

    #[test]
    fn every_shard_spreads_over_the_rounds() {
        let e = exp("interleaved", 2, 1, "8");
        for k in 1..=4 {
            let rounds: BTreeSet<usize> = slice(&e, shard(k, 4), planned(&e, 0, 8)).map(|r| r.round).collect();
            assert_eq!(rounds, [k - 1, k + 3].into_iter().collect(), "shard {k}");
        }
    }

    #[test]
    fn adaptive_rounds_go_to_the_shard_owning_them() {
        let e = exp("interleaved", 2, 1, "{ min = 2, max = 9 }");
        assert_eq!(next_rounds(&e, None, 2), Some(1));
        // Shard 2 of 4 owns rounds 1, 5: from round 2 it plans 2..=5.
        assert_eq!(next_rounds(&e, shard(2, 4), 2), Some(4));
        assert_eq!(next_rounds(&e, shard(2, 4), 6), None);
        assert_eq!(next_rounds(&e, shard(1, 4), 8), Some(1));
        assert_eq!(next_rounds(&e, None, 9), None);
        let extra: Vec<usize> = slice(&e, shard(2, 4), planned(&e, 2, 4)).map(|r| r.round).collect();
        assert_eq!(extra, vec![5, 5]);
    }

    #[test]
    fn dry_run_line_warns_about_empty_shards() {
        let e = exp("interleaved", 2, 1, "2");
        let c = |k| CampaignShard { campaign: "c".into(), shard: Shard { index: k, count: 3 } };
        assert!(describe(&e, &c(1)).starts_with("shard 1/3 of campaign c: 2 of the 4 runs"), "{}", describe(&e, &c(1)));
        assert!(describe(&e, &c(3)).contains("this one has none"));
    }
}
