//! `fslab doctor`: evaluate known-issue rules against facts and explain
//! what fired.

use std::fmt;

use serde::Serialize;

use super::facts::Facts;
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
}

/// A rule that could be neither confirmed nor ruled out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Undetermined {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// Facts that would decide it.
    pub missing: Vec<String>,
}

/// Result of [`doctor`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorReport {
    /// The facts the rules were evaluated against.
    pub facts: Facts,
    pub rules_checked: usize,
    /// Fired rules, most severe first.
    pub findings: Vec<Finding>,
    pub undetermined: Vec<Undetermined>,
}

/// Evaluate `rules` against `facts`.
pub fn doctor(facts: &Facts, rules: &[Rule]) -> DoctorReport {
    let mut findings = Vec::new();
    let mut undetermined = Vec::new();
    for rule in rules {
        let ev = rule.eval(facts);
        match ev.truth {
            Truth::True => findings.push(Finding {
                id: rule.id.clone(),
                title: rule.title.clone(),
                severity: rule.severity,
                benchmark_hostile: rule.benchmark_hostile,
                summary: rule.summary.clone(),
                advice: rule.advice.clone(),
                evidence: dedup(ev.evidence),
                affected: rule.affected.as_ref().map(|a| a.to_string()),
                fixed_in: rule.fixed_in.clone(),
                commits: rule.commits.clone(),
                references: rule.references.clone(),
            }),
            Truth::Unknown => undetermined.push(Undetermined {
                id: rule.id.clone(),
                title: rule.title.clone(),
                severity: rule.severity,
                missing: dedup(ev.missing),
            }),
            Truth::False => {}
        }
    }
    // Most severe first; hostile before not at equal severity; stable by id.
    findings.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then(b.benchmark_hostile.cmp(&a.benchmark_hostile)).then(a.id.cmp(&b.id))
    });
    DoctorReport { facts: facts.clone(), rules_checked: rules.len(), findings, undetermined }
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
            super::facts::FactsMode::Live => "this machine",
            super::facts::FactsMode::Offline => "offline facts",
        };
        writeln!(f, "fslab doctor ({mode})")?;
        for l in self.facts.summary_lines() {
            writeln!(f, "  {l}")?;
        }
        writeln!(f)?;
        let hostile = self.benchmark_hostile().len();
        match self.findings.len() {
            0 => writeln!(f, "No known issues found ({} rules checked).", self.rules_checked)?,
            n => writeln!(f, "{n} finding(s), {hostile} benchmark-hostile ({} rules checked):", self.rules_checked)?,
        }
        for x in &self.findings {
            writeln!(f)?;
            writeln!(
                f,
                "[{}] {}{}",
                x.severity.as_str().to_uppercase(),
                x.title,
                if x.benchmark_hostile { "  (benchmark-hostile)" } else { "" }
            )?;
            writeln!(f, "  rule:    {}", x.id)?;
            writeln!(f, "  because: {}", x.evidence.join("; "))?;
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
        }
        if !self.undetermined.is_empty() {
            writeln!(f)?;
            writeln!(f, "Not decidable with these facts:")?;
            for u in &self.undetermined {
                writeln!(f, "  {} (needs {})", u.id, u.missing.join(", "))?;
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
        let report = doctor(&f, &builtin_rules().unwrap());
        let lines = report.hostile_lines();
        assert!(lines.iter().any(|l| l.contains("debug-kasan")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("ext4-lazyinit-running")), "{lines:?}");
        assert!(report.benchmark_hostile().iter().all(|x| x.benchmark_hostile));
        assert!(!report.undetermined.is_empty());
        assert!(report.to_string().contains("Not decidable with these facts"));
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
