//! A PostgreSQL server that goes away in the middle of a write.
//!
//! The test server is shared by all tests, so it is not stopped; instead the
//! store talks to it through a loopback TCP relay that the test cuts (every
//! connection dropped mid-stream, as when the server dies or the network
//! goes) and then refuses connections until "the server is back". To the
//! client this is exactly a server that went away.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    /// Client→server bytes still allowed before every connection is cut.
    budget: Arc<AtomicUsize>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const UNLIMITED: usize = usize::MAX;

impl Relay {
    fn start(upstream: std::net::SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let budget = Arc::new(AtomicUsize::new(UNLIMITED));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (up2, budget2, conns2, stop2) = (up.clone(), budget.clone(), conns.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                if !up2.load(Ordering::SeqCst) {
                    drop(client); // "connection refused": closed at once
                    continue;
                }
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                conns2.lock().unwrap().extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (budget, conns) = (budget2.clone(), conns2.clone());
                std::thread::spawn(move || pump(client, server, Some((budget, conns))));
                std::thread::spawn(move || pump(s2, c2, None));
            }
        });
        Relay { port, up, budget, conns, stop, thread: Some(thread) }
    }

    /// Cuts every connection once `n` more bytes went client→server.
    fn cut_after(&self, n: usize) {
        self.budget.store(n, Ordering::SeqCst);
    }

    /// The server goes away: live connections drop, new ones are refused.
    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        cut_all(&self.conns);
    }

    fn back(&self) {
        self.budget.store(UNLIMITED, Ordering::SeqCst);
        self.up.store(true, Ordering::SeqCst);
    }
}

fn cut_all(conns: &Mutex<Vec<TcpStream>>) {
    for c in conns.lock().unwrap().drain(..) {
        let _ = c.shutdown(Shutdown::Both);
    }
}

/// The byte budget and the connections to cut when it runs out.
type Budget = (Arc<AtomicUsize>, Arc<Mutex<Vec<TcpStream>>>);

/// Copies `from` to `to`; the client→server direction spends the budget.
fn pump(mut from: TcpStream, mut to: TcpStream, budget: Option<Budget>) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((budget, conns)) = &budget {
            let left = budget.load(Ordering::SeqCst);
            if left != UNLIMITED {
                if n >= left {
                    // Forward part of this chunk, then the server "dies".
                    let _ = to.write_all(&buf[..left]);
                    budget.store(0, Ordering::SeqCst);
                    cut_all(conns);
                    break;
                }
                budget.store(left - n, Ordering::SeqCst);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        cut_all(&self.conns);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn server_gone_mid_write_fails_that_write_and_recovers() {
    let Some(db) = pg_db("gone") else { return };
    let (url, schema) = db.pg_schema.clone().unwrap();
    let config: postgres::Config = url.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("FSLAB_TEST_POSTGRES must use TCP for this test, not {other:?}"),
    };
    let upstream =
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), config.get_ports()[0])).unwrap().next().unwrap();
    let relay = Relay::start(upstream);
    let user = config.get_user().unwrap_or("postgres");
    let dbname = config.get_dbname().unwrap_or("postgres");
    let via_relay = StoreLocation::Postgres(with_schema(
        &format!("postgres://{user}@127.0.0.1:{}/{dbname}?connect_timeout=5", relay.port),
        &schema,
    ));

    let mut store = Store::open(&via_relay).unwrap();
    let exp = store.create_experiment(&new_exp("e", "h")).unwrap();
    store.record_run(exp, &full_run(0)).unwrap();

    // The server dies a few kilobytes into writing a run with 60 + 60 samples.
    let big = full_run_with(1, 60, 60);
    relay.cut_after(3000);
    let e = err_text(store.record_run(exp, &big).unwrap_err());
    assert!(e.contains("cannot record run 2 (seq 1) of experiment") && e.contains(&via_relay.to_string()), "{e}");
    assert!(e.contains("lost the connection"), "{e}");

    // While it is away, writes fail at once with a clear error.
    relay.down();
    let e = err_text(store.record_run(exp, &big).unwrap_err());
    assert!(e.contains("cannot connect to PostgreSQL at"), "{e}");

    // Nothing of the cut write was stored (checked directly, not through the relay).
    let direct = db.open();
    assert_eq!(direct.runs(exp).unwrap().len(), 1);
    assert_eq!(count(&direct, "iostat_samples"), 3);

    // The server is back: the same store object reconnects and the retry lands whole.
    relay.back();
    let id = store.record_run(exp, &big).unwrap();
    assert_eq!(json(&direct.run_record(id).unwrap()), json(&big));
    assert_eq!(direct.runs(exp).unwrap().len(), 2);
    assert_eq!(count(&direct, "iostat_samples"), 63);
}
