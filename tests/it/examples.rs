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
    // Examples with a media model start `fslab media-serve`.
    common::children_run_fslab();
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

/// Kernel examples name Debian archive kernels (`debian:6.1-cloud`) or
/// Debian sources to build (`{ source = "debian:5.10", … }`), looked up in
/// the kernel cache of their work directory; here a copy of the file works
/// in the test kernels' directory, so the lookup shares the tests' cached
/// package lists and unpacked sources. The copy sees the examples'
/// `patches/` beside it, as the original does.
fn with_test_kernel_cache(path: &Path, text: &str, dir: &Path) -> std::path::PathBuf {
    assert!(!text.contains("\nworkdir"), "{}: the test sets the work directory", path.display());
    let patches = dir.join("patches");
    if !patches.exists() {
        std::os::unix::fs::symlink(path.parent().unwrap().join("patches"), &patches).unwrap();
    }
    let copy = dir.join(path.file_name().unwrap());
    std::fs::write(&copy, format!("workdir = \"{}\"\n{text}", crate::vm::kernels_dir().display())).unwrap();
    copy
}

#[test]
fn every_example_parses_and_documents_itself() {
    let dir = common::workdir("fslab-example");
    let mut kernel_examples = 0;
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('#'), "{} must start with a comment saying what it is", path.display());
        if !text.contains("kernel = \"debian:") && !text.contains("source = \"debian:") {
            experiment::load(&path).unwrap();
            continue;
        }
        kernel_examples += 1;
        let copy = with_test_kernel_cache(&path, &text, dir.path());
        // The variants and their kernels as written; `fslab run --dry-run`
        // loads (and checks) the file itself. Loading it here as well would
        // prepare every built kernel's config twice (tens of seconds each).
        let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let default_kernel = doc.get("defaults").and_then(|d| d.get("kernel"));
        let variants: Vec<(&str, Option<&toml::Value>)> = doc["variant"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v.get("kernel").or(default_kernel)))
            .collect();
        assert!(variants.iter().any(|(_, k)| k.is_some()), "{}", path.display());
        // The quick form's plan, as `fslab run --quick --dry-run` prints it.
        let out = std::process::Command::new(common::fslab_bin())
            .args(["run", "--quick", "--dry-run", copy.to_str().unwrap()])
            .env_remove("FSLAB_KERNEL_CACHE")
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {shown}{}", path.display(), String::from_utf8_lossy(&out.stderr));
        for (name, _) in &variants {
            assert!(shown.contains(name), "{}: the plan names variant {name}: {shown}", path.display());
        }
        // Kernels built from source: the Debian source package is resolved
        // and the plan says what each image's build will take, without building.
        let built = variants.iter().filter(|(_, k)| k.is_some_and(|k| k.get("source").is_some())).count();
        let planned = shown.matches("from a kernel built from debian:").count();
        assert_eq!(planned, built, "{}: one built kernel per source variant in the plan: {shown}", path.display());
        if built > 0 {
            assert!(
                shown.contains(" = linux-source-")
                    && ["(cached: no build)", "(COLD build of ", "(incremental build "]
                        .iter()
                        .any(|s| shown.contains(s)),
                "{}: {shown}",
                path.display()
            );
        }
    }
    assert_eq!(
        kernel_examples, 7,
        "kernel-upgrade, kernel-upgrade-squashfs, preempt-rt, planted-cpu-work and the three case-* examples"
    );
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
