//! `fslab bisect-options`: which of the settings that differ between a good
//! and a bad variant carry the regression?
//!
//! 1. [`diff::split`] turns the two variants into atomic [`Change`]s.
//! 2. The good-vs-bad experiment is run first; unless its verdict on the
//!    chosen metric is `regressed` there is nothing to bisect.
//! 3. [`ddmin::ddmin`] narrows the changes to a 1-minimal set, asking
//!    [`oracle::Oracle`], which runs good + a subset of changes against good
//!    as its own stored experiment (adaptive repetitions) and reads the verdict.
//!
//! The report names the culprit change(s), the experiment whose runs show the
//! regression with exactly those changes, the trials that show each smaller
//! set does not regress, and every run spent.

pub mod commits;
pub mod ddmin;
pub mod diff;
pub mod kconfig;
pub mod oracle;

use std::fmt::Write;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

pub use ddmin::Outcome;
pub use diff::{Change, SettingKind};
pub use oracle::{Bisection, MetricRef, Trial};

use crate::experiment::{Experiment, Repetitions, VariantConfig};
use crate::report::Document;
use crate::runner::{Observer, RunOptions};
use crate::store::Store;

/// What to bisect and how: `bisect-options` and `bisect-kconfig` alike.
#[derive(Clone, Debug)]
pub struct BisectConfig {
    pub good: String,
    pub bad: String,
    pub metric: MetricRef,
    /// Adaptive repetitions `(min, max)` per trial; None: from the file
    /// (`{min, max}` as written; a fixed `n` becomes `{n, 2n}`).
    pub repetitions: Option<(u32, u32)>,
    pub run_options: RunOptions,
}

impl BisectConfig {
    /// The good and the bad variant of `exp`, two different ones (else a
    /// usage error).
    pub fn ends(&self, exp: &Experiment) -> Result<(VariantConfig, VariantConfig)> {
        let find = |name: &str, flag: &str| {
            exp.variant(name).cloned().ok_or_else(|| {
                let names: Vec<&str> = exp.variants.iter().map(|v| v.name.as_str()).collect();
                crate::exit::usage(anyhow!("{flag} {name}: no variant has that name (variants: {})", names.join(", ")))
            })
        };
        let (good, bad) = (find(&self.good, "--good")?, find(&self.bad, "--bad")?);
        if good.name == bad.name {
            return Err(crate::exit::usage(anyhow!("--good and --bad name the same variant `{}`", good.name)));
        }
        Ok((good, bad))
    }

    /// Each trial's adaptive repetitions.
    fn trial_repetitions(&self, exp: &Experiment) -> Result<Repetitions> {
        let (min, max) = match (self.repetitions, exp.repetitions) {
            (Some((min, max)), _) | (None, Repetitions::Adaptive { min, max }) => (min, max),
            (None, Repetitions::Fixed(n)) => (n, 2 * n),
        };
        if min < 2 || max < min {
            bail!("repetitions {{ min = {min}, max = {max} }}: need 2 <= min <= max");
        }
        Ok(Repetitions::Adaptive { min, max })
    }
}

/// How the bisection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A 1-minimal set of changes reproduces the regression.
    Found,
    /// Good vs bad is not `regressed` on the metric: nothing to bisect.
    NotReproduced,
}

/// What a ddmin bisection asked and found, whatever its changes are: both
/// reports carry it (flattened into their JSON).
#[derive(Clone, Debug, Serialize)]
pub struct Search {
    #[serde(skip)]
    pub bisection: Bisection,
    pub experiment: String,
    pub good: String,
    pub bad: String,
    pub metric: MetricRef,
    pub repetitions: Repetitions,
    pub status: Status,
    /// Good against all changes (the bad variant, or good + every candidate).
    pub confirmation: Trial,
    /// Indices of the culprit changes (empty unless found).
    pub culprit_set: Vec<usize>,
    /// The trial whose runs show the regression with exactly the culprits.
    pub proof: Option<Trial>,
    /// Trials of the culprit set minus one change (each did not regress;
    /// the empty set, good against itself, is not run).
    pub minimality: Vec<Trial>,
    /// Distinct experiments run (confirmation included).
    pub oracle_calls: usize,
    /// Oracle questions answered from ddmin's cache.
    pub cache_hits: usize,
}

/// The one step engine of `bisect-options` and `bisect-kconfig`: the
/// confirmation (good against `bad` as written when given, else good + all
/// changes), then, when it regressed, ddmin over the oracle. Returns the
/// search and every trial in the order run, the confirmation first.
fn search(
    exp: &Experiment,
    cfg: &BisectConfig,
    mut oracle: oracle::Oracle,
    bad: Option<VariantConfig>,
) -> Result<(Search, Vec<Trial>)> {
    let all: Vec<usize> = (0..oracle.labels.len()).collect();
    let confirmation = match bad {
        Some(bad) => oracle.confirm(bad)?,
        None => {
            oracle.test(&all)?;
            oracle.trials.last().cloned().expect("the confirmation trial")
        }
    };
    let mut search = Search {
        bisection: oracle.bisection,
        experiment: exp.name.clone(),
        good: cfg.good.clone(),
        bad: cfg.bad.clone(),
        metric: cfg.metric.clone(),
        repetitions: oracle.repetitions,
        status: Status::NotReproduced,
        confirmation,
        culprit_set: Vec::new(),
        proof: None,
        minimality: Vec::new(),
        oracle_calls: 1,
        cache_hits: 0,
    };
    if search.confirmation.outcome == Outcome::Fail {
        let mut cached = ddmin::Cached::new(|set: &[usize]| oracle.test(set));
        let culprit_set = ddmin::ddmin(all.len(), &mut cached)?;
        search.oracle_calls += cached.calls;
        search.cache_hits = cached.hits;
        drop(cached);
        search.status = Status::Found;
        search.proof = oracle.trials.iter().find(|t| t.set == culprit_set).cloned();
        search.minimality = oracle
            .trials
            .iter()
            .filter(|t| t.set.len() + 1 == culprit_set.len() && t.set.iter().all(|i| culprit_set.contains(i)))
            .cloned()
            .collect();
        search.culprit_set = culprit_set;
    }
    Ok((search, oracle.trials))
}

/// Everything `bisect-options` found, for text and JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct BisectReport {
    #[serde(flatten)]
    pub search: Search,
    /// Every atomic difference, indexed by the trials' `set`.
    pub changes: Vec<Change>,
    pub culprits: Vec<Change>,
    /// Every trial in the order run, the confirmation first.
    pub trials: Vec<Trial>,
    /// Trials whose verdict stayed inconclusive (or had no verdict): counted as not reproduced.
    pub unresolved_trials: usize,
    pub total_runs: usize,
    pub elapsed_s: f64,
}

/// A ddmin bisection's report, as a command prints it: a [`Document`]
/// (text and JSON) with the [`Search`] whose status is the exit code.
pub trait Report: Document {
    fn search(&self) -> &Search;
}

impl Report for BisectReport {
    fn search(&self) -> &Search {
        &self.search
    }
}

impl Document for BisectReport {
    fn what(&self) -> &'static str {
        "a bisect result"
    }
    fn text(&self) -> String {
        render_text(self)
    }
}

/// Bisect the settings between `cfg.good` and `cfg.bad` of `exp`.
pub fn bisect(
    exp: &Experiment,
    cfg: &BisectConfig,
    store: &mut Store,
    observer: &mut dyn Observer,
) -> Result<BisectReport> {
    let started = std::time::Instant::now();
    let (good, bad) = cfg.ends(exp)?;
    let changes = diff::split(&good, &bad)?;
    if changes.is_empty() {
        bail!("variants `{}` and `{}` have the same settings: nothing to bisect", good.name, bad.name);
    }
    let make: oracle::MakeCandidate = {
        let (good, bad, changes) = (good.clone(), bad.clone(), changes.clone());
        Box::new(move |set: &[usize], name: &str| {
            let chosen: Vec<&Change> = set.iter().map(|&i| &changes[i]).collect();
            Ok(Ok(diff::apply(&good, &bad, &chosen, name)))
        })
    };
    let labels = changes.iter().map(Change::label).collect();
    let oracle = oracle::Oracle::new(Bisection::Options, exp, cfg, good, labels, make, store, observer)?;
    let (search, trials) = search(exp, cfg, oracle, Some(bad))?;
    Ok(BisectReport {
        culprits: search.culprit_set.iter().map(|&i| changes[i].clone()).collect(),
        search,
        changes,
        unresolved_trials: trials.iter().filter(|t| t.outcome == Outcome::Unresolved).count(),
        total_runs: trials.iter().map(Trial::runs).sum(),
        trials,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

pub(crate) fn trial_line(t: &Trial) -> String {
    let pct = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:+.1}%"));
    format!(
        "experiment {:>4}  {:<12} {:>8} [{}, {}]  {:>2} runs  {}",
        t.experiment_id,
        t.verdict.map_or("no verdict".to_string(), |v| v.to_string()),
        pct(t.change_pct),
        pct(t.ci_low_pct),
        pct(t.ci_high_pct),
        t.runs(),
        if t.changes.is_empty() { "(none)".to_string() } else { t.changes.join("; ") }
    )
}

impl Search {
    /// The confirmation's verdict, as a sentence ends.
    pub fn confirmation_verdict(&self) -> String {
        self.confirmation.verdict.map_or("without a verdict".to_string(), |v| v.to_string())
    }

    /// Why nothing was bisected, one line for stderr.
    pub fn not_reproduced_note(&self) -> String {
        let confirmed = match self.bisection {
            Bisection::Options => format!("`{}`", self.bad),
            Bisection::Kconfig => format!("`{}` + every candidate", self.good),
        };
        format!(
            "{}: {confirmed} is not regressed against `{}` on {} ({}); nothing to bisect",
            self.bisection.command(),
            self.good,
            self.metric,
            self.confirmation.verdict.map_or("no verdict".to_string(), |v| v.to_string())
        )
    }

    /// The culprits (`labels`, under `heading`), the proof and the
    /// minimality trials, for a terminal.
    fn render_found(&self, out: &mut String, heading: &str, labels: impl Iterator<Item = String>) {
        let together = if self.culprit_set.len() == 1 { "" } else { " (all needed together)" };
        let _ = writeln!(out, "\n{heading}{together}:");
        for label in labels {
            let _ = writeln!(out, "  {label}");
        }
        if let Some(p) = &self.proof {
            let _ = writeln!(out, "proof:       {}", trial_line(p));
        }
        for t in &self.minimality {
            let _ = writeln!(out, "without one: {}", trial_line(t));
        }
    }
}

/// The report for a terminal.
fn render_text(r: &BisectReport) -> String {
    let s = &r.search;
    let mut out = String::new();
    let _ = writeln!(out, "bisect-options {}: `{}` (good) vs `{}` (bad) on {}", s.experiment, s.good, s.bad, s.metric);
    let _ = writeln!(out, "{} differences:", r.changes.len());
    for (i, c) in r.changes.iter().enumerate() {
        let _ = writeln!(out, "  [{i}] {}", c.label());
    }
    match s.status {
        Status::NotReproduced => {
            let _ = writeln!(
                out,
                "\nno regression to bisect: `{}` vs `{}` on {} is {} (experiment {}, {} runs); nothing was bisected",
                s.bad,
                s.good,
                s.metric,
                s.confirmation_verdict(),
                s.confirmation.experiment_id,
                s.confirmation.runs()
            );
        }
        Status::Found => {
            let heading = if r.culprits.len() == 1 { "culprit" } else { "culprits" };
            s.render_found(&mut out, heading, r.culprits.iter().map(Change::label));
        }
    }
    let _ = writeln!(out, "\ntrials:");
    let _ = writeln!(out, "  {:<10} {}", "confirm", trial_line(&s.confirmation));
    for t in r.trials.iter().skip(1) {
        let _ = writeln!(out, "  {:<10} {}", format!("{:?}", t.outcome).to_lowercase(), trial_line(t));
    }
    let _ = writeln!(
        out,
        "\n{} experiments, {} runs, {:.0} s ({} answered from cache, {} inconclusive counted as not reproduced)",
        s.oracle_calls, r.total_runs, r.elapsed_s, s.cache_hits, r.unresolved_trials
    );
    out
}
