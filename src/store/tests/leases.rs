//! Leases (issue 20 item 4): one holder at a time per experiment or shard;
//! and run writes idempotent on the run's uuid (item 5);
//! a live holder is reported, a dead or expired one is taken over.

use std::process::{Child, Command};
use std::time::{Duration, SystemTime};

use super::*;
use crate::store::owner::{Claim, LeaseKey};
use crate::store::sql::params;
use crate::sys::identity::{self, ProcessIdentity};

/// Makes `holder` the holder of `key`, expiring `expires` from now (negative: past).
fn hold(store: &mut Store, key: LeaseKey, holder: &ProcessIdentity, expires: i64) {
    let now = SystemTime::now();
    let at = |s: i64| {
        let t = if s >= 0 { now + Duration::from_secs(s as u64) } else { now - Duration::from_secs((-s) as u64) };
        humantime::format_rfc3339_seconds(t).to_string()
    };
    let shard = key.shard.map_or(0, |k| k as i64);
    store
        .write(|q| {
            q.execute(
                "DELETE FROM leases WHERE experiment_id = ?1 AND shard_index = ?2",
                params![key.experiment_id, shard],
            )?;
            q.execute(
                "INSERT INTO leases (experiment_id, shard_index, hostname, pid, start_time, boot_id, version, workdir, \
                 acquired_at, heartbeat_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, '0.0.1', '/w', ?7, ?7, ?8)",
                &[
                    sql::Value::Int(key.experiment_id),
                    sql::Value::Int(shard),
                    sql::Value::from(holder.hostname.as_str()),
                    sql::Value::Int(i64::from(holder.pid)),
                    sql::Value::Int(holder.start_time as i64),
                    sql::Value::from(holder.boot_id.as_str()),
                    sql::Value::from(at(-5)),
                    sql::Value::from(at(expires)),
                ],
            )
        })
        .unwrap();
}

/// A live process of this host that is not this one.
fn other_process() -> (Child, ProcessIdentity) {
    let child = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = child.id() as i32;
    let me = ProcessIdentity::current();
    let start_time = (0..100)
        .find_map(|_| {
            identity::start_time(pid).or_else(|| {
                std::thread::sleep(Duration::from_millis(10));
                None
            })
        })
        .unwrap();
    (child, ProcessIdentity { pid, start_time, ..me.clone() })
}

fn held_by(claim: Claim) -> ProcessIdentity {
    match claim {
        Claim::Held(h) => h.owner,
        other => panic!("expected a live holder, got {other:?}"),
    }
}

fn taken_from(claim: Claim) -> Option<ProcessIdentity> {
    match claim {
        Claim::Acquired { taken_over } => taken_over.map(|h| h.owner),
        other => panic!("expected the lease, got {other:?}"),
    }
}

#[test]
fn a_lease_has_one_live_holder_and_passes_on_when_it_dies_or_expires() {
    for db in test_dbs("leases") {
        let mut store = db.open();
        let id = store.create_experiment(&new_exp("leased", "h1")).unwrap();
        let key = LeaseKey { experiment_id: id, shard: None };
        let w = std::path::Path::new("/var/tmp/w");

        // Free: taken; taken again by the same process; renewed; released.
        assert_eq!(taken_from(store.claim(key, w).unwrap()), None, "{}", db.backend);
        assert_eq!(taken_from(store.claim(key, w).unwrap()), None, "{}", db.backend);
        let mine = store.lease_holder(key).unwrap().unwrap();
        assert_eq!(&mine.owner, ProcessIdentity::current());
        assert_eq!((mine.version.as_str(), mine.workdir.as_str()), (env!("CARGO_PKG_VERSION"), "/var/tmp/w"));
        assert!(store.renew(key).unwrap());
        store.release(key).unwrap();
        assert_eq!(store.lease_holder(key).unwrap(), None);

        // A live process on this host holds it, unexpired: refused, named.
        let (mut child, other) = other_process();
        hold(&mut store, key, &other, 100);
        assert_eq!(held_by(store.claim(key, w).unwrap()), other, "{}", db.backend);
        // Its lease lost to this one: renewing says so, releasing leaves it.
        assert!(!store.renew(key).unwrap());
        store.release(key).unwrap();
        assert_eq!(store.lease_holder(key).unwrap().unwrap().owner, other);
        // A shard of the same experiment is another lease.
        let shard = LeaseKey { experiment_id: id, shard: Some(2) };
        assert_eq!(taken_from(store.claim(shard, w).unwrap()), None);

        // Dead: taken over, naming the dead holder.
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(taken_from(store.claim(key, w).unwrap()), Some(other.clone()), "{}", db.backend);

        // On another host: only the expiry tells.
        let elsewhere = ProcessIdentity { hostname: "far-away".into(), boot_id: "other-boot".into(), ..other };
        hold(&mut store, key, &elsewhere, 100);
        assert_eq!(held_by(store.claim(key, w).unwrap()), elsewhere);
        hold(&mut store, key, &elsewhere, -1);
        assert_eq!(taken_from(store.claim(key, w).unwrap()), Some(elsewhere.clone()), "{}", db.backend);
        // A live local holder that stopped renewing (expired) is taken over too.
        let (mut child, alive) = other_process();
        hold(&mut store, key, &alive, -1);
        assert_eq!(taken_from(store.claim(key, w).unwrap()), Some(alive));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Issue 20 item 5: a write retried after its commit went through (the
/// acknowledgement lost) finds the run by its uuid and stores nothing twice.
#[test]
fn recording_a_run_again_under_its_uuid_stores_it_once() {
    for db in test_dbs("once") {
        let mut store = db.open();
        let id = store.create_experiment(&new_exp("once", "h2")).unwrap();
        let context = store.recording_context().clone();
        let run = full_run(0);
        let uuid = "2f1c7c84-5d7e-4f0a-9a43-6f1b2d0e8a11";
        let first = store.record_run_as(id, &run, &context, uuid).unwrap();
        let again = store.record_run_as(id, &run, &context, uuid).unwrap();
        assert_eq!(first, again, "{}", db.backend);
        assert_eq!(store.runs(id).unwrap().len(), 1, "{}", db.backend);
        assert_eq!(store.run(first).unwrap().uuid, uuid);
    }
}
