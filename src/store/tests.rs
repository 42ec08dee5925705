use super::export::{csv_field, to_csv, to_json, CSV_HEADER};
use super::*;
use crate::monitor::{CpuSample, IostatSample, MonitorData};
use crate::record::RunRecord;

fn variant(position: usize, name: &str) -> VariantRow {
    VariantRow {
        position,
        name: name.into(),
        config_json: format!("{{\"mkfs\":\"-O ^has_journal\",\"n\":{position}}}"),
    }
}

fn workload(position: usize, label: &str) -> WorkloadRow {
    WorkloadRow { position, label: label.into(), kind: "untar".into(), config_json: "{\"files\":1000}".into() }
}

fn new_exp(name: &str, hash: &str) -> NewExperiment {
    NewExperiment {
        name: name.into(),
        spec_path: Some("/tmp/exp.toml".into()),
        spec_text: "name = \"x\"\n".into(),
        spec_hash: hash.into(),
        seed: u64::MAX, // above i64::MAX on purpose
        plan_json: "[{\"seq\":0}]".into(),
        environment_json: "{\"kernel\":\"6.8.0\",\"cpus\":2}".into(),
        variants: vec![variant(0, "zeta"), variant(1, "alpha")],
        workloads: vec![workload(0, "second"), workload(1, "first")],
    }
}

fn run(seq: usize, round: usize, variant: &str, workload: &str, status: RunStatus, metrics: Vec<Metric>) -> RunRecord {
    RunRecord {
        seq,
        round,
        variant: variant.into(),
        workload: workload.into(),
        status: Some(status),
        error: (status == RunStatus::Failed).then(|| "mkfs failed".to_string()),
        started_at: 1_700_000_000.25 + seq as f64,
        wall_s: 12.5,
        metrics,
        monitor: None,
        mount: None,
        geometry: None,
        ..RunRecord::default()
    }
}

fn iostat(i: usize) -> IostatSample {
    // Every field distinct so a swapped column shows up.
    let b = i as f64 * 100.0;
    IostatSample {
        t_s: b + 1.0,
        r_s: b + 2.0,
        w_s: b + 3.0,
        d_s: b + 4.0,
        f_s: b + 5.0,
        rkb_s: b + 6.0,
        wkb_s: b + 7.0,
        dkb_s: b + 8.0,
        rrqm_s: b + 9.0,
        wrqm_s: b + 10.0,
        drqm_s: b + 11.0,
        rrqm_pct: b + 12.0,
        wrqm_pct: b + 13.0,
        drqm_pct: b + 14.0,
        r_await: b + 15.0,
        w_await: b + 16.0,
        d_await: b + 17.0,
        f_await: b + 18.0,
        aqu_sz: b + 19.0,
        rareq_sz: b + 20.0,
        wareq_sz: b + 21.0,
        dareq_sz: b + 22.0,
        util_pct: b + 23.5,
    }
}

fn cpu(i: usize) -> CpuSample {
    let b = i as f64 * 10.0;
    CpuSample {
        t_s: b + 0.5,
        user_pct: b + 1.0,
        nice_pct: b + 2.0,
        sys_pct: b + 3.0,
        iowait_pct: b + 4.0,
        irq_pct: b + 5.0,
        softirq_pct: b + 6.0,
        steal_pct: b + 7.0,
        idle_pct: b + 8.0,
        ..CpuSample::default()
    }
}

fn full_run(seq: usize) -> RunRecord {
    let mut r = run(
        seq,
        0,
        "zeta",
        "second",
        RunStatus::Ok,
        vec![Metric::lower("elapsed", "s", 61.25), Metric::higher("throughput", "MB/s", 88.5)],
    );
    r.mount = Some(MountFacts {
        source: "/dev/loop3".into(),
        fstype: "ext4".into(),
        mount_options: "rw,relatime".into(),
        super_options: "rw,data=ordered".into(),
        fs_options: Some("rw,delalloc,barrier".into()),
    });
    r.geometry = Some("Block size: 4096\nInode count: 65536\n".into());
    r.monitor = Some(MonitorData {
        device: Some("loop3".into()),
        interval_s: 1.0,
        disk: (0..3).map(iostat).collect(),
        cpu: (0..2).map(cpu).collect(),
        disk_totals: Some(DiskTotals {
            read_mb: 1.5,
            written_mb: 1024.25,
            discarded_mb: 0.0,
            reads: 12,
            writes: 1 << 40,
            discards: 0,
            flushes: 7,
            mean_read_kb: 128.0,
            mean_write_kb: 512.0,
            busy_s: 55.5,
            duration_s: 61.0,
        }),
    });
    r
}

fn count(store: &Store, table: &str) -> i64 {
    store.conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

fn err_text(e: anyhow::Error) -> String {
    format!("{e:#}")
}

#[test]
fn round_trip_full_run_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let record = full_run(0);
    let (exp_id, run_id) = {
        let mut store = Store::open(&path).unwrap();
        let exp_id = store.create_experiment(&new_exp("boot", "h1")).unwrap();
        let run_id = store.record_run(exp_id, &record).unwrap();
        (exp_id, run_id)
    };

    // Reopen: everything must come back from the file, not from memory.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(store.path(), Some(path.as_path()));
    let runs = store.runs(exp_id).unwrap();
    assert_eq!(runs.len(), 1);
    let got = &runs[0];
    assert_eq!(got.id, run_id);
    assert_eq!((got.seq, got.round), (0, 0));
    assert_eq!((got.variant.as_str(), got.workload.as_str()), ("zeta", "second"));
    assert_eq!(got.status, RunStatus::Ok);
    assert_eq!(got.error, None);
    assert_eq!(got.started_at, record.started_at);
    assert_eq!(got.wall_s, record.wall_s);
    assert_eq!(got.metrics, record.metrics);
    assert_eq!(got.mount, record.mount);
    assert_eq!(got.geometry, record.geometry);
    let monitor = record.monitor.as_ref().unwrap();
    assert_eq!(got.disk_totals, monitor.disk_totals);
    assert_eq!(&store.samples(run_id).unwrap(), monitor);
    assert_eq!(store.monitor(run_id).unwrap().as_ref(), Some(monitor));

    // Rollback journal, not WAL: the store is exactly one file.
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["results.db".to_string()]);
    let app_id: i64 = store.conn.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
    assert_eq!(app_id, schema::APPLICATION_ID);
}

#[test]
fn run_without_monitor_or_mount() {
    let mut store = Store::open_in_memory().unwrap();
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();
    let id = store.record_run(exp, &run(0, 0, "zeta", "first", RunStatus::Failed, vec![])).unwrap();
    let runs = store.runs(exp).unwrap();
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert_eq!(runs[0].error.as_deref(), Some("mkfs failed"));
    assert_eq!(runs[0].mount, None);
    assert_eq!(runs[0].disk_totals, None);
    assert_eq!(store.monitor(id).unwrap(), None);
    assert_eq!(store.samples(id).unwrap(), MonitorData::default());
    let e = err_text(store.samples(id + 100).unwrap_err());
    assert!(e.contains(&format!("no run {} in :memory:", id + 100)), "{e}");
}

#[test]
fn experiment_round_trip_and_status() {
    let mut store = Store::open_in_memory().unwrap();
    let new = new_exp("sdcard-untar", "abc123");
    let id = store.create_experiment(&new).unwrap();
    let e = store.experiment(id).unwrap();
    assert_eq!(e.id, id);
    assert_eq!(e.name, new.name);
    assert_eq!(e.status, "running");
    assert_eq!(e.finished_at, None);
    assert!(humantime::parse_rfc3339(&e.created_at).is_ok(), "{}", e.created_at);
    assert_eq!(e.spec_path, new.spec_path);
    assert_eq!(e.spec_text, new.spec_text);
    assert_eq!(e.spec_hash, new.spec_hash);
    assert_eq!(e.seed, u64::MAX);
    assert_eq!(e.plan_json, new.plan_json);
    assert_eq!(e.environment_json, new.environment_json);
    assert_eq!(e.variants, new.variants);
    assert_eq!(e.workloads, new.workloads);

    store.set_experiment_status(id, "interrupted").unwrap();
    let e = store.experiment(id).unwrap();
    assert_eq!(e.status, "interrupted");
    assert!(humantime::parse_rfc3339(e.finished_at.as_deref().unwrap()).is_ok());
    store.set_experiment_status(id, "running").unwrap();
    assert_eq!(store.experiment(id).unwrap().finished_at, None);
    store.set_experiment_status(id, "complete").unwrap();
    assert_eq!(store.experiment(id).unwrap().status, "complete");

    let e = err_text(store.set_experiment_status(id, "done").unwrap_err());
    assert!(e.contains("unknown experiment status \"done\""), "{e}");
    let e = err_text(store.set_experiment_status(42, "failed").unwrap_err());
    assert!(e.contains("no experiment 42 in :memory:"), "{e}");
    let e = err_text(store.experiment(42).unwrap_err());
    assert!(e.contains("no experiment 42 in :memory:"), "{e}");
    assert!(store.runs(42).is_err());
    assert!(store.metric_series(42).is_err());
}

#[test]
fn create_experiment_rejects_bad_json_and_duplicate_names() {
    let mut store = Store::open_in_memory().unwrap();
    let mut bad = new_exp("e", "h");
    bad.environment_json = "{not json".into();
    let e = err_text(store.create_experiment(&bad).unwrap_err());
    assert!(e.contains("environment_json of experiment \"e\" is not valid JSON"), "{e}");

    let mut dup = new_exp("e", "h");
    dup.variants.push(variant(2, "zeta"));
    assert!(store.create_experiment(&dup).is_err());
    // The transaction rolled back: no half-made experiment.
    assert_eq!(count(&store, "experiments"), 0);
    assert_eq!(count(&store, "workloads"), 0);
    assert_eq!(store.latest_experiment().unwrap(), None);
}

#[test]
fn record_run_is_atomic() {
    let mut store = Store::open_in_memory().unwrap();
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();

    // Fails halfway: the run row and the first metric insert fine, the
    // duplicate metric name violates UNIQUE(run_id, name).
    let mut broken = full_run(0);
    broken.metrics.push(Metric::lower("elapsed", "s", 1.0));
    let e = err_text(store.record_run(exp, &broken).unwrap_err());
    assert!(e.contains("run seq 0 of experiment"), "{e}");
    assert!(e.contains("\"elapsed\""), "{e}");
    for table in ["runs", "metrics", "disk_totals", "iostat_samples", "cpu_samples"] {
        assert_eq!(count(&store, table), 0, "{table} not rolled back");
    }

    // An ok run at seq 0, then a duplicate ok seq: refused, original intact.
    let first = full_run(0);
    let id = store.record_run(exp, &first).unwrap();
    let mut again = full_run(0);
    again.metrics = vec![Metric::lower("elapsed", "s", 999.0)];
    let e = err_text(store.record_run(exp, &again).unwrap_err());
    assert!(e.contains("already recorded as ok"), "{e}");
    let runs = store.runs(exp).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, id);
    assert_eq!(runs[0].metrics, first.metrics);
    assert_eq!(count(&store, "iostat_samples"), 3);
    assert_eq!(count(&store, "cpu_samples"), 2);
}

#[test]
fn record_run_input_errors() {
    let mut store = Store::open_in_memory().unwrap();
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();
    let mut no_status = run(0, 0, "zeta", "first", RunStatus::Ok, vec![]);
    no_status.status = None;
    let e = err_text(store.record_run(exp, &no_status).unwrap_err());
    assert!(e.contains("has no status"), "{e}");
    let e = err_text(store.record_run(exp + 1, &run(0, 0, "zeta", "first", RunStatus::Ok, vec![])).unwrap_err());
    assert!(e.contains(&format!("no experiment {} in :memory:", exp + 1)), "{e}");
}

#[test]
fn failed_run_is_replaced_but_ok_run_is_not() {
    let mut store = Store::open_in_memory().unwrap();
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();

    // A failed run with monitor data, so replacement must clear its samples.
    let mut failed = full_run(3);
    failed.status = Some(RunStatus::Failed);
    failed.error = Some("workload crashed".into());
    failed.metrics = vec![Metric::lower("elapsed", "s", 5.0)];
    let failed_id = store.record_run(exp, &failed).unwrap();

    // A replacement that fails halfway leaves the failed run in place.
    let mut broken = full_run(3);
    broken.metrics.push(Metric::lower("elapsed", "s", 1.0));
    assert!(store.record_run(exp, &broken).is_err());
    let runs = store.runs(exp).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].id, runs[0].status), (failed_id, RunStatus::Failed));
    assert_eq!(count(&store, "iostat_samples"), 3);

    // The retry replaces it.
    let mut ok = run(3, 1, "alpha", "first", RunStatus::Ok, vec![Metric::lower("elapsed", "s", 60.0)]);
    ok.monitor =
        Some(MonitorData { device: None, interval_s: 0.5, disk: vec![iostat(9)], cpu: vec![], disk_totals: None });
    let ok_id = store.record_run(exp, &ok).unwrap();
    let runs = store.runs(exp).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, ok_id);
    assert_eq!(runs[0].status, RunStatus::Ok);
    assert_eq!(runs[0].error, None);
    assert_eq!(runs[0].round, 1);
    assert_eq!(runs[0].metrics, ok.metrics);
    assert_eq!(runs[0].disk_totals, None);
    assert_eq!(count(&store, "iostat_samples"), 1, "old samples must be gone");
    assert_eq!(count(&store, "cpu_samples"), 0);
    assert_eq!(count(&store, "disk_totals"), 0);
    assert_eq!(&store.samples(ok_id).unwrap(), ok.monitor.as_ref().unwrap());

    // Neither a failed nor an ok run may replace the ok one.
    let e = err_text(store.record_run(exp, &run(3, 2, "alpha", "first", RunStatus::Failed, vec![])).unwrap_err());
    assert!(e.contains("run seq 3 of experiment") && e.contains("never replaced"), "{e}");
    let e = err_text(store.record_run(exp, &run(3, 2, "alpha", "first", RunStatus::Ok, vec![])).unwrap_err());
    assert!(e.contains("already recorded as ok"), "{e}");
    assert_eq!(store.runs(exp).unwrap()[0].id, ok_id);

    // A failed run may be replaced by another failure (resume retried and failed again).
    store.record_run(exp, &run(4, 0, "zeta", "first", RunStatus::Failed, vec![])).unwrap();
    store.record_run(exp, &run(4, 0, "zeta", "first", RunStatus::Failed, vec![])).unwrap();
    assert_eq!(store.runs(exp).unwrap().len(), 2);
}

#[test]
fn older_schema_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let exp = {
        let mut old = Store::open_at(&path, 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), 1);
        // create_experiment only touches v1 tables.
        let exp = old.create_experiment(&new_exp("legacy", "h")).unwrap();
        // A run as v1 code would have written it (no monitor columns yet).
        old.conn
            .execute(
                "INSERT INTO runs (experiment_id, seq, round, variant, workload, status, started_at, wall_s)
                 VALUES (?1, 0, 0, 'zeta', 'second', 'ok', 1.0, 2.0)",
                [exp],
            )
            .unwrap();
        let run_id = old.conn.last_insert_rowid();
        old.conn
            .execute(
                "INSERT INTO metrics (run_id, position, name, unit, higher_is_better, value)
                 VALUES (?1, 0, 'elapsed', 's', 0, 3.5)",
                [run_id],
            )
            .unwrap();
        exp
    };

    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let runs = store.runs(exp).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].metrics, vec![Metric::lower("elapsed", "s", 3.5)]);
    assert_eq!(runs[0].disk_totals, None);
    assert_eq!(store.monitor(runs[0].id).unwrap(), None);
    // And the upgraded file takes new-style runs.
    let id = store.record_run(exp, &full_run(1)).unwrap();
    assert_eq!(store.samples(id).unwrap().disk.len(), 3);

    // Opening again is a no-op.
    drop(store);
    assert_eq!(Store::open(&path).unwrap().schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn newer_schema_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(Store::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!("PRAGMA user_version = {};", SCHEMA_VERSION + 1)).unwrap();
    }
    let e = err_text(Store::open(&path).err().unwrap());
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains(&format!("schema version {}", SCHEMA_VERSION + 1)), "{e}");
    assert!(e.contains("newer than this fslab understands"), "{e}");
}

#[test]
fn foreign_files_are_rejected() {
    let dir = tempfile::tempdir().unwrap();

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x);").unwrap();
    let e = err_text(Store::open(&other).err().unwrap());
    assert!(e.contains("not an fslab store") && e.contains("other.db"), "{e}");

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not a database, just some text that is long enough to look like a header").unwrap();
    let e = err_text(Store::open(&text).err().unwrap());
    assert!(e.contains("notes.txt"), "{e}");

    let missing = dir.path().join("no/such/dir/x.db");
    let e = err_text(Store::open(&missing).err().unwrap());
    assert!(e.contains("no/such/dir/x.db"), "{e}");
}

#[test]
fn find_unfinished_latest_and_list() {
    let mut store = Store::open_in_memory().unwrap();
    assert_eq!(store.latest_experiment().unwrap(), None);
    assert_eq!(store.find_unfinished("boot", "h1").unwrap(), None);

    let a = store.create_experiment(&new_exp("boot", "h1")).unwrap();
    let b = store.create_experiment(&new_exp("boot", "h1")).unwrap();
    let other_hash = store.create_experiment(&new_exp("boot", "h2")).unwrap();
    let other_name = store.create_experiment(&new_exp("untar", "h1")).unwrap();
    assert_eq!(store.latest_experiment().unwrap(), Some(other_name));

    assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(b));
    store.set_experiment_status(b, "complete").unwrap();
    assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(a));
    store.set_experiment_status(a, "failed").unwrap();
    assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(a), "failed experiments can be resumed");
    store.set_experiment_status(a, "complete").unwrap();
    assert_eq!(store.find_unfinished("boot", "h1").unwrap(), None);
    assert_eq!(store.find_unfinished("boot", "h2").unwrap(), Some(other_hash));
    assert_eq!(store.find_unfinished("boot", "h3").unwrap(), None);

    store.record_run(a, &run(0, 0, "zeta", "first", RunStatus::Ok, vec![])).unwrap();
    store.record_run(a, &run(1, 0, "alpha", "first", RunStatus::Ok, vec![])).unwrap();
    store.record_run(a, &run(2, 0, "zeta", "second", RunStatus::Failed, vec![])).unwrap();
    let list = store.list_experiments().unwrap();
    assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), vec![a, b, other_hash, other_name]);
    assert_eq!((list[0].runs_ok, list[0].runs_failed), (2, 1));
    assert_eq!((list[1].runs_ok, list[1].runs_failed), (0, 0));
    assert_eq!(list[0].name, "boot");
    assert_eq!(list[0].status, "complete");
    assert_eq!(list[3].status, "running");
}

#[test]
fn metric_series_order_and_failed_runs_excluded() {
    let mut store = Store::open_in_memory().unwrap();
    // Variants: zeta (0), alpha (1); workloads: second (0), first (1) —
    // position order differs from name order on purpose.
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();
    let m = |t: f64, r: f64| vec![Metric::lower("time", "s", t), Metric::higher("rate", "MB/s", r)];
    let mut seq = 0;
    let mut add = |store: &mut Store, round, v: &str, w: &str, status, metrics| {
        store.record_run(exp, &run(seq, round, v, w, status, metrics)).unwrap();
        seq += 1;
    };
    // Interleaved, plus a failed run that still reported metrics.
    add(&mut store, 0, "alpha", "first", RunStatus::Ok, m(1.0, 10.0));
    add(&mut store, 0, "zeta", "first", RunStatus::Ok, m(2.0, 20.0));
    add(&mut store, 0, "alpha", "second", RunStatus::Ok, m(3.0, 30.0));
    add(&mut store, 0, "zeta", "second", RunStatus::Failed, m(999.0, 999.0));
    add(&mut store, 1, "alpha", "first", RunStatus::Ok, m(1.5, 15.0));
    add(&mut store, 1, "zeta", "first", RunStatus::Ok, m(2.5, 25.0));
    add(&mut store, 1, "alpha", "second", RunStatus::Ok, vec![Metric::lower("time", "s", f64::NAN)]);
    add(&mut store, 1, "zeta", "second", RunStatus::Ok, m(4.0, 40.0));

    let series = store.metric_series(exp).unwrap();
    let got: Vec<(&str, &str, &str, Vec<f64>)> =
        series.iter().map(|s| (s.workload.as_str(), s.metric.as_str(), s.variant.as_str(), s.values.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("second", "rate", "zeta", vec![40.0]),
            ("second", "rate", "alpha", vec![30.0]),
            ("second", "time", "zeta", vec![4.0]),
            ("second", "time", "alpha", vec![3.0]), // NaN left out
            ("first", "rate", "zeta", vec![20.0, 25.0]),
            ("first", "rate", "alpha", vec![10.0, 15.0]),
            ("first", "time", "zeta", vec![2.0, 2.5]),
            ("first", "time", "alpha", vec![1.0, 1.5]),
        ]
    );
    let rate = &series[0];
    assert_eq!((rate.unit.as_str(), rate.higher_is_better), ("MB/s", true));
    let time = &series[2];
    assert_eq!((time.unit.as_str(), time.higher_is_better), ("s", false));

    // NaN survives the round trip through runs().
    let runs = store.runs(exp).unwrap();
    assert!(runs[6].metrics[0].value.is_nan());
}

#[test]
fn csv_field_quoting() {
    assert_eq!(csv_field("plain"), "plain");
    assert_eq!(csv_field(""), "");
    assert_eq!(csv_field("with space"), "with space");
    assert_eq!(csv_field("a,b"), "\"a,b\"");
    assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    assert_eq!(csv_field("cr\rhere"), "\"cr\rhere\"");
    assert_eq!(csv_field("\""), "\"\"\"\"");
}

/// Minimal RFC 4180 reader, to check the writer's output parses back.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(field.is_empty() && row.is_empty(), "CSV must end with a newline");
    rows
}

#[test]
fn csv_export_quotes_awkward_names() {
    let mut store = Store::open_in_memory().unwrap();
    let mut new = new_exp("sd card, \"slow\"", "h");
    new.variants = vec![variant(0, "ext4\ndefaults")];
    new.workloads = vec![workload(0, "untar,linux")];
    let exp = store.create_experiment(&new).unwrap();
    store
        .record_run(
            exp,
            &run(
                0,
                0,
                "ext4\ndefaults",
                "untar,linux",
                RunStatus::Ok,
                vec![Metric::lower("elapsed, total", "s", 61.25), Metric::higher("rate", "\"MB\"/s", 3.0)],
            ),
        )
        .unwrap();
    store.record_run(exp, &run(1, 0, "ext4\ndefaults", "untar,linux", RunStatus::Failed, vec![])).unwrap();

    let csv = to_csv(&store, exp).unwrap();
    let rows = parse_csv(&csv);
    assert_eq!(rows[0], CSV_HEADER.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(rows.len(), 4);
    let id = exp.to_string();
    assert_eq!(
        rows[1],
        vec![
            &id,
            "sd card, \"slow\"",
            "0",
            "0",
            "ext4\ndefaults",
            "untar,linux",
            "ok",
            "elapsed, total",
            "s",
            "false",
            "61.25"
        ]
    );
    assert_eq!(
        rows[2],
        vec![
            &id,
            "sd card, \"slow\"",
            "0",
            "0",
            "ext4\ndefaults",
            "untar,linux",
            "ok",
            "rate",
            "\"MB\"/s",
            "true",
            "3"
        ]
    );
    // The failed run without metrics still shows up.
    assert_eq!(
        rows[3],
        vec![&id, "sd card, \"slow\"", "1", "0", "ext4\ndefaults", "untar,linux", "failed", "", "", "", ""]
    );
}

#[test]
fn json_export_parses_back_with_expected_keys() {
    let mut store = Store::open_in_memory().unwrap();
    let exp = store.create_experiment(&new_exp("boot", "h")).unwrap();
    store.record_run(exp, &full_run(0)).unwrap();
    store.record_run(exp, &run(1, 0, "alpha", "first", RunStatus::Failed, vec![])).unwrap();
    store.set_experiment_status(exp, "complete").unwrap();

    let text = to_json(&store, exp).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let e = &v["experiment"];
    for key in ["id", "name", "created_at", "finished_at", "status", "seed", "environment", "plan", "spec_hash"] {
        assert!(e.get(key).is_some(), "experiment.{key} missing in {text}");
    }
    assert_eq!(e["id"], exp);
    assert_eq!(e["name"], "boot");
    assert_eq!(e["status"], "complete");
    assert_eq!(e["seed"].as_u64(), Some(u64::MAX));
    assert_eq!(e["environment"]["kernel"], "6.8.0", "environment must be parsed JSON");
    assert_eq!(e["variants"][1]["name"], "alpha");
    assert_eq!(e["workloads"][0]["config"]["files"], 1000);

    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        for key in [
            "seq",
            "round",
            "variant",
            "workload",
            "status",
            "error",
            "started_at",
            "wall_s",
            "metrics",
            "disk_totals",
            "mount",
        ] {
            assert!(r.get(key).is_some(), "run.{key} missing in {r}");
        }
    }
    let ok = &runs[0];
    assert_eq!(ok["status"], "ok");
    assert_eq!(ok["metrics"][0]["name"], "elapsed");
    assert_eq!(ok["metrics"][0]["unit"], "s");
    assert_eq!(ok["metrics"][0]["higher_is_better"], false);
    assert_eq!(ok["metrics"][0]["value"], 61.25);
    assert_eq!(ok["disk_totals"]["writes"], 1u64 << 40);
    assert_eq!(ok["mount"]["fstype"], "ext4");
    let failed = &runs[1];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"], "mkfs failed");
    assert!(failed["disk_totals"].is_null());
    assert!(failed["mount"].is_null());
    assert_eq!(failed["metrics"].as_array().unwrap().len(), 0);

    let e = err_text(to_json(&store, exp + 1).unwrap_err());
    assert!(e.contains("no experiment"), "{e}");
}
