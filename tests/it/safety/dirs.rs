//! System directories are refused unless forced; a `dir:` testbed gives
//! every run a fresh fslab-owned directory and the record says so.

use super::{fslab, run_args};
use crate::common;

fn dir_spec(dir: &std::path::Path, fs: &str, workdir: &str, command: &str, reps: u32) -> std::path::PathBuf {
    common::write_spec(
        dir,
        "dirs.toml",
        &format!(
            "name = \"dirs\"\nrepetitions = {reps}\nworkdir = \"{workdir}\"\n[[variant]]\nname = \"a\"\nfs = \"{fs}\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"{command}\"\n"
        ),
    )
}

#[test]
fn dir_root_and_system_work_directories_are_refused_with_the_reason() {
    let dir = common::workdir("fslab-safety-dirs");
    let work = dir.path().join("work").display().to_string();
    let spec = dir_spec(dir.path(), "dir:/", &work, "true", 1);
    fslab(run_args(dir.path(), &spec, &[]))
        .expect(2)
        .says("dirs.toml:6:6: `fs`: `/` is the root directory")
        .says("--allow-system-dir");
    let spec = dir_spec(dir.path(), &format!("dir:{}", dir.path().display()), "/usr", "true", 1);
    fslab(run_args(dir.path(), &spec, &[])).expect(2).says("`workdir`: `/usr` is a system directory");
    // The command line's --workdir is checked too, and replaces the file's.
    fslab(run_args(dir.path(), &spec, &["--workdir", "/var/tmp/../../"]))
        .expect(2)
        .says("--workdir: `/` is the root directory");
    // Home directories too.
    if let Some(home) = std::env::var_os("HOME") {
        let spec = dir_spec(dir.path(), &format!("dir:{}", std::path::Path::new(&home).display()), &work, "true", 1);
        fslab(run_args(dir.path(), &spec, &[])).expect(2).says("is your home directory");
    }
    // Nothing was created in the database: refused before anything started.
    let store = fslab::store::Store::open(&dir.path().join("results.db")).unwrap();
    assert!(store.list_experiments().unwrap().is_empty());
}

#[test]
fn allow_system_dir_forces_it_and_the_run_stays_in_its_own_directory() {
    // /tmp is refused as a system directory; forced, the run works in a
    // fresh subdirectory of it that is gone afterwards.
    let dir = common::workdir("fslab-safety-dirs");
    let work = dir.path().join("work").display().to_string();
    let mine = "fslab-tb-";
    let before: Vec<_> = std::fs::read_dir("/tmp").unwrap().flatten().map(|e| e.file_name()).collect();
    let spec = dir_spec(dir.path(), "dir:/tmp", &work, "touch here", 1);
    fslab(run_args(dir.path(), &spec, &[])).expect(2).says("`/tmp` is a system directory");
    fslab(run_args(dir.path(), &spec, &["--allow-system-dir"])).expect(0).says("1 runs ok");
    let after: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| !before.contains(n) && n.to_string_lossy().starts_with(mine))
        .collect();
    assert!(after.is_empty(), "left in /tmp: {after:?}");
    assert!(!std::path::Path::new("/tmp/here").exists());
}

#[test]
fn every_dir_run_starts_in_a_fresh_empty_directory_and_the_record_says_so() {
    let dir = common::workdir("fslab-safety-dirs");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("theirs.txt"), "not fslab's").unwrap();
    let work = dir.path().join("work").display().to_string();
    // Fails when the run's directory is not empty (the previous run's file).
    let command = "test -z \\\"$(ls -A)\\\" && echo data > left-by-this-run";
    let spec = dir_spec(dir.path(), &format!("dir:{}", target.display()), &work, command, 3);
    fslab(run_args(dir.path(), &spec, &[])).expect(0).says("3 runs ok, 0 failed");
    // Only what was there before is left.
    let left: Vec<String> =
        std::fs::read_dir(&target).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec!["theirs.txt".to_string()]);
    let store = fslab::store::Store::open(&dir.path().join("results.db")).unwrap();
    let id = store.latest_experiment().unwrap().unwrap();
    let run = &store.runs(id).unwrap()[0];
    let extras = store.run_extras(run.id).unwrap();
    let notes = extras.iter().find(|(k, _)| k == "notes").map(|(_, v)| v.to_string()).unwrap_or_default();
    assert!(notes.contains("fresh empty directory") && notes.contains("not re-created between runs"), "{extras:?}");
}
