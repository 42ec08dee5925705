//! `fslab bisect-commits` on a throwaway git repository whose commits
//! change a throttle read from the tree (`bench.sh`, run by a `command`
//! workload on a dir: testbed): the first bad commit is found, a commit
//! whose build fails is skipped, a noisy commit gets extra rounds, the
//! user's checkout is untouched, the worktrees are gone afterwards, and a
//! rerun reuses the stored steps.
//!
//! The commit dates are fixed so the commit ids are the same on every run.
//! The layout was chosen by simulating the step rule
//! (`stats::multisect`, the middle candidate, the older one on a tie) so
//! that both the broken and the noisy commit are visited, and the first
//! bad one found, whether the noisy one ends good or undecided: the broken
//! commit first (skipped), then the noisy one, then g5 and the first bad.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common;

/// Every commit's bench sleeps the next of its durations (s) in turn, a
/// counter beside the script keeping its place: the same `cat` + `sleep`
/// on every commit, so start-up, slow under load, weighs the same
/// everywhere. Sized against load, which adds up to ~0.45 s to a run: the
/// step (ln 8) is over twice what that does to a 0.3 s run (ln 2.5). The
/// noisy commit's durations spread too far for 3 runs to decide, all below
/// the ends' midpoint (0.85 s), so it never ends bad.
const GOOD: &[f64] = &[0.3];
const BAD: &[f64] = &[2.4];
const COMMITS: &[(&str, &[f64])] = &[
    ("good end", GOOD),
    ("g1", GOOD),
    ("g2", GOOD),
    // Between the ends, nearer the good one.
    ("noisy", &[0.15, 0.7, 0.3, 0.5, 0.2, 0.6]),
    ("broken", GOOD),
    ("g5", GOOD),
    ("first bad", BAD),
    ("bad end", BAD),
];

fn bench_script(sleeps: &[f64]) -> String {
    let sleeps: Vec<String> = sleeps.iter().map(f64::to_string).collect();
    format!(
        "n=$(cat \"$0.n\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$0.n\"\nset -- {}; shift $((n % $#)); sleep \"$1\"\n",
        sleeps.join(" ")
    )
}

fn git(repo: &Path, args: &[&str], date: Option<usize>) -> String {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo).args(["-c", "user.email=t@example.org", "-c", "user.name=t"]).args(args);
    if let Some(i) = date {
        let d = format!("2024-01-01T00:00:{i:02}Z");
        cmd.env("GIT_AUTHOR_DATE", &d).env("GIT_COMMITTER_DATE", &d);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn make_repo(repo: &Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"], None);
    for (i, &(subject, sleeps)) in COMMITS.iter().enumerate() {
        std::fs::write(repo.join("bench.sh"), bench_script(sleeps)).unwrap();
        std::fs::write(repo.join("subject"), subject).unwrap();
        // The broken commit's tree fails the build; the next one repairs it.
        match subject {
            "broken" => std::fs::write(repo.join("BROKEN"), "").unwrap(),
            _ => {
                let _ = std::fs::remove_file(repo.join("BROKEN"));
            }
        }
        git(repo, &["add", "-A"], None);
        git(repo, &["commit", "-q", "-m", subject], Some(i));
    }
}

fn bisect(root: &Path) -> (i32, Value, String) {
    let out = Command::new(common::fslab_bin())
        .args(["bisect-commits", "--repo"])
        .arg(root.join("repo"))
        .args(["--good", "HEAD~7", "--bad", "main"])
        .arg(root.join("bisect.toml"))
        .args(["--build", "! test -e BROKEN && echo \"$FSLAB_REV\" > built", "--max-runs", "10", "--json"])
        .arg("--worktrees")
        .arg(root.join("trees/not/yet"))
        .arg("--db")
        .arg(root.join("results.db"))
        .env_remove("FSLAB_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), json, stderr)
}

/// The toy repository in `root/repo`, its testbed directory and the
/// bisection's file, `root/bisect.toml` (its workload runs each commit's
/// `bench.sh`).
fn make_bisection(root: &Path) {
    make_repo(&root.join("repo"));
    std::fs::create_dir_all(root.join("bed")).unwrap();
    common::write_spec(
        root,
        "bisect.toml",
        &format!(
            "name = \"bisect\"\nrepetitions = 3\nworkdir = \"{work}\"\n\n[[variant]]\nname = \"a\"\nfs = \"dir:{bed}\"\n\n\
             [[workload]]\nkind = \"command\"\nname = \"w\"\ncommand = \"sh {{worktree}}/bench.sh # {{rev}}\"\n",
            work = root.join("work").display(),
            bed = root.join("bed").display()
        ),
    );
}

fn step<'a>(report: &'a Value, subject: &str) -> Option<&'a Value> {
    report["steps"].as_array().unwrap().iter().find(|s| s["commit"]["subject"] == subject)
}

#[test]
fn timing_finds_the_first_bad_commit_skipping_a_broken_build_with_extra_rounds_for_a_noisy_one() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("bisect-commits");
    let root = dir.path();
    make_bisection(root);
    let head = git(&root.join("repo"), &["rev-parse", "HEAD"], None);

    let (code, r, stderr) = bisect(root);
    assert_eq!(code, 0, "{r:#}\n{stderr}");
    assert_eq!(r["status"], "found", "{r:#}");
    assert_eq!(r["first_bad"]["subject"], "first bad", "{r:#}");
    assert_eq!(r["ends"]["verdict"], "regressed");
    let broken = step(&r, "broken").unwrap_or_else(|| panic!("broken commit not visited: {r:#}"));
    assert_eq!(broken["decision"], "build-failed");
    assert_eq!(broken["build"], "failed (exit 1)");
    let noisy = step(&r, "noisy").unwrap_or_else(|| panic!("noisy commit not visited: {r:#}"));
    assert!(noisy["runs"].as_u64().unwrap() > 3, "no extra rounds for the noisy commit: {noisy:#}");
    assert!(["good", "undecided"].contains(&noisy["decision"].as_str().unwrap()), "{noisy:#}");
    assert_eq!(step(&r, "first bad").unwrap()["decision"], "bad");
    let done = r["runs_done"].as_u64().unwrap();

    // The user's checkout and its bisect state are untouched; no worktree is left.
    let repo = root.join("repo");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"], None), head);
    assert_eq!(git(&repo, &["status", "--porcelain"], None), "");
    assert_eq!(git(&repo, &["worktree", "list"], None).lines().count(), 1);
    assert!(!repo.join(".git/BISECT_LOG").exists());
    // `--worktrees trees/not/yet` did not exist: what fslab made for it is gone too.
    assert!(!root.join("trees").exists(), "worktree directories left behind");

    // A rerun reuses the stored steps.
    let (code, again, stderr) = bisect(root);
    assert_eq!(code, 0, "{again:#}\n{stderr}");
    assert_eq!(again["first_bad"]["subject"], "first bad");
    assert_eq!(again["id"], r["id"]);
    assert!(again["runs_reused"].as_u64().unwrap() >= done, "{again:#}");
    assert!(again["runs_done"].as_u64().unwrap() * 2 < done, "rerun measured again: {again:#}");

    // Every step's experiment is stored and tagged with its commit.
    let first_bad = r["first_bad"]["sha"].as_str().unwrap();
    let store = fslab::store::Store::open_existing(&root.join("results.db")).unwrap();
    let tagged = store
        .experiments_tagged(&[("commit".into(), first_bad.into()), ("bisect".into(), r["id"].as_str().unwrap().into())])
        .unwrap();
    assert!(!tagged.is_empty());
}

/// `--fleet --parallel 2`: two processes running the same bisection against
/// one store share its steps, each commit measured by whichever claims it
/// first (the ends by one each), and both name the same first bad commit.
#[test]
fn timing_two_machines_of_a_fleet_share_a_bisection_through_the_store() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("bisect-fleet");
    let root = dir.path();
    make_bisection(root);
    let machine = |n: usize| {
        Command::new(common::fslab_bin())
            .args(["bisect-commits", "--repo"])
            .arg(root.join("repo"))
            .args(["--good", "HEAD~7", "--bad", "main"])
            .arg(root.join("bisect.toml"))
            .args(["--build", "! test -e BROKEN && echo \"$FSLAB_REV\" > built", "--max-runs", "10", "--json"])
            .args(["--fleet", "--parallel", "2", "--worktrees"])
            .arg(root.join(format!("trees-{n}")))
            .arg("--db")
            .arg(root.join("results.db"))
            .env_remove("FSLAB_DB")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (machine(1), machine(2));
    let pids = [one.id() as i32, two.id() as i32];
    let mut reports = Vec::new();
    for child in [one, two] {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(out.status.code(), Some(0), "{r:#}\n{stderr}");
        assert_eq!(r["first_bad"]["subject"], "first bad", "{r:#}\n{stderr}");
        reports.push(r);
    }
    assert_eq!(reports[0]["id"], reports[1]["id"], "one bisection");
    // Each process measured some commits of it: who created each experiment.
    let store = fslab::store::Store::open_existing(&root.join("results.db")).unwrap();
    let mut by = std::collections::BTreeMap::new();
    for e in store.list_experiments().unwrap() {
        let owner = store.experiment(e.id).unwrap().environment.owner.map(|o| o.pid);
        *by.entry(owner).or_insert(0) += 1;
    }
    for pid in pids {
        assert!(by.get(&Some(pid)).is_some_and(|n| *n > 0), "process {pid} measured nothing: {by:?}");
    }
}
