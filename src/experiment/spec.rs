//! The keys of an experiment file that belong to the experiment itself (top
//! level, a variant's common settings, a workload's common settings), as
//! serde types that mirror the TOML. Filesystem kinds and workload kinds
//! declare their own keys in their own files (see [`crate::keys`]).
//!
//! Every struct denies unknown keys so a typo is an error naming its line,
//! never a silently ignored setting.

use std::collections::BTreeMap;
use std::fmt;

use documented::DocumentedFieldsOpt;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

use crate::testbed::Throttle;
use crate::units::{Bytes, Seconds};

/// Most rounds an experiment may plan: a question that needs more runs than
/// this is better answered by making the runs less noisy.
pub const MAX_REPETITIONS: u32 = 1000;

/// The top level, without `[defaults]`, `[[variant]]` and `[[workload]]`.
///
/// Each field's doc comment is its row in the README's key table (generated
/// by `cli/reference.rs`): it says what a user writes and what it means.
#[derive(Debug, Deserialize, DocumentedFieldsOpt)]
#[serde(deny_unknown_fields)]
pub struct TopKeys {
    /// The experiment's name (stored, shown by `list` and reports).
    pub name: Option<Spanned<String>>,
    /// Free text, stored with the experiment.
    pub description: Option<String>,
    /// Runs per variant and workload: `5`, or `{ min, max }` for adaptive repetition.
    pub repetitions: Option<Spanned<Repetitions>>,
    /// `interleaved` (default: A B A B …), `randomized` (each round shuffled by `seed`) or `grouped`.
    pub order: Option<RunOrder>,
    /// Seed for run order and generated content (default 1).
    pub seed: Option<u64>,
    /// Where testbeds are built (default `/var/tmp/fslab`).
    pub workdir: Option<String>,
    /// The variant the others are compared against (default: the first).
    pub baseline: Option<Spanned<String>>,
    /// Equivalence band as a fraction (0.02 = ±2%, the default).
    pub theta: Option<Spanned<f64>>,
    /// Significance level (default 0.05).
    pub alpha: Option<Spanned<f64>>,
    /// Device and CPU sampling interval (default `1s`, at least `100ms`).
    pub sample_interval: Option<Spanned<Seconds>>,
}

/// `repetitions = 5` or `repetitions = { min = 5, max = 20 }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Repetitions {
    Fixed(u32),
    Adaptive { min: u32, max: u32 },
}

impl<'de> Deserialize<'de> for Repetitions {
    /// By hand, so a wrong type says what is expected instead of serde's
    /// "did not match any variant of untagged enum".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "a number of runs (5) or a range ({ min = 5, max = 20 })";
        impl<'de> Visitor<'de> for V {
            type Value = Repetitions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Repetitions, E> {
                u32::try_from(v).map(Repetitions::Fixed).map_err(|_| E::custom(format!("{v} is not {EXPECTED}")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Repetitions, E> {
                u32::try_from(v).map(Repetitions::Fixed).map_err(|_| E::custom(format!("{v} is not {EXPECTED}")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Repetitions, A::Error> {
                let (mut min, mut max) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "min" => min = Some(map.next_value::<u32>()?),
                        "max" => max = Some(map.next_value::<u32>()?),
                        other => return Err(de::Error::custom(format!("unknown key `{other}` (expected {EXPECTED})"))),
                    }
                }
                match (min, max) {
                    (Some(min), Some(max)) => Ok(Repetitions::Adaptive { min, max }),
                    _ => Err(de::Error::custom(format!("needs both `min` and `max` ({EXPECTED})"))),
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// How runs of different variants are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOrder {
    /// Each round runs every variant once (A B A B …): drift hits all equally.
    #[default]
    Interleaved,
    /// Each round's runs shuffled with the seed.
    Randomized,
    /// All runs of a variant back to back (A A … B B …).
    Grouped,
}

impl fmt::Display for RunOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunOrder::Interleaved => "interleaved",
            RunOrder::Randomized => "randomized",
            RunOrder::Grouped => "grouped",
        })
    }
}

/// A `[[variant]]`'s (or `[defaults]`') settings every filesystem kind
/// understands; image kinds' own keys are split off first.
#[derive(Debug, Default, Deserialize, DocumentedFieldsOpt)]
#[serde(deny_unknown_fields)]
pub struct VariantKeys {
    /// The variant's name (letters, digits and `. _ - = +`, not starting with `-`).
    pub name: Option<Spanned<String>>,
    /// The testbed: a filesystem kind (table below) or `dir:/path` (an existing directory).
    pub fs: Option<Spanned<String>>,
    /// The testbed image's size (`"2GiB"`).
    pub size: Option<Spanned<Bytes>>,
    /// Extra mkfs arguments (`["-O", "^has_journal"]`).
    pub mkfs: Option<Spanned<Vec<String>>>,
    /// Mount options (`"noatime,mb_optimize_scan=1"`); each is read back after mounting.
    pub mount: Option<Spanned<String>>,
    /// blk-throttle limits on the testbed's device (`{ read_bps, write_bps, read_iops, write_iops }`).
    pub throttle: Option<Spanned<Throttle>>,
    /// The medium the testbed's image behaves like (`{ model = "sdcard" }`; see Media models).
    pub device: Option<Spanned<toml::Value>>,
    /// The testbed device's read-ahead in KiB.
    pub read_ahead_kb: Option<Spanned<u32>>,
    /// The testbed device's I/O scheduler (`none`, `mq-deadline`, …).
    pub scheduler: Option<Spanned<String>>,
    /// Filesystem sysfs tunables by name (ext4 `mb_max_to_scan`, …).
    pub sysfs: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// The kernel to boot in a VM for this variant's runs (none: the host; see Kernels under test).
    pub kernel: Option<Spanned<toml::Value>>,
    /// How that VM is sized and run (`{ cpus, memory, accel, boot, boot_timeout, cmdline, warmup, udev }`; `warmup`: run each VM's first run once unrecorded before it, by default under TCG; `udev = true`: let the guest's init run udev's coldplug and settle, which fslab skips by default).
    pub vm: Option<Spanned<super::place::VmKeys>>,
}

/// Cache state at the start of the measured part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// Fresh filesystem and page cache dropped before the measured part.
    #[default]
    Cold,
    /// Fresh filesystem, caches left as preparation left them.
    Warm,
}

/// A `[[workload]]`'s settings every kind has; the kind's own keys are
/// parsed by the kind.
#[derive(Debug, Deserialize, DocumentedFieldsOpt)]
#[serde(deny_unknown_fields)]
pub struct WorkloadKeys {
    /// The workload kind (table below); the kind's own keys sit beside it.
    pub kind: Option<Spanned<String>>,
    /// The workload's name (default: its kind).
    pub name: Option<Spanned<String>>,
    /// Longest a measured run may take before it is stopped and counted failed.
    pub timeout: Option<Spanned<Seconds>>,
    /// `cold` (default: fresh filesystem, caches dropped before the measured part) or `warm`.
    pub cache: Option<CachePolicy>,
    /// Evidence metrics that also decide this workload (adaptive stopping, the headline), e.g. `["disk/busy_s"]`; otherwise evidence is compared and shown but decides nothing. Under emulation (TCG) only the instruction count (and `media/busy_s` on a media model) decides by default (not for fixed-time kinds, `shell1` and `filemix`, whose own scores decide); naming `decisive` restores the kind's own metrics plus these.
    pub decisive: Option<Spanned<Vec<Spanned<String>>>>,
}
