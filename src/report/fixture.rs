//! Deterministic experiments for the renderers' tests and snapshots: fixed
//! values, names and timestamps, no paths. The verdict rows come from the
//! real statistics ([`compare_series`]) on fixed values, so a change to the
//! verdict rule shows in the snapshots (review with `cargo insta review`).

use serde_json::json;

use super::data::{ComparisonData, ReportData, RunData};
use super::CompareReport;
use crate::analysis::{compare_series, ComparisonRow, Roles};
use crate::metric::Metric;
use crate::record::RunStatus;
use crate::stats::CompareConfig;
use crate::store::{MetricSeries, StoredExperiment, StoredRun, VariantRow, WorkloadRow};

pub const BASELINE: &str = "optimize_scan=0";
pub const VARIANTS: [&str; 3] = [BASELINE, "optimize_scan=1", "tuned|<b>"];

/// `(workload, metric, unit, higher_is_better, values per variant)`.
type Spec = (&'static str, &'static str, &'static str, bool, [Vec<f64>; 3]);

fn around(center: f64, spread: f64) -> Vec<f64> {
    [0.0, 1.0, -1.0, 0.5, -0.5].iter().map(|d| center + d * spread).collect()
}

/// One regression, one improvement, no-change, inconclusive rows, a metric
/// that is zero on both sides (no ratio) and a concurrency sweep.
fn decided_specs() -> Vec<Spec> {
    vec![
        ("untar", "total_s", "s", false, [around(10.0, 0.1), around(12.0, 0.1), around(10.0, 0.02)]),
        ("untar", "files_per_s", "files/s", true, [around(770.0, 8.0), around(640.0, 6.0), around(770.0, 2.0)]),
        ("untar", "user_s", "s", false, [vec![0.0; 5], vec![0.0; 5], vec![0.0; 5]]),
        ("untar", "sys_s", "s", false, [around(0.5, 0.1), around(0.55, 0.2), around(0.45, 0.15)]),
        ("shell1", "shell1-1", "loops/min", true, [around(1000.0, 10.0), around(1200.0, 10.0), around(1000.0, 90.0)]),
        ("shell1", "shell1-2", "loops/min", true, [around(1900.0, 20.0), around(2300.0, 20.0), around(1900.0, 150.0)]),
    ]
}

/// Nothing decided: every comparison is noisy and close.
fn undecided_specs() -> Vec<Spec> {
    vec![
        ("untar", "total_s", "s", false, [around(10.0, 1.5), around(10.4, 1.5), around(9.7, 1.8)]),
        ("untar", "sys_s", "s", false, [around(0.5, 0.1), around(0.55, 0.2), around(0.45, 0.15)]),
    ]
}

fn variant_config(name: &str, position: usize) -> serde_json::Value {
    json!({
        "name": name,
        "fs": {"type": "ext4"},
        "size": 4294967296u64,
        "mkfs": ["-E", "lazy_itable_init=0,lazy_journal_init=0"],
        "mount": format!("noatime,mb_optimize_scan={}", position.min(1)),
        "throttle": {"read_bps": 20971520, "write_bps": 20971520, "read_iops": null, "write_iops": 500},
        "read_ahead_kb": 128,
        "scheduler": null,
        "sysfs": [],
    })
}

fn build(specs: Vec<Spec>, failures: &[(&str, &str, &str)]) -> ReportData {
    let mut series = Vec::new();
    let mut runs = Vec::new();
    // Stored seqs are 0-based plan positions, as in the store.
    let mut seq = 0;
    for (v, variant) in VARIANTS.iter().enumerate() {
        for workload in ["untar", "shell1"] {
            let mine: Vec<&Spec> = specs.iter().filter(|s| s.0 == workload).collect();
            if mine.is_empty() {
                continue;
            }
            for s in &mine {
                series.push(MetricSeries {
                    workload: workload.into(),
                    metric: s.1.into(),
                    unit: s.2.into(),
                    higher_is_better: s.3,
                    variant: variant.to_string(),
                    values: s.4[v].clone(),
                });
            }
            for rep in 0..mine[0].4[v].len() {
                let metrics = mine
                    .iter()
                    .map(|s| Metric { name: s.1.into(), unit: s.2.into(), higher_is_better: s.3, value: s.4[v][rep] })
                    .collect();
                runs.push(run(seq, rep, variant, workload, metrics, None));
                seq += 1;
            }
        }
    }
    for (variant, workload, error) in failures {
        runs.push(run(seq, 5, variant, workload, vec![], Some(error)));
        seq += 1;
    }
    let rows = compare_series(&series, BASELINE, &CompareConfig::default(), Roles::default());
    let cfg = CompareConfig::default();
    let variants: Vec<serde_json::Value> = VARIANTS.iter().enumerate().map(|(i, n)| variant_config(n, i)).collect();
    let plan = json!({"experiment": {
        "description": "mb_optimize_scan on an SD-card-like throttle",
        "order": "interleaved",
        "repetitions": 5,
        "variants": variants,
    }});
    let environment = json!({
        "kernel_release": "6.1.0-test",
        "kernel_version": "#1 SMP PREEMPT_DYNAMIC",
        "cpu_count": 2,
        "cpu_model": "Test CPU @ 2.0GHz",
        "mem_total_kb": 8146284,
        "hostname": "testhost",
        "tools": {"mke2fs": "1.47.0", "tar": "1.34"},
        "doctor": {"hostile": ["[high] cpu-frequency-scaling: the CPU governor is powersave"]},
    });
    ReportData {
        experiment: StoredExperiment {
            id: 7,
            name: "sdcard <untar> & shell1".into(),
            created_at: "2024-01-02T03:04:05Z".into(),
            finished_at: Some("2024-01-02T04:05:06Z".into()),
            status: crate::stored::ExperimentStatus::Complete,
            spec_path: None,
            spec_text: "name = \"sdcard\"\n".into(),
            spec_hash: "0".into(),
            seed: 1,
            uuid: String::new(),
            campaign: None,
            shard_count: None,
            tags: vec![],
            plan: serde_json::from_value(plan).expect("fixture plan"),
            environment: serde_json::from_value(environment).expect("fixture environment"),
            variants: VARIANTS
                .iter()
                .enumerate()
                .map(|(i, n)| VariantRow { position: i, name: n.to_string(), config_json: variants[i].to_string() })
                .collect(),
            workloads: vec![
                WorkloadRow { position: 0, label: "untar".into(), kind: "untar".into(), config_json: "{}".into() },
                WorkloadRow { position: 1, label: "shell1".into(), kind: "shell1".into(), config_json: "{}".into() },
            ],
        },
        comparison: ComparisonData {
            baseline: BASELINE.into(),
            theta: cfg.theta,
            alpha: cfg.alpha,
            variants: VARIANTS.iter().map(|v| v.to_string()).collect(),
            // As the untar kind declares: total_s decides it; shell1's sweep points all decide.
            rows: rows
                .into_iter()
                .map(|r| ComparisonRow { decisive: r.workload != "untar" || r.metric == "total_s", ..r })
                .collect(),
        },
        series,
        runs: runs.into_iter().map(|run| RunData { run, monitor: None, extras: vec![] }).collect(),
        places: Default::default(),
    }
}

fn run(
    seq: usize,
    round: usize,
    variant: &str,
    workload: &str,
    metrics: Vec<Metric>,
    error: Option<&str>,
) -> StoredRun {
    StoredRun {
        id: seq as i64,
        seq,
        round,
        variant: variant.into(),
        workload: workload.into(),
        status: if error.is_some() { RunStatus::Failed } else { RunStatus::Ok },
        error: error.map(str::to_string),
        started_at: 1_700_000_000.0 + seq as f64,
        wall_s: 1.0,
        metrics,
        mount: None,
        geometry: None,
        disk_totals: None,
        uuid: String::new(),
        shard: None,
    }
}

/// Decided changes in both directions, beside side metrics and a sweep.
pub fn decided() -> ReportData {
    build(decided_specs(), &[])
}

/// Every comparison inconclusive, and three failed runs with two distinct errors.
pub fn undecided_with_failures() -> ReportData {
    build(
        undecided_specs(),
        &[
            ("optimize_scan=1", "untar", "mount: /mnt: wrong fs type, bad option, bad superblock on /dev/loop1"),
            ("optimize_scan=1", "untar", "mount: /mnt: wrong fs type, bad option, bad superblock on /dev/loop1"),
            ("tuned|<b>", "untar", "workload timed out after 10m"),
        ],
    )
}

/// The runs of a fixture, as the store returns them.
pub fn stored_runs(d: &ReportData) -> Vec<StoredRun> {
    d.runs.iter().map(|r| r.run.clone()).collect()
}

/// The `fslab compare` document of a fixture.
pub fn compare_report<'a>(d: &'a ReportData, runs: &'a [StoredRun]) -> CompareReport<'a> {
    CompareReport {
        experiment_id: d.experiment.id,
        experiment_name: &d.experiment.name,
        comparison: &d.comparison,
        runs,
        hostile: d.experiment.environment.doctor.as_ref().map(|doc| doc.hostile.clone()).unwrap_or_default(),
        places: d.places.clone(),
    }
}

/// One profiled guest run of `reads` reads: read_zero's 45 instructions
/// per read, user space, the idle loop, a function only some runs stored,
/// and the remainder.
fn profiled_run(seq: usize, variant: &str, reads: u64, jitter: u64, rare: bool) -> RunData {
    use crate::vm::profile::{Counting, Origin, ProfileEntry, RunProfile, MIN_SHARE};
    let entry = |symbol: &str, origin: Origin, unit: Option<&str>, count: u64| ProfileEntry {
        symbol: symbol.into(),
        origin,
        unit: unit.map(str::to_string),
        count,
    };
    let mut entries = vec![
        entry("read_zero", Origin::Kernel, None, 45 * reads + jitter),
        entry("user", Origin::User, None, 1_700_000 + 3 * jitter),
        entry("squashfs_read_data", Origin::Module, Some("squashfs"), 20_000 - jitter),
        entry("do_idle", Origin::Kernel, None, 700 + jitter),
    ];
    if rare {
        entries.push(entry("rare_fn <x>", Origin::Kernel, None, 5_000));
    }
    let other = 1_000 + jitter;
    let total = entries.iter().map(|e| e.count).sum::<u64>() + other;
    let profile = RunProfile {
        counting: Counting::Exact,
        total,
        entries,
        other,
        other_entries: 3,
        min_share: MIN_SHARE,
        symbols: "the guest's /proc/kallsyms".into(),
    };
    let metric = Metric {
        name: crate::vm::icount::METRIC.into(),
        unit: "insn".into(),
        higher_is_better: false,
        value: total as f64,
    };
    let mut stored = run(seq, seq / 2, variant, "reads", vec![metric], None);
    stored.id = 100 + seq as i64;
    RunData { run: stored, monitor: None, extras: vec![("profile".into(), serde_json::to_value(&profile).unwrap())] }
}

/// An emulated experiment whose runs stored profiles: `more` reads 1.5
/// times as much as `base` (5 runs each, interleaved).
pub fn profiled() -> ReportData {
    let mut d = build(vec![], &[]);
    d.experiment.name = "reads <profile>".into();
    d.runs = (0..10)
        .map(|i| {
            let (variant, reads) = if i % 2 == 0 { ("base", 100_000) } else { ("more", 150_000) };
            profiled_run(i, variant, reads, (i as u64 / 2) * 17, i % 4 == 0)
        })
        .collect();
    d.comparison.baseline = "base".into();
    d.comparison.variants = vec!["base".into(), "more".into()];
    d
}

/// The profiles of [`profiled`], as `compare --profile` loads them.
pub fn profiled_runs() -> Vec<crate::analysis::profile::ProfiledRun> {
    profiled()
        .runs
        .iter()
        .filter_map(|r| crate::analysis::profile::profile_of(&r.run, &r.extras))
        .map(|p| p.unwrap())
        .collect()
}
