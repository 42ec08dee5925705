//! Kernels by version from Debian's archive (`kernel = "debian:6.1-cloud"`),
//! against the real archive: apt with fslab's private lists, real
//! downloads (shared with the VM tests through their kernel cache), the
//! errors a file gets, and the host's apt setup left as it was.

use crate::common;
use crate::vm::kernel_cache;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use fslab::kernel::debian::{self, Archive, ResolveError, Wanted};

fn fslab_with_cache(cache: &Path, args: &[&str]) -> Output {
    Command::new(common::fslab_bin()).args(args).env("FSLAB_KERNEL_CACHE", cache).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Every file under the host's apt directories with its size and mtime.
fn host_apt_state() -> BTreeMap<String, (u64, Option<SystemTime>)> {
    fn walk(dir: &Path, out: &mut BTreeMap<String, (u64, Option<SystemTime>)>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(meta) = e.path().symlink_metadata() else { continue };
            if meta.is_dir() {
                walk(&e.path(), out);
            }
            out.insert(e.path().display().to_string(), (meta.len(), meta.modified().ok()));
        }
    }
    let mut state = BTreeMap::new();
    for dir in ["/etc/apt", "/var/lib/apt", "/var/cache/apt/archives"] {
        walk(Path::new(dir), &mut state);
    }
    state
}

fn wanted(text: &str) -> Wanted {
    Wanted::parse(text).unwrap().unwrap()
}

/// A fresh private archive lists bullseye, bookworm and trixie; a version
/// prefix with or without a flavour resolves to the newest match; fresh
/// lists are not fetched again; the host's apt files are not touched.
#[test]
fn kernels_of_all_three_releases_resolve_by_version_and_the_host_apt_is_untouched() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-debian");
    let before = host_apt_state();
    let archive = Archive::at(dir.path());
    match archive.refresh(Duration::ZERO) {
        Ok(()) => {}
        Err(ResolveError::Offline(e)) => {
            return fslab::testsupport::skip(&format!("Debian's archive is not reachable: {e:#}"));
        }
        Err(e) => panic!("{e}"),
    }
    let index = archive.index().unwrap();
    for (release, series) in [("bullseye", "5.10."), ("bookworm", "6.1."), ("trixie", "6.12.")] {
        let found: Vec<_> = index.iter().filter(|p| p.release() == release && p.abi.starts_with(series)).collect();
        assert!(!found.is_empty(), "no {series} kernel in {release}: {}", debian::existing(&index));
        for flavour in [None, Some("cloud"), Some("rt")] {
            assert!(found.iter().any(|p| p.flavour.as_deref() == flavour), "{release} has no {flavour:?} kernel");
        }
    }

    let k510 = archive.resolve(&wanted("debian:5.10")).unwrap();
    assert!(k510.name.starts_with("linux-image-5.10.0-") && k510.name.ends_with("-amd64"), "{k510:?}");
    assert_eq!((k510.flavour.as_deref(), k510.release()), (None, "bullseye"), "{k510:?}");
    let newest_510 = index.iter().filter(|p| p.abi.starts_with("5.10.") && p.flavour.is_none()).max_by(|a, b| {
        a.version.parse::<debversion::Version>().unwrap().cmp(&b.version.parse::<debversion::Version>().unwrap())
    });
    assert_eq!(Some(&k510.version), newest_510.map(|p| &p.version), "the newest 5.10 wins");

    let rt = archive.resolve(&wanted("debian:6.1-rt")).unwrap();
    assert!(rt.name.starts_with("linux-image-6.1.0-") && rt.name.ends_with("-rt-amd64"), "{rt:?}");

    // An exact ABI of trixie with its flavour names exactly that package.
    let trixie = index.iter().find(|p| p.release() == "trixie" && p.flavour.as_deref() == Some("cloud")).unwrap();
    let reference = format!("debian:{}-cloud", trixie.abi);
    let exact = fslab::kernel::source::debian_image::DebianImage::find(&reference, &kernel_cache()).unwrap();
    assert_eq!(exact.package.name, trixie.name);
    assert_eq!(exact.reference, reference);

    // Lists younger than a day are reused: no apt run, the stamp stays.
    let stamp = archive.updated_at();
    archive.refresh(debian::INDEX_MAX_AGE).unwrap();
    assert_eq!(archive.updated_at(), stamp);

    let after = host_apt_state();
    let changed: Vec<_> = after.iter().filter(|(k, v)| before.get(*k) != Some(v)).map(|(k, _)| k).collect();
    let gone: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert!(changed.is_empty() && gone.is_empty(), "host apt files changed: {changed:?}, removed: {gone:?}");
}

/// A version that does not exist, or a flavour that does not, is an error
/// naming the file, line and key and what does exist (exit 2); with no
/// network and no lists, an environment error (exit 3); all before any run.
#[test]
fn an_unknown_archive_kernel_is_an_error_naming_what_exists() {
    if !common::root_or_skip() {
        return;
    }
    if crate::vm::archive_kernel("6.1").is_err() {
        return fslab::testsupport::skip("Debian's archive is not reachable");
    }
    let dir = common::workdir("fslab-debian");
    let spec_text = |kernel: &str| {
        format!(
            "name = \"archive kernels\"\nworkdir = \"{}\"\n\n[defaults]\nfs = \"ext4\"\n\n\
             [[variant]]\nname = \"a\"\nkernel = \"debian:6.1-cloud\"\n\n[[variant]]\nname = \"b\"\nkernel = \"{kernel}\"\n\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.path().join("work").display()
        )
    };
    let spec = common::write_spec(dir.path(), "unknown.toml", &spec_text("debian:4.19-cloud"));
    let out = fslab_with_cache(&kernel_cache(), &["run", "--dry-run", spec.to_str().unwrap()]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("unknown.toml:13:") && shown.contains("`kernel`"), "{shown}");
    assert!(shown.contains("no Debian kernel matches `debian:4.19-cloud`"), "{shown}");
    for series in ["5.10 (5.10.0-", "6.1 (6.1.0-", "6.12 (6.12."] {
        assert!(shown.contains(series), "the versions that exist include {series}: {shown}");
    }

    let spec = common::write_spec(dir.path(), "flavour.toml", &spec_text("debian:6.1-nosuch"));
    let out = fslab_with_cache(&kernel_cache(), &["run", "--dry-run", spec.to_str().unwrap()]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("no nosuch kernel of version 6.1") && shown.contains("debian:6.1-rt"), "{shown}");

    // No lists yet and no way out: apt is pointed at a closed port.
    let empty = dir.path().join("empty-cache");
    let spec = common::write_spec(dir.path(), "offline.toml", &spec_text("debian:6.1-rt"));
    let out = Command::new(common::fslab_bin())
        .args(["run", "--dry-run", spec.to_str().unwrap()])
        .env("FSLAB_KERNEL_CACHE", &empty)
        .env("http_proxy", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(shown.contains("offline.toml:9:") && shown.contains("network"), "{shown}");
}

/// `fslab kernel fetch` downloads and unpacks through the same resolver
/// (sharing the VM tests' package), `kernel list` shows it with its size,
/// `list --available` marks it cached, and `prune` removes what no stored
/// experiment needs.
#[test]
fn kernel_fetch_list_and_prune() {
    if !common::root_or_skip() {
        return;
    }
    let Ok((found, shared_deb)) = crate::vm::archive_kernel("6.1") else {
        return fslab::testsupport::skip("Debian's archive is not reachable");
    };
    let dir = common::workdir("fslab-debian");
    // A cache of its own that borrows the shared lists and package (hard
    // links: no second download), so pruning it cannot touch the shared one.
    let cache = dir.path().to_path_buf();
    let shared = Archive::at(&kernel_cache()).root().to_path_buf();
    let out = Command::new("cp")
        .args(["-al", shared.to_str().unwrap(), Archive::at(&cache).root().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(Archive::at(&cache).downloaded().iter().any(|d| d.file_name() == shared_deb.file_name()));

    let out = fslab_with_cache(&cache, &["kernel", "fetch", "debian:6.1-cloud"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let p = &found.package;
    assert!(shown.contains(&format!("{} {} ({})", p.name, p.version, p.suite)), "{shown}");

    let out = fslab_with_cache(&cache, &["kernel", "list", "--available"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let cached_row = shown.lines().find(|l| l.contains(p.kernel_release()) && l.contains(&p.version)).unwrap_or("");
    assert!(cached_row.contains("MiB") && cached_row.contains(p.release()), "{shown}");
    let available_row =
        shown.lines().find(|l| l.contains(&format!("debian:{}-cloud ", p.abi)) && l.contains("yes")).unwrap_or("");
    assert!(available_row.contains(&p.suite), "the fetched kernel is marked cached: {shown}");

    // A source tree's working directories (as a build leaves them; nothing
    // stored names the tree) go too.
    let builds = fslab::kernel::build::builds_dir(&cache);
    for d in ["tree-00c0ffee00c0ffee/src", "obj-00c0ffee00c0ffee", "cfg-00c0ffee00c0ffee"] {
        std::fs::create_dir_all(builds.join(d)).unwrap();
        std::fs::write(builds.join(d).join("Makefile"), "x").unwrap();
    }

    let db = dir.path().join("empty.db");
    fslab::store::Store::open(&fslab::store::StoreLocation::parse(db.to_str().unwrap())).unwrap();
    let out = fslab_with_cache(&cache, &["kernel", "prune", "--dry-run", "--db", db.to_str().unwrap()]);
    let shown = text(&out);
    assert!(out.status.success() && shown.contains("would remove") && shown.contains(p.kernel_release()), "{shown}");
    assert!(shown.contains("would remove source tree 00c0ffee00c0ffee"), "{shown}");
    assert_eq!(fslab::kernel::cache::entries(&cache).unwrap().len(), 1, "a dry run removes nothing");
    assert!(builds.join("obj-00c0ffee00c0ffee").is_dir(), "a dry run removes nothing");
    // Without --yes prune only says what it would remove (issue 28.5).
    let out = fslab_with_cache(&cache, &["kernel", "prune", "--db", db.to_str().unwrap()]);
    assert!(out.status.success() && text(&out).contains("remove with --yes"), "{}", text(&out));
    assert_eq!(fslab::kernel::cache::entries(&cache).unwrap().len(), 1, "prune without --yes removes nothing");
    let out = fslab_with_cache(&cache, &["kernel", "prune", "--yes", "--db", db.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(fslab::kernel::cache::entries(&cache).unwrap().is_empty());
    assert!(fslab::kernel::build::build_dirs(&cache).is_empty(), "the tree and its build directories are gone");
    assert!(Archive::at(&cache).downloaded().is_empty(), "the package goes with its entry");
    assert!(shared_deb.is_file(), "the shared package is untouched");
}
