//! The recipes under `deploy/` parse (shell syntax by `bash -n`, YAML by
//! serde_norway) and their fslab command lines, expanded by bash as the
//! engine would, run on the real binary.
//!
//! - Every `fslab run` line, for every shard index and with the recipe's own
//!   experiment file, is accepted (`--dry-run`: the whole command line and
//!   the experiment file are checked, nothing runs), names the right shard,
//!   and every shard agrees on the campaign id.
//! - Build once, boot anywhere: each recipe's build step (`fslab kernel
//!   export`, or `fslab kernel build` on a shared volume) and its shards'
//!   steps (`fslab kernel import`, `fslab run`) run for real, on an
//!   experiment whose kernel is built from source (the test kernel of
//!   `tests/fixtures/kernels/built-5.10.toml`, cached in the shared test
//!   cache), the archive carried from the build's machine to the shards'
//!   the way the engine carries it (an artifact; a shared filesystem; a
//!   volume). Each shard starts from a kernel cache that has never seen the
//!   kernel, and its plan must say `cached: no build`: the import and the
//!   run agree on the cache, and the archive carries what the run needs.
//!   What is not exercised here: a real build on an empty shared volume by
//!   several pods at once (the cache's locks, `kernel::cache::entry`).
//!
//! `sudo` is modelled as sudo's default policy has it: options dropped and
//! the environment reset but for `--preserve-env=…` (and the test's own
//! proxy setting, below), so a line that relies on a variable sudo would
//! drop fails here too.
//!
//! The shards run offline (apt's proxy a closed port, as in
//! `kernel_cache.rs`): a shard that would fetch a package or build fails at
//! once instead of downloading a kernel source.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value;

use crate::built_kernels;
use crate::common;
use crate::vm::kernel_cache;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The command lines of a script that run `fslab SUBCOMMAND …`
/// (continuation lines joined), as `fslab …` or `sudo OPTIONS… fslab …`:
/// the binary's path (`./target/release/fslab`) is `fslab`, the function
/// the test runs them with, and a leading `exec` is dropped (a function
/// cannot be exec'd). `subcommand` is `run`, `kernel export`, …
fn fslab_lines(script: &str, subcommand: &str) -> Vec<String> {
    let joined = script.replace("\\\n", " ");
    let needle = format!("fslab {subcommand} ");
    joined
        .lines()
        .filter_map(|l| {
            let at = l.find(&needle)?;
            let binary = l[..at].rfind(char::is_whitespace).map_or(0, |i| i + 1);
            let before = l[..binary].trim();
            let before = before.strip_prefix("exec").unwrap_or(before).trim();
            Some(format!("{before} {}", &l[at..]).trim().to_string())
        })
        .collect()
}

/// The one `fslab SUBCOMMAND` line of `script`.
fn one_line(what: &str, script: &str, subcommand: &str) -> String {
    let lines = fslab_lines(script, subcommand);
    assert_eq!(lines.len(), 1, "{what}: one `fslab {subcommand}` line: {lines:?}\n{script}");
    lines.into_iter().next().unwrap()
}

fn bash_syntax_ok(what: &str, script: &str) {
    let out = Command::new("bash").args(["-n", "-c", script]).output().unwrap();
    assert!(out.status.success(), "{what}: bash -n: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `line` with bash in `env` from `cwd`, where `fslab` is the binary
/// under test (with `--dry-run` added to `fslab run`) and `sudo OPTIONS…`
/// runs the rest with the environment sudo would leave; returns stdout and
/// stderr, asserting success.
fn run_line(what: &str, line: &str, env: &[(&str, String)], cwd: &Path) -> (String, String) {
    let mut c = Command::new("bash");
    c.args([
        "-c",
        r#"set -eu
        fslab() {
            case "$1" in
                run) "$FSLAB_BIN" "$@" --dry-run ;;
                *) "$FSLAB_BIN" "$@" ;;
            esac
        }
        sudo() {
            keep=PATH,HOME,FSLAB_BIN,http_proxy,https_proxy
            while [ "${1#-}" != "$1" ]; do
                case "$1" in --preserve-env=*) keep="$keep,${1#--preserve-env=}" ;; esac
                shift
            done
            (
                for var in $(compgen -e); do
                    case ",$keep," in *",$var,"*) ;; *) unset "$var" 2>/dev/null || true ;; esac
                done
                "$@"
            )
        }
        eval "$FSLAB_LINE""#,
    ])
    .current_dir(cwd)
    .env("FSLAB_BIN", common::fslab_bin())
    .env("FSLAB_LINE", line);
    for var in [
        "GITHUB_RUN_ID",
        "GITHUB_RUN_ATTEMPT",
        "SLURM_ARRAY_JOB_ID",
        "CI_PIPELINE_ID",
        "BUILDKITE_BUILD_ID",
        "FSLAB_KERNEL_CACHE",
        "FSLAB_FILE",
        "FSLAB_KERNELS_TAR",
        "FSLAB_DB",
    ] {
        c.env_remove(var);
    }
    c.envs(env.iter().map(|(k, v)| (k, v)));
    let out = c.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what}: `{line}` failed:\n{stdout}\n{stderr}");
    (stdout.into_owned(), stderr.into_owned())
}

/// The campaign id a dry run reports for shard `k/n`.
fn campaign_of(what: &str, plan: &str, k: usize, n: usize) -> String {
    let needle = format!("shard {k}/{n} of campaign ");
    let at = plan.find(&needle).unwrap_or_else(|| panic!("{what}: no `{needle}` in the dry run:\n{plan}"));
    plan[at + needle.len()..].split(':').next().unwrap().to_string()
}

fn all_agree(what: &str, ids: Vec<String>) {
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{what}: shards disagree on the campaign: {ids:?}");
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// A kernel built once: the build machine's kernel cache (the shared test
/// cache, where `scripts/fetch-test-kernels` built the fixture's kernel)
/// and an experiment whose two variants boot that kernel.
struct BuiltOnce {
    dir: tempfile::TempDir,
    file: PathBuf,
}

/// The variants of [`BuiltOnce`]'s experiment.
const VARIANTS: usize = 2;

impl BuiltOnce {
    fn new(tag: &str) -> Option<BuiltOnce> {
        if !common::root_or_skip() {
            return None;
        }
        // Found in the shared cache (built there only if the warm-up did not run).
        let built = Command::new(common::fslab_bin())
            .arg("kernel")
            .arg("build")
            .arg(built_kernels::fixture())
            .env("FSLAB_KERNEL_CACHE", kernel_cache())
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let dir = common::workdir(tag);
        let file = common::write_spec(
            dir.path(),
            "built-once.toml",
            &format!(
                "# deploy test: two variants boot one kernel built from source\n\
                 name = \"deploy: a kernel built once\"\nrepetitions = 4\n\n[defaults]\nfs = \"ext4\"\n\
                 size = \"64MiB\"\n{}\n\n[[variant]]\nname = \"a\"\n\n[[variant]]\nname = \"b\"\n\
                 mount = \"noatime\"\n\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
                built_kernels::fixture_kernel_line()
            ),
        );
        Some(BuiltOnce { dir, file })
    }

    fn file(&self) -> String {
        self.file.display().to_string()
    }

    /// A shard machine's environment: offline, so that fetching anything
    /// (lists, a source package) fails at once.
    fn offline() -> [(&'static str, String); 2] {
        [("http_proxy", "http://127.0.0.1:9".into()), ("https_proxy", "http://127.0.0.1:9".into())]
    }

    /// A machine's kernel cache that has never seen the kernel. It looks
    /// `debian:` sources up in Debian's lists like any machine; here it
    /// borrows the shared test cache's lists rather than fetching 30 MB.
    fn fresh_cache(&self, name: &str) -> PathBuf {
        let cache = self.dir.path().join(name);
        std::fs::create_dir_all(&cache).unwrap();
        std::os::unix::fs::symlink(kernel_cache().join("debian-archive"), cache.join("debian-archive")).unwrap();
        assert!(!cache.join("kernels").exists());
        cache
    }
}

/// A dry run's plan boots every variant's kernel from the cache, unbuilt.
fn assert_cached(what: &str, plan: &str) {
    assert_eq!(
        plan.matches("(cached: no build)").count(),
        VARIANTS,
        "{what}: each variant's kernel cached (imported), nothing to build:\n{plan}"
    );
}

/// The recipe's experiment file boots kernels it builds from source: there
/// is something to build once.
fn assert_builds_kernels(what: &str, plan: &str) {
    assert!(plan.contains("from a kernel built from debian:"), "{what}: the recipe's file builds no kernel:\n{plan}");
}

/// `FILE=${FSLAB_FILE:-DEFAULT}` of a script.
fn default_file(script: &str) -> String {
    let line =
        script.lines().find_map(|l| l.strip_prefix("FILE=${FSLAB_FILE:-")).expect("a FILE=${FSLAB_FILE:-…} line");
    line.strip_suffix('}').unwrap().to_string()
}

fn slurm(name: &str) -> (PathBuf, String) {
    let path = repo().join("deploy/slurm").join(name);
    let script = std::fs::read_to_string(&path).unwrap();
    bash_syntax_ok(name, &script);
    (path, script)
}

/// The array's bounds (`#SBATCH --array=LO-HI`).
fn slurm_array(script: &str) -> (usize, usize) {
    let array = script.lines().find_map(|l| l.strip_prefix("#SBATCH --array=")).expect("an #SBATCH --array line");
    let (lo, hi) = array.split_once('-').unwrap();
    (lo.parse().unwrap(), hi.parse().unwrap())
}

/// The environment Slurm gives array task `task` of `lo..=hi`.
fn slurm_task_env(task: usize, lo: usize, hi: usize, secret: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("SLURM_ARRAY_TASK_ID", task.to_string()),
        ("SLURM_ARRAY_TASK_MIN", lo.to_string()),
        ("SLURM_ARRAY_TASK_COUNT", (hi - lo + 1).to_string()),
        ("SLURM_ARRAY_JOB_ID", "4242".into()),
        ("SLURM_JOB_ID", format!("{}", 4243 + task)),
        ("FSLAB_DB_FILE", secret.display().to_string()),
    ]
}

fn db_secret() -> tempfile::NamedTempFile {
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "postgresql://fslab:secret@db.example/fslab\n").unwrap();
    secret
}

/// The array script as Slurm runs it on each task's node, with its own
/// experiment file (kernels resolved in the shared test cache).
#[test]
fn slurm_array_script() {
    if !common::root_or_skip() {
        return;
    }
    let (path, script) = slurm("fslab-array.sh");
    let (lo, hi) = slurm_array(&script);
    let n = hi - lo + 1;
    one_line("slurm", &script, "run");
    let secret = db_secret();
    let mut ids = Vec::new();
    for task in lo..=hi {
        let shard = task - lo + 1;
        let mut env = slurm_task_env(task, lo, hi, secret.path());
        env.push(("FSLAB_KERNEL_CACHE", kernel_cache().display().to_string()));
        let (plan, _) = run_line("slurm", &format!("source {}", path.display()), &env, &repo());
        assert_builds_kernels("slurm", &plan);
        ids.push(campaign_of("slurm", &plan, shard, n));
    }
    all_agree("slurm", ids);
}

/// `submit.sh` submits the build job, then the array with
/// `--dependency=afterok` on it, both seeing the same archive path and file.
#[test]
fn slurm_submit_orders_the_build_before_the_array() {
    let (path, script) = slurm("submit.sh");
    assert!(script.contains("sbatch"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("sbatch.log");
    // sbatch as the test sees it: each call's arguments and environment
    // logged, job ids 4242 (as `--parsable` prints it on a federated
    // cluster: "id;cluster") and 4243.
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        format!(
            "#!/bin/bash\nn=$(wc -l < {log} 2>/dev/null || echo 0)\n\
             echo \"$* | tar=$FSLAB_KERNELS_TAR file=$FSLAB_FILE\" >> {log}\n\
             if [ \"$n\" = 0 ]; then echo '4242;cluster'; else echo 'Submitted batch job 4243'; fi\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&sbatch, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("bash")
        .arg(&path)
        .current_dir(dir.path())
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
        .env("FSLAB_FILE", "my-experiment.toml")
        .env_remove("FSLAB_KERNELS_TAR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let calls: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let slurm_dir = repo().join("deploy/slurm");
    let (build, array) = (&calls[0], &calls[1]);
    assert!(build.starts_with("--parsable ") && build.contains("fslab-kernels.sh |"), "{build}");
    assert!(array.starts_with("--dependency=afterok:4242 ") && array.contains("fslab-array.sh |"), "{array}");
    for (call, script) in [(build, "fslab-kernels.sh"), (array, "fslab-array.sh")] {
        let named = call.split(" | ").next().unwrap().split(' ').next_back().unwrap();
        assert_eq!(std::fs::canonicalize(named).unwrap(), slurm_dir.join(script), "{call}");
    }
    let env_of = |call: &str| call.split(" | ").nth(1).unwrap().to_string();
    assert_eq!(env_of(build), env_of(array), "both jobs see one archive and one file");
    let tar = env_of(build).split(' ').next().unwrap().strip_prefix("tar=").unwrap().to_string();
    assert!(tar.starts_with(&dir.path().display().to_string()) && tar.ends_with(".tar"), "{tar}");
    assert!(env_of(build).ends_with("file=my-experiment.toml"), "{build}");
}

/// The build job exports the kernels to the archive; every array task, on
/// a node whose cache has never seen them, imports it and plans its shard
/// with every kernel cached.
#[test]
fn slurm_build_once_fan_out() {
    let Some(once) = BuiltOnce::new("fslab-deploy-slurm") else { return };
    let (build_path, build_script) = slurm("fslab-kernels.sh");
    let (array_path, array_script) = slurm("fslab-array.sh");
    assert_eq!(default_file(&build_script), default_file(&array_script), "the build and the array read one file");
    one_line("slurm build", &build_script, "kernel export");
    one_line("slurm array", &array_script, "kernel import");
    let archive = once.dir.path().join("shared-fs/fslab-kernels.tar");
    std::fs::create_dir_all(archive.parent().unwrap()).unwrap();
    let archive_env = ("FSLAB_KERNELS_TAR", archive.display().to_string());
    let file_env = ("FSLAB_FILE", once.file());

    // The build node, its cache the one that holds the kernel.
    let env = [
        ("SLURM_JOB_ID", "4241".to_string()),
        ("FSLAB_KERNEL_CACHE", kernel_cache().display().to_string()),
        archive_env.clone(),
        file_env.clone(),
    ];
    run_line("slurm build", &format!("source {}", build_path.display()), &env, &repo());
    assert!(archive.is_file(), "the build job wrote no {}", archive.display());

    let (lo, hi) = slurm_array(&array_script);
    let n = hi - lo + 1;
    let secret = db_secret();
    let mut ids = Vec::new();
    for task in lo..=hi {
        let mut env = slurm_task_env(task, lo, hi, secret.path());
        let node_cache = once.fresh_cache(&format!("node-{task}"));
        env.extend([("FSLAB_KERNEL_CACHE", node_cache.display().to_string()), archive_env.clone(), file_env.clone()]);
        env.extend(BuiltOnce::offline());
        let (plan, said) = run_line("slurm task", &format!("source {}", array_path.display()), &env, &repo());
        assert!(!said.contains("building kernel"), "{said}");
        assert_cached(&format!("slurm task {task}"), &plan);
        ids.push(campaign_of("slurm", &plan, task - lo + 1, n));
    }
    all_agree("slurm", ids);
}

/// The manifest's documents: the ConfigMap's experiment, the kernels'
/// volume claim and the Job's pod.
struct Kubernetes {
    docs: Vec<Value>,
}

impl Kubernetes {
    fn load() -> Kubernetes {
        Kubernetes { docs: yaml_docs(&repo().join("deploy/kubernetes/fslab-indexed-job.yaml")) }
    }

    fn kind(&self, kind: &str) -> &Value {
        self.docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("a {kind}"))
    }

    fn pod(&self) -> &Value {
        &self.kind("Job")["spec"]["template"]["spec"]
    }

    /// The `sh -c` script of a container.
    fn script<'a>(&self, container: &'a Value) -> &'a str {
        let command: Vec<&str> =
            container["command"].as_sequence().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(command[..2], ["/bin/sh", "-c"]);
        bash_syntax_ok("kubernetes", command[2]);
        command[2]
    }

    /// Where `container` mounts the pod volume that matches `is`.
    fn mount_of(&self, container: &Value, is: impl Fn(&Value) -> bool) -> String {
        let volumes = self.pod()["volumes"].as_sequence().unwrap();
        let mount = container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| volumes.iter().any(|v| v["name"] == m["name"] && is(v)))
            .unwrap_or_else(|| panic!("no such volume mounted in {:?}", container["name"]));
        mount["mountPath"].as_str().unwrap().to_string()
    }

    fn experiment_mount(&self, container: &Value) -> String {
        self.mount_of(container, |v| v["configMap"].is_mapping())
    }

    /// The kernel cache: the claim of the manifest's own ReadWriteMany volume.
    fn kernels_mount(&self, container: &Value) -> String {
        let claim = self.kind("PersistentVolumeClaim");
        let modes = claim["spec"]["accessModes"].as_sequence().unwrap();
        assert!(modes.iter().any(|m| m == "ReadWriteMany"), "every pod's node mounts the kernel cache: {modes:?}");
        let name = claim["metadata"]["name"].clone();
        self.mount_of(container, |v| v["persistentVolumeClaim"]["claimName"] == name)
    }

    /// The environment of pod `index` of `n`.
    fn env(index: usize) -> Vec<(&'static str, String)> {
        vec![
            ("JOB_COMPLETION_INDEX", index.to_string()),
            ("FSLAB_CAMPAIGN_RUN", "0b7f6c3e-job-uid".into()),
            ("FSLAB_DB", "postgresql://fslab:secret@db.example/fslab".into()),
        ]
    }
}

/// A pod's line with its mounts at `(mount path, where)`: each path that is
/// a mount path or lies under one (`/experiment/x.toml`, `/kernels`), not
/// one that merely starts like it (`/experiments`).
fn remounted(line: &str, mounts: &[(&str, &Path)]) -> String {
    mounts.iter().fold(line.to_string(), |line, (at, dir)| {
        let mut out = String::new();
        let mut rest = line.as_str();
        while let Some(i) = rest.find(at) {
            let after = &rest[i + at.len()..];
            let whole = after.chars().next().is_none_or(|c| matches!(c, '/' | ' ' | '"' | '\''));
            out.push_str(&rest[..i]);
            out.push_str(&if whole { dir.display().to_string() } else { at.to_string() });
            rest = after;
        }
        out + rest
    })
}

#[test]
fn kubernetes_indexed_job() {
    if !common::root_or_skip() {
        return;
    }
    let k = Kubernetes::load();
    let job = k.kind("Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let n = job["spec"]["completions"].as_u64().unwrap() as usize;
    let pod = k.pod();
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["privileged"], true);
    let env = container["env"].as_sequence().unwrap();
    let db = env.iter().find(|e| e["name"] == "FSLAB_DB").expect("FSLAB_DB in env");
    assert!(db["valueFrom"]["secretKeyRef"]["key"].is_string(), "FSLAB_DB comes from a secret");

    // The experiment file the ConfigMap mounts, where the pod would see it;
    // the kernel volume is the shared test cache.
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in k.kind("ConfigMap")["data"].as_mapping().unwrap() {
        std::fs::write(dir.path().join(name.as_str().unwrap()), text.as_str().unwrap()).unwrap();
    }
    let experiment = k.experiment_mount(container);
    let kernels = k.kernels_mount(container);
    let line = one_line("kubernetes", k.script(container), "run");
    let line = remounted(&line, &[(&experiment, dir.path()), (&kernels, &kernel_cache())]);
    let mut ids = Vec::new();
    for index in 0..n {
        let (plan, _) = run_line("kubernetes", &line, &Kubernetes::env(index), dir.path());
        assert_builds_kernels("kubernetes", &plan);
        ids.push(campaign_of("kubernetes", &plan, index + 1, n));
    }
    all_agree("kubernetes", ids);
}

/// The init container builds on the kernel volume every pod mounts and the
/// shard runs from it: two pods whose init containers find the kernel there
/// (built by another pod: here imported into a volume that never saw a
/// build) both go on without building, and every pod plans its shard with
/// every kernel cached.
#[test]
fn kubernetes_build_once_shared_volume() {
    let Some(once) = BuiltOnce::new("fslab-deploy-kubernetes") else { return };
    let k = Kubernetes::load();
    let pod = k.pod();
    let n = k.kind("Job")["spec"]["completions"].as_u64().unwrap() as usize;
    let init = pod["initContainers"]
        .as_sequence()
        .expect("init containers")
        .iter()
        .find(|c| k.script(c).contains("fslab kernel build "))
        .expect("an init container that builds the kernels");
    let container = &pod["containers"][0];
    let volume = once.fresh_cache("volume");
    let archive = once.dir.path().join("kernels.tar");
    let setup = |args: &[&str]| {
        let out = Command::new(common::fslab_bin()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let shared = kernel_cache().display().to_string();
    setup(&["kernel", "export", &once.file(), "-o", archive.to_str().unwrap(), "--kernel-cache", &shared]);
    setup(&["kernel", "import", archive.to_str().unwrap(), "--kernel-cache", volume.to_str().unwrap()]);
    // The ConfigMap's place holds the test's experiment.
    let config_map = once.dir.path().join("config-map");
    std::fs::create_dir(&config_map).unwrap();
    std::fs::copy(&once.file, config_map.join("experiment.toml")).unwrap();

    let pod_line = |c: &Value, subcommand: &str| {
        let line = one_line("kubernetes", k.script(c), subcommand);
        remounted(&line, &[(&k.experiment_mount(c), &config_map), (&k.kernels_mount(c), &volume)])
    };
    let build = pod_line(init, "kernel build");
    let run = pod_line(container, "run");
    // Two pods' init containers at once.
    let pods: Vec<_> = (0..2)
        .map(|index| {
            let build = build.clone();
            let cwd = once.dir.path().to_path_buf();
            let env = [Kubernetes::env(index), BuiltOnce::offline().to_vec()].concat();
            std::thread::spawn(move || run_line("kubernetes init", &build, &env, &cwd))
        })
        .collect();
    for p in pods {
        let (_, said) = p.join().unwrap();
        assert_eq!(said.matches("cached: no build").count(), VARIANTS, "{said}");
        assert!(!said.contains("building kernel"), "{said}");
    }
    let mut ids = Vec::new();
    for index in 0..n {
        let env = [Kubernetes::env(index), BuiltOnce::offline().to_vec()].concat();
        let (plan, _) = run_line("kubernetes", &run, &env, once.dir.path());
        assert_cached(&format!("kubernetes pod {index}"), &plan);
        ids.push(campaign_of("kubernetes", &plan, index + 1, n));
    }
    all_agree("kubernetes", ids);
}

/// `${{ expr }}` in a GitHub Actions string, replaced from `values`; an
/// expression the test does not know fails it.
fn github_expand(text: &str, values: &[(&str, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").expect("unclosed ${{") + start;
        let expr = rest[start + 3..end].trim();
        let value = values.iter().find(|(k, _)| *k == expr).unwrap_or_else(|| panic!("unknown expression {expr}"));
        out.push_str(&rest[..start]);
        out.push_str(&value.1);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The workflow, its jobs' steps and its environment.
struct Workflow {
    doc: Value,
}

impl Workflow {
    fn load() -> Workflow {
        Workflow { doc: yaml_docs(&repo().join("deploy/github-actions/fslab-fleet.yml")).remove(0) }
    }

    fn job(&self, name: &str) -> &Value {
        &self.doc["jobs"][name]
    }

    fn env(&self, name: &str) -> String {
        self.doc["env"][name].as_str().unwrap_or_else(|| panic!("workflow env {name}")).to_string()
    }

    fn steps(&self, job: &str) -> &[Value] {
        self.job(job)["steps"].as_sequence().unwrap()
    }

    /// Index and `run` script of the job's step that runs `fslab SUBCOMMAND`.
    fn run_step(&self, job: &str, subcommand: &str) -> (usize, &str) {
        let needle = format!("fslab {subcommand} ");
        self.steps(job)
            .iter()
            .enumerate()
            .find_map(|(i, s)| s["run"].as_str().filter(|r| r.contains(&needle)).map(|r| (i, r)))
            .unwrap_or_else(|| panic!("job {job}: a step that runs `fslab {subcommand}`"))
    }

    /// Index and `with` of the job's step that uses `action`.
    fn uses_step(&self, job: &str, action: &str) -> (usize, &Value) {
        self.steps(job)
            .iter()
            .enumerate()
            .find(|(_, s)| s["uses"].as_str().is_some_and(|u| u.starts_with(&format!("{action}@"))))
            .map(|(i, s)| (i, &s["with"]))
            .unwrap_or_else(|| panic!("job {job}: a step that uses {action}"))
    }

    /// The shard numbers of the matrix.
    fn shards(&self) -> Vec<usize> {
        self.job("shard")["strategy"]["matrix"]["shard"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect()
    }

    /// A `run` script's one `fslab SUBCOMMAND` line as the runner of shard
    /// `k` of `n` expands it.
    fn line(&self, script: &str, subcommand: &str, k: usize, n: usize, runner_temp: &Path) -> String {
        let script = github_expand(script, &expressions(k, n, runner_temp));
        bash_syntax_ok("github", &script);
        one_line("github", &script, subcommand)
    }
}

fn expressions(k: usize, n: usize, runner_temp: &Path) -> [(&'static str, String); 4] {
    [
        ("matrix.shard", k.to_string()),
        ("strategy.job-total", n.to_string()),
        ("github.run_id", "987654".into()),
        ("runner.temp", runner_temp.display().to_string()),
    ]
}

#[test]
fn github_actions_matrix() {
    if !common::root_or_skip() {
        return;
    }
    let w = Workflow::load();
    assert_eq!(w.job("shard")["env"]["FSLAB_DB"], "${{ secrets.FSLAB_DB }}", "FSLAB_DB comes from a secret");
    let shards = w.shards();
    let n = shards.len();
    assert_eq!(shards, (1..=n).collect::<Vec<_>>());
    let (_, run) = w.run_step("shard", "run");
    let runner_temp = tempfile::tempdir().unwrap();
    let runner_temp = runner_temp.path();
    let mut ids = Vec::new();
    for k in shards {
        let line = w.line(run, "run", k, n, runner_temp);
        let env = [
            ("FSLAB_DB", "postgresql://fslab:secret@db.example/fslab".into()),
            ("RUNNER_TEMP", runner_temp.display().to_string()),
            ("FSLAB_FILE", w.env("FSLAB_FILE")),
            // The workflow's cache stands for the shared test cache here.
            ("FSLAB_KERNEL_CACHE", kernel_cache().display().to_string()),
        ];
        let (plan, _) = run_line("github", &line, &env, &repo());
        assert_builds_kernels("github", &plan);
        ids.push(campaign_of("github", &plan, k, n));
    }
    all_agree("github", ids);
}

/// Job `kernels` exports the kernels and uploads the archive; every shard
/// job, needing it, downloads the artifact, imports it into a cache that
/// has never seen the kernels, and plans its shard with every kernel cached.
#[test]
fn github_actions_build_once_fan_out() {
    let Some(once) = BuiltOnce::new("fslab-deploy-github") else { return };
    let w = Workflow::load();
    let needs = &w.job("shard")["needs"];
    assert!(needs == "kernels" || needs.as_sequence().is_some_and(|s| s.iter().any(|j| j == "kernels")), "{needs:?}");
    let shards = w.shards();
    let n = shards.len();

    // The build runner.
    let build_temp = once.dir.path().join("build-runner-temp");
    std::fs::create_dir(&build_temp).unwrap();
    let (exported_at, export) = w.run_step("kernels", "kernel export");
    let (uploaded_at, upload) = w.uses_step("kernels", "actions/upload-artifact");
    assert!(exported_at < uploaded_at, "the upload comes after the export");
    let line = w.line(export, "kernel export", 1, n, &build_temp);
    let env = [
        ("RUNNER_TEMP", build_temp.display().to_string()),
        ("FSLAB_FILE", once.file()),
        ("FSLAB_KERNEL_CACHE", kernel_cache().display().to_string()),
    ];
    run_line("github kernels", &line, &env, &repo());
    let artifact = PathBuf::from(github_expand(upload["path"].as_str().unwrap(), &expressions(1, n, &build_temp)));
    assert!(artifact.is_file(), "the export wrote no {}", artifact.display());

    let (downloaded_at, download) = w.uses_step("shard", "actions/download-artifact");
    assert_eq!(download["name"], upload["name"], "the shards download the artifact the build uploaded");
    let (imported_at, import) = w.run_step("shard", "kernel import");
    let (ran_at, run) = w.run_step("shard", "run");
    assert!(downloaded_at < imported_at && imported_at < ran_at, "download, import, run: in that order");
    let mut ids = Vec::new();
    for k in shards {
        let runner_temp = once.dir.path().join(format!("shard-{k}-runner-temp"));
        // download-artifact puts the artifact's file into `path`.
        let into = PathBuf::from(github_expand(download["path"].as_str().unwrap(), &expressions(k, n, &runner_temp)));
        std::fs::create_dir_all(&into).unwrap();
        std::fs::copy(&artifact, into.join(artifact.file_name().unwrap())).unwrap();
        let env = [
            vec![
                ("FSLAB_DB", "postgresql://fslab:secret@db.example/fslab".into()),
                ("RUNNER_TEMP", runner_temp.display().to_string()),
                ("FSLAB_FILE", once.file()),
                ("FSLAB_KERNEL_CACHE", once.fresh_cache(&format!("shard-{k}-cache")).display().to_string()),
            ],
            BuiltOnce::offline().to_vec(),
        ]
        .concat();
        run_line("github import", &w.line(import, "kernel import", k, n, &runner_temp), &env, &repo());
        let (plan, _) = run_line("github shard", &w.line(run, "run", k, n, &runner_temp), &env, &repo());
        assert_cached(&format!("github shard {k}"), &plan);
        ids.push(campaign_of("github", &plan, k, n));
    }
    all_agree("github", ids);
}
