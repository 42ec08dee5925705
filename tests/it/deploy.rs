//! The recipes under `deploy/` parse (shell syntax by `bash -n`, YAML by
//! serde_norway) and the `fslab run` line in each, expanded by bash as the
//! engine would for every shard index, is accepted by the real binary
//! (`--dry-run`: the whole command line and the experiment file are checked,
//! nothing runs), names the right shard, and every shard agrees on the
//! campaign id.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value;

use crate::common;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `fslab run …` command lines of a script (continuation lines joined;
/// whatever precedes `fslab run`, such as `sudo …` or `exec`, dropped).
fn fslab_lines(script: &str) -> Vec<String> {
    let joined = script.replace("\\\n", " ");
    joined.lines().filter_map(|l| l.find("fslab run").map(|i| l[i..].trim().to_string())).collect()
}

fn bash_syntax_ok(what: &str, script: &str) {
    let out = Command::new("bash").args(["-n", "-c", script]).output().unwrap();
    assert!(out.status.success(), "{what}: bash -n: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `line` with bash in `env` from `cwd`, where `fslab` is the binary
/// under test with `--dry-run` added and `sudo OPTIONS…` runs the rest as
/// is; returns the campaign id it reports for shard `k/n`.
fn accepted(what: &str, line: &str, env: &[(&str, String)], cwd: &Path, k: usize, n: usize) -> String {
    let mut c = Command::new("bash");
    c.args([
        "-c",
        r#"set -eu
        fslab() { "$FSLAB_BIN" "$@" --dry-run; }
        sudo() { while [ "${1#-}" != "$1" ]; do shift; done; "$@"; }
        eval "$FSLAB_LINE""#,
    ])
    .current_dir(cwd)
    .env("FSLAB_BIN", common::fslab_bin())
    .env("FSLAB_LINE", line);
    for var in ["GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "SLURM_ARRAY_JOB_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID"] {
        c.env_remove(var);
    }
    c.envs(env.iter().map(|(k, v)| (k, v)));
    let out = c.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what}: `{line}` refused by fslab for shard {k}/{n}:\n{stderr}");
    let needle = format!("shard {k}/{n} of campaign ");
    let at = stdout.find(&needle).unwrap_or_else(|| panic!("{what}: no `{needle}` in the dry run:\n{stdout}"));
    stdout[at + needle.len()..].split(':').next().unwrap().to_string()
}

fn all_agree(what: &str, ids: Vec<String>) {
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{what}: shards disagree on the campaign: {ids:?}");
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

#[test]
fn slurm_array_script() {
    let path = repo().join("deploy/slurm/fslab-array.sh");
    let script = std::fs::read_to_string(&path).unwrap();
    bash_syntax_ok("slurm", &script);
    let array = script.lines().find_map(|l| l.strip_prefix("#SBATCH --array=")).expect("an #SBATCH --array line");
    let (lo, hi) = array.split_once('-').unwrap();
    let (lo, hi): (usize, usize) = (lo.parse().unwrap(), hi.parse().unwrap());
    let n = hi - lo + 1;
    assert_eq!(fslab_lines(&script).len(), 1, "{script}");
    // The whole script, as Slurm runs it on each task's node.
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "postgresql://fslab:secret@db.example/fslab\n").unwrap();
    let mut ids = Vec::new();
    for task in lo..=hi {
        let shard = task - lo + 1;
        let env = [
            ("SLURM_ARRAY_TASK_ID", task.to_string()),
            ("SLURM_ARRAY_TASK_MIN", lo.to_string()),
            ("SLURM_ARRAY_TASK_COUNT", n.to_string()),
            ("SLURM_ARRAY_JOB_ID", "4242".into()),
            ("SLURM_JOB_ID", format!("{}", 4243 + task)),
            ("FSLAB_DB_FILE", secret.path().display().to_string()),
        ];
        ids.push(accepted("slurm", &format!("source {}", path.display()), &env, &repo(), shard, n));
    }
    all_agree("slurm", ids);
}

#[test]
fn kubernetes_indexed_job() {
    let docs = yaml_docs(&repo().join("deploy/kubernetes/fslab-indexed-job.yaml"));
    let config = docs.iter().find(|d| d["kind"] == "ConfigMap").expect("a ConfigMap with the experiment");
    let job = docs.iter().find(|d| d["kind"] == "Job").expect("a Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let n = job["spec"]["completions"].as_u64().unwrap() as usize;
    let pod = &job["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["privileged"], true);
    let env = container["env"].as_sequence().unwrap();
    let db = env.iter().find(|e| e["name"] == "FSLAB_DB").expect("FSLAB_DB in env");
    assert!(db["valueFrom"]["secretKeyRef"]["key"].is_string(), "FSLAB_DB comes from a secret");
    let command: Vec<&str> = container["command"].as_sequence().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    bash_syntax_ok("kubernetes", command[2]);

    // The experiment file the ConfigMap mounts, where the pod would see it.
    let mount = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| {
            pod["volumes"].as_sequence().unwrap().iter().any(|v| v["name"] == m["name"] && v["configMap"].is_mapping())
        })
        .expect("the ConfigMap is mounted");
    let mount_path = mount["mountPath"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in config["data"].as_mapping().unwrap() {
        std::fs::write(dir.path().join(name.as_str().unwrap()), text.as_str().unwrap()).unwrap();
    }
    let lines = fslab_lines(command[2]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = lines[0].replace(&format!("{mount_path}/"), &format!("{}/", dir.path().display()));
    let mut ids = Vec::new();
    for index in 0..n {
        let env = [
            ("JOB_COMPLETION_INDEX", index.to_string()),
            ("FSLAB_CAMPAIGN_RUN", "0b7f6c3e-job-uid".into()),
            ("FSLAB_DB", "postgresql://fslab:secret@db.example/fslab".into()),
        ];
        ids.push(accepted("kubernetes", &line, &env, dir.path(), index + 1, n));
    }
    all_agree("kubernetes", ids);
}

/// `${{ expr }}` in a GitHub Actions string, replaced from `values`; an
/// expression the test does not know fails it.
fn github_expand(text: &str, values: &[(&str, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").expect("unclosed ${{") + start;
        let expr = rest[start + 3..end].trim();
        let value = values.iter().find(|(k, _)| *k == expr).unwrap_or_else(|| panic!("unknown expression {expr}"));
        out.push_str(&rest[..start]);
        out.push_str(&value.1);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

#[test]
fn github_actions_matrix() {
    let docs = yaml_docs(&repo().join("deploy/github-actions/fslab-fleet.yml"));
    let job = &docs[0]["jobs"]["shard"];
    assert_eq!(job["env"]["FSLAB_DB"], "${{ secrets.FSLAB_DB }}", "FSLAB_DB comes from a secret");
    let shards: Vec<usize> = job["strategy"]["matrix"]["shard"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let n = shards.len();
    assert_eq!(shards, (1..=n).collect::<Vec<_>>());
    let steps = job["steps"].as_sequence().unwrap();
    let run =
        steps.iter().filter_map(|s| s["run"].as_str()).find(|r| r.contains("fslab run")).expect("a fslab run step");
    let mut ids = Vec::new();
    for k in shards {
        let values = [
            ("matrix.shard", k.to_string()),
            ("strategy.job-total", n.to_string()),
            ("github.run_id", "987654".into()),
        ];
        let script = github_expand(run, &values);
        bash_syntax_ok("github", &script);
        let lines = fslab_lines(&script);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let env = [
            ("FSLAB_DB", "postgresql://fslab:secret@db.example/fslab".into()),
            ("RUNNER_TEMP", "/var/tmp/runner".into()),
        ];
        ids.push(accepted("github", &lines[0], &env, &repo(), k, n));
    }
    all_agree("github", ids);
}
