//! Results across experiments: what `fslab compare --experiments`, `fslab
//! history` and `fslab check` read from the store.
//!
//! An experiment is loaded once into an [`ExperimentSnapshot`] (its tags, machines,
//! resolved variant and workload configs, metric series). Two snapshots
//! are comparable for one workload × variant when the [`differences`]
//! between them are empty: same hardware (the kernel is what gets compared,
//! so it is left out), same resolved workload config, same resolved variant
//! config without its `kernel` key. The spec hash is not the key: it
//! covers comments, other variants and bisection's `{rev}` substitution.

pub mod across;
pub mod check;
pub mod render;

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::Value;

use crate::stored::ExperimentStatus;

use crate::experiment::WorkloadConfig;
use crate::inspect::machine::Machine;
use crate::stats::changepoint::{detect, ChangePoint, ChangePointConfig};
use crate::stats::history::HistoryPoint;
use crate::store::{MetricSeries, Store, StoredExperiment, StoredRun};

/// One stored experiment, read once, with what comparing it across
/// experiments needs.
#[derive(Clone, Debug)]
pub struct ExperimentSnapshot {
    pub experiment: StoredExperiment,
    /// The experiment's baseline variant (the plan's, else the first).
    pub baseline: String,
    pub alpha: Option<f64>,
    pub theta: Option<f64>,
    /// `(hardware hash, description)` of each machine its runs ran on.
    pub machines: Vec<(String, String)>,
    pub series: Vec<MetricSeries>,
    /// Parsed workload configs (for which metrics are decisive).
    configs: Vec<WorkloadConfig>,
}

impl ExperimentSnapshot {
    pub fn load(store: &Store, id: i64) -> Result<ExperimentSnapshot> {
        let experiment = store.experiment(id)?;
        let spec = &experiment.plan.experiment;
        let configs = match crate::experiment::stored_workloads(spec) {
            Some(w) => w,
            None => crate::experiment::parse(
                &experiment.spec_text,
                experiment.spec_path.as_deref().map(std::path::Path::new),
            )
            .map(|x| x.workloads)
            .unwrap_or_default(),
        };
        let baseline =
            spec.baseline.clone().or_else(|| experiment.variants.first().map(|v| v.name.clone())).unwrap_or_default();
        let (alpha, theta) = (spec.alpha, spec.theta);
        let mut machines: Vec<(String, String)> = store
            .machines(id)?
            .into_iter()
            .map(|m| (m.machine.hardware, describe_hardware(&m.machine.machine)))
            .collect();
        machines.sort();
        machines.dedup();
        Ok(ExperimentSnapshot {
            series: store.metric_series(id)?,
            experiment,
            baseline,
            alpha,
            theta,
            machines,
            configs,
        })
    }

    /// Every experiment of the store that is not still running, oldest first.
    pub fn load_all(store: &Store) -> Result<Vec<ExperimentSnapshot>> {
        let mut out = Vec::new();
        for e in store.list_experiments()? {
            if e.status.is_finished() {
                out.push(ExperimentSnapshot::load(store, e.id)?);
            }
        }
        Ok(out)
    }

    /// Does `metric` decide workload `label`? (Unknown workloads: every
    /// workload metric, no evidence.)
    pub fn is_decisive(&self, label: &str, metric: &str) -> bool {
        match self.configs.iter().find(|w| w.label == label) {
            Some(w) => w.is_decisive(metric),
            None => !crate::metric::is_evidence(metric),
        }
    }

    /// The values of workload × metric × variant (ok runs), with unit and direction.
    pub fn values(&self, workload: &str, metric: &str, variant: &str) -> Option<&MetricSeries> {
        self.series.iter().find(|s| s.workload == workload && s.metric == metric && s.variant == variant)
    }

    /// The values of a tag key, in order.
    pub fn tag(&self, key: &str) -> Vec<&str> {
        self.experiment.tags.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    pub fn has_variant(&self, name: &str) -> bool {
        self.experiment.variants.iter().any(|v| v.name == name)
    }

    pub fn has_workload(&self, label: &str) -> bool {
        self.experiment.workloads.iter().any(|w| w.label == label)
    }
}

/// A machine without its kernel, for people.
fn describe_hardware(m: &Machine) -> String {
    let mut parts = Vec::new();
    parts.extend(m.product_name.clone());
    parts.push(format!("{} × {}", m.cpu_model.as_deref().unwrap_or("unknown CPU"), m.cpus));
    parts.push(format!("{:.1} GiB", m.memory_bytes as f64 / (1u64 << 30) as f64));
    parts.extend(m.device_model.clone());
    format!("{} ({})", m.hostname, parts.join("; "))
}

/// What a difference is about: the machine, or what was run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffKind {
    Machine,
    Workload,
    Variant,
}

/// One key whose value differs between two experiments.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub kind: DiffKind,
    /// e.g. `machine`, `workload untar: params.files`, `variant ext4: testbed.mount_options`.
    pub key: String,
    pub left: String,
    pub right: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} vs {}", self.key, self.left, self.right)
    }
}

/// Most differing leaves named per config (the rest are summarised).
const MAX_LEAVES: usize = 8;

/// Why `b` is not comparable with `a` for `variant` (named in each) and the
/// `workloads` given (all of `a`'s when empty). Empty means comparable.
pub fn differences(
    a: &ExperimentSnapshot,
    b: &ExperimentSnapshot,
    variant: &str,
    workloads: &[&str],
) -> Vec<Difference> {
    let mut out = Vec::new();
    let hw = |s: &ExperimentSnapshot| s.machines.iter().map(|m| m.0.clone()).collect::<Vec<_>>();
    // Runs recorded without a machine (older stores) cannot be told apart.
    if !a.machines.is_empty() && !b.machines.is_empty() && hw(a) != hw(b) {
        let names = |s: &ExperimentSnapshot| s.machines.iter().map(|m| m.1.clone()).collect::<Vec<_>>().join(" + ");
        out.push(Difference { kind: DiffKind::Machine, key: "machine".into(), left: names(a), right: names(b) });
    }
    let labels: Vec<&str> = if workloads.is_empty() {
        a.experiment.workloads.iter().map(|w| w.label.as_str()).collect()
    } else {
        workloads.to_vec()
    };
    for label in labels {
        let find = |s: &ExperimentSnapshot| {
            s.experiment.workloads.iter().find(|w| w.label == label).map(|w| parse(&w.config_json))
        };
        config_diff(DiffKind::Workload, &format!("workload {label}"), find(a), find(b), &mut out);
    }
    let find = |s: &ExperimentSnapshot| {
        s.experiment.variants.iter().find(|v| v.name == variant).map(|v| {
            let mut c = parse(&v.config_json);
            // The kernel is what a cross-experiment comparison compares.
            if let Some(o) = c.as_object_mut() {
                o.remove("kernel");
            }
            c
        })
    };
    config_diff(DiffKind::Variant, &format!("variant {variant}"), find(a), find(b), &mut out);
    out
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

fn config_diff(kind: DiffKind, what: &str, a: Option<Value>, b: Option<Value>, out: &mut Vec<Difference>) {
    let show = |v: &Option<Value>| if v.is_some() { "present".to_string() } else { "absent".to_string() };
    match (&a, &b) {
        (Some(x), Some(y)) => {
            let mut leaves = Vec::new();
            leaf_diff("", x, y, &mut leaves);
            let extra = leaves.len().saturating_sub(MAX_LEAVES);
            for (path, l, r) in leaves.into_iter().take(MAX_LEAVES) {
                out.push(Difference { kind, key: format!("{what}: {path}"), left: l, right: r });
            }
            if extra > 0 {
                out.push(Difference {
                    kind,
                    key: format!("{what}: {extra} more keys"),
                    left: "…".into(),
                    right: "…".into(),
                });
            }
        }
        (None, None) => {}
        _ => out.push(Difference { kind, key: what.to_string(), left: show(&a), right: show(&b) }),
    }
}

fn leaf_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                leaf_diff(&p, x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), out);
            }
        }
        _ if a != b => {
            out.push((if path.is_empty() { "(whole)".into() } else { path.to_string() }, a.to_string(), b.to_string()))
        }
        _ => {}
    }
}

/// What [`history`] selects.
#[derive(Clone, Debug, Default)]
pub struct HistoryQuery {
    pub workload: String,
    pub metric: String,
    /// Default: the reference experiment's baseline.
    pub variant: Option<String>,
    /// One point per value of this tag, runs pooled.
    pub by: Option<String>,
    /// Keep experiments whose keys differ from the reference's.
    pub allow_mixed: bool,
    /// The series ends with this experiment (the reference); default the
    /// newest experiment that has the workload × metric.
    pub reference: Option<i64>,
    /// Leave the reference out of the points (the gate's history).
    pub exclude_reference: bool,
}

/// One point of a history.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesPoint {
    /// The (first) experiment of the point.
    pub experiment_id: i64,
    /// Every experiment pooled into the point (one unless `--by`).
    pub experiments: Vec<i64>,
    pub created_at: String,
    /// The `--by` tag's value.
    pub label: Option<String>,
    pub tags: BTreeMap<String, String>,
    #[serde(flatten)]
    pub point: HistoryPoint,
    /// Keys that differ from the reference (only with `allow_mixed`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mixed: Vec<String>,
    /// Those of `experiments` that were interrupted (stopped, or their
    /// fslab killed) before they finished their plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<i64>,
    #[serde(skip)]
    pub values: Vec<f64>,
}

/// A metric's series over experiments, with its change points.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    pub workload: String,
    pub metric: String,
    pub variant: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub reference: i64,
    pub by: Option<String>,
    pub config: ChangePointConfig,
    pub points: Vec<SeriesPoint>,
    pub change_points: Vec<ChangePoint>,
    /// Why experiments were left out ("3 experiments on another machine").
    pub left_out: Vec<String>,
}

/// The series of `q` over `experiments` (oldest first).
pub fn history(experiments: &[ExperimentSnapshot], q: &HistoryQuery) -> Result<History> {
    let (w, m) = (q.workload.as_str(), q.metric.as_str());
    let has_metric = |s: &ExperimentSnapshot| s.series.iter().any(|x| x.workload == w && x.metric == m);
    let reference = match q.reference {
        Some(id) => match experiments.iter().find(|s| s.experiment.id == id) {
            Some(s) => s,
            None => bail!("experiment {id} is not in the store (or is still running)"),
        },
        None => match experiments.iter().rev().find(|s| has_metric(s)) {
            Some(s) => s,
            None => bail!("no stored experiment has metric {w}/{m}"),
        },
    };
    let variant = q.variant.clone().unwrap_or_else(|| reference.baseline.clone());
    let Some(ref_series) = reference.values(w, m, &variant) else {
        bail!("experiment {} has no values of {w}/{m} for variant `{variant}`", reference.experiment.id);
    };
    let (unit, hib) = (ref_series.unit.clone(), ref_series.higher_is_better);

    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut kept: Vec<(&ExperimentSnapshot, Vec<String>)> = Vec::new();
    for s in experiments.iter().filter(|s| s.experiment.id <= reference.experiment.id) {
        if q.exclude_reference && s.experiment.id == reference.experiment.id {
            continue;
        }
        let Some(series) = s.values(w, m, &variant) else { continue };
        if series.unit != unit || series.higher_is_better != hib {
            *reasons.entry(format!("in another unit than {unit}")).or_default() += 1;
            continue;
        }
        let diffs = differences(reference, s, &variant, &[w]);
        if !diffs.is_empty() && !q.allow_mixed {
            let why = match diffs[0].kind {
                DiffKind::Machine => "on another machine",
                DiffKind::Workload => "with a different workload config",
                DiffKind::Variant => "with a different variant config",
            };
            *reasons.entry(why.to_string()).or_default() += 1;
            continue;
        }
        kept.push((s, diffs.iter().map(|d| d.key.clone()).collect()));
    }
    let mut points: Vec<SeriesPoint> = Vec::new();
    for (s, mixed) in kept {
        let values = s.values(w, m, &variant).map(|x| x.values.clone()).unwrap_or_default();
        let tags: BTreeMap<String, String> = s.experiment.tags.iter().cloned().collect();
        let interrupted: Vec<i64> =
            (s.experiment.status == ExperimentStatus::Interrupted).then_some(s.experiment.id).into_iter().collect();
        match &q.by {
            None => points.push(SeriesPoint {
                experiment_id: s.experiment.id,
                experiments: vec![s.experiment.id],
                created_at: s.experiment.created_at.clone(),
                label: None,
                tags,
                point: HistoryPoint::from_values(&values, hib),
                mixed,
                interrupted,
                values,
            }),
            Some(key) => {
                let Some(value) = s.tag(key).first().map(|v| v.to_string()) else {
                    *reasons.entry(format!("without a `{key}` tag")).or_default() += 1;
                    continue;
                };
                match points.iter_mut().find(|p| p.label.as_deref() == Some(value.as_str())) {
                    Some(p) => {
                        p.experiments.push(s.experiment.id);
                        p.values.extend(values);
                        p.point = HistoryPoint::from_values(&p.values, hib);
                        p.mixed.extend(mixed);
                        p.interrupted.extend(interrupted);
                    }
                    None => points.push(SeriesPoint {
                        experiment_id: s.experiment.id,
                        experiments: vec![s.experiment.id],
                        created_at: s.experiment.created_at.clone(),
                        label: Some(value),
                        tags,
                        point: HistoryPoint::from_values(&values, hib),
                        mixed,
                        interrupted,
                        values,
                    }),
                }
            }
        }
    }
    let config = ChangePointConfig::default();
    let means: Vec<f64> = points.iter().map(|p| p.point.mean).collect();
    let change_points = detect(&means, &config).change_points;
    let left_out =
        reasons.into_iter().map(|(why, n)| format!("{n} experiment{} {why}", if n == 1 { "" } else { "s" })).collect();
    Ok(History {
        workload: q.workload.clone(),
        metric: q.metric.clone(),
        variant,
        unit,
        higher_is_better: hib,
        reference: reference.experiment.id,
        by: q.by.clone(),
        config,
        points,
        change_points,
        left_out,
    })
}

/// `WORKLOAD/METRIC` split at the first `/` (metric names may hold more).
pub fn split_metric(text: &str) -> Result<(String, String)> {
    match text.split_once('/') {
        Some((w, m)) if !w.is_empty() && !m.is_empty() => Ok((w.to_string(), m.to_string())),
        _ => bail!("`{text}` is not WORKLOAD/METRIC (e.g. untar/elapsed)"),
    }
}

/// `runs` with each run's variant renamed to `label` (only those of `variant`).
pub fn relabel_runs(runs: Vec<StoredRun>, variant: &str, label: &str) -> Vec<StoredRun> {
    runs.into_iter()
        .filter(|r| r.variant == variant)
        .map(|mut r| {
            r.variant = label.to_string();
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Metric;
    use crate::record::{RunRecord, RunStatus};
    use crate::store::{NewExperiment, VariantRow, WorkloadRow};

    /// An experiment with variant config `variant` and runs of `values`.
    fn experiment(store: &mut Store, variant: &str, workload: &str, values: &[f64]) -> i64 {
        let e = store
            .create_experiment(&NewExperiment {
                name: "h".into(),
                spec_path: None,
                spec_text: "x".into(),
                spec_hash: "h".into(),
                seed: 1,
                plan: Default::default(),
                environment: Default::default(),
                variants: vec![VariantRow { position: 0, name: "a".into(), config_json: variant.into() }],
                workloads: vec![WorkloadRow {
                    position: 0,
                    label: "w".into(),
                    kind: "command".into(),
                    config_json: workload.into(),
                }],
            })
            .unwrap();
        for (seq, v) in values.iter().enumerate() {
            let run = RunRecord {
                seq,
                variant: "a".into(),
                workload: "w".into(),
                status: Some(RunStatus::Ok),
                metrics: vec![Metric::lower("wall_s", "s", *v)],
                ..RunRecord::default()
            };
            store.record_run(e, &run).unwrap();
        }
        store.set_experiment_status(e, ExperimentStatus::Complete).unwrap();
        e
    }

    const W: &str = r#"{"params":{"command":"sleep 1"}}"#;

    #[test]
    fn differences_name_the_keys_and_leave_the_kernel_out() {
        let mut store = Store::open_in_memory().unwrap();
        let a = experiment(&mut store, r#"{"kernel":"6.1","mount":"noatime"}"#, W, &[1.0, 1.1]);
        let b = experiment(&mut store, r#"{"kernel":"6.18","mount":"noatime"}"#, W, &[1.0, 1.1]);
        let c = experiment(&mut store, r#"{"mount":"relatime"}"#, r#"{"params":{"command":"sleep 2"}}"#, &[1.0]);
        let [a, b, c] = [a, b, c].map(|id| ExperimentSnapshot::load(&store, id).unwrap());
        assert!(differences(&a, &b, "a", &[]).is_empty());
        let d: Vec<String> = differences(&a, &c, "a", &[]).iter().map(|d| d.to_string()).collect();
        assert_eq!(
            d,
            ["workload w: params.command: \"sleep 1\" vs \"sleep 2\"", "variant a: mount: \"noatime\" vs \"relatime\""]
        );
    }

    #[test]
    fn history_marks_a_step_and_leaves_out_other_configs() {
        let mut store = Store::open_in_memory().unwrap();
        for i in 0..12 {
            let level = if i < 6 { 10.0 } else { 20.0 };
            let wobble = [0.0, 0.1, -0.1, 0.05, -0.05, 0.02][i % 6];
            experiment(&mut store, "{}", W, &[level + wobble, level - wobble + 0.03, level + 0.01]);
        }
        experiment(&mut store, "{}", r#"{"params":{"command":"other"}}"#, &[5.0, 5.0]);
        let all = ExperimentSnapshot::load_all(&store).unwrap();
        let q =
            HistoryQuery { workload: "w".into(), metric: "wall_s".into(), reference: Some(12), ..Default::default() };
        let h = history(&all, &q).unwrap();
        assert_eq!(h.points.len(), 12);
        assert_eq!(h.change_points.len(), 1, "{:?}", h.change_points);
        assert_eq!(h.change_points[0].index, 6);
        assert!(h.change_points[0].is_regression(false));
        let newest = history(&all, &HistoryQuery { reference: None, ..q.clone() }).unwrap();
        assert_eq!(newest.points.len(), 1);
        assert_eq!(newest.left_out, ["12 experiments with a different workload config"]);
        let gate = history(&all, &HistoryQuery { exclude_reference: true, ..q }).unwrap();
        assert_eq!(gate.points.len(), 11);
    }
}
