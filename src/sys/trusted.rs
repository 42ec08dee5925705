//! Directories root may trust: fslab's work directories, caches and
//! registries hold the images it formats, the trees it runs `make` in and
//! the files it writes as root, so a directory another user owns or could
//! swap (a symlink planted in `/var/tmp`, a directory `nobody` made first)
//! would let that user point root's writes anywhere.
//!
//! The rule, as OpenSSH's `StrictModes` and sudo's checks of its own files
//! apply it: every component of the path, from `/` down, must be owned by
//! root or by the user fslab runs as, and must not be writable by other
//! users unless it is sticky (`/tmp`, `/var/tmp`: there only an entry's
//! owner may remove or rename it). A symlink on the way counts as the
//! directory it stands for: it is followed only when its owner is trusted
//! (its parent already was), so a root-made link to another disk is fine
//! and one another user planted is refused. Directories fslab creates are
//! made `0755` by the user it runs as. Written by hand because no crate
//! checks a whole path's ownership this way (`tempfile`, `cap-std` confine
//! opens beneath a directory but trust the directory itself).

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// A directory fslab refuses to use, with why (its owner, its mode or the
/// link that leads to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The path fslab was asked to use.
    pub path: PathBuf,
    /// The component at fault and what is wrong with it.
    pub why: String,
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refusing {}: {} (fslab writes there as {}; make it yours with `chown` and `chmod go-w`, or \
             choose another directory)",
            self.path.display(),
            self.why,
            user_name(nix::unistd::geteuid().as_raw())
        )
    }
}

impl std::error::Error for Untrusted {}

/// Symlinks followed along one path before giving up (as the kernel's 40).
const MAX_LINKS: usize = 40;

/// Check that `path` (which must exist) and every directory above it may be
/// trusted; returns the path with its trusted links resolved.
pub fn check_dir(path: &Path) -> Result<PathBuf, Untrusted> {
    trusted_dir(path, Missing::Fail)
}

/// Check what exists of `path` as [`check_dir`] does and create nothing: a
/// dry run's check of the directories a run would make.
pub fn check_existing(path: &Path) -> Result<(), Untrusted> {
    walk(path, Missing::Stop).map(drop).map_err(|why| Untrusted { path: path.to_path_buf(), why })
}

/// Create `path` and its missing parents (mode 0755, owned by the user
/// fslab runs as), checking every component that exists on the way as
/// [`check_dir`] does; returns the resolved path.
pub fn ensure_dir(path: &Path) -> Result<PathBuf, Untrusted> {
    trusted_dir(path, Missing::Create)
}

/// What [`walk`] does at the first component that does not exist.
#[derive(Clone, Copy, PartialEq)]
enum Missing {
    Fail,
    Create,
    /// Stop there: everything that exists was checked.
    Stop,
}

fn trusted_dir(path: &Path, missing: Missing) -> Result<PathBuf, Untrusted> {
    let untrusted = |why: String| Untrusted { path: path.to_path_buf(), why };
    let resolved = walk(path, missing).map_err(untrusted)?;
    match fs::metadata(&resolved) {
        Ok(m) if m.is_dir() => Ok(resolved),
        Ok(_) => Err(untrusted(format!("{} is not a directory", resolved.display()))),
        Err(e) => Err(untrusted(format!("{}: {e}", resolved.display()))),
    }
}

/// Create `dir` if needed ([`ensure_dir`]) and refuse it unless trusted,
/// as an `io::Error` for callers whose errors are I/O (registries).
pub fn ensure_dir_io(dir: &Path) -> std::io::Result<PathBuf> {
    ensure_dir(dir).map_err(|u| std::io::Error::new(std::io::ErrorKind::PermissionDenied, u))
}

/// Open `path` for reading and writing, creating it (mode 0644) if it is
/// missing, without following a symlink in its last component: a link
/// there fails with ELOOP instead of writing through it.
pub fn open_rw_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Write `contents` to `path` whole or not at all: a fresh file beside it
/// (created exclusively, so never through a link), renamed over it.
pub fn write_replacing(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    write_replacing_with_mode(path, contents, 0o644)
}

/// [`write_replacing`] with the file's mode (an executable script: 0o755).
pub fn write_replacing_with_mode(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().map(OsString::from).unwrap_or_default();
    let mut tmp_name = OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let _ = fs::remove_file(&tmp); // a leftover of this pid's predecessor
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(contents))
        .and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// Walk `path` from `/`, checking each component and following trusted
/// links; `missing` says what to do where the path stops existing. Errors
/// say what is wrong.
fn walk(path: &Path, missing: Missing) -> Result<PathBuf, String> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?.join(path)
    };
    // Components still to visit, last first (a link's target is pushed in front).
    let mut todo: Vec<OsString> = components(&absolute).into_iter().rev().collect();
    let mut at = PathBuf::from("/");
    check_one(&at, &fs::symlink_metadata(&at).map_err(|e| format!("/: {e}"))?)?;
    let mut links = 0;
    while let Some(name) = todo.pop() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = match fs::symlink_metadata(&next) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing == Missing::Stop => return Ok(next),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing == Missing::Create => {
                match DirBuilder::new().mode(0o755).create(&next) {
                    Ok(()) => {}
                    // Made by a concurrent fslab: checked below like any other.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(format!("creating {}: {e}", next.display())),
                }
                fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?
            }
            Err(e) => return Err(format!("{}: {e}", next.display())),
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(format!("{}: too many levels of symbolic links", next.display()));
            }
            if !trusted_owner(meta.uid()) {
                return Err(format!(
                    "{} is a symbolic link made by {}, not by root or you",
                    next.display(),
                    user_name(meta.uid())
                ));
            }
            let target = fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            todo.extend(components(&target).into_iter().rev());
            continue;
        }
        if todo.is_empty() || meta.is_dir() {
            check_one(&next, &meta)?;
        }
        at = next;
    }
    Ok(at)
}

/// The names of `path`'s components (`..` kept, `.` and `/` dropped).
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// Whether one existing, non-link component may be trusted.
fn check_one(path: &Path, meta: &fs::Metadata) -> Result<(), String> {
    if !trusted_owner(meta.uid()) {
        return Err(format!("{} is owned by {}, not by root or you", path.display(), user_name(meta.uid())));
    }
    let mode = meta.mode();
    let sticky = mode & libc::S_ISVTX != 0;
    let group_writable = mode & 0o020 != 0 && meta.gid() != 0;
    let world_writable = mode & 0o002 != 0;
    if meta.is_dir() && (group_writable || world_writable) && !sticky {
        let who = if world_writable { "every user".to_string() } else { format!("group {}", group_name(meta.gid())) };
        return Err(format!("{} is writable by {who} (mode {:04o})", path.display(), mode & 0o7777));
    }
    Ok(())
}

/// `name (uid N)`, or `uid N` when the user database does not know it.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("user `{}` (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(group)) => format!("`{}` (gid {gid})", group.name),
        _ => format!("gid {gid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
    }

    #[test]
    fn directories_of_other_users_links_they_made_and_writable_ones_are_refused() {
        if !crate::testsupport::root_or_skip("giving files to another user") {
            return;
        }
        let base = tempfile::tempdir_in("/var/tmp").unwrap();
        let b = base.path();
        // Mine: created, 0755, and the path comes back resolved.
        let mine = ensure_dir(&b.join("a/b")).unwrap();
        assert_eq!(mine, fs::canonicalize(b.join("a/b")).unwrap());
        assert_eq!(fs::metadata(&mine).unwrap().mode() & 0o777, 0o755);
        assert!(check_dir(&mine).is_ok());

        // Owned by nobody: refused, naming the owner; nothing created inside.
        let theirs = b.join("theirs");
        fs::create_dir(&theirs).unwrap();
        chown(&theirs, 65534);
        let err = ensure_dir(&theirs.join("cache")).unwrap_err();
        assert!(err.why.contains("owned by") && err.why.contains("uid 65534"), "{err}");
        assert!(!theirs.join("cache").exists());

        // A link another user made is refused even to a good directory; a
        // link root made is followed.
        let planted = b.join("planted");
        symlink(&mine, &planted).unwrap();
        chown(&planted, 65534);
        let err = check_dir(&planted).unwrap_err();
        assert!(err.why.contains("symbolic link made by") && err.why.contains("uid 65534"), "{err}");
        assert!(ensure_dir(&planted.join("x")).is_err());
        assert!(!mine.join("x").exists());
        let rootlink = b.join("rootlink");
        symlink("a/b", &rootlink).unwrap();
        assert_eq!(check_dir(&rootlink).unwrap(), mine);

        // Writable by everyone without the sticky bit: refused; sticky is fine.
        let open = b.join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = ensure_dir(&open.join("w")).unwrap_err();
        assert!(err.why.contains("writable by every user (mode 0777)"), "{err}");
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(ensure_dir(&open.join("w")).is_ok());
        // `..` is walked, not skipped.
        assert_eq!(check_dir(&b.join("a/b/..")).unwrap(), fs::canonicalize(b.join("a")).unwrap());
        assert!(check_dir(&b.join("a/../theirs")).is_err());
        // A dry run's check creates nothing and still sees the owner.
        assert!(check_existing(&b.join("new/deeper")).is_ok());
        assert!(!b.join("new").exists());
        assert!(check_existing(&theirs.join("new")).is_err());
        chown(&theirs, 0);
    }

    #[test]
    fn writes_never_go_through_a_link() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let link = base.path().join("registry");
        symlink(&victim, &link).unwrap();
        let err = open_rw_nofollow(&link).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        // Replacing renames a fresh file over the link itself.
        write_replacing(&link, b"new").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(fs::read_to_string(&link).unwrap(), "new");
        assert!(!fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }
}
