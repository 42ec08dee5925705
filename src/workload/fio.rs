//! `fio`: fio is the I/O pattern engine; fslab runs it and stores its numbers.
//!
//! fio runs through the [`RunContext`] in the testbed directory (so job
//! files land on the testbed unless the job says otherwise) as
//! `fio --output-format=json --output=<file> …` with either the inline job
//! (`job = { rw = "randwrite", bs = "4k", size = "64M" }` becomes
//! `--name=job --bs=4k --rw=randwrite --size=64M`, as argv, never through a
//! shell; `name` inside the table renames the job) or the job file given by
//! `jobfile`. The JSON goes to a file outside the testbed because fio's
//! report can be larger than the stdout tail fslab keeps; fio sometimes
//! prints plain text around its JSON (warnings, a long-standing bug), so
//! [`extract_json`] looks for the report object instead of parsing the
//! whole text.
//!
//! Metrics, per job and direction (`read`, `write`, `trim`, only directions
//! that did I/O):
//! `<job>/<dir>/bw_kib_s` (KiB/s), `<job>/<dir>/iops`,
//! `<job>/<dir>/clat_mean_us`, `<job>/<dir>/clat_p50_us`,
//! `<job>/<dir>/clat_p99_us`, `<job>/<dir>/clat_p99_9_us` (completion
//! latency, µs); per job `<job>/usr_cpu_pct` and `<job>/sys_cpu_pct`.
//! Jobs with the same name (e.g. `numjobs` without `group_reporting`) get
//! `.2`, `.3`, … appended in report order.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::process::have_program;
use super::{RunContext, Workload};
use crate::experiment::FioJob;
use crate::metric::Metric;

pub struct Fio {
    pub job: FioJob,
    /// Job names of the last report, for cleanup of fio's data files.
    job_names: Vec<String>,
}

impl Fio {
    pub fn new(job: FioJob) -> Self {
        Fio { job, job_names: Vec::new() }
    }

    /// fio's arguments after the output options.
    pub fn job_args(&self) -> Vec<String> {
        match &self.job {
            FioJob::Inline { name, options } => std::iter::once(format!("--name={name}"))
                .chain(options.iter().map(|(k, v)| format!("--{k}={v}")))
                .collect(),
            FioJob::File(path) => vec![path.display().to_string()],
        }
    }
}

fn require_fio() -> Result<()> {
    if !have_program("fio") {
        bail!("the `fio` workload needs fio, which is not installed or not on PATH (install the `fio` package)");
    }
    Ok(())
}

impl Workload for Fio {
    fn kind(&self) -> &'static str {
        "fio"
    }

    fn prepare_inputs(&mut self, _cache_dir: &std::path::Path) -> Result<()> {
        require_fio()
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        require_fio()?;
        std::fs::create_dir_all(&ctx.cache_dir).with_context(|| format!("creating {}", ctx.cache_dir.display()))?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let out_path: PathBuf = ctx.cache_dir.join(format!("fio-{}-{nanos}.json", std::process::id()));
        let mut cmd = ctx.command("fio");
        cmd.arg("--output-format=json").arg(format!("--output={}", out_path.display())).args(self.job_args());
        let outcome = ctx.execute(cmd, "fio");
        let report = std::fs::read_to_string(&out_path).unwrap_or_default();
        let _ = std::fs::remove_file(&out_path);
        let outcome = outcome?;
        // Older fio versions ignore --output for some messages; use stdout if the file is empty.
        let text = if report.trim().is_empty() { outcome.stdout_tail.as_str() } else { report.as_str() };
        let json = extract_json(text).context("reading fio's JSON report")?;
        self.job_names = job_names(&json);
        parse_report(&json)
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        // fio's default data files are `<job>.<n>.<m>` in the working directory.
        let Ok(entries) = std::fs::read_dir(&ctx.dir) else { return Ok(()) };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = self.job_names.iter().any(|job| {
                name.strip_prefix(job.as_str()).and_then(|r| r.strip_prefix('.')).is_some_and(|rest| {
                    let parts: Vec<&str> = rest.split('.').collect();
                    parts.len() == 2 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                })
            });
            if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }
}

/// The fio report object in `text`, skipping any non-JSON text before or
/// after it: the first `{` from which a JSON object with a `jobs` array parses.
pub fn extract_json(text: &str) -> Result<Value> {
    for (start, _) in text.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(value)) = stream.next() {
            if value.get("jobs").is_some_and(Value::is_array) {
                return Ok(value);
            }
        }
    }
    let preview: String = text.chars().take(400).collect();
    bail!("no fio JSON report (an object with \"jobs\") in fio's output; it begins: {preview:?}")
}

fn job_names(report: &Value) -> Vec<String> {
    report["jobs"]
        .as_array()
        .map(|jobs| jobs.iter().filter_map(|j| j["jobname"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Metrics from a fio JSON report (see the module docs for the names).
pub fn parse_report(report: &Value) -> Result<Vec<Metric>> {
    let jobs = report["jobs"].as_array().context("fio report has no `jobs` array")?;
    if jobs.is_empty() {
        bail!("fio report lists no jobs");
    }
    let mut metrics = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for job in jobs {
        let base = job["jobname"].as_str().context("fio job without `jobname`")?.to_string();
        let error = job["error"].as_i64().unwrap_or(0);
        if error != 0 {
            bail!("fio job `{base}` failed with error {error}");
        }
        let count = seen.iter().filter(|n| **n == base).count();
        seen.push(base.clone());
        let name = if count == 0 { base } else { format!("{base}.{}", count + 1) };
        let mut any = false;
        for dir in ["read", "write", "trim"] {
            let d = &job[dir];
            let ios = d["total_ios"].as_f64().unwrap_or(0.0);
            let bytes = d["io_bytes"].as_f64().unwrap_or(0.0);
            if ios <= 0.0 && bytes <= 0.0 {
                continue;
            }
            any = true;
            let num = |v: &Value, what: &str| -> Result<f64> {
                v.as_f64().with_context(|| format!("fio job `{name}` {dir}: no number for `{what}`"))
            };
            metrics.push(Metric::higher(&format!("{name}/{dir}/bw_kib_s"), "KiB/s", num(&d["bw"], "bw")?));
            metrics.push(Metric::higher(&format!("{name}/{dir}/iops"), "IOPS", num(&d["iops"], "iops")?));
            let clat = &d["clat_ns"];
            metrics.push(Metric::lower(
                &format!("{name}/{dir}/clat_mean_us"),
                "us",
                num(&clat["mean"], "clat_ns.mean")? / 1000.0,
            ));
            // Percentiles are absent when the job disables them.
            if let Some(p) = clat["percentile"].as_object() {
                for (key, label) in [("50.000000", "p50"), ("99.000000", "p99"), ("99.900000", "p99_9")] {
                    if let Some(v) = p.get(key).and_then(Value::as_f64) {
                        metrics.push(Metric::lower(&format!("{name}/{dir}/clat_{label}_us"), "us", v / 1000.0));
                    }
                }
            }
        }
        if !any {
            bail!("fio job `{name}` did no I/O");
        }
        metrics.push(Metric::lower(&format!("{name}/usr_cpu_pct"), "%", job["usr_cpu"].as_f64().unwrap_or(0.0)));
        metrics.push(Metric::lower(&format!("{name}/sys_cpu_pct"), "%", job["sys_cpu"].as_f64().unwrap_or(0.0)));
    }
    Ok(metrics)
}
