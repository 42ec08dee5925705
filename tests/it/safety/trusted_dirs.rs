//! Root trusts no directory another user owns or could swap (issue 28.3):
//! a default work directory made by `nobody`, a registry that is a link
//! `nobody` planted, a `--workdir` or kernel cache of another user are
//! refused with exit 2 naming the owner, and nothing is written through
//! the link. Each case runs in a private mount namespace with a fresh tmpfs
//! over `/var/tmp`, so the host's real `/var/tmp/fslab` is never touched.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{finish, Ran};
use crate::common;

/// `fslab ARGS` in a private mount namespace whose `/var/tmp` is an empty
/// tmpfs, after the shell lines `setup`; the shell lines `after` run once
/// fslab has ended (their output follows a `== after` line on stdout).
/// `dir`: the test's own directory (outside `/var/tmp`), where a binary
/// built under `/var/tmp` (a checkout there) is linked so the tmpfs does
/// not hide it.
fn in_private_var_tmp(dir: &Path, setup: &str, args: &[&str], after: &str) -> Ran {
    let built = Path::new(common::fslab_bin());
    let bin = if built.starts_with("/var/tmp") {
        let seen = dir.join("fslab");
        if !seen.exists() {
            std::fs::hard_link(built, &seen)
                .or_else(|_| std::fs::copy(built, &seen).map(drop))
                .unwrap_or_else(|e| panic!("{} to {}: {e}", built.display(), seen.display()));
        }
        seen
    } else {
        built.to_path_buf()
    };
    let script = format!(
        "set -e\nmount -t tmpfs -o mode=1777 fslab-test /var/tmp\n{setup}\nset +e\n\"$@\"\nrc=$?\necho '== \
         after'\n{after}\nexit $rc\n"
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c", &script, "sh"])
        .arg(&bin)
        .args(args)
        .env_remove("FSLAB_KERNEL_CACHE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish(cmd.spawn().expect("unshare starts"))
}

fn spec(dir: &Path) -> String {
    common::write_spec(
        dir,
        "trusted.toml",
        "name = \"trusted\"\nrepetitions = 1\n[[variant]]\nname = \"a\"\nfs = \"tmpfs\"\n[[workload]]\nkind = \
         \"command\"\ncommand = \"true\"\n",
    )
    .display()
    .to_string()
}

/// What `after` printed.
fn after(ran: &Ran) -> &str {
    ran.stdout.split("== after\n").nth(1).unwrap_or_default()
}

fn assert_untouched(victim: &Path) {
    let written: Vec<_> = std::fs::read_dir(victim).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(written.is_empty(), "fslab wrote through the link: {written:?}");
}

#[test]
fn a_work_directory_another_user_owns_or_links_is_refused_and_nothing_is_written_through_it() {
    if !common::root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let db = dir.path().join("results.db").display().to_string();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let victim_s = victim.display().to_string();

    // The default work directory made by nobody, with the registry a link of theirs.
    let nobody_owns = format!(
        "mkdir /var/tmp/fslab\nln -s {victim_s} /var/tmp/fslab/.fslab-running\nchown -h 65534 \
         /var/tmp/fslab/.fslab-running /var/tmp/fslab"
    );
    for args in [vec!["run", &spec, "--db", &db], vec!["run", &spec, "--db", &db, "--dry-run"]] {
        let ran = in_private_var_tmp(dir.path(), &nobody_owns, &args, "ls -A /var/tmp/fslab");
        ran.expect(2).says("the work directory: refusing /var/tmp/fslab").says("is owned by").says("uid 65534");
        assert_eq!(after(&ran), ".fslab-running\n", "fslab created something in a directory nobody owns");
        assert_untouched(&victim);
    }

    // Root's own work directory, but the registry is a link nobody planted.
    let planted = format!(
        "mkdir -m 755 /var/tmp/fslab\nln -s {victim_s} /var/tmp/fslab/.fslab-running\nchown -h 65534 \
         /var/tmp/fslab/.fslab-running"
    );
    in_private_var_tmp(dir.path(), &planted, &["run", &spec, "--db", &db], "")
        .expect(2)
        .says("the registry of running experiments")
        .says("/var/tmp/fslab/.fslab-running is a symbolic link made by")
        .says("uid 65534");
    assert_untouched(&victim);

    // --workdir of another user's directory; a world-writable one.
    let theirs = "mkdir /var/tmp/theirs /var/tmp/open\nchown 65534 /var/tmp/theirs\nchmod 777 /var/tmp/open";
    in_private_var_tmp(dir.path(), theirs, &["run", &spec, "--db", &db, "--workdir", "/var/tmp/theirs/w"], "")
        .expect(2)
        .says("/var/tmp/theirs is owned by");
    in_private_var_tmp(dir.path(), theirs, &["run", &spec, "--db", &db, "--workdir", "/var/tmp/open/w"], "")
        .expect(2)
        .says("/var/tmp/open is writable by every user (mode 0777)");
    // Nothing reached the database: refused before the experiment was made.
    let store = fslab::store::Store::open(&dir.path().join("results.db")).unwrap();
    assert!(store.list_experiments().unwrap().is_empty());
}

#[test]
fn on_a_fresh_host_fslab_makes_its_directories_root_s_and_not_writable_by_others() {
    if !common::root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let db = dir.path().join("results.db").display().to_string();
    // A dry run creates nothing.
    let ran = in_private_var_tmp(dir.path(), "", &["run", &spec, "--db", &db, "--dry-run"], "ls -A /var/tmp");
    ran.expect(0);
    assert_eq!(after(&ran), "", "a dry run created directories");
    let ran = in_private_var_tmp(
        dir.path(),
        "",
        &["run", &spec, "--db", &db],
        "stat -c '%n %u %a' /var/tmp/fslab /var/tmp/fslab/*",
    );
    ran.expect(0).says("1 runs ok");
    let dirs = after(&ran);
    assert!(dirs.contains("/var/tmp/fslab 0 755\n"), "{dirs}");
    for line in dirs.lines() {
        let mode = line.rsplit(' ').next().unwrap();
        assert!(line.contains(" 0 ") && !mode.ends_with(['2', '3', '6', '7']), "writable by others: {line}");
    }
}
