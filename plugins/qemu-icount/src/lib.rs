//! QEMU TCG plugin: how many guest instructions ran between two marker
//! instructions, all vCPUs, kernel and user together, and optionally where
//! the kernel's share of them ran.
//!
//! fslab's guest agent executes `nopw START(%rax,%rax,1)` just before a
//! run's measured part and `nopw END(%rax,%rax,1)` just after it (bytes
//! `66 0f 1f 84 00` + a 4-byte magic displacement; a NOP on any x86-64).
//! The plugin recognises them by their bytes when QEMU translates them and
//! calls back when they execute; at the end marker it writes the window's
//! count, in decimal, to the file named by `out=<path>` (replaced
//! atomically), which the host reads after the run.
//!
//! Counting: each translated block gets an exec callback that adds the
//! block's instruction count to its vCPU's own slot. Plugin API v1 (QEMU
//! 7.2) has no per-vCPU scoreboards, and its inline add on one shared u64
//! loses updates under multi-threaded TCG; one slot per vCPU has a single
//! writer, so a plain load and store is exact. `count=inline` selects the
//! shared inline add instead (only to measure the two against each other).
//!
//! Attribution (`blocks=<path>`): each translated kernel block (a guest
//! address in the upper half) gets a counter of its own, looked up by
//! (address, instruction count) when QEMU translates it, so every
//! retranslation of the same code shares one and memory stays bounded by
//! the kernel's code, and handed to the exec callback as its data (no
//! lookup per execution). A counter holds the block's executions in one
//! slot per vCPU, single writer each as above, so two vCPUs executing one
//! block at once lose nothing. User-space blocks are counted in the plain
//! per-vCPU slots, as one `user` figure: fresh address-space layouts of
//! every process would make per-address counters grow without bound, and
//! the host maps user space to one bucket anyway. At the end marker the
//! window's counts by block address (only blocks that ran in it) go to
//! `blocks=<path>` and their sum to `out=<path>`, both from one snapshot,
//! so the per-address counts add up to the count exactly.
//!
//! A block counts whole when it starts, so a marker counts the rest of its
//! block too; that is the same for every run of the same code.
//!
//! A separate artifact under the GPL (QEMU's plugin API is GPL), loaded with
//! `-plugin <this .so>,arg=out=<path>[,arg=blocks=<path>]`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use qemu_plugin_sys::*;

/// The marker displacements; fslab's `vm::icount` uses the same values.
const MAGIC_START: u32 = 0x4653_4c53;
const MAGIC_END: u32 = 0x4653_4c45;
const NOPW_DISP32: [u8; 5] = [0x66, 0x0f, 0x1f, 0x84, 0x00];
/// Where x86-64's upper (kernel) half of the address space starts.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
/// The first line of the blocks file; fslab's `vm::icount` checks it.
const BLOCKS_HEADER: &str = "fslab-qemu-icount blocks 1";

/// QEMU checks this against the plugin API versions it implements.
#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// One vCPU's count, on its own cache line so vCPU threads do not share one.
#[repr(align(64))]
struct Slot(AtomicU64);

const SLOTS: usize = 256;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Slot = Slot(AtomicU64::new(0));
static COUNTS: [Slot; SLOTS] = [ZERO; SLOTS];
/// vCPUs beyond the slots share this one, atomically.
static OVERFLOW: AtomicU64 = AtomicU64::new(0);
/// The target of `count=inline` (racy under multi-threaded TCG).
static mut INLINE: u64 = 0;
static INLINE_MODE: AtomicBool = AtomicBool::new(false);

/// Where the window's count goes, and where its blocks go (attribution on).
static OUT: OnceLock<PathBuf> = OnceLock::new();
static BLOCKS_OUT: OnceLock<PathBuf> = OnceLock::new();
/// The plain count at the start marker (attribution off), or the user
/// slots' sum there (attribution on; the blocks keep their own start).
static WINDOW: Mutex<Option<u64>> = Mutex::new(None);

/// vCPUs with a slot of their own in a [`Block`]; fslab's VMs have 1-8.
const BLOCK_SLOTS: usize = 8;

/// One kernel block's counter: how often the code at `vaddr`, translated
/// as `insns` instructions, was executed.
struct Block {
    vaddr: u64,
    insns: u64,
    /// Executions by vCPU, each written only by its vCPU's thread.
    by_vcpu: [AtomicU64; BLOCK_SLOTS],
    /// Executions by vCPUs past the slots, added atomically.
    shared: AtomicU64,
    /// Executions at the window's start marker (written under `WINDOW`).
    start: AtomicU64,
}

impl Block {
    fn executions(&self) -> u64 {
        self.by_vcpu.iter().map(|s| s.load(Ordering::Relaxed)).sum::<u64>() + self.shared.load(Ordering::Relaxed)
    }
}

/// Every kernel block's counter by (address, instructions). Looked up only
/// at translation; the counters live as long as QEMU.
fn blocks() -> &'static Mutex<HashMap<(u64, u64), &'static Block>> {
    static BLOCKS: OnceLock<Mutex<HashMap<(u64, u64), &'static Block>>> = OnceLock::new();
    BLOCKS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn slots_total() -> u64 {
    COUNTS.iter().map(|s| s.0.load(Ordering::Relaxed)).sum::<u64>() + OVERFLOW.load(Ordering::Relaxed)
}

fn total() -> u64 {
    // SAFETY: a plain read of a u64 QEMU adds to; a torn or stale value is
    // the documented inexactness of the inline mode.
    let inline = unsafe { std::ptr::read_volatile(std::ptr::addr_of!(INLINE)) };
    slots_total() + inline
}

unsafe extern "C" fn block_executed(vcpu: c_uint, insns: *mut c_void) {
    let n = insns as u64;
    match COUNTS.get(vcpu as usize) {
        // Only this vCPU's thread writes its slot.
        Some(slot) => slot.0.store(slot.0.load(Ordering::Relaxed) + n, Ordering::Relaxed),
        None => {
            OVERFLOW.fetch_add(n, Ordering::Relaxed);
        }
    }
}

unsafe extern "C" fn kernel_block_executed(vcpu: c_uint, block: *mut c_void) {
    // SAFETY: the data registered at translation: a leaked, never freed Block.
    let block = &*(block as *const Block);
    match block.by_vcpu.get(vcpu as usize) {
        // Only this vCPU's thread writes its slot.
        Some(slot) => slot.store(slot.load(Ordering::Relaxed) + 1, Ordering::Relaxed),
        None => {
            block.shared.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The window's kernel instructions by block address, and the user-space
/// instructions, read once, so that they add up to the total written.
struct Snapshot {
    user: u64,
    kernel: BTreeMap<u64, u64>,
}

impl Snapshot {
    fn total(&self) -> u64 {
        self.user + self.kernel.values().sum::<u64>()
    }
}

/// Marks every counter's start of a window (under `WINDOW`).
fn start_blocks() {
    let blocks = blocks().lock().unwrap_or_else(|e| e.into_inner());
    for block in blocks.values() {
        block.start.store(block.executions(), Ordering::Relaxed);
    }
}

/// The window since [`start_blocks`] (under `WINDOW`). A block translated
/// after the start marker started at zero.
fn snapshot(user_start: u64) -> Snapshot {
    let user = slots_total() - user_start;
    let mut kernel = BTreeMap::new();
    let blocks = blocks().lock().unwrap_or_else(|e| e.into_inner());
    for block in blocks.values() {
        let ran = block.executions() - block.start.load(Ordering::Relaxed);
        if ran > 0 {
            *kernel.entry(block.vaddr).or_insert(0) += ran * block.insns;
        }
    }
    Snapshot { user, kernel }
}

/// `text` to `path` through a temporary file and a rename, so the host
/// never reads half of it.
fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    write(&mut file)?;
    file.into_inner().map_err(|e| e.into_error())?;
    std::fs::rename(&tmp, path)
}

fn write_blocks(path: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    write_atomically(path, |out| {
        writeln!(out, "{BLOCKS_HEADER}")?;
        writeln!(out, "total {}", snapshot.total())?;
        writeln!(out, "user {}", snapshot.user)?;
        for (vaddr, insns) in &snapshot.kernel {
            writeln!(out, "{vaddr:x} {insns}")?;
        }
        Ok(())
    })
}

unsafe extern "C" fn marker_executed(_vcpu: c_uint, which: *mut c_void) {
    let attributing = BLOCKS_OUT.get().is_some();
    let mut window = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
    if which as u32 == MAGIC_START {
        if attributing {
            start_blocks();
            *window = Some(slots_total());
        } else {
            *window = Some(total());
        }
        return;
    }
    let Some(start) = window.take() else { return };
    let Some(out) = OUT.get() else { return };
    // Nowhere to report a failure from inside QEMU: the host sees no file.
    let count = match BLOCKS_OUT.get() {
        Some(blocks_out) => {
            let snapshot = snapshot(start);
            // The blocks first: a count file means its blocks are there.
            if write_blocks(blocks_out, &snapshot).is_err() {
                return;
            }
            snapshot.total()
        }
        None => total() - start,
    };
    let _ = write_atomically(out, |f| writeln!(f, "{count}"));
}

/// The magic of a marker instruction, if `insn` is one.
unsafe fn marker(insn: *const qemu_plugin_insn) -> Option<u32> {
    if qemu_plugin_insn_size(insn) != 9 {
        return None;
    }
    let bytes = std::slice::from_raw_parts(qemu_plugin_insn_data(insn) as *const u8, 9);
    if bytes[..5] != NOPW_DISP32 {
        return None;
    }
    let magic = u32::from_le_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
    [MAGIC_START, MAGIC_END].contains(&magic).then_some(magic)
}

/// The counter of the kernel block at `vaddr` with `insns` instructions,
/// made at its first translation.
fn block_counter(vaddr: u64, insns: u64) -> &'static Block {
    let mut blocks = blocks().lock().unwrap_or_else(|e| e.into_inner());
    blocks.entry((vaddr, insns)).or_insert_with(|| {
        Box::leak(Box::new(Block {
            vaddr,
            insns,
            by_vcpu: Default::default(),
            shared: AtomicU64::new(0),
            start: AtomicU64::new(0),
        }))
    })
}

unsafe extern "C" fn block_translated(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let n = qemu_plugin_tb_n_insns(tb);
    let vaddr = qemu_plugin_tb_vaddr(tb);
    if INLINE_MODE.load(Ordering::Relaxed) {
        qemu_plugin_register_vcpu_tb_exec_inline(
            tb,
            qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            std::ptr::addr_of_mut!(INLINE) as *mut c_void,
            n as u64,
        );
    } else if BLOCKS_OUT.get().is_some() && vaddr >= KERNEL_HALF {
        let block: *const Block = block_counter(vaddr, n as u64);
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(kernel_block_executed),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            block as *mut c_void,
        );
    } else {
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(block_executed),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            n as *mut c_void,
        );
    }
    for i in 0..n {
        let insn = qemu_plugin_tb_get_insn(tb, i);
        if let Some(magic) = marker(insn) {
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(marker_executed),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                magic as usize as *mut c_void,
            );
        }
    }
}

/// # Safety
/// Called by QEMU once, with `argc` valid C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    for i in 0..argc.max(0) as usize {
        let arg = CStr::from_ptr(*argv.add(i)).to_string_lossy();
        match arg.split_once('=') {
            Some(("out", path)) if !path.is_empty() => {
                let _ = OUT.set(PathBuf::from(path));
            }
            Some(("blocks", path)) if !path.is_empty() => {
                let _ = BLOCKS_OUT.set(PathBuf::from(path));
            }
            Some(("count", "inline")) => INLINE_MODE.store(true, Ordering::Relaxed),
            Some(("count", "vcpu")) => {}
            _ => {
                eprintln!(
                    "fslab-qemu-icount: unknown argument {arg:?} (takes out=<path>, blocks=<path>, count=vcpu|inline)"
                );
                return 1;
            }
        }
    }
    if OUT.get().is_none() {
        eprintln!("fslab-qemu-icount: needs out=<path>");
        return 1;
    }
    if BLOCKS_OUT.get().is_some() && INLINE_MODE.load(Ordering::Relaxed) {
        eprintln!("fslab-qemu-icount: blocks=<path> counts per vCPU; it does not go with count=inline");
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(block_translated));
    0
}
