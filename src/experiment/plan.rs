//! The run matrix: which variant and workload run in which order.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;

use super::{Experiment, RunOrder};

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PlannedRun {
    /// Position in the whole experiment (stable across `--resume`).
    pub seq: usize,
    /// Repetition index.
    pub round: usize,
    /// Index into `Experiment::variants`.
    pub variant: usize,
    /// Index into `Experiment::workloads`.
    pub workload: usize,
}

/// Plan rounds `first..first+count`, numbering runs from `first * runs_per_round`.
///
/// The plan depends only on the experiment and the round numbers, so a
/// resumed experiment recomputes exactly the runs it had planned.
pub fn plan_rounds(exp: &Experiment, first: usize, count: usize) -> Vec<PlannedRun> {
    let per_round = exp.variants.len() * exp.workloads.len();
    let mut runs = Vec::with_capacity(per_round * count);
    match exp.order {
        RunOrder::Interleaved | RunOrder::Randomized => {
            for round in first..first + count {
                let mut cells: Vec<(usize, usize)> =
                    (0..exp.workloads.len()).flat_map(|w| (0..exp.variants.len()).map(move |v| (v, w))).collect();
                if exp.order == RunOrder::Randomized {
                    shuffle(&mut cells, exp.seed, round);
                }
                runs.extend(cells.into_iter().map(|(variant, workload)| PlannedRun {
                    seq: 0,
                    round,
                    variant,
                    workload,
                }));
            }
        }
        RunOrder::Grouped => {
            for workload in 0..exp.workloads.len() {
                for variant in 0..exp.variants.len() {
                    for round in first..first + count {
                        runs.push(PlannedRun { seq: 0, round, variant, workload });
                    }
                }
            }
        }
    }
    for (i, run) in runs.iter_mut().enumerate() {
        run.seq = first * per_round + i;
    }
    runs
}

/// Fisher–Yates with a generator seeded by (seed, round), so each round's
/// order is reproducible on its own.
fn shuffle<T>(items: &mut [T], seed: u64, round: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// The run plan as text, for `fslab run --dry-run`.
pub fn describe(exp: &Experiment) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "experiment: {}", exp.name);
    let _ = writeln!(
        out,
        "repetitions: {:?}, order: {:?}, seed: {}, baseline: {}, θ: ±{:.1}%, α: {}, sampling every {:?}",
        exp.repetitions,
        exp.order,
        exp.seed,
        exp.baseline,
        exp.theta * 100.0,
        exp.alpha,
        exp.sample_interval
    );
    let _ = writeln!(out, "work directory: {}", exp.workdir.display());
    let _ = writeln!(out, "\nvariants:");
    for v in &exp.variants {
        match &v.image {
            // A read-only image is as large as its content; show how it is packed.
            Some(i) => {
                let mut packing = format!("compressor={}", i.compressor);
                if let Some(level) = i.level {
                    packing.push_str(&format!(" level={level}"));
                }
                if v.fs == super::FsKind::Squashfs {
                    let block = crate::units::Bytes(i.block_size.unwrap_or(128 << 10));
                    packing.push_str(&format!(" block_size={block} fragments={}", i.fragments));
                }
                if let Some(p) = i.pcluster_size {
                    packing.push_str(&format!(" pcluster_size={}", crate::units::Bytes(p)));
                }
                let _ = writeln!(out, "  {}: fs={} {packing} mkfs={:?} mount={:?}", v.name, v.fs, v.mkfs, v.mount);
            }
            None => {
                let _ =
                    writeln!(out, "  {}: fs={} size={} mkfs={:?} mount={:?}", v.name, v.fs, v.size, v.mkfs, v.mount);
            }
        }
        let t = &v.throttle;
        if !t.is_empty() {
            let _ = writeln!(
                out,
                "    throttle: read_bps={} write_bps={} read_iops={} write_iops={}",
                t.read_bps.map_or("-".into(), |b| format!("{b}/s")),
                t.write_bps.map_or("-".into(), |b| format!("{b}/s")),
                t.read_iops.map_or("-".into(), |n| n.to_string()),
                t.write_iops.map_or("-".into(), |n| n.to_string())
            );
        }
        if v.read_ahead_kb.is_some() || v.scheduler.is_some() || !v.sysfs.is_empty() {
            let _ = writeln!(
                out,
                "    queue: read_ahead_kb={:?} scheduler={:?} sysfs={:?}",
                v.read_ahead_kb, v.scheduler, v.sysfs
            );
        }
    }
    let _ = writeln!(out, "\nworkloads:");
    for w in &exp.workloads {
        let _ = writeln!(out, "  {}: {:?} cache={:?} timeout={:?}", w.label, w.params, w.cache, w.timeout);
    }
    let runs = plan_rounds(exp, 0, exp.min_rounds());
    let _ = writeln!(
        out,
        "\nplan ({} runs{}):",
        runs.len(),
        match exp.repetitions {
            super::Repetitions::Adaptive { max, .. } => format!(", then adaptive rounds up to {max}"),
            _ => String::new(),
        }
    );
    for r in runs {
        let _ = writeln!(
            out,
            "  {:>4}  round {:>2}  {:<20} {}",
            r.seq,
            r.round + 1,
            exp.variants[r.variant].name,
            exp.workloads[r.workload].label
        );
    }
    out
}
