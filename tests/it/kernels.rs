//! Kernels as an experiment axis, end to end through `fslab run`: each
//! kernel variant boots its own VM (TCG here; KVM where it works), the
//! runs happen in the guest on its virtio testbed disk, and the records
//! come back to the store with the guest's own kernel. Boots are the cost
//! (35-70 s each under TCG on two cores), so one experiment answers most
//! questions, and the VM tests' lock keeps one boot at a time.

use crate::common;
use crate::vm::{
    archive_kernel, icount_plugin_or_skip, kernel_cache, one_vm, release_from_name, resolve_deb, vm_prerequisites,
};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

fn fslab(args: &[&str]) -> Output {
    Command::new(common::fslab_bin()).args(args).env("FSLAB_KERNEL_CACHE", kernel_cache()).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// What every VM test here sets up: the VM lock (one boot at a time), a
/// work directory holding the experiment's `work/` and `results.db`, its
/// experiment files, `fslab run` against them, the store they fill, and
/// the wait for nothing left behind. A test states its file and checks.
struct VmTest {
    dir: tempfile::TempDir,
    work: PathBuf,
    db: PathBuf,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl VmTest {
    fn new(tag: &str) -> VmTest {
        let one = one_vm();
        let dir = common::workdir(tag);
        let (work, db) = (dir.path().join("work"), dir.path().join("results.db"));
        VmTest { dir, work, db, _one: one }
    }

    /// Writes the experiment file `name`: `body` with `workdir` set to `work/`.
    fn spec(&self, name: &str, body: &str) -> PathBuf {
        common::write_spec(self.dir.path(), name, &format!("workdir = \"{}\"\n{body}", self.work.display()))
    }

    /// `fslab run SPEC --db results.db EXTRA…` with the tests' kernel cache, not started.
    fn command(&self, spec: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(common::fslab_bin());
        command.arg("run").arg(spec).arg("--db").arg(&self.db).args(extra).env("FSLAB_KERNEL_CACHE", kernel_cache());
        command
    }

    fn run(&self, spec: &Path, extra: &[&str]) -> Output {
        self.command(spec, extra).output().unwrap()
    }

    fn db_arg(&self) -> &str {
        self.db.to_str().unwrap()
    }

    fn store(&self) -> fslab::store::Store {
        fslab::store::Store::open_existing(&fslab::store::StoreLocation::parse(self.db_arg())).unwrap()
    }

    /// The store and its newest experiment.
    fn experiment(&self) -> (fslab::store::Store, i64) {
        let store = self.store();
        let id = store.list_experiments().unwrap().iter().map(|e| e.id).max().expect("an experiment");
        (store, id)
    }

    /// Waits up to 10 s for no VM, testbed, FUSE mount or media server under
    /// `work/`, then asserts it (`shown` explains a failure).
    fn assert_gone(&self, shown: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(leftovers(&self.work).is_empty() && media_servers(&self.work).is_empty()) && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        assert_eq!(leftovers(&self.work), Vec::<String>::new(), "{shown}");
        assert_eq!(media_servers(&self.work), Vec::<String>::new(), "{shown}");
    }
}

/// QEMU/virtiofsd processes and testbed or session directories of the
/// experiment in `work`.
pub(crate) fn leftovers(work: &Path) -> Vec<String> {
    let needle = work.to_string_lossy().into_owned();
    let mut found: Vec<String> = fslab::vm::leftovers::vm_processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(&needle))
        .map(|p| format!("process {} {}", p.pid, p.cmdline))
        .collect();
    found.extend(common::leftovers(&needle));
    for entry in std::fs::read_dir(work).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("fslab-tb-") {
            found.push(format!("directory {}", entry.path().display()));
        }
    }
    found
}

/// Two Debian kernels, an A/A pair of VMs of one kernel, and a throttled
/// variant, in one experiment: every run records its guest's release, the
/// configs are stored per variant, A/A decides nothing, the throttle is
/// seen as a regression, places are shown, and nothing is left behind.
#[test]
fn two_kernels_an_a_a_pair_and_a_throttle_in_one_experiment() {
    let Some(deb61) = vm_prerequisites("6.1.") else { return };
    let Some(deb612) = vm_prerequisites("6.12.") else { return };
    let t = VmTest::new("fslab-kernels");
    // Unpacked once into the shared cache the runs use too.
    let (k61, k612) = (resolve_deb(&deb61), resolve_deb(&deb612));
    let spec = t.spec(
        "kernels.toml",
        &format!(
            r#"name = "kernels under test"
repetitions = 3
seed = 7

[defaults]
fs = "ext4"
size = "128MiB"
kernel = "{deb61}"
vm = {{ cpus = 2, memory = "1GiB" }}

[[variant]]
name = "6.1"

[[variant]]
name = "6.1-again"

[[variant]]
name = "6.1-throttled"
# 12 MiB at 1 MiB/s against well under 2 s: an effect that 3 runs decide
# even at the 40% run-to-run CV of a loaded TCG guest (at 4 MiB/s they did not).
throttle = {{ write_bps = "1MiB" }}

[[variant]]
name = "6.12"
kernel = "debian:6.12-cloud"

[[workload]]
kind = "command"
command = "dd if=/dev/zero of=data bs=1M count=12 oflag=direct status=none"
# The throttle costs device time, not guest instructions: under emulation
# naming the device's busy time keeps wall time deciding too.
decisive = ["disk/busy_s"]
"#,
            deb61 = deb61.display(),
        ),
    );
    let started = Instant::now();
    let out = t.run(&spec, &[]);
    let run_text = text(&out);
    eprintln!("fslab run with 4 VMs took {:.0} s", started.elapsed().as_secs_f64());
    assert_eq!(out.status.code(), Some(0), "{run_text}");
    assert!(run_text.contains("12 runs ok, 0 failed"), "{run_text}");
    assert_eq!(leftovers(&t.work), Vec::<String>::new(), "after a finished experiment");

    // Every run ran in a VM of its own variant's kernel.
    let (store, id) = t.experiment();
    let places = store.variant_places(id).unwrap();
    for (variant, place) in &places {
        let want = if variant == "6.12" { &k612.release } else { &k61.release };
        assert_eq!(&place.kernel_release, want, "{variant}: {place:?}");
        assert_eq!(place.kind, "vm");
        assert_eq!((place.cpus, place.memory_mib), (Some(2), Some(1024)));
    }
    assert_eq!(places.len(), 4, "one place per variant: {places:?}");
    assert_eq!(k61.release, release_from_name(&deb61));

    // The configs are stored per variant, and kconfig diff reads them from there.
    let environment: Value = serde_json::to_value(&store.experiment(id).unwrap().environment).unwrap();
    let kernels = &environment["kernels"];
    let config = |v: &str| kernels[v]["config"].as_str().unwrap_or_default().to_string();
    assert!(config("6.1").contains("CONFIG_EXT4_FS"), "{}", kernels["6.1"]);
    assert_ne!(config("6.1"), config("6.12"));
    // An archive kernel records exactly which package it was; a file records its path.
    let (archive_612, _) = archive_kernel("6.12").unwrap();
    let typed = store.experiment(id).unwrap().environment.kernels;
    match &typed["6.12"].origin {
        Some(fslab::kernel::KernelSource::DebianImage(d)) => assert_eq!(d.package, archive_612.package),
        other => panic!("6.12's origin is not its archive package: {other:?}"),
    }
    assert_eq!(kernels["6.12"]["source"], "debian:6.12-cloud");
    assert!(
        matches!(&typed["6.1"].origin, Some(fslab::kernel::KernelSource::Deb(d)) if d.path == deb61),
        "{:?}",
        typed["6.1"].origin
    );
    assert_eq!(config("6.1"), config("6.1-again"));
    let diff =
        fslab(&["kconfig", "diff", "--experiment", &id.to_string(), "--variants", "6.1,6.12", "--db", t.db_arg()]);
    assert!(diff.status.success(), "{}", text(&diff));
    assert!(String::from_utf8_lossy(&diff.stdout).contains(" → "), "{}", text(&diff));

    // Verdicts: the A/A pair decides nothing, the throttle is a regression.
    let compare = |baseline: &str| -> Vec<Value> {
        let out = fslab(&["compare", "--db", t.db_arg(), "--baseline", baseline, "--format", "json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let rows = compare("6.1");
    let verdict = |rows: &[Value], variant: &str| -> String {
        let row = rows.iter().find(|r| r["variant"] == variant && r["metric"] == "wall_s").unwrap();
        row["verdict"].as_str().unwrap().to_string()
    };
    let aa = verdict(&rows, "6.1-again");
    assert!(aa == "no-change" || aa == "inconclusive", "A/A across two VMs gave {aa}: {rows:#?}");
    assert_eq!(verdict(&rows, "6.1-throttled"), "regressed", "{rows:#?}");
    let emulated = rows.iter().any(|r| r["places"]["variant"][0]["accelerator"] == "tcg");
    if emulated {
        let marks = rows[0]["place_marks"].as_array().cloned().unwrap_or_default();
        assert!(marks.iter().any(|m| m.as_str().unwrap().contains("emulated")), "{:#}", rows[0]);
    }
    let text_out = fslab(&["compare", "--db", t.db_arg()]);
    let shown = text(&text_out);
    assert!(shown.contains("where the variants ran:") && shown.contains(&k612.release), "{shown}");

    let md = fslab(&["report", "--db", t.db_arg(), "--format", "markdown", "-o", "-"]);
    assert!(String::from_utf8_lossy(&md.stdout).contains("Where the variants ran"), "{}", text(&md));
}

/// A garbage kernel file is refused before anything runs; a kernel that
/// panics at boot is booted once more, then fails its run with the console
/// tail, and the variant's later runs fail at once instead of booting it again.
#[test]
fn a_kernel_that_cannot_boot_fails_its_runs_clearly() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let t = VmTest::new("fslab-kernels");
    let garbage = t.dir.path().join("vmlinuz-garbage");
    std::fs::write(&garbage, vec![0x5a; 64 << 10]).unwrap();
    let spec_text = |kernel: &str| {
        format!(
            "name = \"bad kernel\"\nrepetitions = 2\n\n[defaults]\nfs = \"ext4\"\nsize = \"64MiB\"\n\n\
             [[variant]]\nname = \"host\"\n\n[[variant]]\nname = \"broken\"\nkernel = {kernel}\n\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n"
        )
    };
    let spec = t.spec("garbage.toml", &spec_text(&format!("\"{}\"", garbage.display())));
    let out = t.run(&spec, &[]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("garbage.toml:14") && shown.contains("kernel"), "{shown}");
    assert!(!t.db.exists() || !shown.contains("runs ok"), "{shown}");

    // The image without its modules: virtiofs is a module, so the root cannot be mounted.
    let image = resolve_deb(&deb).image;
    let spec = t.spec("panics.toml", &spec_text(&format!("{{ image = \"{}\" }}", image.display())));
    let started = Instant::now();
    let out = t.run(&spec, &[]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "failed runs make a failed experiment: {shown}");
    fslab::testsupport::did_not_hang(
        started,
        Duration::from_secs(240),
        "runs of a kernel that panics (a panic must not wait for boot timeouts)",
    );
    let (store, id) = t.experiment();
    let runs = store.runs(id).unwrap();
    let broken: Vec<_> = runs.iter().filter(|r| r.variant == "broken").collect();
    assert_eq!(broken.len(), 2);
    let first = broken[0].error.clone().unwrap_or_default();
    assert!(first.contains("Unable to mount root fs"), "the console tail is in the error: {first}");
    // A boot that fails is tried once more (an emulator's crash is not the kernel's); this one fails twice.
    assert!(first.contains("booted twice, and both boots failed"), "{first}");
    assert!(shown.contains("booting it once more"), "the retry is said as it happens: {shown}");
    let second = broken[1].error.clone().unwrap_or_default();
    assert!(second.contains("did not boot earlier"), "{second}");
    assert!(runs.iter().filter(|r| r.variant == "host").all(|r| r.status == fslab::record::RunStatus::Ok));
    assert_eq!(leftovers(&t.work), Vec::<String>::new());
}

/// SIGTERM while a kernel variant's VM boots: fslab stops promptly, says
/// the experiment was interrupted, and leaves no VM, directory or mount.
#[test]
fn sigterm_during_a_vm_experiment_leaves_nothing() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let t = VmTest::new("fslab-kernels");
    resolve_deb(&deb);
    let spec = t.spec(
        "interrupt.toml",
        &format!(
            "name = \"interrupted\"\nrepetitions = 3\n\n[defaults]\nfs = \"ext4\"\nsize = \"64MiB\"\n\
             kernel = \"{}\"\n\n[[variant]]\nname = \"a\"\n\n[[variant]]\nname = \"b\"\n\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            deb.display()
        ),
    );
    let mut child = t.command(&spec, &[]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while leftovers(&t.work).iter().all(|l| !l.contains("qemu-system")) {
        assert!(Instant::now() < deadline, "no VM started");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("fslab ended ({status}) before its VM started: {}", text(&child.wait_with_output().unwrap()));
        }
        sleep(Duration::from_millis(100));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    let shown = text(&out);
    fslab::testsupport::did_not_hang(stopped, Duration::from_secs(30), &format!("stopping: {shown}"));
    assert_eq!(out.status.code(), Some(143), "{shown}");
    assert!(shown.contains("interrupted"), "{shown}");
    t.assert_gone(&shown);
}

/// Commit bisection through kernels: each commit of a throwaway repository
/// names the kernel package to boot (the build step links it, as a kernel
/// build would produce its image) and a setting the workload reads; the
/// good end boots 6.1, the bad end 6.12 with the slow setting, and the
/// bisection says which commit is bad with every step run in its own VM.
#[test]
fn bisect_commits_boots_the_kernel_each_commit_names() {
    let Some(deb61) = vm_prerequisites("6.1.") else { return };
    let Some(deb612) = vm_prerequisites("6.12.") else { return };
    let t = VmTest::new("fslab-kernels");
    let (k61, k612) = (resolve_deb(&deb61), resolve_deb(&deb612));
    let root = t.dir.path();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(root.join("trees")).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.email=t@example.org", "-c", "user.name=t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    for (subject, deb, count) in [("good: 6.1", &deb61, 4), ("bad: 6.12, more data", &deb612, 24)] {
        std::fs::write(repo.join("kernel-package"), deb.file_name().unwrap().to_string_lossy().as_bytes()).unwrap();
        std::fs::write(repo.join("count"), format!("{count}\n")).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", subject]);
    }
    let bad = git(&["rev-parse", "HEAD"]);
    let spec = t.spec(
        "bisect.toml",
        "name = \"kernel bisect\"\nrepetitions = 3\n\n[[variant]]\nname = \"k\"\nfs = \"ext4\"\n\
         size = \"96MiB\"\nkernel = \"{worktree}/kernel.deb\"\nthrottle = { write_bps = \"4MiB\" }\n\
         vm = { cpus = 2, memory = \"1GiB\" }\n\n[[workload]]\nkind = \"command\"\nname = \"w\"\n\
         command = \"dd if=/dev/zero of=data bs=1M count=$(cat {worktree}/count) oflag=direct status=none\"\n",
    );
    // What a kernel build leaves in the tree: here, a link to the package the commit names.
    let build = format!("ln -sf \"{}/$(cat kernel-package)\" kernel.deb", deb61.parent().unwrap().display());
    let out = Command::new(common::fslab_bin())
        .args(["bisect-commits", "--repo", repo.to_str().unwrap(), "--good", "HEAD~1", "--bad", "main"])
        .args(["--experiment", spec.to_str().unwrap(), "--build", &build, "--json"])
        .args(["--worktrees", root.join("trees").to_str().unwrap()])
        .args(["--db", t.db_arg()])
        .env("FSLAB_KERNEL_CACHE", kernel_cache())
        .env_remove("FSLAB_DB")
        .output()
        .unwrap();
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out)));
    assert_eq!(out.status.code(), Some(0), "{report:#}\n{}", text(&out));
    assert_eq!(report["status"], "found", "{report:#}");
    assert_eq!(report["first_bad"]["sha"], bad.as_str(), "{report:#}");
    assert_eq!(report["ends"]["verdict"], "regressed", "{report:#}");

    // Each end ran in a VM of the kernel its commit named.
    let store = t.store();
    let mut releases: Vec<String> = Vec::new();
    for e in store.list_experiments().unwrap() {
        for (_, place) in store.variant_places(e.id).unwrap() {
            assert_eq!(place.kind, "vm");
            releases.push(place.kernel_release);
        }
    }
    releases.sort();
    releases.dedup();
    let mut want = vec![k61.release.clone(), k612.release.clone()];
    want.sort();
    assert_eq!(releases, want);
    assert_eq!(std::fs::read_dir(root.join("trees")).unwrap().count(), 0, "worktrees left behind");
    assert_eq!(leftovers(&t.work), Vec::<String>::new());
}

/// What both planted checks assert (this file's CPU-work one and
/// `planted_kernel`'s read-path one) on `compare`'s rows of the store `db`:
/// `base-again`'s instruction row (`vm/instructions_work`) decides and is
/// neither regressed nor improved (A/A), `plus10`'s is `regressed`. Returns the rows and `plus10`'s row.
pub(crate) fn planted_is_regressed_and_a_a_is_not(db: &str) -> (Vec<Value>, Value) {
    let out = fslab(&["compare", "--db", db, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    // The guest's instructions without its background decide (profiled runs).
    let decider = fslab::metric::WORK_INSTRUCTIONS;
    let row = |variant: &str| -> Value {
        let found = rows.iter().find(|r| r["variant"] == variant && r["metric"] == decider);
        found.cloned().unwrap_or_else(|| panic!("no {decider} row for {variant}:\n{}", text(&out)))
    };
    let (aa, planted) = (row("base-again"), row("plus10"));
    assert_eq!((aa["unit"].as_str(), aa["decisive"].as_bool()), (Some("insn"), Some(true)), "{aa}");
    assert_eq!(planted["verdict"], "regressed", "{planted}");
    assert!(!["regressed", "improved"].contains(&aa["verdict"].as_str().unwrap()), "A/A decided: {aa}");
    (rows, planted)
}

/// Under TCG every guest run also reports the guest instructions of its
/// measured part (`vm/instructions`, counted by the QEMU plugin between the
/// agent's marker NOPs), and they decide: examples/planted-cpu-work.toml
/// plants 10% more rounds of a shell loop through the guest's kernel
/// command line, and at a fixed 5 runs per variant that is `regressed`
/// while the A/A pair is not, whatever the host's load does to wall time.
#[test]
fn a_planted_ten_percent_of_guest_work_is_regressed_and_a_a_is_not() {
    if vm_prerequisites("6.1.").is_none() {
        return;
    }
    if !icount_plugin_or_skip() {
        return;
    }
    let t = VmTest::new("fslab-planted");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/planted-cpu-work.toml");
    let out = t.run(&example, &["--workdir", t.work.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(leftovers(&t.work), Vec::<String>::new());

    let (rows, planted) = planted_is_regressed_and_a_a_is_not(t.db_arg());
    // The loop alone is about 0.25 G instructions; 10% more rounds count about 10% more.
    assert!(planted["mean_baseline"].as_f64().unwrap() > 1e8, "{planted}");
    let change = planted["change_pct"].as_f64().unwrap();
    assert!((8.0..12.0).contains(&change), "10% more rounds counted {change:+.2}% instructions");
    // Wall time is shown, never decisive, under emulation.
    let wall = rows.iter().find(|r| r["variant"] == "plus10" && r["metric"] == "wall_s").unwrap();
    assert_eq!(wall["decisive"], false, "{wall}");
}

/// A `linux-image-*` package without a kernel image in `boot/` is an
/// experiment-file error (exit 2) naming the file, line and key, decided
/// when the file is read: nothing is prepared or measured. Needs only
/// `dpkg-deb` (no VM, no root).
#[test]
fn a_kernel_package_without_boot_is_an_experiment_file_error() {
    let dir = common::workdir("fslab-deb-noboot");
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(pkg.join("usr/share/doc/linux-image-9.9.9-test")).unwrap();
    std::fs::write(
        pkg.join("DEBIAN/control"),
        "Package: linux-image-9.9.9-test\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: no boot/\n",
    )
    .unwrap();
    std::fs::write(pkg.join("usr/share/doc/linux-image-9.9.9-test/README"), "no kernel here\n").unwrap();
    let deb = dir.path().join("noboot.deb");
    let built = Command::new("dpkg-deb").arg("--build").arg(&pkg).arg(&deb).output().unwrap();
    assert!(built.status.success(), "dpkg-deb: {}", text(&built));
    let spec = common::write_spec(
        dir.path(),
        "noboot.toml",
        &format!(
            "name = \"noboot\"\nworkdir = \"{}\"\n\n[defaults]\nfs = \"ext4\"\n\n[[variant]]\nname = \"a\"\n\n\
             [[variant]]\nname = \"b\"\nkernel = \"{}\"\n\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.path().join("work").display(),
            deb.display()
        ),
    );
    let db = dir.path().join("r.db");
    for dry in [true, false] {
        let mut args = vec!["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()];
        if dry {
            args.push("--dry-run");
        }
        let out = fslab(&args);
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(2), "dry run {dry}: {shown}");
        assert!(shown.contains("noboot.toml:12:") && shown.contains("`kernel`"), "{shown}");
        assert!(shown.contains("no kernel image in boot/"), "{shown}");
        assert!(!shown.contains("preparing inputs"), "decided before anything runs: {shown}");
    }
    assert!(!db.exists() && !dir.path().join("work").exists(), "nothing was created");
}

/// `fslab media-serve` processes serving under `work`.
fn media_servers(work: &Path) -> Vec<String> {
    let needle = work.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("media-serve") && cmdline.contains(&needle) {
            found.push(format!("media server {}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// A kernel variant with a media model: the guest's virtio disk is the
/// file the model serves on the host, the first run stores the model's
/// account of its measured part (the requests the guest's block trace
/// recorded, none larger than the server takes), and SIGTERM during the
/// second run leaves no VM, FUSE mount or media server behind. One boot.
#[test]
fn a_media_model_serves_a_guests_disk_and_sigterm_leaves_nothing() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let t = VmTest::new("fslab-kernels");
    resolve_deb(&deb);
    let work = &t.work;
    let spec = t.spec(
        "media-vm.toml",
        &format!(
            r#"name = "media in a vm"
repetitions = 2

[defaults]
fs = "ext4"
size = "64MiB"
kernel = "{deb}"
vm = {{ cpus = 2, memory = "1GiB" }}

[[variant]]
name = "sdcard"
device = {{ model = "sdcard" }}
# No background writes (lazy init, a journal commit) across the edges of
# the measured part, where the trace and the model start and stop apart.
mkfs = ["-E", "lazy_itable_init=0,lazy_journal_init=0"]

[[workload]]
kind = "command"
# 4 MiB in 1 MiB requests, the journal committed, then long enough for
# SIGTERM to land in run 2.
command = "dd if=/dev/zero of=data bs=1M count=4 oflag=direct status=none && sync && sleep 5"
"#,
            deb = deb.display(),
        ),
    );
    let mut child = t.command(&spec, &[]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Progress lines go to stderr; "run 2/2" comes once run 1 is stored.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(400);
    let mut seen = String::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains("run 2/2") => break,
            Ok(line) => seen.push_str(&format!("{line}\n")),
            Err(_) => {}
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("fslab ended ({status}) before its second run: {seen}{}", reader.join().unwrap());
        }
        assert!(Instant::now() < deadline, "no second run started: {seen}");
    }
    // While the VM runs, its disk is the served file.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let served = mounts.lines().any(|l| l.contains(&*work.to_string_lossy()) && l.contains("fslab-media"));
    assert!(served, "no media server mounted under {}", work.display());
    assert_eq!(media_servers(work).len(), 1, "{:?}", media_servers(work));
    let ours = |p: &fslab::vm::leftovers::LeftoverProcess| {
        p.cmdline.contains("qemu-system") && p.cmdline.contains(&*work.to_string_lossy())
    };
    let qemu = fslab::vm::leftovers::vm_processes().into_iter().find(ours);
    let qemu = qemu.map(|p| p.cmdline).unwrap_or_default();
    assert!(qemu.contains("/media/image,") && qemu.contains("cache=none"), "{qemu}");

    sleep(Duration::from_secs(2));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    let shown = format!("{seen}{}", reader.join().unwrap());
    assert_eq!(status.code(), Some(143), "{shown}");
    t.assert_gone(&shown);

    // Run 1: the model's account of the guest run's measured part.
    let (store, id) = t.experiment();
    let runs = store.runs(id).unwrap();
    let first = runs.iter().find(|r| r.status == fslab::record::RunStatus::Ok).expect("run 1 stored ok");
    let metric = |name: &str| first.metrics.iter().find(|m| m.name == name).map(|m| m.value);
    let written = metric("media/write_mb").unwrap_or_else(|| panic!("no media metrics: {:?}", first.metrics));
    assert!(written >= 4.0 * 1.048_576, "the guest's 4 MiB reached the model: {written} MB");
    assert!(metric("media/aus_opened").unwrap() >= 1.0, "{:?}", first.metrics);
    assert!(metric("media/requests").unwrap() >= 4.0, "{:?}", first.metrics);
    // The guest's requests reached the model whole: the guest's disk is
    // limited to the server's request size, and the model saw nothing larger.
    assert!(metric("media/requests_big").is_none(), "{:?}", first.metrics);
    let extras = store.run_extras(first.id).unwrap();
    let trace = extras.iter().find(|(kind, _)| kind == "blocktrace").map(|(_, v)| v.clone());
    let trace: fslab::monitor::blocktrace::BlockTraceSummary = serde_json::from_value(trace.unwrap()).unwrap();
    let sizes: Vec<String> = first
        .metrics
        .iter()
        .filter(|m| m.name.starts_with("media/"))
        .map(|m| format!("{}={}", m.name, m.value))
        .collect();
    eprintln!("model: {}; guest block trace: reads {:?}, writes {:?}", sizes.join(" "), trace.read, trace.write);
    // The model saw what the guest's block layer sent, whole and nothing
    // else: the same requests and bytes as the guest's block trace.
    assert!(trace.enabled, "the guest's block trace: {trace:?}");
    let read = metric("media/read_mb").unwrap();
    assert_eq!(((read * 1e6).round() as u64, (written * 1e6).round() as u64), (trace.read.bytes, trace.write.bytes));
    let requests = metric("media/requests").unwrap() as u64;
    assert_eq!(requests, trace.read.requests + trace.write.requests, "{:?} {trace:?}", first.metrics);
    // The guest's media monitor stored the account it asked the host for,
    // and the metrics are derived from it.
    let media = extras.iter().find(|(kind, _)| kind == "media").map(|(_, v)| v.clone());
    let account: fslab::media::evidence::Evidence = serde_json::from_value(media.expect("a media extra")).unwrap();
    assert_eq!(account.requests(), requests, "{account:?}");
}

/// Whether a guest's agent under `work` is ready for requests
/// (`exchange/ready.json` of its session directory).
fn agent_ready(work: &Path) -> bool {
    std::fs::read_dir(work).into_iter().flatten().flatten().any(|e| e.path().join("exchange/ready.json").exists())
}

/// `fslab run` of `spec` (plus `extra`), in a process group of its own as
/// a shell would start it, held until the guest's measured part runs on
/// the served disk: QEMU up, the FUSE mount there, the agent ready, and a
/// few seconds more (the workload sleeps for minutes). Its stderr is
/// drained (and returned by the thread).
fn start_measuring(t: &VmTest, spec: &Path, extra: &[&str]) -> (std::process::Child, std::thread::JoinHandle<String>) {
    use std::os::unix::process::CommandExt;
    let work = &t.work;
    let mut child =
        t.command(spec, extra).process_group(0).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(400);
    loop {
        let served = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|l| l.contains(&*work.to_string_lossy()) && l.contains("fslab-media"));
        let qemu = leftovers(work).iter().any(|l| l.contains("qemu-system"));
        if served && qemu && agent_ready(work) {
            sleep(Duration::from_secs(5));
            assert!(child.try_wait().unwrap().is_none(), "fslab ended while its guest was to measure");
            return (child, reader);
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("fslab ended ({status}) before its guest measured: {}", reader.join().unwrap());
        }
        assert!(Instant::now() < deadline, "the guest never started measuring");
        sleep(Duration::from_millis(200));
    }
}

/// A VM run with a media model, interrupted while the guest measures on the
/// served disk: Ctrl-C (SIGINT to fslab's process group, as a terminal
/// sends it) tears down QEMU, the FUSE mount and the media server by
/// itself (exit 130); SIGKILL of fslab leaves them running, and `fslab
/// cleanup --workdir` removes every one. Two boots.
#[test]
fn a_vm_run_with_a_media_model_ctrl_c_leaves_nothing_and_sigkill_is_cleaned_up() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let t = VmTest::new("fslab-kernels");
    resolve_deb(&deb);
    let spec = t.spec(
        "media-kill.toml",
        &format!(
            "name = \"media killed\"\nrepetitions = 1\n\n[defaults]\nfs = \"ext4\"\nsize = \"64MiB\"\n\
             kernel = \"{}\"\nvm = {{ cpus = 2, memory = \"1GiB\" }}\ndevice = {{ model = \"sdcard\" }}\n\n\
             [[variant]]\nname = \"a\"\n\n[[workload]]\nkind = \"command\"\ncommand = \"sleep 120\"\n",
            deb.display()
        ),
    );

    let (mut child, reader) = start_measuring(&t, &spec, &[]);
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT).unwrap();
    let stopped = Instant::now();
    let status = child.wait().unwrap();
    let shown = reader.join().unwrap();
    fslab::testsupport::did_not_hang(stopped, Duration::from_secs(30), &format!("stopping: {shown}"));
    assert_eq!(status.code(), Some(130), "{shown}");
    t.assert_gone(&shown);

    let (mut child, reader) = start_measuring(&t, &spec, &["--resume"]);
    child.kill().unwrap(); // SIGKILL, fslab alone
    let _ = child.wait();
    let shown = reader.join().unwrap();
    let left = leftovers(&t.work);
    assert!(left.iter().any(|l| l.contains("qemu-system")), "SIGKILL leaves QEMU running: {left:?} {shown}");
    assert!(left.iter().any(|l| l.contains(" - fuse fslab-media ")), "SIGKILL leaves the FUSE mount: {left:?}");
    assert_eq!(media_servers(&t.work).len(), 1, "SIGKILL leaves the media server: {:?}", media_servers(&t.work));
    let out = fslab(&["cleanup", "--workdir", t.work.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    t.assert_gone(&text(&out));
}

/// A read-only image is packed once, on the host, for a host variant and a
/// VM variant alike (two runs each): the host writes it onto the guest's
/// testbed disk, the guest reads back exactly those bytes (its sha256 is
/// the cached image's) the first time, and mounts the disk as it is after.
#[test]
fn a_read_only_image_is_packed_once_for_host_and_guest() {
    let Some(deb61) = vm_prerequisites("6.1.") else { return };
    let t = VmTest::new("fslab-kernels-image");
    let spec = t.spec(
        "image.toml",
        &format!(
            r#"name = "one image for host and guest"
repetitions = 2

[defaults]
fs = "squashfs"
compressor = "lz4"

[[variant]]
name = "host"

[[variant]]
name = "guest"
kernel = "{deb61}"
vm = {{ cpus = 2, memory = "1GiB", accel = "tcg" }}

[[workload]]
kind = "coldstart"
files = 40
scale = 0.05
readers = [2]
"#,
            deb61 = deb61.display(),
        ),
    );
    let out = t.run(&spec, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(leftovers(&t.work), Vec::<String>::new());

    let images = fslab::testbed::image::cache_dir(&t.work.join("cache"));
    let cached: Vec<PathBuf> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "img"))
        .collect();
    assert_eq!(cached.len(), 1, "one image for both variants: {cached:?}");
    let sha = fslab::testbed::image::file_sha256(&cached[0]).unwrap();

    let (store, id) = t.experiment();
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 4);
    let mut packed = 0;
    let mut verified = 0;
    for run in &runs {
        let notes = store.run_record(run.id).unwrap().notes;
        let image = notes.iter().find(|n| n.starts_with("read-only image ")).unwrap_or_else(|| panic!("{notes:?}"));
        packed += usize::from(image.contains("packed into"));
        let read_back = notes.iter().find(|n| n.contains("read back from"));
        if let Some(note) = read_back {
            assert_eq!(run.variant, "guest", "{note}");
            assert!(note.contains(&format!("sha256 {sha} matches")), "{note} (cached image: {sha})");
            verified += 1;
        }
        assert!(run.metrics.iter().any(|m| m.name == "coldstart-2/total_s"), "{:?}", run.metrics);
        assert_eq!(run.mount.as_ref().unwrap().fstype, "squashfs");
    }
    assert_eq!(packed, 1, "packed once for all four runs");
    assert_eq!(verified, 1, "the guest reads the image back once, after the host wrote it");
}
