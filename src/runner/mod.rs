//! Runs one experiment: plan → for each run provision, prepare, measure,
//! teardown → store, with adaptive rounds and `--resume`.

pub mod fleet;
pub mod guest;
mod monitors;
pub mod owner;
mod place;
mod preflight;
pub mod progress;
mod run_plan_iter;
mod single;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::analysis::{adaptive_step, compare_config, reach_notes, AdaptiveStep};
use crate::experiment::Experiment;
use crate::inspect::environment;
use crate::record::RunStatus;
use crate::store::{spool, NewExperiment, Store, VariantRow, WorkloadRow};
use crate::stored::{ExperimentStatus, StoredDoctor, StoredEnvironment, StoredFinding, StoredPlan, VariantKernel};
use crate::sys::signals;
use crate::testbed::DeviceOptIn;
use owner::Resume;
pub use preflight::{check_privileges, NEEDS_ROOT};
pub use progress::{Observer, Silent};
pub use single::prepare_image;

/// How to run an experiment (what the command line adds to the file).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Continue the newest unfinished experiment with the same name and
    /// file; with none, stop (exit 2).
    pub resume: bool,
    /// Like `resume`, but start the experiment when there is nothing to resume.
    pub resume_or_start: bool,
    /// Accept a system directory (`/`, `/usr`, a home directory, …) as work
    /// directory or `dir:` testbed.
    pub allow_system_dir: bool,
    /// Use this device instead of loop-mounted images (destroys its data).
    pub device: Option<DeviceOptIn>,
    /// Overrides the experiment's work directory.
    pub workdir: Option<PathBuf>,
    /// `--tag key=value` labels recorded on the experiment (with the automatic ones).
    pub tags: Vec<(String, String)>,
    /// Run only this shard's slice, in its campaign's shared experiment.
    pub campaign: Option<fleet::CampaignShard>,
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

/// What `fslab run --dry-run` checks of a real run's preflight without
/// building, booting or writing anything: system directories, the tools
/// the testbeds need, FUSE for media models, and what kernel variants' VMs
/// need. (Kernels are resolved when the file is read; `--baseline` and
/// `--device` by the caller.)
pub fn dry_run_checks(exp: &Experiment, opts: &RunOptions) -> Result<()> {
    preflight::check_system_dirs(exp, opts)?;
    preflight::check_trusted_dirs(exp, false)?;
    preflight::check_tools(exp, opts)?;
    preflight::check_media(exp)?;
    place::check_vm_tools(exp)
}

/// The tag key of a kernel variant's release: `kernel.<variant>`, with the
/// characters a tag key cannot hold (`=`, capitals, spaces) spelled `-` and
/// lowercase, so a variant named `optimize_scan=0` does not stop the run.
fn kernel_tag_key(variant: &str) -> String {
    let name: String = variant
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.') { c } else { '-' })
        .collect();
    let mut key = format!("kernel.{name}");
    key.truncate(64);
    key
}

/// Run `exp`, writing every run to `store` as soon as it ends.
pub fn run(exp: &Experiment, store: &mut Store, opts: &RunOptions, observer: &mut dyn Observer) -> Result<RunSummary> {
    let mut exp = exp.clone();
    if let Some(dir) = &opts.workdir {
        exp.workdir = dir.clone();
    }
    let exp = &exp;
    preflight::check_privileges(exp)?;
    preflight::check_system_dirs(exp, opts)?;
    preflight::check_trusted_dirs(exp, true)?;
    preflight::check_tools(exp, opts)?;
    preflight::check_media(exp)?;
    place::check_vm_tools(exp)?;
    let resume = match (opts.resume_or_start, opts.resume) {
        (true, _) => Resume::OrStart,
        (false, true) => Resume::Required,
        (false, false) => Resume::No,
    };
    let shard = opts.campaign.as_ref().map(|c| c.shard);
    fleet::set_context(store, exp, opts.device.as_ref().map(|d| d.path.as_path()), shard);
    let resumed = if shard.is_some() { None } else { owner::resumable(store, &exp.name, &exp.spec_hash, resume)? };
    // Claimed before anything is prepared when the experiment (or the
    // campaign) exists already; a new one right after it is created.
    let known = match (&opts.campaign, resumed) {
        (Some(c), _) => store.find_campaign(&c.campaign)?,
        (None, id) => id,
    };
    let mut lease = known.map(|id| claim_lease(store, exp, opts, id, observer)).transpose()?;
    preflight::clean_stale(exp, observer);

    let mut workloads = Vec::new();
    for config in &exp.workloads {
        signals::check_cancelled()?;
        let mut w = config.build(exp.seed);
        observer.message(&format!("preparing inputs for workload `{}`", config.label));
        w.prepare_inputs(&exp.cache_dir())
            .with_context(|| format!("preparing inputs of workload `{}`", config.label))?;
        workloads.push(w);
    }
    preflight::check_space(exp, opts, &workloads, observer)?;
    let mut vms = place::KernelVms::prepare(exp)?;
    if exp.variants.iter().any(|v| v.kernel.is_some()) {
        // The cache's prune reads every store that used it (without the
        // password a URL may hold: prune asks the server as the user can).
        let location = match store.path() {
            Some(file) => std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()).display().to_string(),
            None => store.location().replace(":***@", "@"),
        };
        crate::kernel::prune::record_store(&exp.kernel_cache, &location);
    }

    let diagnosis = diagnose(exp);
    for line in &diagnosis.hostile {
        observer.message(&format!("warning: {line}"));
    }

    let experiment_id = match (&opts.campaign, resumed) {
        (Some(c), _) => fleet::join(store, c, &new_experiment(exp, diagnosis, vms.environment(exp))?, resume)?,
        (None, Some(id)) => {
            observer.message(&format!("resuming experiment {id}"));
            store.set_experiment_status(id, ExperimentStatus::Running)?;
            id
        }
        (None, None) => store.create_experiment(&new_experiment(exp, diagnosis, vms.environment(exp))?)?,
    };
    if lease.is_none() {
        lease = Some(claim_lease(store, exp, opts, experiment_id, observer)?);
    }
    let _lease = lease;
    let running = owner::register(store, experiment_id, &exp.workdir);
    running.sharing().iter().for_each(|line| observer.message(&format!("warning: {line}")));
    // Runs a database outage left in the spool are stored before any is measured.
    let experiment_uuid = store.experiment(experiment_id)?.uuid;
    for line in store.store_spooled(&exp.workdir, experiment_id, &experiment_uuid)? {
        observer.message(&line);
    }
    // `kernel` is the host's release; each kernel variant's own is `kernel.<variant>`.
    let mut tags = opts.tags.clone();
    for v in &exp.variants {
        if let Some(k) = &v.kernel {
            tags.push((kernel_tag_key(&v.name), k.release.clone()));
        }
    }
    store.tag_experiment(experiment_id, &tags, &exp.workdir)?;
    let done: HashSet<usize> =
        store.runs(experiment_id)?.into_iter().filter(|r| r.status == RunStatus::Ok).map(|r| r.seq).collect();

    // `{ min, max }` is a group-sequential design (analysis::adaptive_step).
    let cfg = compare_config(exp);
    reach_notes(store, exp).iter().for_each(|line| observer.message(line));
    let mut summary =
        RunSummary { experiment_id, runs_ok: 0, runs_failed: 0, runs_skipped: 0, rounds: 0, interrupted: false };
    observer.start(fleet::runs_in(exp, shard, 0, exp.min_rounds()), fleet::runs_in(exp, shard, 0, exp.max_rounds()));

    // Fixed rounds first (planned together so `grouped` order spans them),
    // then one adaptive round at a time until every comparison is decisive.
    let mut next_round = 0;
    let (mut first, mut count) = (0, exp.min_rounds());
    loop {
        for planned in fleet::slice(exp, shard, run_plan_iter::planned(exp, first, count)) {
            let planned = &planned;
            if signals::cancelled() {
                summary.interrupted = true;
                break;
            }
            if done.contains(&planned.seq) {
                summary.runs_skipped += 1;
                observer.skipped(planned);
                continue;
            }
            let variant = &exp.variants[planned.variant];
            observer.started(planned, &variant.name, &exp.workloads[planned.workload].label);
            let record = vms.execute(exp, planned, workloads[planned.workload].as_mut(), opts, observer);
            record_or_spool(store, exp, experiment_id, &experiment_uuid, &record, observer)?;
            match record.status {
                Some(RunStatus::Ok) => summary.runs_ok += 1,
                _ => summary.runs_failed += 1,
            }
            observer.finished(planned, &record);
        }
        if summary.interrupted || signals::cancelled() {
            summary.interrupted = true;
            break;
        }
        next_round += count;
        summary.rounds = next_round;
        if next_round >= exp.max_rounds() {
            break;
        }
        let deciding = || -> Result<crate::analysis::Deciding> {
            Ok(crate::analysis::Deciding {
                series: fleet::deciding_series(store, experiment_id)?,
                emulated_variants: crate::analysis::emulated_variants(store, experiment_id)?,
            })
        };
        match adaptive_step(exp, &cfg, next_round, deciding)? {
            AdaptiveStep::Stop(line) => {
                observer.message(&line);
                break;
            }
            AdaptiveStep::Continue(lines) => lines.iter().for_each(|line| observer.message(line)),
        }
        let Some(rounds) = fleet::next_rounds(exp, shard, next_round) else { break };
        (first, count) = (next_round, rounds);
        observer.extend(fleet::runs_in(exp, shard, first, count));
    }
    vms.shut_down_all(observer);
    let status = if summary.interrupted { ExperimentStatus::Interrupted } else { ExperimentStatus::Complete };
    store.set_experiment_status(experiment_id, status)?;
    observer.done();
    Ok(summary)
}

/// Stores `record`; when the database stays unreachable past the retry
/// window, keeps it in the work directory's spool (said on stderr) for
/// `--resume` to store, and fails.
fn record_or_spool(
    store: &mut Store,
    exp: &Experiment,
    experiment_id: i64,
    experiment_uuid: &str,
    record: &crate::record::RunRecord,
    observer: &mut dyn Observer,
) -> Result<()> {
    let run_uuid = uuid::Uuid::new_v4().to_string();
    let context = store.recording_context().clone();
    let Err(e) = store.record_run_as(experiment_id, record, &context, &run_uuid) else { return Ok(()) };
    if !spool::is_connection_lost(&e) {
        return Err(e);
    }
    let spooled = spool::SpooledRun {
        store: store.location(),
        experiment_uuid: experiment_uuid.to_string(),
        run_uuid,
        shard: context.shard,
        record: record.clone(),
    };
    match spool::write(&exp.workdir, &spooled) {
        Ok(file) => observer.message(&format!(
            "the database is unreachable: run {} is kept in {}; `fslab run --resume` stores it when the \
             database is back",
            record.seq + 1,
            file.display()
        )),
        Err(se) => {
            observer.message(&format!("warning: could not keep run {} in the spool either: {se:#}", record.seq + 1))
        }
    }
    Err(e)
}

/// Claims experiment `id` (or this process's shard of it) before any of
/// it is measured; a second process for the same work is refused (exit 2).
fn claim_lease(
    store: &mut Store,
    exp: &Experiment,
    opts: &RunOptions,
    id: i64,
    observer: &mut dyn Observer,
) -> Result<owner::Lease> {
    let (key, what) = match &opts.campaign {
        Some(c) => (
            owner::LeaseKey { experiment_id: id, shard: Some(c.shard.index) },
            format!("shard {} of campaign {} (experiment {id})", c.shard, c.campaign),
        ),
        None => (owner::LeaseKey { experiment_id: id, shard: None }, format!("experiment {id} (`{}`)", exp.name)),
    };
    owner::claim(store, key, &exp.workdir, &what, &mut |line| observer.message(&line))
}

/// Most planned runs stored in the experiment's plan JSON: the plan is
/// deterministic (resume recomputes it), so a huge one is not written out.
const STORED_PLAN_RUNS: usize = 10_000;

/// Known-issue findings for this machine (and the work directory's
/// filesystem), stored with the experiment; benchmark-hostile ones are
/// printed before the first run.
fn diagnose(exp: &Experiment) -> StoredDoctor {
    let path = exp.workdir.ancestors().find(|p| p.exists()).map(std::path::Path::to_path_buf);
    let facts = match crate::inspect::Facts::gather(path.as_deref()) {
        Ok(f) => f,
        Err(e) => return StoredDoctor { error: Some(format!("{e:#}")), ..StoredDoctor::default() },
    };
    let rules = match crate::inspect::builtin_rules() {
        Ok(r) => r,
        Err(e) => return StoredDoctor { error: Some(e.to_string()), ..StoredDoctor::default() },
    };
    let report = crate::inspect::doctor(&facts, &rules);
    StoredDoctor {
        facts: facts.summary_lines(),
        findings: report.findings.iter().map(StoredFinding::from).collect(),
        hostile: report.hostile_lines(),
        error: None,
    }
}

fn new_experiment(
    exp: &Experiment,
    doctor: StoredDoctor,
    kernels: BTreeMap<String, VariantKernel>,
) -> Result<NewExperiment> {
    let environment = StoredEnvironment {
        host: environment::capture(),
        error: None,
        doctor: Some(doctor),
        kernels,
        owner: Some(crate::sys::identity::ProcessIdentity::current().clone()),
    };
    let planned = exp.min_rounds() * exp.variants.len() * exp.workloads.len();
    let first_rounds = run_plan_iter::planned(exp, 0, exp.min_rounds())
        .take(STORED_PLAN_RUNS)
        .map(serde_json::to_value)
        .collect::<serde_json::Result<_>>()?;
    let plan = StoredPlan {
        experiment: serde_json::from_value(serde_json::to_value(exp)?).context("storing the experiment's plan")?,
        first_rounds,
        first_rounds_total: Some(planned),
    };
    Ok(NewExperiment {
        name: exp.name.clone(),
        spec_path: exp.source_path.as_ref().map(|p| p.display().to_string()),
        spec_text: exp.source_text.clone(),
        spec_hash: exp.spec_hash.clone(),
        seed: exp.seed,
        plan,
        environment,
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

#[cfg(test)]
mod tests {
    /// Every variant name makes a tag key `store::parse_tag` accepts.
    #[test]
    fn kernel_variant_names_make_valid_tag_keys() {
        for (name, want) in
            [("6.1", "kernel.6.1"), ("optimize_scan=0", "kernel.optimize_scan-0"), ("Host A", "kernel.host-a")]
        {
            let key = super::kernel_tag_key(name);
            assert_eq!(key, want);
            crate::store::parse_tag(&format!("{key}=6.1.0-1-cloud-amd64")).unwrap();
        }
        let long = super::kernel_tag_key(&"x".repeat(100));
        assert_eq!(long.len(), 64);
        crate::store::parse_tag(&format!("{long}=r")).unwrap();
    }
}
