//! Read-only image testbeds (squashfs, erofs) packed from the `coldstart`
//! tree, and the `coldstart` workload on them: real mksquashfs/mkfs.erofs,
//! real loop devices mounted read-only, teardown that leaves nothing.

use crate::common;

use std::path::Path;

use fslab::experiment::{self, Experiment, VariantConfig};
use fslab::runner::{self, RunOptions, Silent};
use fslab::store::Store;
use fslab::testbed::Testbed;
use fslab::workload::{RunContext, Workload};

/// An experiment with one coldstart workload and the given variant bodies.
fn experiment(work: &Path, variants: &[(&str, &str)], workload: &str) -> Experiment {
    let mut text = format!("name = \"rofs\"\nrepetitions = 1\nworkdir = \"{}\"\n", work.display());
    for (name, body) in variants {
        text.push_str(&format!("[[variant]]\nname = \"{name}\"\n{body}\n"));
    }
    text.push_str(&format!("[[workload]]\nkind = \"coldstart\"\n{workload}\n"));
    experiment::parse(&text, None).unwrap()
}

const SMALL: &str = "files = 40\nscale = 0.05\nreaders = [1, 2]";

/// A coldstart workload with its inputs generated, and the variant.
fn setup(work: &Path, body: &str, workload_keys: &str) -> (Experiment, VariantConfig, Box<dyn Workload>) {
    let exp = experiment(work, &[("v", body)], workload_keys);
    let mut w = exp.workloads[0].build(exp.seed);
    w.prepare_inputs(&exp.cache_dir()).unwrap();
    let variant = exp.variants[0].clone();
    (exp, variant, w)
}

fn provision(exp: &Experiment, variant: &VariantConfig, w: &mut dyn Workload) -> anyhow::Result<Testbed> {
    let image = fslab::runner::prepare_image(&variant.testbed, &exp.cache_dir(), w)?;
    Testbed::provision_with(&variant.testbed, &exp.workdir, None, Some(&image))
}

/// Every file under `a` is under `b` with the same bytes, and nothing more.
fn assert_same_tree(a: &Path, b: &Path) {
    let list = |root: &Path| {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                } else {
                    out.push(entry.path().strip_prefix(root).unwrap().to_path_buf());
                }
            }
        }
        out.sort();
        out
    };
    let (la, lb) = (list(a), list(b));
    assert_eq!(la, lb);
    assert!(!la.is_empty());
    for rel in la {
        assert!(
            std::fs::read(a.join(&rel)).unwrap() == std::fs::read(b.join(&rel)).unwrap(),
            "{} differs",
            rel.display()
        );
    }
}

/// Provision, check mount, options, contents, read-only-ness and metrics,
/// tear down and check nothing stays. Returns the image size in MiB.
fn image_round_trip(body: &str, fstype: &str, expect_options: &[&str], workload_keys: &str) -> f64 {
    let dir = common::workdir("fslab-rofs");
    let (exp, variant, mut w) = setup(dir.path(), body, workload_keys);
    let mut bed = provision(&exp, &variant, w.as_mut()).unwrap();
    let name = bed.dir.file_name().unwrap().to_string_lossy().into_owned();
    let facts = bed.mount_facts.clone().unwrap();
    assert_eq!(facts.fstype, fstype);
    assert!(facts.source.starts_with("/dev/loop"), "{facts:?}");
    let all = format!("{},{}", facts.mount_options, facts.super_options);
    for option in expect_options {
        assert!(all.split(',').any(|o| o == *option), "{option} not in {all}");
    }
    // The loop device itself is read-only, and so is the mount.
    let loopname = bed.device_name.clone().unwrap();
    assert_eq!(std::fs::read_to_string(format!("/sys/block/{loopname}/ro")).unwrap().trim(), "1");
    let err = std::fs::write(bed.root().join("probe"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    // The image holds exactly the workload's tree.
    let tree = dir.path().join("expected");
    std::fs::create_dir(&tree).unwrap();
    w.populate(&tree).unwrap();
    assert_same_tree(&tree, bed.root());
    // Provisioning metrics.
    let metric =
        |n: &str| bed.metrics.iter().find(|m| m.name == n).unwrap_or_else(|| panic!("{n} in {:?}", bed.metrics)).value;
    assert!(metric("image_build_s") > 0.0 && metric("image_build_s") < 60.0);
    let size_mb = metric("image_size_mb");
    assert!(size_mb > 0.0);
    assert!(metric("image_ratio") > 0.0);
    assert!(!common::leftovers(&name).is_empty());
    bed.teardown().unwrap();
    assert_eq!(common::leftovers(&name), Vec::<String>::new());
    assert!(!bed.dir.exists());
    size_mb
}

#[test]
fn squashfs_gzip_image_is_mounted_read_only_with_the_tree() {
    if !common::root_or_skip() {
        return;
    }
    image_round_trip(
        "fs = \"squashfs\"\ncompressor = \"gzip\"\nlevel = 6\nblock_size = \"64KiB\"",
        "squashfs",
        &["ro"],
        SMALL,
    );
}

#[test]
fn squashfs_zstd_without_fragments_and_user_mount_options() {
    if !common::root_or_skip() {
        return;
    }
    image_round_trip(
        "fs = \"squashfs\"\ncompressor = \"zstd\"\nfragments = false\nmount = \"noatime\"\nread_ahead_kb = 32",
        "squashfs",
        &["ro", "noatime"],
        SMALL,
    );
}

#[test]
fn erofs_lz4hc_image_is_mounted_read_only_with_the_tree() {
    if !common::root_or_skip() {
        return;
    }
    image_round_trip(
        "fs = \"erofs\"\ncompressor = \"lz4hc\"\nlevel = 9\npcluster_size = \"64KiB\"",
        "erofs",
        &["ro"],
        SMALL,
    );
}

#[test]
fn zstd_image_is_smaller_than_an_uncompressed_one_for_compressible_content() {
    if !common::root_or_skip() {
        return;
    }
    let keys = "files = 40\nscale = 0.05\ncompressibility = 0.9\nreaders = [1]";
    let zstd = image_round_trip("fs = \"squashfs\"\ncompressor = \"zstd\"", "squashfs", &["ro"], keys);
    let none = image_round_trip("fs = \"squashfs\"\ncompressor = \"none\"", "squashfs", &["ro"], keys);
    let erofs_none = image_round_trip("fs = \"erofs\"", "erofs", &["ro"], keys);
    eprintln!("image MiB: squashfs zstd {zstd:.2}, squashfs none {none:.2}, erofs none {erofs_none:.2}");
    assert!(zstd < 0.3 * none, "zstd {zstd} MiB vs none {none} MiB");
    assert!(zstd < 0.3 * erofs_none, "zstd {zstd} MiB vs erofs none {erofs_none} MiB");
}

#[test]
fn bad_image_settings_name_file_line_and_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("fs = \"squashfs\"\ncompressor = \"brotli\"", "compressor", "unknown squashfs compressor"),
        ("fs = \"erofs\"\ncompressor = \"gzip\"", "compressor", "unknown erofs compressor"),
        ("fs = \"erofs\"\ncompressor = \"lz4\"\nlevel = 3", "level", "takes no level"),
        ("fs = \"squashfs\"\ncompressor = \"gzip\"\nlevel = 12", "level", "from 1 to 9"),
        ("fs = \"squashfs\"\nblock_size = \"3KiB\"", "block_size", "power of two"),
        ("fs = \"squashfs\"\npcluster_size = \"64KiB\"", "pcluster_size", "erofs setting"),
        ("fs = \"erofs\"\nfragments = false", "fragments", "squashfs setting"),
        ("fs = \"erofs\"\ncompressor = \"lz4\"\npcluster_size = \"5000\"", "pcluster_size", "multiple of 4KiB"),
        ("fs = \"erofs\"\npcluster_size = \"64KiB\"", "pcluster_size", "needs a `compressor`"),
        ("fs = \"ext4\"\ncompressor = \"zstd\"", "compressor", "read-only image setting"),
        ("fs = \"squashfs\"\nsize = \"64MiB\"", "size", "as large as its content"),
        ("fs = \"squashfs\"\nmount = \"rw\"", "mount", "read-only"),
        ("fs = \"squashfs\"\nmount = \"threads=lots\"", "mount", "threads="),
    ];
    for (body, key, message) in cases {
        let text = format!("name = \"t\"\n[[variant]]\nname = \"v\"\n{body}\n[[workload]]\nkind = \"coldstart\"\n");
        let err = format!("{:#}", experiment::parse(&text, Some(Path::new("/e/x.toml"))).unwrap_err());
        // The offending key sits on line 5 or later; the message names it.
        assert!(err.starts_with("/e/x.toml:"), "{err}");
        let line: usize = err.split(':').nth(1).unwrap().parse().unwrap();
        assert!(line >= 4, "{err}");
        assert!(err.contains(&format!("`{key}`")) && err.contains(message), "{body}: {err}");
    }
    // Workloads that cannot supply an image's content are refused up front.
    let text = "name = \"t\"\n[[variant]]\nname = \"v\"\nfs = \"squashfs\"\n[[workload]]\nkind = \"untar\"\n";
    let err = format!("{:#}", experiment::parse(text, Some(Path::new("/e/x.toml"))).unwrap_err());
    assert!(err.starts_with("/e/x.toml:6:") && err.contains("`kind`") && err.contains("read-only"), "{err}");
    // Coldstart's own keys.
    for (keys, key) in [
        ("readers = []", "readers"),
        ("readers = [1, 1]", "readers"),
        ("files = 0", "files"),
        ("compressibility = 2.0", "compressibility"),
        ("profile = \"small\"", "profile"),
    ] {
        let text = format!(
            "name = \"t\"\n[[variant]]\nname = \"v\"\nfs = \"tmpfs\"\n[[workload]]\nkind = \"coldstart\"\n{keys}\n"
        );
        let err = format!("{:#}", experiment::parse(&text, Some(Path::new("/e/x.toml"))).unwrap_err());
        assert!(err.starts_with("/e/x.toml:7:") && err.contains(&format!("`{key}`")), "{err}");
    }
    // Defaults: squashfs gzip/128K/fragments, erofs uncompressed, coldstart 300 files, readers 1 2 4.
    let exp = experiment(Path::new("/tmp/x"), &[("s", "fs = \"squashfs\""), ("e", "fs = \"erofs\"")], "");
    let s = exp.variants[0].testbed.image.clone().unwrap();
    assert_eq!((s.compressor.as_str(), s.block_size, s.fragments), ("gzip", None, true));
    assert_eq!(exp.variants[1].testbed.image.clone().unwrap().compressor, "none");
    match &exp.workloads[0].params {
        experiment::WorkloadParams::Coldstart(p) => {
            assert_eq!((p.files, p.readers.as_slice(), p.compressibility), (300, &[1, 2, 4][..], 0.6));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn squashfs_threads_option_is_passed_to_the_kernel() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-rofs");
    let (exp, variant, mut w) = setup(dir.path(), "fs = \"squashfs\"\nmount = \"threads=multi\"", SMALL);
    let by_mount =
        fslab::inspect::KernelConfig::load_running().is_ok_and(|c| c.is_enabled("SQUASHFS_CHOICE_DECOMP_BY_MOUNT"));
    match provision(&exp, &variant, w.as_mut()) {
        Ok(mut bed) => {
            assert!(by_mount, "the kernel took threads= without SQUASHFS_CHOICE_DECOMP_BY_MOUNT");
            bed.teardown().unwrap();
        }
        Err(e) => {
            let e = format!("{e:#}");
            assert!(!by_mount, "{e}");
            assert!(e.contains("CHOICE_DECOMP_BY_MOUNT") && e.contains("mount"), "{e}");
        }
    }
    assert_eq!(
        std::fs::read_dir(&exp.workdir).unwrap().filter(|e| e.as_ref().unwrap().file_name() != "cache").count(),
        0
    );
    assert_eq!(common::leftovers(&dir.path().to_string_lossy()), Vec::<String>::new());
}

#[test]
fn a_workload_without_content_cannot_provision_an_image() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-rofs");
    let exp = experiment(dir.path(), &[("v", "fs = \"squashfs\"")], SMALL);
    let err = format!("{:#}", Testbed::provision(&exp.variants[0].testbed, &exp.workdir, None).unwrap_err());
    assert!(err.contains("packed from a workload"), "{err}");
    let mut shell = experiment::parse(
        "name = \"t\"\n[[variant]]\nname = \"v\"\nfs = \"tmpfs\"\n[[workload]]\nkind = \"shell1\"\n",
        None,
    )
    .unwrap()
    .workloads[0]
        .build(1);
    let err = format!("{:#}", provision(&exp, &exp.variants[0], shell.as_mut()).unwrap_err());
    assert!(err.contains("cannot run on a read-only image"), "{err}");
    assert_eq!(common::leftovers(&dir.path().to_string_lossy()), Vec::<String>::new());
}

#[test]
fn coldstart_on_squashfs_reports_sane_metrics_per_readers_level() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-rofs");
    let (exp, variant, mut w) = setup(dir.path(), "fs = \"squashfs\"\ncompressor = \"zstd\"", SMALL);
    let mut bed = provision(&exp, &variant, w.as_mut()).unwrap();
    let ctx = RunContext::new(bed.root(), exp.cache_dir()).with_cgroup(bed.cgroup_procs());
    w.prepare(&ctx).unwrap();
    let metrics = w.run(&ctx);
    w.cleanup(&ctx).unwrap();
    bed.teardown().unwrap();
    let metrics = metrics.unwrap();
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "coldstart-1/total_s",
            "coldstart-1/p50_s",
            "coldstart-1/p99_s",
            "coldstart-2/total_s",
            "coldstart-2/p50_s",
            "coldstart-2/p99_s"
        ]
    );
    let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap().value;
    for k in [1, 2] {
        let (total, p50, p99) = (
            get(&format!("coldstart-{k}/total_s")),
            get(&format!("coldstart-{k}/p50_s")),
            get(&format!("coldstart-{k}/p99_s")),
        );
        assert!(total > 0.0 && total < 30.0, "{metrics:?}");
        assert!(p50 <= p99 && p99 <= total, "{metrics:?}");
    }
    // One reader: its completion is the total.
    assert_eq!(get("coldstart-1/p50_s"), get("coldstart-1/total_s"));
    assert!(metrics.iter().all(|m| m.unit == "s" && !m.higher_is_better));
}

#[test]
fn coldstart_reads_are_throttled_on_a_throttled_image() {
    if !common::root_or_skip() {
        return;
    }
    // ~2.4 MB of content, incompressible so the image is as large; at
    // 1 MiB/s reading it cannot take less than about 2 s.
    let dir = common::workdir("fslab-rofs");
    let keys = "files = 40\nscale = 0.1\ncompressibility = 0.0\nreaders = [2]";
    let (exp, variant, mut w) =
        setup(dir.path(), "fs = \"squashfs\"\ncompressor = \"lz4\"\nthrottle = { read_bps = \"1MiB\" }", keys);
    let mut bed = provision(&exp, &variant, w.as_mut()).unwrap();
    let image_mb = bed.metrics.iter().find(|m| m.name == "image_size_mb").unwrap().value;
    let ctx = RunContext::new(bed.root(), exp.cache_dir()).with_cgroup(bed.cgroup_procs());
    w.prepare(&ctx).unwrap();
    let metrics = w.run(&ctx);
    bed.teardown().unwrap();
    let total = metrics.unwrap()[0].value;
    eprintln!("throttled coldstart: {image_mb:.2} MiB image read in {total:.2} s");
    assert!(total > 0.5 * image_mb, "{total} s for {image_mb} MiB at 1 MiB/s");
}

#[test]
fn two_squashfs_variants_run_through_the_runner_and_store() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-rofs");
    let mut exp = experiment(
        &dir.path().join("work"),
        &[
            ("gzip", "fs = \"squashfs\"\ncompressor = \"gzip\""),
            ("zstd", "fs = \"squashfs\"\ncompressor = \"zstd\"\nlevel = 15"),
        ],
        SMALL,
    );
    exp.repetitions = experiment::Repetitions::Fixed(2);
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    let runs = store.runs(summary.experiment_id).unwrap();
    assert_eq!(
        (summary.runs_ok, summary.runs_failed),
        (4, 0),
        "{:?}",
        runs.iter().map(|r| r.error.clone()).collect::<Vec<_>>()
    );
    for run in &runs {
        let mount = run.mount.clone().unwrap();
        assert_eq!(mount.fstype, "squashfs");
        let geometry = run.geometry.clone().unwrap();
        assert!(geometry.to_lowercase().contains(&run.variant), "{geometry}");
    }
    let series = store.metric_series(summary.experiment_id).unwrap();
    let names: std::collections::BTreeSet<String> = series.iter().map(|s| s.metric.clone()).collect();
    for name in ["coldstart-1/total_s", "coldstart-2/p99_s", "image_build_s", "image_size_mb", "image_ratio"] {
        assert!(names.contains(name), "{name} not in {names:?}");
    }
    let env: serde_json::Value =
        serde_json::to_value(&store.experiment(summary.experiment_id).unwrap().environment).unwrap();
    if fslab::inspect::KernelConfig::load_running().is_ok() {
        assert!(env["squashfs_config"]["CONFIG_SQUASHFS"].is_string(), "{}", env["squashfs_config"]);
    }
    assert_eq!(common::leftovers(&dir.path().to_string_lossy()), Vec::<String>::new());
}

/// Notes of every run, in run order.
fn run_notes(store: &Store, id: i64) -> Vec<(String, Vec<String>)> {
    let runs = store.runs(id).unwrap();
    runs.iter().map(|r| (r.variant.clone(), store.run_record(r.id).unwrap().notes)).collect()
}

/// Two variants with the same image (content, kind, options, packer) and
/// two runs each pack it once: one image in the cache, one run packed, the
/// rest reused it; a variant with other options gets its own image. A
/// crashed pack's temporary is removed and never used.
#[test]
fn an_image_is_packed_once_for_every_variant_and_run() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-rofs");
    let work = dir.path().join("work");
    let mut exp = experiment(
        &work,
        &[
            ("a", "fs = \"squashfs\"\ncompressor = \"lz4\""),
            ("b", "fs = \"squashfs\"\ncompressor = \"lz4\"\nread_ahead_kb = 64"),
            ("zstd", "fs = \"squashfs\"\ncompressor = \"zstd\""),
        ],
        SMALL,
    );
    exp.repetitions = experiment::Repetitions::Fixed(2);
    let images = fslab::testbed::image::cache_dir(&exp.cache_dir());
    std::fs::create_dir_all(&images).unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    assert_eq!((summary.runs_ok, summary.runs_failed), (6, 0));
    let notes = run_notes(&store, summary.experiment_id);
    let image_note = |n: &[String]| n.iter().find(|t| t.starts_with("read-only image ")).cloned().unwrap();
    let packed: Vec<&String> =
        notes.iter().filter(|(_, n)| image_note(n).contains("packed into")).map(|(v, _)| v).collect();
    assert_eq!(packed.len(), 2, "one pack per distinct image: {notes:#?}");
    assert!(packed.contains(&&"zstd".to_string()), "{notes:#?}");
    let key = |n: &[String]| image_note(n).split(" ").nth(2).unwrap().to_string();
    let (a, b) = (&notes.iter().find(|(v, _)| v == "a").unwrap().1, &notes.iter().find(|(v, _)| v == "b").unwrap().1);
    assert_eq!(key(a), key(b), "{notes:#?}");
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&images)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let imgs: Vec<String> = listing().into_iter().filter(|n| n.ends_with(".img")).collect();
    assert_eq!(imgs.len(), 2, "{:?}", listing());
    assert!(!listing().iter().any(|n| n.contains("tmp") || n.starts_with("staging")), "{:?}", listing());
    // The cached bytes are the ones noted, and the run metrics are the one pack's.
    let img = images.join(format!("{}.img", key(a)));
    let note: serde_json::Value =
        serde_json::from_slice(&std::fs::read(images.join(format!("{}.json", key(a)))).unwrap()).unwrap();
    assert_eq!(note["sha256"].as_str().unwrap(), fslab::testbed::image::file_sha256(&img).unwrap());
    let packed_at = std::fs::metadata(&img).unwrap().modified().unwrap();

    // A crashed pack (a temporary, a note without its image) is never used;
    // a second experiment reuses the image as it is.
    std::fs::write(images.join(format!("{}.img.tmp-1", key(a))), b"half").unwrap();
    let zstd_img = images.join(format!("{}.img", key(&notes.iter().find(|(v, _)| v == "zstd").unwrap().1)));
    std::fs::remove_file(&zstd_img).unwrap();
    exp.repetitions = experiment::Repetitions::Fixed(1);
    let again = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    assert_eq!((again.runs_ok, again.runs_failed), (3, 0));
    let notes = run_notes(&store, again.experiment_id);
    for (variant, n) in &notes {
        let want = if variant == "zstd" { "packed into" } else { "reused from" };
        assert!(image_note(n).contains(want), "{variant}: {n:?}");
    }
    assert_eq!(std::fs::metadata(&img).unwrap().modified().unwrap(), packed_at, "the cached image was rewritten");
    assert!(zstd_img.is_file());
    assert!(!listing().iter().any(|n| n.contains("tmp")), "{:?}", listing());
    assert_eq!(common::leftovers(&dir.path().to_string_lossy()), Vec::<String>::new());
}
