//! The store benchmark (BENCHMARKS.md): not a test, ignored by default.
//!
//! ```text
//! FSLAB_BENCH_POSTGRES=postgresql://postgres@127.0.0.1:PORT/postgres \
//!   cargo test --release --lib store::tests::bench -- --ignored --nocapture
//! ```
//!
//! Measures (1) run-write latency and throughput with full monitor samples
//! (60 iostat + 60 CPU samples per run), one writer and four, and (2) the
//! time to load a comparison (`metric_series` + the statistics) over 10k
//! and 100k stored runs, in one big experiment and as the newest of many
//! 100-run experiments. SQLite files live in `FSLAB_BENCH_DIR` (default
//! /var/tmp). The PostgreSQL server should be a durable one (fsync on).

use std::time::{Duration, Instant};

use super::runs::{put_run, Existing, WholeRun};
use super::*;
use crate::analysis::compare_series;
use crate::inspect::machine::Machine;
use crate::stats::CompareConfig;

/// A monitored run; samples are copies of two distinct ones (making every
/// sample distinct costs more than writing it).
fn bench_run(seq: usize, variant: &str) -> RunRecord {
    use std::sync::OnceLock;
    static TEMPLATE: OnceLock<RunRecord> = OnceLock::new();
    let mut r = TEMPLATE.get_or_init(|| full_run_with(0, 1, 1)).clone();
    let m = r.monitor.as_mut().unwrap();
    m.disk = (0..60).map(|i| IostatSample { t_s: i as f64, ..m.disk[0].clone() }).collect();
    m.cpu = (0..60).map(|i| CpuSample { t_s: i as f64, ..m.cpu[0].clone() }).collect();
    r.seq = seq;
    r.started_at += seq as f64;
    r.variant = variant.into();
    r.workload = "first".into();
    r.metrics = (0..4).map(|i| Metric::lower(&format!("m{i}"), "s", 10.0 + (seq % 7) as f64 + i as f64)).collect();
    r
}

fn locations(tag: &str) -> Vec<(String, StoreLocation, Option<TestDb>)> {
    let dir = std::env::var("FSLAB_BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into());
    let path = std::path::Path::new(&dir).join(format!("fslab-bench-{tag}-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut v = vec![("sqlite".to_string(), StoreLocation::Sqlite(path), None)];
    if let Ok(url) = std::env::var("FSLAB_BENCH_POSTGRES") {
        let schema = unique(tag);
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
        let guard = TestDb {
            location: StoreLocation::Postgres(with_schema(&url, &schema)),
            backend: "postgres",
            _dir: None,
            pg_schema: Some((url, schema)),
        };
        v.push(("postgres".into(), guard.location.clone(), Some(guard)));
    }
    v
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn write_bench() {
    const RUNS: usize = 300;
    for (backend, loc, _guard) in locations("write") {
        let mut store = Store::open(&loc).unwrap();
        let e = store.create_experiment(&new_exp("bench", "h")).unwrap();
        let runs: Vec<RunRecord> = (0..RUNS).map(|s| bench_run(s, "zeta")).collect();
        let mut lat = Vec::with_capacity(RUNS);
        let t0 = Instant::now();
        for r in &runs {
            let t = Instant::now();
            store.record_run(e, r).unwrap();
            lat.push(t.elapsed());
        }
        let total = t0.elapsed();
        lat.sort();
        println!(
            "BENCH write {backend} 1 writer: {RUNS} runs in {:.2} s = {:.0} runs/s; latency p50 {:.2} ms p95 {:.2} ms max {:.2} ms",
            total.as_secs_f64(),
            RUNS as f64 / total.as_secs_f64(),
            pct(&lat, 0.5),
            pct(&lat, 0.95),
            pct(&lat, 1.0)
        );

        // Four writers at once, each its own connection and slice of seqs.
        let e = store.create_experiment(&new_exp("bench4", "h")).unwrap();
        let stores: Vec<Store> = (0..4).map(|_| Store::open(&loc).unwrap()).collect();
        let t0 = Instant::now();
        let handles: Vec<_> = stores
            .into_iter()
            .enumerate()
            .map(|(k, mut s)| {
                let mine: Vec<RunRecord> = runs.iter().skip(k).step_by(4).cloned().collect();
                std::thread::spawn(move || {
                    for r in &mine {
                        s.record_run(e, r).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let total = t0.elapsed();
        println!(
            "BENCH write {backend} 4 writers: {RUNS} runs in {:.2} s = {:.0} runs/s",
            total.as_secs_f64(),
            RUNS as f64 / total.as_secs_f64()
        );
        if let StoreLocation::Sqlite(p) = &loc {
            println!(
                "BENCH size sqlite: {:.1} KiB per run",
                std::fs::metadata(p).unwrap().len() as f64 / 1024.0 / (2 * RUNS) as f64
            );
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Run `s` of a bench experiment, 4 metrics and no samples, recorded on
/// `(machine, shard)` if given.
fn lean_run(s: usize, on: Option<(&Machine, usize)>) -> WholeRun<'_> {
    let mut r = bench_run(s, if s.is_multiple_of(2) { "zeta" } else { "alpha" });
    r.status = Some(RunStatus::Ok);
    r.monitor = None;
    r.extras.clear();
    r.notes.clear();
    WholeRun {
        record: std::borrow::Cow::Owned(r),
        uuid: Some(uuid::Uuid::new_v4().to_string().into()),
        shard: on.map(|(_, k)| k),
        machine: on.map(|(m, _)| std::borrow::Cow::Borrowed(m)),
    }
}

/// Writes `runs` into experiment `e` in one transaction.
fn put_all(store: &mut Store, e: i64, runs: &[WholeRun]) {
    store
        .write(|q| {
            for r in runs {
                put_run(q, e, r, Existing::Record)?;
            }
            Ok(())
        })
        .unwrap();
}

/// Fills `store` with `experiments` × `per` runs (4 metrics, no samples), in
/// big transactions (population is not what is measured).
fn populate(store: &mut Store, experiments: usize, per: usize) -> i64 {
    let mut last = 0;
    for x in 0..experiments {
        let e = store.create_experiment(&new_exp(&format!("exp{x}"), "h")).unwrap();
        last = e;
        for chunk in (0..per).collect::<Vec<_>>().chunks(2000) {
            let runs: Vec<WholeRun> = chunk.iter().map(|&s| lean_run(s, None)).collect();
            put_all(store, e, &runs);
        }
    }
    last
}

fn time_compare(store: &Store, e: i64) -> (f64, f64, usize) {
    let mut best = (f64::MAX, f64::MAX, 0);
    for _ in 0..3 {
        let t = Instant::now();
        let series = store.metric_series(e).unwrap();
        let load = t.elapsed().as_secs_f64();
        let rows = compare_series(&series, "zeta", &CompareConfig::default(), Default::default());
        let all = t.elapsed().as_secs_f64();
        if all < best.1 {
            best = (load, all, rows.len());
        }
    }
    best
}

fn compare_bench() {
    let sizes: Vec<usize> = std::env::var("FSLAB_BENCH_SIZES")
        .map(|v| v.split(',').map(|n| n.trim().parse().expect("FSLAB_BENCH_SIZES: numbers")).collect())
        .unwrap_or_else(|_| vec![10_000, 100_000]);
    for total in sizes {
        for (backend, loc, _guard) in locations(&format!("cmp{total}")) {
            // One experiment holding every run.
            let mut store = Store::open(&loc).unwrap();
            let t = Instant::now();
            let e = populate(&mut store, 1, total);
            let fill = t.elapsed().as_secs_f64();
            let (load, all, rows) = time_compare(&store, e);
            println!(
                "BENCH compare {backend} one experiment of {total} runs: metric_series {:.0} ms, +stats {:.0} ms ({rows} rows; filled in {fill:.0} s)",
                load * 1000.0,
                all * 1000.0
            );
            // Right after a bulk load PostgreSQL's planner statistics are
            // stale until autovacuum's ANALYZE; time the steady state too.
            if backend == "postgres" {
                store.write(|q| q.batch("ANALYZE")).unwrap();
                let (load, all, _) = time_compare(&store, e);
                println!(
                    "BENCH compare {backend} one experiment of {total} runs after ANALYZE: metric_series {:.0} ms, +stats {:.0} ms",
                    load * 1000.0,
                    all * 1000.0
                );
            }
            let t = Instant::now();
            let n = store.runs(e).unwrap().len();
            println!("BENCH runs() {backend} {n} runs: {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
            // The same number of runs as 100-run experiments; compare the newest.
            let many_locations = locations(&format!("many{total}"));
            let many_loc = &many_locations.iter().find(|l| l.0 == backend).unwrap().1;
            let mut many = Store::open(many_loc).unwrap();
            let last = populate(&mut many, total / 100, 100);
            let (load, all, _) = time_compare(&many, last);
            println!(
                "BENCH compare {backend} newest of {} experiments ({total} runs): metric_series {:.1} ms, +stats {:.1} ms",
                total / 100,
                load * 1000.0,
                all * 1000.0
            );
            let t = Instant::now();
            let n = many.list_experiments().unwrap().len();
            println!("BENCH list {backend} {n} experiments: {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
            for l in [&loc, many.store_location().unwrap()] {
                if let StoreLocation::Sqlite(p) = l {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }
}

/// `fslab compare` end to end over a campaign (BENCHMARKS.md): 4 shards
/// on 4 machines, blocks of both variants dealt round-robin as `--shard`
/// deals them, `total` runs. Times the binary `FSLAB_BENCH_BIN` (default
/// target/release/fslab) and, in process, the per-machine comparison
/// `compare --across-machines` is the opposite of (hardware_groups +
/// metric_series_on + statistics for each machine).
fn fleet_bench() {
    let bin = std::env::var("FSLAB_BENCH_BIN")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/fslab").to_string());
    let sizes: Vec<usize> = std::env::var("FSLAB_BENCH_SIZES")
        .map(|v| v.split(',').map(|n| n.trim().parse().expect("FSLAB_BENCH_SIZES: numbers")).collect())
        .unwrap_or_else(|_| vec![10_000, 100_000]);
    let machines: Vec<Machine> =
        (1..=4).map(|k| Machine { hostname: format!("node{k}"), ..Machine::capture(None) }).collect();
    for total in sizes {
        for (backend, loc, _guard) in locations(&format!("fleet{total}")) {
            let mut store = Store::open(&loc).unwrap();
            let new = new_exp("fleet", "h");
            let mut e = 0;
            for (k, m) in machines.iter().enumerate() {
                e = store.join_campaign(&new, "bench", Shard { index: k + 1, count: 4 }, Some(m)).unwrap();
            }
            let t = Instant::now();
            for chunk in (0..total).collect::<Vec<_>>().chunks(2000) {
                let runs: Vec<WholeRun> = chunk
                    .iter()
                    .map(|&s| {
                        let k = (s / 2) % 4;
                        lean_run(s, Some((&machines[k], k + 1)))
                    })
                    .collect();
                put_all(&mut store, e, &runs);
            }
            for k in 1..=4 {
                store.finish_shard(e, k, ExperimentStatus::Complete).unwrap();
            }
            if backend == "postgres" {
                store.write(|q| q.batch("ANALYZE")).unwrap();
            }
            let fill = t.elapsed().as_secs_f64();
            let db = match &loc {
                StoreLocation::Sqlite(p) => p.display().to_string(),
                StoreLocation::Postgres(url) => url.clone(),
            };
            let mut cli = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                let out = std::process::Command::new(&bin)
                    .args(["compare", "--baseline", "zeta", "--db", &db])
                    .env_remove("FSLAB_DB")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{bin} compare: {}", String::from_utf8_lossy(&out.stderr));
                cli = cli.min(t.elapsed().as_secs_f64());
            }
            let mut per_machine = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                let groups = store.hardware_groups(e).unwrap();
                assert_eq!(groups.len(), 4);
                for g in &groups {
                    let series = store.metric_series_on(e, &g.hardware).unwrap();
                    compare_series(&series, "zeta", &CompareConfig::default(), Default::default());
                }
                per_machine = per_machine.min(t.elapsed().as_secs_f64());
            }
            let t = Instant::now();
            let status = store.campaign_status(e).unwrap().unwrap();
            let status_ms = t.elapsed().as_secs_f64() * 1000.0;
            assert!(status.is_complete());
            println!(
                "BENCH fleet {backend} campaign of {total} runs on 4 machines: `fslab compare` {:.0} ms; \
                 per machine in process {:.0} ms; campaign_status {status_ms:.1} ms (filled in {fill:.0} s)",
                cli * 1000.0,
                per_machine * 1000.0
            );
            if let StoreLocation::Sqlite(p) = &loc {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

#[test]
#[ignore]
fn store_benchmark() {
    if std::env::var("FSLAB_BENCH_ONLY").map_or(true, |v| v == "write") {
        write_bench();
    }
    if std::env::var("FSLAB_BENCH_ONLY").map_or(true, |v| v == "compare") {
        compare_bench();
    }
    if std::env::var("FSLAB_BENCH_ONLY").map_or(true, |v| v == "fleet") {
        fleet_bench();
    }
}
