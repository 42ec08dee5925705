//! fslab's curated table of kernel config options that change filesystem
//! benchmark results, with a one-line explanation each, and the heuristics
//! that sort every other option into an area.

use serde::{Deserialize, Serialize};

/// Area a config option belongs to, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    Filesystems,
    BlockLayer,
    MemoryManagement,
    SchedulerPreemption,
    /// Debug instrumentation that costs run time.
    Debugging,
    Other,
}

impl Area {
    /// Title used in terminal output.
    pub fn title(self) -> &'static str {
        match self {
            Area::Filesystems => "Filesystems",
            Area::BlockLayer => "Block layer",
            Area::MemoryManagement => "Memory management",
            Area::SchedulerPreemption => "Scheduler and preemption",
            Area::Debugging => "Debugging that costs performance",
            Area::Other => "Other",
        }
    }
}

/// One curated option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OptionNote {
    /// Option name without `CONFIG_`.
    pub name: &'static str,
    pub area: Area,
    /// What it does to performance, in one line.
    pub note: &'static str,
}

const fn n(name: &'static str, area: Area, note: &'static str) -> OptionNote {
    OptionNote { name, area, note }
}

use Area::*;

/// The curated table. Sorted by area, then roughly by relevance.
pub const NOTES: &[OptionNote] = &[
    // --- filesystems: squashfs
    n("SQUASHFS_DECOMP_SINGLE", Filesystems, "one decompressor per mount: parallel reads serialize on it (slow boots from squashfs roots); worst with 5.8-5.16 readahead"),
    n("SQUASHFS_DECOMP_MULTI", Filesystems, "decompressors allocated on demand (up to 2 per CPU): parallel reads scale"),
    n("SQUASHFS_DECOMP_MULTI_PERCPU", Filesystems, "one decompressor per CPU: best parallel read throughput, memory per CPU"),
    n("SQUASHFS_COMPILE_DECOMP_SINGLE", Filesystems, "(6.2+) single decompressor chosen at build time: parallel reads serialize"),
    n("SQUASHFS_COMPILE_DECOMP_MULTI", Filesystems, "(6.2+) multi decompressor chosen at build time: parallel reads scale"),
    n("SQUASHFS_COMPILE_DECOMP_MULTI_PERCPU", Filesystems, "(6.2+) per-CPU decompressor chosen at build time: best parallel reads"),
    n("SQUASHFS_CHOICE_DECOMP_BY_MOUNT", Filesystems, "(6.2+) decompressor picked per mount with threads=; without threads= it is single"),
    n("SQUASHFS_MOUNT_DECOMP_THREADS", Filesystems, "(6.2+) threads=N mount option sets the number of decompressors"),
    n("SQUASHFS_FILE_CACHE", Filesystems, "file data decompressed into an intermediate cache then copied: extra copy and contention"),
    n("SQUASHFS_FILE_DIRECT", Filesystems, "file data decompressed straight into the page cache: fewer copies, better parallel reads"),
    n("SQUASHFS_FRAGMENT_CACHE_SIZE", Filesystems, "cached fragment blocks; too few thrash when many small files are read"),
    n("SQUASHFS_4K_DEVBLK_SIZE", Filesystems, "4K device blocks instead of 1K: fewer, larger reads"),
    // --- filesystems: ext4 / jbd2
    n("EXT4_DEBUG", Filesystems, "ext4 debug hooks (mballoc_debug etc.): small cost, changes nothing unless enabled"),
    n("JBD2_DEBUG", Filesystems, "jbd2 debug hooks: small cost"),
    n("EXT4_FS", Filesystems, "ext4 built in (y) or module (m): module load adds to first-mount time only"),
    // --- filesystems: xfs / btrfs / others
    n("XFS_DEBUG", Debugging, "XFS assertions and extra verification: large slowdown; never benchmark with it"),
    n("XFS_WARN", Debugging, "XFS assertions reported as warnings: measurable CPU overhead"),
    n("XFS_ONLINE_SCRUB_STATS", Filesystems, "scrub statistics: small overhead"),
    n("BTRFS_DEBUG", Debugging, "btrfs debug checks: slower metadata operations"),
    n("BTRFS_ASSERT", Debugging, "btrfs assertions: measurable CPU cost in hot paths"),
    n("BTRFS_FS_CHECK_INTEGRITY", Debugging, "btrfs integrity checker tracks every write: very slow"),
    n("BTRFS_FS_REF_VERIFY", Debugging, "btrfs extent reference verification: slow and memory hungry"),
    n("F2FS_CHECK_FS", Debugging, "f2fs consistency checks on hot paths: overhead"),
    n("EROFS_FS_ZIP", Filesystems, "compressed EROFS images: decompression cost on reads"),
    n("FS_DAX", Filesystems, "direct access to persistent memory, bypassing the page cache when mounted with dax"),
    // --- block layer
    n("BLK_WBT", BlockLayer, "writeback throttling: caps buffered writeback to protect reads; can cut write throughput on slow devices"),
    n("BLK_WBT_MQ", BlockLayer, "writeback throttling enabled by default on blk-mq devices"),
    n("BLK_CGROUP_IOLATENCY", BlockLayer, "cgroup io.latency controller: throttles peers when a group misses its target"),
    n("BLK_CGROUP_IOCOST", BlockLayer, "cgroup io.cost controller: cost model based throttling when configured"),
    n("BLK_DEV_THROTTLING", BlockLayer, "cgroup io.max limits (fslab uses them to emulate slow devices)"),
    n("MQ_IOSCHED_DEADLINE", BlockLayer, "mq-deadline scheduler available (usual default for SATA/MMC)"),
    n("MQ_IOSCHED_KYBER", BlockLayer, "kyber scheduler available (latency targets for fast devices)"),
    n("IOSCHED_BFQ", BlockLayer, "BFQ scheduler available: fairness and low latency at higher CPU cost per request"),
    n("BFQ_GROUP_IOSCHED", BlockLayer, "cgroup support in BFQ: extra per-request work"),
    n("BLK_DEV_INTEGRITY", BlockLayer, "block integrity (T10 PI) support: checksum cost when the device uses it"),
    n("BLK_INLINE_ENCRYPTION", BlockLayer, "inline encryption support: only costs when used"),
    n("BLK_DEV_LOOP_MIN_COUNT", BlockLayer, "loop devices created at boot; no runtime cost"),
    n("MMC_BLOCK_MINORS", BlockLayer, "partitions per MMC device; no runtime cost"),
    // --- memory management
    n("TRANSPARENT_HUGEPAGE", MemoryManagement, "transparent huge pages: fewer TLB misses, more compaction and fault cost"),
    n("TRANSPARENT_HUGEPAGE_ALWAYS", MemoryManagement, "THP for all anonymous memory by default: khugepaged and compaction activity"),
    n("TRANSPARENT_HUGEPAGE_MADVISE", MemoryManagement, "THP only where applications ask (madvise)"),
    n("READ_ONLY_THP_FOR_FS", MemoryManagement, "huge pages for read-only file mappings (executables)"),
    n("SLUB_DEBUG", MemoryManagement, "SLUB debug support compiled in; negligible cost unless slub_debug= is given"),
    n("SLUB_DEBUG_ON", Debugging, "SLUB debugging on for every cache at boot (red zones, poisoning, tracking): big allocator slowdown"),
    n("SLUB_CPU_PARTIAL", MemoryManagement, "per-CPU partial slabs: faster allocation on SMP"),
    n("SLUB_STATS", Debugging, "SLUB statistics counters: overhead on every allocation"),
    n("INIT_ON_ALLOC_DEFAULT_ON", MemoryManagement, "zero every allocation: a few percent CPU on allocation-heavy work"),
    n("INIT_ON_FREE_DEFAULT_ON", MemoryManagement, "zero memory on free: noticeable cost with heavy page-cache churn"),
    n("PAGE_POISONING", Debugging, "poison freed pages (when page_poison=1): cost on every free and allocation"),
    n("DEBUG_PAGEALLOC", Debugging, "unmaps freed pages when enabled: TLB flushes on every page alloc/free, huge slowdown"),
    n("DEBUG_PAGEALLOC_ENABLE_DEFAULT", Debugging, "debug_pagealloc on by default (no boot option needed)"),
    n("DEBUG_VM", Debugging, "VM sanity checks: noticeable overhead in page-cache and reclaim paths"),
    n("PAGE_OWNER", Debugging, "records who allocated each page when page_owner=on: allocation overhead"),
    n("LRU_GEN", MemoryManagement, "multi-gen LRU: different page reclaim under memory pressure"),
    n("LRU_GEN_ENABLED", MemoryManagement, "multi-gen LRU on by default"),
    n("NUMA_BALANCING", MemoryManagement, "automatic NUMA balancing: hinting faults and page migration on multi-node machines"),
    n("NUMA_BALANCING_DEFAULT_ENABLED", MemoryManagement, "automatic NUMA balancing on by default"),
    n("COMPACTION", MemoryManagement, "memory compaction: needed for huge pages, costs CPU under fragmentation"),
    n("MEMCG", MemoryManagement, "memory cgroups: page-cache charging cost on every page added"),
    n("ZSWAP_DEFAULT_ON", MemoryManagement, "compressed swap cache on by default: CPU for compression under memory pressure"),
    n("HIGHMEM", MemoryManagement, "high memory on 32-bit: kmap cost for page-cache pages"),
    // --- scheduler and preemption
    n("PREEMPT_NONE", SchedulerPreemption, "no forced preemption: best throughput, longest latencies"),
    n("PREEMPT_VOLUNTARY", SchedulerPreemption, "preemption at might_sleep() points: small throughput cost (much worse with squashfs single decompressor)"),
    n("PREEMPT", SchedulerPreemption, "full preemption: lower latency, lock holders can be preempted, some throughput cost"),
    n("PREEMPT_LAZY", SchedulerPreemption, "(6.13+) lazy preemption: preempts at tick for normal tasks, immediately for RT"),
    n("PREEMPT_RT", SchedulerPreemption, "real-time kernel: sleeping spinlocks and threaded IRQs, lower throughput"),
    n("PREEMPT_DYNAMIC", SchedulerPreemption, "preemption model selectable at boot with preempt=: check the command line"),
    n("PREEMPTION", SchedulerPreemption, "kernel is preemptible (full, lazy or RT model)"),
    n("HZ", SchedulerPreemption, "timer tick rate: higher means finer scheduling, more tick overhead"),
    n("HZ_100", SchedulerPreemption, "100 Hz tick: least overhead, coarse timeslices"),
    n("HZ_250", SchedulerPreemption, "250 Hz tick"),
    n("HZ_300", SchedulerPreemption, "300 Hz tick"),
    n("HZ_1000", SchedulerPreemption, "1000 Hz tick: finer scheduling, more tick overhead"),
    n("NO_HZ_IDLE", SchedulerPreemption, "tickless idle: saves power, slightly longer wakeups"),
    n("NO_HZ_FULL", SchedulerPreemption, "full dynticks: extra work on every syscall and context switch on nohz_full CPUs"),
    n("SCHED_AUTOGROUP", SchedulerPreemption, "groups tasks by session: changes CPU sharing between a benchmark and other shells"),
    n("SCHEDSTATS", SchedulerPreemption, "scheduler statistics: small overhead when enabled"),
    n("CPU_FREQ_DEFAULT_GOV_PERFORMANCE", SchedulerPreemption, "performance cpufreq governor by default: stable clocks, least variance"),
    n("CPU_FREQ_DEFAULT_GOV_SCHEDUTIL", SchedulerPreemption, "schedutil governor by default: clock follows load, I/O-bound work may run slower"),
    n("CPU_FREQ_DEFAULT_GOV_ONDEMAND", SchedulerPreemption, "ondemand governor by default: clock follows load with lag"),
    n("CPU_FREQ_DEFAULT_GOV_POWERSAVE", SchedulerPreemption, "powersave governor by default: lowest clocks"),
    n("RCU_LAZY", SchedulerPreemption, "lazy RCU callbacks: delays freeing, can raise memory use under churn"),
    n("IRQ_TIME_ACCOUNTING", SchedulerPreemption, "precise IRQ time accounting: small cost per interrupt"),
    n("NR_CPUS", SchedulerPreemption, "maximum CPUs the kernel supports"),
    // --- debugging that costs performance
    n("PROVE_LOCKING", Debugging, "lockdep validation of every lock acquisition: large slowdown on lock-heavy filesystem paths"),
    n("LOCKDEP", Debugging, "lock dependency tracking: large overhead on every lock operation"),
    n("DEBUG_LOCK_ALLOC", Debugging, "lock allocation debugging (lockdep maps): overhead on lock init and use"),
    n("LOCK_STAT", Debugging, "lock contention statistics: overhead on every lock operation"),
    n("DEBUG_SPINLOCK", Debugging, "spinlock debugging: slower spin locks"),
    n("DEBUG_MUTEXES", Debugging, "mutex debugging: disables mutex fast paths"),
    n("DEBUG_RWSEMS", Debugging, "rwsem debugging: slower rw semaphores (i_rwsem, mmap_lock)"),
    n("DEBUG_ATOMIC_SLEEP", Debugging, "might_sleep() checks: small overhead, more with preemption"),
    n("DEBUG_PREEMPT", Debugging, "preemption-safety checks on per-CPU access: overhead"),
    n("KASAN", Debugging, "kernel address sanitizer: 2-3x slowdown and extra memory"),
    n("KASAN_GENERIC", Debugging, "generic (software) KASAN: slowest variant"),
    n("KASAN_SW_TAGS", Debugging, "software tag-based KASAN (arm64): large slowdown"),
    n("KASAN_HW_TAGS", Debugging, "hardware tag-based KASAN (MTE): smaller but real overhead"),
    n("KCSAN", Debugging, "data-race detector: large slowdown"),
    n("KMSAN", Debugging, "uninitialised-memory detector: very large slowdown"),
    n("UBSAN", Debugging, "undefined-behaviour checks: some CPU overhead"),
    n("KFENCE", Debugging, "sampling memory-error detector: low overhead, designed for production"),
    n("DEBUG_KMEMLEAK", Debugging, "kmemleak tracks every allocation and scans memory periodically: slow"),
    n("DEBUG_KMEMLEAK_DEFAULT_OFF", Debugging, "kmemleak present but off unless kmemleak=on: much cheaper"),
    n("DEBUG_OBJECTS", Debugging, "object lifetime tracking (timers, work items): overhead"),
    n("DEBUG_LIST", Debugging, "linked-list corruption checks: small overhead"),
    n("DEBUG_SG", Debugging, "scatterlist checks on every I/O: small overhead"),
    n("GCOV_KERNEL", Debugging, "coverage instrumentation of kernel code: slows everything"),
    n("KCOV", Debugging, "coverage collection hooks in every basic block: overhead"),
    n("FAULT_INJECTION", Debugging, "fault injection framework: small cost, errors when enabled"),
    n("FTRACE", Other, "tracing infrastructure: near zero cost until a tracer is enabled"),
    n("FUNCTION_TRACER", Other, "function tracing: nops in every function, cost only when tracing"),
];

/// The curated entry for `name` (without `CONFIG_`), if any.
pub fn lookup(name: &str) -> Option<&'static OptionNote> {
    let name = name.strip_prefix("CONFIG_").unwrap_or(name);
    NOTES.iter().find(|n| n.name == name)
}

/// Debug options with no runtime cost: they belong to "other", not to the
/// debugging area.
const FREE_DEBUG: &[&str] = &[
    "DEBUG_KERNEL",
    "DEBUG_BUGVERBOSE",
    "DEBUG_MISC",
    "DEBUG_SECTION_MISMATCH",
    "DEBUG_MEMORY_INIT",
    "DEBUG_WX",
    "DEBUG_BOOT_PARAMS",
    "DEBUG_RODATA_TEST",
    "DEBUG_ENTRY",
    "DEBUG_NX_TEST",
];

fn has_prefix(name: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| name.starts_with(p))
}

/// Area of `name` and its performance note, if it has one. Curated entries
/// win; other options are sorted by name patterns, and debug options that
/// cost run time get a generic note.
pub fn classify(name: &str) -> (Area, Option<&'static str>) {
    if let Some(n) = lookup(name) {
        return (n.area, Some(n.note));
    }
    if is_costly_debug(name) {
        return (Debugging, Some("debug instrumentation: usually adds run-time overhead"));
    }
    (area_by_pattern(name), None)
}

fn is_costly_debug(name: &str) -> bool {
    if FREE_DEBUG.contains(&name) || has_prefix(name, &["DEBUG_INFO", "DEBUG_FS", "HAVE_", "ARCH_", "CC_HAS_"]) {
        return false;
    }
    // `*_SUPPORT`, `*_DEBUG_INFO` and friends describe capabilities, not
    // instrumentation.
    if name.ends_with("_SUPPORT") {
        return false;
    }
    has_prefix(name, &["DEBUG_", "KASAN", "KCSAN", "KMSAN", "UBSAN", "PROVE_", "LOCKDEP", "GCOV", "KCOV"])
        || name.ends_with("_DEBUG")
        || name.ends_with("_ASSERT")
        || name.contains("_DEBUG_ON")
}

fn area_by_pattern(name: &str) -> Area {
    const FS: &[&str] = &[
        "EXT2_",
        "EXT3_",
        "EXT4_",
        "JBD2",
        "XFS_",
        "BTRFS_",
        "SQUASHFS",
        "EROFS",
        "F2FS",
        "FS_",
        "FUSE_",
        "OVERLAY_FS",
        "NFS",
        "CIFS",
        "SMB_",
        "FAT_",
        "VFAT_",
        "MSDOS_",
        "EXFAT",
        "NTFS",
        "ISO9660",
        "UDF_",
        "TMPFS",
        "FSCACHE",
        "CACHEFILES",
        "QUOTA",
        "FANOTIFY",
        "INOTIFY",
        "DNOTIFY",
        "AUTOFS",
        "ZONEFS",
        "BCACHEFS",
        "JFFS2",
        "UBIFS",
        "CRAMFS",
        "ROMFS",
        "NILFS",
        "GFS2",
        "OCFS2",
        "CEPH_FS",
        "9P_FS",
        "HFS",
        "MINIX_FS",
        "REISERFS",
        "JFS_",
        "VIRTIO_FS",
        "NETFS",
        "FILE_LOCKING",
        "MANDATORY_FILE_LOCKING",
        "DAX",
    ];
    const BLOCK: &[&str] = &[
        "BLK_",
        "BLOCK",
        "IOSCHED",
        "MQ_IOSCHED",
        "BFQ_",
        "DM_",
        "MD_",
        "NVME_",
        "MMC_BLOCK",
        "ZRAM",
        "BCACHE",
        "VIRTIO_BLK",
        "ATA_",
        "SATA_",
        "SCSI",
        "MMC",
        "SCSI_UFS",
    ];
    const MM: &[&str] = &[
        "TRANSPARENT_HUGEPAGE",
        "HUGETLB",
        "SLUB",
        "SLAB",
        "ZSWAP",
        "SWAP",
        "KSM",
        "COMPACTION",
        "MIGRATION",
        "NUMA",
        "MEMCG",
        "ZONE_",
        "PAGE_",
        "MEMORY_",
        "HIGHMEM",
        "SPARSEMEM",
        "LRU_",
        "CMA",
        "ZSMALLOC",
        "ZPOOL",
        "ZBUD",
        "Z3FOLD",
        "SHMEM",
        "MMU",
        "THP_",
        "USERFAULTFD",
        "INIT_ON_",
        "DEFERRED_STRUCT_PAGE",
        "MEMTEST",
        "ANON_VMA",
        "VMAP_",
    ];
    const SCHED: &[&str] = &[
        "PREEMPT",
        "HZ",
        "NO_HZ",
        "SCHED",
        "RCU_",
        "TREE_RCU",
        "CPU_FREQ",
        "CPU_IDLE",
        "NR_CPUS",
        "SMP",
        "CGROUP_SCHED",
        "FAIR_GROUP_SCHED",
        "RT_GROUP_SCHED",
        "CFS_BANDWIDTH",
        "UCLAMP",
        "IRQ_TIME_ACCOUNTING",
        "VIRT_CPU_ACCOUNTING",
        "TICK_",
        "HIGH_RES_TIMERS",
        "CONTEXT_TRACKING",
        "TASKS_RCU",
        "ENERGY_MODEL",
        "HOTPLUG_CPU",
    ];
    if name.ends_with("_FS") || has_prefix(name, FS) {
        Filesystems
    } else if has_prefix(name, BLOCK) {
        BlockLayer
    } else if has_prefix(name, MM) {
        MemoryManagement
    } else if has_prefix(name, SCHED) {
        SchedulerPreemption
    } else {
        Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_large_unique_and_covers_the_brief() {
        assert!(NOTES.len() >= 40, "only {} curated options", NOTES.len());
        let mut names: Vec<&str> = NOTES.iter().map(|n| n.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate curated option");
        for must in [
            "SQUASHFS_DECOMP_SINGLE",
            "SQUASHFS_DECOMP_MULTI",
            "SQUASHFS_DECOMP_MULTI_PERCPU",
            "SQUASHFS_FILE_CACHE",
            "SQUASHFS_FILE_DIRECT",
            "PREEMPT_NONE",
            "PREEMPT_VOLUNTARY",
            "PREEMPT",
            "PREEMPT_RT",
            "HZ_100",
            "HZ_1000",
            "KASAN",
            "DEBUG_KMEMLEAK",
            "PROVE_LOCKING",
            "DEBUG_PAGEALLOC",
            "SLUB_DEBUG_ON",
            "XFS_DEBUG",
            "EXT4_DEBUG",
            "BLK_WBT",
            "MQ_IOSCHED_DEADLINE",
            "IOSCHED_BFQ",
            "TRANSPARENT_HUGEPAGE",
        ] {
            assert!(lookup(must).is_some(), "{must} missing from the table");
        }
        assert!(NOTES.iter().all(|n| !n.note.is_empty() && !n.name.starts_with("CONFIG_")));
    }

    #[test]
    fn heuristics() {
        assert_eq!(classify("NFS_V4").0, Filesystems);
        assert_eq!(classify("VFAT_FS").0, Filesystems);
        assert_eq!(classify("BLK_DEV_NBD").0, BlockLayer);
        assert_eq!(classify("HUGETLBFS").0, MemoryManagement);
        assert_eq!(classify("SCHED_MC").0, SchedulerPreemption);
        assert_eq!(classify("SOUND").0, Other);
        let (area, note) = classify("DEBUG_OBJECTS_TIMERS");
        assert_eq!(area, Debugging);
        assert!(note.is_some());
        assert_eq!(classify("DEBUG_INFO_DWARF5"), (Other, None));
        assert_eq!(classify("LOCKDEP_SUPPORT").1, None);
        assert_eq!(classify("MDIO_BUS").0, Other);
        assert_eq!(classify("CONFIG_XFS_DEBUG").0, Debugging);
    }
}
