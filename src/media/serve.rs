//! The FUSE server: one directory with the testbed's image as `image` and
//! the running evidence as `evidence`, every image request charged by the
//! model and answered when the medium would have finished.
//!
//! `image` is opened with `FOPEN_DIRECT_IO`, so the kernel passes each
//! request through unchanged (no page cache on the FUSE side) up to the
//! negotiated `max_write`/`max_pages`; the loop device in front of it is
//! limited to the same size ([`MAX_REQUEST`]), so the requests the model
//! sees are the ones the block trace records. Parallel media (ssd,
//! passthrough) are served by several threads with asynchronous direct I/O
//! and parallel direct writes, so the path itself is not what limits them.
//! Serial media (flash, disks) are served by one thread, one request at a
//! time; the model's clock
//! (`busy_until`) makes a request that arrives while the device is busy
//! wait for it. Reading `evidence` returns the [`Evidence`] as JSON;
//! writing to it starts a new, paced account (`pause` stops pacing).

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, SessionACL, TimeOrNow, WriteFlags,
};

use super::evidence::{Evidence, Ledger};
use super::{DeviceSpec, Model, Op};

/// Largest request the server takes (and the loop device is limited to):
/// the kernel's default FUSE `max_pages_limit` (256 pages).
pub const MAX_REQUEST: u32 = 1 << 20;
/// The mount's source (and subtype) in mountinfo, by which cleanup knows it.
pub const SUBTYPE: &str = "fslab-media";
pub const IMAGE_FILE: &str = "image";
pub const EVIDENCE_FILE: &str = "evidence";
/// Written to `evidence`: stop pacing (anything else: a new account, paced).
const PAUSE: &[u8] = b"pause";

const ROOT: u64 = 1;
const IMAGE: u64 = 2;
const EVIDENCE: u64 = 3;
const TTL: Duration = Duration::from_secs(3600);
/// Sleeping ends this much before a reply is due; the rest is spun, as
/// sleeps overshoot by tens of microseconds.
const SPIN: Duration = Duration::from_micros(150);
/// How long after a serial medium finished a request the next one may
/// arrive and still count as queued behind it (FUSE's own round trip, a
/// few hundred microseconds, more on a loaded host).
const CATCH_UP: Duration = Duration::from_millis(2);
/// Requests a parallel medium (ssd, passthrough) may have in flight in
/// the kernel (`max_background`), and the server threads taking them.
const PARALLEL_REQUESTS: u16 = 64;
const PARALLEL_THREADS: usize = 4;

thread_local! {
    /// Each server thread's buffer for the image's reads.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Device {
    model: Box<dyn Model>,
    ledger: Ledger,
    /// When the medium finishes what it was given so far.
    busy_until: Instant,
}

pub struct MediaFs {
    image: File,
    size: u64,
    serial: bool,
    /// Whether replies wait for the medium. Off while the testbed is built
    /// (mkfs, the workload's preparation) and torn down: the model still
    /// charges every request, so its state (open AUs, head) is what those
    /// left behind, but only the measured part runs at the medium's speed.
    paced: AtomicBool,
    device: Mutex<Device>,
}

impl MediaFs {
    pub fn new(spec: &DeviceSpec, image: File) -> Result<MediaFs> {
        let size = image.metadata().context("reading the image's size")?.len();
        Ok(MediaFs {
            image,
            size,
            serial: spec.serial(),
            paced: AtomicBool::new(false),
            device: Mutex::new(Device { model: spec.model(size), ledger: Ledger::new(), busy_until: Instant::now() }),
        })
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size) = match ino {
            ROOT => (FileType::Directory, 0o755, 0),
            IMAGE => (FileType::RegularFile, 0o600, self.size),
            _ => (FileType::RegularFile, 0o600, 0),
        };
        let now = SystemTime::UNIX_EPOCH;
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind,
            perm,
            nlink: if ino == ROOT { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Charge one request and return when it is due.
    fn charge(&self, op: Op, offset: u64, len: u64) -> Instant {
        let arrived = Instant::now();
        let mut device = self.device.lock().unwrap_or_else(|e| e.into_inner());
        let cost = device.model.charge(op, offset, len);
        let counters = device.model.counters();
        device.ledger.record(op, len, &cost, counters);
        // A request that reaches the server within CATCH_UP of the medium
        // going idle was waiting on FUSE's one-at-a-time path, not on the
        // host: on the real medium it would have started at once.
        let start = if !self.serial {
            arrived
        } else if arrived <= device.busy_until + CATCH_UP {
            device.busy_until
        } else {
            arrived
        };
        let due = start + Duration::from_secs_f64(cost.total());
        if self.serial {
            device.busy_until = due;
        }
        due
    }

    /// Wait until `due`; account any lateness.
    fn wait(&self, due: Instant) {
        if !self.paced.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        if now < due {
            if due - now > SPIN {
                std::thread::sleep(due - now - SPIN);
            }
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        } else if now - due > Duration::from_millis(1) {
            self.device.lock().unwrap_or_else(|e| e.into_inner()).ledger.late((now - due).as_secs_f64());
        }
    }

    fn evidence(&self) -> Evidence {
        self.device.lock().unwrap_or_else(|e| e.into_inner()).ledger.snapshot()
    }

    /// A new, paced account, starting with the medium idle: what the
    /// unpaced preparation was charged (mkfs writing the image) is the
    /// model's state, not a backlog for the measured part's first request
    /// to wait out (it had pushed `busy_until` ~23 s past the start of the
    /// quickstart's measured part).
    fn reset(&self) {
        self.paced.store(true, Ordering::Relaxed);
        let mut device = self.device.lock().unwrap_or_else(|e| e.into_inner());
        let counters = device.model.counters();
        device.ledger.reset(counters);
        device.busy_until = Instant::now();
    }
}

impl Filesystem for MediaFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_REQUEST);
        let _ = config.set_max_readahead(MAX_REQUEST);
        if !self.serial {
            // The loop device submits its requests as asynchronous direct
            // I/O; without FUSE_ASYNC_DIO the kernel turns each into a
            // synchronous FUSE round trip, one at a time per loop worker.
            // With it, up to `max_background` are in flight, for the
            // server's threads to take in parallel.
            let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
            let _ = config.set_max_background(PARALLEL_REQUESTS);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match (parent.0, name.to_str()) {
            (ROOT, Some(IMAGE_FILE)) => IMAGE,
            (ROOT, Some(EVIDENCE_FILE)) => EVIDENCE,
            _ => return reply.error(Errno::ENOENT),
        };
        reply.entry(&TTL, &self.attr(ino), Generation(0));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino.0 {
            ROOT | IMAGE | EVIDENCE => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The medium's size is fixed; truncating `evidence` (`> evidence`) is fine.
        if ino.0 == IMAGE && size.is_some_and(|s| s != self.size) {
            return reply.error(Errno::EINVAL);
        }
        reply.attr(&TTL, &self.attr(ino.0));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino.0 {
            // Parallel media also take concurrent writes: without
            // FOPEN_PARALLEL_DIRECT_WRITES the kernel holds the inode lock
            // across each direct write, one at a time.
            IMAGE if !self.serial => {
                reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES)
            }
            IMAGE | EVIDENCE => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == EVIDENCE {
            let text = serde_json::to_vec(&self.evidence()).unwrap_or_default();
            let from = (offset as usize).min(text.len());
            let to = (from + size as usize).min(text.len());
            return reply.data(&text[from..to]);
        }
        let len = u64::from(size).min(self.size.saturating_sub(offset));
        if !sector_aligned(offset, len) {
            return reply.error(Errno::EINVAL);
        }
        let due = self.charge(Op::Read, offset, len);
        READ_BUFFER.with_borrow_mut(|buf| {
            // Sized (and zeroed) once per thread: a fresh 1 MiB buffer per
            // request cost page faults and zeroing on every read.
            if buf.len() < len as usize {
                buf.resize(MAX_REQUEST.max(len as u32) as usize, 0);
            }
            let buf = &mut buf[..len as usize];
            match self.image.read_exact_at(buf, offset) {
                Ok(()) => {
                    self.wait(due);
                    reply.data(buf);
                }
                Err(e) => reply.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
            }
        })
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == EVIDENCE {
            if data.starts_with(PAUSE) {
                self.paced.store(false, Ordering::Relaxed);
            } else {
                self.reset();
            }
            return reply.written(data.len() as u32);
        }
        if offset + data.len() as u64 > self.size {
            return reply.error(Errno::ENOSPC);
        }
        if !sector_aligned(offset, data.len() as u64) {
            return reply.error(Errno::EINVAL);
        }
        let due = self.charge(Op::Write, offset, data.len() as u64);
        match self.image.write_all_at(data, offset) {
            Ok(()) => {
                self.wait(due);
                reply.written(data.len() as u32);
            }
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        if ino.0 == IMAGE {
            let due = self.charge(Op::Flush, 0, 0);
            self.wait(due);
        }
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (IMAGE, FileType::RegularFile, IMAGE_FILE),
            (EVIDENCE, FileType::RegularFile, EVIDENCE_FILE),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}

/// Whether a request on the image is whole 512-byte sectors, as a block
/// device takes them. Refusing the rest (EINVAL, as O_DIRECT on a disk
/// does) matters to QEMU: it probes the served file's alignment, and a file
/// that takes 1-byte-aligned direct I/O is taken for one that ignores
/// O_DIRECT and gets 4 KiB alignment, so a guest's 1 KiB ext4 blocks would
/// reach the model as 4 KiB read-modify-writes. The host's loop device
/// only sends whole sectors anyway.
fn sector_aligned(offset: u64, len: u64) -> bool {
    offset.is_multiple_of(512) && len.is_multiple_of(512)
}

/// Serve `image` as `spec` at `mountpoint` (an empty directory) until the
/// mount goes away: the body of the hidden `fslab media-serve`. SIGTERM,
/// SIGINT and SIGHUP detach the mount, which ends the session.
pub fn serve(spec: &DeviceSpec, image: &Path, mountpoint: &Path) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .with_context(|| format!("opening {}", image.display()))?;
    let fs = MediaFs::new(spec, file)?;
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName(SUBTYPE.to_string()), MountOption::Subtype(SUBTYPE.to_string())];
    config.acl = SessionACL::Owner;
    // Serial media take one request at a time; the others get several
    // threads (each with its own cloned /dev/fuse descriptor) so the FUSE
    // path is not what limits them.
    config.n_threads = Some(if spec.serial() { 1 } else { PARALLEL_THREADS });
    config.clone_fd = !spec.serial();
    let target = mountpoint.to_path_buf();
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
        .context("installing signal handlers")?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
        }
    });
    let session = fuser::Session::new(fs, mountpoint, &config)
        .with_context(|| format!("mounting the media server at {}", mountpoint.display()))?;
    session.run().context("serving FUSE requests")
}

/// The evidence of the server mounted at `mountpoint`.
pub fn read_evidence(mountpoint: &Path) -> Result<Evidence> {
    use std::io::Read;
    let path = mountpoint.join(EVIDENCE_FILE);
    // One read: every read of the file is a fresh snapshot, so reading on
    // from an offset would splice two of them.
    let mut buf = vec![0u8; 64 << 10];
    let n = std::fs::File::open(&path)
        .and_then(|mut f| f.read(&mut buf))
        .with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&buf[..n]).with_context(|| format!("parsing {}", path.display()))
}

/// Start a new account at the server mounted at `mountpoint`.
pub fn reset_evidence(mountpoint: &Path) -> Result<()> {
    let path = mountpoint.join(EVIDENCE_FILE);
    std::fs::write(&path, b"reset\n").with_context(|| format!("resetting {}", path.display()))
}

/// Stop pacing the server mounted at `mountpoint` (requests are still charged).
pub fn pause(mountpoint: &Path) -> Result<()> {
    let path = mountpoint.join(EVIDENCE_FILE);
    std::fs::write(&path, PAUSE).with_context(|| format!("pausing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measured part starts with the medium idle (issue 28 item 6: the
    /// quickstart's first metadata read waited 23.5 s for the model's cost
    /// of mkfs, which had run unpaced). Load-independent: the due time is
    /// computed, not waited for.
    #[test]
    fn a_paced_account_starts_with_the_medium_idle() {
        let spec = super::super::presets::find("sdcard").unwrap();
        let image = tempfile::tempfile().unwrap();
        image.set_len(256 << 20).unwrap();
        let fs = MediaFs::new(&spec, image).unwrap();
        // The preparation, unpaced: 128 MiB the card takes seconds to write.
        for i in 0..128u64 {
            fs.charge(Op::Write, i << 20, 1 << 20);
        }
        let backlog = fs.device.lock().unwrap().busy_until.saturating_duration_since(Instant::now());
        assert!(backlog > Duration::from_secs(5), "the preparation was charged: {backlog:?}");
        fs.reset();
        let due = fs.charge(Op::Read, 0, 4096);
        let wait = due.saturating_duration_since(Instant::now());
        assert!(wait < Duration::from_secs(1), "the first paced read is due in {wait:?}");
    }
}
