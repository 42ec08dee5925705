//! Helpers for workload tests: experiment snippets, error checks, and a
//! testbed that tears itself down when dropped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fslab::experiment::{self, WorkloadParams};
use fslab::metric::Metric;
use fslab::testbed::Testbed;
use fslab::workload::RunContext;

pub fn spec(variant: &str, workload: &str) -> String {
    format!("name = \"w\"\nrepetitions = 1\n[[variant]]\nname = \"v\"\n{variant}\n[[workload]]\n{workload}\n")
}

pub fn params(workload: &str) -> WorkloadParams {
    experiment::parse(&spec("fs = \"tmpfs\"", workload), None).unwrap().workloads.remove(0).params
}

/// Parse `workload` from a file named exp.toml and return the error text.
pub fn error_of(workload: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.toml");
    let text = spec("fs = \"tmpfs\"", workload);
    std::fs::write(&path, &text).unwrap();
    format!("{:#}", experiment::load(&path).expect_err("should be rejected"))
}

/// The error names exp.toml, the line of the offending key and the key.
pub fn assert_points_at(err: &str, line: usize, key: &str) {
    assert!(err.contains(&format!("exp.toml:{line}:")), "expected line {line} in: {err}");
    assert!(err.contains(&format!("`{key}`")), "expected key `{key}` in: {err}");
}

/// Tears the testbed down when dropped, so a failed assertion leaves nothing.
pub struct Bed {
    pub bed: Testbed,
    _work: tempfile::TempDir,
}

impl Bed {
    pub fn new(variant: &str) -> Bed {
        let work = super::workdir("fslab-wl-test");
        let exp = experiment::parse(&spec(variant, "kind = \"command\"\ncommand = \"true\""), None).unwrap();
        let bed = Testbed::provision(&exp.variants[0].testbed, work.path(), None).unwrap();
        Bed { bed, _work: work }
    }

    pub fn root(&self) -> PathBuf {
        self.bed.root().to_path_buf()
    }

    pub fn ctx(&self) -> RunContext {
        RunContext::new(self.root(), self._work.path().join("cache"))
            .with_cgroup(self.bed.cgroup_procs())
            .with_deadline(Some(Instant::now() + Duration::from_secs(300)))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Err(e) = self.bed.teardown() {
            eprintln!("teardown failed: {e:#}");
        }
    }
}

/// prepare_inputs, prepare, run, cleanup (always) of one workload table.
pub fn run_on(bed: &Bed, workload: &str) -> Vec<Metric> {
    let exp = experiment::parse(&spec("fs = \"tmpfs\"", workload), None).unwrap();
    let mut w = exp.workloads[0].build(exp.seed);
    let ctx = bed.ctx();
    w.prepare_inputs(&ctx.cache_dir).unwrap();
    w.prepare(&ctx).unwrap();
    let result = w.run(&ctx);
    w.cleanup(&ctx).unwrap();
    result.unwrap()
}

pub fn metric<'a>(metrics: &'a [Metric], name: &str) -> &'a Metric {
    metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no metric {name} in {metrics:#?}"))
}

/// Files left in the testbed root (ignoring lost+found).
pub fn leftovers(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect()
}
