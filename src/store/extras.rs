//! Per-run extras: JSON documents by key in `run_extras`: what the run's
//! monitors stored (block-trace summary, filesystem-internal snapshots and
//! their delta, the media model's account, each under its monitor's keys),
//! then the run's notes and place. The store knows no monitor, so a new
//! monitor needs no new table and no code here.

use anyhow::{Context, Result};

use super::sql::{int, params, Sql, Value};
use super::Store;
use crate::record::{RunRecord, EXTRA_NOTES, EXTRA_PLACE};

/// The extras of `run` in the order they are stored.
pub(super) fn extras_of(run: &RunRecord) -> Vec<(String, serde_json::Value)> {
    let mut out = run.extras.clone();
    if !run.notes.is_empty() {
        out.push((EXTRA_NOTES.to_string(), serde_json::Value::from(run.notes.clone())));
    }
    if let Some(place) = &run.place {
        out.push((EXTRA_PLACE.to_string(), serde_json::to_value(place).unwrap_or_default()));
    }
    out
}

/// The inverse of [`extras_of`]: sorts stored extras back into `record`
/// (notes and place into their fields, the rest to the monitors' extras).
pub(super) fn record_extras(record: &mut RunRecord, extras: &[(String, serde_json::Value)]) -> Result<()> {
    for (kind, v) in extras {
        match kind.as_str() {
            EXTRA_NOTES => {
                record.notes = serde_json::from_value(v.clone()).context("the notes extra is not a list of strings")?
            }
            EXTRA_PLACE => {
                record.place = Some(serde_json::from_value(v.clone()).context("the place extra is not a run place")?)
            }
            _ => record.extras.push((kind.clone(), v.clone())),
        }
    }
    Ok(())
}

/// Writes a run's extras inside `put_run`'s transaction.
pub(super) fn insert_extras(q: &mut dyn Sql, run_id: i64, extras: &[(String, serde_json::Value)]) -> Result<()> {
    for (pos, (kind, value)) in extras.iter().enumerate() {
        let json = serde_json::to_string(value).with_context(|| format!("serialising extra {kind:?}"))?;
        q.execute(
            "INSERT INTO run_extras (run_id, position, kind, json) VALUES (?1, ?2, ?3, ?4)",
            &[Value::Int(run_id), int(pos)?, Value::from(kind), Value::Text(json)],
        )
        .with_context(|| format!("extra {kind:?}"))?;
    }
    Ok(())
}

/// A run's extras in the order written.
pub(super) fn read_extras(q: &mut dyn Sql, run_id: i64) -> Result<Vec<(String, serde_json::Value)>> {
    let rows = q.query("SELECT kind, json FROM run_extras WHERE run_id = ?1 ORDER BY position", params![run_id])?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let (kind, json): (String, String) = (r.get(0)?, r.get(1)?);
        let value = serde_json::from_str(&json).with_context(|| format!("extra {kind:?} is not valid JSON"))?;
        out.push((kind, value));
    }
    Ok(out)
}

impl Store {
    /// The extras of one run as `(kind, JSON)`, in the order written; empty
    /// for runs without any (or recorded before schema version 3).
    pub fn run_extras(&self, run_id: i64) -> Result<Vec<(String, serde_json::Value)>> {
        let loc = self.location();
        self.read(|q| read_extras(q, run_id)).with_context(|| format!("cannot read extras of run {run_id} from {loc}"))
    }

    /// Every distinct place the ok runs of `experiment_id` ran in, per
    /// variant (`(variant, place)`, sorted); runs stored without one are
    /// host runs of an older fslab and are left out.
    pub fn variant_places(&self, experiment_id: i64) -> Result<Vec<(String, crate::record::RunPlace)>> {
        let loc = self.location();
        self.read(|q| {
            let rows = q.query(
                "SELECT DISTINCT r.variant, e.json FROM run_extras e JOIN runs r ON r.id = e.run_id \
                 WHERE r.experiment_id = ?1 AND e.kind = ?2 AND r.status = 'ok' ORDER BY r.variant",
                params![experiment_id, EXTRA_PLACE],
            )?;
            let mut out: Vec<(String, crate::record::RunPlace)> = Vec::new();
            for r in rows {
                let (variant, json): (String, String) = (r.get(0)?, r.get(1)?);
                let mut place: crate::record::RunPlace = serde_json::from_str(&json)
                    .with_context(|| format!("a place of variant {variant} is not valid"))?;
                // Boot and warm-up times differ between the first and later runs of one VM.
                place.boot_s = None;
                place.warmup_s = None;
                if !out.iter().any(|(v, p)| *v == variant && *p == place) {
                    out.push((variant, place));
                }
            }
            Ok(out)
        })
        .with_context(|| format!("cannot read run places of experiment {experiment_id} from {loc}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunStatus;
    use crate::store::NewExperiment;

    fn exp() -> NewExperiment {
        NewExperiment {
            name: "x".into(),
            spec_path: None,
            spec_text: String::new(),
            spec_hash: "h".into(),
            seed: 1,
            plan: Default::default(),
            environment: Default::default(),
            variants: vec![],
            workloads: vec![],
        }
    }

    #[test]
    fn extras_round_trip_in_order_and_go_with_their_run() {
        for db in crate::store::tests::test_dbs("extras") {
            let mut store = db.open();
            let e = store.create_experiment(&exp()).unwrap();
            let run = RunRecord {
                status: Some(RunStatus::Ok),
                extras: vec![
                    ("blocktrace".into(), serde_json::json!({"enabled": false, "reason": "no tracefs"})),
                    ("fs_before".into(), serde_json::json!({"fstype": "ext4"})),
                    // A key no code here names: the store keeps any monitor's.
                    ("a_new_monitor".into(), serde_json::json!({"seen": [1, 2]})),
                ],
                notes: vec!["fs_after: boom".into()],
                ..RunRecord::default()
            };
            let id = store.record_run(e, &run).unwrap();
            let got = store.run_extras(id).unwrap();
            let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(kinds, ["blocktrace", "fs_before", "a_new_monitor", "notes"]);
            assert_eq!(got[0].1["reason"], "no tracefs");
            assert_eq!(got[3].1, serde_json::json!(["fs_after: boom"]));
            // Read back into the record: the monitors' extras in order, typed on request.
            let back = store.run_record(id).unwrap();
            assert_eq!(back.extras, run.extras);
            assert_eq!(back.notes, run.notes);
            let seen: serde_json::Value = back.extra("a_new_monitor").unwrap().unwrap();
            assert_eq!(seen["seen"][1], 2);
            assert!(back.extra::<Vec<u8>>("fs_before").unwrap().is_err(), "a wrong type is an error");

            // Replacing a failed run replaces its extras too.
            let failed = RunRecord { seq: 1, status: Some(RunStatus::Failed), ..run.clone() };
            let f1 = store.record_run(e, &failed).unwrap();
            let retry = RunRecord { seq: 1, status: Some(RunStatus::Ok), notes: vec![], ..RunRecord::default() };
            let f2 = store.record_run(e, &retry).unwrap();
            assert!(store.run_extras(f1).unwrap().is_empty());
            assert!(store.run_extras(f2).unwrap().is_empty());
            assert_eq!(store.run_extras(id).unwrap().len(), 4);
        }
    }
}
