//! `shell1`: the UnixBench "Shell Scripts" test.
//!
//! One loop iteration is what UnixBench's `tst.sh` does, run by `/bin/sh`
//! in the testbed directory with the shell's `$$` as the private suffix of
//! each looping copy (so concurrent copies never share a file):
//!
//! ```sh
//! sort < INPUT > sort.$$
//! od sort.$$ | sort -n -k 1 > od.$$
//! grep the sort.$$ | tee grep.$$ | wc > wc.$$
//! rm sort.$$ grep.$$ od.$$ wc.$$
//! ```
//!
//! INPUT is a deterministic, shell-script-looking text of 360 lines and
//! about 8.5 KB that fslab generates ([`input_text`]) and writes into the
//! testbed in `prepare`. Every process is real (fork/exec of the real sort,
//! od, grep, tee, wc, rm): the process and inode churn is the point.
//!
//! For each concurrency level `c`, `c` copies of one `/bin/sh` loop are
//! started at once through the [`RunContext`] (so they land in the testbed's
//! cgroup and honour timeouts and Ctrl-C). Each copy arms its own timer — a
//! background `sleep duration; kill -USR1 $$` — and stops at the top of the
//! loop once the signal arrived: the shell runs the trap only after the
//! foreground pipeline finished, so no iteration is cut short and no tool is
//! killed. A copy prints how many loops it completed; its rate is loops
//! divided by its own wall time, and the metric `shell1-<c>` is the sum of
//! the copies' rates in loops per minute (higher is better).

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{check, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::units::Seconds;

/// Most looping copies a level may run.
pub const MAX_CONCURRENCY: i64 = 256;

/// Longest measured duration a `--quick` run keeps.
const QUICK_DURATION: Duration = Duration::from_secs(3);

/// `shell1` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shell1Keys {
    concurrency: Option<Spanned<Vec<i64>>>,
    duration: Option<Spanned<Seconds>>,
}

/// UnixBench "Shell Scripts": `concurrency` looping copies for `duration`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shell1Params {
    pub concurrency: Vec<u32>,
    pub duration: Duration,
}

impl Kind for Shell1Params {
    const NAME: &'static str = "shell1";
    const ABOUT: &'static str = "UnixBench Shell Scripts loop, `concurrency = [1, 2, 4, 8]`, `duration`";
    const METRICS: &'static str = "`shell1-N` (loops/min)";
    type Keys = Shell1Keys;

    fn resolve(keys: Shell1Keys, src: &Source, _at: Range<usize>) -> Result<Self> {
        Ok(Shell1Params {
            concurrency: check::levels(
                src,
                keys.concurrency.as_ref(),
                "concurrency",
                &[1],
                "[1, 2, 4, 8]",
                MAX_CONCURRENCY,
            )?,
            duration: check::duration(src, keys.duration.as_ref(), Duration::from_secs(60))?,
        })
    }

    fn quick(&mut self) {
        self.concurrency.truncate(2);
        self.duration = self.duration.min(QUICK_DURATION);
    }

    fn build(&self, _env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Shell1::new(self.concurrency.clone(), self.duration))
    }
}

/// Name of the generated input inside the testbed.
pub const INPUT_NAME: &str = "shell1.input";

/// The loop one copy runs. `$1` is the duration in seconds, `$2` the input.
pub const LOOP_SCRIPT: &str = r#"trap 'stop=1' USR1
( sleep "$1"; kill -USR1 $$ ) &
n=0
while [ -z "$stop" ]; do
sort < "$2" > sort.$$
od sort.$$ | sort -n -k 1 > od.$$
grep the sort.$$ | tee grep.$$ | wc > wc.$$
rm sort.$$ grep.$$ od.$$ wc.$$
n=$((n+1))
done
wait
echo "fslab-shell1-loops $n"
"#;

/// The pipeline of one iteration, for references outside fslab (tests).
pub const PIPELINE: &str = "sort < shell1.input > sort.$$\n\
od sort.$$ | sort -n -k 1 > od.$$\n\
grep the sort.$$ | tee grep.$$ | wc > wc.$$\n\
rm sort.$$ grep.$$ od.$$ wc.$$\n";

pub struct Shell1 {
    pub concurrency: Vec<u32>,
    pub duration: Duration,
}

impl Shell1 {
    pub fn new(concurrency: Vec<u32>, duration: Duration) -> Self {
        Shell1 { concurrency, duration }
    }

    /// Run `copies` looping copies at once; loops per minute summed over them.
    pub fn measure(&self, ctx: &RunContext, copies: u32) -> Result<f64> {
        let seconds = format!("{:.3}", self.duration.as_secs_f64());
        let results: Vec<Result<(u64, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..copies)
                .map(|i| {
                    let seconds = seconds.clone();
                    scope.spawn(move || -> Result<(u64, f64)> {
                        let mut cmd = ctx.shell(LOOP_SCRIPT);
                        cmd.arg("fslab-shell1").arg(&seconds).arg(INPUT_NAME);
                        let what = format!("shell1 copy {} of {copies}", i + 1);
                        let outcome = ctx.execute(cmd, &what)?;
                        let loops = parse_loops(&outcome.stdout_tail)
                            .with_context(|| format!("{what} printed no loop count: {:?}", outcome.stdout_tail))?;
                        Ok((loops, outcome.wall_s))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("shell1 copy thread panicked"))))
                .collect()
        });
        let mut lpm = 0.0;
        for r in results {
            let (loops, wall_s) = r?;
            if wall_s <= 0.0 {
                bail!("shell1 copy reported no wall time");
            }
            lpm += loops as f64 * 60.0 / wall_s;
        }
        Ok(lpm)
    }
}

/// The count a copy prints last.
pub fn parse_loops(stdout: &str) -> Option<u64> {
    stdout.lines().rev().find_map(|l| l.strip_prefix("fslab-shell1-loops ")).and_then(|n| n.trim().parse().ok())
}

/// Deterministic shell-script-looking text: 360 lines, about 8.5 KB, with
/// plenty of lines holding the word `the` for the `grep the` stage.
pub fn input_text() -> String {
    const WORDS: &[&str] = &[
        "the", "file", "dir", "list", "path", "tmp", "user", "name", "value", "count", "log", "conf", "data", "line",
        "input", "output", "status", "mode", "host", "opt", "src", "dest", "the", "lib", "bin", "size",
    ];
    const VARS: &[&str] =
        &["FILE", "DIR", "LIST", "TMP", "USER", "NAME", "COUNT", "LOG", "MODE", "HOST", "SRC", "DEST"];
    // A fixed seed, so every fslab build writes the same bytes.
    let mut rng = super::content::rng("fslab-shell1-input", 0, b"");
    let mut next = move |n: usize| -> usize { (rand_core::Rng::next_u64(&mut rng) % n as u64) as usize };
    let mut out = String::from("#!/bin/sh\n# generated by fslab: input of the shell1 workload\n");
    let mut lines = 2;
    while lines < 360 {
        let w = |i: usize| WORDS[i];
        let v = VARS[next(VARS.len())];
        let (a, b, c) = (w(next(WORDS.len())), w(next(WORDS.len())), w(next(WORDS.len())));
        let n = next(1000);
        let block = match next(9) {
            0 => format!("# check that the {a} and the {b} exist before the {c} step\n"),
            1 => format!("{v}=\"${{{v}:-/var/{a}/{b}}}\"\n"),
            2 => format!("if [ -f \"${v}\" ]; then\n\techo \"the {a} is {b}, see the {c}\"\nfi\n"),
            3 => format!("for f in {a} {b} {c}; do\n\tcp \"$f\" \"$DEST/$f.{n}\"\ndone\n"),
            4 => format!("echo \"{a}: $(wc -l < ${v})\" >> $LOG\n"),
            5 => format!("case \"$1\" in\n{a}) {v}={n} ;;\n*) {v}={b} ;;\nesac\n"),
            6 => format!("test -d \"${v}\" || mkdir -p \"${v}/{c}\"\n"),
            7 => format!("grep -v '^#' \"${v}\" | sort -u > \"$TMP/{a}.{n}\"\n"),
            _ => format!("{a}_{b}() {{\n\t# the {c} helper\n\treturn {}\n}}\n", n % 4),
        };
        let block_lines = block.matches('\n').count();
        if lines + block_lines > 360 {
            continue;
        }
        lines += block_lines;
        out.push_str(&block);
    }
    out
}

impl Workload for Shell1 {
    fn kind(&self) -> &'static str {
        "shell1"
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        let path = ctx.dir.join(INPUT_NAME);
        std::fs::write(&path, input_text()).with_context(|| format!("writing {}", path.display()))
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let mut metrics = Vec::new();
        for &copies in &self.concurrency {
            let lpm = self.measure(ctx, copies)?;
            metrics.push(Metric::higher(&format!("shell1-{copies}"), "lpm", lpm));
        }
        Ok(metrics)
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        remove_leftovers(&ctx.dir)
    }
}

/// Remove the input and any per-copy files a killed copy left behind.
fn remove_leftovers(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name == INPUT_NAME
            || ["sort.", "od.", "grep.", "wc."].iter().any(|p| {
                name.strip_prefix(p)
                    .is_some_and(|suffix| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
            });
        if ours && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path()).with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}
