//! `fslab compare --experiments A,B` / `--by TAG`: one variant compared
//! across experiments with the same statistics and verdicts as within one
//! (the mmtests way of comparing kernels run on different boots). Each
//! group (an experiment, or every experiment with one value of a tag) is a
//! column; the first is the baseline.

use crate::stored::ExperimentStatus;
use anyhow::{bail, Result};
use serde::Serialize;

use super::{differences, DiffKind, Difference, ExperimentSnapshot};
use crate::analysis::{compare_series, ComparisonRow, Roles};
use crate::report::data::ComparisonData;
use crate::stats::CompareConfig;
use crate::store::MetricSeries;

/// One column of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Group {
    /// `#3` for an experiment, `kernel=6.18.4` for a tag value.
    pub label: String,
    pub experiments: Vec<i64>,
    /// Those of `experiments` that were interrupted (stopped, or their fslab
    /// killed) before they finished their plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<i64>,
}

impl Group {
    fn of(label: String, s: &ExperimentSnapshot) -> Group {
        Group { label, experiments: vec![s.experiment.id], interrupted: Vec::new() }.with(s)
    }

    fn with(mut self, s: &ExperimentSnapshot) -> Group {
        self.add(s);
        self
    }

    fn add(&mut self, s: &ExperimentSnapshot) {
        if !self.experiments.contains(&s.experiment.id) {
            self.experiments.push(s.experiment.id);
        }
        if s.experiment.status == ExperimentStatus::Interrupted {
            self.interrupted.push(s.experiment.id);
        }
    }
}

/// What may differ between the groups' experiments.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mixing {
    /// Different workload or variant configs (and machines).
    pub allow_mixed: bool,
    /// Different machines only.
    pub across_machines: bool,
}

/// The comparison, ready for the exporters, plus what it is across.
#[derive(Clone, Debug, Serialize)]
pub struct Across {
    pub variant: String,
    pub by: Option<String>,
    pub groups: Vec<Group>,
    /// Differences that were allowed (`--allow-mixed`, `--across-machines`),
    /// as `#7 vs #3: key: a vs b`.
    pub mixed: Vec<String>,
    pub theta: f64,
    pub alpha: f64,
    pub rows: Vec<ComparisonRow>,
    #[serde(skip)]
    pub data: ComparisonData,
}

/// A group with the experiments it pools.
pub type Members<'a> = (Group, Vec<&'a ExperimentSnapshot>);

/// Groups of `--experiments` (one experiment each, in the order given).
pub fn by_experiment(snaps: &[ExperimentSnapshot]) -> Vec<Members<'_>> {
    snaps.iter().map(|s| (Group::of(format!("#{}", s.experiment.id), s), vec![s])).collect()
}

/// Groups of `--by TAG`: every experiment of `all` with `anchor`'s spec
/// hash, grouped by its (first) value of `tag`, groups in order of their
/// first experiment; `baseline` (a tag value) is moved first. Experiments
/// without the tag are left out and counted in the second return value.
pub fn by_tag<'a>(
    all: &'a [ExperimentSnapshot],
    anchor: &ExperimentSnapshot,
    tag: &str,
    baseline: Option<&str>,
) -> Result<(Vec<Members<'a>>, usize)> {
    let mut groups: Vec<(Group, Vec<&ExperimentSnapshot>)> = Vec::new();
    let mut untagged = 0;
    for s in all.iter().filter(|s| s.experiment.spec_hash == anchor.experiment.spec_hash) {
        let Some(value) = s.tag(tag).first().map(|v| v.to_string()) else {
            untagged += 1;
            continue;
        };
        let label = format!("{tag}={value}");
        match groups.iter_mut().find(|(g, _)| g.label == label) {
            Some((g, members)) => {
                g.add(s);
                members.push(s);
            }
            None => groups.push((Group::of(label, s), vec![s])),
        }
    }
    if let Some(b) = baseline {
        let label = format!("{tag}={b}");
        let Some(pos) = groups.iter().position(|(g, _)| g.label == label) else {
            let have: Vec<&str> = groups.iter().map(|(g, _)| g.label.as_str()).collect();
            bail!(
                "no experiment with experiment {}'s spec is tagged {label} (there are: {})",
                anchor.experiment.id,
                have.join(", ")
            );
        };
        let g = groups.remove(pos);
        groups.insert(0, g);
    }
    if groups.len() < 2 {
        bail!(
            "`--by {tag}` needs two values of `{tag}` among the experiments with experiment {}'s spec; found {}",
            anchor.experiment.id,
            groups.len()
        );
    }
    Ok((groups, untagged))
}

/// Compares `variant` (default: the first experiment's baseline) across
/// `groups`; refuses differing keys unless `mixing` allows them, naming each.
pub fn compare_across(
    groups: &[Members],
    variant: Option<&str>,
    by: Option<&str>,
    theta: Option<f64>,
    mixing: Mixing,
) -> Result<Across> {
    let Some(first) = groups.first().and_then(|(_, m)| m.first()) else { bail!("nothing to compare") };
    let variant = variant.map(str::to_string).unwrap_or_else(|| first.baseline.clone());
    for (_, members) in groups {
        for s in members {
            if !s.has_variant(&variant) {
                let names: Vec<&str> = s.experiment.variants.iter().map(|v| v.name.as_str()).collect();
                bail!(
                    "experiment {} has no variant `{variant}` (it has: {}); choose one with --variant",
                    s.experiment.id,
                    names.join(", ")
                );
            }
        }
    }
    let mut mixed = Vec::new();
    let mut refused: Vec<(i64, Difference)> = Vec::new();
    for (_, members) in groups {
        for s in members.iter().filter(|s| s.experiment.id != first.experiment.id) {
            for d in differences(first, s, &variant, &[]) {
                let allowed = mixing.allow_mixed || (d.kind == DiffKind::Machine && mixing.across_machines);
                if allowed {
                    mixed.push(format!("#{} vs #{}: {d}", s.experiment.id, first.experiment.id));
                } else {
                    refused.push((s.experiment.id, d));
                }
            }
        }
    }
    if !refused.is_empty() {
        let lines: Vec<String> =
            refused.iter().map(|(id, d)| format!("  #{id} vs #{}: {d}", first.experiment.id)).collect();
        let machines = refused.iter().any(|(_, d)| d.kind == DiffKind::Machine);
        let specs = refused.iter().any(|(_, d)| d.kind != DiffKind::Machine);
        let hint = match (machines, specs) {
            (true, false) => "--across-machines (or --allow-mixed) compares them anyway",
            _ => "--allow-mixed compares them anyway",
        };
        bail!("the experiments are not comparable:\n{}\n{hint}", lines.join("\n"));
    }

    // One series per (workload, metric, unit, direction) of the first
    // experiment's variant, pooled per group, in the store's order.
    let mut series: Vec<MetricSeries> = Vec::new();
    for base in first.series.iter().filter(|s| s.variant == variant) {
        for (g, members) in groups {
            let mut values = Vec::new();
            for s in members {
                if let Some(x) = s.series.iter().find(|x| {
                    x.variant == variant
                        && x.workload == base.workload
                        && x.metric == base.metric
                        && x.unit == base.unit
                        && x.higher_is_better == base.higher_is_better
                }) {
                    values.extend_from_slice(&x.values);
                }
            }
            if !values.is_empty() {
                series.push(MetricSeries { variant: g.label.clone(), values, ..base.clone() });
            }
        }
    }
    let mut cfg = CompareConfig::default();
    if let Some(a) = first.alpha {
        cfg.alpha = a;
    }
    cfg.theta = theta.or(first.theta).unwrap_or(cfg.theta);
    let baseline = groups[0].0.label.clone();
    let rows = compare_series(&series, &baseline, &cfg, Roles { workloads: &first.configs, emulated_variants: &[] });
    let data = ComparisonData {
        baseline,
        theta: cfg.theta,
        alpha: cfg.alpha,
        variants: groups.iter().map(|(g, _)| g.label.clone()).collect(),
        rows: rows.clone(),
    };
    Ok(Across {
        variant,
        by: by.map(str::to_string),
        groups: groups.iter().map(|(g, _)| g.clone()).collect(),
        mixed,
        theta: cfg.theta,
        alpha: cfg.alpha,
        rows,
        data,
    })
}
