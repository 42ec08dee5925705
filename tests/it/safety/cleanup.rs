//! `fslab cleanup` removes only what carries fslab's marker with an owner
//! that is gone, in work directories fslab knows; half-written inputs of a
//! killed fslab are found too.

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{fslab, fslab_cmd, run_args, testbed_dirs, wait_for_mount};
use crate::common;

#[test]
fn a_hand_made_directory_that_looks_like_a_testbed_survives() {
    if !common::root_or_skip() {
        return;
    }
    // In the default work directory (which `fslab cleanup` always scans) and
    // in one named with --workdir; the name's pid is dead, and a copied marker
    // file does not make a directory fslab's either.
    let _serial = super::cleanup_lock();
    let default = Path::new(fslab::testbed::DEFAULT_WORKDIR);
    std::fs::create_dir_all(default).unwrap();
    let name = format!("fslab-tb-999999-0-abc{}", std::process::id());
    let fake = default.join(&name);
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("important.txt"), "do not delete").unwrap();
    let dir = common::workdir("fslab-safety-clean");
    let other = dir.path().join("fslab-tb-999999-1-abc");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("important.txt"), "do not delete").unwrap();
    std::fs::write(
        other.join(".fslab-testbed"),
        format!(
            r#"{{"name":"{name}","owner":{{"pid":999999,"start_time":1,"boot_id":"x","hostname":"h"}},"created":0}}"#
        ),
    )
    .unwrap();

    let plain = fslab(["cleanup"]);
    let named = fslab(["cleanup".to_string(), "--workdir".to_string(), dir.path().display().to_string()]);
    let survived = fake.join("important.txt").exists() && other.join("important.txt").exists();
    let _ = std::fs::remove_dir_all(&fake);
    plain.expect(0).says(&format!("left alone (not made by fslab): {}", fake.display()));
    named.expect(0).says("names another directory");
    assert!(survived, "{plain:?}\n{named:?}");
}

/// A spec whose command sleeps while `gate` exists (so a run can be caught
/// mid-way and the same file resumed quickly later).
pub fn gated_spec(dir: &Path, gate: &Path) -> std::path::PathBuf {
    std::fs::write(gate, "").unwrap();
    common::write_spec(
        dir,
        "gated.toml",
        &format!(
            "name = \"gated\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n\
             size = \"64MiB\"\nthrottle = {{ write_bps = \"16MiB\" }}\n[[workload]]\nkind = \"command\"\n\
             command = \"while [ -e {} ]; do sleep 0.2; done\"\ntimeout = \"5m\"\n",
            dir.join("work").display(),
            gate.display()
        ),
    )
}

#[test]
fn a_really_stale_testbed_from_a_sigkilled_fslab_is_removed() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = super::cleanup_lock();
    let dir = common::workdir("fslab-safety-clean");
    let gate = dir.path().join("gate");
    let spec = gated_spec(dir.path(), &gate);
    let mut child = fslab_cmd(run_args(dir.path(), &spec, &[])).spawn().unwrap();
    let needle = format!("fslab-tb-{}-", child.id());
    wait_for_mount(&mut child, &needle);
    let work = dir.path().join("work");
    let bed = work.join(&testbed_dirs(&work)[0]);
    assert!(bed.join(".fslab-testbed").is_file(), "testbeds carry the marker file");
    child.kill().unwrap();
    let _ = child.wait();
    std::fs::remove_file(&gate).unwrap();
    assert!(!common::leftovers(&needle).is_empty(), "SIGKILL should leave the testbed");

    let cleanup = |format: &str| {
        let ran = fslab(["cleanup", "--workdir", &work.display().to_string(), "--format", format].map(String::from));
        ran.expect(0);
        let report: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        report
    };
    let report = cleanup("json");
    // Another test's cleanup may take the mount and loop device first (they
    // are found system-wide); the directory is only found through this one.
    let removed = report["removed"].as_array().unwrap();
    assert!(removed.iter().any(|r| *r == format!("directory {}", bed.display()).as_str()), "{report}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(common::leftovers(&needle), Vec::<String>::new());
    assert!(testbed_dirs(&work).is_empty());
    // Nothing left: the text says so, `--json` is `--format json`.
    fslab(["cleanup", "--workdir", &work.display().to_string()].map(String::from))
        .expect(0)
        .says("nothing to clean up");
    let again = fslab(["cleanup", "--workdir", &work.display().to_string(), "--json"].map(String::from));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&again.expect(0).stdout).unwrap(), cleanup("json"));
}

/// An untar experiment whose input (the 151 MB firmware archive) is not
/// cached yet in `dir/work`, on a `dir:` testbed (no root needed).
pub fn uncached_untar_spec(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("target")).unwrap();
    common::write_spec(
        dir,
        "untar.toml",
        &format!(
            "name = \"inputs\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"dir:{}\"\n\
             [[workload]]\nkind = \"untar\"\nprofile = \"rpi-firmware\"\n",
            dir.join("work").display(),
            dir.join("target").display()
        ),
    )
}

/// Wait until a temporary input of `pid` appears in `cache` and return it.
pub fn wait_for_temporary(child: &mut std::process::Child, cache: &Path) -> std::path::PathBuf {
    let mine = format!("fslab-tb-{}-", child.id());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let found = std::fs::read_dir(cache)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains(&mine) && p.to_string_lossy().ends_with(".tmp"));
        if let Some(path) = found {
            return path;
        }
        assert!(Instant::now() < deadline, "no temporary input appeared");
        assert!(child.try_wait().unwrap().is_none(), "fslab finished before a temporary appeared");
        sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_temporary_input_of_a_sigkilled_fslab_is_removed_by_cleanup() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = super::cleanup_lock();
    let dir = common::workdir("fslab-safety-clean");
    let spec = uncached_untar_spec(dir.path());
    let mut child = fslab_cmd(run_args(dir.path(), &spec, &[])).spawn().unwrap();
    let tmp = wait_for_temporary(&mut child, &dir.path().join("work/cache"));
    child.kill().unwrap();
    let _ = child.wait();
    assert!(tmp.exists());
    let ran = fslab(["cleanup".to_string(), "--workdir".to_string(), dir.path().join("work").display().to_string()]);
    ran.expect(0).says(&format!("removed temporary input {}", tmp.display()));
    assert!(!tmp.exists());
}

/// Issue 20 item 11: the registry of work directories holds only those
/// that may hold leftovers (a run that ends well leaves no entry; a killed
/// one's stays until its work directory is cleaned), and `cleanup
/// --workdir X` reaches only X's leftovers: another work directory's
/// killed testbed (its cgroup, mount, loop device, trace instance) stays
/// until that one is cleaned.
#[test]
fn cleanup_of_one_work_directory_reaches_only_its_own_leftovers() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = super::cleanup_lock();
    // The registry file itself: one directory per line.
    let recorded = |dir: &Path| {
        let registry = Path::new(fslab::testbed::DEFAULT_WORKDIR).join(".fslab-workdirs");
        let work = std::fs::canonicalize(dir.join("work")).unwrap().display().to_string();
        std::fs::read_to_string(registry).unwrap_or_default().lines().any(|l| l == work)
    };
    let (x, y) = (common::workdir("fslab-scope-x"), common::workdir("fslab-scope-y"));

    // A run that ends normally: its work directory is not left recorded.
    let gate = x.path().join("gate");
    let spec = gated_spec(x.path(), &gate);
    std::fs::remove_file(&gate).unwrap();
    fslab(run_args(x.path(), &spec, &[])).expect(0);
    assert!(!recorded(x.path()), "a clean work directory stays in the registry");

    // A killed run in each of two work directories.
    let killed_in = |dir: &Path| {
        let spec = gated_spec(dir, &dir.join("gate"));
        let mut child = fslab_cmd(run_args(dir, &spec, &[])).spawn().unwrap();
        let needle = format!("fslab-tb-{}-", child.id());
        wait_for_mount(&mut child, &needle);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !common::leftovers(&needle).iter().any(|l| l.starts_with("trace instance")) && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        child.kill().unwrap();
        let _ = child.wait();
        needle
    };
    let (in_x, in_y) = (killed_in(x.path()), killed_in(y.path()));
    assert!(recorded(x.path()) && recorded(y.path()), "work directories with leftovers are recorded");
    let left_in_y = common::leftovers(&in_y);
    assert!(left_in_y.iter().any(|l| l.starts_with("cgroup")), "{left_in_y:?}");
    assert!(left_in_y.iter().any(|l| l.starts_with("mount")), "{left_in_y:?}");

    let work = |dir: &Path| dir.join("work").display().to_string();
    fslab(["cleanup".to_string(), "--workdir".to_string(), work(x.path())]).expect(0);
    assert_eq!(common::leftovers(&in_x), Vec::<String>::new());
    assert_eq!(common::leftovers(&in_y), left_in_y, "cleanup --workdir X reached another work directory");
    assert!(!recorded(x.path()) && recorded(y.path()));

    fslab(["cleanup".to_string(), "--workdir".to_string(), work(y.path())]).expect(0);
    assert_eq!(common::leftovers(&in_y), Vec::<String>::new());
    assert!(testbed_dirs(&y.path().join("work")).is_empty() && !recorded(y.path()));
}
