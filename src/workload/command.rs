//! `command`: the user's own shell command, run in the mounted testbed.
//!
//! This is the one place fslab hands a user string to a shell, by design.
//! Keys: `command` (required), `prepare` and `cleanup` (unmeasured, before
//! and after the measured command). Metrics: `wall_s`, `user_s`, `sys_s`,
//! plus any `fslab-metric NAME VALUE UNIT higher|lower` line the command
//! prints on stdout (see [`super::reported`]).

use std::ops::Range;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;

/// `command` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandKeys {
    command: Option<Spanned<String>>,
    prepare: Option<Spanned<String>>,
    cleanup: Option<Spanned<String>>,
}

/// A shell command with optional unmeasured `prepare` and `cleanup` steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandParams {
    pub command: String,
    pub prepare: Option<String>,
    pub cleanup: Option<String>,
}

impl Kind for CommandParams {
    const NAME: &'static str = "command";
    const ABOUT: &'static str = "your shell command (`prepare`, `cleanup` optional)";
    const METRICS: &'static str =
        "`wall_s`, `user_s`, `sys_s`, and `fslab-metric NAME VALUE UNIT higher|lower` stdout lines";
    type Keys = CommandKeys;

    fn resolve(keys: CommandKeys, src: &Source, at: Range<usize>) -> Result<Self> {
        let Some(command) = &keys.command else {
            return Err(src.err(at, "command", "a `command` workload needs `command = \"...\"`"));
        };
        if command.get_ref().trim().is_empty() {
            return Err(src.err(command.span(), "command", "must not be empty"));
        }
        Ok(CommandParams {
            command: command.get_ref().clone(),
            prepare: keys.prepare.map(Spanned::into_inner),
            cleanup: keys.cleanup.map(Spanned::into_inner),
        })
    }

    /// CPU times are side metrics; `wall_s` and every metric the command
    /// reports itself (`fslab-metric` lines) decide.
    fn is_decisive(&self, metric: &str) -> bool {
        metric != "user_s" && metric != "sys_s"
    }

    fn build(&self, _env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Command { params: self.clone() })
    }
}

/// The runnable command workload.
pub struct Command {
    pub params: CommandParams,
}

impl Workload for Command {
    fn kind(&self) -> &'static str {
        "command"
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        if let Some(script) = &self.params.prepare {
            ctx.execute(ctx.shell(script), "prepare command")?;
        }
        Ok(())
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let outcome = ctx.execute(ctx.shell(&self.params.command), "command")?;
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
        if let Some(script) = &self.params.cleanup {
            ctx.execute(ctx.shell(script), "cleanup command")?;
        }
        Ok(())
    }
}
