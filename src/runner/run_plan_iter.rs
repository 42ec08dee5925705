//! The run plan, one run at a time: the same runs in the same order as
//! [`plan_rounds`], without holding a plan of millions of runs in memory
//! (1000 repetitions × 64 variants × 64 workloads is the largest allowed).

use crate::experiment::{plan_rounds, Experiment, PlannedRun, RunOrder};

/// The runs of rounds `first..first + count`, equal to
/// `plan_rounds(exp, first, count)`.
pub fn planned(exp: &Experiment, first: usize, count: usize) -> Box<dyn Iterator<Item = PlannedRun> + '_> {
    let (variants, workloads) = (exp.variants.len(), exp.workloads.len());
    match exp.order {
        // Each round is planned on its own (and numbered from its round).
        RunOrder::Interleaved | RunOrder::Randomized => {
            Box::new((first..first + count).flat_map(move |round| plan_rounds(exp, round, 1)))
        }
        // Workload, then variant, then round: the index says which.
        RunOrder::Grouped => Box::new((0..workloads * variants * count).map(move |i| PlannedRun {
            seq: first * variants * workloads + i,
            round: first + i % count,
            variant: (i / count) % variants,
            workload: i / (count * variants),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(order: &str) -> Experiment {
        let text = format!(
            "name = \"p\"\nrepetitions = 4\norder = \"{order}\"\nseed = 3\n\
             [[variant]]\nname = \"a\"\nfs = \"tmpfs\"\n[[variant]]\nname = \"b\"\nfs = \"tmpfs\"\n\
             [[variant]]\nname = \"c\"\nfs = \"tmpfs\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n[[workload]]\nkind = \"command\"\ncommand = \"false\"\n"
        );
        crate::experiment::parse(&text, None).unwrap()
    }

    #[test]
    fn the_lazy_plan_is_the_plan() {
        for order in ["interleaved", "randomized", "grouped"] {
            let e = exp(order);
            for (first, count) in [(0, 4), (0, 1), (2, 2), (4, 1)] {
                let lazy: Vec<PlannedRun> = planned(&e, first, count).collect();
                assert_eq!(lazy, plan_rounds(&e, first, count), "{order} {first}+{count}");
            }
        }
    }
}
