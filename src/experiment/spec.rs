//! The keys of an experiment file that belong to the experiment itself (top
//! level, a variant's common settings, a workload's common settings), as
//! serde types that mirror the TOML. Filesystem kinds and workload kinds
//! declare their own keys in their own files (see [`crate::keys`]).
//!
//! Every struct denies unknown keys so a typo is an error naming its line,
//! never a silently ignored setting.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

use crate::testbed::Throttle;
use crate::units::{Bytes, Seconds};

/// Most rounds an experiment may plan: a question that needs more runs than
/// this is better answered by making the runs less noisy.
pub const MAX_REPETITIONS: u32 = 1000;

/// The top level, without `[defaults]`, `[[variant]]` and `[[workload]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopKeys {
    pub name: Option<Spanned<String>>,
    pub description: Option<String>,
    pub repetitions: Option<Spanned<Repetitions>>,
    pub order: Option<RunOrder>,
    pub seed: Option<u64>,
    pub workdir: Option<String>,
    /// Variant the others are compared against (default: the first).
    pub baseline: Option<Spanned<String>>,
    /// Equivalence band as a fraction (0.02 = ±2%).
    pub theta: Option<Spanned<f64>>,
    /// Significance level.
    pub alpha: Option<Spanned<f64>>,
    /// Monitor sampling interval (default 1s, at least 100ms).
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
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantKeys {
    pub name: Option<Spanned<String>>,
    pub fs: Option<Spanned<String>>,
    pub size: Option<Spanned<Bytes>>,
    pub mkfs: Option<Spanned<Vec<String>>>,
    pub mount: Option<Spanned<String>>,
    pub throttle: Option<Spanned<Throttle>>,
    /// The medium the testbed's image behaves like (`{ model = "sdcard" }`).
    pub device: Option<Spanned<toml::Value>>,
    pub read_ahead_kb: Option<Spanned<u32>>,
    pub scheduler: Option<Spanned<String>>,
    /// Filesystem sysfs tunables by name (ext4 `mb_max_to_scan`, …).
    pub sysfs: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// The kernel to boot in a VM for this variant's runs (none: the host).
    pub kernel: Option<Spanned<toml::Value>>,
    /// How that VM is sized and run.
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
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadKeys {
    pub kind: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub timeout: Option<Spanned<Seconds>>,
    pub cache: Option<CachePolicy>,
}
