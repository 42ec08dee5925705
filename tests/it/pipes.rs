//! Output to a closed pipe (`fslab … | head`): never a panic, never a
//! stopped experiment. Each command runs with the reading end of its
//! stdout (or stderr) closed before it writes anything, so its first write
//! fails with EPIPE, as it does behind a `head` that has had enough.

use crate::common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use fslab::store::Store;

/// How a command ended whose stdout (`close_stdout`) or stderr reader went away.
struct Ended {
    code: Option<i32>,
    /// What the command wrote on the stream that stayed open.
    other: String,
}

fn with_closed(args: &[&str], close_stdout: bool) -> Ended {
    let mut child = Command::new(common::fslab_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fslab starts");
    // Close the reading end now, before the child has written anything.
    let (mut open, closed): (Box<dyn Read>, Box<dyn Read>) = if close_stdout {
        (Box::new(child.stderr.take().unwrap()), Box::new(child.stdout.take().unwrap()))
    } else {
        (Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap()))
    };
    drop(closed);
    let mut other = String::new();
    open.read_to_string(&mut other).unwrap();
    let status = child.wait().unwrap();
    Ended { code: status.code(), other }
}

fn assert_quiet_exit(what: &str, e: &Ended) {
    assert!(!e.other.contains("panicked"), "{what} panicked:\n{}", e.other);
    assert_eq!(e.code, Some(0), "{what} exited {:?}:\n{}", e.code, e.other);
}

fn experiment_file(dir: &Path) -> std::path::PathBuf {
    for v in ["a", "b"] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
    }
    common::write_spec(
        dir,
        "pipes.toml",
        &format!(
            r#"name = "closed pipes"
repetitions = 2
workdir = "{work}"

[[variant]]
name = "a"
fs = "dir:{a}"

[[variant]]
name = "b"
fs = "dir:{b}"

[[workload]]
kind = "command"
name = "w"
command = "true"
"#,
            work = dir.join("work").display(),
            a = dir.join("a").display(),
            b = dir.join("b").display()
        ),
    )
}

/// The newest experiment in `db` finished and holds all its runs.
fn assert_stored_complete(db: &Path) {
    let store = Store::open(db).unwrap();
    let list = store.list_experiments().unwrap();
    let e = list.last().expect("an experiment was stored");
    assert_eq!((e.status.as_str(), e.runs_ok, e.runs_failed), ("complete", 4, 0), "{e:?}");
}

#[test]
fn closed_pipes_neither_panic_nor_stop_an_experiment() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-pipes");
    let spec = experiment_file(dir.path());
    let spec = spec.to_str().unwrap();

    // `fslab run … | head`: stdout gone; the experiment still finishes and is stored.
    let db = dir.path().join("stdout.db");
    let e = with_closed(&["run", spec, "--db", db.to_str().unwrap()], true);
    assert_quiet_exit("run with stdout closed", &e);
    assert!(e.other.contains("4 runs ok"), "{}", e.other);
    assert_stored_complete(&db);

    // `fslab run … 2>&1 | head`: stderr (progress) gone too.
    let db = dir.path().join("stderr.db");
    let e = with_closed(&["run", spec, "--db", db.to_str().unwrap()], false);
    assert_quiet_exit("run with stderr closed", &e);
    assert!(e.other.contains("decisive  variant"), "comparison not printed:\n{}", e.other);
    assert_stored_complete(&db);

    let db = db.to_str().unwrap();
    let kconfig = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inspect/kconfig");
    let (a, b) = (kconfig.join("mainline-5.17.config"), kconfig.join("imx8mm-vendor-5.15.config"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    for args in [
        vec!["doctor"],
        vec!["doctor", "--format", "json"],
        vec!["doctor", "--json"],
        vec!["kconfig", "diff", a, b],
        vec!["report", "--db", db, "-o", "-"],
        vec!["report", "--db", db, "--format", "markdown"],
        vec!["compare", "--db", db],
        vec!["compare", "--db", db, "--format", "json"],
        vec!["list", "--db", db],
        vec!["export", "--db", db, "--format", "csv"],
    ] {
        assert_quiet_exit(&args.join(" "), &with_closed(&args, true));
    }
}
