//! Kernels built from source (`kernel = { source = "debian:5.10", config =
//! "minimal", set = {…} }`), on the real thing: Debian's `linux-source-5.10`
//! fetched by fslab's private apt into the shared test kernel cache and
//! unpacked once; Kconfig's own `make tinyconfig`/`olddefconfig` for the
//! config checks (seconds, no compiling); one real build (shared through
//! the cache: `scripts/fetch-test-kernels` builds it before the tests) booted
//! in a VM with a short workload.

use crate::common;
use crate::vm::{kernel_cache, one_vm};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fslab::kernel::build::{BuildRequest, ConfigBase, KernelBuild, SetRejected};
use fslab::kernel::debian::Archive;
use fslab::kernel::debian::Package;
use fslab::kernel::source::debian_source::DebianSource;

/// The experiment file the warm-up script builds (keep the test's kernel in step with it).
pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels/built-5.10.toml")
}

/// The fixture's `kernel = {…}` line, its patch paths made absolute for a
/// file written elsewhere.
pub fn fixture_kernel_line() -> String {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let line = text.lines().find(|l| l.starts_with("kernel = ")).unwrap();
    let dir = fixture().parent().unwrap().display().to_string();
    line.replace("\"patches/", &format!("\"{dir}/patches/"))
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The archive and its 5.10 source package, or a skip (a failure under CI) without the network.
fn source_5_10() -> Option<(PathBuf, Package)> {
    if !common::root_or_skip() {
        return None;
    }
    let archive = Archive::at(&kernel_cache());
    match archive.resolve_source("5.10") {
        Ok(package) => Some((archive.root().to_path_buf(), package)),
        Err(e) => {
            fslab::testsupport::skip(&format!("no Debian linux-source-5.10 (is the network down?): {e}"));
            None
        }
    }
}

/// `debian:5.10` with `set`, prepared (its config made and read back).
fn prepare(source: &(PathBuf, Package), set: &[(&str, &str)]) -> anyhow::Result<KernelBuild> {
    let req = BuildRequest {
        config: ConfigBase::Minimal,
        set: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    };
    DebianSource::prepare("debian:5.10", &source.0, source.1.clone(), Vec::new(), &req, &kernel_cache())
        .map(|s| s.build)
}

fn rejected(source: &(PathBuf, Package), set: &[(&str, &str)]) -> String {
    let err = prepare(source, set).expect_err("the set must be rejected");
    assert!(err.downcast_ref::<SetRejected>().is_some(), "not a rejected set: {err:#}");
    format!("{err:#}")
}

/// Config handling against the real 5.10 Kconfig, no compiling: a choice
/// member set to `y` clears its siblings and reads back; the 6.2+ name of a
/// renamed symbol, a hidden symbol and an option whose dependency is unset
/// are errors naming the option, the version and why.
#[test]
fn set_options_are_applied_and_read_back_on_the_real_5_10_kconfig() {
    let Some(source) = source_5_10() else { return };
    let ok = prepare(&source, &[("SQUASHFS_DECOMP_MULTI_PERCPU", "y")]).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(ok.version.starts_with("5.10.") && ok.release.starts_with("5.10."), "{ok:?}");
    assert_eq!(ok.package.as_ref().unwrap().name, "linux-source-5.10");
    let config = std::fs::read_to_string(ok.config_path(&kernel_cache())).unwrap();
    assert!(config.contains("\nCONFIG_SQUASHFS_DECOMP_MULTI_PERCPU=y\n"), "the set member is chosen");
    assert!(config.contains("\n# CONFIG_SQUASHFS_DECOMP_SINGLE is not set\n"), "its sibling (the default) is cleared");
    for needed in ["CONFIG_VIRTIO_FS=y", "CONFIG_BLK_DEV_THROTTLING=y", "CONFIG_EROFS_FS=y", "CONFIG_XFS_FS=y"] {
        assert!(config.contains(&format!("\n{needed}\n")), "minimal lacks {needed}");
    }
    assert!(!config.contains("\nCONFIG_MODULES=y\n"), "minimal builds everything in");
    // The same request gives the same config, hence the same cache key.
    let again = prepare(&source, &[("SQUASHFS_DECOMP_MULTI_PERCPU", "y")]).unwrap();
    assert_eq!((again.config_sha256, again.key), (ok.config_sha256.clone(), ok.key.clone()));

    let err = rejected(&source, &[("SQUASHFS_COMPILE_DECOMP_SINGLE", "y")]);
    assert!(err.contains("CONFIG_SQUASHFS_COMPILE_DECOMP_SINGLE does not exist in Linux 5.10"), "{err}");
    assert!(err.contains("set CONFIG_SQUASHFS_DECOMP_SINGLE instead"), "{err}");
    let err = rejected(&source, &[("DECOMPRESS_XZ", "y")]);
    assert!(err.contains("CONFIG_DECOMPRESS_XZ cannot be set in Linux 5.10") && err.contains("no prompt"), "{err}");
    let err = rejected(&source, &[("XZ_DEC", "n")]);
    assert!(err.contains("CONFIG_XZ_DEC = n was dropped") && err.contains("selected by CONFIG_SQUASHFS_XZ"), "{err}");
    let err = rejected(&source, &[("SQUASHFS", "n"), ("SQUASHFS_XZ", "y")]);
    assert!(err.contains("CONFIG_SQUASHFS_XZ = y was dropped by Linux 5.10"), "{err}");
    assert!(err.contains("unmet dependency") && err.contains("CONFIG_SQUASHFS not set"), "{err}");
    let err = rejected(&source, &[("NO_SUCH_OPTION_AT_ALL", "y")]);
    assert!(err.contains("CONFIG_NO_SUCH_OPTION_AT_ALL does not exist in Linux 5.10"), "{err}");
}

/// `fslab run --dry-run` of a one-variant file `name` in `dir` whose kernel
/// is built from `debian:5.10` with `symbol = "y"` set, optionally with
/// another `PATH`.
fn dry_run_with_set(dir: &Path, name: &str, symbol: &str, path: Option<&Path>) -> Output {
    let spec = common::write_spec(
        dir,
        name,
        &format!(
            "name = \"{name}\"\nworkdir = \"{}\"\n[defaults]\nfs = \"ext4\"\n\
             kernel = {{ source = \"debian:5.10\", set = {{ {symbol} = \"y\" }} }}\n\
             [[variant]]\nname = \"a\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.join("work").display()
        ),
    );
    let mut cmd = Command::new(common::fslab_bin());
    cmd.args(["run", "--dry-run", spec.to_str().unwrap()]).env("FSLAB_KERNEL_CACHE", kernel_cache());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.output().unwrap()
}

/// The same errors through an experiment file: exit 2, naming the file and key.
#[test]
fn a_rejected_set_names_the_file_and_key() {
    let Some(_) = source_5_10() else { return };
    let dir = common::workdir("fslab-built-kernel-spec");
    let out = dry_run_with_set(dir.path(), "bad.toml", "SQUASHFS_COMPILE_DECOMP_MULTI", None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("bad.toml") && t.contains("kernel.set"), "{t}");
    assert!(t.contains("set CONFIG_SQUASHFS_DECOMP_MULTI instead"), "{t}");
}

/// A host without the build tools (here: a `PATH` of links to every
/// program of the real one but `flex` and `bison`, since uninstalling
/// packages would change the host) gets exit 3 naming each missing tool,
/// its Debian package and the install script, before anything is unpacked
/// or made.
#[test]
fn a_host_without_flex_and_bison_is_told_what_to_install() {
    let Some(_) = source_5_10() else { return };
    let dir = common::workdir("fslab-built-kernel-tools");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for sys_dir in ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        for entry in std::fs::read_dir(sys_dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if name != "flex" && name != "bison" && !bin.join(&name).exists() {
                std::os::unix::fs::symlink(entry.path(), bin.join(&name)).unwrap();
            }
        }
    }
    let out = dry_run_with_set(dir.path(), "tools.toml", "SQUASHFS_DECOMP_MULTI", Some(&bin));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("tools.toml") && t.contains("`kernel`"), "{t}");
    assert!(t.contains("flex (flex)") && t.contains("bison (bison)") && !t.contains("make (make)"), "{t}");
    assert!(t.contains("scripts/install-vm-tools"), "{t}");
}

/// Once the fixture's kernel is built (or found in the shared cache: this
/// is the real cache state, nothing written by the test), `fslab kernel
/// build` says so before it would begin, and a dry run's plan says
/// "cached" for it, in text and JSON. (Cold and incremental outlooks, from
/// recorded build files in a temp cache, are `kernel::outlook`'s unit test.)
#[test]
fn after_its_build_the_plan_says_the_kernel_is_cached() {
    let Some(_) = source_5_10() else { return };
    let fslab = |args: &[&str]| {
        Command::new(common::fslab_bin()).args(args).env("FSLAB_KERNEL_CACHE", kernel_cache()).output().unwrap()
    };
    let file = fixture();
    let file = file.to_str().unwrap();
    let built = fslab(&["kernel", "build", file]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built));
    let again = fslab(&["kernel", "build", file]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("the kernel of variant `5.10-minimal`: cached: no build"), "{}", text(&again));
    assert!(!said.contains("fslab: building kernel"), "{}", text(&again));

    let plan = fslab(&["run", "--dry-run", file]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
    let shown = String::from_utf8_lossy(&plan.stdout);
    assert!(shown.contains("(cached: no build)"), "{shown}");
    let plan = fslab(&["run", "--dry-run", "--format", "json", file]);
    let json: serde_json::Value =
        serde_json::from_slice(&plan.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&plan)));
    let builds = json["kernel_builds"].as_array().unwrap();
    assert_eq!(builds.len(), 1, "{json:#}");
    assert_eq!((&builds[0]["variant"], &builds[0]["build"]), (&"5.10-minimal".into(), &"cached".into()), "{json:#}");
}

/// The fixture's kernel, built once (or found in the shared cache), booted
/// in a VM: the guest runs the built 5.10 with the set option, a workload
/// runs on its testbed, and the experiment records how the kernel was built.
#[test]
fn a_built_5_10_boots_and_runs_a_workload() {
    let Some(_) = source_5_10() else { return };
    if let Err(missing) = fslab::vm::tools::discover() {
        fslab::testsupport::skip(&format!("{missing}"));
        return;
    }
    let _one = one_vm();
    let built = Command::new(common::fslab_bin())
        .args(["kernel", "build", fixture().to_str().unwrap()])
        .env("FSLAB_KERNEL_CACHE", kernel_cache())
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(0), "{}", text(&built));
    let kernel_line = fixture_kernel_line();

    let dir = common::workdir("fslab-built-kernel");
    let work = dir.path().join("work");
    let db = dir.path().join("results.db");
    let spec = common::write_spec(
        dir.path(),
        "built.toml",
        &format!(
            r#"name = "built kernel"
repetitions = 2
workdir = "{work}"

[defaults]
fs = "ext4"
size = "64MiB"
{kernel_line}
vm = {{ cpus = 2, memory = "512MiB" }}

[[variant]]
name = "5.10-built"

[[workload]]
kind = "command"
command = "uname -r | grep -q '^5\\.10\\.' && zcat /proc/config.gz | grep -qx CONFIG_SQUASHFS_DECOMP_MULTI_PERCPU=y && dd if=/dev/zero of=data bs=1M count=4 status=none && sync"
"#,
            work = work.display(),
        ),
    );
    let out = Command::new(common::fslab_bin())
        .args(["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .env("FSLAB_KERNEL_CACHE", kernel_cache())
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("2 runs ok, 0 failed"), "{t}");
    assert!(!t.contains("fslab: building kernel"), "the second experiment reuses the built image: {t}");

    let store = fslab::store::Store::open_existing(&fslab::store::StoreLocation::parse(db.to_str().unwrap())).unwrap();
    let id = store.list_experiments().unwrap()[0].id;
    let places = store.variant_places(id).unwrap();
    assert!(places.iter().all(|(_, p)| p.kind == "vm" && p.kernel_release.starts_with("5.10.")), "{places:?}");
    // The stored record of the kernel is its source kind's own: the package and the build.
    let env = store.experiment(id).unwrap().environment;
    let Some(fslab::kernel::KernelSource::DebianSource(s)) = &env.kernels["5.10-built"].origin else {
        panic!("not a Debian source build: {:?}", env.kernels["5.10-built"].origin)
    };
    let b = &s.build;
    assert_eq!(b.source, "debian:5.10", "{b:?}");
    assert_eq!(b.set["SQUASHFS_DECOMP_MULTI_PERCPU"], "y", "{b:?}");
    assert_eq!(s.package.name, "linux-source-5.10", "{b:?}");
    assert_eq!(b.package.as_ref().unwrap().name, "linux-source-5.10", "{b:?}");
    assert!(b.compiler.contains("gcc"), "{b:?}");
}
