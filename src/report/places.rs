//! Where each variant ran (host or VM, with which kernel, accelerator and
//! size), and the marks a comparison gets when its sides ran in different
//! places: the place changes timing wholesale, so such a verdict measures
//! the place as much as the kernel or option under test.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use crate::record::RunPlace;
use crate::store::Store;
use crate::stored::{StoredEnvironment, VariantKernel};

/// What [`Places::comparison_notes`] found.
#[derive(Debug, Default)]
pub struct ComparisonNotes {
    pub marks: Vec<String>,
    pub doctor: Vec<String>,
}

/// The places of one experiment's variants.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Places {
    /// Variant → every distinct place its ok runs ran in.
    pub variants: BTreeMap<String, Vec<RunPlace>>,
    /// Variant → its kernel, from the experiment's environment.
    #[serde(skip)]
    pub kernels: BTreeMap<String, VariantKernel>,
}

impl Places {
    pub fn load(store: &Store, experiment_id: i64, environment: &StoredEnvironment) -> Result<Places> {
        let mut variants: BTreeMap<String, Vec<RunPlace>> = BTreeMap::new();
        for (variant, place) in store.variant_places(experiment_id)? {
            variants.entry(variant).or_default().push(place);
        }
        Ok(Places { variants, kernels: environment.kernels.clone() })
    }

    /// Did every run happen on the host (nothing worth a line)?
    pub fn all_host(&self) -> bool {
        self.variants.values().flatten().all(|p| p.kind == "host")
    }

    /// One line per variant: `6.12: kernel 6.12.111+deb12-cloud-amd64 in vm emulated (tcg) 2 CPUs 2048 MiB (config …)`.
    pub fn lines(&self) -> Vec<String> {
        self.variants
            .iter()
            .map(|(variant, places)| {
                let wheres: Vec<String> =
                    places.iter().map(|p| format!("kernel {} on {}", p.kernel_release, p.describe())).collect();
                let mut line = format!("{variant}: {}", wheres.join("; "));
                if let Some(source) = self.kernels.get(variant).and_then(|k| k.source.as_deref()) {
                    line.push_str(&format!(", from {source}"));
                }
                if let Some(cmdline) = places.first().filter(|p| !p.cmdline.is_empty()).map(|p| p.cmdline.join(" ")) {
                    line.push_str(&format!(", cmdline +`{cmdline}`"));
                }
                line
            })
            .collect()
    }

    /// Doctor findings for `variant`'s kernel config that `baseline`'s does
    /// not have (and the reverse), e.g. `6.12-rt has preempt-rt: …`.
    pub fn finding_differences(&self, baseline: &str, variant: &str) -> Vec<String> {
        let ids = |v: &str| -> Vec<(String, String)> {
            self.kernels
                .get(v)
                .and_then(|k| k.findings.as_ref())
                .into_iter()
                .flatten()
                .map(|f| {
                    let severity = if f.severity.is_empty() { "?" } else { f.severity.as_str() };
                    (f.id.clone(), format!("[{severity}] {}: {}", f.id, f.title))
                })
                .collect()
        };
        let (a, b) = (ids(baseline), ids(variant));
        let mut out = Vec::new();
        for (id, text) in &b {
            if !a.iter().any(|(i, _)| i == id) {
                out.push(format!("{variant} has {text}"));
            }
        }
        for (id, text) in &a {
            if !b.iter().any(|(i, _)| i == id) {
                out.push(format!("{baseline} has {text}"));
            }
        }
        out
    }

    /// Why comparing `variant` with `baseline` mixes places, or None.
    pub fn mismatch(&self, baseline: &str, variant: &str) -> Option<String> {
        let (Some(a), Some(b)) = (self.variants.get(baseline), self.variants.get(variant)) else { return None };
        let keys = |ps: &[RunPlace]| {
            let mut k: Vec<_> = ps.iter().map(RunPlace::timing_key).collect();
            k.sort();
            k.dedup();
            k
        };
        if keys(a) == keys(b) {
            return None;
        }
        let describe = |ps: &[RunPlace]| ps.iter().map(RunPlace::describe).collect::<Vec<_>>().join(" and ");
        Some(format!(
            "different places: {variant} ran on {}, {baseline} on {}; the place changes timing wholesale",
            describe(b),
            describe(a)
        ))
    }

    /// The emulation warning, when any run of the two sides was emulated.
    pub fn emulated(&self, baseline: &str, variant: &str) -> bool {
        [baseline, variant].iter().filter_map(|v| self.variants.get(*v)).flatten().any(RunPlace::is_emulated)
    }

    /// For every variant compared with `baseline`: its place marks
    /// (`6.12 vs 6.1: different places: …`) and the doctor findings its
    /// kernel config has that the baseline's has not (or the reverse).
    pub fn comparison_notes(&self, baseline: &str, variants: &[String]) -> ComparisonNotes {
        let mut notes = ComparisonNotes::default();
        for v in variants.iter().filter(|v| *v != baseline) {
            notes.marks.extend(self.marks(baseline, v).into_iter().map(|m| format!("{v} vs {baseline}: {m}")));
            for line in self.finding_differences(baseline, v) {
                if !notes.doctor.contains(&line) {
                    notes.doctor.push(line);
                }
            }
        }
        notes
    }

    /// The marks of the comparison of `variant` against `baseline`.
    pub fn marks(&self, baseline: &str, variant: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = self.mismatch(baseline, variant) {
            out.push(m);
        }
        if self.emulated(baseline, variant) {
            out.push("warning: timings are emulated (TCG, no KVM)".to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(accel: &str, cpus: u32) -> RunPlace {
        RunPlace {
            kind: "vm".into(),
            kernel_release: "6.1.0".into(),
            accelerator: Some(accel.into()),
            cpus: Some(cpus),
            memory_mib: Some(2048),
            ..RunPlace::default()
        }
    }

    fn places(entries: &[(&str, RunPlace)]) -> Places {
        let mut p = Places::default();
        for (v, place) in entries {
            p.variants.entry(v.to_string()).or_default().push(place.clone());
        }
        p
    }

    #[test]
    fn same_place_is_not_marked_and_different_places_are() {
        let host = RunPlace { kind: "host".into(), kernel_release: "6.18".into(), ..RunPlace::default() };
        let p =
            places(&[("a", vm("kvm", 2)), ("b", vm("kvm", 2)), ("c", host), ("d", vm("kvm", 4)), ("e", vm("tcg", 2))]);
        assert_eq!(p.marks("a", "b"), Vec::<String>::new());
        assert!(p.mismatch("a", "c").unwrap().contains("c ran on host, a on vm kvm 2 CPUs 2048 MiB"));
        assert!(p.mismatch("a", "d").is_some(), "VM size differs");
        let e = p.marks("a", "e");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[1].contains("emulated"));
        let notes = p.comparison_notes("a", &["a".into(), "b".into(), "e".into()]);
        assert_eq!(notes.marks.len(), 2, "{notes:?}");
        assert!(notes.marks[0].starts_with("e vs a: different places"), "{notes:?}");
        assert!(!p.all_host());
    }

    #[test]
    fn doctor_findings_that_differ_between_kernels_are_named_once() {
        let finding = |id: &str| serde_json::json!({ "id": id, "title": "t", "severity": "high" });
        let p = Places {
            kernels: serde_json::from_value(serde_json::json!({
                "6.12": { "place": "vm", "findings": [finding("common")] },
                "6.12-rt": { "place": "vm", "findings": [finding("common"), finding("preempt-rt")] },
                "6.1": { "place": "vm", "findings": [] },
            }))
            .unwrap(),
            ..Places::default()
        };
        assert_eq!(p.finding_differences("6.12", "6.12-rt"), vec!["6.12-rt has [high] preempt-rt: t".to_string()]);
        assert_eq!(p.finding_differences("6.12", "6.1"), vec!["6.12 has [high] common: t".to_string()]);
        let notes = p.comparison_notes("6.12", &["6.12".into(), "6.12-rt".into(), "6.1".into()]);
        assert_eq!(notes.doctor.len(), 2, "{notes:?}");
        assert!(notes.marks.is_empty(), "no places, no marks: {notes:?}");
    }
}
