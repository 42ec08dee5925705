//! Real testbeds on real loop devices: options read back from the kernel,
//! throttling that measurably slows writes, teardown that leaves nothing.

use crate::common;

use std::io::Write;
use std::time::Instant;

use fslab::experiment::{self, VariantConfig};
use fslab::testbed::Testbed;

/// Build one variant from an experiment snippet.
fn variant(body: &str) -> VariantConfig {
    let text = format!(
        "name = \"t\"\n[[variant]]\nname = \"v\"\n{body}\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n"
    );
    experiment::parse(&text, None).unwrap().variants.remove(0)
}

fn provision_and_check(body: &str, fstype: &str, expect_in_options: &[&str]) {
    let work = common::workdir("fslab-tb-test");
    let mut bed = Testbed::provision(&variant(body).testbed, work.path(), None).unwrap();
    let name = bed.dir.file_name().unwrap().to_string_lossy().into_owned();
    let facts = bed.mount_facts.clone().unwrap();
    assert_eq!(facts.fstype, fstype);
    assert!(facts.source.starts_with("/dev/loop"), "{facts:?}");
    let all = format!(
        "{},{},{}",
        facts.mount_options,
        facts.super_options,
        facts.fs_options.clone().unwrap_or_default().replace('\n', ",")
    );
    for option in expect_in_options {
        assert!(all.split(',').any(|o| o == *option || o.starts_with(&format!("{option}:"))), "{option} not in {all}");
    }
    // The testbed is usable.
    std::fs::write(bed.root().join("probe"), b"hello").unwrap();
    assert!(!common::leftovers(&name).is_empty(), "testbed should exist before teardown");
    bed.teardown().unwrap();
    assert_eq!(common::leftovers(&name), Vec::<String>::new());
    assert!(!bed.dir.exists());
}

#[test]
fn ext4_options_including_hidden_defaults_are_read_back() {
    if !common::root_or_skip() {
        return;
    }
    // mb_optimize_scan only shows in /proc/fs/ext4/<dev>/options, not mountinfo.
    provision_and_check(
        "fs = \"ext4\"\nsize = \"256MiB\"\nmkfs = [\"-E\", \"lazy_itable_init=0\"]\nmount = \"noatime,mb_optimize_scan=1\"",
        "ext4",
        &["noatime", "mb_optimize_scan=1"],
    );
}

#[test]
fn xfs_with_mkfs_arguments_and_mount_options() {
    if !common::root_or_skip() {
        return;
    }
    provision_and_check(
        "fs = \"xfs\"\nsize = \"320MiB\"\nmkfs = [\"-d\", \"agcount=2\"]\nmount = \"noatime,logbsize=256k\"",
        "xfs",
        &["noatime", "logbsize=256k"],
    );
}

#[test]
fn btrfs_with_compression() {
    if !common::root_or_skip() {
        return;
    }
    provision_and_check(
        "fs = \"btrfs\"\nsize = \"256MiB\"\nmount = \"noatime,compress=zstd\"",
        "btrfs",
        &["noatime", "compress=zstd"],
    );
}

#[test]
fn tmpfs_gets_its_size() {
    if !common::root_or_skip() {
        return;
    }
    let work = common::workdir("fslab-tb-test");
    let mut bed = Testbed::provision(
        &variant("fs = \"tmpfs\"\nsize = \"64MiB\"\nmount = \"noatime\"").testbed,
        work.path(),
        None,
    )
    .unwrap();
    let facts = bed.mount_facts.clone().unwrap();
    assert_eq!(facts.fstype, "tmpfs");
    assert!(facts.super_options.contains("size=65536k"), "{facts:?}");
    bed.teardown().unwrap();
}

#[test]
fn an_option_the_kernel_rejects_fails_and_leaves_nothing() {
    if !common::root_or_skip() {
        return;
    }
    let work = common::workdir("fslab-tb-test");
    let err = Testbed::provision(
        &variant("fs = \"ext4\"\nsize = \"64MiB\"\nmount = \"no_such_option\"").testbed,
        work.path(),
        None,
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("mount"), "{err:#}");
    let err = Testbed::provision(
        &variant("fs = \"ext4\"\nsize = \"64MiB\"\nmkfs = [\"-b\", \"3\"]").testbed,
        work.path(),
        None,
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("mkfs.ext4"), "{err:#}");
    // Nothing of ours stays: directories, loops, mounts.
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    assert_eq!(common::leftovers(&work.path().to_string_lossy()), Vec::<String>::new());
}

#[test]
fn queue_settings_and_sysfs_tunables_are_applied() {
    if !common::root_or_skip() {
        return;
    }
    let work = common::workdir("fslab-tb-test");
    let body = "fs = \"ext4\"\nsize = \"256MiB\"\nread_ahead_kb = 16\nscheduler = \"mq-deadline\"\nsysfs = { mb_max_to_scan = 77 }";
    let mut bed = Testbed::provision(&variant(body).testbed, work.path(), None).unwrap();
    let name = bed.device_name.clone().unwrap();
    assert_eq!(std::fs::read_to_string(format!("/sys/block/{name}/queue/read_ahead_kb")).unwrap().trim(), "16");
    assert!(std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler")).unwrap().contains("[mq-deadline]"));
    assert_eq!(std::fs::read_to_string(format!("/sys/fs/ext4/{name}/mb_max_to_scan")).unwrap().trim(), "77");
    bed.teardown().unwrap();

    let err = Testbed::provision(
        &variant("fs = \"ext4\"\nsize = \"64MiB\"\nsysfs = { no_such_knob = 1 }").testbed,
        work.path(),
        None,
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no_such_knob"), "{err:#}");
}

/// Write 24 MiB into the testbed from inside its cgroup and fsync; time it.
fn timed_write(body: &str) -> f64 {
    let work = common::workdir("fslab-tb-test");
    let mut bed = Testbed::provision(&variant(body).testbed, work.path(), None).unwrap();
    let ctx = fslab::workload::RunContext::new(bed.root(), work.path()).with_cgroup(bed.cgroup_procs());
    let mut cmd = ctx.command("dd");
    cmd.args(["if=/dev/zero", "of=data", "bs=1M", "count=24", "conv=fsync"]);
    let start = Instant::now();
    ctx.execute(cmd, "dd").unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    bed.teardown().unwrap();
    elapsed
}

#[test]
fn a_throttled_device_is_measurably_slower() {
    if !common::root_or_skip() {
        return;
    }
    let fast = timed_write("fs = \"ext4\"\nsize = \"128MiB\"");
    let slow = timed_write("fs = \"ext4\"\nsize = \"128MiB\"\nthrottle = { write_bps = \"8MiB\" }");
    // 24 MiB at 8 MiB/s cannot take less than ~3 s; unthrottled it is far quicker.
    assert!(slow > 2.5, "throttled write took only {slow:.2}s");
    assert!(slow > 2.0 * fast, "throttled {slow:.2}s vs unthrottled {fast:.2}s");
}

#[test]
fn timing_buffered_writeback_is_throttled_too() {
    if !common::root_or_skip() {
        return;
    }
    // Write without fsync from this process (not in the cgroup), then syncfs:
    // the flusher threads do the writing, and they must be throttled as well.
    let work = common::workdir("fslab-tb-test");
    let mut bed = Testbed::provision(
        &variant("fs = \"ext4\"\nsize = \"128MiB\"\nthrottle = { write_bps = \"8MiB\" }").testbed,
        work.path(),
        None,
    )
    .unwrap();
    let mut f = std::fs::File::create(bed.root().join("data")).unwrap();
    f.write_all(&vec![7u8; 16 << 20]).unwrap();
    drop(f);
    let start = Instant::now();
    let ctx = fslab::workload::RunContext::new(bed.root(), work.path()).with_cgroup(bed.cgroup_procs());
    let mut sync = ctx.command("sync");
    sync.args(["-f", "."]);
    ctx.execute(sync, "sync").unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    bed.teardown().unwrap();
    assert!(elapsed > 1.4, "16 MiB of writeback at 8 MiB/s took {elapsed:.2}s");
}

#[test]
fn teardown_runs_when_a_panic_unwinds() {
    if !common::root_or_skip() {
        return;
    }
    let work = common::workdir("fslab-tb-test");
    let path = work.path().to_path_buf();
    let result = std::panic::catch_unwind(move || {
        let _bed = Testbed::provision(
            &variant("fs = \"ext4\"\nsize = \"64MiB\"\nthrottle = { write_bps = \"8MiB\" }").testbed,
            &path,
            None,
        )
        .unwrap();
        panic!("workload exploded");
    });
    assert!(result.is_err());
    assert_eq!(common::leftovers(&work.path().to_string_lossy()), Vec::<String>::new());
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
}
