//! How long a built kernel's build will take, said before it starts (plans,
//! `fslab kernel build`, the runner): cached (no build), incremental (its
//! source's object directory is there) or cold, with figures this machine
//! recorded. Every `make bzImage` leaves a [`BuildRecord`] next to its build
//! log, in the object directory and in the image's cache entry, so a cold
//! build is estimated from the last cold build of the same source version.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::build::{builds_dir, KernelBuild};

/// A build's record, beside its `build.log`.
pub const RECORD_FILE: &str = "fslab-build-record.json";

/// What the figures in BENCHMARKS.md say when this machine has recorded no
/// cold build of the version yet.
pub const BENCHMARKED: &str =
    "BENCHMARKS.md: a cold `minimal` build took 28-52 min on a shared 2-core machine (5.10, 6.1, 6.12), about 11 min with both cores to itself";

/// What one `make bzImage` took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The source's kernel version (`5.10.262`).
    pub version: String,
    /// `minimal`, `debian` or the config file.
    pub config_base: String,
    /// The object directory held no finished build when make started.
    pub cold: bool,
    pub wall_s: f64,
    /// Objects compiled (`CC`/`AS` lines).
    pub objects: u64,
    /// `make -jN`.
    pub jobs: usize,
    /// When it finished (seconds since the Unix epoch), to find the last one.
    pub finished_unix: u64,
}

impl BuildRecord {
    pub fn read(dir: &Path) -> Option<BuildRecord> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(RECORD_FILE)).ok()?).ok()
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(RECORD_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// `1492 objects in 47 min 27 s with 2 jobs`.
    fn figures(&self) -> String {
        format!(
            "{} objects in {} with {} jobs",
            crate::human::number(self.objects as f64),
            crate::human::duration_s(self.wall_s),
            self.jobs
        )
    }
}

/// What building a variant's kernel will take.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "build", rename_all = "snake_case")]
pub enum BuildOutlook {
    /// The image is in the cache: no build.
    Cached,
    /// The same kernel as an earlier variant of the plan: built once, there.
    SameAs { variant: String },
    /// The source's object directory is there: make compiles what changed.
    Incremental {
        /// The last build in that object directory, if recorded.
        last: Option<BuildRecord>,
        /// A patched tree's first build starts from a copy of the unpatched
        /// tree's objects.
        seeded: bool,
        /// Another variant of the same plan builds the objects first.
        after: Option<String>,
    },
    /// Nothing to start from: every object is compiled.
    Cold {
        version: String,
        /// The last cold build of the same version in this cache.
        last_cold: Option<BuildRecord>,
    },
}

impl BuildOutlook {
    /// `after`: the variant of the same plan that builds this source's objects first, if any.
    pub fn of(b: &KernelBuild, cache: &Path, after: Option<&str>) -> BuildOutlook {
        if b.cached || (!b.key.is_empty() && super::cache::kernels_dir(cache).join(&b.key).is_dir()) {
            return BuildOutlook::Cached;
        }
        let builds = builds_dir(cache);
        let obj = super::build::object_dir(cache, &b.tree_key);
        if obj.is_dir() {
            return BuildOutlook::Incremental { last: BuildRecord::read(&obj), seeded: false, after: None };
        }
        if let Some(after) = after {
            return BuildOutlook::Incremental { last: None, seeded: false, after: Some(after.to_string()) };
        }
        if let Some((sibling, _)) = super::build::seed_candidate(&builds, &b.version, &obj) {
            return BuildOutlook::Incremental { last: BuildRecord::read(&sibling), seeded: true, after: None };
        }
        BuildOutlook::Cold { version: b.version.clone(), last_cold: last_cold_build(cache, &b.version, &b.config_base) }
    }

    /// Does the variant build at all?
    pub fn builds(&self) -> bool {
        !matches!(self, BuildOutlook::Cached | BuildOutlook::SameAs { .. })
    }

    /// One line for plans and `fslab kernel build`.
    pub fn describe(&self) -> String {
        match self {
            BuildOutlook::Cached => "cached: no build".to_string(),
            BuildOutlook::SameAs { variant } => format!("no build of its own: the same kernel as variant `{variant}`"),
            BuildOutlook::Incremental { after: Some(v), .. } => {
                format!("incremental build after variant `{v}`'s build of the same source")
            }
            BuildOutlook::Incremental { last, seeded, after: None } => {
                let from = if *seeded {
                    "from a copy of another tree's objects of the same version"
                } else {
                    "in its source's object directory"
                };
                match last {
                    Some(r) => format!(
                        "incremental build {from} (the last build there compiled {}; only what changed is compiled)",
                        r.figures()
                    ),
                    None => format!("incremental build {from} (no build recorded there)"),
                }
            }
            BuildOutlook::Cold { version, last_cold: Some(r) } => {
                format!("COLD build of {version}: the last cold build of {} here compiled {}", r.version, r.figures())
            }
            BuildOutlook::Cold { version, last_cold: None } => {
                format!("COLD build of {version}: no cold build of it recorded on this machine yet; {BENCHMARKED}")
            }
        }
    }
}

/// The outlook of each variant's built kernel (variant index, name,
/// source), in the order they are built ([`super::resolve_order`]): a later
/// variant of an already planned source builds incrementally after it, one
/// of the same kernel not at all.
pub fn plan<'a>(
    variants: impl IntoIterator<Item = (usize, &'a str, &'a super::KernelSource)>,
    cache: &Path,
) -> Vec<(usize, BuildOutlook)> {
    let variants: Vec<_> = variants.into_iter().collect();
    let order = super::resolve_order(variants.iter().map(|(i, _, s)| (*i, *s)));
    let mut building: Vec<(&str, &KernelBuild)> = Vec::new();
    let mut out = Vec::new();
    for i in order {
        let Some((_, name, Some(b))) = variants.iter().find(|(j, _, _)| *j == i).map(|(j, n, s)| (j, n, s.build()))
        else {
            continue;
        };
        let same = |f: &dyn Fn(&KernelBuild) -> bool| building.iter().find(|(_, o)| f(o)).map(|(n, _)| *n);
        let outlook = match same(&|o| !o.key.is_empty() && o.key == b.key) {
            Some(first) => BuildOutlook::SameAs { variant: first.to_string() },
            None => BuildOutlook::of(b, cache, same(&|o| o.tree_key == b.tree_key)),
        };
        if outlook.builds() {
            building.push((name, b));
        }
        out.push((i, outlook));
    }
    out
}

/// The newest recorded cold build of `version` in `cache` (its kernel
/// entries and object directories), preferring one of the same config base.
pub fn last_cold_build(cache: &Path, version: &str, config_base: &str) -> Option<BuildRecord> {
    let dirs = [super::cache::kernels_dir(cache), builds_dir(cache)];
    let records: Vec<BuildRecord> = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .filter_map(|e| BuildRecord::read(&e.path()))
        .filter(|r| r.cold && r.version == version)
        .collect();
    let newest = |same_base: bool| {
        records.iter().filter(|r| !same_base || r.config_base == config_base).max_by_key(|r| r.finished_unix).cloned()
    };
    newest(true).or_else(|| newest(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(cache: &Path) -> KernelBuild {
        let mut b = KernelBuild {
            source: "debian:5.10".into(),
            config_base: "minimal".into(),
            version: "5.10.262".into(),
            tree_key: "a".repeat(64),
            key: "b".repeat(64),
            ..KernelBuild::default()
        };
        b.cached = b.is_built(cache);
        b
    }

    fn record(cold: bool, base: &str, wall_s: f64, finished_unix: u64) -> BuildRecord {
        BuildRecord {
            version: "5.10.262".into(),
            config_base: base.into(),
            cold,
            wall_s,
            objects: 1492,
            jobs: 2,
            finished_unix,
        }
    }

    /// Each state from real cache layout in a temp dir; the records are
    /// written here (recorded files, not builds).
    #[test]
    fn the_outlook_follows_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let b = planned(cache);
        let cold = BuildOutlook::of(&b, cache, None);
        assert_eq!(cold, BuildOutlook::Cold { version: "5.10.262".into(), last_cold: None });
        assert!(cold.describe().contains("no cold build of it recorded") && cold.describe().contains("28-52 min"));

        // Recorded cold builds of this version elsewhere in the cache: the
        // newest of the same config base is the estimate.
        for (entry, r) in [
            ("k1", record(true, "minimal", 2847.0, 100)),
            ("k2", record(true, "debian", 9000.0, 300)),
            ("k3", record(true, "minimal", 1500.0, 200)),
            ("k4", record(false, "minimal", 33.0, 400)),
        ] {
            let d = super::super::cache::kernels_dir(cache).join(entry);
            std::fs::create_dir_all(&d).unwrap();
            r.write(&d).unwrap();
        }
        let text = BuildOutlook::of(&b, cache, None).describe();
        assert!(text.starts_with("COLD build of 5.10.262") && text.contains("1492 objects in 25 min 00 s"), "{text}");
        assert_eq!(last_cold_build(cache, "5.10.262", "debian").unwrap().wall_s, 9000.0);
        assert!(last_cold_build(cache, "6.1.1", "minimal").is_none());

        // Another variant of the plan builds the same source first.
        let after = BuildOutlook::of(&b, cache, Some("in-range"));
        assert!(after.describe().contains("after variant `in-range`"), "{}", after.describe());

        // The object directory is there, with its last build's record.
        let obj = super::super::build::object_dir(cache, &b.tree_key);
        std::fs::create_dir_all(&obj).unwrap();
        let text = BuildOutlook::of(&b, cache, None).describe();
        assert!(text.contains("no build recorded there"), "{text}");
        record(false, "minimal", 71.0, 500).write(&obj).unwrap();
        let text = BuildOutlook::of(&b, cache, None).describe();
        assert!(text.starts_with("incremental build in its source's object directory"), "{text}");
        assert!(text.contains("1492 objects in 1 min 11 s with 2 jobs"), "{text}");

        // The image is in the cache.
        std::fs::create_dir_all(super::super::cache::kernels_dir(cache).join(&b.key)).unwrap();
        let b = planned(cache);
        assert_eq!(BuildOutlook::of(&b, cache, None), BuildOutlook::Cached);
        assert!(!BuildOutlook::Cached.builds());
    }
}
