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

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toml::Spanned;

use super::{BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::sys::exec::have_program;

/// fio options fslab sets itself (or that would send the output elsewhere).
const RESERVED: &[&str] = &["output", "output-format", "output_format"];

/// Where a `fio` workload's job comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FioJob {
    /// One job: its name and `option=value` pairs, passed as `--option=value`.
    Inline { name: String, options: Vec<(String, String)> },
    /// A fio job file (absolute, or relative to the experiment file).
    File(PathBuf),
}

/// `fio` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FioKeys {
    job: Option<Spanned<BTreeMap<String, toml::Value>>>,
    jobfile: Option<Spanned<String>>,
}

/// fio with an inline job or a job file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FioParams {
    pub job: FioJob,
}

impl Kind for FioParams {
    const NAME: &'static str = "fio";
    const ABOUT: &'static str = "`job = { rw = \"randwrite\", bs = \"4k\", … }` or `jobfile`";
    const METRICS: &'static str = "bandwidth, IOPS, clat mean/p50/p99/p99.9, CPU per job and direction";
    type Keys = FioKeys;

    fn resolve(keys: FioKeys, src: &Source, at: Range<usize>) -> Result<Self> {
        let job = match (&keys.job, &keys.jobfile) {
            (Some(j), Some(_)) => return Err(src.err(j.span(), "job", "give either `job` or `jobfile`, not both")),
            (None, None) => {
                let msg = "a `fio` workload needs `job = { rw = \"randwrite\", bs = \"4k\", size = \"64M\" }` or `jobfile = \"path\"`";
                return Err(src.err(at, "job", msg));
            }
            (None, Some(f)) => {
                let path = src.resolve_path(f.get_ref());
                if !path.is_file() {
                    return Err(src.err(f.span(), "jobfile", format!("{} is not a readable file", path.display())));
                }
                FioJob::File(path)
            }
            (Some(j), None) => inline_job(src, j)?,
        };
        Ok(FioParams { job })
    }

    fn quick(&mut self) {
        if let FioJob::Inline { options, .. } = &mut self.job {
            for (key, value) in options.iter_mut() {
                if key == "runtime" {
                    *value = "3".to_string();
                }
            }
        }
    }

    /// Bandwidth, IOPS and latencies decide; CPU use is a side metric.
    fn is_decisive(&self, metric: &str) -> bool {
        !metric.ends_with("_cpu_pct")
    }

    fn build(&self, _env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Fio::new(self.job.clone()))
    }
}

/// `job = { … }`: option names as fio spells them, values as one line each.
fn inline_job(src: &Source, j: &Spanned<BTreeMap<String, toml::Value>>) -> Result<FioJob> {
    let mut name = "job".to_string();
    let mut options = Vec::new();
    for (key, value) in j.get_ref() {
        let full = format!("job.{key}");
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(src.err(j.span(), &full, "is not a fio option name"));
        }
        if RESERVED.contains(&key.as_str()) {
            return Err(src.err(j.span(), &full, "is set by fslab (JSON output on stdout)"));
        }
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => u8::from(*b).to_string(),
            _ => return Err(src.err(j.span(), &full, "must be a string, number or boolean")),
        };
        if text.contains(['\n', '\r', '\0']) {
            return Err(src.err(j.span(), &full, "must be a single line"));
        }
        if key == "name" {
            if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
                return Err(src.err(j.span(), &full, "must be a word of letters, digits, `_`, `-` or `.`"));
            }
            // The job's name starts its metrics' names (`NAME/read/bw_kib_s`).
            crate::metric::check_user_metric_name(&text).map_err(|why| src.err(j.span(), &full, why))?;
            name = text;
        } else {
            options.push((key.clone(), text));
        }
    }
    Ok(FioJob::Inline { name, options })
}

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
        crate::metric::check_user_metric_name(&base).map_err(|why| anyhow::anyhow!("fio job name: {why}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_named_like_an_evidence_namespace_is_refused() {
        let report = serde_json::json!({"jobs": [{"jobname": "disk", "error": 0,
            "read": {"total_ios": 1, "bw": 1.0, "iops": 1.0, "clat_ns": {"mean": 1.0}}}]});
        let e = parse_report(&report).unwrap_err().to_string();
        assert!(e.contains("`disk` would be an evidence metric"), "{e}");
    }
}
