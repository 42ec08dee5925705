//! One round trip per stored type, with every field distinct: a field that
//! has no column fails the insert, a column read into the wrong field fails
//! the comparison (issue #12: data kept in one list).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::columns::testing::{distinct, distinct_from};
use super::columns::{from_row, insert_one};
use super::machines::StoredMachine;
use super::runs::RunRow;
use super::sql::Value;
use super::write::ExperimentRow;
use super::*;
use crate::inspect::machine::Machine;
use crate::stored::ExperimentStatus;

/// Inserts `value` into `table` (after `fixed`) and reads it back (each
/// table holds one row in this test).
fn round_trip<T: Serialize, Back: DeserializeOwned>(
    store: &mut Store,
    table: &str,
    fixed: &[(&str, Value)],
    value: &T,
) -> Back {
    store.write(|q| insert_one(q, table, fixed, value, None)).unwrap_or_else(|e| panic!("insert into {table}: {e:#}"));
    let row = store
        .read(|q| q.query_one(&format!("SELECT * FROM {table}"), &[]))
        .unwrap_or_else(|e| panic!("read from {table}: {e:#}"));
    from_row(&row).unwrap_or_else(|e| panic!("{table} row into its type: {e:#}"))
}

/// [`round_trip`] into the same type.
fn same<T: Serialize + DeserializeOwned>(store: &mut Store, table: &str, fixed: &[(&str, Value)], value: &T) -> T {
    round_trip(store, table, fixed, value)
}

#[test]
fn every_stored_type_round_trips_with_every_field() {
    for db in test_dbs("rows") {
        let mut store = db.open();
        eprintln!("backend {}", db.backend);

        let experiment = ExperimentRow {
            status: ExperimentStatus::Complete,
            seed: "42".into(),
            plan_json: "[]".into(),
            environment_json: "{}".into(),
            ..distinct(1)
        };
        let got: ExperimentRow = round_trip(&mut store, "experiments", &[], &experiment);
        assert_eq!(ExperimentRow { id: 0, ..got.clone() }, experiment);
        let exp = got.id;
        let fixed_exp = [("experiment_id", Value::Int(exp))];

        let v: VariantRow = distinct(2);
        assert_eq!(same(&mut store, "variants", &fixed_exp, &v), v);
        let w: WorkloadRow = distinct(3);
        assert_eq!(same(&mut store, "workloads", &fixed_exp, &w), w);

        let machine: Machine = distinct(4);
        let fixed_machine = [("fingerprint", Value::from("f")), ("hardware", Value::from("h"))];
        let got: StoredMachine = round_trip(&mut store, "machines", &fixed_machine, &machine);
        assert_eq!(got.machine, machine);
        assert_eq!((got.fingerprint.as_str(), got.hardware.as_str()), ("f", "h"));

        let shard = ShardRow { state: ExperimentStatus::Failed, machine_id: Some(got.id), ..distinct(5) };
        assert_eq!(same(&mut store, "shards", &fixed_exp, &shard), shard);

        let run = RunRow { status: "ok".into(), ..distinct(6) };
        let got: RunRow = round_trip(&mut store, "runs", &fixed_exp, &run);
        assert_eq!(RunRow { id: 0, experiment_id: 0, ..got.clone() }, run);
        assert_eq!(got.experiment_id, exp);
        let fixed_run = [("run_id", Value::Int(got.id)), ("idx", Value::Int(0))];

        let m: Metric = distinct_from(&Metric::lower("m", "s", 0.0), 7);
        let fixed_metric = [("run_id", Value::Int(got.id)), ("position", Value::Int(0))];
        assert_eq!(same(&mut store, "metrics", &fixed_metric, &m), m);
        let t: DiskTotals = distinct(8);
        assert_eq!(same(&mut store, "disk_totals", &fixed_run[..1], &t), t);
        let s: IostatSample = distinct(9);
        assert_eq!(same(&mut store, "iostat_samples", &fixed_run, &s), s);
        let c: CpuSample = distinct(10);
        assert_eq!(same(&mut store, "cpu_samples", &fixed_run, &c), c);
        assert!(c.guest_pct > 0.0 && c.guest_nice_pct > 0.0);
    }
}

#[test]
fn a_whole_run_record_round_trips() {
    // Every field of RunRecord set, so a field the store forgets shows up.
    let mut record = full_run(1);
    record.round = 1;
    record.error = Some("a warning on an ok run".into());
    let default = json(&RunRecord::default());
    for (k, v) in json(&record).as_object().unwrap() {
        assert_ne!(v, &default[k]);
    }
    for db in test_dbs("record") {
        let mut store = db.open();
        let e = store.create_experiment(&new_exp("e", "h")).unwrap();
        let id = store.record_run(e, &record).unwrap();
        assert_eq!(json(&store.run_record(id).unwrap()), json(&record), "{}", db.backend);
    }
}

#[test]
fn nan_is_stored_as_null_and_read_back_as_nan() {
    for db in test_dbs("nan") {
        let mut store = db.open();
        let e = store.create_experiment(&new_exp("e", "h")).unwrap();
        let mut r = full_run(0);
        r.wall_s = f64::NAN;
        r.monitor.as_mut().unwrap().disk[0].r_await = f64::NAN;
        let id = store.record_run(e, &r).unwrap();
        assert!(store.runs(e).unwrap()[0].wall_s.is_nan());
        assert!(store.samples(id).unwrap().disk[0].r_await.is_nan());
        let nulls: i64 = store
            .read(|q| q.query_one("SELECT count(*) FROM iostat_samples WHERE r_await IS NULL", &[])?.get(0))
            .unwrap();
        assert_eq!(nulls, 1);
        // And the same run recorded again is recognised as the same (NaN = NaN here).
        assert_eq!(store.record_run(e, &r).unwrap(), id);
    }
}
