//! What a report says, decided once for every format: the headline (what
//! was decided, what was not and what it would take, which runs failed and
//! why), the columns of the verdict table and the notes of a row. A new
//! column or note is one entry in [`VERDICT_COLUMNS`] or one `if` in
//! [`notes`]; the terminal, Markdown and HTML renderers loop over them.

use super::data::ComparisonData;
use crate::analysis::ComparisonRow;
use crate::human;
use crate::record::RunStatus;
use crate::stats::Verdict;
use crate::store::StoredRun;

/// Verdict counts of a set of rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub regressed: usize,
    pub improved: usize,
    pub no_change: usize,
    pub inconclusive: usize,
    /// `runs_needed` of the inconclusive rows that have an estimate.
    pub runs_needed: Vec<usize>,
}

impl Tally {
    fn add(&mut self, r: &ComparisonRow) {
        match r.verdict {
            Verdict::Regressed => self.regressed += 1,
            Verdict::Improved => self.improved += 1,
            Verdict::NoChange => self.no_change += 1,
            Verdict::Inconclusive => {
                self.inconclusive += 1;
                self.runs_needed.extend(r.runs_needed);
            }
        }
    }

    pub fn total(&self) -> usize {
        self.regressed + self.improved + self.no_change + self.inconclusive
    }

    pub fn decided(&self) -> usize {
        self.regressed + self.improved + self.no_change
    }

    /// `1 regressed, 2 no change` (only the non-zero decided counts).
    fn decided_text(&self) -> String {
        let parts: Vec<String> =
            [(self.regressed, "regressed"), (self.improved, "improved"), (self.no_change, "no change")]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| format!("{n} {what}"))
                .collect();
        parts.join(", ")
    }

    /// ` (about 8–14 runs per variant would decide them)`.
    fn needed_text(&self) -> String {
        let them = if self.inconclusive == 1 { "it" } else { "them" };
        let unknown = self.inconclusive - self.runs_needed.len();
        let unknown = if unknown > 0 { format!("; no estimate for {unknown}") } else { String::new() };
        match (self.runs_needed.iter().min(), self.runs_needed.iter().max()) {
            (Some(a), Some(b)) if a == b => format!(" (about {a} runs per variant would decide {them}{unknown})"),
            (Some(a), Some(b)) => format!(" (about {a}–{b} runs per variant would decide {them}{unknown})"),
            _ => format!(" (no estimate of the runs that would decide {them})"),
        }
    }

    /// The decisive rows' sentence: what was decided, then what was not.
    fn sentence(&self) -> String {
        let (decided, n) = (self.decided(), self.inconclusive);
        match (decided, n) {
            (_, 0) => format!("Decided: {}.", self.decided_text()),
            (0, 1) => format!("Nothing decided: the one comparison is inconclusive{}.", self.needed_text()),
            (0, 2) => format!("Nothing decided: both comparisons are inconclusive{}.", self.needed_text()),
            (0, _) => format!("Nothing decided: all {n} comparisons are inconclusive{}.", self.needed_text()),
            _ => format!("Decided: {}. Not decided: {n} inconclusive{}.", self.decided_text(), self.needed_text()),
        }
    }

    /// All counts in one list: `2 no change, 3 inconclusive (about …)`.
    fn counts_text(&self) -> String {
        let mut text = self.decided_text();
        if self.inconclusive > 0 {
            if !text.is_empty() {
                text.push_str(", ");
            }
            text.push_str(&format!("{} inconclusive{}", self.inconclusive, self.needed_text()));
        }
        text
    }
}

/// Failed runs that share one error message.
#[derive(Clone, Debug, PartialEq)]
pub struct FailureGroup {
    pub error: String,
    /// `(seq, variant, workload)` of each run.
    pub runs: Vec<(usize, String, String)>,
}

/// The answer a report opens with.
#[derive(Clone, Debug, PartialEq)]
pub struct Headline {
    /// Rows of the metrics that decide their workload.
    pub decisive: Tally,
    /// The other workload-metric rows (CPU time beside wall time, phase
    /// splits; under emulation, wall time).
    pub side: Tally,
    /// Evidence rows that do not decide (`disk/…`, `cpu/…`, …; never part
    /// of the headline's verdict).
    pub evidence: Tally,
    /// Why emulated wall-time rows did not decide, when some did not.
    pub emulation: Option<String>,
    pub runs_total: usize,
    pub runs_failed: usize,
    pub failures: Vec<FailureGroup>,
    /// Which rule decided the decisive rows (fixed n or sequential, the
    /// look and its interval levels), each distinct description once.
    pub rules: Vec<String>,
    /// Baselines that drifted over run order by more than the band.
    pub drift: Vec<String>,
}

impl Headline {
    pub fn new<'a>(c: &ComparisonData, runs: impl IntoIterator<Item = &'a StoredRun>) -> Headline {
        let (mut decisive, mut side, mut evidence) = (Tally::default(), Tally::default(), Tally::default());
        for r in &c.rows {
            if c.is_decisive(r) {
                decisive.add(r);
            } else if r.evidence {
                evidence.add(r);
            } else {
                side.add(r);
            }
        }
        let emulation = crate::analysis::emulation_note(&c.rows);
        let mut failures: Vec<FailureGroup> = Vec::new();
        let mut runs_total = 0;
        for r in runs {
            runs_total += 1;
            if r.status == RunStatus::Ok {
                continue;
            }
            let error = r.error.clone().unwrap_or_else(|| format!("{} (no error recorded)", r.status.as_str()));
            let run = (r.seq, r.variant.clone(), r.workload.clone());
            match failures.iter_mut().find(|g| g.error == error) {
                Some(g) => g.runs.push(run),
                None => failures.push(FailureGroup { error, runs: vec![run] }),
            }
        }
        let runs_failed = failures.iter().map(|g| g.runs.len()).sum();
        let (mut rules, mut drift) = (Vec::new(), Vec::new());
        for r in &c.rows {
            let rule = r.rule_note();
            if c.is_decisive(r) && !rules.contains(&rule) {
                rules.push(rule);
            }
            // One line per baseline series, not per variant compared with it.
            if let Some(note) = r.drift_note().filter(|n| !drift.contains(n)) {
                drift.push(note);
            }
        }
        Headline { decisive, side, evidence, emulation, runs_total, runs_failed, failures, rules, drift }
    }

    /// The headline as plain sentences, most important first.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.is_empty() {
            lines.push(NO_COMPARISONS.to_string());
        } else {
            if self.decisive.total() > 0 {
                lines.push(self.decisive.sentence());
            }
            lines.extend(self.tally_lines());
            lines.extend(self.emulation_line());
            lines.extend(self.method_lines());
        }
        lines.extend(self.failed_line());
        lines
    }

    /// What the terminal's answer opens with: what the decisive metrics
    /// decided (and, under emulation, why wall time did not decide).
    pub fn decision_lines(&self) -> Vec<String> {
        let mut lines = vec![match (self.is_empty(), self.decisive.total()) {
            (true, _) => NO_COMPARISONS.to_string(),
            (false, 0) => "Nothing decided: no metric that decides a workload was compared.".to_string(),
            _ => self.decisive.sentence(),
        }];
        lines.extend(self.emulation_line());
        lines
    }

    /// How the decisive rows were decided (`Rule: …`) and which baselines
    /// drifted (`Drift: …`).
    pub fn method_lines(&self) -> Vec<String> {
        let rules = self.rules.iter().map(|rule| format!("Rule: {rule}."));
        rules.chain(self.drift.iter().map(|drift| format!("Drift: {drift}."))).collect()
    }

    /// The verdict counts of the rows that decide nothing: side metrics, evidence.
    pub fn tally_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.side.total() > 0 {
            lines.push(format!("Side metrics (they do not decide a workload): {}.", self.side.counts_text()));
        }
        if self.evidence.total() > 0 {
            lines.push(format!(
                "Evidence (compared like metrics; decides only when named in `decisive`): {}.",
                self.evidence.counts_text()
            ));
        }
        lines
    }

    /// `3 of 18 runs failed; why:` (the reasons are [`Headline::failure_lines`]).
    pub fn failed_line(&self) -> Option<String> {
        (self.runs_failed > 0).then(|| format!("{} of {} runs failed; why:", self.runs_failed, self.runs_total))
    }

    fn emulation_line(&self) -> Option<String> {
        self.emulation.as_ref().map(|note| format!("{}{}.", note[..1].to_uppercase(), &note[1..]))
    }

    fn is_empty(&self) -> bool {
        self.decisive.total() == 0 && self.side.total() == 0 && self.evidence.total() == 0
    }

    /// One line per distinct error: `runs 2, 5 (b / untar): mount: …`.
    pub fn failure_lines(&self) -> Vec<String> {
        self.failures.iter().map(|g| format!("{}: {}", runs_text(&g.runs), g.error)).collect()
    }
}

/// What a report says before any variant has been compared.
const NO_COMPARISONS: &str = "No comparisons yet (needs successful runs of the baseline and another variant).";

/// How many rows that decide nothing but changed the answer shows per variant.
pub const CHANGED_SHOWN: usize = 5;

/// What a comparison leads with (`perf diff` and hyperfine print what
/// matters first): every decisive row, variant by variant, then the rows
/// that decide nothing but changed (regressed or improved), the largest
/// changes first and at most [`CHANGED_SHOWN`] per variant. The other rows
/// are only counted.
#[derive(Clone, Debug)]
pub struct Answer<'a> {
    /// In variant order, then row order.
    pub decisive: Vec<&'a ComparisonRow>,
    /// In variant order, then by the size of the change.
    pub changed: Vec<&'a ComparisonRow>,
    /// The rows in neither list: side metrics, evidence, and how many of them changed.
    pub more_side: usize,
    pub more_evidence: usize,
    pub more_changed: usize,
}

impl<'a> Answer<'a> {
    pub fn new(c: &'a ComparisonData) -> Answer<'a> {
        let variant = |r: &ComparisonRow| c.variants.iter().position(|v| *v == r.variant).unwrap_or(usize::MAX);
        // A row without a ratio (zero on both sides) sorts after every real change.
        let size = |r: &ComparisonRow| if r.change_pct.is_finite() { r.change_pct.abs() } else { -1.0 };
        let changed = |r: &ComparisonRow| matches!(r.verdict, Verdict::Regressed | Verdict::Improved);
        let mut decisive: Vec<&ComparisonRow> = c.rows.iter().filter(|r| c.is_decisive(r)).collect();
        decisive.sort_by_key(|r| variant(r));
        let mut candidates: Vec<&ComparisonRow> = c.rows.iter().filter(|r| !c.is_decisive(r) && changed(r)).collect();
        candidates.sort_by(|a, b| variant(a).cmp(&variant(b)).then(size(b).total_cmp(&size(a))));
        let mut shown: Vec<&ComparisonRow> = Vec::new();
        for r in candidates {
            if shown.iter().filter(|s| s.variant == r.variant).count() < CHANGED_SHOWN {
                shown.push(r);
            }
        }
        let listed = |r: &ComparisonRow| decisive.iter().chain(&shown).any(|s| std::ptr::eq(*s, r));
        let more: Vec<&ComparisonRow> = c.rows.iter().filter(|r| !listed(r)).collect();
        Answer {
            more_side: more.iter().filter(|r| !r.evidence).count(),
            more_evidence: more.iter().filter(|r| r.evidence).count(),
            more_changed: more.iter().filter(|r| changed(r)).count(),
            decisive,
            changed: shown,
        }
    }

    /// `46 more rows (3 side metrics, 43 evidence; none changed)`, or
    /// `None` when every row is listed.
    pub fn more_text(&self) -> Option<String> {
        let total = self.more_side + self.more_evidence;
        if total == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.more_side > 0 {
            let s = if self.more_side == 1 { "" } else { "s" };
            parts.push(format!("{} side metric{s}", self.more_side));
        }
        if self.more_evidence > 0 {
            parts.push(format!("{} evidence", self.more_evidence));
        }
        let changed = match self.more_changed {
            0 => "none changed".to_string(),
            n => format!("{n} changed"),
        };
        let rows = if total == 1 { "row" } else { "rows" };
        Some(format!("{total} more {rows} ({}; {changed})", parts.join(", ")))
    }
}

/// The number a run is shown with: 1-based, as `fslab run` counts runs in
/// its progress lines and `--dry-run`; the stored `seq` (JSON, CSV) is the
/// 0-based plan position.
pub fn run_number(seq: usize) -> usize {
    seq + 1
}

/// `runs 2, 5 (b / untar)`, grouping runs of the same variant and workload
/// (`runs` holds stored seqs; the text shows [`run_number`]s).
pub fn runs_text(runs: &[(usize, String, String)]) -> String {
    let mut groups: Vec<(&str, &str, Vec<usize>)> = Vec::new();
    for (seq, v, w) in runs {
        match groups.iter_mut().find(|g| g.0 == v && g.1 == w) {
            Some(g) => g.2.push(*seq),
            None => groups.push((v, w, vec![*seq])),
        }
    }
    groups
        .iter()
        .map(|(v, w, seqs)| {
            let list: Vec<String> = seqs.iter().map(|s| run_number(*s).to_string()).collect();
            format!("{} {} ({v} / {w})", if seqs.len() == 1 { "run" } else { "runs" }, list.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Remarks on a row beside its verdict.
pub fn notes(r: &ComparisonRow) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = r.runs_needed.filter(|_| r.verdict == Verdict::Inconclusive) {
        notes.push(format!("about {n} runs per variant needed"));
    }
    if let Some(note) = &r.interval_note {
        notes.push(note.clone());
    }
    if r.disagreement {
        notes.push("Welch and Mann-Whitney disagree".to_string());
    }
    if !r.outliers_baseline.is_empty() || !r.outliers_variant.is_empty() {
        notes.push(format!(
            "outlier runs flagged: {} {:?}, {} {:?}",
            r.baseline, r.outliers_baseline, r.variant, r.outliers_variant
        ));
    }
    notes
}

/// `95%`, or `99.2%` at an early sequential look or after the
/// false-coverage-rate adjustment: the level the verdict used.
pub fn ci_level(r: &ComparisonRow) -> String {
    human::percent(r.ci_level * 100.0)
}

/// How a column's cells are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Text,
    /// Right-aligned figures.
    Number,
    /// The verdict word (coloured in HTML, bold in Markdown when decided).
    Verdict,
}

/// One column of the verdict table.
pub struct Column {
    pub header: &'static str,
    pub cell: Cell,
    /// Shown in the compact Markdown table too (HTML shows every column).
    pub compact: bool,
    pub value: fn(&ComparisonRow) -> String,
}

/// The verdict table's columns, in order.
pub const VERDICT_COLUMNS: &[Column] = &[
    Column { header: "metric", cell: Cell::Text, compact: true, value: |r| format!("{}/{}", r.workload, r.metric) },
    Column { header: "unit", cell: Cell::Text, compact: true, value: |r| r.unit.clone() },
    Column { header: "variant", cell: Cell::Text, compact: true, value: |r| r.variant.clone() },
    Column { header: "mean", cell: Cell::Text, compact: true, value: |r| r.mean_kind.label().to_string() },
    Column { header: "baseline", cell: Cell::Number, compact: true, value: |r| human::number(r.mean_baseline) },
    Column { header: "variant mean", cell: Cell::Number, compact: true, value: |r| human::number(r.mean_variant) },
    Column { header: "change", cell: Cell::Number, compact: true, value: |r| human::change_pct(r.change_pct) },
    Column {
        header: "CI",
        cell: Cell::Number,
        compact: true,
        value: |r| format!("{} {}", ci_level(r), human::ci_pct(r.ci_low_pct, r.ci_high_pct)),
    },
    Column { header: "p", cell: Cell::Number, compact: false, value: |r| human::p_value(r.p_value) },
    Column { header: "p (BH)", cell: Cell::Number, compact: true, value: |r| human::p_value(r.p_adjusted) },
    Column {
        header: "Mann-Whitney p",
        cell: Cell::Number,
        compact: false,
        value: |r| r.mann_whitney_p.map(human::p_value).unwrap_or_else(|| human::NONE.into()),
    },
    Column { header: "n", cell: Cell::Number, compact: true, value: |r| format!("{}+{}", r.n_baseline, r.n_variant) },
    Column {
        header: "CV",
        cell: Cell::Number,
        compact: false,
        value: |r| format!("{} / {}", human::percent(r.cv_baseline * 100.0), human::percent(r.cv_variant * 100.0)),
    },
    Column { header: "verdict", cell: Cell::Verdict, compact: true, value: |r| r.verdict.to_string() },
    Column {
        header: "notes",
        cell: Cell::Text,
        compact: true,
        value: |r| role_note(r).into_iter().map(str::to_string).chain(notes(r)).collect::<Vec<_>>().join("; "),
    },
];

/// What the evidence table says above its rows.
pub const EVIDENCE_INTRO: &str = "What the device, the CPU and the kernel did, compared with the same statistics \
     as the workload's metrics. Evidence decides nothing unless the workload names it in `decisive = [...]`.";

/// A row's part in the decision when it is not the plain one (a workload
/// metric its kind decides by, or evidence that decides nothing).
pub fn role_note(r: &ComparisonRow) -> Option<&'static str> {
    match (r.evidence, r.decisive, r.emulated) {
        (true, true, true) if crate::metric::decides_emulated(&r.metric) => Some("decides: emulated run"),
        (true, true, _) => Some("decides: named in `decisive`"),
        (false, false, true) => Some("emulated: wall time did not decide"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(regressed: usize, no_change: usize, inconclusive: usize, needed: &[usize]) -> Tally {
        Tally { regressed, improved: 0, no_change, inconclusive, runs_needed: needed.to_vec() }
    }

    #[test]
    fn sentences_say_what_was_decided() {
        assert_eq!(tally(1, 2, 0, &[]).sentence(), "Decided: 1 regressed, 2 no change.");
        assert_eq!(
            tally(0, 0, 3, &[8, 14]).sentence(),
            "Nothing decided: all 3 comparisons are inconclusive (about 8–14 runs per variant would decide them; \
             no estimate for 1)."
        );
        assert_eq!(
            tally(0, 0, 1, &[6]).sentence(),
            "Nothing decided: the one comparison is inconclusive (about 6 runs per variant would decide it)."
        );
        assert_eq!(
            tally(0, 1, 2, &[]).sentence(),
            "Decided: 1 no change. Not decided: 2 inconclusive (no estimate of the runs that would decide them)."
        );
        assert_eq!(
            tally(0, 1, 2, &[5, 5]).counts_text(),
            "1 no change, 2 inconclusive (about 5 runs per variant would decide them)"
        );
    }

    /// The headline says which rule decided and which baseline drifted,
    /// once per baseline series however many variants are compared with it.
    #[test]
    fn headline_names_the_rule_and_the_drift() {
        use crate::analysis::compare_series;
        use crate::stats::{CompareConfig, Stopping};
        use crate::store::MetricSeries;
        let series = |variant: &str, values: Vec<f64>| MetricSeries {
            workload: "w".into(),
            metric: "t_s".into(),
            unit: "s".into(),
            higher_is_better: false,
            variant: variant.into(),
            values,
        };
        let drifting: Vec<f64> = (0..10).map(|i| 10.0 * (1.0 + 0.01 * i as f64)).collect();
        let steady = vec![10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.1, 9.9, 10.0, 10.05];
        let cfg = CompareConfig { stopping: Stopping::adaptive(5, 20), ..CompareConfig::default() };
        let series = [series("a", drifting), series("b", steady.clone()), series("c", steady)];
        let rows = compare_series(&series, "a", &cfg, Default::default());
        let c = ComparisonData {
            baseline: "a".into(),
            theta: cfg.theta,
            alpha: cfg.alpha,
            variants: vec!["a".into(), "b".into(), "c".into()],
            rows,
        };
        let lines = Headline::new(&c, std::iter::empty()).lines();
        let rules: Vec<&String> = lines.iter().filter(|l| l.starts_with("Rule: ")).collect();
        assert_eq!(rules.len(), 1, "{lines:?}");
        assert!(rules[0].starts_with("Rule: sequential 5..20, look 6 of 16 at n = 10: boundary "), "{lines:?}");
        let drift: Vec<&String> = lines.iter().filter(|l| l.starts_with("Drift: ")).collect();
        assert_eq!(drift.len(), 1, "{lines:?}");
        assert!(drift[0].contains("baseline `a` drifts +0.96% per run"), "{lines:?}");
    }

    /// Under emulation the headline is the instruction count's verdict;
    /// wall time is shown as a side row and the headline says why.
    #[test]
    fn an_emulated_comparison_is_headlined_by_its_instruction_count() {
        use crate::analysis::{compare_series, Roles};
        use crate::store::MetricSeries;
        let series = |metric: &str, variant: &str, values: Vec<f64>| MetricSeries {
            workload: "command".into(),
            metric: metric.into(),
            unit: "s".into(),
            higher_is_better: false,
            variant: variant.into(),
            values,
        };
        let wall_a = vec![1.0, 1.5, 0.7, 1.2, 0.9];
        let wall_b = vec![1.3, 0.8, 1.1, 1.6, 0.6];
        let rows = vec![
            series("wall_s", "a", wall_a),
            series("wall_s", "b", wall_b),
            series(crate::metric::INSTRUCTIONS, "a", vec![1.0e9, 1.001e9, 0.999e9, 1.0e9, 1.0005e9]),
            series(crate::metric::INSTRUCTIONS, "b", vec![1.1e9, 1.101e9, 1.099e9, 1.1e9, 1.1005e9]),
        ];
        let text = "name = \"e\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n\
                    [[workload]]\nkind = \"command\"\ncommand = \"true\"\n";
        let exp = crate::experiment::parse(text, None).unwrap();
        let roles = Roles { workloads: &exp.workloads, emulated_variants: &["b".to_string()] };
        let rows = compare_series(&rows, "a", &crate::stats::CompareConfig::default(), roles);
        let c = ComparisonData { baseline: "a".into(), theta: 0.02, alpha: 0.05, variants: vec![], rows };
        let h = Headline::new(&c, std::iter::empty());
        assert_eq!((h.decisive.regressed, h.decisive.total()), (1, 1), "{h:?}");
        assert_eq!((h.side.total(), h.evidence.total()), (1, 0), "{h:?}");
        let lines = h.lines();
        assert_eq!(lines[0], "Decided: 1 regressed.", "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("Emulated: command/wall_s ran under TCG emulation")), "{lines:?}");
        let wall = c.rows.iter().find(|r| r.metric == "wall_s").unwrap();
        assert_eq!(role_note(wall), Some("emulated: wall time did not decide"));
    }

    /// The answer lists every decisive row variant by variant, then at most
    /// [`CHANGED_SHOWN`] changed rows per variant, largest change first,
    /// and counts the rest (the changed ones it left out among them).
    #[test]
    fn the_answer_lists_decisive_rows_then_the_largest_changes_and_counts_the_rest() {
        use crate::analysis::compare_series;
        use crate::store::MetricSeries;
        let around = |center: f64| -> Vec<f64> {
            [0.0, 0.01, -0.01, 0.005, -0.005].iter().map(|d| center * (1.0 + d)).collect()
        };
        let series = |metric: &str, variant: &str, values: Vec<f64>| MetricSeries {
            workload: "w".into(),
            metric: metric.into(),
            unit: "count".into(),
            higher_is_better: false,
            variant: variant.into(),
            values,
        };
        // Variant b changes seven evidence metrics by 10%…70%, c three by 10%…30%.
        let mut all = Vec::new();
        for (variant, grows) in
            [("a", [0.0; 7]), ("b", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]), ("c", [0.0, 0.0, 0.3, 0.0, 0.2, 0.0, 0.1])]
        {
            all.push(series("wall_s", variant, around(10.0)));
            for (i, grow) in grows.iter().enumerate() {
                all.push(series(&format!("disk/m{i}"), variant, around(100.0 * (1.0 + grow))));
            }
        }
        let rows = compare_series(&all, "a", &crate::stats::CompareConfig::default(), Default::default());
        let c = ComparisonData {
            baseline: "a".into(),
            theta: 0.02,
            alpha: 0.05,
            variants: vec!["a".into(), "b".into(), "c".into()],
            rows,
        };
        let answer = Answer::new(&c);
        let names =
            |rows: &[&ComparisonRow]| rows.iter().map(|r| format!("{} {}", r.variant, r.metric)).collect::<Vec<_>>();
        assert_eq!(names(&answer.decisive), ["b wall_s", "c wall_s"]);
        assert_eq!(
            names(&answer.changed),
            ["b disk/m6", "b disk/m5", "b disk/m4", "b disk/m3", "b disk/m2", "c disk/m2", "c disk/m4", "c disk/m6"]
        );
        assert_eq!((answer.more_side, answer.more_evidence, answer.more_changed), (0, 6, 2), "{answer:?}");
        assert_eq!(answer.more_text().unwrap(), "6 more rows (6 evidence; 2 changed)");
    }

    #[test]
    fn runs_are_grouped() {
        let runs =
            vec![(2, "b".to_string(), "w".to_string()), (5, "b".into(), "w".into()), (7, "a".into(), "w".into())];
        // Stored seqs are 0-based; people see runs counted from 1.
        assert_eq!(runs_text(&runs), "runs 3, 6 (b / w); run 8 (a / w)");
    }
}
