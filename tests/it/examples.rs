//! Every shipped example parses, and its `--quick` form runs end to end on
//! real testbeds with every run succeeding.

use crate::common;

use std::path::Path;

use fslab::experiment;
use fslab::runner::{self, RunOptions, Silent};
use fslab::store::Store;

fn run_quick(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    let mut exp = experiment::load(&path).unwrap();
    experiment::make_quick(&mut exp);
    let dir = common::workdir("fslab-example");
    exp.workdir = dir.path().join("work");
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    let runs = store.runs(summary.experiment_id).unwrap();
    let failed: Vec<_> = runs.iter().filter_map(|r| r.error.clone()).collect();
    assert!(failed.is_empty(), "{name}: {failed:?}");
    assert_eq!(summary.runs_ok, 2 * exp.variants.len() * exp.workloads.len(), "{name}");
    assert!(!store.metric_series(summary.experiment_id).unwrap().is_empty());
}

#[test]
fn every_example_parses_and_documents_itself() {
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('#'), "{} must start with a comment saying what it is", path.display());
        experiment::load(&path).unwrap();
    }
}

#[test]
fn sdcard_untar_quick() {
    if common::root_or_skip() {
        run_quick("sdcard-untar.toml");
    }
}

#[test]
fn shell1_ext4_vs_xfs_quick() {
    if common::root_or_skip() {
        run_quick("shell1-ext4-vs-xfs.toml");
    }
}

#[test]
fn reaim_disk_quick() {
    if common::root_or_skip() {
        run_quick("reaim-disk.toml");
    }
}

#[test]
fn squashfs_coldstart_quick() {
    if common::root_or_skip() {
        run_quick("squashfs-coldstart.toml");
    }
}
