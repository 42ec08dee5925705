//! Experiments and runs: writing, reading back, replacing, schema upgrades.

use super::*;
use crate::store::sql::params;
use crate::stored::ExperimentStatus;

#[test]
fn round_trip_full_run() {
    for db in test_dbs("round_trip") {
        let record = full_run(0);
        let (exp_id, run_id) = {
            let mut store = db.open();
            let exp_id = store.create_experiment(&new_exp("boot", "h1")).unwrap();
            let run_id = store.record_run(exp_id, &record).unwrap();
            (exp_id, run_id)
        };

        // Reopen: everything must come back from the database, not from memory.
        let store = Store::open_existing(&db.location).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
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
        // The whole record, extras included, comes back as it went in.
        assert_eq!(json(&store.run_record(run_id).unwrap()), json(&record), "{}", db.backend);
        let stored = store.run(run_id).unwrap();
        assert_eq!(&stored, got);
        assert!(uuid::Uuid::parse_str(&stored.uuid).is_ok(), "{stored:?}");
        assert_eq!((stored.shard, store.run_machine(run_id).unwrap()), (None, None));
    }
}

#[test]
fn sqlite_store_is_one_file_marked_as_fslab() {
    let db = sqlite_db("one_file");
    let path = db.location.sqlite_path().unwrap().to_path_buf();
    let mut store = db.open();
    let e = store.create_experiment(&new_exp("boot", "h1")).unwrap();
    store.record_run(e, &full_run(0)).unwrap();
    assert_eq!(store.path(), Some(path.as_path()));
    // Rollback journal, not WAL: the store is exactly one file.
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![path.file_name().unwrap().to_string_lossy().into_owned()]);
    let app_id: i64 = store.read(|q| q.query_one("PRAGMA application_id", &[])?.get(0)).unwrap();
    assert_eq!(app_id, schema::APPLICATION_ID);
}

#[test]
fn run_without_monitor_or_mount() {
    for db in test_dbs("no_monitor") {
        let mut store = db.open();
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
        assert!(e.contains(&format!("no run {} in {}", id + 100, store.location())), "{e}");
    }
}

#[test]
fn experiment_round_trip_and_status() {
    for db in test_dbs("exp_status") {
        let mut store = db.open();
        let loc = store.location();
        let new = new_exp("sdcard-untar", "abc123");
        let id = store.create_experiment(&new).unwrap();
        let e = store.experiment(id).unwrap();
        assert_eq!(e.id, id);
        assert_eq!(e.name, new.name);
        assert_eq!(e.status, ExperimentStatus::Running);
        assert_eq!(e.finished_at, None);
        assert!(humantime::parse_rfc3339(&e.created_at).is_ok(), "{}", e.created_at);
        assert_eq!(e.spec_path, new.spec_path);
        assert_eq!(e.spec_text, new.spec_text);
        assert_eq!(e.spec_hash, new.spec_hash);
        assert_eq!(e.seed, u64::MAX);
        assert_eq!(e.plan, new.plan);
        assert_eq!(e.environment, new.environment);
        assert_eq!(e.variants, new.variants);
        assert_eq!(e.workloads, new.workloads);
        let meta = store.experiment(id).unwrap();
        assert!(uuid::Uuid::parse_str(&meta.uuid).is_ok());
        assert_eq!(store.experiment_by_uuid(&meta.uuid).unwrap(), Some(id));
        assert_eq!((meta.campaign, meta.shard_count, meta.tags.len()), (None, None, 0));

        store.set_experiment_status(id, ExperimentStatus::Interrupted).unwrap();
        let e = store.experiment(id).unwrap();
        assert_eq!(e.status, ExperimentStatus::Interrupted);
        assert!(humantime::parse_rfc3339(e.finished_at.as_deref().unwrap()).is_ok());
        store.set_experiment_status(id, ExperimentStatus::Running).unwrap();
        assert_eq!(store.experiment(id).unwrap().finished_at, None);
        store.set_experiment_status(id, ExperimentStatus::Complete).unwrap();
        assert_eq!(store.experiment(id).unwrap().status, ExperimentStatus::Complete);

        // Every finished status is written and read back as the enum, by the row and by the list.
        for status in [ExperimentStatus::Failed, ExperimentStatus::Interrupted, ExperimentStatus::Complete] {
            store.set_experiment_status(id, status).unwrap();
            assert_eq!(store.experiment(id).unwrap().status, status);
            assert_eq!(store.list_experiments().unwrap().iter().find(|e| e.id == id).unwrap().status, status);
        }
        let e = err_text(store.set_experiment_status(id + 42, ExperimentStatus::Failed).unwrap_err());
        assert!(e.contains(&format!("no experiment {} in {loc}", id + 42)), "{e}");
        let e = err_text(store.experiment(id + 42).unwrap_err());
        assert!(e.contains(&format!("no experiment {} in {loc}", id + 42)), "{e}");
        assert!(store.runs(id + 42).is_err());
        assert!(store.metric_series(id + 42).is_err());
    }
}

#[test]
fn a_stored_document_that_does_not_parse_names_experiment_and_field() {
    for db in test_dbs("bad_doc") {
        let mut store = db.open();
        let id = store.create_experiment(&new_exp("e", "h")).unwrap();
        store
            .write(|q| {
                q.execute(
                    "UPDATE experiments SET environment_json = ?1 WHERE id = ?2",
                    params![r#"{"kernels":{"a":{"place":"vm","release":3}}}"#, id],
                )
            })
            .unwrap();
        let e = err_text(store.experiment(id).unwrap_err());
        assert!(
            e.contains(&format!("experiment {id}: stored environment does not parse at `kernels.a.release`")),
            "{e}"
        );
        let e = err_text(store.list_experiments().unwrap_err());
        assert!(e.contains(&format!("experiment {id}: stored environment")), "{e}");
    }
}

#[test]
fn create_experiment_rejects_duplicate_names() {
    for db in test_dbs("bad_json") {
        let mut store = db.open();
        let mut dup = new_exp("e", "h");
        dup.variants.push(variant(2, "zeta"));
        let e = err_text(store.create_experiment(&dup).unwrap_err());
        assert!(e.contains("variant \"zeta\" (position 2)"), "{e}");
        // The transaction rolled back: no half-made experiment.
        assert_eq!(count(&store, "experiments"), 0);
        assert_eq!(count(&store, "workloads"), 0);
        assert_eq!(store.latest_experiment().unwrap(), None);
    }
}

#[test]
fn record_run_is_atomic() {
    for db in test_dbs("atomic") {
        let mut store = db.open();
        let exp = store.create_experiment(&new_exp("e", "h")).unwrap();

        // Fails halfway: the run row and the first metric insert fine, the
        // duplicate metric name violates UNIQUE(run_id, name).
        let mut broken = full_run(0);
        broken.metrics.push(Metric::lower("elapsed", "s", 1.0));
        let e = err_text(store.record_run(exp, &broken).unwrap_err());
        assert!(e.contains("run 1 (seq 0) of experiment"), "{e}");
        assert!(e.contains("\"elapsed\""), "{e}");
        for table in ["runs", "metrics", "disk_totals", "iostat_samples", "cpu_samples", "run_extras"] {
            assert_eq!(count(&store, table), 0, "{table} not rolled back on {}", db.backend);
        }

        // An ok run at seq 0, then a different ok run at that seq: refused, original intact.
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

        // The same run again (a write whose acknowledgement was lost) is a no-op.
        assert_eq!(store.record_run(exp, &first).unwrap(), id);
        assert_eq!(count(&store, "runs"), 1);
        assert_eq!(count(&store, "iostat_samples"), 3);
    }
}

#[test]
fn record_run_input_errors() {
    for db in test_dbs("input_errors") {
        let mut store = db.open();
        let exp = store.create_experiment(&new_exp("e", "h")).unwrap();
        let mut no_status = run(0, 0, "zeta", "first", RunStatus::Ok, vec![]);
        no_status.status = None;
        let e = err_text(store.record_run(exp, &no_status).unwrap_err());
        assert!(e.contains("has no status"), "{e}");
        let e = err_text(store.record_run(exp + 1, &run(0, 0, "zeta", "first", RunStatus::Ok, vec![])).unwrap_err());
        assert!(e.contains(&format!("no experiment {} in {}", exp + 1, store.location())), "{e}");
    }
}

#[test]
fn failed_run_is_replaced_but_ok_run_is_not() {
    for db in test_dbs("replace") {
        let mut store = db.open();
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
        assert_eq!(count(&store, "run_extras"), 0);
        assert_eq!(&store.samples(ok_id).unwrap(), ok.monitor.as_ref().unwrap());

        // Neither a failed nor a different ok run may replace the ok one.
        let e = err_text(store.record_run(exp, &run(3, 2, "alpha", "first", RunStatus::Failed, vec![])).unwrap_err());
        assert!(e.contains("run 4 (seq 3) of experiment") && e.contains("never replaced"), "{e}");
        let e = err_text(store.record_run(exp, &run(3, 2, "alpha", "first", RunStatus::Ok, vec![])).unwrap_err());
        assert!(e.contains("already recorded as ok"), "{e}");
        assert_eq!(store.runs(exp).unwrap()[0].id, ok_id);

        // A failed run may be replaced by another failure (resume retried and failed again).
        store.record_run(exp, &run(4, 0, "zeta", "first", RunStatus::Failed, vec![])).unwrap();
        let mut again = run(4, 0, "zeta", "first", RunStatus::Failed, vec![]);
        again.error = Some("failed differently".into());
        store.record_run(exp, &again).unwrap();
        let runs = store.runs(exp).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].error.as_deref(), Some("failed differently"));
    }
}

#[test]
fn v5_turns_legacy_documents_into_typed_ones() {
    for db in test_dbs("v5_docs") {
        let exp = {
            let mut old = Store::open_at(&db.location, 4, Create::Yes).unwrap();
            old.write(|q| {
                q.execute(
                    "INSERT INTO experiments (uuid, name, created_at, status, spec_path, spec_text, spec_hash, seed,
                                              plan_json, environment_json)
                     VALUES ('u-v5', 'legacy', '2024-01-01T00:00:00Z', 'complete', NULL, 'x', 'h', '7',
                             '[{\"seq\":0},{\"seq\":1}]', 'null')",
                    &[],
                )?;
                q.query_one("SELECT max(id) FROM experiments", &[])?.get::<i64, _>(0)
            })
            .unwrap()
        };
        let store = Store::open_existing(&db.location).unwrap();
        let e = store.experiment(exp).unwrap();
        assert_eq!(e.plan.first_rounds, vec![serde_json::json!({"seq": 0}), serde_json::json!({"seq": 1})]);
        assert_eq!(e.environment, crate::stored::StoredEnvironment::default());
    }
}

#[test]
fn older_schema_is_upgraded() {
    for db in test_dbs("upgrade") {
        let exp = {
            let mut old = Store::open_at(&db.location, 1, Create::Yes).unwrap();
            assert_eq!(old.schema_version().unwrap(), 1);
            // A v1 experiment and run as v1 code wrote them (no uuid, no monitor columns).
            old.write(|q| {
                q.execute(
                    "INSERT INTO experiments (name, created_at, status, spec_path, spec_text, spec_hash, seed,
                                              plan_json, environment_json)
                     VALUES ('legacy', '2024-01-01T00:00:00Z', 'complete', NULL, 'x', 'h', '7', '[]', '{}')",
                    &[],
                )?;
                let exp: i64 = q.query_one("SELECT max(id) FROM experiments", &[])?.get(0)?;
                q.execute(
                    "INSERT INTO variants (experiment_id, position, name, config_json) VALUES (?1, 0, 'zeta', '{}')",
                    params![exp],
                )?;
                q.execute(
                    "INSERT INTO runs (experiment_id, seq, round, variant, workload, status, started_at, wall_s)
                     VALUES (?1, 0, 0, 'zeta', 'second', 'ok', 1.0, 2.0)",
                    params![exp],
                )?;
                let run: i64 = q.query_one("SELECT max(id) FROM runs", &[])?.get(0)?;
                q.execute(
                    "INSERT INTO metrics (run_id, position, name, unit, higher_is_better, value)
                     VALUES (?1, 0, 'elapsed', 's', 0, 3.5)",
                    params![run],
                )?;
                Ok(exp)
            })
            .unwrap()
        };
        // Also at v3, with a CPU sample as v3 wrote it (no guest columns).
        {
            let mut v3 = Store::open_at(&db.location, 3, Create::No).unwrap();
            assert_eq!(v3.schema_version().unwrap(), 3);
            v3.write(|q| {
                let run: i64 = q.query_one("SELECT max(id) FROM runs", &[])?.get(0)?;
                q.execute("UPDATE runs SET has_monitor = 1, monitor_interval_s = 1.0 WHERE id = ?1", params![run])?;
                q.execute(
                    "INSERT INTO cpu_samples (run_id, idx, t_s, user_pct) VALUES (?1, 0, 1.0, 50.0)",
                    params![run],
                )
            })
            .unwrap();
        }

        let mut store = Store::open_existing(&db.location).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        // v5: the legacy plan (a bare run list) reads as a typed plan.
        let legacy = store.experiment(exp).unwrap();
        assert_eq!((legacy.status, legacy.plan.first_rounds.len()), (ExperimentStatus::Complete, 0));
        let runs = store.runs(exp).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].metrics, vec![Metric::lower("elapsed", "s", 3.5)]);
        assert_eq!(runs[0].disk_totals, None);
        let cpu = &store.samples(runs[0].id).unwrap().cpu[0];
        assert_eq!((cpu.user_pct, cpu.guest_pct, cpu.guest_nice_pct), (50.0, 0.0, 0.0), "old rows read 0 guest time");
        // Identities were derived from content: a second copy upgrades to the same uuids.
        let meta = store.experiment(exp).unwrap();
        let expected = schema::derived_uuid(
            "experiment",
            &["legacy".into(), "2024-01-01T00:00:00Z".into(), "h".into(), "7".into(), exp.to_string()],
        );
        assert_eq!(meta.uuid, expected);
        assert_eq!(runs[0].uuid, schema::derived_uuid("run", &[expected, "0".into()]));
        // And the upgraded store takes new-style runs.
        let id = store.record_run(exp, &full_run(1)).unwrap();
        assert_eq!(store.samples(id).unwrap().disk.len(), 3);

        // Opening again is a no-op.
        drop(store);
        assert_eq!(db.open().schema_version().unwrap(), SCHEMA_VERSION);
    }
}

#[test]
fn newer_schema_is_rejected() {
    for db in test_dbs("future") {
        let mut store = db.open();
        let bump = format!("{}", SCHEMA_VERSION + 1);
        if db.is_postgres() {
            store.write(|q| q.execute(&format!("UPDATE fslab_schema SET version = {bump}"), &[])).unwrap();
        } else {
            store.read(|q| q.batch(&format!("PRAGMA user_version = {bump};"))).unwrap();
        }
        drop(store);
        let e = err_text(Store::open(&db.location).err().unwrap());
        assert!(e.contains(&db.location.to_string()), "{e}");
        assert!(e.contains(&format!("schema version {bump}")), "{e}");
        assert!(e.contains("newer than this fslab understands"), "{e}");
    }
}

#[test]
fn foreign_sqlite_files_are_rejected() {
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
fn open_existing_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.db");
    let e = err_text(Store::open_existing(&typo).err().unwrap());
    assert!(e.contains("typo.db does not exist"), "{e}");
    assert!(!typo.exists(), "open_existing must not create the file");
    std::fs::write(&typo, "").unwrap();
    let e = err_text(Store::open_existing(&typo).err().unwrap());
    assert!(e.contains("holds no fslab store"), "{e}");

    if let Some(db) = pg_db("existing") {
        let e = err_text(Store::open_existing(&db.location).err().unwrap());
        assert!(e.contains("holds no fslab store"), "{e}");
        // A database of someone else's with an `experiments` table is not ours.
        let (url, schema) = db.pg_schema.clone().unwrap();
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE TABLE {schema}.experiments (x int)")).unwrap();
        let e = err_text(Store::open(&db.location).err().unwrap());
        assert!(e.contains("not an fslab store"), "{e}");
        // An unreachable server is named, without the password.
        let e = err_text(Store::open("postgres://u:secret@127.0.0.1:1/x").err().unwrap());
        assert!(
            e.contains("cannot connect to PostgreSQL at postgres://u:***@127.0.0.1:1/x") && !e.contains("secret"),
            "{e}"
        );
    }
}

#[test]
fn fresh_postgres_database_migrates_once_under_concurrency() {
    let Some(db) = pg_db("migrate_race") else { return };
    // Four processes' worth of connections open a fresh database at once.
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let loc = db.location.clone();
            std::thread::spawn(move || {
                Store::open(&loc).map(|s| s.schema_version().unwrap()).map_err(|e| format!("{e:#}"))
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Ok(SCHEMA_VERSION));
    }
    let store = db.open();
    assert_eq!(count(&store, "fslab_schema"), 1);
}

#[test]
fn find_unfinished_latest_and_list() {
    for db in test_dbs("unfinished") {
        let mut store = db.open();
        assert_eq!(store.latest_experiment().unwrap(), None);
        assert_eq!(store.find_unfinished("boot", "h1").unwrap(), None);

        let a = store.create_experiment(&new_exp("boot", "h1")).unwrap();
        let b = store.create_experiment(&new_exp("boot", "h1")).unwrap();
        let other_hash = store.create_experiment(&new_exp("boot", "h2")).unwrap();
        let other_name = store.create_experiment(&new_exp("untar", "h1")).unwrap();
        assert_eq!(store.latest_experiment().unwrap(), Some(other_name));

        assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(b));
        store.set_experiment_status(b, ExperimentStatus::Complete).unwrap();
        assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(a));
        store.set_experiment_status(a, ExperimentStatus::Failed).unwrap();
        assert_eq!(store.find_unfinished("boot", "h1").unwrap(), Some(a), "failed experiments can be resumed");
        store.set_experiment_status(a, ExperimentStatus::Complete).unwrap();
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
        assert_eq!(list[0].status, ExperimentStatus::Complete);
        assert_eq!(list[3].status, ExperimentStatus::Running);
    }
}

#[test]
fn metric_series_order_and_failed_runs_excluded() {
    for db in test_dbs("series") {
        let mut store = db.open();
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
        // Names that sort differently by locale than by bytes.
        add(&mut store, 2, "zeta", "second", RunStatus::Ok, vec![Metric::lower("Zed", "s", 1.0)]);

        let series = store.metric_series(exp).unwrap();
        let got: Vec<(&str, &str, &str, Vec<f64>)> = series
            .iter()
            .map(|s| (s.workload.as_str(), s.metric.as_str(), s.variant.as_str(), s.values.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("second", "Zed", "zeta", vec![1.0]),
                ("second", "rate", "zeta", vec![40.0]),
                ("second", "rate", "alpha", vec![30.0]),
                ("second", "time", "zeta", vec![4.0]),
                ("second", "time", "alpha", vec![3.0]), // NaN left out
                ("first", "rate", "zeta", vec![20.0, 25.0]),
                ("first", "rate", "alpha", vec![10.0, 15.0]),
                ("first", "time", "zeta", vec![2.0, 2.5]),
                ("first", "time", "alpha", vec![1.0, 1.5]),
            ],
            "{}",
            db.backend
        );
        let rate = &series[1];
        assert_eq!((rate.unit.as_str(), rate.higher_is_better), ("MB/s", true));
        let time = &series[3];
        assert_eq!((time.unit.as_str(), time.higher_is_better), ("s", false));

        // NaN survives the round trip through runs().
        let runs = store.runs(exp).unwrap();
        assert!(runs[6].metrics[0].value.is_nan());
    }
}

#[test]
fn json_export_parses_back_with_expected_keys() {
    for db in test_dbs("json") {
        let mut store = db.open();
        let exp = store.create_experiment(&new_exp("boot", "h")).unwrap();
        store.add_tags(exp, &[("team".into(), "storage".into())]).unwrap();
        store.record_run(exp, &full_run(0)).unwrap();
        store.record_run(exp, &run(1, 0, "alpha", "first", RunStatus::Failed, vec![])).unwrap();
        store.set_experiment_status(exp, ExperimentStatus::Complete).unwrap();

        let v = serde_json::to_value(export::export(&store, exp).unwrap()).unwrap();
        let text = v.to_string();
        let e = &v["experiment"];
        for key in
            ["id", "uuid", "name", "created_at", "finished_at", "status", "seed", "environment", "plan", "spec_hash"]
        {
            assert!(e.get(key).is_some(), "experiment.{key} missing in {text}");
        }
        assert_eq!(e["id"], exp);
        assert_eq!(e["name"], "boot");
        assert_eq!(e["status"], "complete");
        assert_eq!(e["seed"].as_u64(), Some(u64::MAX));
        assert_eq!(e["environment"]["kernel_release"], "6.8.0", "environment must be parsed JSON");
        assert_eq!(e["variants"][1]["name"], "alpha");
        assert_eq!(e["workloads"][0]["config"]["files"], 1000);
        assert_eq!(e["tags"], serde_json::json!([["team", "storage"]]));

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
                "uuid",
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

        let e = err_text(export::export(&store, exp + 1).unwrap_err());
        assert!(e.contains("no experiment"), "{e}");
    }
}

#[test]
fn tls_when_the_url_asks_for_it() {
    let Some(db) = pg_db("tls") else { return };
    let Ok(ca) = std::env::var("FSLAB_TEST_POSTGRES_CA") else {
        crate::testsupport::skip("the TLS test needs FSLAB_TEST_POSTGRES_CA (./scripts/test makes a CA)");
        return;
    };
    let StoreLocation::Postgres(plain) = &db.location else { unreachable!() };
    let encrypted = |store: &Store| -> i64 {
        store
            .read(|q| q.query_one("SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])?.get(0))
            .unwrap()
    };
    assert_eq!(encrypted(&db.open()), 0, "no sslmode: no TLS");
    let tls = StoreLocation::Postgres(format!("{plain}&sslmode=require&sslrootcert={ca}"));
    let mut store = Store::open(&tls).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(encrypted(&store), 1);
    let e = store.create_experiment(&new_exp("tls", "h")).unwrap();
    store.record_run(e, &full_run(0)).unwrap();
    // The server's certificate is verified: without its CA it is refused.
    let e = err_text(Store::open(&StoreLocation::Postgres(format!("{plain}&sslmode=verify-full"))).err().unwrap());
    assert!(e.contains("cannot connect") && e.to_lowercase().contains("certificate"), "{e}");
}

/// A libpq keyword/value string names a PostgreSQL server, as the URL does
/// (issue 28 item 6): the same server and schema, with fslab's TLS handling
/// of `sslmode`/`sslrootcert` when the test server has a CA.
#[test]
fn a_keyword_value_string_reaches_the_server_the_url_names() {
    let Some(db) = pg_db("kv") else { return };
    let (url, schema) = db.pg_schema.clone().expect("a PostgreSQL test database");
    let config: postgres::Config = url.parse().unwrap();
    let postgres::config::Host::Tcp(host) = &config.get_hosts()[0] else { panic!("{url}: not a TCP host") };
    let mut text = format!(
        "host={host} port={} user={} dbname={} options='-csearch_path={schema}'",
        config.get_ports().first().copied().unwrap_or(5432),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("postgres"),
    );
    let ca = std::env::var("FSLAB_TEST_POSTGRES_CA").ok().filter(|ca| !ca.is_empty());
    if let Some(ca) = &ca {
        text.push_str(&format!(" sslmode=require sslrootcert='{ca}'"));
    }
    let location = StoreLocation::parse(&text);
    assert!(location.is_postgres(), "{location}");
    let mut store = Store::open(&location).unwrap_or_else(|e| panic!("{e:#}"));
    let id = store.create_experiment(&new_exp("kv", "h")).unwrap();
    assert_eq!(db.open().experiment(id).unwrap().name, "kv", "not written where the URL reads");
    let tls: i64 = store
        .read(|q| q.query_one("SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])?.get(0))
        .unwrap();
    assert_eq!(tls, i64::from(ca.is_some()));
}
