//! Every shipped example parses, and its `--quick` form runs end to end on
//! real testbeds with every run succeeding.

use crate::common;

use std::path::Path;
use std::process::Command;

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
        let out = Command::new(common::fslab_bin())
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
        kernel_examples, 8,
        "kernel-upgrade, kernel-upgrade-squashfs, preempt-rt, planted-cpu-work, squashfs-510-vs-61-io and the three \
         case-* examples"
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

/// A case example's header, its comment lines as text (`# ` dropped), up
/// to the first line that is not a comment.
fn header(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.strip_prefix("# ").or_else(|| l.strip_prefix('#')).unwrap_or(l).to_string())
        .collect()
}

/// The header's shell commands, continuation lines joined, that start with `start`.
fn commands(header: &[String], start: &str) -> Vec<String> {
    let joined = header.iter().map(|l| format!("{}\n", l.trim_start())).collect::<String>().replace("\\\n", " ");
    joined.lines().filter(|l| l.starts_with(start)).map(String::from).collect()
}

/// How each case example says a user with a kernel git tree bisects it
/// (the command, a copy of the file with the variant that builds `{rev}`
/// of `{repo}`), done as the header says and run on the real binary, with
/// the test's kernel history (`kernel_bisect.rs`) standing for mainline
/// and `--resume` on an empty store: fslab reads the copy at the good
/// commit (the git kernel's config made and every `set` option read back
/// on that tree's Kconfig), checks `--variant` and the metric's workload,
/// and stops with exit 2 because nothing was bisected yet. The tags and
/// the expected commit are the header's text; the `set` options are
/// checked on 5.10, not on the tags' kernels.
#[test]
fn case_examples_say_how_to_bisect_them() {
    if !common::root_or_skip() {
        return;
    }
    let (repo, base) = crate::kernel_bisect::history();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dir = common::workdir("fslab-example-bisect");
    std::os::unix::fs::symlink(&examples, dir.path().join("examples")).unwrap();
    std::os::unix::fs::symlink(examples.join("patches"), dir.path().join("patches")).unwrap();
    let mut cases = 0;
    for name in ["case-squashfs-readahead.toml", "case-ext4-mb-optimize-scan.toml", "case-xfs-shell1.toml"] {
        let text = std::fs::read_to_string(examples.join(name)).unwrap();
        let header = header(&text);
        let bisect = commands(&header, "fslab bisect-commits ");
        assert_eq!(bisect.len(), 1, "{name}: one `fslab bisect-commits` command in the header: {bisect:?}");
        let args = shlex::split(&bisect[0]).unwrap();
        let value = |flag: &str| {
            let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{name}: {flag} in {args:?}"));
            args[at + 1].clone()
        };
        assert!(value("--good").starts_with('v') && value("--bad").starts_with('v'), "{name}: release tags");
        let variant = value("--variant");
        // The positional argument: the copy (every flag here takes a value).
        let mut positional = args[2..].iter().scan(false, |value_next, a| {
            let is_value = std::mem::replace(value_next, a.starts_with("--"));
            Some((!is_value && !a.starts_with("--")).then_some(a))
        });
        let copy = positional.find_map(|a| a).unwrap_or_else(|| panic!("{name}: the copy's file in {args:?}")).clone();
        // The file the copy starts from: the header's derived file, else the example.
        let base_text = match commands(&header, "sed ").first() {
            Some(sed) => {
                let out = Command::new("bash").args(["-c", sed]).current_dir(dir.path()).output().unwrap();
                assert!(out.status.success(), "{name}: {sed}: {}", String::from_utf8_lossy(&out.stderr));
                let written = sed.rsplit("> ").next().unwrap().trim();
                std::fs::read_to_string(dir.path().join(written)).unwrap()
            }
            None => text.clone(),
        };
        let git_kernel = header
            .iter()
            .map(|l| l.trim())
            .find(|l| l.starts_with("kernel = { git = \"{repo}\", rev = \"{rev}\""))
            .unwrap_or_else(|| panic!("{name}: a `kernel = {{ git = \"{{repo}}\", rev = \"{{rev}}\", … }}` line"));
        // A `[[variant]]` the header adds, or the named variant's kernel replaced.
        let added: Vec<&str> = header
            .iter()
            .map(|l| l.trim())
            .skip_while(|l| *l != "[[variant]]")
            .take_while(|l| *l == "[[variant]]" || l.contains(" = "))
            .collect();
        let derived = if added.is_empty() {
            let mut current = String::new();
            let mut replaced = 0;
            let lines: Vec<String> = base_text
                .lines()
                .map(|l| {
                    if let Some(n) = l.strip_prefix("name = \"") {
                        current = n.trim_end_matches('"').to_string();
                    }
                    if current == variant && l.starts_with("kernel = ") {
                        replaced += 1;
                        return git_kernel.to_string();
                    }
                    l.to_string()
                })
                .collect();
            assert_eq!(replaced, 1, "{name}: variant {variant} has its own kernel line to replace");
            lines.join("\n") + "\n"
        } else {
            assert!(added.contains(&git_kernel) && added.contains(&format!("name = \"{variant}\"").as_str()));
            format!("{base_text}\n{}\n", added.join("\n"))
        };
        std::fs::write(dir.path().join(&copy), derived).unwrap();

        let mut cmd = Command::new(common::fslab_bin());
        let mut rest = args[1..].iter();
        while let Some(a) = rest.next() {
            match a.as_str() {
                "--repo" | "--good" | "--bad" => {
                    rest.next();
                }
                _ => {
                    cmd.arg(a);
                }
            }
        }
        let db = dir.path().join(format!("{name}.db"));
        let out = cmd
            .arg("--repo")
            .arg(&repo)
            .args(["--good", &base, "--bad", "main", "--resume", "--db"])
            .arg(&db)
            .arg("--kernel-cache")
            .arg(crate::vm::kernel_cache())
            .arg("--workdir")
            .arg(dir.path().join("work"))
            .current_dir(dir.path())
            .env_remove("FSLAB_DB")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {said}");
        assert!(said.contains("holds no bisection"), "{name}: the copy did not read at the good commit: {said}");
        cases += 1;
    }
    assert_eq!(cases, 3);
}
