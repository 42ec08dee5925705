//! Per-run extras: JSON documents by kind (block-trace summary,
//! filesystem-internal snapshots and their delta, notes), in `run_extras`.

use anyhow::{Context, Result};
use rusqlite::{params, Transaction};

use super::{sql_int, Store};
use crate::record::{RunRecord, EXTRA_BLOCKTRACE, EXTRA_NOTES};

/// The extras of `run` in the order they are stored.
fn extras_of(run: &RunRecord) -> Vec<(&str, serde_json::Value)> {
    let mut out = Vec::new();
    if let Some(bt) = &run.blocktrace {
        out.push((EXTRA_BLOCKTRACE, bt.clone()));
    }
    for (kind, v) in &run.fs_snapshots {
        out.push((kind.as_str(), v.clone()));
    }
    if !run.notes.is_empty() {
        out.push((EXTRA_NOTES, serde_json::Value::from(run.notes.clone())));
    }
    out
}

/// Writes the run's extras inside `record_run`'s transaction.
pub(super) fn insert_extras(tx: &Transaction<'_>, run_id: i64, run: &RunRecord) -> Result<()> {
    let mut stmt =
        tx.prepare_cached("INSERT INTO run_extras (run_id, position, kind, json) VALUES (?1, ?2, ?3, ?4)")?;
    for (pos, (kind, value)) in extras_of(run).into_iter().enumerate() {
        let json = serde_json::to_string(&value).with_context(|| format!("serialising extra {kind:?}"))?;
        stmt.execute(params![run_id, sql_int(pos)?, kind, json]).with_context(|| format!("extra {kind:?}"))?;
    }
    Ok(())
}

impl Store {
    /// The extras of one run as `(kind, JSON)`, in the order written; empty
    /// for runs without any (or recorded before schema version 3).
    pub fn run_extras(&self, run_id: i64) -> Result<Vec<(String, serde_json::Value)>> {
        let loc = self.location();
        let ctx = || format!("cannot read extras of run {run_id} from {loc}");
        let mut stmt = self
            .conn
            .prepare_cached("SELECT kind, json FROM run_extras WHERE run_id = ?1 ORDER BY position")
            .with_context(ctx)?;
        let rows =
            stmt.query_map([run_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).with_context(ctx)?;
        let mut out = Vec::new();
        for row in rows {
            let (kind, json) = row.with_context(ctx)?;
            let value = serde_json::from_str(&json)
                .with_context(|| format!("extra {kind:?} of run {run_id} in {loc} is not valid JSON"))?;
            out.push((kind, value));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RunStatus, EXTRA_FS_BEFORE};
    use crate::store::NewExperiment;

    fn exp() -> NewExperiment {
        NewExperiment {
            name: "x".into(),
            spec_path: None,
            spec_text: String::new(),
            spec_hash: "h".into(),
            seed: 1,
            plan_json: "[]".into(),
            environment_json: "{}".into(),
            variants: vec![],
            workloads: vec![],
        }
    }

    #[test]
    fn extras_round_trip_in_order_and_go_with_their_run() {
        let mut store = Store::open_in_memory().unwrap();
        let e = store.create_experiment(&exp()).unwrap();
        let run = RunRecord {
            status: Some(RunStatus::Ok),
            blocktrace: Some(serde_json::json!({"enabled": false, "reason": "no tracefs"})),
            fs_snapshots: vec![(EXTRA_FS_BEFORE.into(), serde_json::json!({"fstype": "ext4"}))],
            notes: vec!["fs_after: boom".into()],
            ..RunRecord::default()
        };
        let id = store.record_run(e, &run).unwrap();
        let got = store.run_extras(id).unwrap();
        let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["blocktrace", "fs_before", "notes"]);
        assert_eq!(got[0].1["reason"], "no tracefs");
        assert_eq!(got[2].1, serde_json::json!(["fs_after: boom"]));

        // Replacing a failed run replaces its extras too.
        let failed = RunRecord { seq: 1, status: Some(RunStatus::Failed), ..run.clone() };
        let f1 = store.record_run(e, &failed).unwrap();
        let retry = RunRecord { seq: 1, status: Some(RunStatus::Ok), notes: vec![], ..RunRecord::default() };
        let f2 = store.record_run(e, &retry).unwrap();
        assert!(store.run_extras(f1).unwrap().is_empty());
        assert!(store.run_extras(f2).unwrap().is_empty());
        assert_eq!(store.run_extras(id).unwrap().len(), 3);
    }
}
