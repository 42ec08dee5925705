//! `shell1`: the UnixBench "Shell Scripts" test, with UnixBench's process
//! structure.
//!
//! UnixBench runs `looper 60 multi.sh N`: `looper` forks and execs
//! `/bin/sh multi.sh N` for every iteration and waits for it; `multi.sh`
//! starts `N` × `/bin/sh tst.sh INPUT &` and waits for them; `tst.sh` is
//!
//! ```sh
//! sort > sort.$$ < INPUT
//! od sort.$$ | sort -n -k 1 > od.$$
//! grep the sort.$$ | tee grep.$$ | wc > wc.$$
//! rm sort.$$ grep.$$ od.$$ wc.$$
//! ```
//!
//! with the `tst.sh` shell's own `$$` as the private suffix (so concurrent
//! scripts never share a file). `shell1` at concurrency `c` (`./Run shell1
//! -c c`) is `c` loopers each running `multi.sh 1`; `shell8` is one looper
//! running `multi.sh 8`. A loop therefore costs two shell start-ups (the
//! `multi.sh` and the `tst.sh` shell) besides the seven tools; running the
//! pipeline inside one long-lived shell, as fslab once did, skips them and
//! scored 1.24× UnixBench's procedure at concurrency 2.
//!
//! fslab writes its own `multi.sh` and `tst.sh` equivalents
//! ([`MULTI_SCRIPT`], [`TST_SCRIPT`]) and the input into the testbed in
//! `prepare`. INPUT is a deterministic, shell-script-looking text of 360
//! lines and about 8.5 KB ([`input_text`]), like UnixBench's `sort.src`.
//! Every process is real: the process and inode churn is the point.
//!
//! The looper is a `/bin/sh` loop ([`LOOP_SCRIPT`]) started through the
//! [`RunContext`] (so everything lands in the testbed's cgroup and honours
//! timeouts and Ctrl-C); like `looper.c` it forks and execs `/bin/sh
//! multi.sh N` per iteration and waits. It arms its own timer — a
//! background `sleep duration; kill -USR1 $$` — and stops at the top of the
//! loop once the signal arrived: the shell runs the trap only after the
//! foreground `multi.sh` finished, so no iteration is cut short and no tool
//! is killed. A looper prints how many loops it completed; its rate is
//! loops divided by its own wall time, and the metric `shell1-<c>` is the
//! sum of the loopers' rates in loops per minute (higher is better), as
//! UnixBench sums its copies' counts.

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
    const FIXED_TIME: bool = true;
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

/// `tst.sh`'s equivalent, in the testbed: one pass over the input `$1`.
pub const TST_NAME: &str = "shell1.tst.sh";

/// `multi.sh`'s equivalent, in the testbed.
pub const MULTI_NAME: &str = "shell1.multi.sh";

/// What UnixBench's `tst.sh` runs; `$1` is the input.
pub const TST_SCRIPT: &str = "sort > sort.$$ < \"$1\"\n\
od sort.$$ | sort -n -k 1 > od.$$\n\
grep the sort.$$ | tee grep.$$ | wc > wc.$$\n\
rm sort.$$ grep.$$ od.$$ wc.$$\n";

/// What UnixBench's `multi.sh` runs: `$1` concurrent `tst.sh` shells on
/// the input, then wait for all of them.
pub const MULTI_SCRIPT: &str = r#"i=0
while [ "$i" -lt "$1" ]; do
	/bin/sh ./shell1.tst.sh shell1.input &
	i=$((i+1))
done
wait
"#;

/// The looper (`looper.c`'s job). `$1` is the duration in seconds, `$2`
/// the `tst.sh` copies per iteration (`multi.sh`'s argument).
pub const LOOP_SCRIPT: &str = r#"trap 'stop=1' USR1
( sleep "$1"; kill -USR1 $$ ) &
n=0
while [ -z "$stop" ]; do
/bin/sh ./shell1.multi.sh "$2" || exit 1
n=$((n+1))
done
wait
echo "fslab-shell1-loops $n"
"#;

/// The pipeline of one iteration, for references outside fslab (tests).
pub const PIPELINE: &str = "sort > sort.$$ < shell1.input\n\
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

    /// `./Run shell1 -c copies`: `copies` loopers at once, each running
    /// `multi.sh 1`; loops per minute summed over them.
    pub fn measure(&self, ctx: &RunContext, copies: u32) -> Result<f64> {
        self.measure_form(ctx, copies, 1)
    }

    /// `copies` loopers at once, each running `multi.sh per_loop` per
    /// iteration (`per_loop` = 8 is UnixBench's `shell8`); loops per minute
    /// summed over the loopers (a loop is one `multi.sh`, as UnixBench counts).
    pub fn measure_form(&self, ctx: &RunContext, copies: u32, per_loop: u32) -> Result<f64> {
        let seconds = format!("{:.3}", self.duration.as_secs_f64());
        let per_loop = per_loop.max(1).to_string();
        let results: Vec<Result<(u64, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..copies)
                .map(|i| {
                    let (seconds, per_loop) = (seconds.clone(), per_loop.clone());
                    scope.spawn(move || -> Result<(u64, f64)> {
                        let mut cmd = ctx.shell(LOOP_SCRIPT);
                        cmd.arg("fslab-shell1").arg(&seconds).arg(&per_loop);
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
        for (name, text) in
            [(INPUT_NAME, input_text()), (MULTI_NAME, MULTI_SCRIPT.into()), (TST_NAME, TST_SCRIPT.into())]
        {
            let path = ctx.dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
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

/// Remove the input, the scripts and any per-copy files a killed copy left behind.
fn remove_leftovers(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = [INPUT_NAME, MULTI_NAME, TST_NAME].contains(&name.as_str())
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
