//! `fslab compare`: the variants of one experiment, or one variant across
//! experiments (`--experiments 3,7`, `--by TAG`; see [`fslab::history::across`]).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{offer, DbArg, DetailArgs, FormatArgs};
use fslab::exit;
use fslab::history::across::{self, Mixing};
use fslab::history::ExperimentSnapshot;
use fslab::output;
use fslab::report::data::comparison_for;
use fslab::report::documents::profile::ProfileReport;
use fslab::report::{CompareReport, Detail, Format};
use fslab::store::Store;

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format: the mmtests-style table, or the rows as JSON.")))]
pub struct CompareArgs {
    #[command(flatten)]
    db: DbArg,
    /// Experiment id (default: the newest); with --by, the experiment whose spec selects the others.
    #[arg(long)]
    experiment: Option<i64>,
    /// Compare one variant across these experiments (comma-separated ids; the first is the baseline).
    #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with_all = ["by", "experiment"])]
    experiments: Vec<i64>,
    /// Compare one variant across every experiment with the same spec, one column per value of this tag.
    #[arg(long, value_name = "TAG")]
    by: Option<String>,
    /// The variant compared across experiments (default: the first experiment's baseline).
    #[arg(long)]
    variant: Option<String>,
    /// Compare against this variant (default: the experiment's baseline); with --by, this tag value.
    #[arg(long)]
    baseline: Option<String>,
    /// Compare experiments whose machines, workload or variant configs differ (a warning names the keys).
    #[arg(long)]
    allow_mixed: bool,
    /// Compare experiments run on different machines (configs must still match).
    #[arg(long)]
    across_machines: bool,
    /// Equivalence band in percent (default: the experiment's, usually 2).
    #[arg(long, value_name = "PCT", value_parser = super::values::theta_percent)]
    theta: Option<f64>,
    /// Where the instructions went: per kernel function, both sides' counts, the change with its CI and a verdict
    /// (runs under TCG store a profile), the functions that moved most first.
    #[arg(long, conflicts_with_all = ["experiments", "by"])]
    profile: bool,
    /// Functions the text lists per comparison with --profile (JSON has all).
    #[arg(long, value_name = "N", default_value_t = fslab::report::documents::profile::DEFAULT_ROWS, requires = "profile")]
    profile_rows: usize,
    #[command(flatten)]
    format: FormatArgs,
    #[command(flatten)]
    detail: DetailArgs,
}

impl CompareArgs {
    /// The arguments that select this comparison again (for the way to
    /// `--full`): experiment `id`, or the experiments compared across.
    fn selection(&self, id: Option<i64>) -> Vec<String> {
        let mut args = Vec::new();
        let mut add = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                args.push(flag.to_string());
                args.push(value);
            }
        };
        add("--experiment", id.or(self.experiment).map(|id| id.to_string()));
        if !self.experiments.is_empty() {
            add("--experiments", Some(self.experiments.iter().map(i64::to_string).collect::<Vec<_>>().join(",")));
        }
        add("--by", self.by.clone());
        add("--variant", self.variant.clone());
        add("--baseline", self.baseline.clone());
        add("--theta", self.theta.map(|t| t.to_string()));
        for (set, flag) in [(self.allow_mixed, "--allow-mixed"), (self.across_machines, "--across-machines")] {
            if set {
                args.push(flag.to_string());
            }
        }
        args
    }
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let format = args.format.chosen();
    if !args.experiments.is_empty() || args.by.is_some() {
        return compare_experiments(&store, &args, format);
    }
    if args.variant.is_some() || args.allow_mixed || args.across_machines {
        return Err(exit::usage(anyhow::anyhow!(
            "--variant, --allow-mixed and --across-machines compare across experiments: add --experiments A,B or --by TAG"
        )));
    }
    let id = super::experiment_id(&store, &args.db.db, args.experiment)?;
    if args.profile {
        print_profile(&store, id, &args, format)?;
        return Ok(ExitCode::SUCCESS);
    }
    let selection = args.selection(Some(id));
    let detail = args.detail.detail(&args.db, &selection, Some(&selection));
    print_comparison(&store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0), format, detail)?;
    if let Some(line) = campaign_status_line(&store, id)? {
        output::diagnostic(&line);
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the experiment's campaign stands, for experiments run as shards
/// (`None` otherwise): a comparison of an unfinished campaign is partial.
pub fn campaign_status_line(store: &Store, id: i64) -> Result<Option<String>> {
    Ok(store.campaign_status(id)?.map(|c| {
        let line = c.describe();
        if c.is_complete() {
            line
        } else {
            format!("{line} (the comparison covers the shards stored so far)")
        }
    }))
}

/// `--experiments A,B,…` / `--by TAG`.
fn compare_experiments(store: &Store, args: &CompareArgs, format: Format) -> Result<ExitCode> {
    if args.experiments.len() == 1 {
        return Err(exit::usage(anyhow::anyhow!("--experiments needs at least two ids (e.g. --experiments 3,7)")));
    }
    let theta = args.theta.map(|t| t / 100.0);
    let mixing = Mixing { allow_mixed: args.allow_mixed, across_machines: args.across_machines };
    let all;
    let snaps: Vec<ExperimentSnapshot>;
    let groups = match &args.by {
        None => {
            snaps = args.experiments.iter().map(|&id| ExperimentSnapshot::load(store, id)).collect::<Result<_>>()?;
            across::by_experiment(&snaps)
        }
        Some(tag) => {
            let id = super::experiment_id(store, &args.db.db, args.experiment)?;
            let anchor = ExperimentSnapshot::load(store, id)?;
            all = ExperimentSnapshot::load_all(store)?;
            let (groups, untagged) =
                across::by_tag(&all, &anchor, tag, args.baseline.as_deref()).map_err(exit::usage)?;
            if untagged > 0 {
                output::diagnostic(&format!(
                    "{untagged} experiments with this spec have no `{tag}` tag and are left out"
                ));
            }
            groups
        }
    };
    let result = across::compare_across(&groups, args.variant.as_deref(), args.by.as_deref(), theta, mixing)
        .map_err(exit::usage)?;
    for line in &result.mixed {
        output::diagnostic(&format!("warning: mixed: {line}"));
    }
    if format == Format::Json {
        output::print(&fslab::report::json::pretty(&result)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let first = groups[0].1[0];
    let mut runs = Vec::new();
    for (g, members) in &groups {
        for s in members {
            runs.extend(fslab::history::relabel_runs(store.runs(s.experiment.id)?, &result.variant, &g.label));
        }
    }
    let name = format!(
        "variant {} across {}",
        result.variant,
        groups.iter().map(|(g, m)| format!("{} ({} exp.)", g.label, m.len())).collect::<Vec<_>>().join(", ")
    );
    // Each column's places, so columns from different places are marked too.
    let mut places = fslab::report::places::Places::default();
    for (g, members) in &groups {
        for s in members {
            for (variant, place) in store.variant_places(s.experiment.id)? {
                let column = places.variants.entry(g.label.clone()).or_default();
                if variant == result.variant && !column.contains(&place) {
                    column.push(place);
                }
            }
        }
    }
    let report = CompareReport {
        experiment_id: first.experiment.id,
        experiment_name: &name,
        comparison: &result.data,
        runs: &runs,
        hostile: vec![],
        places,
        // `fslab report` shows one experiment; this spans several.
        detail: args.detail.detail(&args.db, &args.selection(None), None),
    };
    output::print(&format.exporter().comparison(&report)?)?;
    Ok(ExitCode::SUCCESS)
}

/// `--profile`: the differential profiles of experiment `id`, against the
/// same baseline and with the same α, θ and design as its comparison.
fn print_profile(store: &Store, id: i64, args: &CompareArgs, format: Format) -> Result<()> {
    let experiment = store.experiment(id)?;
    let data = comparison_for(store, id, args.baseline.as_deref(), args.theta.map(|t| t / 100.0))?;
    let mut cfg = fslab::analysis::compare_config_from_spec(&experiment.plan.experiment);
    cfg.theta = data.theta;
    let runs = fslab::analysis::profile::load(store, id)?;
    let doc = ProfileReport {
        experiment_id: id,
        experiment_name: experiment.name.clone(),
        comparisons: fslab::analysis::profile::compare_profiles(&runs, &data.baseline, &cfg),
        rows: args.profile_rows,
    };
    output::print(&fslab::report::render(format, &doc)?)?;
    Ok(())
}

/// Print the comparison of experiment `id` in `format`, its text in `detail`.
pub fn print_comparison(
    store: &Store,
    id: i64,
    baseline: Option<&str>,
    theta: Option<f64>,
    format: Format,
    detail: Detail,
) -> Result<()> {
    let experiment = store.experiment(id)?;
    let data = comparison_for(store, id, baseline, theta)?;
    let runs = store.runs(id)?;
    let hostile = experiment.environment.doctor.as_ref().map(|d| d.hostile.clone()).unwrap_or_default();
    let places = fslab::report::places::Places::load(store, id, &experiment.environment)?;
    let report = CompareReport {
        experiment_id: id,
        experiment_name: &experiment.name,
        comparison: &data,
        runs: &runs,
        hostile,
        places,
        detail,
    };
    output::print(&format.exporter().comparison(&report)?)?;
    Ok(())
}
