//! The `filemix` workload: validation of its keys, and real runs on an ext4
//! and a tmpfs testbed (small sizes, 2 s per level).

use crate::common;

use std::time::{Duration, Instant};

use fslab::experiment::{self, WorkloadParams};
use fslab::workload::filemix::FilemixParams;

use crate::common::bed::*;

/// Testbed tests run one at a time: they measure, and this machine has 2 cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ------------------------------------------------------------- validation

#[test]
fn defaults_and_explicit_keys() {
    assert_eq!(
        params("kind = \"filemix\""),
        WorkloadParams::Filemix(FilemixParams {
            users: vec![1, 8],
            duration: Duration::from_secs(60),
            seed: None,
            working_set: 1 << 20
        })
    );
    assert_eq!(
        params("kind = \"filemix\"\nusers = [1, 8, 16, 41]\nduration = \"5s\"\nseed = 42\nworking_set = \"256KiB\""),
        WorkloadParams::Filemix(FilemixParams {
            users: vec![1, 8, 16, 41],
            duration: Duration::from_secs(5),
            seed: Some(42),
            working_set: 256 << 10
        })
    );
    let exp = experiment::parse(&spec("fs = \"tmpfs\"", "kind = \"filemix\""), None).unwrap();
    assert_eq!(exp.workloads[0].kind(), "filemix");
    // Only `filemix-<users>` metrics exist, all decisive.
    assert!(exp.workloads[0].is_decisive("filemix-8"));
    assert_eq!(exp.workloads[0].build(exp.seed).kind(), "filemix");
}

#[test]
fn bad_keys_are_rejected_with_file_line_and_key() {
    // `kind` is on line 7, the first key after it on line 8.
    let cases: &[(&str, usize, &str)] = &[
        ("kind = \"filemix\"\nusers = [1, 0]", 8, "users"),
        ("kind = \"filemix\"\nusers = []", 8, "users"),
        ("kind = \"filemix\"\nusers = [8, 8]", 8, "users"),
        ("kind = \"filemix\"\nusers = [100000]", 8, "users"),
        ("kind = \"filemix\"\nduration = \"10ms\"", 8, "duration"),
        ("kind = \"filemix\"\nusers = [1]\nseed = -1", 9, "seed"),
        ("kind = \"filemix\"\nworking_set = \"1k\"", 8, "working_set"),
        ("kind = \"filemix\"\nworking_set = \"2GiB\"", 8, "working_set"),
        ("kind = \"filemix\"\nfiles = 10", 8, "files"),
        ("kind = \"filemix\"\nconcurrency = [1]", 8, "concurrency"),
        ("kind = \"shell1\"\nusers = [1]", 8, "users"),
        ("kind = \"metadata\"\nworking_set = \"1MiB\"", 8, "working_set"),
        ("kind = \"untar\"\nseed = 3", 8, "seed"),
    ];
    for (workload, line, key) in cases {
        let err = error_of(workload);
        assert!(err.contains(&format!("exp.toml:{line}:")), "expected line {line} in: {err}");
        assert!(err.contains(&format!("`{key}`")), "expected key `{key}` in: {err}");
    }
    let err = error_of("kind = \"reaim\"");
    assert!(err.contains("filemix"), "{err}");
}

// ----------------------------------------------------------- real testbeds

#[test]
fn timing_filemix_on_ext4_with_one_and_four_users() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"ext4\"\nsize = \"128MiB\"");
    let start = Instant::now();
    let m = run_on(&bed, "kind = \"filemix\"\nusers = [1, 4]\nduration = \"2s\"\nworking_set = \"256KiB\"");
    let took = start.elapsed().as_secs_f64();
    eprintln!("filemix on ext4: {m:?} in {took:.2}s");
    assert_eq!(m.len(), 2, "{m:?}");
    for name in ["filemix-1", "filemix-4"] {
        let x = metric(&m, name);
        assert_eq!(x.unit, "jobs/min");
        assert!(x.higher_is_better);
        assert!(x.value > 0.0 && x.value.is_finite(), "{m:?}");
    }
    // Two levels of 2 s each, plus preparation and a sync between them.
    assert!((4.0..30.0).contains(&took), "two 2 s levels took {took:.2}s");
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}

#[test]
fn more_users_do_more_jobs_on_tmpfs() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    // tmpfs has no device to wait on, so this is CPU-bound: with a free
    // second core four users beat one (1.9x measured on an idle 2-core
    // box). Tolerant: only "more", up to three attempts, and on a machine
    // already busier than its cores only "no collapse".
    let mut ratios = Vec::new();
    for attempt in 0..3 {
        let m =
            run_on(&bed, "kind = \"filemix\"\nusers = [1, 4]\nduration = \"2s\"\nworking_set = \"256KiB\"\nseed = 9");
        let (one, four) = (metric(&m, "filemix-1").value, metric(&m, "filemix-4").value);
        eprintln!(
            "filemix on tmpfs, attempt {}: 1 user {one:.0} jobs/min, 4 users {four:.0} ({:.2}x)",
            attempt + 1,
            four / one
        );
        assert!(one > 1000.0, "{m:?}");
        assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
        ratios.push(four / one);
        if four > one {
            return;
        }
    }
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(load >= cores, "4 users never beat 1 user on an idle machine (load {load}, {cores} cores): {ratios:?}");
    eprintln!("NOTE: machine busy (load {load:.1} on {cores} cores); 4 vs 1 user ratios {ratios:?}");
    assert!(ratios.iter().any(|&r| r > 0.5), "4 users collapsed against 1: {ratios:?}");
}

#[test]
fn a_passed_deadline_stops_the_users_and_cleanup_still_empties_the_testbed() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let exp = experiment::parse(&spec("fs = \"tmpfs\"", "kind = \"filemix\"\nusers = [3]\nduration = \"30s\""), None)
        .unwrap();
    let mut w = exp.workloads[0].build(exp.seed);
    let ctx = bed.ctx();
    w.prepare(&ctx).unwrap();
    let late = ctx.clone().with_deadline(Some(Instant::now() + Duration::from_millis(300)));
    let start = Instant::now();
    let err = format!("{:#}", w.run(&late).expect_err("the deadline passes long before 30 s"));
    fslab::testsupport::did_not_hang(start, Duration::from_secs(5), "filemix past its deadline");
    assert!(err.contains("timed out"), "{err}");
    w.cleanup(&ctx).unwrap();
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}
