//! The facts as a person reads them: one line per fact.

use super::model::Facts;

impl Facts {
    /// Short human summary, one fact per line.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let unknown = || "unknown".to_string();
        out.push(format!(
            "kernel      {}{}",
            self.kernel_release.clone().unwrap_or_else(unknown),
            self.kernel_version.map(|v| format!(" (version {v})")).unwrap_or_default()
        ));
        out.push(format!(
            "config      {}",
            match (&self.kconfig_source, &self.kconfig) {
                (Some(s), Some(m)) => format!("{s} ({} options)", m.len()),
                (None, Some(m)) => format!("{} options", m.len()),
                _ => unknown(),
            }
        ));
        out.push(format!(
            "preemption  {}{}",
            self.preempt_model.map(|m| m.as_str().to_string()).unwrap_or_else(unknown),
            self.preempt_source.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ));
        out.push(format!(
            "cpus        {}   memory {}",
            self.cpu_count.map(|c| c.to_string()).unwrap_or_else(unknown),
            self.mem_total_kb.map(|m| format!("{:.1} GiB", m as f64 / 1048576.0)).unwrap_or_else(unknown)
        ));
        if let Some(fs) = &self.fs {
            out.push(format!(
                "filesystem  {} on {}{}{}",
                if fs.fstype.is_empty() { "?" } else { &fs.fstype },
                fs.source.clone().unwrap_or_else(|| "?".into()),
                fs.mount_point.as_ref().map(|m| format!(" at {m}")).unwrap_or_default(),
                fs.size_bytes.map(|b| format!(", {:.1} GiB", b as f64 / f64::from(1u32 << 30))).unwrap_or_default()
            ));
            if let Some(opts) = &fs.mount_options {
                let joined: Vec<String> =
                    opts.iter().map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") }).collect();
                out.push(format!("options     {}", joined.join(",")));
            }
            let groups = self.ext4_block_groups();
            if fs.internals.ext4.is_some() || groups.is_some() {
                let mut s = format!(
                    "ext4        {} block groups{}",
                    groups.map_or("?".into(), |(g, _)| g.to_string()),
                    match groups {
                        Some((_, how)) if fs.internals.ext4.as_ref().and_then(|e| e.block_groups).is_none() =>
                            format!(" ({how})"),
                        _ => String::new(),
                    }
                );
                if let Some((on, why)) = self.ext4_mb_optimize_scan() {
                    s.push_str(&format!(", mb_optimize_scan {} ({why})", if on { "on" } else { "off" }));
                }
                match fs.internals.ext4.as_ref().and_then(|e| e.itable_unzeroed_groups) {
                    Some(0) => s.push_str(", inode tables all zeroed"),
                    Some(n) => s.push_str(&format!(", {n} inode tables not yet zeroed")),
                    None => {}
                }
                out.push(s);
            }
            if let Some(x) = &fs.internals.xfs {
                out.push(format!(
                    "xfs         agcount {}, agsize {} blocks{}",
                    x.agcount.map_or("?".into(), |v| v.to_string()),
                    x.agsize_blocks.map_or("?".into(), |v| v.to_string()),
                    self.xfs_cpus_per_ag().map(|r| format!(", {r:.1} CPUs per AG")).unwrap_or_default()
                ));
            }
            if let Some(b) = &fs.internals.btrfs {
                out.push(format!(
                    "btrfs       data {}, metadata {}, system {}",
                    b.data_profile.as_deref().unwrap_or("?"),
                    b.metadata_profile.as_deref().unwrap_or("?"),
                    b.system_profile.as_deref().unwrap_or("?")
                ));
            }
        }
        if let Some(q) = &self.queue {
            let opt = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
            out.push(format!(
                "queue       {}: rotational {}, scheduler {}, read_ahead_kb {}, nr_requests {}, write cache {}",
                q.device,
                q.rotational.map_or("?".into(), |r| if r { "yes".to_string() } else { "no".to_string() }),
                q.scheduler.as_deref().unwrap_or("?"),
                opt(q.read_ahead_kb),
                opt(q.nr_requests),
                q.write_cache.as_deref().unwrap_or("?")
            ));
        }
        if let Some((kind, how)) = self.device_kind() {
            out.push(format!("device      {} ({how})", kind.as_str()));
        }
        if let Some(l) = self.ext4_lazyinit_running {
            out.push(format!("ext4lazyinit {}", if l { "running" } else { "not running" }));
        }
        out
    }
}
