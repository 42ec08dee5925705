//! `fslab doctor`: evaluate known-issue rules against facts and explain
//! what fired.

use std::fmt;

use serde::Serialize;

use super::facts::{Facts, FactsMode};
use super::rules::{Commit, CommitRole, Rule, Severity, Truth};

/// A rule that fired.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// Results measured now are distorted by this.
    pub benchmark_hostile: bool,
    pub summary: String,
    pub advice: String,
    /// The facts that made the rule fire.
    pub evidence: Vec<String>,
    /// Kernel range the issue affects.
    pub affected: Option<String>,
    pub fixed_in: Option<String>,
    pub commits: Vec<Commit>,
    pub references: Vec<String>,
    /// Likely findings: what the unknown facts are assumed to be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assumes: Option<String>,
    /// Likely findings: how to supply the facts that would confirm it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub confirm: Vec<String>,
}

/// A rule that could be neither confirmed nor ruled out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Undetermined {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// Facts that would decide it.
    pub missing: Vec<String>,
    /// How to supply them.
    pub supply: Vec<String>,
}

/// Result of [`doctor`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorReport {
    /// The facts the rules were evaluated against.
    pub facts: Facts,
    pub rules_checked: usize,
    /// Fired rules, most severe first.
    pub findings: Vec<Finding>,
    /// Rules undecided with these facts but likely true (see the likely
    /// tier in [`super::rules`]), most severe first.
    pub likely: Vec<Finding>,
    /// Rules undecided and not likely.
    pub undetermined: Vec<Undetermined>,
}

/// How a user supplies a missing fact: the `fslab doctor` flag offline,
/// the kind of path or file live. In the order the flags are listed.
fn supply_hints(missing: &[String], mode: FactsMode) -> Vec<String> {
    const ORDER: &[&str] = &[
        "--fs TYPE",
        "--device-kind sdcard|emmc|hdd|ssd",
        "--fs-size SIZE",
        "--mount-options",
        "--kernel-release X.Y.Z",
        "--kconfig FILE",
    ];
    let offline = mode == FactsMode::Offline;
    let fs_keys = ["fs.", "ext4.", "xfs.", "btrfs.", "queue.", "device."];
    let mut out: Vec<String> = Vec::new();
    for m in missing {
        let hints: &[&str] = match m.as_str() {
            "fs.type" if offline => &["--fs TYPE"],
            "device.kind" if offline => &["--device-kind sdcard|emmc|hdd|ssd"],
            "ext4.groups" | "fs.size" if offline => &["--fs-size SIZE"],
            // Its default depends on the group count; an explicit option decides it.
            "ext4.mb_optimize_scan" if offline => &["--fs-size SIZE", "--mount-options"],
            "mount options" if offline => &["--mount-options"],
            "kernel.version" | "kernel.release" if offline => &["--kernel-release X.Y.Z"],
            "kernel config" if offline => &["--kconfig FILE"],
            "kernel config" => &["a readable kernel config (/proc/config.gz or /boot/config-<release>)"],
            k if offline && (k == "cpu.count" || fs_keys.iter().any(|p| k.starts_with(p))) => {
                &["`fslab doctor PATH` on that machine"]
            }
            k if !offline && (k == "mount options" || fs_keys.iter().any(|p| k.starts_with(p))) => {
                &["a PATH on the filesystem in question"]
            }
            _ => &[],
        };
        let owned: Vec<String> =
            if hints.is_empty() { vec![format!("fact {m}")] } else { hints.iter().map(|h| h.to_string()).collect() };
        for h in owned {
            if !out.contains(&h) {
                out.push(h);
            }
        }
    }
    let rank = |h: &String| ORDER.iter().position(|o| o == h).unwrap_or(ORDER.len());
    out.sort_by_key(rank);
    out
}

/// Evaluate `rules` against `facts`.
pub fn doctor(facts: &Facts, rules: &[Rule]) -> DoctorReport {
    let mut findings = Vec::new();
    let mut likely = Vec::new();
    let mut undetermined = Vec::new();
    let finding = |rule: &Rule, evidence: Vec<String>| Finding {
        id: rule.id.clone(),
        title: rule.title.clone(),
        severity: rule.severity,
        benchmark_hostile: rule.benchmark_hostile,
        summary: rule.summary.clone(),
        advice: rule.advice.clone(),
        evidence: dedup(evidence),
        affected: rule.affected.as_ref().map(|a| a.to_string()),
        fixed_in: rule.fixed_in.clone(),
        commits: rule.commits.clone(),
        references: rule.references.clone(),
        assumes: None,
        confirm: Vec::new(),
    };
    for rule in rules {
        let ev = rule.eval(facts);
        match ev.truth {
            Truth::True => findings.push(finding(rule, ev.evidence)),
            Truth::Unknown => {
                let missing = dedup(ev.missing);
                match rule.eval_likely(facts) {
                    Some(l) => likely.push(Finding {
                        assumes: rule.likely.as_ref().map(|l| l.assumes.clone()),
                        confirm: supply_hints(&missing, facts.mode),
                        ..finding(rule, l.evidence)
                    }),
                    None => undetermined.push(Undetermined {
                        id: rule.id.clone(),
                        title: rule.title.clone(),
                        severity: rule.severity,
                        supply: supply_hints(&missing, facts.mode),
                        missing,
                    }),
                }
            }
            Truth::False => {}
        }
    }
    // Most severe first; hostile before not at equal severity; stable by id.
    let order = |a: &Finding, b: &Finding| {
        b.severity.cmp(&a.severity).then(b.benchmark_hostile.cmp(&a.benchmark_hostile)).then(a.id.cmp(&b.id))
    };
    findings.sort_by(order);
    likely.sort_by(order);
    DoctorReport { facts: facts.clone(), rules_checked: rules.len(), findings, likely, undetermined }
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(v.len());
    for s in v {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

impl DoctorReport {
    /// Findings that distort benchmarks taken now.
    pub fn benchmark_hostile(&self) -> Vec<&Finding> {
        self.findings.iter().filter(|f| f.benchmark_hostile).collect()
    }

    /// The worst severity found.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// One line per benchmark-hostile finding, for `fslab run` to print
    /// before it starts.
    pub fn hostile_lines(&self) -> Vec<String> {
        self.benchmark_hostile()
            .iter()
            .map(|f| format!("[{}] {}: {} ({})", f.severity, f.id, f.title, f.evidence.join("; ")))
            .collect()
    }
}

/// Wrap `text` to `width` columns, each line prefixed by `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    for para in text.split("\n\n") {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
                out.push_str(indent);
                out.push_str(&line);
                out.push('\n');
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn role(r: CommitRole) -> &'static str {
    match r {
        CommitRole::Introduced => "introduced",
        CommitRole::Fixed => "fix",
        CommitRole::Related => "related",
    }
}

impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.facts.mode {
            FactsMode::Live => "this machine",
            FactsMode::Offline => "offline facts",
        };
        writeln!(f, "fslab doctor ({mode})")?;
        for l in self.facts.summary_lines() {
            writeln!(f, "  {l}")?;
        }
        writeln!(f)?;
        writeln!(f, "{}", self.headline())?;
        for x in &self.findings {
            write_finding(f, x, "")?;
        }
        if !self.likely.is_empty() {
            writeln!(f)?;
            writeln!(f, "Likely, but not confirmed by these facts:")?;
            for x in &self.likely {
                write_finding(f, x, "LIKELY ")?;
            }
        }
        if !self.undetermined.is_empty() {
            writeln!(f)?;
            writeln!(f, "Not decidable with these facts:")?;
            for u in &self.undetermined {
                writeln!(f, "  {} (needs {}; give {})", u.id, u.missing.join(", "), u.supply.join(", "))?;
            }
        }
        if !self.facts.notes.is_empty() {
            writeln!(f)?;
            writeln!(f, "Notes:")?;
            for n in &self.facts.notes {
                writeln!(f, "  {n}")?;
            }
        }
        Ok(())
    }
}

impl DoctorReport {
    /// The first line of the verdict. "No known issues" only when every
    /// rule was decided.
    pub fn headline(&self) -> String {
        let checked = self.rules_checked;
        let open = match (self.likely.len(), self.undetermined.len()) {
            (0, 0) => String::new(),
            (l, 0) => format!("{l} likely"),
            (0, u) => format!("{u} undecided"),
            (l, u) => format!("{l} likely, {u} undecided"),
        };
        match (self.findings.len(), open.is_empty()) {
            (0, true) => format!("No known issues found ({checked} rules checked, all decided)."),
            (0, false) => {
                format!("No issue confirmed, but not every rule could be decided: {open} ({checked} rules checked).")
            }
            (n, true) => format!(
                "{n} finding(s), {} benchmark-hostile ({checked} rules checked):",
                self.benchmark_hostile().len()
            ),
            (n, false) => format!(
                "{n} finding(s), {} benchmark-hostile; {open} ({checked} rules checked):",
                self.benchmark_hostile().len()
            ),
        }
    }
}

fn write_finding(f: &mut fmt::Formatter<'_>, x: &Finding, tier: &str) -> fmt::Result {
    writeln!(f)?;
    writeln!(
        f,
        "[{tier}{}] {}{}",
        x.severity.as_str().to_uppercase(),
        x.title,
        if x.benchmark_hostile { "  (benchmark-hostile)" } else { "" }
    )?;
    writeln!(f, "  rule:    {}", x.id)?;
    writeln!(f, "  because: {}", x.evidence.join("; "))?;
    if let Some(a) = &x.assumes {
        writeln!(f, "  assumes:")?;
        write!(f, "{}", wrap(a, "    ", 100))?;
    }
    if !x.confirm.is_empty() {
        writeln!(f, "  confirm: {}", x.confirm.join("; "))?;
    }
    write!(f, "{}", wrap(&x.summary, "  ", 100))?;
    if x.affected.is_some() || x.fixed_in.is_some() {
        let mut s = String::from("  kernels: ");
        if let Some(a) = &x.affected {
            s.push_str(&format!("affected {a}"));
        }
        if let Some(v) = &x.fixed_in {
            if x.affected.is_some() {
                s.push_str("; ");
            }
            s.push_str(&format!("fixed in {v}"));
        }
        writeln!(f, "{s}")?;
    }
    for c in &x.commits {
        writeln!(
            f,
            "  commit:  {} \"{}\" ({}{})",
            c.id,
            c.title,
            role(c.role),
            c.version.as_ref().map(|v| format!(", {v}")).unwrap_or_default()
        )?;
    }
    writeln!(f, "  advice:")?;
    write!(f, "{}", wrap(&x.advice, "    ", 100))?;
    for r in &x.references {
        writeln!(f, "  see:     {r}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::facts::FactsMode;
    use crate::inspect::rules::builtin_rules;

    #[test]
    fn squashfs_case_from_the_thread() {
        // The i.MX8MM system: v5.15 + PREEMPT_RT, vendor config with a
        // single decompressor and the file cache.
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("vendor.config");
        std::fs::write(
            &cfg,
            "CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_FILE_CACHE=y\n# CONFIG_SQUASHFS_FILE_DIRECT is not set\n\
             CONFIG_SQUASHFS_DECOMP_SINGLE=y\n# CONFIG_SQUASHFS_DECOMP_MULTI is not set\n\
             # CONFIG_SQUASHFS_DECOMP_MULTI_PERCPU is not set\nCONFIG_PREEMPT_RT=y\n",
        )
        .unwrap();
        let facts = Facts::offline(Some(&cfg), Some("5.15.24-rt31"), Some("ro"), Some("squashfs")).unwrap();
        let report = doctor(&facts, &builtin_rules().unwrap());
        let ids: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
        for want in [
            "squashfs-single-decomp-readahead",
            "squashfs-single-decompressor",
            "squashfs-single-decomp-preemptible",
            "squashfs-file-cache",
            "preempt-rt",
        ] {
            assert!(ids.contains(&want), "{want} missing from {ids:?}");
        }
        assert_eq!(report.findings[0].severity, Severity::High);
        assert_eq!(report.worst(), Some(Severity::High));
        let text = report.to_string();
        assert!(text.contains("c1f6925e1091"), "{text}");
        assert!(text.contains("9eec1d897139"), "{text}");
        assert!(text.contains("CONFIG_SQUASHFS_DECOMP_SINGLE=y"), "{text}");
        assert!(text.contains("fslab doctor (offline facts)"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["findings"][0]["severity"], "high");
        assert!(json["facts"]["kconfig"]["SQUASHFS_DECOMP_SINGLE"] == "y");

        // The same kernel with the fix-era version and per-CPU decompressors.
        std::fs::write(&cfg, "CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_FILE_DIRECT=y\nCONFIG_SQUASHFS_DECOMP_MULTI_PERCPU=y\nCONFIG_PREEMPT_NONE=y\n").unwrap();
        let good = Facts::offline(Some(&cfg), Some("5.17.1"), None, Some("squashfs")).unwrap();
        let report = doctor(&good, &builtin_rules().unwrap());
        assert!(report.findings.iter().all(|f| !f.id.starts_with("squashfs")), "{report}");
    }

    #[test]
    fn hostile_findings_are_listed_for_run() {
        let mut f = Facts::empty(FactsMode::Offline);
        f.set("kconfig.KASAN", "y").unwrap();
        f.set("ext4.lazyinit_running", "true").unwrap();
        f.set("fs.type", "ext4").unwrap();
        f.set("ext4.itable_unzeroed_groups", "3").unwrap();
        f.set("mount.rw", "").unwrap();
        let report = doctor(&f, &builtin_rules().unwrap());
        let lines = report.hostile_lines();
        assert!(lines.iter().any(|l| l.contains("debug-kasan")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("ext4-lazyinit-running")), "{lines:?}");
        assert!(report.benchmark_hostile().iter().all(|x| x.benchmark_hostile));
        assert!(!report.undetermined.is_empty());
        assert!(report.to_string().contains("Not decidable with these facts"));
    }

    /// A 5.19 kernel config with ext4 is squarely in the mb_optimize_scan
    /// range: offline, without device facts, the rule is "likely" with what
    /// would confirm it, and the report does not say "No known issues".
    #[test]
    fn offline_mb_optimize_scan_is_likely_until_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("rpi-5.19.config");
        std::fs::write(&cfg, "CONFIG_EXT4_FS=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_SQUASHFS is not set\n").unwrap();
        let rules = builtin_rules().unwrap();
        let facts = Facts::offline(Some(&cfg), Some("5.19.0"), None, None).unwrap();
        let report = doctor(&facts, &rules);
        assert!(report.findings.is_empty(), "{report}");
        let likely: Vec<&str> = report.likely.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(likely, ["ext4-mb-optimize-scan-spreading"], "{report}");
        let l = &report.likely[0];
        assert!(l.assumes.as_deref().is_some_and(|a| a.contains("16 or more block groups")), "{l:?}");
        let confirm = l.confirm.join("; ");
        for flag in ["--device-kind", "--fs-size", "--fs TYPE"] {
            assert!(confirm.contains(flag), "{confirm}");
        }
        let text = report.to_string();
        assert!(!text.contains("No known issues found"), "{text}");
        assert!(text.contains("[LIKELY HIGH]") && text.contains("1 likely"), "{text}");
        assert!(!report.undetermined.iter().any(|u| u.id == l.id), "likely rules are not also undecided");

        // Confirmed with the device and size …
        let mut sd = Facts::offline(Some(&cfg), Some("5.19.0"), None, Some("ext4")).unwrap();
        sd.set("device.kind", "sdcard").unwrap();
        sd.set("fs.size", "32GiB").unwrap();
        let report = doctor(&sd, &rules);
        assert!(report.findings.iter().any(|f| f.id == "ext4-mb-optimize-scan-spreading"), "{report}");
        assert!(report.likely.is_empty(), "{report}");
        // … ruled out by the mount option, or for a large SSD filesystem.
        let off = Facts::offline(Some(&cfg), Some("5.19.0"), Some("rw,mb_optimize_scan=0"), Some("ext4")).unwrap();
        let report = doctor(&off, &rules);
        assert!(report.likely.iter().chain(&report.findings).all(|f| !f.id.starts_with("ext4-mb")), "{report}");
        let mut ssd = Facts::offline(Some(&cfg), Some("5.19.0"), None, Some("ext4")).unwrap();
        ssd.set("device.kind", "ssd").unwrap();
        ssd.set("fs.size", "1TiB").unwrap();
        let report = doctor(&ssd, &rules);
        assert!(report.likely.iter().chain(&report.findings).all(|f| !f.id.starts_with("ext4-mb")), "{report}");
        // A fixed kernel decides it without device facts.
        let fixed = Facts::offline(Some(&cfg), Some("6.1.0"), None, None).unwrap();
        let report = doctor(&fixed, &rules);
        assert!(report.likely.is_empty() && report.findings.is_empty(), "{report}");
    }

    #[test]
    fn headline_says_what_was_decided() {
        let rules = builtin_rules().unwrap();
        let mut none = Facts::empty(FactsMode::Offline);
        none.set("kernel.release", "6.1.0").unwrap();
        let report = doctor(&none, &rules);
        assert!(!report.undetermined.is_empty());
        assert!(report.headline().starts_with("No issue confirmed, but not every rule could be decided"), "{report}");
        let empty =
            DoctorReport { facts: none, rules_checked: 3, findings: vec![], likely: vec![], undetermined: vec![] };
        assert_eq!(empty.headline(), "No known issues found (3 rules checked, all decided).");
    }

    #[test]
    fn live_doctor_runs() {
        let facts = Facts::gather(Some(std::path::Path::new("/"))).unwrap();
        let report = doctor(&facts, &builtin_rules().unwrap());
        assert!(report.to_string().starts_with("fslab doctor (this machine)"));
        assert!(serde_json::to_string(&report).is_ok());
    }

    #[test]
    fn wrapping() {
        let w = wrap("aaa bbb ccc", "  ", 9);
        assert_eq!(w, "  aaa bbb\n  ccc\n");
        assert_eq!(wrap("", "  ", 9), "");
    }
}
