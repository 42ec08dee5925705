//! Issue 19's second planted check, in a kernel: the test kernel built from
//! source with `FSLAB_TEST_READ_WORK=y` spins N loop iterations in every
//! read(2) (N on the guest's kernel command line), and
//! `tests/fixtures/kernels/planted-read-work.toml` plants N so the spin adds
//! 10% to a read workload's guest instructions (the arithmetic is in the
//! file's header). At a fixed 5 runs per variant, with `vm/instructions_work`
//! decisive under TCG, the planted variant is `regressed` by about 10% and
//! the A/A pair decides nothing, whatever the host's load.

use crate::common;
use crate::kernels::{leftovers, planted_is_regressed_and_a_a_is_not};
use crate::vm::{counted_vm_or_skip, kernel_cache, one_vm};

use std::path::Path;
use std::process::{Command, Output};

fn fslab(args: &[&str]) -> Output {
    Command::new(common::fslab_bin()).args(args).env("FSLAB_KERNEL_CACHE", kernel_cache()).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Boots the kernel three times (one VM per variant) and runs 15 reads
/// workloads under TCG: minutes. The kernel comes from the shared test
/// kernel cache (`scripts/fetch-test-kernels` and the bisect-kconfig test
/// build it; otherwise this run builds it, one object away from the
/// fixture's kernel).
#[test]
fn a_planted_ten_percent_in_the_kernels_read_path_is_regressed_and_a_a_is_not() {
    if !counted_vm_or_skip() {
        return;
    }
    let _one = one_vm();
    let dir = common::workdir("fslab-planted-kernel");
    let work = dir.path().join("work");
    let db = dir.path().join("results.db");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels/planted-read-work.toml");
    let (db_arg, work_arg) = (db.to_str().unwrap(), work.to_str().unwrap());
    let out = fslab(&["run", file.to_str().unwrap(), "--db", db_arg, "--workdir", work_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(leftovers(&work), Vec::<String>::new());

    let (_, planted) = planted_is_regressed_and_a_a_is_not(db_arg);
    // The spin was planted as 10% of the workload's instructions.
    let change = planted["change_pct"].as_f64().unwrap();
    assert!((7.0..13.0).contains(&change), "the planted 10% counted {change:+.2}% instructions");
}
