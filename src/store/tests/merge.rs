//! `fslab merge` between stores of either backend.

use super::*;

/// A source store with a finished experiment of three runs (one failed).
fn source(db: &TestDb) -> (Store, i64) {
    let mut s = db.open();
    let e = s.create_experiment(&new_exp("boot", "h")).unwrap();
    s.add_tags(e, &[("team".into(), "storage".into())]).unwrap();
    s.set_recording_context(RecordingContext {
        machine: Some(crate::inspect::machine::Machine::capture(None)),
        shard: None,
    });
    s.record_run(e, &full_run(0)).unwrap();
    s.record_run(e, &run(1, 0, "alpha", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 2.0)])).unwrap();
    s.record_run(e, &run(2, 0, "zeta", "first", RunStatus::Failed, vec![])).unwrap();
    s.set_experiment_status(e, ExperimentStatus::Complete).unwrap();
    (s, e)
}

fn same_experiment(a: &Store, a_id: i64, b: &Store, b_id: i64) {
    let (ea, eb) = (a.experiment(a_id).unwrap(), b.experiment(b_id).unwrap());
    assert_eq!(StoredExperiment { id: 0, ..ea }, StoredExperiment { id: 0, ..eb });
    let (ma, mb) = (a.experiment(a_id).unwrap(), b.experiment(b_id).unwrap());
    assert_eq!((ma.uuid, ma.tags), (mb.uuid, mb.tags));
    let (ra, rb) = (a.runs(a_id).unwrap(), b.runs(b_id).unwrap());
    assert_eq!(ra.len(), rb.len());
    for (x, y) in ra.iter().zip(&rb) {
        assert_eq!(json(&a.run_record(x.id).unwrap()), json(&b.run_record(y.id).unwrap()));
        let machine = |s: &Store, id| s.run_machine(id).unwrap().map(|m| m.machine);
        assert_eq!((&x.uuid, x.shard, machine(a, x.id)), (&y.uuid, y.shard, machine(b, y.id)));
    }
}

fn round_trip(src_db: &TestDb, dst_db: &TestDb) {
    let (src, e) = source(src_db);
    let mut dst = dst_db.open();
    let r = crate::store::merge::merge(&mut dst, &src).unwrap();
    assert_eq!((r.experiments_added, r.runs_added, r.tags_added), (1, 3, 1), "{r}");
    let id = dst.list_experiments().unwrap()[0].id;
    same_experiment(&src, e, &dst, id);

    // Twice is the same as once.
    let again = crate::store::merge::merge(&mut dst, &src).unwrap();
    assert!(!again.changed(), "{again}");
    assert_eq!((again.experiments_matched, again.runs_unchanged), (1, 3));
    assert_eq!(dst.list_experiments().unwrap().len(), 1);
    assert_eq!(count(&dst, "runs"), 3);
    assert_eq!(count(&dst, "machines"), 1);
    same_experiment(&src, e, &dst, id);
}

#[test]
fn merge_sqlite_to_sqlite_twice_changes_nothing_the_second_time() {
    round_trip(&sqlite_db("merge_src"), &sqlite_db("merge_dst"));
}

#[test]
fn merge_sqlite_to_postgres_and_back() {
    let Some(pg) = pg_db("merge_pg") else { return };
    round_trip(&sqlite_db("merge_src"), &pg);
    // And from PostgreSQL into a fresh file.
    let back = sqlite_db("merge_back");
    let mut file = back.open();
    let r = crate::store::merge::merge(&mut file, &pg.open()).unwrap();
    assert_eq!(r.runs_added, 3);
    same_experiment(&pg.open(), 1, &file, 1);
}

#[test]
fn merge_refuses_conflicting_runs_and_takes_ok_over_failed() {
    for db in test_dbs("merge_conflict") {
        let src_db = db.sibling("merge_conflict_src");
        let (src, e) = source(&src_db);
        let mut dst = db.open();
        crate::store::merge::merge(&mut dst, &src).unwrap();
        let uuid = src.experiment(e).unwrap().uuid;

        // A copy of the source where the failed run was retried ok and a new run added.
        let copy_db = db.sibling("merge_copy");
        let mut copy = copy_db.open();
        crate::store::merge::merge(&mut copy, &src).unwrap();
        let ce = copy.experiment_by_uuid(&uuid).unwrap().unwrap();
        copy.record_run(ce, &run(2, 1, "zeta", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 9.0)])).unwrap();
        copy.record_run(ce, &run(3, 1, "alpha", "first", RunStatus::Ok, vec![])).unwrap();
        let r = crate::store::merge::merge(&mut dst, &copy).unwrap();
        assert_eq!((r.runs_replaced, r.runs_added, r.runs_unchanged), (1, 1, 2), "{r}");
        // Merging the original again keeps the ok retry over the old failure.
        let r = crate::store::merge::merge(&mut dst, &src).unwrap();
        assert_eq!((r.runs_kept, r.runs_unchanged), (1, 2), "{r}");

        // A second copy whose ok run at seq 1 has other numbers: a conflict, nothing of it written.
        let bad_db = db.sibling("merge_bad");
        let mut bad = bad_db.open();
        crate::store::merge::merge(&mut bad, &src).unwrap();
        let be = bad.experiment_by_uuid(&uuid).unwrap().unwrap();
        bad.write(|q| q.execute("UPDATE metrics SET value = 99 WHERE name = 't'", &[])).unwrap();
        bad.record_run(be, &run(4, 1, "zeta", "first", RunStatus::Ok, vec![])).unwrap();
        let runs_before = count(&dst, "runs");
        let e = err_text(crate::store::merge::merge(&mut dst, &bad).unwrap_err());
        assert!(e.contains("run 2 (seq 1) is stored ok in both with different content") && e.contains(&uuid), "{e}");
        assert!(e.contains(&bad.location()) && e.contains(&dst.location()), "{e}");
        assert_eq!(count(&dst, "runs"), runs_before, "nothing of the conflicting merge is stored");

        // An experiment with the same uuid but another spec is refused too.
        let other_db = db.sibling("merge_other");
        let mut other = other_db.open();
        crate::store::merge::merge(&mut other, &src).unwrap();
        other.write(|q| q.execute("UPDATE experiments SET spec_hash = 'other'", &[])).unwrap();
        let e = err_text(crate::store::merge::merge(&mut dst, &other).unwrap_err());
        assert!(e.contains("conflict") && e.contains("spec hash other"), "{e}");
    }
}

#[test]
fn shards_recorded_apart_merge_into_one_experiment() {
    for db in test_dbs("merge_shards") {
        let new = new_exp("fleet", "spec1");
        let shard_dbs: Vec<TestDb> = (1..=3).map(|k| db.sibling(&format!("shard{k}"))).collect();
        for (k, sdb) in shard_dbs.iter().enumerate() {
            let mut s = sdb.open();
            let shard = Shard { index: k + 1, count: 3 };
            let m = crate::inspect::machine::Machine { hostname: format!("h{k}"), ..Default::default() };
            let id = s.join_campaign(&new, "nightly-7", shard, Some(&m)).unwrap();
            s.set_recording_context(RecordingContext { machine: Some(m), shard: Some(shard) });
            for seq in (k..9).step_by(3) {
                s.record_run(
                    id,
                    &run(seq, seq / 3, "zeta", "first", RunStatus::Ok, vec![Metric::lower("t", "s", 1.0)]),
                )
                .unwrap();
            }
            s.set_experiment_status(id, ExperimentStatus::Complete).unwrap();
            // Each file alone: a campaign with two shards missing.
            assert_eq!(s.campaign_status(id).unwrap().unwrap().missing.len(), 2);
        }
        let mut all = db.open();
        for (k, sdb) in shard_dbs.iter().enumerate() {
            crate::store::merge::merge(&mut all, &sdb.open()).unwrap();
            let id = all.find_campaign("nightly-7").unwrap().unwrap();
            let expected = if k == 2 { ExperimentStatus::Complete } else { ExperimentStatus::Running };
            assert_eq!(all.experiment(id).unwrap().status, expected, "after merging shard {}", k + 1);
        }
        assert_eq!(all.list_experiments().unwrap().len(), 1);
        let id = all.find_campaign("nightly-7").unwrap().unwrap();
        let runs = all.runs(id).unwrap();
        assert_eq!(runs.iter().map(|r| r.seq).collect::<Vec<_>>(), (0..9).collect::<Vec<_>>());
        assert_eq!(runs[4].shard, Some(2));
        assert!(all.campaign_status(id).unwrap().unwrap().is_complete());
        let hosts: Vec<String> =
            all.tags(id).unwrap().into_iter().filter(|(k, _)| k == "hostname").map(|(_, v)| v).collect();
        assert_eq!(hosts, vec!["h0", "h1", "h2"]);
        // Again: nothing changes.
        for sdb in &shard_dbs {
            assert!(!crate::store::merge::merge(&mut all, &sdb.open()).unwrap().changed());
        }
    }
}
