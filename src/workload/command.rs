//! `command`: the user's own shell command, run in the mounted testbed.
//!
//! This is the one place fslab hands a user string to a shell, by design.

use anyhow::Result;

use super::{RunContext, Workload};
use crate::metric::Metric;

/// A shell command with optional unmeasured `prepare` and `cleanup` steps.
pub struct Command {
    pub command: String,
    pub prepare: Option<String>,
    pub cleanup: Option<String>,
}

impl Workload for Command {
    fn kind(&self) -> &'static str {
        "command"
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        if let Some(script) = &self.prepare {
            ctx.execute(ctx.shell(script), "prepare command")?;
        }
        Ok(())
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let outcome = ctx.execute(ctx.shell(&self.command), "command")?;
        let mut metrics = vec![
            Metric::lower("wall_s", "s", outcome.wall_s),
            Metric::lower("user_s", "s", outcome.user_s),
            Metric::lower("sys_s", "s", outcome.sys_s),
        ];
        // `fslab-metric NAME VALUE UNIT higher|lower` lines the command printed.
        let truncated = outcome.stdout_tail.len() >= super::process::TAIL_BYTES;
        metrics.extend(super::reported::parse(&outcome.stdout_tail, truncated, &["wall_s", "user_s", "sys_s"])?);
        Ok(metrics)
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        if let Some(script) = &self.cleanup {
            ctx.execute(ctx.shell(script), "cleanup command")?;
        }
        Ok(())
    }
}
