//! The store from the command line: readers never create a store, `list
//! --json`, `merge` (idempotent, refuses conflicts), `--db` as a PostgreSQL
//! URL.

use std::path::Path;
use std::process::Command;

use fslab::metric::Metric;
use fslab::record::{RunRecord, RunStatus};
use fslab::store::{NewExperiment, Store, VariantRow, WorkloadRow};
use fslab::stored::ExperimentStatus;

use crate::common::fslab_bin;

fn fslab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(fslab_bin()).args(args).env_remove("FSLAB_DB").output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A store at `path` with one finished experiment of `runs` ok runs.
fn store_with_runs(path: &Path, runs: usize, value: f64) {
    let mut store = Store::open(path).unwrap();
    let e = store
        .create_experiment(&NewExperiment {
            name: "cli".into(),
            spec_path: None,
            spec_text: "x".into(),
            spec_hash: "h".into(),
            seed: 1,
            plan: Default::default(),
            environment: Default::default(),
            variants: vec![VariantRow { position: 0, name: "a".into(), config_json: "{}".into() }],
            workloads: vec![WorkloadRow {
                position: 0,
                label: "w".into(),
                kind: "untar".into(),
                config_json: "{}".into(),
            }],
        })
        .unwrap();
    store.add_tags(e, &[("team".into(), "fs".into())]).unwrap();
    for seq in 0..runs {
        let run = RunRecord {
            seq,
            variant: "a".into(),
            workload: "w".into(),
            status: Some(RunStatus::Ok),
            metrics: vec![Metric::lower("elapsed", "s", value + seq as f64)],
            ..RunRecord::default()
        };
        store.record_run(e, &run).unwrap();
    }
    store.set_experiment_status(e, ExperimentStatus::Complete).unwrap();
}

#[test]
fn readers_do_not_create_a_missing_store() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.db");
    let t = typo.to_str().unwrap();
    for args in [
        vec!["list", "--db", t],
        vec!["compare", "--db", t],
        vec!["export", "--db", t],
        vec!["report", "--db", t, "-o", "-"],
    ] {
        let (ok, _, err) = fslab(&args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains("typo.db does not exist"), "{args:?}: {err}");
        assert!(!typo.exists(), "{args:?} created {t}");
    }
}

#[test]
fn list_json_and_merge_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, all) = (dir.path().join("a.db"), dir.path().join("b.db"), dir.path().join("all.db"));
    store_with_runs(&a, 3, 1.0);
    store_with_runs(&b, 2, 5.0);
    let (ok, out, err) = fslab(&["list", "--json", "--db", a.to_str().unwrap()]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], "cli");
    assert_eq!(v[0]["runs_ok"], 3);
    assert_eq!(v[0]["tags"], serde_json::json!([["team", "fs"]]));
    assert!(v[0]["uuid"].as_str().is_some_and(|u| u.len() == 36), "{out}");
    // Each key once per object (`id` was written twice).
    assert_eq!(out.matches("\"id\":").count(), 1, "{out}");

    let merge = |extra: &[&str]| {
        let mut args = vec!["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--into", all.to_str().unwrap()];
        args.extend_from_slice(extra);
        fslab(&args)
    };
    let (ok, out, err) = merge(&[]);
    assert!(ok, "{err}");
    assert!(out.contains("1 experiments added") && out.contains("3 runs added"), "{out}");
    let (ok, out, err) = merge(&["--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for s in v["sources"].as_array().unwrap() {
        assert_eq!(s["merged"]["runs_added"], 0, "{out}");
        assert_eq!(s["merged"]["experiments_matched"], 1, "{out}");
    }
    let store = Store::open_existing(&all).unwrap();
    assert_eq!(store.list_experiments().unwrap().len(), 2);

    // A copy of a.db with a changed ok run: refused, exit non-zero.
    let c = dir.path().join("c.db");
    std::fs::copy(&a, &c).unwrap();
    rusqlite::Connection::open(&c).unwrap().execute_batch("UPDATE metrics SET value = 42").unwrap();
    // (`-o`, the old spelling of `--into`, still works and says so.)
    let (ok, _, err) = fslab(&["merge", c.to_str().unwrap(), "-o", all.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("stored ok in both with different content"), "{err}");
    assert!(err.contains("note: `-o` is now --into"), "{err}");
    // A typo in a source creates no target.
    let fresh = dir.path().join("fresh.db");
    let (ok, _, err) = fslab(&["merge", "nope.db", "--into", fresh.to_str().unwrap()]);
    assert!(!ok && err.contains("nope.db does not exist"), "{err}");
    assert!(!fresh.exists());
}

#[test]
fn db_takes_a_postgres_url() {
    // A URL nobody listens on: the error names it (without the password).
    let (ok, _, err) = fslab(&["list", "--db", "postgres://me:hunter2@127.0.0.1:1/fslab?connect_timeout=2"]);
    assert!(!ok);
    assert!(err.contains("cannot connect to PostgreSQL at postgres://me:***@127.0.0.1:1/fslab"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    let Ok(url) = std::env::var("FSLAB_TEST_POSTGRES") else {
        fslab::testsupport::skip("fslab --db postgres://… needs FSLAB_TEST_POSTGRES (./scripts/test starts a server)");
        return;
    };
    // A database of its own, so the listing is exactly ours; dropped even if the test fails.
    struct Scratch(String, String);
    impl Drop for Scratch {
        fn drop(&mut self) {
            if let Ok(mut c) = postgres::Client::connect(&self.0, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.1));
            }
        }
    }
    let name = format!("fslab_cli_{}", std::process::id());
    let _scratch = Scratch(url.clone(), name.clone());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let db_url = {
        let (base, _) = url.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    store_with_runs(&a, 2, 1.0);
    let (ok, _, err) = fslab(&["list", "--db", &db_url]);
    assert!(!ok && err.contains("holds no fslab store"), "{err}");
    let (ok, _, err) = fslab(&["merge", a.to_str().unwrap(), "--into", &db_url]);
    assert!(ok, "{err}");
    let out = Command::new(fslab_bin()).args(["list"]).env("FSLAB_DB", &db_url).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("2 ok") && text.contains("cli"), "{text}");
    let (ok, out, err) = fslab(&["export", "--format", "csv", "--db", &db_url]);
    assert!(ok && out.starts_with("experiment_id,experiment,run_seq"), "{out}{err}");
}

/// A libpq keyword/value string is a PostgreSQL location, not an SQLite
/// file name (issue 28 item 6): nothing named after it is created, by a
/// reader or by `run`, and its password is never printed.
#[test]
fn db_takes_a_libpq_keyword_value_string() {
    let dir = tempfile::tempdir().unwrap();
    let conninfo = "host=127.0.0.1 port=1 dbname=fslab user=me password=hunter2 connect_timeout=2";
    let fslab_in_dir = |args: &[&str]| {
        let out = Command::new(fslab_bin()).args(args).current_dir(dir.path()).env_remove("FSLAB_DB").output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = fslab_in_dir(&["list", "--db", conninfo]);
    assert_ne!(code, Some(0), "{err}");
    let shown = "host=127.0.0.1 port=1 dbname=fslab user=me password=*** connect_timeout=2";
    assert!(err.contains(&format!("cannot connect to PostgreSQL at {shown}")), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    if crate::common::root_or_skip() {
        let spec = crate::common::write_spec(
            dir.path(),
            "exp.toml",
            &format!(
                "name = \"kv\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"tmpfs\"\n\
                 [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
                dir.path().join("work").display()
            ),
        );
        let (code, err) = fslab_in_dir(&["run", spec.to_str().unwrap(), "--db", conninfo]);
        assert_ne!(code, Some(0), "{err}");
        assert!(err.contains(shown) && !err.contains("hunter2"), "{err}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.iter().all(|name| name == "exp.toml"), "created beside the command: {left:?}");
}

/// Issue 20 item 7: a missing store, experiment or variant is a usage
/// error (2) in every command, before anything runs; not 1, the code of a
/// regression or a failed run.
#[test]
fn a_missing_store_experiment_or_variant_is_a_usage_error_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    store_with_runs(&db, 3, 1.0);
    let (db, typo) = (db.to_str().unwrap(), dir.path().join("typo.db"));
    let typo = typo.to_str().unwrap();
    for args in [
        vec!["check", "--db", typo, "--fail-on-regression"],
        vec!["compare", "--db", typo],
        vec!["compare", "--db", db, "--experiment", "999"],
        vec!["compare", "--db", db, "--baseline", "nope"],
        vec!["report", "--db", db, "--experiment", "999", "-o", "-"],
        vec!["kconfig", "diff", "--db", db, "--experiment", "999", "--variants", "a,nope"],
        vec!["kconfig", "diff", "--db", db, "--experiment", "1", "--variants", "nope,a"],
    ] {
        let out = Command::new(fslab_bin()).args(&args).env_remove("FSLAB_DB").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed before failing");
        assert!(
            err.contains("typo.db does not exist") || err.contains("999") || err.contains("nope"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 20 item 10: `plan --help` shows plan's exit status, not run's.
#[test]
fn plan_help_has_its_own_exit_table() {
    let (ok, out, _) = fslab(&["plan", "--help"]);
    assert!(ok);
    assert!(out.contains("the plan was printed") && !out.contains("every run ok"), "{out}");
}
