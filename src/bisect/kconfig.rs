//! `fslab bisect-kconfig`: which kernel config options carry a regression
//! between two variants built from the same source?
//!
//! 1. The candidates ([`candidates`]): the options either variant `set`s
//!    plus those whose final `.config` values differ in a
//!    performance-relevant group ([`group_of`]), a Kconfig choice (e.g. the
//!    squashfs decompressor) moving as one candidate. Every other
//!    difference is ignored and counted with the reason, so two
//!    distributions' configs never give thousands of candidates.
//! 2. The same ddmin and three-valued oracle as `bisect-options`
//!    ([`super::ddmin`], [`super::oracle`]): a step's kernel is good's
//!    build request with the chosen candidates added to its `set` (a choice
//!    member set clears its siblings; `olddefconfig`; every option read
//!    back), built in the one object directory of the source tree (Kbuild
//!    rebuilds only what depends on the changed options), booted and
//!    measured against good as its own stored experiment.
//! 3. A rerun answers every step from its stored experiment (same name and
//!    spec) and every kernel from the kernel cache: it builds and runs
//!    nothing new.
//!
//! The first step is good + every candidate; when that kernel's config is
//! not bad's (an ignored difference), the report says so, since the
//! regression may then hide in what was ignored.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::rc::Rc;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;

use super::ddmin::Outcome;
use super::oracle::{self, Bisection, Trial};
use super::{search, trial_line, BisectConfig, Report, Search, Status};
use crate::experiment::{Experiment, KernelSpec, VariantConfig};
use crate::inspect::kconfig_notes::{self, Area};
use crate::kernel::build::{BuildRequest, KernelBuild, SetRejected};
use crate::kernel::kconfig::{self, Kconfig};
use crate::report::Document;
use crate::runner::Observer;
use crate::store::Store;

/// The performance-relevant group of `symbol`: its area in the one list
/// `fslab kconfig` diffs use ([`kconfig_notes::classify`]: filesystems,
/// block layer and I/O schedulers, memory management, scheduler,
/// preemption and timer frequency, debugging that costs time), or None
/// for everything else.
pub fn group_of(symbol: &str) -> Option<&'static str> {
    match kconfig_notes::classify(symbol).0 {
        Area::Other => None,
        area => Some(area.title()),
    }
}

/// One candidate: an option, or a Kconfig choice moving as one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The symbol, or `choice A | B | C` (its members).
    pub name: String,
    /// `set` (a variant sets it) or its group ([`group_of`]).
    pub why: String,
    /// Its value in good's final config (for a choice: the member chosen).
    pub good: String,
    pub bad: String,
    /// What a step adds to good's `set`: symbol -> value (for a choice, bad's member `y`).
    pub set: BTreeMap<String, String>,
}

impl Candidate {
    pub fn label(&self) -> String {
        format!("{}: {} → {}", self.name, self.good, self.bad)
    }
}

/// Differences left out of the candidates, by reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ignored {
    pub reason: String,
    pub count: usize,
    /// The first few symbols.
    pub examples: Vec<String>,
}

const NOT_IN_A_GROUP: &str = "not set by either variant and not in a performance-relevant group";
const NO_PROMPT: &str = "no prompt: follows other options (a candidate moves it)";

/// The candidates between two final configs, and what was ignored.
pub fn candidates(
    k: &Kconfig,
    good_set: &BTreeMap<String, String>,
    bad_set: &BTreeMap<String, String>,
    good_cfg: &BTreeMap<String, String>,
    bad_cfg: &BTreeMap<String, String>,
) -> (Vec<Candidate>, Vec<Ignored>) {
    let value = |cfg: &BTreeMap<String, String>, s: &str| cfg.get(s).cloned().unwrap_or_else(|| "n".into());
    let mut symbols: Vec<&String> = good_cfg.keys().chain(bad_cfg.keys()).collect();
    symbols.sort();
    symbols.dedup();
    let mut singles = Vec::new();
    let mut choices: BTreeMap<usize, String> = BTreeMap::new();
    let mut ignored: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for s in symbols {
        if value(good_cfg, s) == value(bad_cfg, s) {
            continue;
        }
        let why = if good_set.contains_key(s) || bad_set.contains_key(s) {
            "set".to_string()
        } else if let Some(g) = group_of(s) {
            g.to_string()
        } else {
            ignored.entry(NOT_IN_A_GROUP).or_default().push(s.clone());
            continue;
        };
        let sym = k.symbols.get(s.as_str());
        match sym.and_then(|x| x.choice) {
            Some(c) => {
                let entry = choices.entry(c).or_insert_with(|| why.clone());
                if why == "set" {
                    *entry = why;
                }
            }
            None if sym.is_some_and(|x| x.prompt) => singles.push(Candidate {
                name: s.clone(),
                why,
                good: value(good_cfg, s),
                bad: value(bad_cfg, s),
                set: BTreeMap::from([(s.clone(), value(bad_cfg, s))]),
            }),
            None => ignored.entry(NO_PROMPT).or_default().push(s.clone()),
        }
    }
    let mut out = singles;
    for (c, why) in choices {
        let members = &k.choices[c];
        let chosen = |cfg: &BTreeMap<String, String>| members.iter().find(|m| value(cfg, m) == "y").cloned();
        let (good, bad) = (chosen(good_cfg), chosen(bad_cfg));
        let set = match &bad {
            Some(m) => BTreeMap::from([(m.clone(), "y".to_string())]),
            None => members.iter().map(|m| (m.clone(), value(bad_cfg, m))).collect(),
        };
        out.push(Candidate {
            name: format!("choice {}", members.join(" | ")),
            why,
            good: good.unwrap_or_else(|| "none".into()),
            bad: bad.unwrap_or_else(|| "none".into()),
            set,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let ignored = ignored
        .into_iter()
        .map(|(reason, symbols)| Ignored {
            reason: reason.to_string(),
            count: symbols.len(),
            examples: symbols.into_iter().take(6).collect(),
        })
        .collect();
    (out, ignored)
}

/// Good's build request with `chosen` added to its `set`; a choice
/// member's siblings that good set are dropped, so the member wins.
pub fn step_request(k: &Kconfig, good: &BuildRequest, chosen: &[&Candidate]) -> BuildRequest {
    let mut req = good.clone();
    for c in chosen {
        for (symbol, value) in &c.set {
            if value == "y" {
                for sib in k.siblings(symbol) {
                    req.set.remove(&sib);
                }
            }
            req.set.insert(symbol.clone(), value.clone());
        }
    }
    req
}

/// One step: its trial and its kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KconfigStep {
    pub trial: Trial,
    /// `make kernelrelease` and the image's cache key (empty when the config was rejected).
    pub kernel: String,
    /// Was the kernel built by this invocation (false: found in the cache)?
    pub built: bool,
    /// Wall time of its build (0 when cached).
    pub build_s: f64,
}

/// Everything `bisect-kconfig` found.
#[derive(Clone, Debug, Serialize)]
pub struct KconfigReport {
    #[serde(flatten)]
    pub search: Search,
    /// `debian:5.10 (5.10.262)`.
    pub source: String,
    pub candidates: Vec<Candidate>,
    pub ignored: Vec<Ignored>,
    /// Does good + every candidate give bad's final config exactly?
    pub all_candidates_give_bad_config: bool,
    pub culprits: Vec<Candidate>,
    /// Every step in the order asked, the confirmation first.
    pub steps: Vec<KconfigStep>,
    /// Steps answered from their stored experiment.
    pub stored_steps: usize,
    pub kernels_built: usize,
    pub build_s: f64,
    pub unresolved_steps: usize,
    /// Runs this invocation measured (stored steps' runs not counted).
    pub new_runs: usize,
    pub elapsed_s: f64,
}

/// A step's kernel, as the candidate maker saw it.
#[derive(Default)]
struct StepKernel {
    set: Vec<usize>,
    kernel: String,
    built: bool,
    build_s: f64,
    config_sha256: String,
}

fn built_kernel<'a>(v: &'a VariantConfig, flag: &str) -> Result<&'a KernelBuild> {
    match v.kernel.as_ref().and_then(|k| k.source.build()) {
        Some(b) => Ok(b),
        None => Err(crate::exit::usage(anyhow::anyhow!(
            "{flag} {}: bisect-kconfig needs variants whose kernel is built from source \
             (`kernel = {{ source = …, set = {{ … }} }}`)",
            v.name
        ))),
    }
}

/// Bisect the kernel config options between `cfg.good` and `cfg.bad`.
pub fn bisect_kconfig(
    exp: &Experiment,
    cfg: &BisectConfig,
    store: &mut Store,
    observer: &mut dyn Observer,
) -> Result<KconfigReport> {
    let started = Instant::now();
    let (good, bad) = cfg.ends(exp)?;
    let (gb, bb) = (built_kernel(&good, "--good")?.clone(), built_kernel(&bad, "--bad")?.clone());
    if gb.tree_key != bb.tree_key {
        return Err(crate::exit::usage(anyhow::anyhow!(
            "variants `{}` ({}, patches {}) and `{}` ({}, patches {}) build different sources; bisect-kconfig \
             bisects the config of one source (bisect sources by commit with `fslab bisect-commits`)",
            good.name,
            gb.source,
            gb.patches.len(),
            bad.name,
            bb.source,
            bb.patches.len()
        )));
    }
    if good.testbed != bad.testbed || good.vm != bad.vm {
        return Err(crate::exit::usage(anyhow::anyhow!(
            "variants `{}` and `{}` differ in more than their kernel config; bisect-kconfig changes only the \
             kernel (bisect testbed settings with `fslab bisect-options`)",
            good.name,
            bad.name
        )));
    }
    let Some(good_request) = gb.request.as_deref().cloned() else {
        bail!("variant `{}`: its build request was not kept", good.name)
    };
    let cache = exp.kernel_cache.clone();
    let read = |b: &KernelBuild| -> Result<BTreeMap<String, String>> {
        let path = b.config_path(&cache);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("reading the final config {}: {e}", path.display()))?;
        Ok(kconfig::parse_config(&text))
    };
    let kconfig = Kconfig::read(&gb.tree)?;
    let (cands, ignored) = candidates(&kconfig, &gb.set, &bb.set, &read(&gb)?, &read(&bb)?);
    if cands.is_empty() {
        return Err(crate::exit::usage(anyhow::anyhow!(
            "variants `{}` and `{}` have no candidate option between their final configs ({} differences \
             ignored): nothing to bisect",
            good.name,
            bad.name,
            ignored.iter().map(|i| i.count).sum::<usize>()
        )));
    }
    // A step's kernel: prepared (olddefconfig, read back), then built or found.
    let builds: Rc<RefCell<Vec<StepKernel>>> = Rc::default();
    let make: oracle::MakeCandidate = {
        let (good, cands, kconfig, cache, builds) =
            (good.clone(), cands.clone(), kconfig, cache.clone(), builds.clone());
        let good_source = good.kernel.as_ref().map(|k| k.source.clone()).expect("checked: a built kernel");
        Box::new(move |set: &[usize], name: &str| {
            let chosen: Vec<&Candidate> = set.iter().map(|&i| &cands[i]).collect();
            let req = step_request(&kconfig, &good_request, &chosen);
            let step_source = match good_source.with_request(&req, &cache) {
                Ok(s) => s,
                Err(e) => match e.downcast_ref::<SetRejected>() {
                    Some(rejected) => {
                        builds.borrow_mut().push(StepKernel { set: set.to_vec(), ..StepKernel::default() });
                        return Ok(Err(format!("Kconfig does not give this config: {rejected}")));
                    }
                    None => return Err(e),
                },
            };
            let kb = step_source.build().cloned().unwrap_or_default();
            let (built, clock) = (!kb.is_built(&cache), Instant::now());
            step_source.resolve(&cache)?;
            let kernel = format!("{} {}", kb.release, &kb.key[..12.min(kb.key.len())]);
            let (build_s, config_sha256) = (clock.elapsed().as_secs_f64(), kb.config_sha256.clone());
            builds.borrow_mut().push(StepKernel { set: set.to_vec(), kernel, built, build_s, config_sha256 });
            // The variant's name becomes a tag key (`kernel.<name>`): short,
            // lower-case, so the candidates' indices, not `name`'s labels.
            let _ = name;
            let indices: Vec<String> = set.iter().map(usize::to_string).collect();
            let mut step = format!("{}.k{}", good.name, indices.join("-"));
            if step.len() > 56 {
                step = format!("{}.k{}", good.name, &crate::kernel::sha256_str(&indices.join("-"))[..12]);
            }
            let mut v = good.clone();
            v.name = step;
            v.kernel = Some(KernelSpec { release: kb.release.clone(), source: step_source });
            Ok(Ok(v))
        })
    };
    let labels = cands.iter().map(Candidate::label).collect();
    let oracle = oracle::Oracle::new(Bisection::Kconfig, exp, cfg, good, labels, make, store, observer)?;
    let (search, trials) = search(exp, cfg, oracle, None)?;
    let mut report = KconfigReport {
        source: format!("{} ({})", gb.source, gb.version),
        culprits: search.culprit_set.iter().map(|&i| cands[i].clone()).collect(),
        search,
        candidates: cands,
        ignored,
        all_candidates_give_bad_config: builds.borrow().first().is_some_and(|b| b.config_sha256 == bb.config_sha256),
        steps: Vec::new(),
        stored_steps: 0,
        kernels_built: 0,
        build_s: 0.0,
        unresolved_steps: 0,
        new_runs: 0,
        elapsed_s: 0.0,
    };
    let builds = builds.borrow();
    report.steps = trials
        .into_iter()
        .map(|trial| {
            let b = builds.iter().find(|b| b.set == trial.set);
            KconfigStep {
                kernel: b.map(|b| b.kernel.clone()).unwrap_or_default(),
                built: b.is_some_and(|b| b.built),
                build_s: b.map_or(0.0, |b| b.build_s),
                trial,
            }
        })
        .collect();
    report.stored_steps =
        report.steps.iter().filter(|s| s.trial.note.as_deref().is_some_and(|n| n.starts_with("stored"))).count();
    report.kernels_built = report.steps.iter().filter(|s| s.built).count();
    report.build_s = report.steps.iter().map(|s| s.build_s).sum();
    report.unresolved_steps = report.steps.iter().filter(|s| s.trial.outcome == Outcome::Unresolved).count();
    report.new_runs = report.steps.iter().filter(|s| s.trial.note.is_none()).map(|s| s.trial.runs()).sum();
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

impl Report for KconfigReport {
    fn search(&self) -> &Search {
        &self.search
    }
}

impl Document for KconfigReport {
    fn what(&self) -> &'static str {
        "a bisect result"
    }
    fn text(&self) -> String {
        render_text(self)
    }
}

/// The report for a terminal.
fn render_text(r: &KconfigReport) -> String {
    let s = &r.search;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bisect-kconfig {}: `{}` (good) vs `{}` (bad) on {}, kernel {}",
        s.experiment, s.good, s.bad, s.metric, r.source
    );
    let _ = writeln!(out, "{} candidates:", r.candidates.len());
    for (i, c) in r.candidates.iter().enumerate() {
        let _ = writeln!(out, "  [{i}] {}  ({})", c.label(), c.why);
    }
    let ignored: usize = r.ignored.iter().map(|i| i.count).sum();
    let _ = writeln!(out, "{ignored} other differences ignored:");
    for i in &r.ignored {
        let _ = writeln!(out, "  {} {} (e.g. {})", i.count, i.reason, i.examples.join(", "));
    }
    if !r.all_candidates_give_bad_config {
        let _ = writeln!(
            out,
            "note: `{}` + every candidate is not `{}`'s config exactly (ignored differences remain)",
            s.good, s.bad
        );
    }
    match s.status {
        Status::NotReproduced => {
            let _ = writeln!(
                out,
                "\nno regression to bisect: `{}` + every candidate vs `{}` on {} is {} (experiment {}, {} runs)",
                s.good,
                s.good,
                s.metric,
                s.confirmation_verdict(),
                s.confirmation.experiment_id,
                s.confirmation.runs()
            );
        }
        Status::Found => s.render_found(
            &mut out,
            "smallest option set that carries the regression",
            r.culprits.iter().map(Candidate::label),
        ),
    }
    let _ = writeln!(out, "\nsteps (options added to good; verdict, effect [CI], runs; kernel):");
    for (n, step) in r.steps.iter().enumerate() {
        let what = if n == 0 { "confirm".to_string() } else { format!("{:?}", step.trial.outcome).to_lowercase() };
        let kernel = match (&step.trial.note, step.kernel.is_empty()) {
            (Some(note), true) => note.clone(),
            (_, true) => String::new(),
            (note, false) => format!(
                "kernel {}, {}{}",
                step.kernel,
                if step.built { format!("built in {:.0} s", step.build_s) } else { "cached".to_string() },
                note.as_ref().map(|n| format!(", {n}")).unwrap_or_default()
            ),
        };
        let _ = writeln!(out, "  {what:<10} {}\n             {kernel}", trial_line(&step.trial));
    }
    let _ = writeln!(
        out,
        "\n{} steps ({} answered by ddmin's cache, {} from stored experiments, {} unresolved), {} kernels built in \
         {:.0} s, {} new runs, {:.0} s",
        s.oracle_calls,
        s.cache_hits,
        r.stored_steps,
        r.unresolved_steps,
        r.kernels_built,
        r.build_s,
        r.new_runs,
        r.elapsed_s
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn kconfig() -> Kconfig {
        let mut k = Kconfig::default();
        k.parse(
            "config FSLAB_TEST_READ_WORK\n\tbool \"spin\"\n\
             config PRINTK_TIME\n\tbool \"time\"\n\
             config LOCALVERSION_AUTO\n\tbool \"auto\"\n\
             config EXT4_FS\n\ttristate \"ext4\"\n\
             config SQUASHFS_XATTR\n\tbool \"x\"\n\
             config SLUB_CPU_PARTIAL\n\tbool\n\
             choice\n\tprompt \"file\"\n\
             config SQUASHFS_FILE_CACHE\n\tbool \"cache\"\n\
             config SQUASHFS_FILE_DIRECT\n\tbool \"direct\"\n\
             endchoice\n",
        );
        k
    }

    #[test]
    fn candidates_are_set_options_and_grouped_differences_with_a_choice_as_one() {
        let k = kconfig();
        let good_cfg = map(&[
            ("SQUASHFS_FILE_CACHE", "y"),
            ("SQUASHFS_FILE_DIRECT", "n"),
            ("PRINTK_TIME", "n"),
            ("EXT4_FS", "y"),
            ("LOCALVERSION_AUTO", "n"),
        ]);
        let bad_cfg = map(&[
            ("SQUASHFS_FILE_CACHE", "n"),
            ("SQUASHFS_FILE_DIRECT", "y"),
            ("PRINTK_TIME", "y"),
            ("FSLAB_TEST_READ_WORK", "y"),
            ("EXT4_FS", "y"),
            ("LOCALVERSION_AUTO", "y"),
            ("SQUASHFS_XATTR", "y"),
            ("SLUB_CPU_PARTIAL", "y"),
        ]);
        let bad_set = map(&[("FSLAB_TEST_READ_WORK", "y"), ("PRINTK_TIME", "y"), ("SQUASHFS_FILE_DIRECT", "y")]);
        let (c, ignored) = candidates(&k, &BTreeMap::new(), &bad_set, &good_cfg, &bad_cfg);
        let labels: Vec<String> = c.iter().map(|c| format!("{} ({})", c.label(), c.why)).collect();
        assert_eq!(
            labels,
            [
                "FSLAB_TEST_READ_WORK: n → y (set)",
                "PRINTK_TIME: n → y (set)",
                "SQUASHFS_XATTR: n → y (Filesystems)",
                "choice SQUASHFS_FILE_CACHE | SQUASHFS_FILE_DIRECT: SQUASHFS_FILE_CACHE → SQUASHFS_FILE_DIRECT (set)",
            ]
        );
        assert_eq!(c[3].set, map(&[("SQUASHFS_FILE_DIRECT", "y")]));
        // LOCALVERSION_AUTO is in no group; SLUB_CPU_PARTIAL has no prompt.
        let reasons: Vec<(String, usize)> = ignored.iter().map(|i| (i.reason.clone(), i.count)).collect();
        assert_eq!(reasons, [(NO_PROMPT.to_string(), 1), (NOT_IN_A_GROUP.to_string(), 1)]);
    }

    #[test]
    fn a_step_drops_the_choice_siblings_good_set() {
        let k = kconfig();
        let good = BuildRequest {
            config: crate::kernel::build::ConfigBase::Minimal,
            set: map(&[("SQUASHFS_FILE_CACHE", "y"), ("EXT4_FS", "y")]),
        };
        let choice = Candidate {
            name: "choice".into(),
            why: "set".into(),
            good: "SQUASHFS_FILE_CACHE".into(),
            bad: "SQUASHFS_FILE_DIRECT".into(),
            set: map(&[("SQUASHFS_FILE_DIRECT", "y")]),
        };
        let req = step_request(&k, &good, &[&choice]);
        assert_eq!(req.set, map(&[("EXT4_FS", "y"), ("SQUASHFS_FILE_DIRECT", "y")]));
    }

    #[test]
    fn groups_match_names_and_prefixes() {
        assert_eq!(group_of("PREEMPT_NONE"), Some("Scheduler and preemption"));
        assert_eq!(group_of("HZ_250"), Some("Scheduler and preemption"));
        assert_eq!(group_of("SQUASHFS_DECOMP_SINGLE"), Some("Filesystems"));
        assert_eq!(group_of("MQ_IOSCHED_DEADLINE"), Some("Block layer"));
        assert_eq!(group_of("TRANSPARENT_HUGEPAGE"), Some("Memory management"));
        assert_eq!(group_of("KASAN"), Some("Debugging that costs performance"));
        assert_eq!(group_of("PRINTK_TIME"), None);
    }
}
