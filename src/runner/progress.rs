//! Progress reporting: run i of N, variant, workload, ETA.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::experiment::PlannedRun;
use crate::record::{RunRecord, RunStatus};

/// Receives progress events from the runner.
pub trait Observer {
    /// `planned` runs are known now; at most `max` if adaptive rounds are added.
    fn start(&mut self, _planned: usize, _max: usize) {}
    /// More runs were added (adaptive round).
    fn extend(&mut self, _runs: usize) {}
    fn started(&mut self, _run: &PlannedRun, _variant: &str, _workload: &str) {}
    fn finished(&mut self, _run: &PlannedRun, _record: &RunRecord) {}
    fn skipped(&mut self, _run: &PlannedRun) {}
    fn message(&mut self, _text: &str) {}
    fn done(&mut self) {}
}

/// Reports nothing (library use, tests).
pub struct Silent;
impl Observer for Silent {}

/// A progress bar on a terminal; plain lines on stderr otherwise, written
/// through [`crate::output::diagnostic`] so a closed stderr never stops a run.
pub struct Console {
    bar: Option<ProgressBar>,
    total: usize,
    completed: usize,
    started: Instant,
    measured_runs: usize,
}

impl Console {
    pub fn new() -> Self {
        Console { bar: None, total: 0, completed: 0, started: Instant::now(), measured_runs: 0 }
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => crate::output::diagnostic(text),
        }
    }

    fn eta(&self) -> String {
        if self.measured_runs == 0 {
            return "?".into();
        }
        let per_run = self.started.elapsed().as_secs_f64() / self.measured_runs as f64;
        let left = per_run * self.total.saturating_sub(self.completed) as f64;
        humantime::format_duration(std::time::Duration::from_secs(left.round() as u64)).to_string()
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for Console {
    fn start(&mut self, planned: usize, _max: usize) {
        // A Console may watch several experiments in turn (bisect-options).
        self.total = planned;
        self.completed = 0;
        self.measured_runs = 0;
        self.started = Instant::now();
        if std::io::stdout().is_terminal() {
            let bar = ProgressBar::new(planned as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} run {pos}/{len}  ETA {eta}  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            self.bar = Some(bar);
        }
    }

    fn extend(&mut self, runs: usize) {
        self.total += runs;
        if let Some(bar) = &self.bar {
            bar.set_length(self.total as u64);
        }
    }

    fn started(&mut self, run: &PlannedRun, variant: &str, workload: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("{variant} / {workload} (round {})", run.round + 1)),
            None => crate::output::diagnostic(&format!(
                "run {}/{}: variant {variant}, workload {workload}, round {} (ETA {})",
                self.completed + 1,
                self.total,
                run.round + 1,
                self.eta()
            )),
        }
    }

    fn finished(&mut self, _run: &PlannedRun, record: &RunRecord) {
        self.completed += 1;
        self.measured_runs += 1;
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if record.status != Some(RunStatus::Ok) {
            // 1-based, as the progress lines and the dry run count runs.
            self.line(&format!(
                "run {} ({} / {}) failed: {}",
                record.seq + 1,
                record.variant,
                record.workload,
                record.error.as_deref().unwrap_or("unknown error")
            ));
        }
    }

    fn skipped(&mut self, _run: &PlannedRun) {
        self.completed += 1;
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn message(&mut self, text: &str) {
        self.line(text);
    }

    fn done(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
