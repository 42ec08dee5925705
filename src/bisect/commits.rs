//! `fslab bisect-commits`: which commit between a good and a bad revision
//! of a source tree brought the regression?
//!
//! - `git bisect` walks in a worktree of its own, made for this bisection
//!   (under a marked directory, removed on every exit path by
//!   [`Worktrees`]'s `Drop`): the user's checkout and its bisect state are
//!   never touched (bisect state is per worktree). The good and bad ends
//!   get worktrees of their own too, built once, so rounds can be added to
//!   them at any step.
//! - Per commit: the user's build command runs in the commit's worktree
//!   (`sh -c CMD`: it is the user's own command; fslab adds nothing to it,
//!   the revision and worktree come as `FSLAB_REV` / `FSLAB_WORKTREE`).
//!   Exit 125 or any failure → `git bisect skip`, as `git bisect run` does.
//!   Then the experiment file, with `{rev}` and `{worktree}` filled in (in
//!   any key: a command, a setting, a variant's `kernel`), runs as one
//!   stored experiment tagged `bisect=<id> commit=<sha> role=…`.
//! - The ends are measured first; unless the bad end's verdict against the
//!   good end is `regressed` on the metric, nothing is bisected.
//! - Each candidate is put on the good→bad axis by the three-valued oracle
//!   [`crate::stats::oracle::classify`] at `alpha / looks`; `unknown` adds
//!   one round to the candidate and both ends (so drift hits all three)
//!   until `max_rounds`, then the step is reported undecided and skipped
//!   rather than guessed.
//! - A commit's values are all its stored runs of this bisection, so a
//!   rerun reuses every step already measured (resumable), and the steps
//!   show up in `fslab history`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::fmt::Write;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::oracle::MetricRef;
use crate::experiment::{self, Experiment, Repetitions};
use crate::human;
use crate::report::Document;
use crate::runner::{self, Observer, RunOptions};
use crate::stats::oracle::{classify, Side};
use crate::stats::{compare, CompareConfig, Verdict};
use crate::store::Store;
use crate::sys::{exec, marker, signals};

/// What to bisect and how.
#[derive(Clone, Debug)]
pub struct CommitBisectConfig {
    pub repo: PathBuf,
    pub good: String,
    pub bad: String,
    /// The experiment file (with `{rev}` / `{worktree}` placeholders).
    pub experiment: PathBuf,
    /// Run in each commit's worktree before measuring it (`sh -c`).
    pub build: Option<String>,
    /// The variant measured (default: the file's baseline).
    pub variant: Option<String>,
    /// Default: the first decisive metric of the first workload.
    pub metric: Option<MetricRef>,
    /// Rounds each commit starts with. Default 3.
    pub start_rounds: usize,
    /// Most rounds a commit gets before its step is undecided. Default 20.
    pub max_rounds: usize,
    /// Error rate of one step's answer. Default 0.01.
    pub alpha: f64,
    /// Where the worktrees go (a marked directory is made inside).
    pub worktree_base: PathBuf,
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
#[derive(Clone, Debug, Serialize)]
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
    /// The build failed (or exited 125): skipped.
    BuildFailed,
}

impl Decision {
    /// As the step table shows it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Good => "good",
            Decision::Bad => "bad",
            Decision::Undecided => "undecided (skipped)",
            Decision::BuildFailed => "build failed (skipped)",
        }
    }
}

/// The evidence of one step.
#[derive(Clone, Debug, Serialize)]
pub struct CommitStep {
    pub commit: CommitRef,
    /// `ok`, `failed (exit N)`, `skip (exit 125)`, or `not needed (stored runs)`.
    pub build: String,
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
    /// With [`CommitBisectStatus::Range`]: every commit that could be the first bad one.
    pub candidates: Vec<CommitRef>,
    pub ends: EndsCheck,
    pub steps: Vec<CommitStep>,
    /// Runs done by this invocation, and runs found stored.
    pub runs_done: usize,
    pub runs_reused: usize,
    pub builds: usize,
    pub elapsed_s: f64,
    /// Said when the step is small for the noise (bisection will need many runs).
    pub warnings: Vec<String>,
}

/// Tag keys of a bisection's experiments.
pub const TAG_BISECT: &str = "bisect";
pub const TAG_COMMIT: &str = "commit";
pub const TAG_ROLE: &str = "role";

/// Deadline of a git command: checking out a worktree of a large tree on a
/// slow disk takes minutes, a hung one must still not hang the bisection.
const GIT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Deadline of the user's build command (a kernel build on a small machine
/// takes hours).
const BUILD_TIMEOUT: Duration = Duration::from_secs(12 * 3600);

/// `git args…` in `dir`, through the one home for host tools.
fn run_git(dir: &Path, args: &[&str]) -> Result<exec::Output> {
    exec::run_with(
        "git",
        args,
        &exec::RunIn { dir: Some(dir), timeout: GIT_TIMEOUT, cancellable: true, ..Default::default() },
    )
    .map_err(|e| anyhow::anyhow!("running `git {}` in {}: {e}", args.join(" "), dir.display()))
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = run_git(dir, args)?;
    if !out.success {
        bail!("`git {}` in {} failed: {}", args.join(" "), dir.display(), out.stderr.trim());
    }
    Ok(out.stdout)
}

/// `git bisect …`: its output, which says when it is done. (Exit status 2
/// is how older gits end a bisection of only skipped commits.)
fn bisect_cmd(dir: &Path, args: &[&str]) -> Result<String> {
    let out = run_git(dir, &[&["bisect"], args].concat())?;
    let text = out.stdout + &out.stderr;
    if !out.success && !text.contains("first bad commit") {
        bail!("`git bisect {}` failed: {}", args.join(" "), text.trim());
    }
    Ok(text)
}

fn commit_ref(repo: &Path, sha: &str) -> Result<CommitRef> {
    let subject = git(repo, &["log", "-1", "--format=%s", sha])?.trim().to_string();
    Ok(CommitRef { sha: sha.to_string(), subject })
}

fn resolve(repo: &Path, rev: &str, flag: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    git(repo, &["rev-parse", "--verify", "--quiet", &spec])
        .map(|s| s.trim().to_string())
        .map_err(|_| crate::exit::usage(anyhow::anyhow!("{flag} {rev}: not a commit in {}", repo.display())))
}

/// The worktrees of one bisection, inside one marked directory; all are
/// removed (and git's record of them pruned) when this is dropped: on
/// success, error, panic, and after a stop signal ends the runner.
struct Worktrees {
    repo: PathBuf,
    dir: PathBuf,
    made: Vec<PathBuf>,
    /// Directories of `--worktrees` that did not exist and were created,
    /// deepest first: removed again (when empty) at the end.
    created: Vec<PathBuf>,
}

impl Worktrees {
    fn new(repo: &Path, base: &Path) -> Result<Worktrees> {
        let created: Vec<PathBuf> =
            base.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).map(Path::to_path_buf).collect();
        std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
        let mut worktrees = Worktrees { repo: repo.to_path_buf(), dir: PathBuf::new(), made: Vec::new(), created };
        // Absolute: git resolves relative worktree paths against the repository.
        let base = std::fs::canonicalize(base).with_context(|| format!("resolving {}", base.display()))?;
        (worktrees.dir, _) = marker::create_marked_dir(&base)?;
        Ok(worktrees)
    }

    /// A detached worktree at `sha` named `name`.
    fn add(&mut self, name: &str, sha: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        let p = path.to_string_lossy().into_owned();
        git(&self.repo, &["worktree", "add", "--detach", "--quiet", &p, sha])?;
        self.made.push(path.clone());
        Ok(path)
    }
}

impl Drop for Worktrees {
    fn drop(&mut self) {
        for wt in self.made.drain(..).rev() {
            let p = wt.to_string_lossy().into_owned();
            let _ = git(&self.repo, &["worktree", "remove", "--force", &p]);
        }
        let _ = git(&self.repo, &["worktree", "prune"]);
        // Only our own marked directory, never anything else under the base.
        if !self.dir.as_os_str().is_empty() && matches!(marker::dir_owner(&self.dir), marker::DirOwner::Running(_)) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        // And the directories `--worktrees` made, if nothing else went in.
        for dir in &self.created {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// How a build ended.
enum Built {
    Ok,
    Failed(String),
}

fn build(cmd: Option<&str>, worktree: &Path, sha: &str) -> Result<Built> {
    let Some(cmd) = cmd else { return Ok(Built::Ok) };
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
                crate::human::duration_s(BUILD_TIMEOUT.as_secs_f64())
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

/// A commit being measured.
struct Measured {
    sha: String,
    role: &'static str,
    worktree: Option<PathBuf>,
    values: Vec<f64>,
    reused: usize,
    experiments: Vec<i64>,
}

struct Bisector<'a> {
    cfg: &'a CommitBisectConfig,
    template: String,
    id: String,
    variant: String,
    metric: MetricRef,
    higher_is_better: Option<bool>,
    store: &'a mut Store,
    observer: &'a mut dyn Observer,
    runs_done: usize,
    runs_reused: usize,
}

impl Bisector<'_> {
    /// The experiment file for `sha` checked out at `worktree`, reduced to
    /// the variant and workload measured, `rounds` fixed repetitions.
    fn experiment_for(&self, sha: &str, worktree: &Path, rounds: usize) -> Result<Experiment> {
        let text = self.template.replace("{rev}", sha).replace("{worktree}", &worktree.to_string_lossy());
        let mut exp = experiment::parse(&text, Some(&self.cfg.experiment))
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
        exp.name = format!("{} @ {}", exp.name, &sha[..sha.len().min(12)]);
        Ok(exp)
    }

    /// Stored values of `sha` in this bisection.
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

    /// Runs `rounds` more rounds of `side` (its worktree must be built).
    fn measure(&mut self, side: &mut Measured, rounds: usize) -> Result<()> {
        signals::check_cancelled()?;
        let Some(wt) = side.worktree.clone() else { bail!("commit {} has no built worktree", side.sha) };
        let exp = self.experiment_for(&side.sha, &wt, rounds)?;
        let summary = runner::run(&exp, self.store, &self.cfg.run_options, self.observer)?;
        self.store.add_tags(
            summary.experiment_id,
            &[
                (TAG_BISECT.to_string(), self.id.clone()),
                (TAG_COMMIT.to_string(), side.sha.clone()),
                (TAG_ROLE.to_string(), side.role.to_string()),
            ],
        )?;
        self.runs_done += summary.runs_ok + summary.runs_failed;
        if summary.interrupted {
            signals::check_cancelled()?;
            bail!("interrupted");
        }
        let before = side.values.len();
        self.load(side)?;
        if side.values.len() == before {
            bail!("commit {}: {} runs gave no value of {} (see `fslab report`)", side.sha, rounds, self.metric);
        }
        Ok(())
    }

    /// Brings `side` to at least `n` values.
    fn at_least(&mut self, side: &mut Measured, n: usize) -> Result<()> {
        if side.values.len() < n {
            self.measure(side, n - side.values.len())?;
        }
        Ok(())
    }
}

/// The mmtests mean compare and history use (harmonic for rates).
fn mean(v: &[f64], higher_is_better: bool) -> f64 {
    crate::stats::summarize(v, higher_is_better).mean
}

/// The bisection's identity: the same question asked again resumes it.
fn bisect_id(repo: &Path, good: &str, bad: &str, template: &str, variant: &str, metric: &str, build: &str) -> String {
    let mut h = Sha256::new();
    for part in [repo.to_string_lossy().as_ref(), good, bad, template, variant, metric, build] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
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
    let repo = std::fs::canonicalize(&cfg.repo).with_context(|| format!("--repo {}", cfg.repo.display()))?;
    let top = git(&repo, &["rev-parse", "--show-toplevel"]).map_err(|e| usage(format!("--repo: {e:#}")))?;
    let repo = PathBuf::from(top.trim());
    let good = resolve(&repo, &cfg.good, "--good")?;
    let bad = resolve(&repo, &cfg.bad, "--bad")?;
    if good == bad {
        return Err(usage(format!("--good and --bad are the same commit {good}")));
    }
    if git(&repo, &["merge-base", "--is-ancestor", &good, &bad]).is_err() {
        return Err(usage(format!("--good {} is not an ancestor of --bad {}", cfg.good, cfg.bad)));
    }
    let template = std::fs::read_to_string(&cfg.experiment)
        .with_context(|| format!("reading {}", cfg.experiment.display()))
        .map_err(crate::exit::usage)?;
    let side = |sha: &str, role| Measured {
        sha: sha.to_string(),
        role,
        worktree: None,
        values: Vec::new(),
        reused: 0,
        experiments: Vec::new(),
    };
    // The ends' trees are built first: the file may name what the build
    // makes (a variant's `kernel`), and parsing checks that it exists.
    let mut trees = Worktrees::new(&repo, &cfg.worktree_base)?;
    let mut builds = 0;
    let (mut g, mut bd) = (side(&good, "good"), side(&bad, "bad"));
    for s in [&mut g, &mut bd] {
        let wt = trees.add(s.role, &s.sha)?;
        builds += 1;
        observer.message(&format!("building the {} end {}", s.role, &s.sha[..12]));
        if let Built::Failed(why) = build(cfg.build.as_deref(), &wt, &s.sha)? {
            bail!("the {} end {} does not build: {why}", s.role, &s.sha[..12]);
        }
        s.worktree = Some(wt);
    }
    // Parsed once for the good end, to check the file and pick the defaults.
    let good_tree = g.worktree.clone().unwrap_or_default();
    let probe = template.replace("{rev}", &good).replace("{worktree}", &good_tree.to_string_lossy());
    let probe = experiment::parse(&probe, Some(&cfg.experiment)).map_err(crate::exit::usage)?;
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
    let id =
        bisect_id(&repo, &good, &bad, &template, &variant, &metric.to_string(), cfg.build.as_deref().unwrap_or(""));
    observer.message(&format!("bisection {id}: {} (good) .. {} (bad), {metric}", &good[..12], &bad[..12]));

    let mut b = Bisector {
        cfg,
        template,
        id: id.clone(),
        variant: variant.clone(),
        metric: metric.clone(),
        higher_is_better: None,
        store,
        observer,
        runs_done: 0,
        runs_reused: 0,
    };
    for s in [&mut g, &mut bd] {
        b.load(s)?;
        s.reused = s.values.len();
        b.runs_reused += s.reused;
    }

    // The ends first: bad must really be worse.
    let ccfg = CompareConfig { alpha: cfg.alpha, theta: probe.theta, ..CompareConfig::default() };
    let mut rounds = cfg.start_rounds;
    let ends = loop {
        b.at_least(&mut g, rounds)?;
        b.at_least(&mut bd, rounds)?;
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
        candidates: Vec::new(),
        ends,
        steps: Vec::new(),
        runs_done: 0,
        runs_reused: 0,
        builds,
        elapsed_s: 0.0,
        warnings: Vec::new(),
    };
    if report.ends.verdict != Verdict::Regressed {
        report.runs_done = b.runs_done;
        report.runs_reused = b.runs_reused;
        report.elapsed_s = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    let hib = report.higher_is_better;
    let sd = |v: &[f64]| crate::stats::summarize(v, hib).stddev;
    let noise = sd(&g.values).max(sd(&bd.values));
    let step = (report.ends.means.mean_bad - report.ends.means.mean_good).abs();
    if noise.is_finite() && noise > 0.0 && step < 3.0 * noise {
        report.warnings.push(format!(
            "the step ({}) is below 3 run standard deviations ({}): steps may need up to {} rounds or stay undecided",
            crate::human::number(step),
            crate::human::number(noise),
            cfg.max_rounds
        ));
    }

    // Walk git bisect in a worktree of its own.
    let walker = trees.add("bisect", &bad)?;
    let mut out = bisect_cmd(&walker, &["start", &bad, &good])?;
    let looks = (cfg.max_rounds - cfg.start_rounds + 1) as f64;
    let alpha = cfg.alpha / looks;
    while !out.contains("first bad commit") {
        signals::check_cancelled()?;
        let sha = git(&walker, &["rev-parse", "HEAD"])?.trim().to_string();
        let mut cand = side(&sha, "candidate");
        b.load(&mut cand)?;
        cand.reused = cand.values.len();
        b.runs_reused += cand.reused;
        let commit = commit_ref(&repo, &sha)?;
        b.observer.message(&format!("step {}: {} {}", report.steps.len() + 1, &sha[..12], commit.subject));
        let mut build_text = "not needed (stored runs)".to_string();
        let mut decision = None;
        let mut cls = classify(&g.values, &bd.values, &cand.values, alpha);
        let decided =
            |c: &crate::stats::oracle::Classification, n: usize| c.side != Side::Unknown && n >= cfg.start_rounds;
        if !decided(&cls, cand.values.len()) && cand.values.len() < cfg.max_rounds {
            builds += 1;
            match build(cfg.build.as_deref(), &walker, &sha)? {
                Built::Ok => {
                    build_text = "ok".into();
                    cand.worktree = Some(walker.clone());
                }
                Built::Failed(why) => {
                    build_text = why;
                    decision = Some(Decision::BuildFailed);
                }
            }
        }
        if decision.is_none() {
            loop {
                cls = classify(&g.values, &bd.values, &cand.values, alpha);
                if decided(&cls, cand.values.len()) {
                    decision = Some(if cls.side == Side::Good { Decision::Good } else { Decision::Bad });
                    break;
                }
                if cand.values.len() >= cfg.max_rounds {
                    decision = Some(Decision::Undecided);
                    break;
                }
                if cand.values.len() < cfg.start_rounds {
                    b.at_least(&mut cand, cfg.start_rounds)?;
                    continue;
                }
                // Unknown: one more round of all three.
                let n = cand.values.len() + 1;
                b.at_least(&mut cand, n)?;
                let (ng, nb) = (g.values.len() + 1, bd.values.len() + 1);
                b.at_least(&mut g, ng)?;
                b.at_least(&mut bd, nb)?;
            }
        }
        let decision = decision.unwrap_or(Decision::Undecided);
        report.steps.push(CommitStep {
            commit,
            build: build_text,
            runs: cand.values.len(),
            reused_runs: cand.reused,
            ends: EndMeans::of(&g.values, &bd.values, hib),
            mean_candidate: mean(&cand.values, hib),
            position: cls.position,
            position_low: cls.position_low,
            position_high: cls.position_high,
            p_value: cls.p_value,
            decision,
            partial: cls.partial && matches!(decision, Decision::Good | Decision::Bad),
            experiments: cand.experiments.clone(),
        });
        let verb = match decision {
            Decision::Good => "good",
            Decision::Bad => "bad",
            Decision::Undecided | Decision::BuildFailed => "skip",
        };
        out = bisect_cmd(&walker, &[verb])?;
        if out.contains("only 'skip'ped commits left") {
            break;
        }
    }
    if let Some(line) = out.lines().find(|l| l.contains("is the first bad commit")) {
        let sha = line.split_whitespace().next().unwrap_or_default().to_string();
        report.first_bad = Some(commit_ref(&repo, &sha)?);
        report.status = CommitBisectStatus::Found;
    } else {
        report.status = CommitBisectStatus::Range;
        for line in out.lines() {
            let word = line.split_whitespace().next().unwrap_or_default();
            if word.len() == 40 && word.bytes().all(|c| c.is_ascii_hexdigit()) {
                report.candidates.push(commit_ref(&repo, word)?);
            }
        }
    }
    let _ = bisect_cmd(&walker, &["reset"]);
    report.runs_done = b.runs_done;
    report.runs_reused = b.runs_reused;
    report.builds = builds;
    report.elapsed_s = started.elapsed().as_secs_f64();
    drop(trees);
    Ok(report)
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

/// The result, the ends' check and the evidence of every step.
fn render_text(r: &CommitBisectReport) -> String {
    let mut out = String::new();
    let e = &r.ends;
    let _ = writeln!(
        out,
        "{} between {} (good, {} over {} runs) and {} (bad, {} over {} runs): {} {} [{}], p {}",
        r.metric,
        short(&r.good.sha),
        human::number(e.means.mean_good),
        e.means.n_good,
        short(&r.bad.sha),
        human::number(e.means.mean_bad),
        e.means.n_bad,
        human::change_pct(e.change_pct),
        e.verdict,
        human::ci_pct(e.ci_low_pct, e.ci_high_pct),
        human::p_value(e.p_value)
    );
    match r.status {
        CommitBisectStatus::NotWorse => {
            let _ = writeln!(out, "the bad end is not worse than the good end ({}): nothing bisected", e.verdict);
        }
        CommitBisectStatus::Found => {
            if let Some(c) = &r.first_bad {
                let _ = writeln!(out, "first bad commit: {} {}", c.sha, c.subject);
            }
        }
        CommitBisectStatus::Range => {
            let _ = writeln!(out, "the first bad commit is one of (skipped or undecided commits in between):");
            for c in &r.candidates {
                let _ = writeln!(out, "  {} {}", c.sha, c.subject);
            }
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !r.steps.is_empty() {
        let mut t = Table::new();
        t.load_style(NOTHING);
        t.set_header([
            "step",
            "commit",
            "subject",
            "build",
            "runs",
            "good",
            "bad",
            "candidate",
            "position",
            "p",
            "decision",
        ]);
        for (i, s) in r.steps.iter().enumerate() {
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
                Cell::new(i + 1).set_alignment(CellAlignment::Right),
                Cell::new(short(&s.commit.sha)),
                Cell::new(&s.commit.subject),
                Cell::new(&s.build),
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
        "{} runs done, {} reused from the store, {} builds, {}",
        r.runs_done,
        r.runs_reused,
        r.builds,
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
    fn a_report_keeps_the_ends_keys_flat_in_json_and_text() {
        let ends = EndMeans::of(&[1.0, 1.0], &[2.0, 2.0, 2.0], false);
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
            candidates: Vec::new(),
            ends: EndsCheck {
                means: ends.clone(),
                change_pct: 100.0,
                ci_low_pct: 90.0,
                ci_high_pct: 110.0,
                p_value: 0.001,
                verdict: Verdict::Regressed,
            },
            steps: vec![CommitStep {
                commit: commit("c", "the culprit"),
                build: "ok".into(),
                runs: 3,
                reused_runs: 0,
                ends,
                mean_candidate: 2.0,
                position: 1.0,
                position_low: 0.9,
                position_high: 1.1,
                p_value: 0.01,
                decision: Decision::Bad,
                partial: false,
                experiments: vec![7],
            }],
            runs_done: 8,
            runs_reused: 0,
            builds: 1,
            elapsed_s: 1.0,
            warnings: Vec::new(),
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        for key in ["mean_good", "mean_bad", "n_good", "n_bad"] {
            assert!(json["ends"][key].is_number(), "ends.{key}: {json:#}");
            assert!(json["steps"][0][key].is_number(), "steps[0].{key}: {json:#}");
        }
        assert_eq!(json["steps"][0]["n_bad"], 3);
        let text = report.text();
        assert!(text.contains("(good, 1 over 2 runs)"), "{text}");
        assert!(text.contains("(bad, 2 over 3 runs)"), "{text}");
        assert!(text.contains(&format!("first bad commit: {} the culprit", "c".repeat(40))), "{text}");
    }
}
