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

use anyhow::{bail, Result};
use serde::Serialize;

pub use ddmin::Outcome;
pub use diff::{Change, ChangeKind};
pub use oracle::{MetricRef, Trial};

use crate::experiment::{Experiment, Repetitions};
use crate::runner::{Observer, RunOptions};
use crate::store::Store;

/// What to bisect and how.
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

/// How the bisection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A 1-minimal set of changes reproduces the regression.
    Found,
    /// Good vs bad is not `regressed` on the metric: nothing to bisect.
    NotReproduced,
}

/// Everything `bisect-options` found, for text and JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct BisectReport {
    pub experiment: String,
    pub good: String,
    pub bad: String,
    pub metric: MetricRef,
    pub repetitions: Repetitions,
    pub status: Status,
    /// Every atomic difference, indexed by the trials' `set`.
    pub changes: Vec<Change>,
    /// Good vs bad as written.
    pub confirmation: Trial,
    /// Indices of the culprit changes (empty unless found).
    pub culprit_set: Vec<usize>,
    pub culprits: Vec<Change>,
    /// The trial whose runs show the regression with exactly the culprits.
    pub proof: Option<Trial>,
    /// Trials of the culprit set minus one change (each did not regress;
    /// the empty set, good against itself, is not run).
    pub minimality: Vec<Trial>,
    /// Every trial in the order run, the confirmation first.
    pub trials: Vec<Trial>,
    /// Distinct experiments run (confirmation included).
    pub oracle_calls: usize,
    /// Oracle questions answered from the cache.
    pub cache_hits: usize,
    /// Trials whose verdict stayed inconclusive (or had no verdict): counted as not reproduced.
    pub unresolved_trials: usize,
    pub total_runs: usize,
    pub elapsed_s: f64,
}

/// Bisect the settings between `cfg.good` and `cfg.bad` of `exp`.
pub fn bisect(
    exp: &Experiment,
    cfg: &BisectConfig,
    store: &mut Store,
    observer: &mut dyn Observer,
) -> Result<BisectReport> {
    let started = std::time::Instant::now();
    let find = |name: &str, flag: &str| {
        exp.variant(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = exp.variants.iter().map(|v| v.name.as_str()).collect();
            anyhow::anyhow!("{flag} {name}: no variant has that name (variants: {})", names.join(", "))
        })
    };
    let good = find(&cfg.good, "--good")?;
    let bad = find(&cfg.bad, "--bad")?;
    if good.name == bad.name {
        bail!("--good and --bad name the same variant `{}`", good.name);
    }
    let changes = diff::split(&good, &bad)?;
    if changes.is_empty() {
        bail!("variants `{}` and `{}` have the same settings: nothing to bisect", good.name, bad.name);
    }
    let repetitions = match (cfg.repetitions, exp.repetitions) {
        (Some((min, max)), _) => Repetitions::Adaptive { min, max },
        (None, Repetitions::Adaptive { min, max }) => Repetitions::Adaptive { min, max },
        (None, Repetitions::Fixed(n)) => Repetitions::Adaptive { min: n, max: 2 * n },
    };
    if let Repetitions::Adaptive { min, max } = repetitions {
        if min < 2 || max < min {
            bail!("repetitions {{ min = {min}, max = {max} }}: need 2 <= min <= max");
        }
    }

    let make: oracle::MakeCandidate = {
        let (good, bad, changes) = (good.clone(), bad.clone(), changes.clone());
        Box::new(move |set: &[usize], name: &str| {
            let chosen: Vec<&Change> = set.iter().map(|&i| &changes[i]).collect();
            Ok(Ok(diff::apply(&good, &bad, &chosen, name)))
        })
    };
    let mut oracle = oracle::Oracle {
        command: "bisect-options",
        base: exp,
        good,
        labels: changes.iter().map(Change::label).collect(),
        make,
        metric: cfg.metric.clone(),
        repetitions,
        store,
        options: cfg.run_options.clone(),
        observer,
        reuse_stored: false,
        trials: Vec::new(),
    };
    let confirmation = oracle.confirm(bad)?;
    let mut report = BisectReport {
        experiment: exp.name.clone(),
        good: cfg.good.clone(),
        bad: cfg.bad.clone(),
        metric: cfg.metric.clone(),
        repetitions,
        status: Status::NotReproduced,
        changes: changes.clone(),
        confirmation: confirmation.clone(),
        culprit_set: Vec::new(),
        culprits: Vec::new(),
        proof: None,
        minimality: Vec::new(),
        trials: Vec::new(),
        oracle_calls: 1,
        cache_hits: 0,
        unresolved_trials: 0,
        total_runs: 0,
        elapsed_s: 0.0,
    };
    if confirmation.outcome == Outcome::Fail {
        let mut cached = ddmin::Cached::new(|set: &[usize]| oracle.test(set));
        let culprit_set = ddmin::ddmin(changes.len(), &mut cached)?;
        report.oracle_calls += cached.calls;
        report.cache_hits = cached.hits;
        drop(cached);
        report.status = Status::Found;
        report.culprits = culprit_set.iter().map(|&i| changes[i].clone()).collect();
        report.proof = oracle.trials.iter().find(|t| t.set == culprit_set).cloned();
        report.minimality = oracle
            .trials
            .iter()
            .filter(|t| t.set.len() + 1 == culprit_set.len() && t.set.iter().all(|i| culprit_set.contains(i)))
            .cloned()
            .collect();
        report.culprit_set = culprit_set;
    }
    report.trials = oracle.trials;
    report.unresolved_trials = report.trials.iter().filter(|t| t.outcome == Outcome::Unresolved).count();
    report.total_runs = report.trials.iter().map(Trial::runs).sum();
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
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

/// The report for a terminal.
pub fn render_text(r: &BisectReport) -> String {
    let mut out = String::new();
    let push = |out: &mut String, s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    push(
        &mut out,
        format!("bisect-options {}: `{}` (good) vs `{}` (bad) on {}", r.experiment, r.good, r.bad, r.metric),
    );
    push(&mut out, format!("{} differences:", r.changes.len()));
    for (i, c) in r.changes.iter().enumerate() {
        push(&mut out, format!("  [{i}] {}", c.label()));
    }
    match r.status {
        Status::NotReproduced => push(
            &mut out,
            format!(
                "\nno regression to bisect: `{}` vs `{}` on {} is {} (experiment {}, {} runs); nothing was bisected",
                r.bad,
                r.good,
                r.metric,
                r.confirmation.verdict.map_or("without a verdict".to_string(), |v| v.to_string()),
                r.confirmation.experiment_id,
                r.confirmation.runs()
            ),
        ),
        Status::Found => {
            push(&mut out, format!("\nculprit{}:", if r.culprits.len() == 1 { "" } else { "s (all needed together)" }));
            for c in &r.culprits {
                push(&mut out, format!("  {}", c.label()));
            }
            if let Some(p) = &r.proof {
                push(&mut out, format!("proof:      {}", trial_line(p)));
            }
            for t in &r.minimality {
                push(&mut out, format!("without one: {}", trial_line(t)));
            }
        }
    }
    push(&mut out, "\ntrials:".to_string());
    push(&mut out, format!("  {:<10} {}", "confirm", trial_line(&r.confirmation)));
    for t in r.trials.iter().skip(1) {
        push(&mut out, format!("  {:<10} {}", format!("{:?}", t.outcome).to_lowercase(), trial_line(t)));
    }
    push(
        &mut out,
        format!(
            "\n{} experiments, {} runs, {:.0} s ({} answered from cache, {} inconclusive counted as not reproduced)",
            r.oracle_calls, r.total_runs, r.elapsed_s, r.cache_hits, r.unresolved_trials
        ),
    );
    out
}
