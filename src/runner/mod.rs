//! Runs one experiment: plan → for each run provision, prepare, measure,
//! teardown → store, with adaptive rounds and `--resume`.

pub mod progress;
mod single;

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::analysis::{all_decisive, compare_series};
use crate::experiment::{plan_rounds, Experiment, FsKind, PlannedRun};
use crate::inspect::environment;
use crate::record::{RunRecord, RunStatus};
use crate::store::{NewExperiment, Store, VariantRow, WorkloadRow};
use crate::testbed::DeviceOptIn;
use crate::workload::{self, process};
pub use progress::{Observer, Silent};

/// How to run an experiment (what the command line adds to the file).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Continue the newest unfinished experiment with the same name and file.
    pub resume: bool,
    /// Use this device instead of loop-mounted images (destroys its data).
    pub device: Option<DeviceOptIn>,
    /// Overrides the experiment's work directory.
    pub workdir: Option<PathBuf>,
}

/// What happened.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub experiment_id: i64,
    pub runs_ok: usize,
    pub runs_failed: usize,
    /// Runs skipped because `--resume` found them already done.
    pub runs_skipped: usize,
    pub rounds: usize,
    pub interrupted: bool,
}

/// Error text when provisioning needs privileges fslab does not have.
pub const NEEDS_ROOT: &str = "fslab needs root to create loop devices, run mkfs, mount filesystems and set \
cgroup throttles (it only touches images it creates under its work directory). Run it as root, e.g. `sudo fslab …`.";

/// Fail early, with a clear message, when not root and root is needed.
pub fn check_privileges(exp: &Experiment) -> Result<()> {
    let needs_root = exp.variants.iter().any(|v| !matches!(v.fs, FsKind::Dir(_)));
    if needs_root && !nix::unistd::geteuid().is_root() {
        bail!(NEEDS_ROOT);
    }
    Ok(())
}

/// Run `exp`, writing every run to `store` as soon as it ends.
pub fn run(exp: &Experiment, store: &mut Store, opts: &RunOptions, observer: &mut dyn Observer) -> Result<RunSummary> {
    check_privileges(exp)?;
    let mut exp = exp.clone();
    if let Some(dir) = &opts.workdir {
        exp.workdir = dir.clone();
    }
    let exp = &exp;

    let mut workloads = Vec::new();
    for config in &exp.workloads {
        let mut w = workload::build(config, exp.seed)?;
        observer.message(&format!("preparing inputs for workload `{}`", config.label));
        w.prepare_inputs(&exp.cache_dir())
            .with_context(|| format!("preparing inputs of workload `{}`", config.label))?;
        workloads.push(w);
    }

    let diagnosis = diagnose(exp);
    for line in diagnosis.get("hostile").and_then(|h| h.as_array()).into_iter().flatten() {
        observer.message(&format!("warning: {}", line.as_str().unwrap_or_default()));
    }

    let resumed = if opts.resume { store.find_unfinished(&exp.name, &exp.spec_hash)? } else { None };
    let experiment_id = match resumed {
        Some(id) => {
            observer.message(&format!("resuming experiment {id}"));
            store.set_experiment_status(id, "running")?;
            id
        }
        None => store.create_experiment(&new_experiment(exp, diagnosis)?)?,
    };
    let done: HashSet<usize> =
        store.runs(experiment_id)?.into_iter().filter(|r| r.status == RunStatus::Ok).map(|r| r.seq).collect();

    // Sequential looks for `{ min, max }`: the boundaries keep the error
    // rates at every look (stats::sequential).
    let cfg = crate::analysis::compare_config(exp);
    if exp.max_rounds() > exp.min_rounds() {
        for line in crate::analysis::reach_notes(store, exp) {
            observer.message(&format!("note: {line}"));
        }
    }
    let mut summary =
        RunSummary { experiment_id, runs_ok: 0, runs_failed: 0, runs_skipped: 0, rounds: 0, interrupted: false };
    let per_round = exp.variants.len() * exp.workloads.len();
    observer.start(exp.min_rounds() * per_round, exp.max_rounds() * per_round);

    // Fixed rounds first (planned together so `grouped` order spans them),
    // then one adaptive round at a time until every comparison is decisive.
    let mut next_round = 0;
    let mut batch = plan_rounds(exp, 0, exp.min_rounds());
    loop {
        for planned in &batch {
            if process::cancelled() {
                summary.interrupted = true;
                break;
            }
            if done.contains(&planned.seq) {
                summary.runs_skipped += 1;
                observer.skipped(planned);
                continue;
            }
            let record = execute(exp, planned, workloads[planned.workload].as_mut(), opts, observer);
            store.record_run(experiment_id, &record)?;
            match record.status {
                Some(RunStatus::Ok) => summary.runs_ok += 1,
                _ => summary.runs_failed += 1,
            }
            observer.finished(planned, &record);
        }
        if summary.interrupted || process::cancelled() {
            summary.interrupted = true;
            break;
        }
        next_round += if next_round == 0 { exp.min_rounds() } else { 1 };
        summary.rounds = next_round;
        if next_round >= exp.max_rounds() {
            break;
        }
        // The design may only stop at its planned looks (every round unless max − min ≥ 50).
        let look = cfg.design().filter(|d| d.is_look(next_round)).map(|d| d.look_at(next_round));
        if let Some(look) = look {
            let rows = compare_series(&store.metric_series(experiment_id)?, &exp.baseline, &cfg);
            if look.index == 1 {
                for line in crate::analysis::reach_notes_from_rows(&rows, exp) {
                    observer.message(&format!("note: after {next_round} rounds, {line}"));
                }
            }
            let decisive_metrics =
                |label: &str| exp.workloads.iter().find(|w| w.label == label).and_then(|w| w.decisive_metrics());
            if all_decisive(&rows, decisive_metrics) {
                observer.message(&format!(
                    "every comparison is decisive after {next_round} rounds (look {} of {})",
                    look.index, look.count
                ));
                break;
            }
            observer.message(&format!(
                "round {}: some comparisons are inconclusive at look {} of {}, adding a round",
                next_round + 1,
                look.index,
                look.count
            ));
        }
        batch = plan_rounds(exp, next_round, 1);
        observer.extend(batch.len());
    }
    let status = if summary.interrupted { "interrupted" } else { "complete" };
    store.set_experiment_status(experiment_id, status)?;
    observer.done();
    Ok(summary)
}

/// One planned run, start to finish; never panics the experiment on failure.
fn execute(
    exp: &Experiment,
    planned: &PlannedRun,
    workload: &mut dyn workload::Workload,
    opts: &RunOptions,
    observer: &mut dyn Observer,
) -> RunRecord {
    let variant = &exp.variants[planned.variant];
    let config = &exp.workloads[planned.workload];
    observer.started(planned, &variant.name, &config.label);
    single::execute(exp, planned, variant, config, workload, opts)
}

/// Known-issue findings for this machine (and the work directory's
/// filesystem), stored with the experiment; benchmark-hostile ones are
/// printed before the first run.
fn diagnose(exp: &Experiment) -> serde_json::Value {
    let path = exp.workdir.ancestors().find(|p| p.exists()).map(std::path::Path::to_path_buf);
    let facts = match crate::inspect::Facts::gather(path.as_deref()) {
        Ok(f) => f,
        Err(e) => return serde_json::json!({ "error": format!("{e:#}") }),
    };
    let rules = match crate::inspect::builtin_rules() {
        Ok(r) => r,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    let report = crate::inspect::doctor(&facts, &rules);
    serde_json::json!({
        "facts": facts.summary_lines(),
        "findings": report.findings,
        "hostile": report.hostile_lines(),
    })
}

fn new_experiment(exp: &Experiment, diagnosis: serde_json::Value) -> Result<NewExperiment> {
    let mut environment = serde_json::to_value(environment::capture())?;
    environment["doctor"] = diagnosis;
    let plan = plan_rounds(exp, 0, exp.min_rounds());
    Ok(NewExperiment {
        name: exp.name.clone(),
        spec_path: exp.source_path.as_ref().map(|p| p.display().to_string()),
        spec_text: exp.source_text.clone(),
        spec_hash: exp.spec_hash.clone(),
        seed: exp.seed,
        plan_json: serde_json::to_string(&serde_json::json!({ "experiment": exp, "first_rounds": plan }))?,
        environment_json: serde_json::to_string(&environment)?,
        variants: exp
            .variants
            .iter()
            .enumerate()
            .map(|(i, v)| Ok(VariantRow { position: i, name: v.name.clone(), config_json: serde_json::to_string(v)? }))
            .collect::<Result<_>>()?,
        workloads: exp
            .workloads
            .iter()
            .enumerate()
            .map(|(i, w)| {
                Ok(WorkloadRow {
                    position: i,
                    label: w.label.clone(),
                    kind: w.kind().to_string(),
                    config_json: serde_json::to_string(w)?,
                })
            })
            .collect::<Result<_>>()?,
    })
}
