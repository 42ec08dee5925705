//! The measured work. One file per workload kind; [`workload_kinds!`] at
//! the bottom is the one list that names them all.
//!
//! A kind's file holds everything about it: its keys as written in a
//! `[[workload]]` table and how they are checked ([`Kind::resolve`]), what
//! `--quick` does to it, which metrics decide an adaptive experiment,
//! whether it can run on a read-only image, its documentation line, and the
//! runnable [`Workload`] it builds. Parsing, `--quick`, the docs table and
//! the CLI loop over the list; there is no fallback arm to forget.
//!
//! A workload never mounts anything and never computes statistics: it gets a
//! ready directory in a [`RunContext`], does its unmeasured preparation, then
//! its measured part, and returns named [`Metric`]s.

pub mod archive;
pub mod coldstart;
pub mod command;
pub mod content;
pub mod filemix;
pub mod fio;
pub mod fsync_latency;
pub mod listing;
pub mod metadata;
pub mod process;
pub mod reported;
pub mod shell1;
pub mod untar;

use std::fmt::Debug;
use std::ops::Range;
use std::path::Path;

use anyhow::{bail, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::keys::{self, Source, Table};
use crate::metric::Metric;
pub use process::{ProcessOutcome, RunContext};

/// What building a runnable workload needs besides its parameters.
#[derive(Clone, Copy, Debug)]
pub struct BuildEnv {
    /// The experiment's seed (generated inputs and job streams derive from it).
    pub seed: u64,
    /// `cache = "cold"`: the run starts with dropped caches.
    pub cold: bool,
}

/// One kind of workload as experiment files name it: its parameters type.
pub trait Kind: Sized + Clone + Debug + PartialEq + Serialize + DeserializeOwned {
    /// The `kind = "…"` value.
    const NAME: &'static str;
    /// What it does, one line (README table, `--help`).
    const ABOUT: &'static str;
    /// The metrics it reports, one line.
    const METRICS: &'static str;
    /// It can run on a read-only image testbed (it writes its tree in
    /// [`Workload::populate`]).
    const READ_ONLY: bool = false;
    /// It runs for a fixed time and counts the work done (a throughput
    /// score), so the guest's instruction count over its measured part
    /// follows the emulator's speed, i.e. the host's load, and says nothing
    /// about the kernel: under emulation its own metrics decide.
    const FIXED_TIME: bool = false;

    /// The kind's own keys as written in the table (a `deny_unknown_fields`
    /// struct with `Spanned` values).
    type Keys: DeserializeOwned;

    /// Check the keys and apply defaults. `at` is the span of the table's
    /// `kind` value, where errors about a missing key point.
    fn resolve(keys: Self::Keys, src: &Source, at: Range<usize>) -> Result<Self>;

    /// `--quick`: scale down in place (short durations, less data, the
    /// first sweep points).
    fn quick(&mut self) {}

    /// Does `metric` decide an adaptive experiment? Side metrics (CPU time,
    /// phase splits) are reported but do not hold an experiment open.
    fn is_decisive(&self, _metric: &str) -> bool {
        true
    }

    /// The runnable workload.
    fn build(&self, env: &BuildEnv) -> Box<dyn Workload>;
}

/// What the docs and `--help` say about a kind.
#[derive(Clone, Copy, Debug)]
pub struct KindInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub metrics: &'static str,
    pub keys: fn() -> &'static [&'static str],
    pub read_only: bool,
}

/// Declares the workload kinds: each `Variant => module::Params` line adds
/// a kind whose file implements [`Kind`] for `Params`.
macro_rules! workload_kinds {
    ($($variant:ident => $module:ident::$params:ident),* $(,)?) => {
        /// Kind-specific workload parameters, checked, defaults applied.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "kebab-case")]
        pub enum WorkloadParams {
            $($variant($module::$params),)*
        }

        /// Every kind, in list order.
        pub const KINDS: &[KindInfo] = &[$(KindInfo {
            name: <$module::$params as Kind>::NAME,
            about: <$module::$params as Kind>::ABOUT,
            metrics: <$module::$params as Kind>::METRICS,
            keys: keys::names::<<$module::$params as Kind>::Keys>,
            read_only: <$module::$params as Kind>::READ_ONLY,
        }),*];

        impl WorkloadParams {
            /// Parse and check the kind-specific keys left in `table`.
            pub fn resolve(kind: &str, kind_span: Range<usize>, table: Table, src: &Source) -> Result<WorkloadParams> {
                $(if kind == <$module::$params as Kind>::NAME {
                    check_foreign_keys(kind, &table, src)?;
                    let keys = table.parse::<<$module::$params as Kind>::Keys>(src)?;
                    return Ok(WorkloadParams::$variant(<$module::$params as Kind>::resolve(keys, src, kind_span)?));
                })*
                Err(src.err(kind_span, "kind", format!("unknown workload kind `{kind}` ({})", names().join(", "))))
            }

            /// The `kind = "…"` value.
            pub fn kind(&self) -> &'static str {
                match self { $(WorkloadParams::$variant(_) => <$module::$params as Kind>::NAME,)* }
            }

            /// Can it run on a read-only image testbed?
            pub fn read_only(&self) -> bool {
                match self { $(WorkloadParams::$variant(_) => <$module::$params as Kind>::READ_ONLY,)* }
            }

            /// Does it run for a fixed time (see [`Kind::FIXED_TIME`])?
            pub fn fixed_time(&self) -> bool {
                match self { $(WorkloadParams::$variant(_) => <$module::$params as Kind>::FIXED_TIME,)* }
            }

            /// `--quick`: scale down in place.
            pub fn quick(&mut self) {
                match self { $(WorkloadParams::$variant(p) => p.quick(),)* }
            }

            /// Does `metric` decide an adaptive experiment?
            pub fn is_decisive(&self, metric: &str) -> bool {
                match self { $(WorkloadParams::$variant(p) => p.is_decisive(metric),)* }
            }

            /// The runnable workload.
            pub fn build(&self, env: &BuildEnv) -> Box<dyn Workload> {
                match self { $(WorkloadParams::$variant(p) => p.build(env),)* }
            }
        }
    };
}

workload_kinds! {
    Untar => untar::UntarParams,
    Command => command::CommandParams,
    Shell1 => shell1::Shell1Params,
    Metadata => metadata::MetadataParams,
    Fio => fio::FioParams,
    Filemix => filemix::FilemixParams,
    Coldstart => coldstart::ColdstartParams,
    FsyncLatency => fsync_latency::FsyncLatencyParams,
}

/// Names of every kind, in list order.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).collect()
}

/// Names of the kinds that can run on read-only image testbeds.
pub fn read_only_names() -> Vec<&'static str> {
    KINDS.iter().filter(|k| k.read_only).map(|k| k.name).collect()
}

/// A key that belongs to another kind gets a message saying whose it is.
fn check_foreign_keys(kind: &str, table: &Table, src: &Source) -> Result<()> {
    let own = KINDS.iter().find(|k| k.name == kind).map(|k| (k.keys)()).unwrap_or_default();
    for (key, span) in table.keys() {
        if own.contains(&key) {
            continue;
        }
        let owners: Vec<&str> = KINDS.iter().filter(|k| (k.keys)().contains(&key)).map(|k| k.name).collect();
        if !owners.is_empty() {
            let takes = if own.is_empty() { "no settings of its own".to_string() } else { own.join(", ") };
            return Err(src.err(
                span,
                key,
                format!(
                    "is a setting of `{}` workloads, not of `{kind}` workloads (`{kind}` takes {takes})",
                    owners.join("`, `")
                ),
            ));
        }
    }
    Ok(())
}

/// One kind of measured work, ready to run.
pub trait Workload: Send {
    /// Short kind name as written in experiment files (`untar`, `command`, …).
    fn kind(&self) -> &'static str;

    /// Generate inputs that are reused by every run (archives, file trees,
    /// input texts) under `cache_dir`. Called once per experiment, before any
    /// testbed exists, outside every measured region.
    fn prepare_inputs(&mut self, _cache_dir: &Path) -> Result<()> {
        Ok(())
    }

    /// About how many bytes one run writes into the testbed, when known
    /// (after [`prepare_inputs`](Self::prepare_inputs)): the runner checks
    /// the work directory's free space against it before the first run.
    fn footprint(&self) -> Option<u64> {
        None
    }

    /// Per-run unmeasured preparation inside the mounted testbed.
    /// Runs before caches are dropped for cold runs.
    fn prepare(&mut self, _ctx: &RunContext) -> Result<()> {
        Ok(())
    }

    /// Bring inputs that live outside the testbed back into the page cache
    /// after a cold-cache drop, so that only the testbed starts cold.
    fn warm_inputs(&mut self) -> Result<()> {
        Ok(())
    }

    /// Write the content of a read-only image testbed (squashfs, erofs) into
    /// the empty staging directory `dir`, before the image is built from it.
    /// Called after [`prepare_inputs`](Self::prepare_inputs), outside every
    /// measured region. Workloads that need a writable testbed keep the
    /// default, which refuses.
    fn populate(&mut self, _dir: &Path) -> Result<()> {
        bail!("workload `{}` cannot run on a read-only image testbed", self.kind())
    }

    /// The measured part. Returns the workload's metrics.
    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>>;

    /// Per-run unmeasured cleanup, called after `run` even when it failed.
    fn cleanup(&mut self, _ctx: &RunContext) -> Result<()> {
        Ok(())
    }
}

/// An empty directory at `path`, removing what an earlier run left there.
pub(crate) fn fresh_dir(path: &Path) -> Result<()> {
    use anyhow::Context;
    remove_tree(path)?;
    std::fs::create_dir(path).with_context(|| format!("creating {}", path.display()))
}

/// Remove the tree at `path` if there is one (a workload's `cleanup`).
pub(crate) fn remove_tree(path: &Path) -> Result<()> {
    use anyhow::Context;
    if path.exists() {
        std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

/// Shared checks of kind keys, so each kind states its bounds in one line.
pub mod check {
    use std::ops::RangeInclusive;
    use std::time::Duration;

    use anyhow::Result;
    use toml::Spanned;

    use crate::keys::Source;
    use crate::units::Seconds;

    /// Most levels a sweep list may have (each level is a measured part of
    /// every run, so the list is bounded as repetitions are).
    pub const MAX_LEVELS: usize = 64;

    /// A sweep list (`concurrency`, `users`, `readers`): non-empty, at most
    /// [`MAX_LEVELS`] long, each level in 1..=max, no repeats.
    pub fn levels(
        src: &Source,
        value: Option<&Spanned<Vec<i64>>>,
        key: &str,
        default: &[u32],
        example: &str,
        max: i64,
    ) -> Result<Vec<u32>> {
        let Some(list) = value else { return Ok(default.to_vec()) };
        if list.get_ref().is_empty() {
            return Err(src.err(list.span(), key, format!("needs at least one level, e.g. {example}")));
        }
        if list.get_ref().len() > MAX_LEVELS {
            let msg = format!("has {} levels; at most {MAX_LEVELS}", list.get_ref().len());
            return Err(src.err(list.span(), key, msg));
        }
        let mut out: Vec<u32> = Vec::new();
        for &level in list.get_ref() {
            if !(1..=max).contains(&level) {
                return Err(src.err(list.span(), key, format!("{level} is not between 1 and {max}")));
            }
            if out.contains(&(level as u32)) {
                return Err(src.err(list.span(), key, format!("{level} is listed twice")));
            }
            out.push(level as u32);
        }
        Ok(out)
    }

    /// A measured duration: at least 1 s.
    pub fn duration(src: &Source, value: Option<&Spanned<Seconds>>, default: Duration) -> Result<Duration> {
        match value {
            None => Ok(default),
            Some(d) if d.get_ref().0 < Duration::from_secs(1) => {
                Err(src.err(d.span(), "duration", "must be at least 1s"))
            }
            Some(d) => Ok(d.get_ref().0),
        }
    }

    /// A count in `range`.
    pub fn count(
        src: &Source,
        value: Option<&Spanned<i64>>,
        key: &str,
        default: i64,
        range: RangeInclusive<i64>,
    ) -> Result<i64> {
        match value {
            None => Ok(default),
            Some(v) if range.contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(src.err(v.span(), key, format!("must be between {} and {}", range.start(), range.end()))),
        }
    }

    /// A fraction of the work (`scale`): in (0, 1].
    pub fn scale(src: &Source, value: Option<&Spanned<f64>>) -> Result<f64> {
        match value {
            None => Ok(1.0),
            Some(s) if *s.get_ref() > 0.0 && *s.get_ref() <= 1.0 => Ok(*s.get_ref()),
            Some(s) => Err(src.err(s.span(), "scale", "must be greater than 0 and at most 1")),
        }
    }

    /// A fraction in [0, 1] (`compressibility`).
    pub fn unit_fraction(src: &Source, value: Option<&Spanned<f64>>, key: &str, default: f64) -> Result<f64> {
        match value {
            None => Ok(default),
            Some(c) if (0.0..=1.0).contains(c.get_ref()) => Ok(*c.get_ref()),
            Some(c) => Err(src.err(c.span(), key, "must be between 0 and 1")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serde tag of each kind is the name experiment files use.
    #[test]
    fn serde_names_are_the_kind_names() {
        let src = Source { text: "", origin: "t", base_dir: Path::new("/") };
        for info in KINDS {
            // Every kind has defaults for all keys but `command` and `fio`.
            if ["command", "fio"].contains(&info.name) {
                continue;
            }
            let params = WorkloadParams::resolve(info.name, 0..0, Table::empty(0..0), &src).unwrap();
            assert_eq!(params.kind(), info.name);
            let json = serde_json::to_value(&params).unwrap();
            assert_eq!(json["kind"], info.name);
            assert_eq!(serde_json::from_value::<WorkloadParams>(json).unwrap(), params);
        }
    }
}
