//! What one finished run produced: the unit the runner hands to the store.

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::metric::Metric;
use crate::monitor::MonitorData;

/// Outcome of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    Failed,
}

impl RunStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
        }
    }
}

/// The mount as the kernel reports it after mounting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MountFacts {
    /// Block device or source (e.g. `/dev/loop3`).
    pub source: String,
    pub fstype: String,
    /// Per-mount options from `/proc/self/mountinfo` (field 6).
    pub mount_options: String,
    /// Superblock options from `/proc/self/mountinfo` (after the `-` separator).
    pub super_options: String,
    /// ext4 only: `/proc/fs/ext4/<dev>/options`, which also lists defaults.
    pub fs_options: Option<String>,
}

/// Everything one run produced, written to the store in one transaction
/// (and read back whole by `Store::run_record`); readers of many runs get
/// the store's lighter `StoredRun` (no samples or extras, plus the run's
/// id, uuid and shard there).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunRecord {
    /// Position in the experiment's plan (0-based).
    pub seq: usize,
    /// Repetition round (0-based); one round runs every variant × workload once.
    pub round: usize,
    pub variant: String,
    /// Workload label (unique within the experiment).
    pub workload: String,
    pub status: Option<RunStatus>,
    pub error: Option<String>,
    /// Unix time in seconds when the run started.
    pub started_at: f64,
    /// Wall time of the whole run including provisioning and teardown.
    pub wall_s: f64,
    pub metrics: Vec<Metric>,
    pub monitor: Option<MonitorData>,
    pub mount: Option<MountFacts>,
    /// Filesystem geometry text (`dumpe2fs -h`, `xfs_info`, `btrfs inspect-internal dump-super`).
    pub geometry: Option<String>,
    /// What the run's monitors stored, as `(key, JSON)` in the order they
    /// stored it: each monitor (`runner::monitors`) names its keys and owns
    /// the serde type behind them, so the store keeps them without knowing
    /// any monitor (`run_extras`, one row each). Written and read through
    /// [`RunRecord::put_extra`] and [`RunRecord::extra`].
    #[serde(default)]
    pub extras: Vec<(String, serde_json::Value)>,
    /// Problems that did not fail the run (e.g. a snapshot that could not be taken).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Where the run happened: the host, or a VM booting the variant's kernel.
    #[serde(default)]
    pub place: Option<RunPlace>,
}

/// Where a run happened. Runs in different places (host against VM, KVM
/// against emulation, different VM sizes) differ in timing wholesale, so
/// comparisons between them are marked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPlace {
    /// `host` or `vm`.
    pub kind: String,
    /// `uname -r` where the run happened (the guest's own for VM runs).
    pub kernel_release: String,
    /// VM runs: `kvm` or `tcg` (emulated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// VM runs: extra kernel command line words the variant asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmdline: Vec<String>,
    /// VM runs: how long the VM that ran it took to boot (0 when reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_s: Option<f64>,
    /// VM runs: how long the VM's warm-up took (`vm.warmup`: one run, not
    /// stored, and a wait to at least 5 s), with the VM's first measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_s: Option<f64>,
    /// E.g. the emulation warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl RunRecord {
    /// Stores a monitor's typed output under `key` (after what is there).
    pub fn put_extra(&mut self, key: &str, value: &impl Serialize) -> anyhow::Result<()> {
        let json = serde_json::to_value(value).with_context(|| format!("storing extra {key:?}"))?;
        self.extras.push((key.to_string(), json));
        Ok(())
    }

    /// A monitor's output stored under `key`, as its type; `None` when the
    /// run has none, an error naming the key when it does not parse.
    pub fn extra<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<anyhow::Result<T>> {
        let (_, json) = self.extras.iter().find(|(k, _)| k == key)?;
        Some(serde_json::from_value(json.clone()).with_context(|| format!("extra {key:?} does not parse")))
    }
}

impl RunPlace {
    /// The running host.
    pub fn host() -> RunPlace {
        RunPlace { kind: "host".to_string(), kernel_release: crate::sys::kernel_release(), ..RunPlace::default() }
    }

    /// What makes timings of two places incomparable (the kernel itself is
    /// what an experiment compares, so it is left out).
    pub fn timing_key(&self) -> (String, Option<String>, Option<u32>, Option<u64>) {
        (self.kind.clone(), self.accelerator.clone(), self.cpus, self.memory_mib)
    }

    /// `host`, `vm kvm 2 CPUs 2048 MiB`, `vm emulated (tcg) 2 CPUs 2048 MiB`.
    pub fn describe(&self) -> String {
        if self.kind == "host" {
            return "host".to_string();
        }
        let accel = match self.accelerator.as_deref() {
            Some("tcg") => "emulated (tcg)".to_string(),
            Some(a) => a.to_string(),
            None => "?".to_string(),
        };
        format!("vm {accel} {} CPUs {} MiB", self.cpus.unwrap_or(0), self.memory_mib.unwrap_or(0))
    }

    pub fn is_emulated(&self) -> bool {
        self.accelerator.as_deref() == Some("tcg")
    }
}

/// Extra kind: the run's notes as a JSON array of strings.
pub const EXTRA_NOTES: &str = "notes";
/// Extra kind: where the run happened ([`RunPlace`]).
pub const EXTRA_PLACE: &str = "place";
