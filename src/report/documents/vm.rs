//! `fslab vm-probe`: a kernel booted in a VM, what the guest looks like,
//! and how long each step took.

use serde::Serialize;

use crate::kernel::KernelArtifacts;
use crate::report::Document;
use crate::vm::{BootPhases, GuestFacts, VmSummary};

#[derive(Debug, Serialize)]
pub struct VmProbe {
    pub kernel: KernelArtifacts,
    pub vm: VmSummary,
    /// Where the boot's time went (when QEMU's start could be read).
    pub boot_phases: Option<BootPhases>,
    pub facts: GuestFacts,
    /// The probe request's round trip.
    pub probe_s: f64,
    /// Each `ping` round trip.
    pub ping_s: Vec<f64>,
    pub shutdown_s: f64,
    /// The session's QEMU, when it was found.
    pub qemu_memory_kib: Option<QemuMemory>,
}

/// VmRSS and RssShmem (guest RAM is a shared memfd) of QEMU, in KiB.
#[derive(Debug, Serialize)]
pub struct QemuMemory {
    pub rss: Option<u64>,
    pub rss_shmem: Option<u64>,
    pub rss_anon: Option<u64>,
}

impl Document for VmProbe {
    fn what(&self) -> &'static str {
        "a VM probe"
    }

    fn text(&self) -> String {
        let pings = if self.ping_s.is_empty() {
            String::new()
        } else {
            let mean = self.ping_s.iter().sum::<f64>() / self.ping_s.len() as f64;
            format!("{} pings, mean {:.1} ms\n", self.ping_s.len(), mean * 1e3)
        };
        let rss = self.qemu_memory_kib.as_ref().and_then(|m| m.rss);
        let phases = self.boot_phases.as_ref().map_or(String::new(), |p| {
            format!(
                "boot phases: virtme-ng {:.1} s, QEMU to the kernel's clock {:.1} s, kernel {:.1} s, init {:.1} s, \
                 agent load {:.1} s, agent setup {:.1} s\n",
                p.virtme_s, p.firmware_s, p.kernel_s, p.init_s, p.agent_load_s, p.agent_setup_s
            )
        });
        format!(
            "kernel {} ({}), guest {}\nboot {:.1} s ({}, {} CPUs, {} MiB), probe {:.2} s, shutdown {:.1} s\n{phases}{pings}{}",
            self.kernel.release,
            self.kernel.source,
            self.vm.guest_release,
            self.vm.boot_s,
            self.vm.accelerator,
            self.vm.cpus,
            self.vm.memory_mib,
            self.probe_s,
            self.shutdown_s,
            rss.map_or(String::new(), |kib| format!("QEMU RSS {} MiB\n", kib >> 10)),
        )
    }
}
