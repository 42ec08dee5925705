//! One kernel cache, found one way, and a prune that cannot take what a
//! store needs (issue 28.4, 28.5).
//!
//! The cache a command uses shows in where the archive's private apt setup
//! is laid out: with apt pointed at a closed port (no network needed) the
//! lookup fails offline (exit 3), after making `<cache>/debian-archive`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common;

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `fslab ARGS` with no kernel cache in the environment and apt offline.
fn offline(args: &[&str]) -> Output {
    Command::new(common::fslab_bin())
        .args(args)
        .env_remove("FSLAB_KERNEL_CACHE")
        .env("http_proxy", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn laid_out(cache: &Path) -> bool {
    cache.join("debian-archive/etc/sources.list").is_file()
}

/// A dry run with `--workdir X` reads the file's kernels in `X/cache`, the
/// cache the run itself would use (before: the file's default work
/// directory's, and the run then used another); `--kernel-cache Y` wins
/// over both; `kernel build --kernel-cache Z` (and its old spelling
/// `--cache`) builds in Z (before: ignored).
#[test]
fn every_command_reads_kernels_in_the_cache_it_was_given() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-kernel-cache");
    let file_workdir = dir.path().join("file-work");
    let spec = common::write_spec(
        dir.path(),
        "archive.toml",
        &format!(
            "name = \"archive kernel\"\nworkdir = \"{}\"\n\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n\
             kernel = \"debian:6.1-cloud\"\n\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            file_workdir.display()
        ),
    );
    let spec = spec.to_str().unwrap();
    let x = dir.path().join("x");
    let out = offline(&["run", "--dry-run", spec, "--workdir", x.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(laid_out(&x.join("cache")), "the dry run did not look in --workdir's cache: {}", text(&out));
    assert!(!laid_out(&file_workdir.join("cache")), "the dry run looked in the file's work directory");

    let y = dir.path().join("y");
    let out =
        offline(&["run", "--dry-run", spec, "--workdir", x.to_str().unwrap(), "--kernel-cache", y.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(laid_out(&y), "--kernel-cache was not used: {}", text(&out));

    for flag in ["--kernel-cache", "--cache"] {
        let z = dir.path().join(format!("z{flag}"));
        let out = offline(&["kernel", "build", spec, flag, z.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        assert!(laid_out(&z), "kernel build {flag} was ignored: {}", text(&out));
    }
    assert!(!laid_out(&file_workdir.join("cache")));
}

/// A store that ran experiments with a cache is read by every prune of
/// that cache, whichever `--db` prune is given (before: only the one
/// given, so another store's kernel was removed); prune removes nothing
/// without `--yes`; a store that cannot be read keeps everything.
#[test]
fn prune_keeps_what_any_store_that_used_the_cache_needs() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-prune");
    let cache = dir.path().join("cache");
    let key = "0badc0ffee";
    let entry = cache.join("kernels").join(key);
    std::fs::create_dir_all(entry.join("boot")).unwrap();
    std::fs::write(entry.join("boot/config-6.1.0-x"), "CONFIG_X=y\n").unwrap();

    // Store A ran an experiment booting that entry's kernel with this cache.
    let a = dir.path().join("a.db");
    {
        let mut store = fslab::store::Store::open(&a).unwrap();
        let mut env = fslab::stored::StoredEnvironment::default();
        env.kernels.insert(
            "v".into(),
            fslab::stored::VariantKernel {
                place: "vm".into(),
                config_source: Some(entry.join("boot/config-6.1.0-x").display().to_string()),
                ..Default::default()
            },
        );
        store
            .create_experiment(&fslab::store::NewExperiment {
                name: "kernel user".into(),
                spec_path: None,
                spec_text: "x".into(),
                spec_hash: "h".into(),
                seed: 1,
                plan: Default::default(),
                environment: env,
                variants: Vec::new(),
                workloads: Vec::new(),
            })
            .unwrap();
    }
    fslab::kernel::prune::record_store(&cache, &std::fs::canonicalize(&a).unwrap().display().to_string());
    // Store B, the one prune is given, needs nothing.
    let b = dir.path().join("b.db");
    fslab::store::Store::open(&b).unwrap();

    let prune = |extra: &[&str]| {
        let out = Command::new(common::fslab_bin())
            .args(["kernel", "prune", "--kernel-cache", cache.to_str().unwrap(), "--db", b.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    };
    let shown = prune(&["--yes"]);
    assert!(entry.is_dir(), "store A's kernel was removed: {shown}");
    assert!(shown.contains("a.db: 1 experiments") && shown.contains("kept 1"), "{shown}");

    // Store A gone: its kernel is needed by nobody; shown, and removed only with --yes.
    std::fs::remove_file(&a).unwrap();
    let shown = prune(&[]);
    assert!(shown.contains(&format!("would remove {key}")) && shown.contains("--yes"), "{shown}");
    assert!(entry.is_dir(), "prune without --yes removed {key}");
    prune(&["--yes"]);
    assert!(!entry.exists(), "the unneeded kernel stayed");
    assert!(fslab::kernel::prune::stores(&cache).is_empty(), "a deleted store is forgotten");
}

/// A second fslab that needs a kernel cache entry another holds says what
/// it waits for and who holds it (before: silent for as long as the build took).
#[test]
fn a_wait_for_a_kernel_cache_lock_says_who_holds_it() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-lock-wait");
    let cache = dir.path().join("cache");
    let key = "1234abcd";
    std::fs::create_dir_all(cache.join("kernels").join(key)).unwrap();
    let held = fslab::kernel::cache::lock_for(
        &cache.join("kernels").join(format!(".{key}.lock")),
        "building kernel 6.1 (a test)",
    )
    .unwrap();
    let child = Command::new(common::fslab_bin())
        .args(["kernel", "prune", "--yes", "--kernel-cache", cache.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The message comes after a second of waiting; give it a few.
    std::thread::sleep(std::time::Duration::from_secs(4));
    drop(held);
    let out = child.wait_with_output().unwrap();
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains(&format!(".{key}.lock to be free")), "no word of the wait: {shown}");
    assert!(shown.contains(&format!("held by pid {}: building kernel 6.1 (a test)", std::process::id())), "{shown}");
    assert!(!cache.join("kernels").join(key).exists(), "prune went on once the lock was free");
}
