//! The run matrix: which variant and workload run in which order.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{Experiment, RunOrder};

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Most plan lines `--dry-run` prints; the rest are counted.
/// Runs a dry run lists (text and JSON); the rest are counted.
pub const DRY_RUN_LINES: usize = 200;

/// What building each variant's built kernel will take (variant index,
/// outlook), in the order the runner builds them, from this machine's kernel cache.
pub fn kernel_builds(exp: &Experiment) -> Vec<(usize, crate::kernel::outlook::BuildOutlook)> {
    let variants =
        exp.variants.iter().enumerate().filter_map(|(i, v)| v.kernel.as_ref().map(|k| (i, v.name.as_str(), &k.source)));
    crate::kernel::outlook::plan(variants, &exp.kernel_cache)
}

/// The run plan as text, for `fslab run --dry-run`; `builds` is [`kernel_builds`].
pub fn describe(exp: &Experiment, builds: &[(usize, crate::kernel::outlook::BuildOutlook)]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let repetitions = match exp.repetitions {
        super::Repetitions::Fixed(n) => n.to_string(),
        super::Repetitions::Adaptive { min, max } => format!("{min} to {max} (adaptive)"),
    };
    let _ = writeln!(out, "experiment: {}", exp.name);
    let _ = writeln!(
        out,
        "repetitions: {repetitions}, order: {}, seed: {}, baseline: {}, θ: ±{:.1}%, α: {}, sampling every {}",
        exp.order,
        exp.seed,
        exp.baseline,
        exp.theta * 100.0,
        exp.alpha,
        humantime::format_duration(exp.sample_interval)
    );
    let _ = writeln!(out, "work directory: {}", exp.workdir.display());
    let _ = writeln!(out, "\nvariants:");
    for (i, v) in exp.variants.iter().enumerate() {
        let t = &v.testbed;
        let extra = if t.mkfs.is_empty() { String::new() } else { format!(" mkfs={}", t.mkfs.join(" ")) };
        let mount = if t.mount.is_empty() { String::new() } else { format!(" mount={}", t.mount) };
        match (&t.image, t.fs.fs().image()) {
            // A read-only image is as large as its content; show how it is packed.
            (Some(options), Some(format)) => {
                let _ = writeln!(out, "  {}: fs={} {}{extra}{mount}", v.name, t.fs, format.describe(options));
            }
            _ => {
                let _ = writeln!(out, "  {}: fs={} size={}{extra}{mount}", v.name, t.fs, t.size);
            }
        }
        // Which kernel the variant's runs see: its own in a VM, or the host's.
        match (&v.kernel, &v.vm) {
            (Some(k), vm) => {
                let outlook = builds.iter().find(|(j, _)| *j == i).map(|(_, o)| format!(" ({})", o.describe()));
                let source = format!("{}{}", k.source.origin(), outlook.unwrap_or_default());
                let boot = match vm.as_ref().map(|vm| vm.boot).unwrap_or_default() {
                    super::place::BootPolicy::PerVariant => "one VM for the variant",
                    super::place::BootPolicy::PerRun => "a fresh VM per run",
                };
                let _ = writeln!(out, "    kernel: boots {} from {source} ({boot})", k.release);
            }
            (None, _) if exp.variants.iter().any(|v| v.kernel.is_some()) => {
                let _ = writeln!(out, "    kernel: the host's ({})", crate::sys::kernel_release());
            }
            (None, _) => {}
        }
        if let Some(device) = &t.device {
            let _ = writeln!(out, "    device: {}", describe_device(device));
        }
        let th = &t.throttle;
        if !th.is_empty() {
            let _ = writeln!(
                out,
                "    throttle: read_bps={} write_bps={} read_iops={} write_iops={}",
                th.read_bps.map_or("-".into(), |b| format!("{b}/s")),
                th.write_bps.map_or("-".into(), |b| format!("{b}/s")),
                th.read_iops.map_or("-".into(), |n| n.to_string()),
                th.write_iops.map_or("-".into(), |n| n.to_string())
            );
        }
        if t.read_ahead_kb.is_some() || t.scheduler.is_some() || !t.sysfs.is_empty() {
            let mut queue = Vec::new();
            if let Some(kb) = t.read_ahead_kb {
                queue.push(format!("read_ahead_kb={kb}"));
            }
            if let Some(s) = &t.scheduler {
                queue.push(format!("scheduler={s}"));
            }
            queue.extend(t.sysfs.iter().map(|(k, v)| format!("sysfs.{k}={v}")));
            let _ = writeln!(out, "    queue: {}", queue.join(" "));
        }
    }
    let _ = writeln!(out, "\nworkloads:");
    for w in &exp.workloads {
        let params = serde_json::to_value(&w.params).unwrap_or_default();
        let settings: Vec<String> = params
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "kind")
            .map(|(k, v)| format!("{k}={}", compact_json(v)))
            .collect();
        let timeout = w.timeout.map_or("default".to_string(), |t| humantime::format_duration(t).to_string());
        let cache = match w.cache {
            super::CachePolicy::Cold => "cold",
            super::CachePolicy::Warm => "warm",
        };
        let _ = writeln!(out, "  {}: {} {} cache={cache} timeout={timeout}", w.label, w.kind(), settings.join(" "));
    }
    let first = exp.min_rounds();
    let per_round = exp.variants.len() * exp.workloads.len();
    let total = first * per_round;
    let adaptive = match exp.repetitions {
        super::Repetitions::Adaptive { max, .. } => format!(", then adaptive rounds up to {max}"),
        _ => String::new(),
    };
    let _ = writeln!(out, "\nplan ({total} runs{adaptive}):");
    // Plan one round at a time, so a huge plan costs nothing to describe.
    let mut printed = 0;
    'rounds: for round in 0..first {
        for r in plan_rounds(exp, round, 1) {
            if printed == DRY_RUN_LINES {
                break 'rounds;
            }
            let _ = writeln!(
                out,
                "  {:>4}  round {:>2}  {:<20} {}",
                r.seq + 1,
                r.round + 1,
                exp.variants[r.variant].name,
                exp.workloads[r.workload].label
            );
            printed += 1;
        }
    }
    if total > printed {
        let _ = writeln!(out, "  … and {} more runs", total - printed);
    }
    out
}

/// A variant's medium as the dry run says it: the preset and its model,
/// with the parameters the file changed, or a model given in full.
pub fn describe_device(device: &crate::media::DeviceSpec) -> String {
    let changed: Vec<String> = device.changed().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let (name, model) = (&device.name, device.model_name());
    let head = match device.is_preset() {
        true if name == model => format!("{name} preset"),
        true => format!("{name} ({model} model preset)"),
        false => format!("{model} model"),
    };
    match (device.is_preset(), changed.is_empty()) {
        (_, true) => head,
        (true, false) => format!("{head} with {}", changed.join(" ")),
        (false, false) => format!("{head}: {}", changed.join(" ")),
    }
}

/// A JSON value as short text: strings bare, durations as `1m 5s`.
fn compact_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) if o.len() == 2 && o.contains_key("secs") && o.contains_key("nanos") => {
            let secs = o["secs"].as_u64().unwrap_or(0);
            let nanos = o["nanos"].as_u64().unwrap_or(0) as u32;
            humantime::format_duration(std::time::Duration::new(secs, nanos)).to_string()
        }
        other => other.to_string(),
    }
}
