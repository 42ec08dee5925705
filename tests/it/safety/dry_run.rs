//! `--dry-run` resolves and validates what a real run checks before its
//! first measurement (baseline, device rules, kernels, tools) without
//! building, booting or writing anything (issue 20 item 8).

use super::{ext4_spec, fslab, run_args, LoopDev};
use crate::common;

#[test]
fn a_dry_run_refuses_an_unknown_baseline_and_a_refused_device() {
    let dir = common::workdir("fslab-dry-run");
    let spec = ext4_spec(dir.path(), "", "true");
    fslab(run_args(dir.path(), &spec, &["--dry-run", "--baseline", "nope"]))
        .expect(2)
        .says("--baseline nope: no variant has that name");
    let file = dir.path().join("precious.img");
    std::fs::write(&file, "keep").unwrap();
    let device = file.to_str().unwrap();
    fslab(run_args(dir.path(), &spec, &["--dry-run", "--device", device, "--destroy-data"]))
        .expect(2)
        .says("is a regular file, not a block device");
    fslab(run_args(dir.path(), &spec, &["--dry-run", "--device", device])).expect(2).says("--destroy-data");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert!(!dir.path().join("results.db").exists() && !dir.path().join("work").exists());
}

#[test]
fn a_dry_run_names_the_checked_device_and_writes_nothing_to_it() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-dry-run");
    let lo = LoopDev::new(dir.path(), "spare.img", 64, false);
    let spec = ext4_spec(dir.path(), "", "true");
    let dev = lo.dev.to_str().unwrap();
    let ran = fslab(run_args(dir.path(), &spec, &["--dry-run", "--device", dev, "--destroy-data"]));
    ran.expect(0).says(&format!("device: {dev} (checked: a spare block device"));
    let blkid = std::process::Command::new("blkid").arg("-p").arg(&lo.dev).output().unwrap();
    assert!(String::from_utf8_lossy(&blkid.stdout).trim().is_empty(), "the dry run wrote to {dev}");
    assert!(!dir.path().join("results.db").exists());
}

#[test]
fn a_dry_run_says_which_variants_boot_which_kernel() {
    let Some(deb) = crate::vm::vm_prerequisites("6.1") else { return };
    let dir = common::workdir("fslab-dry-run");
    let spec = common::write_spec(
        dir.path(),
        "k.toml",
        &format!(
            "name = \"k\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"host\"\nfs = \"ext4\"\n\
             [[variant]]\nname = \"old\"\nfs = \"ext4\"\nkernel = \"{}\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.path().join("work").display(),
            deb.display()
        ),
    );
    let release = crate::vm::release_from_name(&deb);
    let ran = fslab(run_args(dir.path(), &spec, &["--dry-run"]));
    ran.expect(0)
        .says(&format!("kernel: boots {release} from package {}", deb.display()))
        .says("(one VM for the variant)")
        .says(&format!("kernel: the host's ({})", fslab::sys::kernel_release()));
    assert!(!dir.path().join("work").exists(), "the dry run created the work directory");
}

/// A file with several independent errors: each is reported with its
/// file:line:col and key, then how many, and the exit status stays 2
/// (issue 28 item 6). The workload of an unknown kind has a key of that
/// kind too: it depends on the kind and is not reported.
#[test]
fn a_dry_run_reports_every_independent_error_of_a_file() {
    let dir = common::workdir("fslab-dry-run");
    let spec = common::write_spec(
        dir.path(),
        "bad.toml",
        "name = \"many\"\n\
         repetitions = 0\n\
         [[variant]]\n\
         name = \"a\"\n\
         fs = \"zfs\"\n\
         [[variant]]\n\
         name = \"b\"\n\
         fs = \"ext4\"\n\
         size = \"1MiB\"\n\
         scheduler = \"cfq\"\n\
         [[workload]]\n\
         kind = \"dance\"\n\
         steps = 3\n\
         [[workload]]\n\
         kind = \"command\"\n\
         command = \"true\"\n\
         timeout = \"soon\"\n",
    );
    let ran = fslab(run_args(dir.path(), &spec, &["--dry-run"]));
    let file = spec.display().to_string();
    ran.expect(2)
        .says(&format!("{file}:2:15: `repetitions`"))
        .says(&format!("{file}:5:6: `fs`"))
        .says(&format!("{file}:9:8: `size`"))
        .says(&format!("{file}:10:13: `scheduler`"))
        .says(&format!("{file}:12:8: `kind`"))
        .says(&format!("{file}:17:11: `timeout`"))
        .says(&format!("6 errors in {file}"));
    assert!(!ran.stderr.contains("steps"), "an error that depends on an unknown kind was reported:\n{}", ran.stderr);
    assert!(!dir.path().join("results.db").exists() && !dir.path().join("work").exists());
}
