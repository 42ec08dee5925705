//! `fslab plan`: runs per variant needed to detect a change.

use serde::Serialize;

use crate::analysis::{render_plan, PlanLine};
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
