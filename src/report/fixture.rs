//! Deterministic experiments for the renderers' tests and snapshots: fixed
//! values, names and timestamps, no paths. The verdict rows come from the
//! real statistics ([`compare_series`]) on fixed values, so a change to the
//! verdict rule shows in the snapshots (review with `cargo insta review`).

use serde_json::json;

use super::data::{ComparisonData, ReportData, RunData};
use super::{CompareReport, Detail};
use crate::analysis::{compare_series, ComparisonRow, Roles};
use crate::experiment::{FsKind, TestbedConfig, Throttle, VariantConfig};
use crate::metric::Metric;
use crate::record::RunStatus;
use crate::stats::CompareConfig;
use crate::store::{MetricSeries, StoredExperiment, StoredRun, VariantRow, WorkloadRow};
use crate::units::Bytes;

pub const BASELINE: &str = "optimize_scan=0";
pub const VARIANTS: [&str; 3] = [BASELINE, "optimize_scan=1", "tuned|<b>"];

/// `(workload, metric, unit, higher_is_better, values per variant)`.
type Spec = (&'static str, &'static str, &'static str, bool, Vec<Vec<f64>>);

/// `(metric, unit, higher_is_better, values of the baseline, of the variant)`.
type Recorded = (&'static str, &'static str, bool, &'static [f64], &'static [f64]);

/// One experiment to build: its variants (baseline first), workloads and
/// series, and which rows decide.
struct Shape<'a> {
    id: i64,
    name: &'a str,
    variants: &'a [&'a str],
    workloads: &'a [&'a str],
    specs: Vec<Spec>,
    failures: &'a [(&'a str, &'a str, &'a str)],
    roles: Roles<'a>,
}

fn around(center: f64, spread: f64) -> Vec<f64> {
    [0.0, 1.0, -1.0, 0.5, -0.5].iter().map(|d| center + d * spread).collect()
}

/// One regression, one improvement, no-change, inconclusive rows, a metric
/// that is zero on both sides (no ratio) and a concurrency sweep.
fn decided_specs() -> Vec<Spec> {
    vec![
        ("untar", "total_s", "s", false, vec![around(10.0, 0.1), around(12.0, 0.1), around(10.0, 0.02)]),
        ("untar", "files_per_s", "files/s", true, vec![around(770.0, 8.0), around(640.0, 6.0), around(770.0, 2.0)]),
        ("untar", "user_s", "s", false, vec![vec![0.0; 5], vec![0.0; 5], vec![0.0; 5]]),
        ("untar", "sys_s", "s", false, vec![around(0.5, 0.1), around(0.55, 0.2), around(0.45, 0.15)]),
        (
            "shell1",
            "shell1-1",
            "loops/min",
            true,
            vec![around(1000.0, 10.0), around(1200.0, 10.0), around(1000.0, 90.0)],
        ),
        (
            "shell1",
            "shell1-2",
            "loops/min",
            true,
            vec![around(1900.0, 20.0), around(2300.0, 20.0), around(1900.0, 150.0)],
        ),
    ]
}

/// Nothing decided: every comparison is noisy and close.
fn undecided_specs() -> Vec<Spec> {
    vec![
        ("untar", "total_s", "s", false, vec![around(10.0, 1.5), around(10.4, 1.5), around(9.7, 1.8)]),
        ("untar", "sys_s", "s", false, vec![around(0.5, 0.1), around(0.55, 0.2), around(0.45, 0.15)]),
    ]
}

/// An ext4 variant on an SD-card-like throttle; the last one's image is
/// served as an SD card.
fn variant_config(name: &str, position: usize) -> VariantConfig {
    let mut testbed = TestbedConfig::new(FsKind::Ext4);
    testbed.size = Bytes(4 << 30);
    testbed.mkfs = vec!["-E".into(), "lazy_itable_init=0,lazy_journal_init=0".into()];
    testbed.mount = format!("noatime,mb_optimize_scan={}", position.min(1));
    testbed.throttle = Throttle {
        read_bps: Some(Bytes(20 << 20)),
        write_bps: Some(Bytes(20 << 20)),
        read_iops: None,
        write_iops: Some(500),
    };
    testbed.read_ahead_kb = Some(128);
    testbed.sysfs = (position == 1).then(|| ("mb_stream_req".to_string(), "16".to_string())).into_iter().collect();
    testbed.device = (position == VARIANTS.len() - 1).then(|| crate::media::presets::find("sdcard").expect("a preset"));
    VariantConfig { name: name.into(), testbed, kernel: None, vm: None }
}

/// The two three-variant fixtures: as the untar kind declares, total_s
/// decides it; shell1's sweep points all decide.
fn build(specs: Vec<Spec>, failures: &[(&str, &str, &str)]) -> ReportData {
    let mut d = assemble(Shape {
        id: 7,
        name: "sdcard <untar> & shell1",
        variants: &VARIANTS,
        workloads: &["untar", "shell1"],
        specs,
        failures,
        roles: Roles::default(),
    });
    let rows = std::mem::take(&mut d.comparison.rows);
    d.comparison.rows = rows
        .into_iter()
        .map(|r| ComparisonRow { decisive: r.workload != "untar" || r.metric == "total_s", ..r })
        .collect();
    d
}

fn assemble(shape: Shape) -> ReportData {
    let Shape { id, name, variants: names, workloads, specs, failures, roles } = shape;
    let mut series = Vec::new();
    let mut runs = Vec::new();
    // Stored seqs are 0-based plan positions, as in the store.
    let mut seq = 0;
    for (v, variant) in names.iter().enumerate() {
        for &workload in workloads {
            let mine: Vec<_> = specs.iter().filter(|s| s.0 == workload).collect();
            if mine.is_empty() {
                continue;
            }
            // A metric a variant never recorded has no series (as in the store).
            for s in mine.iter().filter(|s| !s.4[v].is_empty()) {
                series.push(MetricSeries {
                    workload: workload.into(),
                    metric: s.1.into(),
                    unit: s.2.into(),
                    higher_is_better: s.3,
                    variant: variant.to_string(),
                    values: s.4[v].clone(),
                });
            }
            for rep in 0..mine.iter().map(|s| s.4[v].len()).max().unwrap_or(0) {
                let metrics = mine
                    .iter()
                    .filter_map(|s| {
                        let value = *s.4[v].get(rep)?;
                        Some(Metric { name: s.1.into(), unit: s.2.into(), higher_is_better: s.3, value })
                    })
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
    let cfg = CompareConfig::default();
    let rows = compare_series(&series, names[0], &cfg, roles);
    let variants: Vec<serde_json::Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| serde_json::to_value(variant_config(n, i)).expect("a variant serializes"))
        .collect();
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
            id,
            name: name.into(),
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
            variants: names
                .iter()
                .enumerate()
                .map(|(i, n)| VariantRow { position: i, name: n.to_string(), config_json: variants[i].to_string() })
                .collect(),
            workloads: workloads
                .iter()
                .enumerate()
                .map(|(i, w)| WorkloadRow {
                    position: i,
                    label: w.to_string(),
                    kind: w.to_string(),
                    config_json: "{}".into(),
                })
                .collect(),
        },
        comparison: ComparisonData {
            baseline: names[0].into(),
            theta: cfg.theta,
            alpha: cfg.alpha,
            variants: names.iter().map(|v| v.to_string()).collect(),
            rows,
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

/// `(metric, unit, higher_is_better, optimize_scan=0's values, optimize_scan=1's)`
/// of the untar workload, run by run, as `fslab quickstart` stored them on
/// the development VM (5 runs each; `mean_max_free_order_*` only recorded
/// for =1, as there).
// One metric a line, as the store's rows read.
#[rustfmt::skip]
const QUICKSTART_RUNS: &[Recorded] = &[
    ("extract_s", "s", false, &[14.342, 22.084, 22.175, 23.113, 22.745], &[23.075, 23.348, 22.255, 23.006, 22.87]),
    ("sync_s", "s", false, &[5.1425, 5.3373, 5.4037, 5.3952, 5.3653], &[5.0856, 5.427, 5.4592, 5.3271, 5.5041]),
    ("total_s", "s", false, &[19.485, 27.422, 27.579, 28.509, 28.117], &[28.161, 28.775, 27.714, 28.334, 28.378]),
    ("files_per_s", "files/s", true, &[19.656, 13.967, 13.887, 13.435, 13.622], &[13.6, 13.31, 13.819, 13.518, 13.496]),
    ("media/requests", "count", false, &[63.0, 61.0, 62.0, 62.0, 62.0], &[58.0, 61.0, 65.0, 56.0, 50.0]),
    ("media/read_mb", "MB", false, &[0.008192, 0.012288, 0.008192, 0.008192, 0.008192], &[0.008192, 0.008192, 0.008192, 0.008192, 0.008192]),
    ("media/write_mb", "MB", false, &[11.592, 11.592, 11.592, 11.592, 11.592], &[11.592, 11.592, 11.592, 11.592, 11.592]),
    ("media/aus_opened", "count", false, &[13.0, 14.0, 14.0, 14.0, 14.0], &[13.0, 14.0, 14.0, 14.0, 15.0]),
    ("media/au_evictions", "count", false, &[13.0, 14.0, 14.0, 14.0, 14.0], &[13.0, 14.0, 14.0, 14.0, 15.0]),
    ("media/gc_mb", "MB", false, &[44.655, 48.849, 48.849, 48.849, 48.849], &[44.655, 48.849, 48.849, 48.849, 53.043]),
    ("media/write_amplification", "ratio", false, &[4.864, 5.2258, 5.2269, 5.2265, 5.2261], &[4.8629, 5.2261, 5.2276, 5.2265, 5.5905]),
    ("media/program_s", "s", false, &[2.2615, 2.2201, 2.2492, 2.2487, 2.2482], &[2.191, 2.2344, 2.2916, 2.1659, 2.0861]),
    ("media/gc_s", "s", false, &[2.8085, 3.0723, 3.0723, 3.0723, 3.0723], &[2.8085, 3.0723, 3.0723, 3.0723, 3.3361]),
    ("media/seek_s", "s", false, &[0.0, 0.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0, 0.0, 0.0]),
    ("media/transfer_s", "s", false, &[0.0018524, 0.0027785, 0.0018524, 0.0018524, 0.0018524], &[0.0018524, 0.0018524, 0.0018524, 0.0018524, 0.0018524]),
    ("media/busy_fraction", "ratio", false, &[0.26026, 0.1931, 0.19302, 0.1867, 0.18929], &[0.17756, 0.18448, 0.1936, 0.18494, 0.19113]),
    ("media/requests_4k", "count", false, &[12.0, 13.0, 12.0, 12.0, 12.0], &[11.0, 12.0, 14.0, 12.0, 11.0]),
    ("media/requests_8k", "count", false, &[4.0, 4.0, 4.0, 4.0, 4.0], &[3.0, 4.0, 4.0, 4.0, 3.0]),
    ("media/requests_16k", "count", false, &[6.0, 4.0, 4.0, 4.0, 4.0], &[4.0, 4.0, 5.0, 4.0, 4.0]),
    ("media/requests_32k", "count", false, &[3.0, 2.0, 3.0, 2.0, 2.0], &[2.0, 3.0, 3.0, 2.0, 2.0]),
    ("media/requests_64k", "count", false, &[3.0, 4.0, 3.0, 4.0, 4.0], &[3.0, 6.0, 4.0, 3.0, 2.0]),
    ("media/requests_128k", "count", false, &[11.0, 12.0, 12.0, 13.0, 12.0], &[10.0, 9.0, 12.0, 9.0, 7.0]),
    ("media/requests_256k", "count", false, &[7.0, 7.0, 7.0, 6.0, 7.0], &[8.0, 7.0, 6.0, 5.0, 6.0]),
    ("media/requests_512k", "count", false, &[9.0, 9.0, 9.0, 9.0, 9.0], &[9.0, 8.0, 10.0, 8.0, 7.0]),
    ("media/requests_1m", "count", false, &[8.0, 6.0, 8.0, 8.0, 8.0], &[8.0, 8.0, 7.0, 9.0, 8.0]),
    ("blk/read_p99_ms", "ms", false, &[14238.0, 21991.0, 22039.0, 23021.0, 22567.0], &[22984.0, 23198.0, 22114.0, 22806.0, 22713.0]),
    ("blk/write_p99_ms", "ms", false, &[2031.3, 2071.4, 2120.2, 2137.1, 2125.1], &[1980.0, 2158.9, 2149.0, 2102.4, 2608.5]),
    ("blk/sync_requests", "count", false, &[15.0, 15.0, 15.0, 15.0, 15.0], &[15.0, 15.0, 15.0, 15.0, 15.0]),
    ("blk/meta_requests", "count", false, &[17.0, 18.0, 17.0, 17.0, 17.0], &[17.0, 17.0, 17.0, 17.0, 17.0]),
    ("blk/fua_requests", "count", false, &[0.0, 0.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0, 0.0, 0.0]),
    ("disk/busy_s", "s", false, &[19.376, 27.32, 27.436, 28.404, 27.928], &[28.064, 28.624, 27.572, 28.124, 28.196]),
    ("disk/reads", "count", false, &[2.0, 3.0, 2.0, 2.0, 2.0], &[2.0, 2.0, 2.0, 2.0, 2.0]),
    ("disk/writes", "count", false, &[61.0, 58.0, 60.0, 60.0, 60.0], &[56.0, 59.0, 63.0, 54.0, 48.0]),
    ("disk/read_mb", "MiB", false, &[0.0078125, 0.011719, 0.0078125, 0.0078125, 0.0078125], &[0.0078125, 0.0078125, 0.0078125, 0.0078125, 0.0078125]),
    ("disk/written_mb", "MiB", false, &[11.055, 11.055, 11.055, 11.055, 11.055], &[11.055, 11.055, 11.055, 11.055, 11.055]),
    ("disk/mean_read_kb", "KiB", false, &[4.0, 4.0, 4.0, 4.0, 4.0], &[4.0, 4.0, 4.0, 4.0, 4.0]),
    ("disk/mean_write_kb", "KiB", false, &[185.57, 195.17, 188.67, 188.67, 188.67], &[202.14, 191.86, 179.68, 209.63, 235.83]),
    ("disk/flushes", "count", false, &[2.0, 2.0, 2.0, 2.0, 2.0], &[2.0, 2.0, 2.0, 2.0, 2.0]),
    ("cpu/user_pct", "%", false, &[35.642, 58.217, 57.877, 62.688, 65.641], &[44.016, 60.251, 54.856, 62.784, 65.837]),
    ("cpu/sys_pct", "%", false, &[14.913, 13.786, 16.222, 14.001, 13.228], &[16.623, 15.333, 17.92, 14.017, 11.17]),
    ("cpu/iowait_pct", "%", false, &[0.0, 0.036556, 0.018189, 0.0, 0.035403], &[0.05301, 0.068991, 0.018045, 0.017495, 0.0]),
    ("fs/ext4.groups_touched", "groups", false, &[2.0, 2.0, 2.0, 2.0, 2.0], &[2.0, 2.0, 2.0, 2.0, 2.0]),
    ("fs/ext4.free_fragments_delta", "count", false, &[1.0, 1.0, 1.0, 1.0, 1.0], &[1.0, 1.0, 1.0, 1.0, 1.0]),
    ("fs/ext4.free_fragments_after", "count", false, &[33.0, 33.0, 33.0, 33.0, 33.0], &[33.0, 33.0, 33.0, 33.0, 33.0]),
    ("fs/ext4.small_free_extents_delta", "count", false, &[6.0, 6.0, 6.0, 6.0, 6.0], &[6.0, 6.0, 6.0, 6.0, 6.0]),
    ("fs/ext4.mean_free_extent_blocks_after", "blocks", true, &[30562.0, 30578.0, 30578.0, 30578.0, 30578.0], &[30578.0, 30578.0, 30578.0, 30578.0, 30578.0]),
    ("fs/ext4.free_blocks_delta", "blocks", true, &[-3083.0, -2571.0, -2571.0, -2571.0, -2571.0], &[-2571.0, -2571.0, -2571.0, -2571.0, -2571.0]),
    ("fs/ext4.mean_max_free_order_after", "order", true, &[], &[13.0, 13.0, 13.0, 13.0, 13.0]),
    ("fs/ext4.mean_max_free_order_delta", "order", true, &[], &[0.0, 0.0, 0.0, 0.0, 0.0]),
];

/// The quickstart as it ran (examples/quickstart.toml: ext4 on the `sdcard`
/// model, mb_optimize_scan 0 vs 1): its 47 compared metrics, so the
/// terminal's answer is tested at the real size of its comparison, with the
/// untar kind deciding on total_s as in a real run.
pub fn quickstart() -> ReportData {
    let text = include_str!("../../examples/quickstart.toml");
    let exp = crate::experiment::parse(text, None).expect("the quickstart parses");
    let names: Vec<&str> = exp.variants.iter().map(|v| v.name.as_str()).collect();
    assemble(Shape {
        id: 1,
        name: &exp.name,
        variants: &names,
        workloads: &["untar"],
        specs: QUICKSTART_RUNS
            .iter()
            .map(|(metric, unit, higher, a, b)| ("untar", *metric, *unit, *higher, vec![a.to_vec(), b.to_vec()]))
            .collect(),
        failures: &[],
        roles: Roles { workloads: &exp.workloads, emulated_variants: &[] },
    })
}

/// The runs of a fixture, as the store returns them.
pub fn stored_runs(d: &ReportData) -> Vec<StoredRun> {
    d.runs.iter().map(|r| r.run.clone()).collect()
}

/// The `fslab compare` document of a fixture, its text in `detail`.
pub fn compare_report<'a>(d: &'a ReportData, runs: &'a [StoredRun], detail: Detail) -> CompareReport<'a> {
    CompareReport {
        experiment_id: d.experiment.id,
        experiment_name: &d.experiment.name,
        comparison: &d.comparison,
        runs,
        hostile: d.experiment.environment.doctor.as_ref().map(|doc| doc.hostile.clone()).unwrap_or_default(),
        places: d.places.clone(),
        detail,
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
