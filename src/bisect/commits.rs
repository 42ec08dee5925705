//! `fslab bisect-commits`: which commit between a good and a bad revision
//! of a source tree brought the regression?
//!
//! - The experiment file names what each commit builds with `{rev}` (the
//!   full commit id), `{repo}` (the repository) and, for trees fslab does
//!   not build itself, `{worktree}` (a checkout of the commit). A kernel
//!   variant builds `{rev}` through the kernel pipeline: `kernel = { git =
//!   "{repo}", rev = "{rev}", … }`; the older `kernel = { source =
//!   "{worktree}", … }` is read as that form. Every commit's kernel is then
//!   built in one tree and one object directory (fslab's clone of the
//!   repository, checked out at the commit): Kbuild rebuilds what the
//!   commits changed, ccache beneath, and each image is cached by commit,
//!   config, compiler and patches, so a resumed or repeated bisection
//!   builds nothing twice. Per step the record says what building took
//!   (objects compiled, wall time, cached), the boot time and the runs.
//! - Other trees (`--build CMD`, `{worktree}` elsewhere) get worktrees of
//!   their own under a marked directory, removed on every exit path
//!   ([`Worktrees`]'s `Drop`); the user's checkout and its bisect state are
//!   never touched. `CMD` runs with `sh -c` in the commit's worktree (the
//!   user's own command; `FSLAB_REV` / `FSLAB_WORKTREE` are set); exit 125
//!   or any failure skips the commit, as `git bisect run` does.
//! - Commits are chosen by [`crate::stats::multisect`] over the candidates'
//!   reaches, which git counts (`rev-list --bisect-all`): the middle one,
//!   or with `--parallel K` K of them at once, measured side by side (K
//!   experiments at the same time, each booting its own VM), so N commits
//!   take about `log_(K+1) N` steps. A commit that does not build, does not
//!   boot, fails its runs, or whose config loses a `set` option is skipped
//!   (as `git bisect skip`) and named with the reason.
//! - The ends are measured first; unless the bad end's verdict against the
//!   good end is `regressed` on the metric, nothing else is built.
//! - Each candidate is put on the good→bad axis by the three-valued oracle
//!   [`crate::stats::oracle::classify`] at `alpha / looks`; `unknown` adds
//!   one round to the candidates still unknown and to both ends (so drift
//!   hits all of them) until `max_rounds`, then the commit is reported
//!   undecided and skipped rather than guessed.
//! - A commit's values are all its stored runs of this bisection (every
//!   experiment is tagged `bisect=<id> commit=<sha> role=…` from its
//!   start), so a rerun, or `--resume` after a kill, continues where it
//!   was, and the steps show in `fslab history` and `fslab list`.
//! - The answer: the first bad commit with its subject and files, and its
//!   verdict against its parent (measured if it was not) with the CI.

use std::path::{Path, PathBuf};
use std::time::Instant;

use std::fmt::Write;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::oracle::MetricRef;
use crate::experiment::{self, Experiment, Repetitions};
use crate::human;
use crate::kernel::build;
use crate::report::Document;
use crate::runner::{self, Observer, RunOptions, RunSummary};
use crate::stats::multisect;
use crate::stats::oracle::{classify, Side};
use crate::stats::{compare, CompareConfig, Verdict};
use crate::store::Store;
use crate::sys::git::{self, git};
use crate::sys::{exec, marker, signals};

/// What to bisect and how.
#[derive(Clone, Debug)]
pub struct CommitBisectConfig {
    pub repo: PathBuf,
    pub good: String,
    pub bad: String,
    /// The experiment file (with `{rev}`, `{repo}`, `{worktree}` placeholders).
    pub experiment: PathBuf,
    /// Run in each commit's worktree before measuring it (`sh -c`): for
    /// trees that are not kernels fslab builds.
    pub build: Option<String>,
    /// The variant measured (default: the file's baseline).
    pub variant: Option<String>,
    /// Default: the first decisive metric of the first workload.
    pub metric: Option<MetricRef>,
    /// Rounds each commit starts with. Default 3.
    pub start_rounds: usize,
    /// Most rounds a commit gets before it is undecided. Default 20.
    pub max_rounds: usize,
    /// Error rate of one step's answer. Default 0.01.
    pub alpha: f64,
    /// Commits measured per step, at once. Default 1.
    pub parallel: usize,
    /// Share the steps with other machines running the same command
    /// against the same store: each commit is a one-shard campaign, measured
    /// by whichever machine claims it first; the others wait for its runs.
    pub fleet: bool,
    /// The bisection must already be stored (continue it, exit 2 if not).
    pub resume: bool,
    /// Where the worktrees go (a marked directory is made inside).
    pub worktree_base: PathBuf,
    /// `--workdir` and `--kernel-cache`, applied to each commit's file.
    pub overrides: experiment::Overrides,
    pub run_options: RunOptions,
}

/// How the bisection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitBisectStatus {
    /// One first bad commit.
    Found,
    /// Skipped or undecided commits leave several candidates.
    Range,
    /// The bad end is not significantly worse than the good end.
    NotWorse,
}

/// One commit as the report names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommitRef {
    pub sha: String,
    pub subject: String,
}

/// What was decided about one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Good,
    Bad,
    /// Still unknown after `max_rounds`: skipped, not guessed.
    Undecided,
    /// The build failed (or the build command exited 125): skipped.
    BuildFailed,
    /// Its kernel config cannot give a `set` option (or the file does not
    /// read for it): skipped.
    ConfigRejected,
    /// Its runs failed (a kernel that does not boot, say): skipped.
    RunsFailed,
}

impl Decision {
    /// As the step table shows it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Good => "good",
            Decision::Bad => "bad",
            Decision::Undecided => "undecided (skipped)",
            Decision::BuildFailed => "build failed (skipped)",
            Decision::ConfigRejected => "config rejected (skipped)",
            Decision::RunsFailed => "runs failed (skipped)",
        }
    }

    fn skips(&self) -> bool {
        !matches!(self, Decision::Good | Decision::Bad)
    }
}

/// What building one commit's kernel took.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelBuilt {
    /// `make kernelrelease`.
    pub release: String,
    /// In the cache already (built by an earlier step, run or machine).
    pub cached: bool,
    /// Objects compiled (`CC`/`AS`), when built now.
    pub objects: u64,
    /// Wall time of resolving it (the build, or finding it cached).
    pub wall_s: f64,
    /// The object directory held no finished build.
    pub cold: bool,
}

/// The evidence of one commit of a step.
#[derive(Clone, Debug, Serialize)]
pub struct CommitStep {
    /// The step it was measured in (1-based; with `--parallel K` up to K
    /// commits share a step).
    pub step: usize,
    pub commit: CommitRef,
    /// `ok`, `failed (exit N)`, `skip (exit 125)`, `not needed (stored runs)`,
    /// or what the kernel build did.
    pub build: String,
    /// The kernel it booted, when one was built for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelBuilt>,
    /// The longest boot of its runs' VMs (s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_s: Option<f64>,
    /// Candidate runs behind the decision (stored earlier ones included).
    pub runs: usize,
    /// Of those, runs found stored from an earlier invocation.
    pub reused_runs: usize,
    #[serde(flatten)]
    pub ends: EndMeans,
    pub mean_candidate: f64,
    /// 0 at the good end's mean, 1 at the bad end's.
    pub position: f64,
    pub position_low: f64,
    pub position_high: f64,
    pub p_value: f64,
    pub decision: Decision,
    /// Why it was skipped, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Decided, but also different from the end it was put with.
    pub partial: bool,
    /// Experiments holding the candidate's runs.
    pub experiments: Vec<i64>,
}

/// The good and bad ends' means and run counts at one moment (the ends
/// gain rounds as the bisection goes).
#[derive(Clone, Debug, Serialize)]
pub struct EndMeans {
    pub mean_good: f64,
    pub mean_bad: f64,
    pub n_good: usize,
    pub n_bad: usize,
}

impl EndMeans {
    fn of(good: &[f64], bad: &[f64], higher_is_better: bool) -> EndMeans {
        EndMeans {
            mean_good: mean(good, higher_is_better),
            mean_bad: mean(bad, higher_is_better),
            n_good: good.len(),
            n_bad: bad.len(),
        }
    }
}

/// The good-vs-bad check that starts a bisection.
#[derive(Clone, Debug, Serialize)]
pub struct EndsCheck {
    #[serde(flatten)]
    pub means: EndMeans,
    pub change_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    pub p_value: f64,
    pub verdict: Verdict,
    /// What building each end's kernel took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub good_kernel: Option<KernelBuilt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_kernel: Option<KernelBuilt>,
}

/// The first bad commit against its parent.
#[derive(Clone, Debug, Serialize)]
pub struct Culprit {
    pub commit: CommitRef,
    /// The files it changes.
    pub files: Vec<String>,
    pub parent: CommitRef,
    pub mean_parent: f64,
    pub mean_commit: f64,
    pub n_parent: usize,
    pub n_commit: usize,
    pub change_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    pub p_value: f64,
    pub verdict: Verdict,
}

/// Everything `bisect-commits` found, for text and JSON.
#[derive(Clone, Debug, Serialize)]
pub struct CommitBisectReport {
    /// The `bisect` tag of every stored experiment of this bisection.
    pub id: String,
    pub repo: String,
    pub good: CommitRef,
    pub bad: CommitRef,
    pub metric: MetricRef,
    pub variant: String,
    pub higher_is_better: bool,
    pub status: CommitBisectStatus,
    pub first_bad: Option<CommitRef>,
    /// The first bad commit's files and its verdict against its parent.
    pub culprit: Option<Culprit>,
    /// With [`CommitBisectStatus::Range`]: every commit that could be the first bad one.
    pub candidates: Vec<CommitRef>,
    pub ends: EndsCheck,
    /// Commits measured per step.
    pub parallel: usize,
    /// Steps taken (each measures up to `parallel` commits).
    pub step_count: usize,
    pub steps: Vec<CommitStep>,
    /// Runs done by this invocation, and runs found stored.
    pub runs_done: usize,
    pub runs_reused: usize,
    /// Commits built (or prepared) by this invocation, ends included.
    pub builds: usize,
    /// Seconds spent building kernels, and objects compiled.
    pub build_s: f64,
    pub objects_compiled: u64,
    pub elapsed_s: f64,
    /// Said when the step is small for the noise, or answers contradict.
    pub warnings: Vec<String>,
}

/// Tag keys of a bisection's experiments.
pub const TAG_BISECT: &str = "bisect";
pub const TAG_COMMIT: &str = "commit";
pub const TAG_ROLE: &str = "role";

/// Deadline of the user's build command (a build on a small machine takes hours).
const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// The worktrees of one bisection, inside one marked directory; all are
/// removed (and git's record of them pruned) when this is dropped: on
/// success, error, panic, and after a stop signal ends the runner.
struct Worktrees {
    repo: PathBuf,
    base: PathBuf,
    dir: PathBuf,
    made: Vec<PathBuf>,
    /// Directories of `--worktrees` that did not exist and were created,
    /// deepest first: removed again (when empty) at the end.
    created: Vec<PathBuf>,
}

impl Worktrees {
    fn new(repo: &Path, base: &Path) -> Worktrees {
        Worktrees {
            repo: repo.to_path_buf(),
            base: base.to_path_buf(),
            dir: PathBuf::new(),
            made: Vec::new(),
            created: Vec::new(),
        }
    }

    /// A detached worktree at `sha` named `name` (made once; checked out at
    /// `sha` again when it exists).
    fn at(&mut self, name: &str, sha: &str) -> Result<PathBuf> {
        if self.dir.as_os_str().is_empty() {
            self.created = self
                .base
                .ancestors()
                .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
                .map(Path::to_path_buf)
                .collect();
            std::fs::create_dir_all(&self.base).with_context(|| format!("creating {}", self.base.display()))?;
            // Absolute: git resolves relative worktree paths against the repository.
            let base =
                std::fs::canonicalize(&self.base).with_context(|| format!("resolving {}", self.base.display()))?;
            (self.dir, _) = marker::create_marked_dir(&base)?;
        }
        let path = self.dir.join(name);
        let p = path.to_string_lossy().into_owned();
        if self.made.contains(&path) {
            git(&path, &["checkout", "--force", "--quiet", "--detach", sha])?;
            git(&path, &["clean", "-fdxq"])?;
        } else {
            git(&self.repo, &["worktree", "add", "--detach", "--quiet", &p, sha])?;
            self.made.push(path.clone());
        }
        Ok(path)
    }
}

impl Drop for Worktrees {
    fn drop(&mut self) {
        for wt in self.made.drain(..).rev() {
            let p = wt.to_string_lossy().into_owned();
            let _ = git(&self.repo, &["worktree", "remove", "--force", &p]);
        }
        if self.dir.as_os_str().is_empty() {
            return;
        }
        let _ = git(&self.repo, &["worktree", "prune"]);
        // Only our own marked directory, never anything else under the base.
        if matches!(marker::dir_owner(&self.dir), marker::DirOwner::Running(_)) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        // And the directories `--worktrees` made, if nothing else went in.
        for dir in &self.created {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// How a user's build command ended.
enum Built {
    Ok,
    Failed(String),
}

fn build_command(cmd: &str, worktree: &Path, sha: &str) -> Result<Built> {
    // The user's own command line, as `git bisect run` would run it.
    let env = [("FSLAB_REV", std::ffi::OsStr::new(sha)), ("FSLAB_WORKTREE", worktree.as_os_str())];
    let how = exec::RunIn { dir: Some(worktree), env: &env, timeout: BUILD_TIMEOUT, cancellable: true };
    let out = exec::run_with("sh", &["-c", cmd], &how);
    signals::check_cancelled()?;
    let out = match out {
        Ok(out) => out,
        Err(exec::RunError::TimedOut) => {
            return Ok(Built::Failed(format!(
                "failed (no end after {})",
                human::duration_s(BUILD_TIMEOUT.as_secs_f64())
            )))
        }
        Err(e) => bail!("running the build command in {}: {e}", worktree.display()),
    };
    Ok(match out.code {
        Some(0) => Built::Ok,
        Some(125) => Built::Failed("skip (exit 125)".into()),
        Some(c) => Built::Failed(format!("failed (exit {c})")),
        None => Built::Failed("failed (killed by a signal)".into()),
    })
}

/// The experiment file as a template: a kernel built from `{worktree}`
/// becomes the git form, so every commit builds in fslab's one tree for
/// the repository (its worktree would be a tree of its own, built cold).
fn kernel_template(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // `source = "{worktree}"` (any spacing) → `git = "{repo}", rev = "{rev}"`.
    while let Some(at) = rest.find("source") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let after = &from["source".len()..];
        let trimmed = after.trim_start();
        let is_key = before.chars().last().is_none_or(|c| !c.is_alphanumeric() && c != '_');
        if is_key {
            if let Some(value) = trimmed.strip_prefix('=').map(str::trim_start) {
                if let Some(tail) = value.strip_prefix("\"{worktree}\"") {
                    out.push_str("git = \"{repo}\", rev = \"{rev}\"");
                    rest = tail;
                    continue;
                }
            }
        }
        out.push_str("source");
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A commit being measured.
struct Measured {
    sha: String,
    role: &'static str,
    values: Vec<f64>,
    reused: usize,
    experiments: Vec<i64>,
    /// Ready to measure: its worktree checked out and built, its file read,
    /// its kernel built.
    prepared: bool,
    worktree: Option<PathBuf>,
    build: String,
    kernel: Option<KernelBuilt>,
    /// Why it cannot be measured.
    skip: Option<(Decision, String)>,
}

impl Measured {
    fn new(sha: &str, role: &'static str) -> Measured {
        Measured {
            sha: sha.to_string(),
            role,
            values: Vec::new(),
            reused: 0,
            experiments: Vec::new(),
            prepared: false,
            worktree: None,
            build: "not needed (stored runs)".into(),
            kernel: None,
            skip: None,
        }
    }
}

/// Where the bisection stands: the commits known good, the newest known
/// bad one, and those skipped.
struct Walk {
    goods: Vec<String>,
    bad_tip: String,
    skipped: Vec<String>,
}

impl Walk {
    fn excluded(&self) -> Vec<String> {
        self.goods.iter().map(|g| format!("^{g}")).collect()
    }

    /// The candidates (the bad tip's ancestors no good commit has), as
    /// git lists them for a bisection: id and `dist` (its reach or the
    /// rest, the smaller).
    fn candidates(&self, repo: &Path) -> Result<Vec<(String, usize)>> {
        let mut args = vec!["rev-list".to_string(), "--bisect-all".to_string(), self.bad_tip.clone()];
        args.extend(self.excluded());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Ok(git(repo, &refs)?
            .lines()
            .filter_map(|l| {
                let (sha, rest) = l.split_once(' ')?;
                let dist = rest.split("dist=").nth(1)?.trim_end_matches(')').parse().ok()?;
                Some((sha.to_string(), dist))
            })
            .collect())
    }

    /// How many candidates are ancestors of `sha` (itself included).
    fn reach(&self, repo: &Path, sha: &str) -> Result<usize> {
        let mut args = vec!["rev-list".to_string(), "--count".to_string(), sha.to_string()];
        args.extend(self.excluded());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Ok(git(repo, &refs)?.trim().parse().unwrap_or(0))
    }

    /// The commits of the next step: up to `k` unskipped candidates whose
    /// reaches split the candidates most evenly ([`multisect::pick`]).
    /// git's `dist` gives each reach up to which side of the middle it is
    /// on; the few nearest each target are counted exactly.
    fn next(&self, repo: &Path, k: usize) -> Result<(usize, Vec<String>)> {
        let listed = self.candidates(repo)?;
        let n = listed.len();
        let open: Vec<&(String, usize)> =
            listed.iter().filter(|(sha, _)| *sha != self.bad_tip && !self.skipped.contains(sha)).collect();
        let mut shortlist: Vec<(String, usize)> = Vec::new();
        for t in multisect::targets(n, k) {
            if t >= n {
                continue;
            }
            let want = t.min(n - t);
            let mut near: Vec<&&(String, usize)> = open.iter().collect();
            near.sort_by_key(|(_, d)| d.abs_diff(want));
            for (sha, _) in near.into_iter().take(4) {
                if !shortlist.iter().any(|(s, _)| s == sha) {
                    shortlist.push((sha.clone(), self.reach(repo, sha)?));
                }
            }
        }
        // Equally near a target: the older commit, whatever order git listed them in.
        shortlist.sort_by_key(|(_, reach)| *reach);
        Ok((n, multisect::pick(&shortlist, n, k)))
    }
}

struct Bisector<'a> {
    cfg: &'a CommitBisectConfig,
    repo: PathBuf,
    template: String,
    /// Does a commit need a worktree of its own (`--build`, `{worktree}`)?
    worktrees_needed: bool,
    trees: Worktrees,
    id: String,
    variant: String,
    metric: MetricRef,
    higher_is_better: Option<bool>,
    store: &'a mut Store,
    observer: &'a mut dyn Observer,
    runs_done: usize,
    runs_reused: usize,
    builds: usize,
    build_s: f64,
    objects: u64,
}

impl Bisector<'_> {
    /// The experiment file for `sha`, reduced to the variant and workload
    /// measured, `rounds` fixed repetitions.
    fn experiment_for(&self, sha: &str, worktree: Option<&Path>, rounds: usize) -> Result<Experiment> {
        let text = self
            .template
            .replace("{rev}", sha)
            .replace("{repo}", &self.repo.to_string_lossy())
            .replace("{worktree}", &worktree.map(|w| w.to_string_lossy().into_owned()).unwrap_or_default());
        let mut exp = experiment::parse_with(&text, Some(&self.cfg.experiment), &self.cfg.overrides)
            .with_context(|| format!("{} with {{rev}} = {sha}", self.cfg.experiment.display()))?;
        exp.variants.retain(|v| v.name == self.variant);
        exp.workloads.retain(|w| w.label == self.metric.workload);
        if exp.variants.is_empty() || exp.workloads.is_empty() {
            bail!(
                "{}: no variant `{}` or workload `{}`",
                self.cfg.experiment.display(),
                self.variant,
                self.metric.workload
            );
        }
        exp.baseline = self.variant.clone();
        exp.repetitions = Repetitions::Fixed(rounds as u32);
        exp.name = format!("{} @ {}", exp.name, short(sha));
        // The same on every machine of a fleet, whatever its paths (its
        // worktrees, its clone): the commit of this bisection.
        exp.spec_hash = crate::kernel::sha256_str(&format!("bisect\0{}\0{sha}", self.id));
        Ok(exp)
    }

    /// Stored values of `side` in this bisection.
    fn load(&mut self, side: &mut Measured) -> Result<()> {
        let tags = [(TAG_BISECT.to_string(), self.id.clone()), (TAG_COMMIT.to_string(), side.sha.clone())];
        side.values.clear();
        side.experiments.clear();
        for e in self.store.experiments_tagged(&tags)? {
            for s in self.store.metric_series(e)? {
                if s.workload == self.metric.workload && s.metric == self.metric.metric && s.variant == self.variant {
                    self.higher_is_better.get_or_insert(s.higher_is_better);
                    side.values.extend(&s.values);
                }
            }
            side.experiments.push(e);
        }
        Ok(())
    }

    /// `side`'s worktree, checked out and built by the user's command, when
    /// commits need one; a failed build marks it skipped.
    fn ready_tree(&mut self, side: &mut Measured) -> Result<()> {
        if !self.worktrees_needed || side.worktree.is_some() || side.skip.is_some() {
            return Ok(());
        }
        let name = match side.role {
            "good" | "bad" => side.role.to_string(),
            _ => format!("step-{}", short(&side.sha)),
        };
        let wt = self.trees.at(&name, &side.sha)?;
        if let Some(cmd) = &self.cfg.build {
            self.observer.message(&format!("building {} ({})", short(&side.sha), side.role));
            match build_command(cmd, &wt, &side.sha)? {
                Built::Ok => side.build = "ok".into(),
                Built::Failed(why) => {
                    side.build = why.clone();
                    side.skip = Some((Decision::BuildFailed, why));
                    return Ok(());
                }
            }
        }
        side.worktree = Some(wt);
        Ok(())
    }

    /// Make `side` ready to measure: its tree ([`Self::ready_tree`]), its
    /// file read, its kernel built. What fails marks it skipped, with the
    /// reason.
    fn prepare(&mut self, side: &mut Measured) -> Result<()> {
        if side.prepared || side.skip.is_some() {
            return Ok(());
        }
        signals::check_cancelled()?;
        self.builds += 1;
        self.ready_tree(side)?;
        if side.skip.is_some() {
            return Ok(());
        }
        // The file for this commit: a kernel built from it is prepared now
        // (its config made for this commit's Kconfig).
        let exp = match self.experiment_for(&side.sha, side.worktree.as_deref(), self.cfg.start_rounds) {
            Ok(exp) => exp,
            Err(e) => {
                let why = format!("{e:#}");
                let decision = if e.chain().any(|c| c.to_string().contains("kernel.set")) {
                    Decision::ConfigRejected
                } else {
                    Decision::BuildFailed
                };
                side.build = "config failed".into();
                side.skip = Some((decision, why));
                return Ok(());
            }
        };
        for v in &exp.variants {
            let Some(spec) = &v.kernel else { continue };
            let Some(prepared) = spec.source.build() else { continue };
            let cached = prepared.is_built(&exp.kernel_cache);
            self.observer.message(&format!(
                "{} {}: kernel {} ({})",
                side.role,
                short(&side.sha),
                prepared.release,
                if cached { "cached".to_string() } else { "building".to_string() }
            ));
            let started = Instant::now();
            match spec.source.resolve(&exp.kernel_cache) {
                Ok(_) => {
                    let wall_s = started.elapsed().as_secs_f64();
                    let record = (!cached).then(|| build::entry_record(&exp.kernel_cache, &prepared.key)).flatten();
                    let built = KernelBuilt {
                        release: prepared.release.clone(),
                        cached,
                        objects: record.as_ref().map_or(0, |r| r.objects),
                        wall_s,
                        cold: record.as_ref().is_some_and(|r| r.cold),
                    };
                    side.build = if cached {
                        "kernel cached".to_string()
                    } else {
                        format!("kernel built: {} objects, {}", built.objects, human::duration_s(wall_s))
                    };
                    self.build_s += wall_s;
                    self.objects += built.objects;
                    side.kernel = Some(built);
                }
                Err(e) => {
                    signals::check_cancelled()?;
                    let why = format!("{e:#}");
                    side.build = "kernel build failed".into();
                    side.skip = Some((Decision::BuildFailed, why));
                    return Ok(());
                }
            }
        }
        side.prepared = true;
        Ok(())
    }

    /// Brings each of `sides` to at least its wanted number of values,
    /// measuring them side by side (one thread and store connection each)
    /// when there are several and the store can be opened again.
    fn measure(&mut self, sides: &mut [&mut Measured], wanted: &[usize]) -> Result<()> {
        let mut jobs: Vec<(usize, Experiment, RunOptions, String)> = Vec::new();
        for (i, side) in sides.iter_mut().enumerate() {
            if side.values.len() >= wanted[i] || side.skip.is_some() {
                continue;
            }
            self.prepare(side)?;
            if side.skip.is_some() {
                continue;
            }
            let rounds = wanted[i] - side.values.len();
            match self.experiment_for(&side.sha, side.worktree.as_deref(), rounds) {
                Ok(exp) => {
                    // Tagged from the start: a run killed halfway is found by the next one.
                    let opts = RunOptions {
                        tags: vec![
                            (TAG_BISECT.to_string(), self.id.clone()),
                            (TAG_COMMIT.to_string(), side.sha.clone()),
                            (TAG_ROLE.to_string(), side.role.to_string()),
                        ],
                        ..self.cfg.run_options.clone()
                    };
                    jobs.push((i, exp, opts, format!("{} {}", side.role, short(&side.sha))));
                }
                Err(e) => side.skip = Some((Decision::ConfigRejected, format!("{e:#}"))),
            }
        }
        if jobs.is_empty() {
            return Ok(());
        }
        if self.cfg.fleet {
            return self.measure_on_fleet(sides, wanted, jobs);
        }
        let location = self.store.store_location().cloned();
        let summaries: Vec<(usize, Result<RunSummary>)> = match location {
            Some(location) if jobs.len() > 1 => {
                let started: Vec<_> = jobs
                    .into_iter()
                    .map(|(i, exp, opts, label)| {
                        let location = location.clone();
                        self.observer.message(&format!("measuring {label} side by side"));
                        let handle = std::thread::spawn(move || -> Result<RunSummary> {
                            let mut store = Store::open(&location)?;
                            runner::run(&exp, &mut store, &opts, &mut Lines(label))
                        });
                        (i, handle)
                    })
                    .collect();
                started
                    .into_iter()
                    .map(|(i, h)| (i, h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a measuring thread panicked")))))
                    .collect()
            }
            _ => jobs
                .into_iter()
                .map(|(i, exp, opts, _)| (i, runner::run(&exp, self.store, &opts, self.observer)))
                .collect(),
        };
        self.take_summaries(sides, summaries)
    }

    /// What the runs of `summaries` gave each side: its values, or why none.
    fn take_summaries(
        &mut self,
        sides: &mut [&mut Measured],
        summaries: Vec<(usize, Result<RunSummary>)>,
    ) -> Result<()> {
        for (i, summary) in summaries {
            let summary = summary?;
            self.runs_done += summary.runs_ok + summary.runs_failed;
            if summary.interrupted {
                signals::check_cancelled()?;
                bail!("interrupted");
            }
            let side = &mut *sides[i];
            let before = side.values.len();
            self.load(side)?;
            if side.values.len() == before {
                let why = self.failure_of(summary.experiment_id)?;
                side.skip = Some((Decision::RunsFailed, why));
            }
        }
        Ok(())
    }

    /// [`Self::measure`] on a fleet: each job is the one shard of a campaign
    /// named by the bisection, the commit and the runs wanted, the same on
    /// every machine running this bisection; this process measures the ones
    /// it claims (the runner's lease) and waits for the others' runs,
    /// taking over a campaign whose holder is gone.
    fn measure_on_fleet(
        &mut self,
        sides: &mut [&mut Measured],
        wanted: &[usize],
        jobs: Vec<(usize, Experiment, RunOptions, String)>,
    ) -> Result<()> {
        let shard = crate::store::Shard { index: 1, count: 1 };
        let mut waiting: Vec<(usize, Experiment, RunOptions, String)> = Vec::new();
        for (i, exp, mut opts, label) in jobs {
            let campaign = format!("bisect-{}-{}-n{}", self.id, short(&sides[i].sha), wanted[i]);
            if self.held_elsewhere(&campaign)? {
                self.observer.message(&format!("{label}: measured by another machine; waiting for its runs"));
                opts.campaign = Some(runner::fleet::CampaignShard { campaign, shard });
                waiting.push((i, exp, opts, label));
                continue;
            }
            opts.campaign = Some(runner::fleet::CampaignShard { campaign: campaign.clone(), shard });
            let summary = runner::run(&exp, self.store, &opts, self.observer);
            match summary {
                // Claimed by another machine between the look and the claim.
                Err(e) if format!("{e:#}").contains("is being measured by") => {
                    self.observer.message(&format!("{label}: claimed by another machine; waiting for its runs"));
                    waiting.push((i, exp, opts, label));
                }
                other => self.take_summaries(sides, vec![(i, other)])?,
            }
        }
        for (i, exp, opts, label) in waiting {
            let campaign = opts.campaign.as_ref().map(|c| c.campaign.clone()).unwrap_or_default();
            loop {
                signals::check_cancelled()?;
                self.load(sides[i])?;
                if sides[i].values.len() >= wanted[i] {
                    break;
                }
                if !self.held_elsewhere(&campaign)? {
                    // Its holder finished short, or is gone: measure the rest here.
                    self.observer.message(&format!("{label}: its holder is gone; measuring it here"));
                    let summary = runner::run(&exp, self.store, &opts, self.observer);
                    self.take_summaries(sides, vec![(i, summary)])?;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_secs(5));
            }
        }
        Ok(())
    }

    /// Is the campaign's one shard held by a live process other than this one?
    fn held_elsewhere(&self, campaign: &str) -> Result<bool> {
        let Some(id) = self.store.find_campaign(campaign)? else { return Ok(false) };
        let key = crate::store::owner::LeaseKey { experiment_id: id, shard: Some(1) };
        Ok(self.store.lease_holder(key)?.is_some_and(|h| {
            h.owner != *crate::sys::identity::ProcessIdentity::current()
                && !h.can_be_taken_over(std::time::SystemTime::now())
        }))
    }

    /// Why the runs of an experiment gave no value.
    fn failure_of(&self, experiment: i64) -> Result<String> {
        let runs = self.store.runs(experiment)?;
        let error = runs.iter().find_map(|r| r.error.clone());
        Ok(match error {
            Some(e) => e.lines().take(3).collect::<Vec<_>>().join(" "),
            None => format!("{} runs gave no value of {}", runs.len(), self.metric),
        })
    }

    /// The longest boot of the VMs that ran `side`'s runs, from their places.
    fn boot_s(&self, side: &Measured) -> Option<f64> {
        let mut longest: Option<f64> = None;
        for e in &side.experiments {
            for run in self.store.runs(*e).ok()? {
                let boot = self.store.run_record(run.id).ok().and_then(|r| r.place).and_then(|p| p.boot_s);
                if let Some(b) = boot.filter(|b| *b > 0.0) {
                    longest = Some(longest.map_or(b, |l: f64| l.max(b)));
                }
            }
        }
        longest
    }
}

/// Progress of one of several experiments measured side by side: plain
/// lines naming the commit (bars of several threads would overwrite each other).
struct Lines(String);

impl Observer for Lines {
    fn finished(&mut self, run: &crate::experiment::PlannedRun, record: &crate::record::RunRecord) {
        crate::output::diagnostic(&format!(
            "fslab: [{}] run {} {:?} in {}",
            self.0,
            run.seq + 1,
            record.status,
            human::duration_s(record.wall_s)
        ));
    }
    fn message(&mut self, text: &str) {
        crate::output::diagnostic(&format!("fslab: [{}] {text}", self.0));
    }
}

/// The mmtests mean compare and history use (harmonic for rates).
fn mean(v: &[f64], higher_is_better: bool) -> f64 {
    crate::stats::summarize(v, higher_is_better).mean
}

/// The bisection's identity: the same question asked again resumes it, on
/// this machine or any of a fleet (the commits name the history, so where
/// the repository is checked out does not count).
fn bisect_id(good: &str, bad: &str, template: &str, variant: &str, metric: &str, build: &str) -> String {
    let mut h = Sha256::new();
    for part in [good, bad, template, variant, metric, build] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn commit_ref(repo: &Path, sha: &str) -> Result<CommitRef> {
    Ok(CommitRef { sha: sha.to_string(), subject: git::subject(repo, sha)? })
}

fn resolve_rev(repo: &Path, rev: &str, flag: &str) -> Result<String> {
    git::commit_of(repo, rev)
        .ok_or_else(|| crate::exit::usage(anyhow::anyhow!("{flag} {rev}: not a commit in {}", repo.display())))
}

/// Bisect the commits between `cfg.good` and `cfg.bad`.
pub fn bisect_commits(
    cfg: &CommitBisectConfig,
    store: &mut Store,
    observer: &mut dyn Observer,
) -> Result<CommitBisectReport> {
    let started = Instant::now();
    let usage = |m: String| crate::exit::usage(anyhow::anyhow!(m));
    if cfg.start_rounds < 2 || cfg.max_rounds < cfg.start_rounds {
        return Err(usage(format!("rounds: need 2 <= start ({}) <= max ({})", cfg.start_rounds, cfg.max_rounds)));
    }
    if cfg.parallel == 0 {
        return Err(usage("--parallel: at least 1 commit per step".into()));
    }
    let repo = std::fs::canonicalize(&cfg.repo).with_context(|| format!("--repo {}", cfg.repo.display()))?;
    let top = git(&repo, &["rev-parse", "--show-toplevel"]).map_err(|e| usage(format!("--repo: {e:#}")))?;
    let repo = PathBuf::from(top.trim());
    let good = resolve_rev(&repo, &cfg.good, "--good")?;
    let bad = resolve_rev(&repo, &cfg.bad, "--bad")?;
    if good == bad {
        return Err(usage(format!("--good and --bad are the same commit {good}")));
    }
    if git(&repo, &["merge-base", "--is-ancestor", &good, &bad]).is_err() {
        return Err(usage(format!("--good {} is not an ancestor of --bad {}", cfg.good, cfg.bad)));
    }
    let original = std::fs::read_to_string(&cfg.experiment)
        .with_context(|| format!("reading {}", cfg.experiment.display()))
        .map_err(crate::exit::usage)?;
    let template = kernel_template(&original);
    let worktrees_needed = cfg.build.is_some() || template.contains("{worktree}");
    // The identity keeps the file as written: a bisection started before
    // `{worktree}` kernels were built in one tree resumes as the same one.
    let mut b = Bisector {
        cfg,
        repo: repo.clone(),
        template,
        worktrees_needed,
        trees: Worktrees::new(&repo, &cfg.worktree_base),
        id: String::new(),
        variant: String::new(),
        metric: MetricRef { workload: String::new(), metric: String::new() },
        higher_is_better: None,
        store,
        observer,
        runs_done: 0,
        runs_reused: 0,
        builds: 0,
        build_s: 0.0,
        objects: 0,
    };
    let (mut g, mut bd) = (Measured::new(&good, "good"), Measured::new(&bad, "bad"));
    // The good end's file gives the defaults (variant, metric); its tree is
    // made first when the file names it.
    b.variant = "?".into();
    b.ready_tree(&mut g)?;
    if let Some((_, why)) = &g.skip {
        bail!("the good end {} does not build: {why}", short(&good));
    }
    let probe_text = b
        .template
        .replace("{rev}", &good)
        .replace("{repo}", &repo.to_string_lossy())
        .replace("{worktree}", &g.worktree.as_ref().map(|w| w.to_string_lossy().into_owned()).unwrap_or_default());
    let probe =
        experiment::parse_with(&probe_text, Some(&cfg.experiment), &cfg.overrides).map_err(crate::exit::usage)?;
    let variant = cfg.variant.clone().unwrap_or_else(|| probe.baseline.clone());
    if probe.variant(&variant).is_none() {
        let names: Vec<&str> = probe.variants.iter().map(|v| v.name.as_str()).collect();
        return Err(usage(format!("--variant {variant}: no such variant (variants: {})", names.join(", "))));
    }
    let metric = match &cfg.metric {
        Some(m) => {
            if !probe.workloads.iter().any(|w| w.label == m.workload) {
                return Err(usage(format!("--metric {m}: no workload `{}` in the file", m.workload)));
            }
            m.clone()
        }
        None => {
            let w = &probe.workloads[0];
            let name = ["wall_s", "total_s", "elapsed_s", "files_per_s"]
                .into_iter()
                .find(|m| w.is_decisive(m))
                .ok_or_else(|| usage(format!("give --metric {}/METRIC", w.label)))?;
            MetricRef { workload: w.label.clone(), metric: name.to_string() }
        }
    };
    let id = bisect_id(&good, &bad, &original, &variant, &metric.to_string(), cfg.build.as_deref().unwrap_or(""));
    if cfg.resume && b.store.experiments_tagged(&[(TAG_BISECT.to_string(), id.clone())])?.is_empty() {
        return Err(usage(format!(
            "--resume: {} holds no bisection {id} of {} .. {} with this file, variant and metric",
            b.store.location(),
            short(&good),
            short(&bad)
        )));
    }
    b.id = id.clone();
    b.variant = variant.clone();
    b.metric = metric.clone();
    b.observer.message(&format!(
        "bisection {id}: {} (good) .. {} (bad), {metric}, {} commit{} a step",
        short(&good),
        short(&bad),
        cfg.parallel,
        if cfg.parallel == 1 { "" } else { "s" }
    ));
    for s in [&mut g, &mut bd] {
        b.load(s)?;
        s.reused = s.values.len();
        b.runs_reused += s.reused;
    }

    // The ends first (side by side): bad must really be worse.
    let ccfg = CompareConfig { alpha: cfg.alpha, theta: probe.theta, ..CompareConfig::default() };
    let mut rounds = cfg.start_rounds;
    let ends = loop {
        b.measure(&mut [&mut g, &mut bd], &[rounds, rounds])?;
        for end in [&g, &bd] {
            if let Some((_, why)) = &end.skip {
                bail!("the {} end {} cannot be measured: {why}", end.role, short(&end.sha));
            }
        }
        let hib = b.higher_is_better.unwrap_or(false);
        let c = compare(&g.values, &bd.values, hib, &ccfg);
        if c.verdict != Verdict::Inconclusive || rounds >= cfg.max_rounds {
            break EndsCheck {
                means: EndMeans::of(&g.values, &bd.values, hib),
                change_pct: c.change_pct,
                ci_low_pct: c.ci_low_pct,
                ci_high_pct: c.ci_high_pct,
                p_value: c.p_adjusted,
                verdict: c.verdict,
                good_kernel: g.kernel.clone(),
                bad_kernel: bd.kernel.clone(),
            };
        }
        rounds = g.values.len().max(bd.values.len()) + 1;
    };
    let mut report = CommitBisectReport {
        id: id.clone(),
        repo: repo.display().to_string(),
        good: commit_ref(&repo, &good)?,
        bad: commit_ref(&repo, &bad)?,
        metric: metric.clone(),
        variant,
        higher_is_better: b.higher_is_better.unwrap_or(false),
        status: CommitBisectStatus::NotWorse,
        first_bad: None,
        culprit: None,
        candidates: Vec::new(),
        ends,
        parallel: cfg.parallel,
        step_count: 0,
        steps: Vec::new(),
        runs_done: 0,
        runs_reused: 0,
        builds: 0,
        build_s: 0.0,
        objects_compiled: 0,
        elapsed_s: 0.0,
        warnings: Vec::new(),
    };
    let finish = |report: &mut CommitBisectReport, b: &Bisector| {
        report.runs_done = b.runs_done;
        report.runs_reused = b.runs_reused;
        report.builds = b.builds;
        report.build_s = b.build_s;
        report.objects_compiled = b.objects;
        report.elapsed_s = started.elapsed().as_secs_f64();
    };
    if report.ends.verdict != Verdict::Regressed {
        b.observer.message(&format!(
            "the bad end is not worse than the good end ({}): nothing more is built or measured",
            report.ends.verdict
        ));
        finish(&mut report, &b);
        return Ok(report);
    }
    let hib = report.higher_is_better;
    let sd = |v: &[f64]| crate::stats::summarize(v, hib).stddev;
    let noise = sd(&g.values).max(sd(&bd.values));
    let gap = (report.ends.means.mean_bad - report.ends.means.mean_good).abs();
    if noise.is_finite() && noise > 0.0 && gap < 3.0 * noise {
        report.warnings.push(format!(
            "the step ({}) is below 3 run standard deviations ({}): commits may need up to {} rounds or stay undecided",
            human::number(gap),
            human::number(noise),
            cfg.max_rounds
        ));
    }

    let looks = (cfg.max_rounds - cfg.start_rounds + 1) as f64;
    let alpha = cfg.alpha / looks;
    let mut walk = Walk { goods: vec![good.clone()], bad_tip: bad.clone(), skipped: Vec::new() };
    let mut measured: Vec<Measured> = Vec::new();
    loop {
        signals::check_cancelled()?;
        let (n, picks) = walk.next(&repo, cfg.parallel)?;
        if n <= 1 || picks.is_empty() {
            break;
        }
        report.step_count += 1;
        let step = report.step_count;
        let mut cands: Vec<Measured> = picks.iter().map(|sha| Measured::new(sha, "candidate")).collect();
        for (i, c) in cands.iter_mut().enumerate() {
            b.load(c)?;
            c.reused = c.values.len();
            b.runs_reused += c.reused;
            let subject = git::subject(&repo, &c.sha)?;
            b.observer.message(&format!(
                "step {step}{}: {} {subject} ({n} candidates left)",
                if picks.len() > 1 { format!(".{}", i + 1) } else { String::new() },
                short(&c.sha)
            ));
        }
        // Start rounds, then one more round of the unknown ones and both ends.
        let decided = |c: &Measured, g: &Measured, bd: &Measured| {
            c.skip.is_some()
                || (c.values.len() >= cfg.start_rounds
                    && classify(&g.values, &bd.values, &c.values, alpha).side != Side::Unknown)
                || c.values.len() >= cfg.max_rounds
        };
        {
            let wanted: Vec<usize> = cands.iter().map(|c| c.values.len().max(cfg.start_rounds)).collect();
            let mut refs: Vec<&mut Measured> = cands.iter_mut().collect();
            b.measure(&mut refs, &wanted)?;
        }
        while !cands.iter().all(|c| decided(c, &g, &bd)) {
            let open: Vec<bool> = cands.iter().map(|c| !decided(c, &g, &bd)).collect();
            let (ng, nb) = (g.values.len() + 1, bd.values.len() + 1);
            let mut refs: Vec<&mut Measured> = vec![&mut g, &mut bd];
            let mut wanted = vec![ng, nb];
            for (c, open) in cands.iter_mut().zip(open) {
                if open {
                    wanted.push(c.values.len() + 1);
                    refs.push(c);
                }
            }
            b.measure(&mut refs, &wanted)?;
        }
        let mut bads: Vec<String> = Vec::new();
        let mut goods: Vec<String> = Vec::new();
        for c in cands {
            let cls = classify(&g.values, &bd.values, &c.values, alpha);
            let (decision, reason) = match &c.skip {
                Some((d, why)) => (*d, Some(why.clone())),
                None if cls.side == Side::Good && c.values.len() >= cfg.start_rounds => (Decision::Good, None),
                None if cls.side == Side::Bad && c.values.len() >= cfg.start_rounds => (Decision::Bad, None),
                None => (Decision::Undecided, None),
            };
            match decision {
                Decision::Good => goods.push(c.sha.clone()),
                Decision::Bad => bads.push(c.sha.clone()),
                _ => walk.skipped.push(c.sha.clone()),
            }
            if let Some(why) = &reason {
                b.observer.message(&format!("skipping {}: {}", short(&c.sha), why.lines().next().unwrap_or("")));
            }
            report.steps.push(CommitStep {
                step,
                commit: commit_ref(&repo, &c.sha)?,
                build: c.build.clone(),
                kernel: c.kernel.clone(),
                boot_s: b.boot_s(&c),
                runs: c.values.len(),
                reused_runs: c.reused,
                ends: EndMeans::of(&g.values, &bd.values, hib),
                mean_candidate: mean(&c.values, hib),
                position: cls.position,
                position_low: cls.position_low,
                position_high: cls.position_high,
                p_value: cls.p_value,
                decision,
                reason,
                partial: cls.partial && !decision.skips(),
                experiments: c.experiments.clone(),
            });
            measured.push(c);
        }
        // The newest bad commit bounds the rest; a good answer for one of
        // its descendants contradicts it and is set aside.
        if let Some(tip) = newest_bad(&repo, &bads)? {
            walk.bad_tip = tip;
        }
        for sha in goods {
            if git(&repo, &["merge-base", "--is-ancestor", &walk.bad_tip, &sha]).is_ok() {
                report.warnings.push(format!(
                    "{} was measured good but descends from {}, measured bad: the answers contradict (a second \
                     change, or noise); it is left out",
                    short(&sha),
                    short(&walk.bad_tip)
                ));
                walk.skipped.push(sha);
            } else {
                walk.goods.push(sha);
            }
        }
    }
    let left = walk.candidates(&repo)?;
    if left.len() == 1 {
        report.status = CommitBisectStatus::Found;
        report.first_bad = Some(commit_ref(&repo, &walk.bad_tip)?);
        report.culprit = Some(culprit(&mut b, &repo, &walk.bad_tip, &mut g, &mut bd, &mut measured, &ccfg)?);
    } else {
        report.status = CommitBisectStatus::Range;
        for (sha, _) in left.iter().take(50) {
            report.candidates.push(commit_ref(&repo, sha)?);
        }
        if left.len() > 50 {
            report.warnings.push(format!("{} candidates are left; the first 50 are listed", left.len()));
        }
    }
    finish(&mut report, &b);
    Ok(report)
}

/// Of commits measured bad, the one all others descend from (the lowest),
/// when they lie on one line; else the first.
fn newest_bad(repo: &Path, bads: &[String]) -> Result<Option<String>> {
    let mut tip: Option<String> = None;
    for sha in bads {
        tip = match tip {
            Some(t) if git(repo, &["merge-base", "--is-ancestor", sha, &t]).is_ok() => Some(sha.clone()),
            Some(t) => Some(t),
            None => Some(sha.clone()),
        };
    }
    Ok(tip)
}

/// The first bad commit against its (first) parent: the parent's values
/// are the good end's when it is the good end, its stored ones when it was
/// measured, else it is measured now.
fn culprit(
    b: &mut Bisector,
    repo: &Path,
    sha: &str,
    good: &mut Measured,
    bad: &mut Measured,
    measured: &mut [Measured],
    ccfg: &CompareConfig,
) -> Result<Culprit> {
    let parent = git(repo, &["rev-parse", &format!("{sha}^")])?.trim().to_string();
    let files: Vec<String> =
        git(repo, &["diff-tree", "--no-commit-id", "--name-only", "-r", sha])?.lines().map(str::to_string).collect();
    let values_of = |sha: &str, measured: &[Measured], good: &Measured, bad: &Measured| -> Option<Vec<f64>> {
        [good, bad].into_iter().chain(measured.iter()).find(|m| m.sha == sha).map(|m| m.values.clone())
    };
    let commit_values = values_of(sha, measured, good, bad).unwrap_or_default();
    let parent_values = match values_of(&parent, measured, good, bad).filter(|v| !v.is_empty()) {
        Some(v) => v,
        None => {
            let mut p = Measured::new(&parent, "parent");
            b.load(&mut p)?;
            b.observer.message(&format!("measuring the first bad commit's parent {}", short(&parent)));
            let n = commit_values.len().max(b.cfg.start_rounds);
            b.measure(&mut [&mut p], &[n])?;
            p.values
        }
    };
    let hib = b.higher_is_better.unwrap_or(false);
    let c = compare(&parent_values, &commit_values, hib, ccfg);
    Ok(Culprit {
        commit: commit_ref(repo, sha)?,
        files,
        parent: commit_ref(repo, &parent)?,
        mean_parent: mean(&parent_values, hib),
        mean_commit: mean(&commit_values, hib),
        n_parent: parent_values.len(),
        n_commit: commit_values.len(),
        change_pct: c.change_pct,
        ci_low_pct: c.ci_low_pct,
        ci_high_pct: c.ci_high_pct,
        p_value: c.p_adjusted,
        verdict: c.verdict,
    })
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

impl Document for CommitBisectReport {
    fn what(&self) -> &'static str {
        "a commit bisection"
    }
    fn text(&self) -> String {
        render_text(self)
    }
}

fn kernel_cell(k: &Option<KernelBuilt>, fallback: &str) -> String {
    match k {
        Some(k) if k.cached => format!("{} cached", k.release),
        Some(k) => format!(
            "{} {}{} objects, {}",
            k.release,
            if k.cold { "COLD, " } else { "" },
            k.objects,
            human::duration_s(k.wall_s)
        ),
        None => fallback.to_string(),
    }
}

/// The answer first, then the ends' check and the evidence of every step.
fn render_text(r: &CommitBisectReport) -> String {
    let mut out = String::new();
    let e = &r.ends;
    match r.status {
        CommitBisectStatus::NotWorse => {
            let _ = writeln!(out, "the bad end is not worse than the good end ({}): nothing bisected", e.verdict);
        }
        CommitBisectStatus::Found => {
            if let Some(c) = &r.first_bad {
                let _ = writeln!(out, "first bad commit: {} {}", c.sha, c.subject);
            }
            if let Some(c) = &r.culprit {
                let _ = writeln!(
                    out,
                    "  against its parent {} ({} over {} runs): {} over {} runs, {} {} [{}], p {}",
                    short(&c.parent.sha),
                    human::number(c.mean_parent),
                    c.n_parent,
                    human::number(c.mean_commit),
                    c.n_commit,
                    human::change_pct(c.change_pct),
                    c.verdict,
                    human::ci_pct(c.ci_low_pct, c.ci_high_pct),
                    human::p_value(c.p_value)
                );
                let shown: Vec<&str> = c.files.iter().take(10).map(String::as_str).collect();
                let more = if c.files.len() > 10 { format!(" and {} more", c.files.len() - 10) } else { String::new() };
                let _ = writeln!(out, "  files: {}{more}", shown.join(", "));
            }
        }
        CommitBisectStatus::Range => {
            let _ = writeln!(out, "the first bad commit is one of (skipped or undecided commits in between):");
            for c in &r.candidates {
                let _ = writeln!(out, "  {} {}", c.sha, c.subject);
            }
        }
    }
    let _ = writeln!(
        out,
        "{} between {} (good, {} over {} runs; {}) and {} (bad, {} over {} runs; {}): {} {} [{}], p {}",
        r.metric,
        short(&r.good.sha),
        human::number(e.means.mean_good),
        e.means.n_good,
        kernel_cell(&e.good_kernel, "built"),
        short(&r.bad.sha),
        human::number(e.means.mean_bad),
        e.means.n_bad,
        kernel_cell(&e.bad_kernel, "built"),
        human::change_pct(e.change_pct),
        e.verdict,
        human::ci_pct(e.ci_low_pct, e.ci_high_pct),
        human::p_value(e.p_value)
    );
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for s in r.steps.iter().filter(|s| s.reason.is_some()) {
        let why = s.reason.as_deref().unwrap_or_default();
        let _ = writeln!(
            out,
            "skipped {} ({}): {}",
            short(&s.commit.sha),
            s.decision.as_str(),
            why.lines().next().unwrap_or("")
        );
    }
    if !r.steps.is_empty() {
        let mut t = Table::new();
        t.load_style(NOTHING);
        t.set_header([
            "step",
            "commit",
            "subject",
            "build",
            "boot",
            "runs",
            "good",
            "bad",
            "candidate",
            "position",
            "p",
            "decision",
        ]);
        for s in &r.steps {
            let position = if s.position.is_finite() {
                format!("{:.2} [{:.2}, {:.2}]", s.position, s.position_low, s.position_high)
            } else {
                "–".into()
            };
            let mut decision = s.decision.as_str().to_string();
            if s.partial {
                decision.push_str(" (partial step)");
            }
            let runs =
                if s.reused_runs > 0 { format!("{} ({} stored)", s.runs, s.reused_runs) } else { s.runs.to_string() };
            t.add_row(vec![
                Cell::new(s.step).set_alignment(CellAlignment::Right),
                Cell::new(short(&s.commit.sha)),
                Cell::new(&s.commit.subject),
                Cell::new(kernel_cell(&s.kernel, &s.build)),
                Cell::new(s.boot_s.map_or("–".to_string(), human::duration_s)),
                Cell::new(runs).set_alignment(CellAlignment::Right),
                Cell::new(format!("{} (n {})", human::number(s.ends.mean_good), s.ends.n_good)),
                Cell::new(format!("{} (n {})", human::number(s.ends.mean_bad), s.ends.n_bad)),
                Cell::new(human::number(s.mean_candidate)),
                Cell::new(position),
                Cell::new(human::p_value(s.p_value)),
                Cell::new(decision),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(
        out,
        "{} steps of {} commit{}, {} runs done, {} reused from the store, {} builds ({} objects compiled in {}), {}",
        r.step_count,
        r.parallel,
        if r.parallel == 1 { "" } else { "s" },
        r.runs_done,
        r.runs_reused,
        r.builds,
        r.objects_compiled,
        human::duration_s(r.build_s),
        human::duration_s(r.elapsed_s)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ToJson;

    fn commit(sha: &str, subject: &str) -> CommitRef {
        CommitRef { sha: sha.repeat(40), subject: subject.into() }
    }

    #[test]
    fn a_worktree_kernel_becomes_the_git_form_and_nothing_else_changes() {
        let file = "[defaults]\nkernel = { source = \"{worktree}\", config = \"minimal\" }\n\
                    [[workload]]\ncommand = \"cat {worktree}/x\"\nresource = 1\n";
        let t = kernel_template(file);
        assert!(t.contains("kernel = { git = \"{repo}\", rev = \"{rev}\", config = \"minimal\" }"), "{t}");
        assert!(t.contains("command = \"cat {worktree}/x\"") && t.contains("resource = 1"), "{t}");
        assert_eq!(
            kernel_template("kernel = { source=\"{worktree}\" }"),
            "kernel = { git = \"{repo}\", rev = \"{rev}\" }"
        );
        // Other sources are left as they are.
        let debian = "kernel = { source = \"debian:5.10\" }";
        assert_eq!(kernel_template(debian), debian);
    }

    #[test]
    fn a_report_leads_with_the_answer_and_keeps_the_ends_keys_flat_in_json() {
        let ends = EndMeans::of(&[1.0, 1.0], &[2.0, 2.0, 2.0], false);
        let built = KernelBuilt { release: "5.10.262".into(), cached: false, objects: 7, wall_s: 70.0, cold: false };
        let report = CommitBisectReport {
            id: "x".into(),
            repo: "/r".into(),
            good: commit("a", "good"),
            bad: commit("b", "bad"),
            metric: "untar/total_s".parse().unwrap(),
            variant: "v".into(),
            higher_is_better: false,
            status: CommitBisectStatus::Found,
            first_bad: Some(commit("c", "the culprit")),
            culprit: Some(Culprit {
                commit: commit("c", "the culprit"),
                files: vec!["fs/read_write.c".into()],
                parent: commit("d", "before"),
                mean_parent: 1.0,
                mean_commit: 2.0,
                n_parent: 3,
                n_commit: 3,
                change_pct: 100.0,
                ci_low_pct: 90.0,
                ci_high_pct: 110.0,
                p_value: 0.001,
                verdict: Verdict::Regressed,
            }),
            candidates: Vec::new(),
            ends: EndsCheck {
                means: ends.clone(),
                change_pct: 100.0,
                ci_low_pct: 90.0,
                ci_high_pct: 110.0,
                p_value: 0.001,
                verdict: Verdict::Regressed,
                good_kernel: Some(KernelBuilt { cached: true, ..built.clone() }),
                bad_kernel: Some(built.clone()),
            },
            parallel: 1,
            step_count: 1,
            steps: vec![CommitStep {
                step: 1,
                commit: commit("c", "the culprit"),
                build: "ok".into(),
                kernel: Some(built),
                boot_s: Some(11.5),
                runs: 3,
                reused_runs: 0,
                ends,
                mean_candidate: 2.0,
                position: 1.0,
                position_low: 0.9,
                position_high: 1.1,
                p_value: 0.01,
                decision: Decision::Bad,
                reason: None,
                partial: false,
                experiments: vec![7],
            }],
            runs_done: 8,
            runs_reused: 0,
            builds: 1,
            build_s: 70.0,
            objects_compiled: 7,
            elapsed_s: 1.0,
            warnings: Vec::new(),
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        for key in ["mean_good", "mean_bad", "n_good", "n_bad"] {
            assert!(json["ends"][key].is_number(), "ends.{key}: {json:#}");
            assert!(json["steps"][0][key].is_number(), "steps[0].{key}: {json:#}");
        }
        assert_eq!(json["steps"][0]["kernel"]["objects"], 7);
        assert_eq!(json["culprit"]["files"][0], "fs/read_write.c");
        let text = report.text();
        assert!(text.starts_with(&format!("first bad commit: {} the culprit", "c".repeat(40))), "{text}");
        assert!(text.contains("files: fs/read_write.c"), "{text}");
        assert!(text.contains("+100.00% regressed"), "{text}");
        assert!(text.contains("5.10.262 7 objects, 1 min 10 s"), "{text}");
        assert!(text.contains("(good, 1 over 2 runs; 5.10.262 cached)"), "{text}");
    }
}
