//! Where a guest run's instructions went: the plugin's counts by block
//! address ([`icount::BlockCounts`]) mapped to the kernel's functions
//! ([`SymbolMap`]), stored per run as a [`RunProfile`] (run extra
//! [`EXTRA`]) whose entries and remainder add up to `vm/instructions`.
//!
//! The symbols: a kernel fslab built has its real `System.map` beside the
//! image; Debian's packages ship a placeholder, so then the guest sends
//! its own `/proc/kallsyms` ([`GuestSymbols`], written by the agent into
//! the exchange directory after setup and again whenever `/proc/modules`
//! changed). Module symbols always come from the guest.
//!
//! KASLR: the System.map is moved by the offset between its `_text` and
//! the guest's (`/proc/kallsyms`, which the guest reads anyway for its
//! modules), rather than booting with `nokaslr`: the kernel under test runs
//! as configured, and a kernel placed anywhere still resolves. A guest
//! without `/proc/kallsyms` (`KALLSYMS=n`) leaves the System.map unmoved,
//! and the profile's `symbols` says the offset is unverified.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::icount::BlockCounts;
use super::protocol;
use crate::kernel::symbols::{ObjectMap, Resolved, SymbolMap};
use crate::kernel::KernelArtifacts;

/// The run extra a profile is stored under.
pub const EXTRA: &str = "profile";
/// Entries below this share of the window's instructions are stored only
/// as the [`RunProfile::other`] remainder ([`background`]'s are always kept).
/// At 24 G instructions that is 240 k: a comparison sees every function
/// that moved by more than that in some run.
pub const MIN_SHARE: f64 = 1e-5;
/// The exchange file the guest agent writes its symbols to.
pub const SYMBOLS_FILE: &str = "symbols.json";

/// How a profile's counts were taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Counting {
    /// Every executed block counted (QEMU's TCG plugin): the counts are
    /// instructions and add up to the run's `vm/instructions`.
    Exact,
    /// Sampled (`perf record` in a KVM guest; not implemented yet): each
    /// count is `samples × period` of `event`, an estimate.
    Sampled { event: String, period: u64, samples: u64 },
}

impl Counting {
    pub fn is_exact(&self) -> bool {
        matches!(self, Counting::Exact)
    }
}

/// Where an entry's code is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A function of the kernel image.
    Kernel,
    /// A function (or the unnamed code) of a loaded module.
    Module,
    /// User space, every process together (the entry `user`).
    User,
    /// Kernel code no symbol covers (CPU entry area, BPF, trampolines), or
    /// every kernel address when no symbol table was at hand.
    Unmapped,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Kernel => "kernel",
            Origin::Module => "module",
            Origin::User => "user",
            Origin::Unmapped => "unmapped",
        }
    }
}

/// One function's (or bucket's) share of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileEntry {
    /// The function, or `user`, `unmapped`, `[<module>]`.
    pub symbol: String,
    pub origin: Origin,
    /// The module (for module code), or the source directory of the object
    /// defining a kernel function when the built kernel's objects are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    pub count: u64,
}

impl ProfileEntry {
    /// What identifies the entry across runs.
    pub fn key(&self) -> (Origin, &str, Option<&str>) {
        (self.origin, &self.symbol, self.unit.as_deref())
    }
}

/// One run's instructions by function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunProfile {
    pub counting: Counting,
    /// Everything counted: the entries plus `other` (= `vm/instructions`
    /// when exact).
    pub total: u64,
    /// Largest first: every entry of at least `min_share` of `total`, and
    /// the guest's [`background`] functions whatever their share.
    pub entries: Vec<ProfileEntry>,
    /// The rest, summed.
    pub other: u64,
    /// How many functions make up `other`.
    pub other_entries: u64,
    pub min_share: f64,
    /// Where the names came from (`…/System.map-5.10.262`, `the guest's
    /// /proc/kallsyms`).
    pub symbols: String,
}

/// Instructions a window counts that follow time or the other vCPUs
/// rather than the work measured: how long the window lasted (ticks,
/// clock reads, idling) and how the host scheduled the vCPU threads (a
/// vCPU spinning while another holds a lock). The profile keeps these
/// functions by name; [`RunProfile::work`] is the window without them.
/// Measured on the planted kernel under TCG at load 8-10 (BENCHMARKS.md,
/// issue 27): idle and tick are about 0.2% of the window and barely move
/// its spread; the spinning is 1-2% and most of the spread (and of an A/A
/// pair's offset between two VMs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Background {
    /// The idle loop: exclusively background (a CPU with nothing to run).
    Idle,
    /// The timer tick's interrupt and its scheduler and timekeeping work:
    /// exclusively background, one per tick of the window's wall time.
    Tick,
    /// Reading the clocksource device (HPET, the ACPI PM timer) under
    /// emulation: the calls come from the tick and from the workload's
    /// own timestamps alike, but each read costs the emulator hundreds of
    /// instructions and their number follows wall time.
    Clock,
    /// Waiting for another CPU: a lock's slow path, spinning on a mutex's
    /// or rwsem's owner, waiting for a cross-CPU call. Not exclusively
    /// background: contention a kernel change adds is spent here too, and
    /// stays visible in `vm/instructions` and the profile; under TCG the
    /// spin count follows how the host schedules the vCPU threads.
    Spin,
}

impl Background {
    pub fn as_str(self) -> &'static str {
        match self {
            Background::Idle => "idle",
            Background::Tick => "tick",
            Background::Clock => "clock",
            Background::Spin => "spin",
        }
    }
}

/// Whether `symbol` is background ([`Background`]), and which.
/// Names from x86 kernels 5.10-6.12: the idle entry and halt paths, cpuidle
/// and the menu governor, NOHZ's idle bookkeeping; the local APIC timer
/// interrupt down to the tick's scheduler and timekeeping work; the
/// clocksource reads of emulated devices; the spinning slow paths.
pub fn background(symbol: &str) -> Option<Background> {
    const IDLE: &[&str] = &[
        "do_idle",
        "cpu_startup_entry",
        "cpuidle_idle_call",
        "default_idle_call",
        "default_idle",
        "arch_cpu_idle",
        "arch_cpu_idle_enter",
        "arch_cpu_idle_exit",
        "native_safe_halt",
        "pv_native_safe_halt",
        "halt",
        "cpu_idle_poll",
        "poll_idle",
        "call_cpuidle",
        "schedule_idle",
        "rcu_idle_enter",
        "rcu_idle_exit",
        "ct_idle_enter",
        "ct_idle_exit",
        "tick_nohz_get_sleep_length",
        "tick_nohz_next_event",
        "tick_nohz_stop_tick",
        "tick_nohz_irq_exit",
        "pick_next_task_idle",
        "put_prev_task_idle",
        "set_next_task_idle",
    ];
    const IDLE_PREFIXES: &[&str] = &["cpuidle_", "menu_", "acpi_idle_", "tick_nohz_idle_", "__cpuidle"];
    const TICK: &[&str] = &[
        "asm_sysvec_apic_timer_interrupt",
        "sysvec_apic_timer_interrupt",
        "__sysvec_apic_timer_interrupt",
        "local_apic_timer_interrupt",
        "hrtimer_interrupt",
        "__hrtimer_run_queues",
        "update_process_times",
        "scheduler_tick",
        "sched_tick",
        "task_tick_fair",
        "account_process_tick",
        "run_local_timers",
        "run_timer_softirq",
        "__run_timers",
        "update_wall_time",
        "timekeeping_advance",
        "lapic_next_deadline",
        "lapic_next_event",
        "clockevents_program_event",
        "rcu_sched_clock_irq",
        "trigger_load_balance",
        "calc_global_load_tick",
    ];
    if IDLE.contains(&symbol) || IDLE_PREFIXES.iter().any(|p| symbol.starts_with(p)) {
        return Some(Background::Idle);
    }
    if TICK.contains(&symbol) || symbol.starts_with("tick_") {
        return Some(Background::Tick);
    }
    // Not `read_tsc`: under TCG a TSC read is one instruction.
    const CLOCK: &[&str] = &["read_hpet", "acpi_pm_read", "acpi_pm_read_verified"];
    if CLOCK.contains(&symbol) {
        return Some(Background::Clock);
    }
    // `smp_call_function_*` wait inline (csd_lock_wait) for the other CPU.
    const SPIN: &[&str] = &[
        "queued_spin_lock_slowpath",
        "native_queued_spin_lock_slowpath",
        "__pv_queued_spin_lock_slowpath",
        "queued_read_lock_slowpath",
        "queued_write_lock_slowpath",
        "mutex_spin_on_owner",
        "rwsem_spin_on_owner",
        "osq_lock",
        "smp_call_function_single",
        "smp_call_function_many_cond",
        "smp_call_function_many",
        "csd_lock_wait",
    ];
    if SPIN.contains(&symbol) {
        return Some(Background::Spin);
    }
    None
}

impl RunProfile {
    /// The window's instructions in [`background`] functions.
    pub fn background(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.origin == Origin::Kernel && background(&e.symbol).is_some())
            .map(|e| e.count)
            .sum()
    }

    /// The window's instructions without its [`background`]: what decides
    /// under emulation ([`crate::metric::WORK_INSTRUCTIONS`]). None when
    /// the counts are sampled, or no kernel function was named (no symbol
    /// table: the background cannot be told apart from the work).
    pub fn work(&self) -> Option<u64> {
        let named = self.entries.iter().any(|e| e.origin == Origin::Kernel);
        (self.counting.is_exact() && named).then(|| self.total - self.background())
    }
}

/// `blocks` by function, with `symbols` (None: no table, kernel code is
/// one `unmapped` entry) and a built kernel's `objects`.
pub fn attribute(
    blocks: &BlockCounts,
    symbols: Option<&SymbolMap>,
    objects: Option<&ObjectMap>,
    source: &str,
) -> RunProfile {
    let mut by_key: HashMap<(Origin, String, Option<String>), u64> = HashMap::new();
    if blocks.user > 0 {
        by_key.insert((Origin::User, "user".to_string(), None), blocks.user);
    }
    for &(address, count) in &blocks.kernel {
        let key = match symbols.map(|s| s.resolve(address)) {
            Some(Resolved::Function { name, module: None }) => {
                let dir = objects.and_then(|o| o.object(name)).map(|o| match o.rsplit_once('/') {
                    Some((dir, _)) => dir.to_string(),
                    None => ".".to_string(),
                });
                (Origin::Kernel, name.to_string(), dir)
            }
            Some(Resolved::Function { name, module: Some(m) }) => (Origin::Module, name.to_string(), Some(m.into())),
            Some(Resolved::Module(m)) => (Origin::Module, format!("[{m}]"), Some(m.to_string())),
            Some(Resolved::Unmapped) | None => (Origin::Unmapped, "unmapped".to_string(), None),
        };
        *by_key.entry(key).or_insert(0) += count;
    }
    let mut all: Vec<ProfileEntry> = by_key
        .into_iter()
        .map(|((origin, symbol, unit), count)| ProfileEntry { symbol, origin, unit, count })
        .collect();
    all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key().cmp(&b.key())));
    let floor = (blocks.total as f64 * MIN_SHARE).ceil() as u64;
    let (entries, rest): (Vec<ProfileEntry>, Vec<ProfileEntry>) =
        all.into_iter().partition(|e| e.count >= floor || background(&e.symbol).is_some());
    RunProfile {
        counting: Counting::Exact,
        total: blocks.total,
        entries,
        other: rest.iter().map(|e| e.count).sum(),
        other_entries: rest.len() as u64,
        min_share: MIN_SHARE,
        symbols: source.to_string(),
    }
}

/// Which of the guest's symbols the host needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuestSymbolsWanted {
    /// None (nothing is attributed).
    #[default]
    None,
    /// The modules' (the image's come from its System.map).
    Modules,
    /// All of `/proc/kallsyms`' code symbols.
    All,
}

/// What the guest agent writes to [`SYMBOLS_FILE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestSymbols {
    /// The code lines of `/proc/kallsyms` (only the modules' when the host
    /// has the image's) and `/proc/modules` (empty without modules).
    Ok {
        kallsyms: String,
        modules: String,
    },
    Error(String),
}

/// The guest side: exports the symbols the host asked for after setup,
/// and again after a request that changed the loaded modules.
#[derive(Debug, Default)]
pub struct SymbolExport {
    wanted: GuestSymbolsWanted,
    /// `/proc/modules` as last exported (None: never exported).
    exported: Option<String>,
}

impl SymbolExport {
    pub fn new(wanted: GuestSymbolsWanted) -> SymbolExport {
        SymbolExport { wanted, exported: None }
    }

    /// Writes [`SYMBOLS_FILE`] into `exchange` unless nothing changed.
    pub fn refresh(&mut self, exchange: &Path) -> Result<()> {
        if self.wanted == GuestSymbolsWanted::None {
            return Ok(());
        }
        let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
        if self.exported.as_ref() == Some(&modules) {
            return Ok(());
        }
        let symbols = match read_kallsyms(self.wanted == GuestSymbolsWanted::All) {
            Ok(kallsyms) => GuestSymbols::Ok { kallsyms, modules: modules.clone() },
            Err(e) => GuestSymbols::Error(format!("{e:#}")),
        };
        protocol::write_atomic(&exchange.join(SYMBOLS_FILE), &symbols)?;
        self.exported = Some(modules);
        Ok(())
    }
}

/// The code lines of `/proc/kallsyms` (all, or only modules'); empty in a
/// kernel without one (`KALLSYMS=n`, as fslab's `minimal` builds).
fn read_kallsyms(all: bool) -> Result<String> {
    let text = match std::fs::read_to_string("/proc/kallsyms") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        read => read.context("reading /proc/kallsyms")?,
    };
    let mut out = String::with_capacity(if all { text.len() / 2 } else { 4096 });
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (kind, module) = (fields.nth(1), line.contains('['));
        let code = matches!(kind, Some("T" | "t" | "W" | "w"));
        // The image's range markers: the host needs them for the ranges
        // (all) or for KASLR's offset (modules only).
        let marker = line.ends_with(" _text") || line.ends_with(" _stext") || line.ends_with(" _etext");
        if marker || (code && (all || module)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The host side, one per VM session: the kernel's symbols and the
/// guest's, turning each run's blocks into a [`RunProfile`].
#[derive(Debug)]
pub struct Profiler {
    /// The image's symbols from its System.map; None: the guest sends them.
    system_map: Option<SymbolMap>,
    /// The map in use (System.map or the guest's, with the guest's modules).
    map: Option<SymbolMap>,
    objects: Option<ObjectMap>,
    /// The guest's symbols as last read, to read them again only when changed.
    seen: Option<std::time::SystemTime>,
    /// Why the map is missing, for the profile's notes.
    problem: Option<String>,
    /// Other things the profile's `symbols` should say (objects not read).
    notes: Vec<String>,
}

impl Profiler {
    /// For `kernel`: its System.map when it has a real one. `objdir`: the
    /// object directory of a kernel fslab built, used when it holds this
    /// very build (its `bzImage` is the kernel's image: the directory is
    /// shared by every config of a tree and holds the last one built) to
    /// group functions by source directory, and for the System.map of an
    /// image cached before cache entries kept one.
    pub fn new(kernel: &KernelArtifacts, objdir: Option<&Path>) -> Profiler {
        let mut notes = Vec::new();
        let same_build = objdir.filter(|dir| {
            let same = std::fs::read(dir.join("arch/x86/boot/bzImage"))
                .is_ok_and(|built| std::fs::read(&kernel.image).is_ok_and(|ours| ours == built));
            if !same {
                notes.push(format!(
                    "{} holds another build of the tree than this kernel: functions are not grouped by directory",
                    dir.display()
                ));
            }
            same
        });
        let from_objects = || same_build.map(|d| SymbolMap::read(&d.join("System.map"))).unwrap_or(Ok(None));
        let (system_map, problem) =
            match SymbolMap::for_kernel(kernel).and_then(|m| m.map_or_else(from_objects, |m| Ok(Some(m)))) {
                Ok(map) => (map, None),
                Err(e) => (None, Some(format!("{e:#}"))),
            };
        let objects = same_build.and_then(|dir| match ObjectMap::read(dir) {
            Ok(objects) => Some(objects),
            Err(e) => {
                notes.push(format!("{e:#}"));
                None
            }
        });
        // Until the guest says where its image is: placed where linked
        // unless the kernel can randomize itself.
        let config = kernel.config.as_ref().and_then(|c| std::fs::read_to_string(c).ok());
        let randomized = config.as_ref().is_none_or(|c| c.lines().any(|l| l == "CONFIG_RANDOMIZE_BASE=y"));
        let map = system_map.clone().map(|mut m| {
            m.source = match randomized {
                true => format!("{} (KASLR offset unverified: no symbols from the guest)", m.source),
                false => format!("{} (no KASLR: RANDOMIZE_BASE is not set)", m.source),
            };
            m
        });
        Profiler { map, system_map, objects, seen: None, problem, notes }
    }

    /// What the guest must send.
    pub fn wanted(&self) -> GuestSymbolsWanted {
        if self.system_map.is_some() {
            GuestSymbolsWanted::Modules
        } else {
            GuestSymbolsWanted::All
        }
    }

    /// The guest's symbols in `exchange`, when they changed since last read.
    fn refresh(&mut self, exchange: &Path) -> Result<()> {
        let path = exchange.join(SYMBOLS_FILE);
        let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else { return Ok(()) };
        if self.seen == Some(modified) {
            return Ok(());
        }
        self.seen = Some(modified);
        let sent: GuestSymbols = protocol::read_if_present(&path)?.context("the guest's symbols vanished")?;
        let (kallsyms, modules) = match sent {
            GuestSymbols::Ok { kallsyms, modules } => (kallsyms, modules),
            GuestSymbols::Error(e) => {
                self.problem = Some(format!("the guest could not read its symbols: {e}"));
                return Ok(());
            }
        };
        if kallsyms.is_empty() {
            // No /proc/kallsyms in the guest: the System.map as it is, or nothing.
            if self.map.is_none() {
                self.problem = Some("no real System.map beside the image, and the guest has no /proc/kallsyms".into());
            }
            return Ok(());
        }
        let guest = SymbolMap::parse_image(&kallsyms, "the guest's /proc/kallsyms")?;
        let mut map = match &self.system_map {
            // KASLR placed the image at the guest's `_text`.
            Some(m) => {
                let offset = guest.image_start().wrapping_sub(m.image_start());
                let mut moved = m.relocated(offset);
                if offset != 0 {
                    moved.source = format!("{} moved by KASLR's offset {offset:#x}", m.source);
                }
                moved
            }
            None => guest,
        };
        map.set_modules(&kallsyms, &modules)?;
        self.map = Some(map);
        self.problem = None;
        Ok(())
    }

    /// The profile of `blocks`, with the guest's symbols as of now.
    pub fn profile(&mut self, blocks: &BlockCounts, exchange: &Path) -> RunProfile {
        if let Err(e) = self.refresh(exchange) {
            self.problem = Some(format!("{e:#}"));
        }
        let source = match (&self.map, &self.problem) {
            (Some(map), None) => map.source.clone(),
            (Some(map), Some(p)) => format!("{} ({p})", map.source),
            (None, Some(p)) => format!("no symbols: {p}"),
            (None, None) => "no symbols: neither a System.map beside the image nor the guest's".to_string(),
        };
        let source = std::iter::once(source).chain(self.notes.iter().cloned()).collect::<Vec<_>>().join("; ");
        attribute(blocks, self.map.as_ref(), self.objects.as_ref(), &source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "ffffffff81000000 T _text\nffffffff81000000 T do_idle\nffffffff81000100 T vfs_read\n\
                       ffffffff81000200 t rare_one\nffffffff81000300 T tick_sched_timer\nffffffff81001000 T _etext\n";

    /// A kernel `x` of this image and config, nothing else known.
    fn kernel_at(image: std::path::PathBuf, config: Option<std::path::PathBuf>) -> KernelArtifacts {
        KernelArtifacts {
            image,
            modules_dir: None,
            config,
            release: "x".into(),
            source: String::new(),
            sha256: String::new(),
            guest_dirs: vec![],
            package: None,
            build: None,
        }
    }

    fn blocks() -> BlockCounts {
        BlockCounts {
            total: 2_000_000,
            user: 1_000_000,
            kernel: vec![
                (0xffffffff81000000, 10),      // do_idle: tiny, but kept
                (0xffffffff81000100, 400_000), // vfs_read
                (0xffffffff81000140, 599_000), // vfs_read, another block
                (0xffffffff81000200, 15),      // rare_one: below the share
                (0xffffffff81000300, 5),       // tick_sched_timer: kept
                (0xfffffe0000000000, 970),     // the CPU entry area
            ],
        }
    }

    #[test]
    fn the_entries_and_the_rest_add_up_to_the_window() {
        let map = SymbolMap::parse_image(MAP, "System.map").unwrap();
        let p = attribute(&blocks(), Some(&map), None, "System.map");
        let names: Vec<&str> = p.entries.iter().map(|e| e.symbol.as_str()).collect();
        assert_eq!(names, ["user", "vfs_read", "unmapped", "do_idle", "tick_sched_timer"]);
        assert_eq!(p.entries[1].count, 999_000);
        assert_eq!((p.other, p.other_entries), (15, 1), "rare_one is below 1e-5 of 2 M");
        assert_eq!(p.entries.iter().map(|e| e.count).sum::<u64>() + p.other, p.total);
        assert_eq!(background("do_idle"), Some(Background::Idle));
        assert_eq!(background("tick_sched_timer"), Some(Background::Tick));
        assert_eq!(background("vfs_read"), None);
        // Without a table, kernel code is one entry; still every instruction is there.
        let bare = attribute(&blocks(), None, None, "none");
        assert_eq!(bare.entries.len(), 2);
        assert_eq!(bare.entries.iter().map(|e| e.count).sum::<u64>() + bare.other, bare.total);
    }

    /// The work count is the window less the named background, exactly;
    /// without names there is none (it would silently be the total).
    #[test]
    fn work_is_the_window_less_its_background() {
        let map = SymbolMap::parse_image(MAP, "System.map").unwrap();
        let p = attribute(&blocks(), Some(&map), None, "System.map");
        assert_eq!(p.background(), 15, "do_idle 10 + tick_sched_timer 5");
        assert_eq!(p.work(), Some(2_000_000 - 15));
        assert_eq!(attribute(&blocks(), None, None, "none").work(), None);
        let sampled = RunProfile { counting: Counting::Sampled { event: "cycles".into(), period: 1, samples: 1 }, ..p };
        assert_eq!(sampled.work(), None);
        assert_eq!(background("queued_spin_lock_slowpath"), Some(Background::Spin));
        assert_eq!(background("read_hpet"), Some(Background::Clock));
        assert_eq!(background("read_tsc"), None);
    }

    #[test]
    fn objects_group_kernel_functions_by_directory() {
        let map = SymbolMap::parse_image(MAP, "System.map").unwrap();
        let objects = ObjectMap::parse("/o/vmlinux.a:fs/read_write.o:0000000000000000 T vfs_read\n", Path::new("/o"));
        let p = attribute(&blocks(), Some(&map), Some(&objects), "System.map");
        let vfs = p.entries.iter().find(|e| e.symbol == "vfs_read").unwrap();
        assert_eq!(vfs.unit.as_deref(), Some("fs"));
        let idle = p.entries.iter().find(|e| e.symbol == "do_idle").unwrap();
        assert_eq!(idle.unit, None);
    }

    /// A built kernel's object directory is used only when it holds this
    /// build (the same image): then its System.map serves an image cached
    /// without one; otherwise the profile says why the functions are not
    /// grouped.
    #[test]
    fn an_object_directory_of_another_build_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let (boot, obj) = (dir.path().join("boot"), dir.path().join("obj"));
        std::fs::create_dir_all(&boot).unwrap();
        std::fs::create_dir_all(obj.join("arch/x86/boot")).unwrap();
        std::fs::write(boot.join("vmlinuz-x"), "this image").unwrap();
        std::fs::write(obj.join("System.map"), MAP).unwrap();
        let kernel = kernel_at(boot.join("vmlinuz-x"), None);
        std::fs::write(obj.join("arch/x86/boot/bzImage"), "another image").unwrap();
        let mut other = Profiler::new(&kernel, Some(&obj));
        let p = other.profile(&blocks(), dir.path());
        assert!(p.symbols.contains("holds another build of the tree than this kernel"), "{}", p.symbols);
        assert!(p.symbols.starts_with("no symbols"), "its System.map is not this kernel's: {}", p.symbols);
        std::fs::write(obj.join("arch/x86/boot/bzImage"), "this image").unwrap();
        let mut same = Profiler::new(&kernel, Some(&obj));
        let p = same.profile(&blocks(), dir.path());
        assert!(p.symbols.starts_with(&obj.join("System.map").display().to_string()), "{}", p.symbols);
        assert!(p.entries.iter().any(|e| e.symbol == "vfs_read"));
        assert!(p.symbols.contains("has no vmlinux.a or built-in.a"), "read, but no archives: {}", p.symbols);
    }

    /// A kernel with a System.map that KASLR placed 0x2a00000 higher: the
    /// guest's `_text` moves the map, and functions resolve where they run.
    #[test]
    fn a_system_map_follows_the_guests_kaslr_offset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("System.map-x"), MAP).unwrap();
        std::fs::write(dir.path().join("config-x"), "CONFIG_RANDOMIZE_BASE=y\n").unwrap();
        let kernel = kernel_at(dir.path().join("vmlinuz-x"), Some(dir.path().join("config-x")));
        let mut profiler = Profiler::new(&kernel, None);
        assert_eq!(profiler.wanted(), GuestSymbolsWanted::Modules);
        let moved = BlockCounts { total: 100, user: 0, kernel: vec![(0xffffffff83a00104, 100)] };
        let before = profiler.profile(&moved, dir.path());
        assert!(before.symbols.contains("KASLR offset unverified"), "{}", before.symbols);
        assert_eq!(before.entries[0].symbol, "unmapped", "at the link address the map misses");
        let markers = "ffffffff83a00000 T _text\nffffffff83a01000 T _etext\n".to_string();
        let sent = GuestSymbols::Ok { kallsyms: markers, modules: String::new() };
        protocol::write_atomic(&dir.path().join(SYMBOLS_FILE), &sent).unwrap();
        let after = profiler.profile(&moved, dir.path());
        assert_eq!(after.entries[0].symbol, "vfs_read");
        assert!(after.symbols.ends_with("moved by KASLR's offset 0x2a00000"), "{}", after.symbols);
    }

    #[test]
    fn the_profiler_reads_the_guests_symbols_when_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = kernel_at(dir.path().join("vmlinuz-x"), None);
        let mut profiler = Profiler::new(&kernel, None);
        assert_eq!(profiler.wanted(), GuestSymbolsWanted::All, "no System.map: the guest's");
        let p = profiler.profile(&blocks(), dir.path());
        assert!(p.symbols.starts_with("no symbols"), "{}", p.symbols);
        let kallsyms = format!("{MAP}ffffffffc0000000 t squashfs_read_data\t[squashfs]\n");
        let sent = GuestSymbols::Ok { kallsyms, modules: "squashfs 4096 0 - Live 0xffffffffc0000000\n".into() };
        protocol::write_atomic(&dir.path().join(SYMBOLS_FILE), &sent).unwrap();
        let mut b = blocks();
        b.kernel.push((0xffffffffc0000010, 1000));
        b.total += 1000;
        let p = profiler.profile(&b, dir.path());
        assert_eq!(p.symbols, "the guest's /proc/kallsyms");
        let sq = p.entries.iter().find(|e| e.symbol == "squashfs_read_data").unwrap();
        assert_eq!((sq.origin, sq.unit.as_deref(), sq.count), (Origin::Module, Some("squashfs"), 1000));
        let bad = GuestSymbols::Error("permission denied".into());
        std::thread::sleep(std::time::Duration::from_millis(20));
        protocol::write_atomic(&dir.path().join(SYMBOLS_FILE), &bad).unwrap();
        let p = profiler.profile(&b, dir.path());
        assert!(p.symbols.contains("permission denied"), "{}", p.symbols);
    }
}
