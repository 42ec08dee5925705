//! Checks that turn an experiment file into an [`Experiment`]. Every error
//! names the file, line, column and key.
//!
//! The file is parsed once into a span-keeping table ([`crate::keys`]);
//! each owner takes its keys: the top level here, a variant's common keys
//! here and its image keys by the filesystem kind, a workload's common keys
//! here and the rest by the workload kind.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use toml::Spanned;

use super::spec::{Repetitions, TopKeys, VariantKeys, WorkloadKeys, MAX_REPETITIONS};
use super::{Experiment, VariantConfig, WorkloadConfig, DEFAULT_WORKDIR};
use crate::keys::{self, Source, Table};
use crate::testbed::filesystem::{self as fs, FsKind, Medium};
use crate::testbed::workdirs::system_dir;
use crate::testbed::{config::DEFAULT_SIZE, TestbedConfig};
use crate::workload::{self, WorkloadParams};

const MIN_INTERVAL: Duration = Duration::from_millis(100);
const SCHEDULERS: &[&str] = &["none", "mq-deadline", "bfq", "kyber"];
/// Most variants and workloads one experiment may have.
const MAX_VARIANTS: usize = 64;
const MAX_WORKLOADS: usize = 64;

pub(super) fn resolve(src: &Source, overrides: &super::Overrides) -> Result<Experiment> {
    let mut top = Table::parse_document(src)?;
    let defaults = top.take_table(src, "defaults")?;
    let variant_tables = top.take_tables(src, "variant")?;
    let workload_tables = top.take_tables(src, "workload")?;
    let workdir_span = top.key_span("workdir");
    let file: TopKeys = top.parse(src)?;
    let mut system_paths = Vec::new();
    let workdir = match &overrides.workdir {
        Some(dir) => dir.clone(),
        None => PathBuf::from(file.workdir.clone().unwrap_or_else(|| DEFAULT_WORKDIR.to_string())),
    };
    // Archive kernels (`debian:…`) are looked up in the kernel cache's
    // lists, built kernels prepared in it: the one the run will use.
    let kernel_cache = crate::kernel::cache_dir(overrides.kernel_cache.as_deref(), &workdir);

    let Some(name) = &file.name else {
        return Err(src.err(0..0, "name", "the experiment needs a `name = \"…\"`"));
    };
    let name_text = name.get_ref().trim().to_string();
    if name_text.is_empty() {
        return Err(src.err(name.span(), "name", "must not be empty"));
    }
    let repetitions = match &file.repetitions {
        None => Repetitions::Fixed(5),
        Some(r) => check_repetitions(src, r)?,
    };
    let theta = fraction(src, file.theta.as_ref(), "theta", 0.02)?;
    let alpha = fraction(src, file.alpha.as_ref(), "alpha", 0.05)?;
    let sample_interval = match &file.sample_interval {
        None => Duration::from_secs(1),
        Some(s) if s.get_ref().0 < MIN_INTERVAL => {
            return Err(src.err(s.span(), "sample_interval", "must be at least 100ms"));
        }
        Some(s) => s.get_ref().0,
    };

    let defaults = match defaults {
        Some(d) => {
            if let Some(span) = d.key_span("name") {
                return Err(src.err(span, "defaults.name", "a name belongs in [[variant]], not [defaults]"));
            }
            d
        }
        None => Table::empty(0..0),
    };
    if variant_tables.is_empty() {
        return Err(src.err(0..0, "variant", "at least one [[variant]] is needed"));
    }
    if variant_tables.len() > MAX_VARIANTS {
        return Err(src.err(variant_tables[MAX_VARIANTS].span.clone(), "variant", format!("at most {MAX_VARIANTS}")));
    }
    let mut variants: Vec<VariantConfig> = Vec::new();
    let mut device_spans: Vec<Option<Span>> = Vec::new();
    for table in variant_tables {
        let (variant, name_span, fs_span, device_span) = resolve_variant(src, table, &defaults, &kernel_cache)?;
        device_spans.push(device_span);
        if let FsKind::Dir(path) = &variant.testbed.fs {
            if let Some(why) = system_dir(path) {
                let msg = format!("{why}: a `dir:` testbed's runs create and delete files there");
                system_paths.push(("fs".to_string(), format!("{:#}", src.err(fs_span, "fs", msg))));
            }
        }
        if variants.iter().any(|v| v.name == variant.name) {
            return Err(src.err(name_span, "name", format!("variant `{}` is defined twice", variant.name)));
        }
        variants.push(variant);
    }
    if workload_tables.is_empty() {
        return Err(src.err(0..0, "workload", "at least one [[workload]] is needed"));
    }
    if workload_tables.len() > MAX_WORKLOADS {
        return Err(src.err(
            workload_tables[MAX_WORKLOADS].span.clone(),
            "workload",
            format!("at most {MAX_WORKLOADS}"),
        ));
    }
    let mut workloads: Vec<WorkloadConfig> = Vec::new();
    let mut kind_spans = Vec::new();
    for table in workload_tables {
        let (mut workload, named, kind_span) = resolve_workload(src, table)?;
        kind_spans.push(kind_span);
        if workloads.iter().any(|w| w.label == workload.label) {
            if let Some(span) = named {
                return Err(src.err(span, "name", format!("workload `{}` is defined twice", workload.label)));
            }
            // Unnamed repeats of a kind get a numbered label.
            let mut i = 2;
            while workloads.iter().any(|w| w.label == format!("{}-{i}", workload.label)) {
                i += 1;
            }
            workload.label = format!("{}-{i}", workload.label);
        }
        workloads.push(workload);
    }
    check_read_only_workloads(src, &variants, &workloads, &kind_spans)?;
    check_media_speed(src, &variants, &device_spans, &workloads)?;
    let baseline = match &file.baseline {
        None => variants[0].name.clone(),
        Some(b) => {
            if !variants.iter().any(|v| &v.name == b.get_ref()) {
                return Err(src.err(b.span(), "baseline", format!("no variant is named `{}`", b.get_ref())));
            }
            b.get_ref().clone()
        }
    };
    // (An overriding `--workdir` is checked by the runner, where it is known.)
    if let (Some(span), Some(why), None) = (workdir_span, system_dir(&workdir), &overrides.workdir) {
        let msg = format!("{why}: fslab creates testbeds and its input cache there");
        system_paths.push(("workdir".to_string(), format!("{:#}", src.err(span, "workdir", msg))));
    }
    Ok(Experiment {
        name: name_text,
        description: file.description.clone(),
        source_path: None,
        source_text: String::new(),
        spec_hash: String::new(),
        repetitions,
        order: file.order.unwrap_or_default(),
        seed: file.seed.unwrap_or(1),
        workdir,
        kernel_cache,
        baseline,
        theta,
        alpha,
        sample_interval,
        variants,
        workloads,
        system_paths,
    })
}

fn check_repetitions(src: &Source, r: &Spanned<Repetitions>) -> Result<Repetitions> {
    let bad = |msg: String| Err(src.err(r.span(), "repetitions", msg));
    match *r.get_ref() {
        Repetitions::Fixed(0) => bad("must be at least 1".to_string()),
        Repetitions::Fixed(n) if n > MAX_REPETITIONS => bad(format!("{n} is more than {MAX_REPETITIONS}")),
        Repetitions::Adaptive { min, max } if min < 2 || max < min => bad("needs 2 <= min <= max".to_string()),
        Repetitions::Adaptive { max, .. } if max > MAX_REPETITIONS => {
            bad(format!("max = {max} is more than {MAX_REPETITIONS}"))
        }
        ok => Ok(ok),
    }
}

fn fraction(src: &Source, value: Option<&Spanned<f64>>, key: &str, default: f64) -> Result<f64> {
    match value {
        None => Ok(default),
        Some(v) if *v.get_ref() > 0.0 && *v.get_ref() < 1.0 => Ok(*v.get_ref()),
        Some(v) => Err(src.err(v.span(), key, "must be a fraction between 0 and 1 (e.g. 0.02 for 2%)")),
    }
}

/// A variant, the span of its name, of its `fs` and of its `device`.
fn resolve_variant<'a>(
    src: &Source,
    mut table: Table<'a>,
    defaults: &Table<'a>,
    kernel_cache: &std::path::Path,
) -> Result<(VariantConfig, Span, Span, Option<Span>)> {
    let header = table.span.clone();
    table.inherit(defaults);
    let image_table = table.split_off(&fs::image_keys());
    let keys: VariantKeys = table.parse(src)?;
    let Some(name) = &keys.name else {
        return Err(src.err(header, "variant.name", "every [[variant]] needs a name"));
    };
    let name_text = name.get_ref().to_string();
    check_name(&name_text).map_err(|msg| src.err(name.span(), "name", msg))?;
    let Some(fs_value) = &keys.fs else {
        return Err(src.err(
            name.span(),
            "fs",
            format!("variant `{name_text}` has no `fs` (and [defaults] gives none)"),
        ));
    };
    let kind = FsKind::parse(fs_value.get_ref()).map_err(|msg| src.err(fs_value.span(), "fs", msg))?;
    let mut config = TestbedConfig::new(kind.clone());
    config.image = resolve_image(src, &kind, image_table)?;

    if let Some(s) = &keys.size {
        if kind.is_read_only_image() {
            let msg = format!("cannot be used with fs = \"{kind}\" (the image is as large as its content)");
            return Err(src.err(s.span(), "size", msg));
        }
        if s.get_ref().0 < 16 << 20 {
            return Err(src.err(s.span(), "size", "must be at least 16MiB"));
        }
        config.size = *s.get_ref();
    } else {
        config.size = DEFAULT_SIZE;
    }
    if let Some(m) = &keys.mount {
        let text = m.get_ref();
        if text.contains(char::is_whitespace) || text.split(',').any(str::is_empty) && !text.is_empty() {
            let msg = "must be a comma-separated option list without spaces or empty items";
            return Err(src.err(m.span(), "mount", msg));
        }
        if let Some(format) = kind.fs().image() {
            format.check_mount(text).map_err(|msg| src.err(m.span(), "mount", msg))?;
        }
        config.mount = text.clone();
    }
    if let Some(s) = &keys.scheduler {
        if !SCHEDULERS.contains(&s.get_ref().as_str()) {
            return Err(src.err(s.span(), "scheduler", format!("must be one of {}", SCHEDULERS.join(", "))));
        }
        config.scheduler = Some(s.get_ref().clone());
    }
    if let Some(tunables) = &keys.sysfs {
        for (key, value) in tunables.get_ref() {
            if key.is_empty() || key.contains('/') || key.starts_with('.') {
                return Err(src.err(tunables.span(), &format!("sysfs.{key}"), "is not a tunable name"));
            }
            let text = match value {
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                toml::Value::String(s) => s.clone(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    let msg = "must be a number, boolean or string";
                    return Err(src.err(tunables.span(), &format!("sysfs.{key}"), msg));
                }
            };
            config.sysfs.push((key.clone(), text));
        }
    }
    config.mkfs = keys.mkfs.as_ref().map(|m| m.get_ref().clone()).unwrap_or_default();
    config.throttle = keys.throttle.as_ref().map(|t| *t.get_ref()).unwrap_or_default();
    if let Some(d) = &keys.device {
        let spec = crate::media::DeviceSpec::parse(d.get_ref())
            .and_then(|spec| match kind.is_read_only_image() {
                // A read-only image is as large as its content, known later.
                true => Ok(spec),
                false => spec.check_capacity(config.size.0).map(|()| spec),
            })
            .map_err(|(key, msg)| src.err(d.span(), &key, msg))?;
        config.device = Some(spec);
    }
    config.read_ahead_kb = keys.read_ahead_kb.as_ref().map(|r| *r.get_ref());

    // Settings that only make sense on a block device fslab creates.
    if !kind.is_block() {
        let directory = kind.medium() == Medium::Directory;
        let offending = [
            ("mkfs", keys.mkfs.as_ref().map(Spanned::span)),
            ("throttle", keys.throttle.as_ref().map(Spanned::span)),
            ("device", keys.device.as_ref().map(Spanned::span)),
            ("read_ahead_kb", keys.read_ahead_kb.as_ref().map(Spanned::span)),
            ("scheduler", keys.scheduler.as_ref().map(Spanned::span)),
            ("sysfs", keys.sysfs.as_ref().map(Spanned::span)),
            ("size", keys.size.as_ref().filter(|_| directory).map(Spanned::span)),
            ("mount", keys.mount.as_ref().filter(|_| directory).map(Spanned::span)),
        ];
        if let Some((key, _)) = offending.iter().find(|(_, span)| span.is_some()) {
            let msg = format!("cannot be used with fs = \"{kind}\" (no block device)");
            return Err(src.err(fs_value.span(), key, msg));
        }
    }
    let (kernel, vm) = super::place::resolve(src, keys.kernel.as_ref(), keys.vm.as_ref(), &kind, kernel_cache)?;
    let device_span = keys.device.as_ref().map(Spanned::span);
    Ok((VariantConfig { name: name_text, testbed: config, kernel, vm }, name.span(), fs_value.span(), device_span))
}

/// A media model too slow for a workload's timeout: refused when one 4 KiB
/// request (a write, or a read for a workload that only reads) takes longer
/// than the timeout, as every run would time out; warned about, with the
/// estimate, when writing the image once would (the workload may write
/// less; no workload kind says how much it will write).
fn check_media_speed(
    src: &Source,
    variants: &[VariantConfig],
    device_spans: &[Option<Span>],
    workloads: &[WorkloadConfig],
) -> Result<()> {
    use crate::human::duration_s;
    for (variant, span) in variants.iter().zip(device_spans) {
        let (Some(spec), Some(span)) = (&variant.testbed.device, span) else { continue };
        let image_write_s = spec.sequential_write_s(variant.testbed.size.0);
        for workload in workloads {
            let timeout = workload.timeout_or_default().as_secs_f64();
            let write = !workload.params.read_only() && !variant.testbed.fs.is_read_only_image();
            let (least, key) = spec.least_request_s(write);
            if least > timeout {
                let msg = format!(
                    "one 4 KiB {} on this model takes at least {} (mostly `{key}`), longer than workload `{}`'s \
                     timeout ({}): every run would time out",
                    if write { "write" } else { "read" },
                    duration_s(least),
                    workload.label,
                    duration_s(timeout),
                );
                return Err(src.err(span.clone(), &format!("device.{key}"), msg));
            }
            if write && image_write_s > timeout {
                let msg = format!(
                    "writing the {} image once on this model takes about {}, longer than workload `{}`'s timeout \
                     ({}): its runs time out if it writes that much",
                    crate::units::Bytes(variant.testbed.size.0),
                    duration_s(image_write_s),
                    workload.label,
                    duration_s(timeout),
                );
                crate::output::diagnostic(&format!("fslab: warning: {:#}", src.err(span.clone(), "device", msg)));
            }
        }
    }
    Ok(())
}

/// The image keys split off a variant: only on image kinds, each only on
/// the kinds that have it, then checked by the kind.
fn resolve_image(src: &Source, kind: &FsKind, table: Table) -> Result<Option<crate::testbed::ImageOptions>> {
    let format = kind.fs().image();
    for (key, span) in table.keys() {
        let owners = fs::image_kinds_with(key);
        if format.is_none() {
            let msg = format!("is a read-only image setting ({}), not one of fs = \"{kind}\"", owners.join(", "));
            return Err(src.err(span, key, msg));
        }
        if !owners.contains(&kind.fstype()) {
            return Err(src.err(span, key, format!("is a {} setting, not one of fs = \"{kind}\"", owners.join("/"))));
        }
    }
    format.map(|f| f.resolve(table, src)).transpose()
}

type Span = std::ops::Range<usize>;

/// The common keys of a `[[workload]]`, then the kind's own. Returns the
/// workload, the span of its `name` when it has one, and of its `kind`.
fn resolve_workload(src: &Source, mut table: Table) -> Result<(WorkloadConfig, Option<Span>, Span)> {
    let header = table.span.clone();
    let common: WorkloadKeys = table.split_off(keys::names::<WorkloadKeys>()).parse(src)?;
    let Some(kind) = &common.kind else {
        let msg = format!("every [[workload]] needs a `kind` ({})", workload::names().join(", "));
        return Err(src.err(header, "kind", msg));
    };
    let params = WorkloadParams::resolve(kind.get_ref(), kind.span(), table, src)?;
    let label = match &common.name {
        Some(n) => {
            check_name(n.get_ref()).map_err(|msg| src.err(n.span(), "name", msg))?;
            n.get_ref().clone()
        }
        None => params.kind().to_string(),
    };
    let config = WorkloadConfig {
        label,
        timeout: common.timeout.as_ref().map(|t| t.get_ref().0),
        cache: common.cache.unwrap_or_default(),
        params,
        decisive: decisive_metrics(src, common.decisive.as_ref())?,
    };
    Ok((config, common.name.as_ref().map(Spanned::span), kind.span()))
}

/// `decisive = [...]`: known evidence metrics, each once.
fn decisive_metrics(src: &Source, list: Option<&Spanned<Vec<Spanned<String>>>>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for name in list.map(|l| l.get_ref().as_slice()).unwrap_or_default() {
        let text = name.get_ref();
        let why = if !crate::metric::is_evidence(text) {
            let namespaces: Vec<String> =
                crate::metric::EVIDENCE_NAMESPACES.iter().map(|(ns, _)| format!("{ns}/…")).collect();
            Some(format!(
                "`{text}` is not an evidence metric ({}); a workload's own metrics decide by its kind",
                namespaces.join(", ")
            ))
        } else if text.contains('*') || !crate::metric::is_known_evidence(text) {
            Some(format!("unknown evidence metric `{text}`; known: {}", crate::metric::EVIDENCE_METRICS.join(", ")))
        } else if out.contains(text) {
            Some(format!("`{text}` is named twice"))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(src.err(name.span(), "decisive", why));
        }
        out.push(text.clone());
    }
    Ok(out)
}

/// A read-only image testbed needs workloads that can populate it.
fn check_read_only_workloads(
    src: &Source,
    variants: &[VariantConfig],
    workloads: &[WorkloadConfig],
    kind_spans: &[Span],
) -> Result<()> {
    let Some(image) = variants.iter().find(|v| v.testbed.fs.is_read_only_image()) else { return Ok(()) };
    for (w, span) in workloads.iter().zip(kind_spans) {
        if !w.params.read_only() {
            let msg = format!(
                "`{}` cannot run on read-only image variants (variant `{}` is {}); those run {}",
                w.params.kind(),
                image.name,
                image.testbed.fs,
                workload::read_only_names().join(", ")
            );
            return Err(src.err(span.clone(), "kind", msg));
        }
    }
    Ok(())
}

/// The one rule for variant and workload names: they are addressed on the
/// command line (`history WORKLOAD/METRIC`, `--variants A,B`, `--baseline`)
/// and in paths, so only ASCII letters, digits and `. _ - = +`
/// (`optimize_scan=0`, `6.12-rt`); no `/`, `,`, whitespace or control
/// characters, and not `.` or `..`.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".to_string());
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || "._-=+".contains(*c))) {
        return Err(format!(
            "`{}` has {:?}: names may use only letters, digits and `. _ - = +`",
            name.escape_debug(),
            bad
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("`{name}` is not a name"));
    }
    Ok(())
}

#[cfg(test)]
mod name_tests {
    use super::check_name;

    #[test]
    fn names_are_letters_digits_and_a_few_marks() {
        for ok in ["optimize_scan=0", "6.12-rt", "a", "xfs-ag16", "squashfs-lz4", "c+d"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "a/b", "../../w", "a,b", "a b", "tab\t", "nl\n", "bell\u{7}", "..", ".", "b<script>"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
