//! `--resume` never silently starts a duplicate or runs an experiment
//! twice; `list` and `report` tell a killed experiment from a running one; a resume
//! after SIGKILL removes what the killed fslab left and says so.

use super::cleanup::gated_spec;
use super::{fslab, fslab_cmd, run_args, testbed_dirs, wait_for_mount};
use crate::common;
use fslab::store::Store;

#[test]
fn resume_with_nothing_to_resume_stops_and_resume_or_start_starts() {
    let dir = common::workdir("fslab-safety-resume");
    let target = dir.path().join("t");
    std::fs::create_dir(&target).unwrap();
    let spec = common::write_spec(
        dir.path(),
        "r.toml",
        &format!(
            "name = \"r\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"dir:{}\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.path().join("work").display(),
            target.display()
        ),
    );
    fslab(run_args(dir.path(), &spec, &["--resume"])).expect(2).says("nothing to resume").says("--resume-or-start");
    let db = dir.path().join("results.db");
    let count = || Store::open(&db).unwrap().list_experiments().unwrap().len();
    assert_eq!(count(), 0, "a refused --resume must not start an experiment");
    fslab(run_args(dir.path(), &spec, &["--resume-or-start"])).expect(0).says("1 runs ok");
    assert_eq!(count(), 1);
    // Complete now: again nothing to resume, and --resume-or-start starts a second one.
    fslab(run_args(dir.path(), &spec, &["--resume"])).expect(2).says("nothing to resume");
    fslab(run_args(dir.path(), &spec, &["--resume-or-start"])).expect(0);
    assert_eq!(count(), 2);
}

#[test]
fn a_killed_run_is_listed_interrupted_and_resume_cleans_up_after_it() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = super::cleanup_lock();
    let dir = common::workdir("fslab-safety-resume");
    let gate = dir.path().join("gate");
    let spec = gated_spec(dir.path(), &gate);
    let db = dir.path().join("results.db").display().to_string();
    let mut child = fslab_cmd(run_args(dir.path(), &spec, &[])).spawn().unwrap();
    let needle = format!("fslab-tb-{}-", child.id());
    wait_for_mount(&mut child, &needle);

    // While it runs: listed running, and a resume would run it twice.
    fslab(["list", "--db", db.as_str()]).expect(0).says("running");
    fslab(["report", "--format", "markdown", "--db", db.as_str()]).expect(0).says("Status running,");
    fslab(run_args(dir.path(), &spec, &["--resume"])).expect(2).says("is still running");

    // The block-trace monitor's tracefs instance is system-wide, outside
    // the work directory: wait for it, so the kill leaves one behind.
    let traced = || common::leftovers(&needle).iter().any(|l| l.starts_with("trace instance"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !traced() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(traced(), "the run has no trace instance: {:?}", common::leftovers(&needle));
    child.kill().unwrap();
    let _ = child.wait();
    assert!(!common::leftovers(&needle).is_empty(), "SIGKILL leaves the testbed");
    let listed = fslab(["list", "--db", db.as_str()]);
    listed.expect(0).says("interrupted");
    assert!(!listed.stdout.contains("running"), "{}", listed.stdout);
    fslab(["report", "--format", "markdown", "--db", db.as_str()]).expect(0).says("Status interrupted,");

    std::fs::remove_file(&gate).unwrap();
    let ran = fslab(run_args(dir.path(), &spec, &["--resume"]));
    ran.expect(0).says("removed what a killed fslab left in").says("resuming experiment 1").says("1 runs ok");
    assert_eq!(common::leftovers(&needle), Vec::<String>::new());
    assert!(testbed_dirs(&dir.path().join("work")).is_empty());
    fslab(["list", "--db", db.as_str()]).expect(0).says("complete");
}
