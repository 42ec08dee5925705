//! QEMU TCG plugin: how many guest instructions ran between two marker
//! instructions, all vCPUs, kernel and user together.
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
//! A block counts whole when it starts, so a marker counts the rest of its
//! block too; that is the same for every run of the same code.
//!
//! A separate artifact under the GPL (QEMU's plugin API is GPL), loaded with
//! `-plugin <this .so>,arg=out=<path>`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use qemu_plugin_sys::*;

/// The marker displacements; fslab's `vm::icount` uses the same values.
const MAGIC_START: u32 = 0x4653_4c53;
const MAGIC_END: u32 = 0x4653_4c45;
const NOPW_DISP32: [u8; 5] = [0x66, 0x0f, 0x1f, 0x84, 0x00];

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

/// Where the window's count goes, and the count at the start marker.
static OUT: OnceLock<PathBuf> = OnceLock::new();
static WINDOW: Mutex<Option<u64>> = Mutex::new(None);

fn total() -> u64 {
    let slots: u64 = COUNTS.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
    // SAFETY: a plain read of a u64 QEMU adds to; a torn or stale value is
    // the documented inexactness of the inline mode.
    let inline = unsafe { std::ptr::read_volatile(std::ptr::addr_of!(INLINE)) };
    slots + OVERFLOW.load(Ordering::Relaxed) + inline
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

unsafe extern "C" fn marker_executed(_vcpu: c_uint, which: *mut c_void) {
    let now = total();
    let mut window = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
    if which as u32 == MAGIC_START {
        *window = Some(now);
    } else if let Some(start) = window.take() {
        if let Some(out) = OUT.get() {
            let tmp = out.with_extension("tmp");
            // Nowhere to report a failure from inside QEMU: the host sees no file.
            if std::fs::write(&tmp, format!("{}\n", now - start)).is_ok() {
                let _ = std::fs::rename(&tmp, out);
            }
        }
    }
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

unsafe extern "C" fn block_translated(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let n = qemu_plugin_tb_n_insns(tb);
    if INLINE_MODE.load(Ordering::Relaxed) {
        qemu_plugin_register_vcpu_tb_exec_inline(
            tb,
            qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            std::ptr::addr_of_mut!(INLINE) as *mut c_void,
            n as u64,
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
            Some(("count", "inline")) => INLINE_MODE.store(true, Ordering::Relaxed),
            Some(("count", "vcpu")) => {}
            _ => {
                eprintln!("fslab-qemu-icount: unknown argument {arg:?} (takes out=<path>, count=vcpu|inline)");
                return 1;
            }
        }
    }
    if OUT.get().is_none() {
        eprintln!("fslab-qemu-icount: needs out=<path>");
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(block_translated));
    0
}
