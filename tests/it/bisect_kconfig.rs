//! `fslab bisect-kconfig` on the real thing: Debian's 5.10 source with
//! fslab's test patch (`tests/fixtures/kernels/patches/fslab-test-read-work.patch`:
//! `FSLAB_TEST_READ_WORK` makes every read(2) spin), the fixture's kernel as
//! good, and bad = good + that option + decoys that each rebuild a few
//! files. Each step's kernel is built incrementally in the source's one
//! object directory and booted under TCG; the verdict rests on the guest's
//! instruction count (`vm/instructions`), not on wall time.

use crate::built_kernels::{fixture, fixture_kernel_line};
use crate::common;
use crate::vm::{counted_vm_or_skip, kernel_cache, one_vm};

use std::collections::BTreeMap;
use std::process::{Command, Output};

use fslab::bisect::kconfig::{step_request, Candidate};
use fslab::kernel::build::{BuildRequest, ConfigBase};
use fslab::kernel::debian::Archive;
use fslab::kernel::kconfig::{self, Kconfig};
use fslab::kernel::source::debian_source::DebianSource;
use fslab::kernel::source::SourceKind;

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The fixture's `set` with `extra` added, as a TOML inline table's body.
fn kernel_line_with(extra: &str) -> String {
    let line = fixture_kernel_line();
    let at = line.find("set = { ").expect("the fixture sets options") + "set = { ".len();
    format!("{}{extra}, {}", &line[..at], &line[at..])
}

/// Good = the fixture's kernel; bad = it + the planted option + three decoys
/// (a printk format, a squashfs block size and the squashfs file-mode
/// choice, each a few objects to rebuild). ddmin must name exactly
/// `FSLAB_TEST_READ_WORK`; a second run builds and runs nothing new.
#[test]
fn bisect_kconfig_names_the_planted_read_path_option_among_decoys() {
    if !counted_vm_or_skip() {
        return;
    }
    let _one = one_vm();
    let built = Command::new(common::fslab_bin())
        .args(["kernel", "build", fixture().to_str().unwrap()])
        .env("FSLAB_KERNEL_CACHE", kernel_cache())
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(0), "{}", text(&built));

    let dir = common::workdir("fslab-bisect-kconfig");
    let work = dir.path().join("work");
    let db = dir.path().join("results.db");
    let spec = common::write_spec(
        dir.path(),
        "kconfig.toml",
        &format!(
            r#"name = "planted read-path option"
repetitions = 3
seed = 5
workdir = "{work}"

[defaults]
fs = "ext4"
size = "64MiB"
vm = {{ cpus = 1, memory = "512MiB", accel = "tcg" }}

[[variant]]
name = "good"
{good}

[[variant]]
name = "bad"
{bad}

[[workload]]
kind = "command"
name = "read"
cache = "warm"
prepare = "dd if=/dev/zero of=data bs=1M count=2 status=none"
command = "dd if=data of=/dev/null bs=4k status=none"
"#,
            work = work.display(),
            good = fixture_kernel_line(),
            bad = kernel_line_with(
                r#"FSLAB_TEST_READ_WORK = "y", PRINTK_TIME = "y", SQUASHFS_4K_DEVBLK_SIZE = "y", SQUASHFS_FILE_DIRECT = "y""#
            ),
        ),
    );
    let bisect = || {
        let started = std::time::Instant::now();
        let out = Command::new(common::fslab_bin())
            .args(["bisect-kconfig", spec.to_str().unwrap(), "--good", "good", "--bad", "bad"])
            .args(["--metric", "read/vm/instructions", "--min-runs", "3", "--max-runs", "4", "--format", "json"])
            .args(["--db", db.to_str().unwrap()])
            .env("FSLAB_KERNEL_CACHE", kernel_cache())
            .output()
            .unwrap();
        eprintln!("bisect-kconfig took {:.0} s", started.elapsed().as_secs_f64());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        (report, text(&out))
    };
    let (first, log) = bisect();
    let names: Vec<&str> =
        first["candidates"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "FSLAB_TEST_READ_WORK",
            "PRINTK_TIME",
            "SQUASHFS_4K_DEVBLK_SIZE",
            "choice SQUASHFS_FILE_CACHE | SQUASHFS_FILE_DIRECT"
        ],
        "{log}"
    );
    assert_eq!(first["all_candidates_give_bad_config"], true, "{log}");
    assert_eq!(first["status"], "found", "{log}");
    let culprits: Vec<&str> =
        first["culprits"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(culprits, ["FSLAB_TEST_READ_WORK"], "{log}");
    let proof = &first["proof"];
    assert_eq!(proof["verdict"], "regressed", "{log}");
    assert!(proof["change_pct"].as_f64().unwrap() > 20.0, "the spin is most of the read's work: {proof}");
    // Steps that leave the option out pass.
    for step in first["steps"].as_array().unwrap() {
        let has =
            step["trial"]["changes"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().starts_with("FSLAB_"));
        let outcome = step["trial"]["outcome"].as_str().unwrap();
        assert_eq!(outcome, if has { "fail" } else { "pass" }, "{step}\n{log}");
    }
    eprintln!(
        "first run: {} steps, {} kernels built in {:.0} s, {} runs, {:.0} s",
        first["oracle_calls"],
        first["kernels_built"],
        first["build_s"].as_f64().unwrap(),
        first["new_runs"],
        first["elapsed_s"].as_f64().unwrap()
    );

    // A rerun answers every step from the store and every kernel from the cache.
    let (second, log) = bisect();
    assert_eq!(second["culprits"], first["culprits"], "{log}");
    assert_eq!(second["kernels_built"], 0, "{log}");
    assert_eq!(second["new_runs"], 0, "{log}");
    assert_eq!(second["stored_steps"], first["oracle_calls"], "{log}");
    assert!(!log.contains("fslab: building kernel"), "{log}");
    assert_eq!(crate::kernels::leftovers(&work), Vec::<String>::new());
}

/// A candidate that is a Kconfig choice moves as one: setting bad's member
/// on top of good's request (which set another member) gives a config with
/// the new member chosen and the old one cleared, on the real 5.10 Kconfig
/// (olddefconfig, no compiling).
#[test]
fn a_choice_candidate_moves_its_siblings_with_it() {
    if !common::root_or_skip() {
        return;
    }
    let archive = Archive::at(&kernel_cache());
    let package = match archive.resolve_source("5.10") {
        Ok(p) => p,
        Err(e) => {
            fslab::testsupport::skip(&format!("no Debian linux-source-5.10 (is the network down?): {e}"));
            return;
        }
    };
    let set = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let good = BuildRequest { config: ConfigBase::Minimal, set: set(&[("SQUASHFS_DECOMP_MULTI_PERCPU", "y")]) };
    let source = DebianSource::prepare("debian:5.10", archive.root(), package, Vec::new(), &good, &kernel_cache())
        .unwrap_or_else(|e| panic!("{e:#}"));
    let prepared = &source.build;
    let k = Kconfig::read(&prepared.tree).unwrap();
    let choice = Candidate {
        name: "choice SQUASHFS_DECOMP_SINGLE | SQUASHFS_DECOMP_MULTI | SQUASHFS_DECOMP_MULTI_PERCPU".into(),
        why: "set".into(),
        good: "SQUASHFS_DECOMP_MULTI_PERCPU".into(),
        bad: "SQUASHFS_DECOMP_SINGLE".into(),
        set: set(&[("SQUASHFS_DECOMP_SINGLE", "y")]),
    };
    let step = source
        .with_request(&step_request(&k, &good, &[&choice]), &kernel_cache())
        .unwrap_or_else(|e| panic!("{e:#}"))
        .build;
    let config = kconfig::parse_config(&std::fs::read_to_string(step.config_path(&kernel_cache())).unwrap());
    assert_eq!(config["SQUASHFS_DECOMP_SINGLE"], "y");
    assert_eq!(config["SQUASHFS_DECOMP_MULTI_PERCPU"], "n", "good's member moves out with the choice");
    assert_eq!(config["SQUASHFS_DECOMP_MULTI"], "n");
    assert_eq!(step.set, set(&[("SQUASHFS_DECOMP_SINGLE", "y")]), "good's sibling is no longer set");
}
