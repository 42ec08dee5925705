//! `bisect-options` end to end: real runner, real store, real testbeds.
//! Needs root (loop devices, cgroup throttles); skipped otherwise.

use crate::common;

use std::time::Instant;

use fslab::bisect::{self, BisectConfig, Outcome, SettingKind, Status};
use fslab::experiment;
use fslab::report::Document;
use fslab::runner::{RunOptions, Silent};
use fslab::store::Store;

fn config(good: &str, bad: &str, metric: &str) -> BisectConfig {
    BisectConfig {
        good: good.into(),
        bad: bad.into(),
        metric: metric.parse().unwrap(),
        repetitions: None,
        run_options: RunOptions::default(),
    }
}

/// The required real case: ext4 on loop devices, three differing settings
/// (mount `noatime`, sysfs `mb_max_to_scan`, an 8 MiB/s write throttle), one
/// true cause (the throttle), a 16 MiB fsync'd write as the workload.
#[test]
fn write_throttle_is_found_among_three_ext4_differences() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-bisect");
    let text = format!(
        r#"name = "bisect real"
repetitions = {{ min = 3, max = 6 }}
# A regression must exceed 25% with confidence: noise between equivalent
# ext4 variants never passes for one, an 8 MiB/s throttle always does.
theta = 0.25
workdir = "{}"

[defaults]
fs = "ext4"
size = "128MiB"
mkfs = ["-E", "lazy_itable_init=0,lazy_journal_init=0"]

[[variant]]
name = "good"
sysfs = {{ mb_max_to_scan = 200 }}

[[variant]]
name = "bad"
mount = "noatime"
sysfs = {{ mb_max_to_scan = 100 }}
throttle = {{ write_bps = "8MiB" }}

[[workload]]
kind = "command"
name = "dd"
cache = "warm"
command = "dd if=/dev/zero of=f bs=1M count=16 conv=fsync status=none"
"#,
        dir.path().join("work").display()
    );
    let spec = common::write_spec(dir.path(), "bisect.toml", &text);
    let exp = experiment::load(&spec).unwrap();
    let db = dir.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let started = Instant::now();
    let report = bisect::bisect(&exp, &config("good", "bad", "dd/wall_s"), &mut store, &mut Silent).unwrap();
    let text = report.text();
    eprintln!("{text}\nelapsed {:.1} s", started.elapsed().as_secs_f64());

    assert_eq!(report.changes.len(), 3, "{:?}", report.changes);
    assert_eq!(report.search.status, Status::Found, "{text}");
    assert_eq!(report.culprits.len(), 1, "{text}");
    assert_eq!(report.culprits[0].kind, SettingKind::Throttle);
    assert_eq!(report.culprits[0].key, "write_bps");
    assert!(text.contains("throttle.write_bps"), "{text}");

    // The proof is a stored experiment whose verdict is `regressed`.
    let proof = report.search.proof.as_ref().expect("proof trial");
    assert_eq!(proof.outcome, Outcome::Fail);
    assert_eq!(proof.changes.len(), 1);
    let stored = store.experiment(proof.experiment_id).unwrap();
    assert!(stored.name.starts_with("bisect-options bisect real: "), "{}", stored.name);
    assert_eq!(store.runs(proof.experiment_id).unwrap().len(), proof.runs());

    // Every run spent is in the store, one experiment per oracle call.
    let experiments = store.list_experiments().unwrap();
    assert_eq!(experiments.len(), report.search.oracle_calls);
    assert_eq!(experiments.len(), report.trials.len());
    let stored_runs: usize = experiments.iter().map(|e| e.runs_ok + e.runs_failed).sum();
    assert_eq!(stored_runs, report.total_runs);
    // Adaptive repetitions: between min and max rounds of two variants each.
    for t in &report.trials {
        assert!((3..=6).contains(&t.rounds), "{t:?}");
        assert_eq!(t.runs(), 2 * t.rounds, "{t:?}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["status"], "found");
    assert_eq!(json["culprits"][0]["key"], "write_bps");
    assert!(json["total_runs"].as_u64().unwrap() >= 6);
}

/// Two tmpfs variants; `command` decides what each size does.
fn tmpfs_spec(dir: &std::path::Path, command: &str) -> experiment::Experiment {
    let text = format!(
        "name = \"bisect tmpfs\"\nrepetitions = {{ min = 3, max = 4 }}\nworkdir = \"{}\"\n\
         [[variant]]\nname = \"good\"\nfs = \"tmpfs\"\nsize = \"32MiB\"\n\
         [[variant]]\nname = \"bad\"\nfs = \"tmpfs\"\nsize = \"64MiB\"\nmount = \"noatime,nr_inodes=5000\"\n\
         [[workload]]\nkind = \"command\"\nname = \"cmd\"\ncache = \"warm\"\ncommand = '{command}'\n",
        dir.join("work").display()
    );
    experiment::parse(&text, None).unwrap()
}

/// Sizes decide a 0.3 s or a 1.2 s sleep: long enough that a loaded host's
/// few milliseconds of start-up jitter (which once made `nr_inodes` alone
/// a false +8.5% culprit over 0.03 s sleeps) stay well inside the band.
#[test]
fn timing_size_is_found_among_tmpfs_differences() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-bisect");
    let exp = tmpfs_spec(dir.path(), "if [ $(stat -f -c %b .) -gt 10000 ]; then sleep 1.2; else sleep 0.3; fi");
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let report = bisect::bisect(&exp, &config("good", "bad", "cmd/wall_s"), &mut store, &mut Silent).unwrap();
    let text = report.text();
    assert_eq!(report.changes.len(), 3, "{text}");
    assert_eq!(report.search.status, Status::Found, "{text}");
    assert_eq!(report.culprits.len(), 1, "{text}");
    assert_eq!(report.culprits[0].kind, SettingKind::Size, "{text}");
    assert_eq!(store.list_experiments().unwrap().len(), report.search.oracle_calls);
}

#[test]
fn no_regression_between_good_and_bad_stops_with_a_clear_message() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-bisect");
    let exp = tmpfs_spec(dir.path(), "sleep 0.05");
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let report = bisect::bisect(&exp, &config("good", "bad", "cmd/wall_s"), &mut store, &mut Silent).unwrap();
    assert_eq!(report.search.status, Status::NotReproduced);
    assert!(report.culprits.is_empty());
    assert_eq!(report.trials.len(), 1, "only the confirmation runs");
    let text = report.text();
    assert!(text.contains("no regression to bisect"), "{text}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let dir = common::workdir("fslab-bisect");
    let exp = tmpfs_spec(dir.path(), "true");
    let mut store = Store::open_in_memory().unwrap();
    let err = bisect::bisect(&exp, &config("good", "nope", "cmd/wall_s"), &mut store, &mut Silent).unwrap_err();
    assert!(err.to_string().contains("--bad nope"), "{err}");
    let err = bisect::bisect(&exp, &config("good", "good", "cmd/wall_s"), &mut store, &mut Silent).unwrap_err();
    assert!(err.to_string().contains("same variant"), "{err}");
    assert!("wall_s".parse::<bisect::MetricRef>().is_err());
    if common::root_or_skip() {
        let err = bisect::bisect(&exp, &config("good", "bad", "other/wall_s"), &mut store, &mut Silent).unwrap_err();
        assert!(err.to_string().contains("no workload `other`"), "{err}");
        let err = bisect::bisect(&exp, &config("good", "bad", "cmd/bogus"), &mut store, &mut Silent).unwrap_err();
        assert!(format!("{err:#}").contains("no metric `bogus`"), "{err:#}");
    }
}
