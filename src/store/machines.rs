//! Machines runs ran on: one `machines` row per distinct identity,
//! referenced by each run.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::columns::{from_row, insert_one};
use super::sql::{params, Sql, Value};
use super::{MetricSeries, Store};
use crate::inspect::machine::Machine;

/// A machine as stored, with its store-local id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredMachine {
    pub id: i64,
    /// [`Machine::fingerprint`].
    pub fingerprint: String,
    /// [`Machine::hardware`]: equal for the same box under another kernel.
    pub hardware: String,
    #[serde(flatten)]
    pub machine: Machine,
}

/// One machine of an experiment and what ran on it ([`Store::machines`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineUse {
    pub machine: StoredMachine,
    pub runs: usize,
    /// Variants with at least one run on this machine, by name.
    pub variants: Vec<String>,
}

/// Machines of one experiment that share [`StoredMachine::hardware`] (the
/// same box, perhaps under several kernels): what a comparison may pool
/// without mixing machines ([`Store::hardware_groups`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HardwareUse {
    pub hardware: String,
    /// In order of first use; more than one when the kernel changed.
    pub machines: Vec<MachineUse>,
    pub runs: usize,
}

impl HardwareUse {
    /// One line for people: the first machine's description, plus the other
    /// kernels seen on it.
    pub fn describe(&self) -> String {
        let mut line = self.machines[0].machine.machine.describe();
        let kernels: Vec<&str> = self.machines[1..].iter().map(|m| m.machine.machine.kernel_release.as_str()).collect();
        if !kernels.is_empty() {
            line.push_str(&format!(", also kernel {}", kernels.join(", ")));
        }
        line
    }
}

/// The id of `m` in this store, adding it if new (inside the caller's
/// transaction; concurrent adders of one machine meet on the unique
/// fingerprint).
pub(super) fn machine_id(q: &mut dyn Sql, m: &Machine) -> Result<i64> {
    let fingerprint = m.fingerprint();
    if let Some(r) = q.query_opt("SELECT id FROM machines WHERE fingerprint = ?1", params![fingerprint.as_str()])? {
        return r.get(0);
    }
    let fixed = [("fingerprint", Value::from(fingerprint.as_str())), ("hardware", Value::from(m.hardware()))];
    let row = insert_one(q, "machines", &fixed, m, Some("id"))?.expect("RETURNING asked");
    row.get(0)
}

pub(super) fn machine_by_id(q: &mut dyn Sql, id: i64) -> Result<Option<StoredMachine>> {
    q.query_opt("SELECT * FROM machines WHERE id = ?1", params![id])?.map(|r| from_row(&r)).transpose()
}

impl Store {
    /// The machines an experiment's runs ran on, in order of first use.
    /// Runs recorded without a machine (before schema v4, or with no
    /// [`RecordingContext::machine`](super::RecordingContext)) are not counted.
    pub fn machines(&self, experiment_id: i64) -> Result<Vec<MachineUse>> {
        let loc = self.location();
        self.snapshot(|q| {
            let rows = q.query(
                "SELECT m.*, count(*) AS runs, min(r.seq) AS first_seq FROM machines m
                 JOIN runs r ON r.machine_id = m.id
                 WHERE r.experiment_id = ?1 GROUP BY m.id ORDER BY first_seq",
                params![experiment_id],
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let machine: StoredMachine = from_row(&r)?;
                let variants = q
                    .query(
                        "SELECT variant FROM runs WHERE experiment_id = ?1 AND machine_id = ?2
                         GROUP BY variant ORDER BY variant COLLATE BINARY",
                        params![experiment_id, machine.id],
                    )?
                    .iter()
                    .map(|v| v.get(0))
                    .collect::<Result<_>>()?;
                out.push(MachineUse { machine, runs: r.get("runs")?, variants });
            }
            Ok(out)
        })
        .with_context(|| format!("cannot read machines of experiment {experiment_id} from {loc}"))
    }

    /// The experiment's machines grouped by hardware, in order of first
    /// use: one group means a comparison mixes no machines; more than one
    /// means compare per group ([`Store::metric_series_on`]) unless the user
    /// asks to pool them (`--across-machines`).
    pub fn hardware_groups(&self, experiment_id: i64) -> Result<Vec<HardwareUse>> {
        let mut groups: Vec<HardwareUse> = Vec::new();
        for m in self.machines(experiment_id)? {
            match groups.iter_mut().find(|g| g.hardware == m.machine.hardware) {
                Some(g) => {
                    g.runs += m.runs;
                    g.machines.push(m);
                }
                None => {
                    groups.push(HardwareUse { hardware: m.machine.hardware.clone(), runs: m.runs, machines: vec![m] })
                }
            }
        }
        Ok(groups)
    }

    /// Like [`Store::metric_series`], from runs on hardware `hardware`
    /// ([`StoredMachine::hardware`]) only, for comparisons that must not mix
    /// machines.
    pub fn metric_series_on(&self, experiment_id: i64, hardware: &str) -> Result<Vec<MetricSeries>> {
        self.series(experiment_id, Some(hardware))
    }
}
