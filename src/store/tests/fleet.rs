//! Tags, machine identity, campaigns and shards, concurrent writers.

use std::process::Command;

use super::*;
use crate::inspect::machine::Machine;
use crate::stored::ExperimentStatus;

fn machine(host: &str) -> Machine {
    Machine {
        hostname: host.into(),
        product_name: Some("ThinkPad X1".into()),
        cpu_model: Some("Intel(R) Core(TM) i7-8565U".into()),
        cpus: 8,
        memory_bytes: 16 << 30,
        kernel_release: "6.8.0-1".into(),
        device_model: Some("Samsung SSD 980".into()),
    }
}

#[test]
fn tags_are_added_once_listed_sorted_and_searchable() {
    for db in test_dbs("tags") {
        let mut store = db.open();
        let a = store.create_experiment(&new_exp("a", "h")).unwrap();
        let b = store.create_experiment(&new_exp("b", "h")).unwrap();
        let t = |k: &str, v: &str| (k.to_string(), v.to_string());
        store.add_tags(a, &[t("kernel", "6.8"), t("hostname", "b2"), t("hostname", "a1")]).unwrap();
        store.add_tags(a, &[t("kernel", "6.8")]).unwrap();
        store.add_tags(b, &[t("kernel", "6.9"), t("hostname", "a1")]).unwrap();
        assert_eq!(store.tags(a).unwrap(), vec![t("hostname", "a1"), t("hostname", "b2"), t("kernel", "6.8")]);
        assert_eq!(store.experiments_tagged(&[t("hostname", "a1")]).unwrap(), vec![a, b]);
        assert_eq!(store.experiments_tagged(&[t("hostname", "a1"), t("kernel", "6.9")]).unwrap(), vec![b]);
        assert_eq!(store.experiments_tagged(&[]).unwrap(), vec![a, b]);
        assert_eq!(store.experiment(a).unwrap().tags.len(), 3);

        let e = err_text(store.add_tags(a, &[t("Bad Key", "x")]).unwrap_err());
        assert!(e.contains("tag key \"Bad Key\""), "{e}");
        let e = err_text(store.add_tags(b + 10, &[t("k", "v")]).unwrap_err());
        assert!(e.contains(&format!("no experiment {}", b + 10)), "{e}");
    }
    assert_eq!(parse_tag("ci.run=42").unwrap(), ("ci.run".into(), "42".into()));
    assert_eq!(parse_tag("note=a=b").unwrap(), ("note".into(), "a=b".into()));
    assert!(parse_tag("novalue").is_err());
    let m = machine("h1");
    let auto = automatic_tags(&m);
    assert!(auto.contains(&("kernel".into(), "6.8.0-1".into())) && auto.contains(&("hostname".into(), "h1".into())));
    assert!(auto.iter().any(|(k, v)| k == "fslab" && v == env!("CARGO_PKG_VERSION")));
}

#[test]
fn runs_carry_their_machine() {
    for db in test_dbs("machines") {
        let mut store = db.open();
        let e = store.create_experiment(&new_exp("e", "h")).unwrap();
        let (m1, m2) = (machine("box1"), machine("box2"));
        let m1_new_kernel = Machine { kernel_release: "6.9.0".into(), ..m1.clone() };
        store.set_recording_context(RecordingContext { machine: Some(m1.clone()), shard: None });
        let r0 = store
            .record_run(e, &run(0, 0, "zeta", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 1.0)]))
            .unwrap();
        store.record_run(e, &run(1, 0, "alpha", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 2.0)])).unwrap();
        let ctx2 = RecordingContext { machine: Some(m2.clone()), shard: None };
        store
            .record_run_with(e, &run(2, 1, "zeta", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 3.0)]), &ctx2)
            .unwrap();
        let ctx3 = RecordingContext { machine: Some(m1_new_kernel.clone()), shard: None };
        store
            .record_run_with(e, &run(3, 1, "alpha", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 4.0)]), &ctx3)
            .unwrap();

        let machine = store.run_machine(r0).unwrap().unwrap();
        assert_eq!(machine.machine, m1);
        assert_eq!(machine.fingerprint, m1.fingerprint());
        let used = store.machines(e).unwrap();
        assert_eq!(used.len(), 3, "{used:?}");
        assert_eq!((used[0].machine.machine.hostname.as_str(), used[0].runs), ("box1", 2));
        assert_eq!(used[0].variants, vec!["alpha".to_string(), "zeta".to_string()]);
        assert_eq!(used[1].machine.machine, m2);
        assert_eq!(used[2].machine.hardware, used[0].machine.hardware, "a new kernel is the same hardware");
        assert_eq!(count(&store, "machines"), 3);
        let groups = store.hardware_groups(e).unwrap();
        assert_eq!(groups.iter().map(|g| (g.runs, g.machines.len())).collect::<Vec<_>>(), vec![(3, 2), (1, 1)]);
        assert!(groups[0].describe().starts_with("box1 (ThinkPad X1;"), "{}", groups[0].describe());
        assert!(groups[0].describe().ends_with("kernel 6.8.0-1), also kernel 6.9.0"), "{}", groups[0].describe());

        let values = |s: Vec<MetricSeries>| s.into_iter().map(|s| (s.variant, s.values)).collect::<Vec<_>>();
        assert_eq!(
            values(store.metric_series_on(e, &m1.hardware()).unwrap()),
            vec![("zeta".to_string(), vec![1.0]), ("alpha".to_string(), vec![2.0, 4.0])]
        );
        assert_eq!(values(store.metric_series_on(e, &m2.hardware()).unwrap()), vec![("zeta".to_string(), vec![3.0])]);
        assert_eq!(store.metric_series(e).unwrap().len(), 2);
    }
}

#[test]
fn shards_join_one_campaign_experiment() {
    for db in test_dbs("campaign") {
        let mut a = db.open();
        let mut b = db.open();
        let new = new_exp("fleet", "spec1");
        let (s1, s2, s3) = (Shard { index: 1, count: 3 }, Shard { index: 2, count: 3 }, Shard { index: 3, count: 3 });
        let id = a.join_campaign(&new, "c1", s1, Some(&machine("h1"))).unwrap();
        assert_eq!(b.join_campaign(&new, "c1", s2, Some(&machine("h2"))).unwrap(), id);
        assert_eq!(a.find_campaign("c1").unwrap(), Some(id));
        assert_eq!(a.find_campaign("c2").unwrap(), None);
        assert_eq!(count(&a, "experiments"), 1);
        let meta = a.experiment(id).unwrap();
        assert_eq!((meta.campaign.as_deref(), meta.shard_count), (Some("c1"), Some(3)));
        assert!(
            meta.tags.contains(&("hostname".into(), "h1".into()))
                && meta.tags.contains(&("hostname".into(), "h2".into()))
        );
        // Not a campaign for resume purposes.
        assert_eq!(a.find_unfinished("fleet", "spec1").unwrap(), None);

        let st = a.campaign_status(id).unwrap().unwrap();
        assert_eq!((st.missing.clone(), st.running.clone()), (vec![3], vec![1, 2]));
        assert!(!st.is_complete());
        assert!(st.describe().contains("0/3 shards complete; missing 3; running 1, 2"), "{}", st.describe());

        // Runs recorded by a shard carry it and beat its heartbeat.
        a.set_recording_context(RecordingContext { machine: Some(machine("h1")), shard: Some(s1) });
        let r = a.record_run(id, &run(0, 0, "zeta", "first", RunStatus::Ok, vec![])).unwrap();
        assert_eq!(a.run(r).unwrap().shard, Some(1));
        // The runner's usual end of experiment ends only this shard.
        a.set_experiment_status(id, ExperimentStatus::Complete).unwrap();
        assert_eq!(a.experiment(id).unwrap().status, ExperimentStatus::Running, "shards 2 and 3 are not done");
        b.finish_shard(id, 2, ExperimentStatus::Interrupted).unwrap();
        let st = a.campaign_status(id).unwrap().unwrap();
        assert_eq!((st.missing.clone(), st.running.clone(), st.unfinished.clone()), (vec![3], vec![], vec![2]));
        let states: Vec<ExperimentStatus> = st.shards.iter().map(|s| s.state).collect();
        assert_eq!(states, [ExperimentStatus::Complete, ExperimentStatus::Interrupted]);

        // A killed shard rejoins; the last one joins; all complete.
        assert_eq!(b.join_campaign(&new, "c1", s2, Some(&machine("h2"))).unwrap(), id);
        b.finish_shard(id, 2, ExperimentStatus::Complete).unwrap();
        let mut c = db.open();
        assert_eq!(c.join_campaign(&new, "c1", s3, None).unwrap(), id);
        assert_eq!(a.experiment(id).unwrap().status, ExperimentStatus::Running);
        c.finish_shard(id, 3, ExperimentStatus::Complete).unwrap();
        let e = a.experiment(id).unwrap();
        assert_eq!(e.status, ExperimentStatus::Complete);
        assert!(e.finished_at.is_some());
        assert!(a.campaign_status(id).unwrap().unwrap().is_complete());

        // A different file or shard count cannot join.
        let e = err_text(c.join_campaign(&new_exp("fleet", "spec2"), "c1", s1, None).unwrap_err());
        assert!(e.contains("different experiment file"), "{e}");
        let e = err_text(c.join_campaign(&new, "c1", Shard { index: 1, count: 4 }, None).unwrap_err());
        assert!(e.contains("runs as 3 shards, not 4"), "{e}");
        // Shard states are read as the status enum.
        let states: Vec<ExperimentStatus> =
            c.campaign_status(id).unwrap().unwrap().shards.iter().map(|s| s.state).collect();
        assert_eq!(states, [ExperimentStatus::Complete; 3]);
        let plain = c.create_experiment(&new_exp("plain", "x")).unwrap();
        assert_eq!(c.campaign_status(plain).unwrap(), None);
        assert!(err_text(c.shard_heartbeat(plain, 1).unwrap_err()).contains("never joined"));
    }
}

/// Environment of a [`writer_child`] process.
const CHILD_DB: &str = "FSLAB_TEST_WRITER_DB";
const CHILD_SHARD: &str = "FSLAB_TEST_WRITER_SHARD";
/// Unix time in milliseconds at which all writers start, so they overlap.
const CHILD_START: &str = "FSLAB_TEST_WRITER_START";

fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
}
/// Runs in the concurrent campaign, and samples per run.
const CONCURRENT_RUNS: usize = 24;

/// The run every writer produces for `seq`: identical in every process.
fn concurrent_run(seq: usize) -> RunRecord {
    let mut r = full_run_with(seq, 20, 20);
    r.metrics = vec![Metric::lower("elapsed", "s", seq as f64 + 0.5)];
    r
}

/// Not a test by itself: the body of one writer process of
/// [`concurrent_writers_produce_exactly_the_full_set`], which starts this
/// test binary four times with the environment above (without it, this
/// does nothing). Each writer joins the campaign, writes its own slice, then
/// tries every other seq too (identical content), so writers race on the
/// same rows.
#[test]
#[ignore]
fn writer_child() {
    let (Ok(db), Ok(shard)) = (std::env::var(CHILD_DB), std::env::var(CHILD_SHARD)) else { return };
    let shard: Shard = shard.parse().unwrap();
    let start: u128 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    let mut store = Store::open(&StoreLocation::parse(&db)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(u64::try_from(start.saturating_sub(now_ms())).unwrap()));
    let began = now_ms();
    let id = store.join_campaign(&new_exp("race", "h"), "race-1", shard, Some(&machine("racer"))).unwrap();
    store.set_recording_context(RecordingContext { machine: Some(machine("racer")), shard: None });
    let mine: Vec<usize> = (0..CONCURRENT_RUNS).filter(|s| s % shard.count == shard.index - 1).collect();
    let others: Vec<usize> = (0..CONCURRENT_RUNS).rev().filter(|s| !mine.contains(s)).collect();
    for seq in mine.iter().chain(&others) {
        store.record_run(id, &concurrent_run(*seq)).unwrap_or_else(|e| panic!("seq {seq}: {e:#}"));
    }
    store.finish_shard(id, shard.index, ExperimentStatus::Complete).unwrap();
    println!("writer window {began} {}", now_ms());
}

fn concurrent_writers(db: &TestDb) {
    let exe = std::env::current_exe().unwrap();
    let start = now_ms() + 1500;
    let children: Vec<_> = (1..=4)
        .map(|k| {
            Command::new(&exe)
                .args(["--exact", "store::tests::fleet::writer_child", "--ignored", "--nocapture", "--test-threads=1"])
                .env(
                    CHILD_DB,
                    match &db.location {
                        StoreLocation::Sqlite(p) => p.display().to_string(),
                        StoreLocation::Postgres(u) => u.clone(),
                    },
                )
                .env(CHILD_SHARD, format!("{k}/4"))
                .env(CHILD_START, start.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // All four run at once; collect them only now.
    let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for (k, out) in outputs.iter().enumerate() {
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "writer {} failed on {}:\n{text}", k + 1, db.backend);
        assert!(text.contains("1 passed"), "writer {} ran nothing:\n{text}", k + 1);
    }
    // The writers really ran at the same time (else this tests nothing).
    let windows: Vec<(u128, u128)> = outputs
        .iter()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout);
            let line = text.lines().find_map(|l| l.split("writer window ").nth(1)).expect("window line").to_string();
            let (a, b) = line.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    let latest_start = windows.iter().map(|w| w.0).max().unwrap();
    let earliest_end = windows.iter().map(|w| w.1).min().unwrap();
    eprintln!("{}: writer windows {windows:?}", db.backend);
    assert!(latest_start < earliest_end, "writers did not overlap: {windows:?}");
    let store = db.open();
    let list = store.list_experiments().unwrap();
    assert_eq!(list.len(), 1, "one campaign, one experiment: {list:?}");
    let id = list[0].id;
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.iter().map(|r| r.seq).collect::<Vec<_>>(), (0..CONCURRENT_RUNS).collect::<Vec<_>>());
    for r in &runs {
        assert_eq!(json(&store.run_record(r.id).unwrap()), json(&concurrent_run(r.seq)), "seq {}", r.seq);
    }
    assert_eq!(count(&store, "iostat_samples"), (CONCURRENT_RUNS * 20) as i64, "no duplicate samples");
    assert_eq!(count(&store, "metrics"), CONCURRENT_RUNS as i64);
    assert_eq!(count(&store, "machines"), 1);
    assert_eq!(store.experiment(id).unwrap().status, ExperimentStatus::Complete);
    assert!(store.campaign_status(id).unwrap().unwrap().is_complete());
}

#[test]
fn concurrent_writers_produce_exactly_the_full_set() {
    if let Some(db) = pg_db("concurrent") {
        concurrent_writers(&db);
    }
}

#[test]
fn concurrent_writers_on_one_sqlite_file() {
    concurrent_writers(&sqlite_db("concurrent"));
}
