//! From stored per-run metrics to comparison rows: every variant against
//! the baseline, for every workload metric and every evidence metric;
//! [`Roles`], the one rule of which rows decide, known before comparing:
//! Benjamini–Hochberg runs across the deciding rows of one (workload,
//! variant) comparison and, separately, across the rows shown beside them
//! (so recording more non-deciding metrics never moves a deciding metric's
//! verdict, whether it is a workload metric or named evidence such as
//! `vm/instructions` under emulation); and the planning that
//! reads the noise of earlier results (`fslab plan`, the runner's up-front
//! note). [`profile`]: the same comparison per kernel function, of runs'
//! stored profiles.

pub mod profile;

use std::ops::Deref;

use anyhow::Result;
use serde::Serialize;

use crate::experiment::{Experiment, Repetitions};
use crate::stats::{
    compare_family, design_power, detectable_change, noise_sd, outlier_indices, runs_to_detect, runs_to_show_no_change,
    trend, CompareConfig, Comparison, MeanKind, SequentialDesign, Stopping, Trend, Verdict,
};
use crate::store::{MetricSeries, Store};
use crate::stored::{StoredRepetitions, StoredSpec};

/// One metric of one variant against the baseline: the [`Comparison`]
/// (flattened into the same JSON object, so no field of it can be left
/// out) plus what names it and the runs it was computed from.
#[derive(Clone, Debug, Serialize)]
pub struct ComparisonRow {
    pub workload: String,
    pub metric: String,
    pub unit: String,
    /// Name of the baseline variant.
    pub baseline: String,
    /// Name of the compared variant.
    pub variant: String,
    /// Shortcuts into `comparison.baseline` / `comparison.variant` (the
    /// per-side [`crate::stats::Summary`]), filled by [`SideFigures`] only.
    pub n_baseline: usize,
    pub n_variant: usize,
    /// mmtests-style mean: harmonic for rates, arithmetic for times.
    pub mean_kind: MeanKind,
    pub mean_baseline: f64,
    pub mean_variant: f64,
    pub cv_baseline: f64,
    pub cv_variant: f64,
    /// Indices (in run order) of runs flagged as outliers; never dropped.
    pub outliers_baseline: Vec<usize>,
    pub outliers_variant: Vec<usize>,
    /// Per-run values, in run order.
    pub values_baseline: Vec<f64>,
    pub values_variant: Vec<f64>,
    /// Trend of the baseline over run order; see [`ComparisonRow::drift_note`].
    pub drift: Option<Trend>,
    /// An evidence metric (`disk/…`, `vm/instructions`, …; see
    /// [`crate::metric`]), shown in its own group.
    pub evidence: bool,
    /// Does this row decide its workload (adaptive stopping, the headline)?
    /// The rule is [`Roles`]; it also chose the row's BH family.
    pub decisive: bool,
    /// A side of this comparison ran under emulation (TCG) and the guest's
    /// instructions were counted: wall time follows the host's load there,
    /// so by default only the instruction count decides ([`Roles`]).
    pub emulated: bool,
    #[serde(flatten)]
    pub comparison: Comparison,
}

impl Deref for ComparisonRow {
    type Target = Comparison;
    fn deref(&self) -> &Comparison {
        &self.comparison
    }
}

impl ComparisonRow {
    /// The drift warning `compare` and the report print under the table,
    /// when the baseline drifted by more than the band (see [`Trend`]).
    pub fn drift_note(&self) -> Option<String> {
        let t = self.drift.as_ref().filter(|t| t.flagged)?;
        Some(format!("{}/{}: {}", self.workload, self.metric, t.describe(&format!("baseline `{}`", self.baseline))))
    }

    /// Which rule decided, for `compare` and the report: e.g. "sequential
    /// 5..20, look 8 of 16 at n = 12: boundary 99.2% CI for
    /// regressed/improved, 96.0% for no-change (Hodges–Lehmann on logs)".
    /// The boundary is the look's level before the false-coverage widening
    /// of selected metrics (the row's own `ci_level`).
    pub fn rule_note(&self) -> String {
        let look = &self.decided_by.look;
        format!(
            "{}: boundary {:.1}% CI for regressed/improved, {:.1}% for no-change ({})",
            self.decided_by.describe(),
            (1.0 - 2.0 * look.efficacy_level) * 100.0,
            (1.0 - 2.0 * look.equivalence_level) * 100.0,
            method_name(self.method)
        )
    }
}

fn method_name(m: crate::stats::CompareMethod) -> &'static str {
    use crate::stats::CompareMethod::*;
    match m {
        LogRank => "Hodges–Lehmann on logs",
        LogWelch => "Welch on logs",
        RawWelchDelta => "Welch on the difference of means",
        Constant => "all runs equal",
        InsufficientData => "too few runs",
    }
}

/// The per-side figures a row shows, derived from the comparison's
/// summaries in this one place.
struct SideFigures;

impl SideFigures {
    fn row(
        b: &MetricSeries,
        v: &MetricSeries,
        comparison: Comparison,
        theta: f64,
        role: (bool, bool),
    ) -> ComparisonRow {
        let (bs, vs) = (&comparison.baseline, &comparison.variant);
        ComparisonRow {
            workload: b.workload.clone(),
            metric: b.metric.clone(),
            unit: b.unit.clone(),
            baseline: b.variant.clone(),
            variant: v.variant.clone(),
            n_baseline: bs.n,
            n_variant: vs.n,
            mean_kind: bs.mean_kind,
            mean_baseline: bs.mean,
            mean_variant: vs.mean,
            cv_baseline: bs.cv,
            cv_variant: vs.cv,
            outliers_baseline: bs.outliers.clone(),
            outliers_variant: vs.outliers.clone(),
            values_baseline: b.values.clone(),
            values_variant: v.values.clone(),
            drift: trend(&b.values, theta),
            evidence: crate::metric::is_evidence(&b.metric),
            decisive: role.0,
            emulated: role.1,
            comparison,
        }
    }
}

/// The comparison settings of an experiment: its α and θ, and sequential
/// looks when `repetitions = { min, max }`.
pub fn compare_config(exp: &Experiment) -> CompareConfig {
    let stopping = match exp.repetitions {
        Repetitions::Fixed(_) => Stopping::Fixed,
        Repetitions::Adaptive { min, max } => Stopping::adaptive(min as usize, max as usize),
    };
    CompareConfig { alpha: exp.alpha, theta: exp.theta, stopping, ..CompareConfig::default() }
}

/// The same from a stored experiment (its plan's `experiment`). Fields
/// that are missing keep their defaults, so old stores still compare (as
/// fixed-n).
pub fn compare_config_from_spec(spec: &StoredSpec) -> CompareConfig {
    let mut cfg = CompareConfig::default();
    if let Some(alpha) = spec.alpha {
        cfg.alpha = alpha;
    }
    if let Some(theta) = spec.theta {
        cfg.theta = theta;
    }
    if let Some(StoredRepetitions::Adaptive { min, max }) = spec.repetitions {
        cfg.stopping = Stopping::adaptive(min as usize, max as usize);
    }
    cfg
}

/// Which rows decide (adaptive stopping, the headline), known before
/// comparing because the Benjamini–Hochberg families follow it:
///
/// * a workload metric decides when its kind says so
///   ([`crate::workload::Kind::is_decisive`]: e.g. wall time, not CPU time);
/// * an evidence metric decides only when the workload names it in
///   `decisive = [...]`;
/// * a comparison with a side run under emulation whose guest instructions
///   were counted (`emulated`): only the instruction count decides, unless
///   the workload names `decisive` (then the two rules above apply): the
///   first of [`crate::metric::EMULATED_DECIDERS`] both sides have, so
///   `vm/instructions_work` (without the guest's background) where the
///   runs were profiled, `vm/instructions` in stores from before it; and
///   beside it the device time a media model charged
///   ([`crate::metric::EMULATED_DEVICE_TIME`]) where both sides have it.
///
/// `workloads`: the experiment's workloads; rows of a workload not among
/// them (or with `Roles::default()`) are decided by their workload metrics.
/// `emulated_variants`: the variants with a run under emulation (see
/// [`emulated_variants`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Roles<'a> {
    pub workloads: &'a [crate::experiment::WorkloadConfig],
    pub emulated_variants: &'a [String],
}

impl Roles<'_> {
    /// Is a comparison of `baseline` with `variant` emulated? `counted`:
    /// both sides have an instruction count.
    pub fn emulated(&self, baseline: &str, variant: &str, counted: bool) -> bool {
        counted && self.emulated_variants.iter().any(|v| v == baseline || v == variant)
    }

    /// Does `workload`'s `metric` decide? `emulated`: the metrics that
    /// decide an emulated comparison (empty: not emulated).
    pub fn decides(&self, workload: &str, metric: &str, emulated: &[&str]) -> bool {
        match self.workloads.iter().find(|w| w.label == workload) {
            Some(w) => w.decides(metric, emulated),
            None => !crate::metric::is_evidence(metric),
        }
    }
}

/// Compare every non-baseline variant with `baseline`.
///
/// `series` must hold one entry per (workload, metric, variant) as the store
/// returns them; the row order follows it, workload metrics before
/// evidence. Per (workload, variant) comparison the rows that decide
/// ([`Roles`]) are one Benjamini–Hochberg family and the rows that do not
/// are another, so recording more side or evidence metrics never moves a
/// deciding metric's verdict.
pub fn compare_series(
    series: &[MetricSeries],
    baseline: &str,
    cfg: &CompareConfig,
    roles: Roles,
) -> Vec<ComparisonRow> {
    let mut workloads: Vec<&str> = Vec::new();
    let mut variants: Vec<&str> = Vec::new();
    for s in series {
        if !workloads.contains(&s.workload.as_str()) {
            workloads.push(&s.workload);
        }
        if s.variant != baseline && !variants.contains(&s.variant.as_str()) {
            variants.push(&s.variant);
        }
    }
    let mut rows = Vec::new();
    for workload in &workloads {
        for variant in &variants {
            // Metrics present for both sides of this comparison.
            let mut pairs: Vec<(&MetricSeries, &MetricSeries)> = series
                .iter()
                .filter(|s| s.workload == *workload && s.variant == baseline)
                .filter_map(|b| {
                    series
                        .iter()
                        .find(|v| v.workload == *workload && v.variant == *variant && v.metric == b.metric)
                        .map(|v| (b, v))
                })
                .collect();
            // Sweep points in numeric order: filemix-1, filemix-8, filemix-16;
            // workload metrics first, then evidence.
            pairs.sort_by_key(|(a, _)| (crate::metric::is_evidence(&a.metric), natural_key(&a.metric)));
            // The preferred instruction count both sides have.
            let counted =
                crate::metric::EMULATED_DECIDERS.iter().copied().find(|m| pairs.iter().any(|(b, _)| b.metric == *m));
            let emulated = roles.emulated(baseline, variant, counted.is_some());
            // With it, the device time a media model charged, where both sides have it.
            let device = crate::metric::EMULATED_DEVICE_TIME;
            let deciders: Vec<&str> = match counted.filter(|_| emulated) {
                Some(count) => std::iter::once(count)
                    .chain(pairs.iter().any(|(b, _)| b.metric == device).then_some(device))
                    .collect(),
                None => Vec::new(),
            };
            let decides: Vec<bool> = pairs.iter().map(|(b, _)| roles.decides(workload, &b.metric, &deciders)).collect();
            // Two families: the rows that decide, and the rows shown beside.
            let mut comparisons: Vec<Option<Comparison>> = vec![None; pairs.len()];
            for decisive in [true, false] {
                let members: Vec<usize> = (0..pairs.len()).filter(|&i| decides[i] == decisive).collect();
                let items: Vec<(&[f64], &[f64], bool)> = members
                    .iter()
                    .map(|&i| (pairs[i].0.values.as_slice(), pairs[i].1.values.as_slice(), pairs[i].0.higher_is_better))
                    .collect();
                for (i, c) in members.into_iter().zip(compare_family(&items, cfg)) {
                    comparisons[i] = Some(c);
                }
            }
            for (((b, v), c), decisive) in pairs.into_iter().zip(comparisons).zip(decides) {
                let c = c.expect("every row is in one family");
                rows.push(SideFigures::row(b, v, c, cfg.theta, (decisive, emulated)));
            }
        }
    }
    rows
}

/// Sort key that orders embedded numbers by value (`x-8` before `x-16`).
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// The variants of experiment `id` with a run under emulation (TCG).
pub fn emulated_variants(store: &Store, id: i64) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for (variant, place) in store.variant_places(id)? {
        if place.is_emulated() && !out.contains(&variant) {
            out.push(variant);
        }
    }
    Ok(out)
}

/// What emulation did to an emulated comparison's decision, for `compare`
/// and the report (`None` when no row is emulated): which wall-time rows
/// the instruction count replaced, and which still decided under
/// emulation (the file named `decisive`, or the workload runs for a fixed
/// time, so its instruction count measures the host).
pub fn emulation_note(rows: &[ComparisonRow]) -> Option<String> {
    let labels = |decisive: bool| -> Vec<String> {
        rows.iter().filter(|r| r.emulated && !r.evidence && r.decisive == decisive).fold(Vec::new(), |mut v, r| {
            let m = format!("{}/{}", r.workload, r.metric);
            if !v.contains(&m) {
                v.push(m);
            }
            v
        })
    };
    let (demoted, kept) = (labels(false), labels(true));
    let mut deciders: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.emulated && r.decisive && crate::metric::decides_emulated(&r.metric)) {
        let name = format!("`{}`", r.metric);
        if !deciders.contains(&name) {
            deciders.push(name);
        }
    }
    if deciders.is_empty() {
        deciders.push(format!("`{}`", crate::metric::INSTRUCTIONS));
    }
    let decider = deciders.join(" and ");
    let mut notes = Vec::new();
    if !demoted.is_empty() {
        notes.push(format!(
            "emulated: {} ran under TCG emulation, where wall time follows the host's load; \
             {decider} decided instead (name `decisive = [...]` on the workload to choose otherwise)",
            demoted.join(", "),
        ));
    }
    if !kept.is_empty() {
        notes.push(format!(
            "emulated: {} decided under TCG emulation although they follow the host's load \
             (the workload names `decisive`, or runs for a fixed time, where `{}` counts the \
             emulator's speed, not the kernel's work): read their verdicts with the load in mind",
            kept.join(", "),
            crate::metric::INSTRUCTIONS
        ));
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

/// True when no decisive row is inconclusive (adaptive repetition may
/// stop); see [`Roles`].
pub fn all_decisive(rows: &[ComparisonRow]) -> bool {
    rows.iter().filter(|r| r.decisive).all(|r| r.verdict != Verdict::Inconclusive)
}

/// What adaptive repetition reads at a look: the stored series and the
/// variants that ran under emulation.
pub struct Deciding {
    pub series: Vec<MetricSeries>,
    pub emulated_variants: Vec<String>,
}

/// What adaptive repetition does after a round.
#[derive(Debug, PartialEq)]
pub enum AdaptiveStep {
    /// Add a round; print these notes first.
    Continue(Vec<String>),
    /// Every decisive comparison is decided: stop, printing this.
    Stop(String),
}

/// The sequential rule of `{ min, max }` after `rounds` rounds (fewer than
/// max): the design may only stop at its planned looks (every round unless
/// max − min ≥ 50, see [`SequentialDesign`]), and at a look it stops when no
/// decisive row ([`Roles`]) is inconclusive at that look's boundary.
/// `deciding` is read only at a look. At the first look it also notes what
/// `max` can resolve at the noise seen so far.
pub fn adaptive_step(
    exp: &Experiment,
    cfg: &CompareConfig,
    rounds: usize,
    deciding: impl FnOnce() -> Result<Deciding>,
) -> Result<AdaptiveStep> {
    let Some(look) = cfg.design().filter(|d| d.is_look(rounds)).map(|d| d.look_at(rounds)) else {
        return Ok(AdaptiveStep::Continue(Vec::new()));
    };
    let deciding = deciding()?;
    let roles = Roles { workloads: &exp.workloads, emulated_variants: &deciding.emulated_variants };
    let rows = compare_series(&deciding.series, &exp.baseline, cfg, roles);
    if all_decisive(&rows) {
        return Ok(AdaptiveStep::Stop(format!(
            "every comparison is decisive after {rounds} rounds (look {} of {})",
            look.index, look.count
        )));
    }
    let mut notes = Vec::new();
    if look.index == 1 {
        notes
            .extend(reach_notes_from_rows(&rows, exp).into_iter().map(|l| format!("note: after {rounds} rounds, {l}")));
    }
    notes.push(format!(
        "round {}: some comparisons are inconclusive at look {} of {}, adding a round",
        rounds + 1,
        look.index,
        look.count
    ));
    Ok(AdaptiveStep::Continue(notes))
}

/// The noise of one metric, pooled over earlier comparable results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NoiseEstimate {
    pub workload: String,
    pub metric: String,
    /// Pooled within-variant standard deviation of ln(run value) (≈ CV),
    /// outlier runs left out.
    pub sd_log: f64,
    /// Runs it is estimated from.
    pub runs: usize,
    /// Stored experiments they came from.
    pub experiments: Vec<i64>,
}

/// Noise of every positive-valued metric of `exp`'s workloads in earlier
/// comparable results: experiments stored from the same file (same spec
/// hash); failing those, experiments with an identically configured
/// workload of the same label. Runs of every variant count (each variant's
/// spread around its own mean).
pub fn stored_noise(store: &Store, exp: &Experiment) -> Result<Vec<NoiseEstimate>> {
    let mut same_file = Vec::new();
    let mut same_workload: Vec<(i64, String)> = Vec::new();
    let configs: Vec<(String, String, String)> = exp
        .workloads
        .iter()
        .map(|w| (w.label.clone(), w.kind().to_string(), serde_json::to_string(w).unwrap_or_default()))
        .collect();
    for e in store.list_experiments()? {
        let row = store.experiment(e.id)?;
        if row.spec_hash == exp.spec_hash {
            same_file.push(e.id);
        } else {
            for w in &row.workloads {
                if configs.iter().any(|(l, k, c)| *l == w.label && *k == w.kind && *c == w.config_json) {
                    same_workload.push((e.id, w.label.clone()));
                }
            }
        }
    }
    let sources: Vec<(i64, Option<String>)> = if same_file.is_empty() {
        same_workload.into_iter().map(|(id, l)| (id, Some(l))).collect()
    } else {
        same_file.into_iter().map(|id| (id, None)).collect()
    };
    // (workload, metric) -> (sum of squares, degrees of freedom, runs, experiments)
    let mut acc: Vec<(String, String, f64, usize, usize, Vec<i64>)> = Vec::new();
    for (id, only) in sources {
        for s in store.metric_series(id)? {
            if only.as_ref().is_some_and(|l| *l != s.workload) || s.values.iter().any(|&x| x.is_nan() || x <= 0.0) {
                continue;
            }
            let flagged = outlier_indices(&s.values);
            let logs: Vec<f64> =
                s.values.iter().enumerate().filter(|(i, _)| !flagged.contains(i)).map(|(_, x)| x.ln()).collect();
            if logs.len() < 2 {
                continue;
            }
            let mean = logs.iter().sum::<f64>() / logs.len() as f64;
            let ss: f64 = logs.iter().map(|x| (x - mean).powi(2)).sum();
            let i = match acc.iter().position(|a| a.0 == s.workload && a.1 == s.metric) {
                Some(i) => i,
                None => {
                    acc.push((s.workload.clone(), s.metric.clone(), 0.0, 0, 0, Vec::new()));
                    acc.len() - 1
                }
            };
            let a = &mut acc[i];
            a.2 += ss;
            a.3 += logs.len() - 1;
            a.4 += logs.len();
            if !a.5.contains(&id) {
                a.5.push(id);
            }
        }
    }
    Ok(acc
        .into_iter()
        .filter(|a| a.3 > 0)
        .map(|(workload, metric, ss, dof, runs, experiments)| NoiseEstimate {
            workload,
            metric,
            sd_log: (ss / dof as f64).sqrt(),
            runs,
            experiments,
        })
        .collect())
}

/// What `fslab plan` says about one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanLine {
    pub workload: String,
    pub metric: String,
    /// Noise (sd of ln values ≈ CV) and the runs it came from.
    pub sd_log: f64,
    pub noise_runs: usize,
    /// The change to detect, as a fraction.
    pub detect: f64,
    /// Runs per variant a fixed-n experiment needs for 80% power at `detect`.
    pub runs_fixed: Option<usize>,
    /// Probability that the file's design ends `regressed` at `detect`.
    pub power_at_max: f64,
    /// Smallest change the file's design detects with 80% power.
    pub detectable_at_max: f64,
    /// Runs per variant for an 80% chance of `no-change` when nothing changed.
    pub no_change_runs: Option<usize>,
    /// The file's `max` (repetitions per variant at most).
    pub max: usize,
}

impl PlanLine {
    /// Whether the file's max reaches the target power at `detect`.
    pub fn reaches(&self, power: f64) -> bool {
        self.power_at_max >= power
    }

    /// "at CV 10%, max = 20 can only detect ≥ 9.1% (θ = 2%)…", for `fslab
    /// run`'s up-front note; `None` when the design resolves the band.
    pub fn reach_warning(&self, theta: f64) -> Option<String> {
        let no_change = self.no_change_runs.filter(|&n| n > self.max);
        if self.detectable_at_max <= 2.0 * theta && no_change.is_none() {
            return None;
        }
        let mut text = format!(
            "{}/{}: at CV {:.1}%, max = {} can only detect ≥ {:.1}% (θ = {:.0}%)",
            self.workload,
            self.metric,
            self.sd_log * 100.0,
            self.max,
            self.detectable_at_max * 100.0,
            theta * 100.0
        );
        if let Some(n) = no_change {
            text.push_str(&format!(
                " and will rarely show no-change within ±{:.0}% (that needs about {n} runs per variant)",
                theta * 100.0
            ));
        }
        Some(text)
    }
}

/// The plan for each decisive metric of `exp` with a noise estimate.
pub fn plan(exp: &Experiment, noise: &[NoiseEstimate], detect: f64) -> Vec<PlanLine> {
    let cfg = compare_config(exp);
    let design = match cfg.design() {
        Some(d) => d,
        None => SequentialDesign::standard(exp.max_rounds(), exp.max_rounds(), cfg.alpha),
    };
    noise
        .iter()
        .filter(|n| exp.workloads.iter().find(|w| w.label == n.workload).is_some_and(|w| w.is_decisive(&n.metric)))
        .map(|n| {
            let line = PlanLine {
                workload: n.workload.clone(),
                metric: n.metric.clone(),
                sd_log: n.sd_log,
                noise_runs: n.runs,
                detect,
                runs_fixed: runs_to_detect(n.sd_log, detect.ln_1p(), cfg.theta, cfg.alpha, cfg.power),
                power_at_max: design_power(&design, n.sd_log, detect.ln_1p(), cfg.theta),
                detectable_at_max: detectable_change(&design, n.sd_log, cfg.theta, cfg.power),
                no_change_runs: runs_to_show_no_change(n.sd_log, cfg.theta, cfg.alpha, cfg.power),
                max: exp.max_rounds(),
            };
            if n.sd_log > 0.0 {
                return line;
            }
            // No noise at all (a metric that repeats exactly): two runs
            // settle anything beyond the band.
            let beyond = detect > cfg.theta;
            PlanLine {
                runs_fixed: beyond.then_some(2),
                power_at_max: if beyond { 1.0 } else { 0.0 },
                detectable_at_max: cfg.theta,
                no_change_runs: Some(2),
                ..line
            }
        })
        .collect()
}

/// The plan as a text table.
pub fn render_plan(lines: &[PlanLine], power: f64) -> String {
    let mut out = format!(
        "{:<36} {:>6} {:>6} {:>12} {:>10} {:>12} {:>12}\n",
        "workload/metric", "CV", "runs", "fixed runs", "power@max", "detects@max", "no-change@"
    );
    for l in lines {
        out.push_str(&format!(
            "{:<36} {:>5.1}% {:>6} {:>12} {:>9.0}% {:>11.1}% {:>12}{}\n",
            format!("{}/{}", l.workload, l.metric),
            l.sd_log * 100.0,
            l.noise_runs,
            l.runs_fixed.map_or("-".to_string(), |n| n.to_string()),
            l.power_at_max * 100.0,
            l.detectable_at_max * 100.0,
            l.no_change_runs.map_or("-".to_string(), |n| n.to_string()),
            if l.reaches(power) { "" } else { "  ← max too small" }
        ));
    }
    out
}

/// The up-front note of `fslab run`: what `max` can resolve at the noise of
/// earlier comparable results. Problems reading the store become a note,
/// never an error (the run does not depend on it).
/// Empty for fixed repetitions (nothing to decide up front).
pub fn reach_notes(store: &Store, exp: &Experiment) -> Vec<String> {
    if exp.max_rounds() <= exp.min_rounds() {
        return Vec::new();
    }
    let lines = match stored_noise(store, exp) {
        Ok(noise) => plan(exp, &noise, 2.0 * exp.theta).iter().filter_map(|l| l.reach_warning(exp.theta)).collect(),
        Err(e) => vec![format!("could not read earlier results for planning: {e:#}")],
    };
    lines.into_iter().map(|l| format!("note: {l}")).collect()
}

/// The same note from the rows of the first look (the noise observed so far).
pub fn reach_notes_from_rows(rows: &[ComparisonRow], exp: &Experiment) -> Vec<String> {
    let mut noise: Vec<NoiseEstimate> = Vec::new();
    for r in rows {
        if noise.iter().any(|n| n.workload == r.workload && n.metric == r.metric) {
            continue;
        }
        if let Some(sd) = noise_sd(&r.values_baseline, &r.values_variant) {
            noise.push(NoiseEstimate {
                workload: r.workload.clone(),
                metric: r.metric.clone(),
                sd_log: sd,
                runs: r.n_baseline + r.n_variant,
                experiments: Vec::new(),
            });
        }
    }
    plan(exp, &noise, 2.0 * exp.theta).iter().filter_map(|l| l.reach_warning(exp.theta)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_points_sort_by_number() {
        let mut names = vec!["filemix-16", "filemix-1", "filemix-8", "coldstart-2/p50_s", "coldstart-10/p50_s", "abc"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(
            names,
            vec!["abc", "coldstart-2/p50_s", "coldstart-10/p50_s", "filemix-1", "filemix-8", "filemix-16"]
        );
    }

    #[test]
    fn decisive_metrics_come_from_the_kind() {
        let text = "name = \"d\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n\
                    [[workload]]\nkind = \"command\"\ncommand = \"true\"\n\
                    [[workload]]\nkind = \"fio\"\njob = { rw = \"read\", size = \"1M\" }\n";
        let exp = crate::experiment::parse(text, None).unwrap();
        let (command, fio) = (&exp.workloads[0], &exp.workloads[1]);
        // Metrics the command reports itself decide; its CPU times do not.
        assert!(command.is_decisive("wall_s") && command.is_decisive("score"));
        assert!(!command.is_decisive("user_s") && !command.is_decisive("sys_s"));
        assert!(fio.is_decisive("job/read/bw_kib_s") && fio.is_decisive("job/read/clat_p99_us"));
        assert!(!fio.is_decisive("job/usr_cpu_pct") && !fio.is_decisive("job/sys_cpu_pct"));
    }

    fn series(variant: &str, values: &[f64]) -> MetricSeries {
        MetricSeries {
            workload: "w".into(),
            metric: "t_s".into(),
            unit: "s".into(),
            higher_is_better: false,
            variant: variant.into(),
            values: values.to_vec(),
        }
    }

    fn named(metric: &str, variant: &str, values: &[f64]) -> MetricSeries {
        MetricSeries { workload: "command".into(), metric: metric.into(), ..series(variant, values) }
    }

    /// A command workload where `b` clearly writes more (disk/writes, 2×)
    /// while its wall time is the same as `a`'s; `decisive` as given.
    fn evidence_case(decisive: &str) -> (Experiment, Vec<MetricSeries>) {
        let text = format!(
            "name = \"e\"\nrepetitions = {{ min = 5, max = 20 }}\n\
             [[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n[[variant]]\nname = \"b\"\nfs = \"dir:/tmp\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n{decisive}"
        );
        let exp = crate::experiment::parse(&text, None).unwrap();
        let same = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0];
        let wall_b = [1.0, 0.99, 1.01, 1.0, 0.995, 1.005, 1.0, 0.99, 1.01, 1.0];
        let noisy_a = [1.0, 2.0, 0.5, 1.5, 0.8, 1.2, 1.9, 0.6, 1.1, 0.9];
        let noisy_b = [0.9, 1.8, 0.7, 1.6, 1.0, 1.3, 0.5, 2.0, 1.0, 0.8];
        let series = vec![
            named("wall_s", "a", &same),
            named("wall_s", "b", &wall_b),
            named("disk/writes", "a", &same.map(|x| 100.0 * x)),
            named("disk/writes", "b", &same.map(|x| 200.0 * x)),
            // Evidence too noisy to decide in 10 runs: must not hold a run open.
            named("cpu/sys_pct", "a", &noisy_a),
            named("cpu/sys_pct", "b", &noisy_b),
        ];
        (exp, series)
    }

    #[test]
    fn families_follow_the_role_and_evidence_decides_only_when_named() {
        let (exp, series) = evidence_case("");
        let cfg = compare_config(&exp);
        let roles = Roles { workloads: &exp.workloads, emulated_variants: &[] };
        let rows = compare_series(&series, "a", &cfg, roles);
        // Workload metrics first, then evidence.
        let names: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(names, ["wall_s", "cpu/sys_pct", "disk/writes"]);
        let role: Vec<(bool, bool)> = rows.iter().map(|r| (r.evidence, r.decisive)).collect();
        assert_eq!(role, [(false, true), (true, false), (true, false)]);
        // The deciding row is its own family: the evidence beside it does
        // not move its BH adjustment.
        let alone = compare_series(&series[..2], "a", &cfg, roles);
        assert_eq!(alone[0].p_adjusted, rows[0].p_adjusted, "evidence moved a deciding metric's BH adjustment");
        assert_eq!(rows[2].verdict, Verdict::Regressed, "evidence keeps its own verdict");

        // Named, disk/writes decides and joins wall_s's family; the noisy
        // cpu/sys_pct (not deciding) moves neither.
        let (named_exp, _) = evidence_case("decisive = [\"disk/writes\"]\n");
        assert_eq!(named_exp.workloads[0].decisive, ["disk/writes"]);
        let roles = Roles { workloads: &named_exp.workloads, emulated_variants: &[] };
        let rows = compare_series(&series, "a", &cfg, roles);
        let role: Vec<(bool, bool)> = rows.iter().map(|r| (r.evidence, r.decisive)).collect();
        assert_eq!(role, [(false, true), (true, false), (true, true)]);
        let deciding = compare_series(&series[..4], "a", &cfg, roles);
        let adjusted = |rows: &[ComparisonRow], m: &str| rows.iter().find(|r| r.metric == m).unwrap().p_adjusted;
        for m in ["wall_s", "disk/writes"] {
            assert_eq!(adjusted(&rows, m), adjusted(&deciding, m), "{m}: a non-deciding row moved it");
        }
        assert_eq!(rows[2].verdict, Verdict::Regressed);

        // Without workload configs: workload metrics decide, evidence does
        // not, and those are the families (as before roles were known).
        let rows = compare_series(&series, "a", &cfg, Roles::default());
        let role: Vec<(bool, bool)> = rows.iter().map(|r| (r.evidence, r.decisive)).collect();
        assert_eq!(role, [(false, true), (true, false), (true, false)]);
        assert_eq!(rows[0].p_adjusted, alone[0].p_adjusted);
    }

    /// The measured case: under emulation `vm/instructions` decides; a
    /// +10% instruction change, every variant run above every baseline run
    /// (n = 5 a side), among 19 noisy evidence metrics that decide nothing
    /// (ext4's count). Corrected together with them (the old evidence
    /// family) its BH-adjusted p was 20 × 2/252 ≈ 0.16: inconclusive. In
    /// the family of the rows that decide, it is regressed.
    #[test]
    fn a_decisive_instruction_count_is_not_diluted_by_descriptive_evidence() {
        let text = "name = \"e\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n[[variant]]\nname = \"b\"\n\
                    fs = \"dir:/tmp\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n";
        let exp = crate::experiment::parse(text, None).unwrap();
        let base = [1.0e9, 1.004e9, 0.997e9, 1.002e9, 0.999e9];
        let mut series = vec![
            named("wall_s", "a", &[1.0, 1.5, 0.7, 1.2, 0.9]),
            named("wall_s", "b", &[1.3, 0.8, 1.1, 1.6, 0.6]),
            named(crate::metric::INSTRUCTIONS, "a", &base),
            named(crate::metric::INSTRUCTIONS, "b", &base.map(|x| x * 1.1001)),
        ];
        let noisy_a = [1.0, 2.0, 0.5, 1.5, 0.8];
        let noisy_b = [0.9, 1.8, 0.7, 1.6, 1.0];
        for i in 0..19 {
            let m = format!("fs/ext4/counter_{i}");
            let k = 100.0 * (i + 1) as f64;
            series.push(named(&m, "a", &noisy_a.map(|x| x * k)));
            series.push(named(&m, "b", &noisy_b.map(|x| x * k)));
        }
        let cfg = CompareConfig::default();
        let emulated = ["b".to_string()];
        let rows =
            compare_series(&series, "a", &cfg, Roles { workloads: &exp.workloads, emulated_variants: &emulated });
        assert_eq!(rows.len(), 21);
        let decisive: Vec<&ComparisonRow> = rows.iter().filter(|r| r.decisive).collect();
        assert_eq!(decisive.len(), 1);
        let instructions = decisive[0];
        assert_eq!(instructions.metric, crate::metric::INSTRUCTIONS);
        assert!(instructions.emulated && instructions.p_value < 0.01, "{instructions:?}");
        assert_eq!(instructions.p_adjusted, instructions.p_value, "a family of one");
        assert_eq!(instructions.verdict, Verdict::Regressed, "{instructions:?}");
        // The old split: every evidence metric in one family.
        let evidence: Vec<(&[f64], &[f64], bool)> = series
            .chunks(2)
            .filter(|s| crate::metric::is_evidence(&s[0].metric))
            .map(|s| (s[0].values.as_slice(), s[1].values.as_slice(), s[0].higher_is_better))
            .collect();
        assert_eq!(evidence.len(), 20);
        let old = &compare_family(&evidence, &cfg)[0];
        assert!(old.p_adjusted > 0.15, "{old:?}");
        assert_eq!(old.verdict, Verdict::Inconclusive);
        // The descriptive evidence keeps its own family and verdicts.
        let counter = rows.iter().find(|r| r.metric == "fs/ext4/counter_0").unwrap();
        assert!(!counter.decisive && counter.verdict == Verdict::Inconclusive, "{counter:?}");
    }

    #[test]
    fn emulated_comparisons_are_decided_by_the_instruction_count() {
        let (exp, mut series) = evidence_case("");
        series.push(named(crate::metric::INSTRUCTIONS, "a", &[1e9; 10]));
        series.push(named(crate::metric::INSTRUCTIONS, "b", &[1.1e9; 10]));
        let emulated = ["b".to_string()];
        let roles = |workloads| Roles { workloads, emulated_variants: &emulated };
        let rows = compare_series(&series, "a", &compare_config(&exp), roles(&exp.workloads));
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, [crate::metric::INSTRUCTIONS]);
        assert!(rows.iter().all(|r| r.emulated));
        let note = emulation_note(&rows).expect("a note on the demoted wall time");
        assert!(note.contains("command/wall_s") && note.contains("vm/instructions"), "{note}");
        // Without a counted instruction metric, emulation changes nothing.
        let rows = compare_series(&series[..6], "a", &compare_config(&exp), roles(&exp.workloads));
        assert!(rows.iter().all(|r| !r.emulated) && rows[0].decisive && emulation_note(&rows).is_none());
        // A fixed-time workload's own metrics decide: its instruction count
        // follows the emulator's speed.
        let fixed = "name = \"f\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n[[variant]]\nname = \"b\"\n\
                     fs = \"dir:/tmp\"\n[[workload]]\nkind = \"shell1\"\nconcurrency = [1]\nduration = \"5s\"\n";
        let fixed = crate::experiment::parse(fixed, None).unwrap();
        let shell1: Vec<MetricSeries> =
            [("shell1-1", [100.0, 101.0, 99.0, 100.0, 100.5]), ("vm/instructions", [1e9; 5])]
                .iter()
                .flat_map(|(m, v)| [named(m, "a", v), named(m, "b", &v.map(|x| x * 0.8))])
                .map(|mut s| {
                    s.workload = "shell1".into();
                    s
                })
                .collect();
        let rows = compare_series(&shell1, "a", &compare_config(&fixed), roles(&fixed.workloads));
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, ["shell1-1"]);
        let note = emulation_note(&rows).expect("a note on the wall-time decision");
        assert!(note.contains("shell1/shell1-1 decided under TCG emulation") && note.contains("fixed time"), "{note}");
        // A file that names `decisive` overrides the default.
        let (exp, _) = evidence_case("decisive = [\"disk/writes\"]\n");
        let rows = compare_series(&series, "a", &compare_config(&exp), roles(&exp.workloads));
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, ["wall_s", "disk/writes"]);
    }

    /// Profiled runs also store the count without the guest's background:
    /// where both sides have it, it decides and the total is evidence; a
    /// side without it (a store from before it) leaves the total deciding.
    #[test]
    fn the_count_without_the_background_decides_where_both_sides_have_it() {
        let (exp, mut series) = evidence_case("");
        series.push(named(crate::metric::INSTRUCTIONS, "a", &[1e9; 10]));
        series.push(named(crate::metric::INSTRUCTIONS, "b", &[1.1e9; 10]));
        let emulated = ["b".to_string()];
        let roles = Roles { workloads: &exp.workloads, emulated_variants: &emulated };
        let mut both = series.clone();
        both.push(named(crate::metric::WORK_INSTRUCTIONS, "a", &[0.9e9; 10]));
        both.push(named(crate::metric::WORK_INSTRUCTIONS, "b", &[1.0e9; 10]));
        let rows = compare_series(&both, "a", &compare_config(&exp), roles);
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, [crate::metric::WORK_INSTRUCTIONS]);
        let total = rows.iter().find(|r| r.metric == crate::metric::INSTRUCTIONS).unwrap();
        assert!(total.evidence && !total.decisive && total.emulated, "{total:?}");
        let note = emulation_note(&rows).unwrap();
        assert!(note.contains("`vm/instructions_work` decided instead"), "{note}");
        // Only the variant has it: the total decides.
        let mut one = series;
        one.push(named(crate::metric::WORK_INSTRUCTIONS, "b", &[1.0e9; 10]));
        let rows = compare_series(&one, "a", &compare_config(&exp), roles);
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, [crate::metric::INSTRUCTIONS]);
    }

    /// On a media model the device time the model charged decides beside
    /// the instruction count (both are set by what the kernel did, not by
    /// the host's load); without emulation, or on one side only, it is
    /// evidence as before.
    #[test]
    fn the_charged_device_time_decides_beside_the_count_under_emulation() {
        let (exp, mut series) = evidence_case("");
        let device = crate::metric::EMULATED_DEVICE_TIME;
        series.push(named(crate::metric::WORK_INSTRUCTIONS, "a", &[1e9; 10]));
        series.push(named(crate::metric::WORK_INSTRUCTIONS, "b", &[1e9; 10]));
        let mut both = series.clone();
        both.push(named(device, "a", &[1.0, 1.001, 0.999, 1.0, 1.0, 1.001, 0.999, 1.0, 1.0, 1.0]));
        both.push(named(device, "b", &[1.5, 1.501, 1.499, 1.5, 1.5, 1.501, 1.499, 1.5, 1.5, 1.5]));
        let emulated = ["b".to_string()];
        let roles = Roles { workloads: &exp.workloads, emulated_variants: &emulated };
        let rows = compare_series(&both, "a", &compare_config(&exp), roles);
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, [device, crate::metric::WORK_INSTRUCTIONS]);
        let time = rows.iter().find(|r| r.metric == device).unwrap();
        assert_eq!(time.verdict, crate::stats::Verdict::Regressed, "{time:?}");
        let note = emulation_note(&rows).unwrap();
        assert!(note.contains("`media/busy_s` and `vm/instructions_work` decided instead"), "{note}");
        // Not emulated: the device time is evidence.
        let host = Roles { workloads: &exp.workloads, emulated_variants: &[] };
        let rows = compare_series(&both, "a", &compare_config(&exp), host);
        assert!(rows.iter().any(|r| r.metric == device && !r.decisive && r.evidence), "{rows:?}");
        // Only one side ran on a media model: the count alone decides.
        let mut one = series;
        one.push(named(device, "b", &[1.5; 10]));
        let rows = compare_series(&one, "a", &compare_config(&exp), roles);
        let decisive: Vec<&str> = rows.iter().filter(|r| r.decisive).map(|r| r.metric.as_str()).collect();
        assert_eq!(decisive, [crate::metric::WORK_INSTRUCTIONS]);
    }

    #[test]
    fn adaptive_stopping_ignores_evidence_unless_named() {
        let deciding = |series: &[MetricSeries]| {
            let series = series.to_vec();
            move || Ok(Deciding { series, emulated_variants: Vec::new() })
        };
        // Wall time decided (no change); the noisy evidence is inconclusive
        // but decides nothing: stop.
        let (exp, series) = evidence_case("");
        let cfg = compare_config(&exp);
        let step = adaptive_step(&exp, &cfg, 10, deciding(&series)).unwrap();
        assert!(matches!(step, AdaptiveStep::Stop(_)), "{step:?}");
        // Named, the inconclusive evidence holds the experiment open.
        let (exp, _) = evidence_case("decisive = [\"cpu/sys_pct\"]\n");
        let step = adaptive_step(&exp, &cfg, 10, deciding(&series)).unwrap();
        assert!(matches!(step, AdaptiveStep::Continue(_)), "{step:?}");
    }

    // #12 part 4: the row is the Comparison plus context. Every key of the
    // serialized Comparison appears in the row with the same value.
    #[test]
    fn row_json_holds_every_comparison_field() {
        let b = series("a", &[10.0, 10.2, 9.9, 10.1, 10.3, 10.0]);
        let v = series("b", &[12.0, 12.3, 11.8, 12.1, 12.2, 12.4]);
        let rows = compare_series(&[b, v], "a", &CompareConfig::default(), Roles::default());
        assert_eq!(rows.len(), 1);
        let row = serde_json::to_value(&rows[0]).unwrap();
        let comparison = serde_json::to_value(&rows[0].comparison).unwrap();
        for (key, value) in comparison.as_object().unwrap() {
            assert_eq!(row.get(key), Some(value), "row JSON lacks or changes `{key}`");
        }
        for key in ["workload", "metric", "unit", "baseline", "variant", "n_baseline", "mean_baseline", "drift"] {
            assert!(row.get(key).is_some(), "{key}");
        }
        assert_eq!(row["baseline"], "a");
        assert_eq!(rows[0].verdict, Verdict::Regressed);
        assert_eq!(rows[0].n_baseline, rows[0].comparison.baseline.n);
        assert!(rows[0].rule_note().starts_with("fixed n = 6: boundary 95.0% CI"), "{}", rows[0].rule_note());
    }

    #[test]
    fn drift_note_appears_only_for_a_real_drift() {
        let steady = series("a", &[10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.1, 9.9, 10.0, 10.05]);
        let drifting: Vec<f64> = (0..10).map(|i| 10.0 * (1.0 + 0.01 * i as f64)).collect();
        let v = series("b", &[10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.1, 9.9, 10.0, 10.05]);
        let rows = compare_series(&[steady, v.clone()], "a", &CompareConfig::default(), Roles::default());
        assert_eq!(rows[0].drift_note(), None);
        let rows = compare_series(&[series("a", &drifting), v], "a", &CompareConfig::default(), Roles::default());
        let note = rows[0].drift_note().expect("9% drift");
        assert!(note.starts_with("w/t_s: baseline `a` drifts +0.96% per run (+9.0% over 10 runs"), "{note}");
    }

    #[test]
    fn config_from_stored_spec() {
        let spec: StoredSpec = serde_json::from_value(
            serde_json::json!({ "alpha": 0.01, "theta": 0.05, "repetitions": { "min": 5, "max": 20 } }),
        )
        .unwrap();
        let cfg = compare_config_from_spec(&spec);
        assert_eq!((cfg.alpha, cfg.theta, cfg.stopping), (0.01, 0.05, Stopping::Sequential { min: 5, max: 20 }));
        let spec: StoredSpec = serde_json::from_value(serde_json::json!({ "repetitions": 5 })).unwrap();
        let cfg = compare_config_from_spec(&spec);
        assert_eq!(cfg, CompareConfig::default());
        assert_eq!(compare_config_from_spec(&StoredSpec::default()), CompareConfig::default());
    }

    #[test]
    fn plan_lines_and_warnings() {
        let text = "name = \"p\"\nrepetitions = { min = 5, max = 20 }\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n\
                    [[variant]]\nname = \"b\"\nfs = \"dir:/tmp\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n";
        let exp = crate::experiment::parse(text, None).unwrap();
        let noisy = NoiseEstimate {
            workload: "command".into(),
            metric: "wall_s".into(),
            sd_log: 0.10,
            runs: 40,
            experiments: vec![1],
        };
        let side = NoiseEstimate { metric: "user_s".into(), ..noisy.clone() };
        let lines = plan(&exp, &[noisy.clone(), side], 0.05);
        // CPU side metrics are not planned for.
        assert_eq!(lines.len(), 1, "{lines:?}");
        let l = &lines[0];
        assert_eq!(l.runs_fixed, Some(196));
        assert!(!l.reaches(0.8) && l.power_at_max < 0.3, "{l:?}");
        let warning = l.reach_warning(0.02).unwrap();
        assert!(warning.starts_with("command/wall_s: at CV 10.0%, max = 20 can only detect ≥ "), "{warning}");
        assert!(warning.contains("rarely show no-change"), "{warning}");
        let quiet = NoiseEstimate { sd_log: 0.003, ..noisy };
        assert_eq!(plan(&exp, &[quiet], 0.05)[0].reach_warning(0.02), None);
        assert!(render_plan(&lines, 0.8).contains("max too small"));
    }
}
