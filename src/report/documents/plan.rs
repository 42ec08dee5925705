//! `fslab plan`: runs per variant needed to detect a change.

use serde::Serialize;

use crate::analysis::{render_plan, PlanLine};
use crate::experiment::run_plan::DRY_RUN_LINES;
use crate::report::Document;

/// The plan of each decisive metric; its JSON is the array of lines.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RunPlan {
    pub lines: Vec<PlanLine>,
    /// The text's first line: the experiment, its design and the noise's source.
    #[serde(skip)]
    pub heading: String,
    /// The power the plan is for (0.8).
    #[serde(skip)]
    pub power: f64,
}

impl Document for RunPlan {
    fn what(&self) -> &'static str {
        "a plan"
    }

    fn text(&self) -> String {
        let power = self.power * 100.0;
        format!(
            "{}\n\n{}\nfixed runs: runs per variant a fixed-n experiment needs; power@max: chance this file's design ends \
             `regressed` at that change; detects@max: smallest change it finds with {power:.0}% power; no-change@: runs \
             per variant for an {power:.0}% chance of `no-change` when nothing changed.\n",
            self.heading,
            render_plan(&self.lines, self.power)
        )
    }
}

/// `fslab run --dry-run`: what a run of the file would do, checked.
#[derive(Debug, Serialize)]
pub struct DryRun {
    pub experiment: String,
    pub workdir: std::path::PathBuf,
    pub baseline: String,
    pub min_rounds: usize,
    pub max_rounds: usize,
    /// Runs in the first `min_rounds` rounds.
    pub total_runs: usize,
    /// The variants, in the file's order.
    pub variants: Vec<PlannedVariant>,
    /// The first of them (at most [`DRY_RUN_LINES`]), in the order they
    /// run: a plan of millions of runs is listed, not held, in full.
    pub runs: Vec<DryRunRun>,
    /// `--device`: the checked spare block device every block testbed is formatted on.
    pub device: Option<std::path::PathBuf>,
    /// `--shard`: which runs of the campaign this machine takes.
    pub shard: Option<String>,
    /// Each built-kernel variant's build: cached, incremental or cold, with
    /// the figures this machine recorded.
    pub kernel_builds: Vec<PlannedBuild>,
    /// The plan as the text shows it (variants, kernels, workloads, order).
    #[serde(skip)]
    pub described: String,
}

#[derive(Debug, Serialize)]
pub struct PlannedVariant {
    pub name: String,
    /// The medium its testbed's image behaves like (`device = { … }`).
    pub device: Option<PlannedDevice>,
}

/// A variant's `device`: the whole model (`name`, `params`), and what the
/// file changed from the preset it names.
#[derive(Debug, Serialize)]
pub struct PlannedDevice {
    #[serde(flatten)]
    pub spec: crate::media::DeviceSpec,
    /// Whether `name` is a preset (else a model given in full).
    pub preset: bool,
    /// The parameters that differ from the preset (every one of a model
    /// given in full), written as in the file.
    pub changed: std::collections::BTreeMap<&'static str, String>,
    /// As the text says it.
    pub said: String,
}

impl PlannedDevice {
    pub fn new(spec: &crate::media::DeviceSpec) -> Self {
        PlannedDevice {
            spec: spec.clone(),
            preset: spec.is_preset(),
            changed: spec.changed().into_iter().collect(),
            said: crate::experiment::run_plan::describe_device(spec),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PlannedBuild {
    pub variant: String,
    #[serde(flatten)]
    pub outlook: crate::kernel::outlook::BuildOutlook,
    /// The outlook as the text says it.
    pub said: String,
}

#[derive(Debug, Serialize)]
pub struct DryRunRun {
    pub seq: usize,
    pub round: usize,
    pub variant: String,
    pub workload: String,
}

impl DryRun {
    pub fn new(exp: &crate::experiment::Experiment) -> Self {
        // One round at a time, so a huge plan costs nothing to list.
        let runs = (0..exp.min_rounds())
            .flat_map(|round| crate::experiment::run_plan::plan_rounds(exp, round, 1))
            .take(DRY_RUN_LINES)
            .map(|r| DryRunRun {
                seq: r.seq,
                round: r.round,
                variant: exp.variants[r.variant].name.clone(),
                workload: exp.workloads[r.workload].label.clone(),
            })
            .collect();
        let builds = crate::experiment::run_plan::kernel_builds(exp);
        DryRun {
            experiment: exp.name.clone(),
            workdir: exp.workdir.clone(),
            baseline: exp.baseline.clone(),
            min_rounds: exp.min_rounds(),
            max_rounds: exp.max_rounds(),
            total_runs: exp.min_rounds() * exp.variants.len() * exp.workloads.len(),
            variants: exp
                .variants
                .iter()
                .map(|v| PlannedVariant {
                    name: v.name.clone(),
                    device: v.testbed.device.as_ref().map(PlannedDevice::new),
                })
                .collect(),
            runs,
            device: None,
            shard: None,
            described: crate::experiment::run_plan::describe(exp, &builds),
            kernel_builds: builds
                .into_iter()
                .map(|(i, outlook)| PlannedBuild {
                    variant: exp.variants[i].name.clone(),
                    said: outlook.describe(),
                    outlook,
                })
                .collect(),
        }
    }
}

impl Document for DryRun {
    fn what(&self) -> &'static str {
        "a dry run"
    }

    fn text(&self) -> String {
        let mut out = self.described.clone();
        if let Some(d) = &self.device {
            out.push_str(&format!(
                "\ndevice: {} (checked: a spare block device; every block testbed is formatted on it)\n",
                d.display()
            ));
        }
        if let Some(s) = &self.shard {
            out.push_str(&format!("{s}\n"));
        }
        out
    }
}
