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
use crate::exit::Exit;
use crate::keys::{self, Errors, Source, Table};
use crate::testbed::filesystem::{self as fs, FsKind, Medium};
use crate::testbed::workdirs::system_dir;
use crate::testbed::{config::DEFAULT_SIZE, TestbedConfig};
use crate::workload::{self, WorkloadParams};

const MIN_INTERVAL: Duration = Duration::from_millis(100);
const SCHEDULERS: &[&str] = &["none", "mq-deadline", "bfq", "kyber"];
/// Most variants and workloads one experiment may have.
const MAX_VARIANTS: usize = 64;
const MAX_WORKLOADS: usize = 64;

/// Every independent error of the file is reported, as a compiler does:
/// the top-level keys, each variant and each workload are checked on their
/// own, and the checks across them (names twice, read-only images, media
/// speed, `baseline`) run over what passed. What depends on an error is
/// skipped (a kind's keys when the kind is unknown, a variant's keys when
/// its `fs` is bad); one error comes back as it is, several as one
/// [`keys::FileErrors`].
pub(super) fn resolve(src: &Source, overrides: &super::Overrides) -> Result<Experiment> {
    // A syntax error leaves nothing else to read.
    let mut top = Table::parse_document(src)?;
    let mut errors = Errors::default();
    let defaults = errors.ok(top.take_table(src, "defaults")).flatten();
    let variant_tables = errors.ok(top.take_tables(src, "variant"));
    let workload_tables = errors.ok(top.take_tables(src, "workload"));
    let workdir_span = top.key_span("workdir");
    let file: Option<TopKeys> = errors.ok(top.parse(src));
    let mut system_paths = Vec::new();
    let workdir = match &overrides.workdir {
        Some(dir) => dir.clone(),
        None => {
            PathBuf::from(file.as_ref().and_then(|f| f.workdir.clone()).unwrap_or_else(|| DEFAULT_WORKDIR.to_string()))
        }
    };
    // Archive kernels (`debian:…`) are looked up in the kernel cache's
    // lists, built kernels prepared in it: the one the run will use.
    let kernel_cache = crate::kernel::cache_dir(overrides.kernel_cache.as_deref(), &workdir);

    let mut name_text = String::new();
    let mut repetitions = Repetitions::Fixed(5);
    let (mut theta, mut alpha, mut sample_interval) = (0.02, 0.05, Duration::from_secs(1));
    if let Some(file) = &file {
        match &file.name {
            None => errors.push(src.err(0..0, "name", "the experiment needs a `name = \"…\"`")),
            Some(name) if name.get_ref().trim().is_empty() => {
                errors.push(src.err(name.span(), "name", "must not be empty"));
            }
            Some(name) => name_text = name.get_ref().trim().to_string(),
        }
        if let Some(r) = &file.repetitions {
            repetitions = errors.ok(check_repetitions(src, r)).unwrap_or(repetitions);
        }
        theta = errors.ok(fraction(src, file.theta.as_ref(), "theta", theta)).unwrap_or(theta);
        alpha = errors.ok(fraction(src, file.alpha.as_ref(), "alpha", alpha)).unwrap_or(alpha);
        match &file.sample_interval {
            Some(s) if s.get_ref().0 < MIN_INTERVAL => {
                errors.push(src.err(s.span(), "sample_interval", "must be at least 100ms"));
            }
            Some(s) => sample_interval = s.get_ref().0,
            None => {}
        }
    }

    let mut defaults = defaults.unwrap_or_else(|| Table::empty(0..0));
    if let Some(span) = defaults.key_span("name") {
        errors.push(src.err(span, "defaults.name", "a name belongs in [[variant]], not [defaults]"));
        defaults.take("name"); // else every variant would inherit it
    }
    // Whether every variant resolved: `baseline` names one of them.
    let mut all_variants = variant_tables.is_some();
    let mut variant_tables = variant_tables.unwrap_or_default();
    if all_variants && variant_tables.is_empty() {
        errors.push(src.err(0..0, "variant", "at least one [[variant]] is needed"));
    }
    if variant_tables.len() > MAX_VARIANTS {
        errors.push(src.err(variant_tables[MAX_VARIANTS].span.clone(), "variant", format!("at most {MAX_VARIANTS}")));
        variant_tables.truncate(MAX_VARIANTS);
        all_variants = false;
    }
    let mut variants: Vec<VariantConfig> = Vec::new();
    let mut device_spans: Vec<Option<Span>> = Vec::new();
    for table in variant_tables {
        let resolved = match resolve_variant(src, table, &defaults, &kernel_cache) {
            Ok(resolved) => resolved,
            Err(found) => {
                errors.append(found);
                all_variants = false;
                continue;
            }
        };
        let ResolvedVariant { variant, name_span, fs_span, device_span } = resolved;
        if let FsKind::Dir(path) = &variant.testbed.fs {
            if let Some(why) = system_dir(path) {
                let msg = format!("{why}: a `dir:` testbed's runs create and delete files there");
                system_paths.push(("fs".to_string(), format!("{:#}", src.err(fs_span, "fs", msg))));
            }
        }
        if variants.iter().any(|v| v.name == variant.name) {
            errors.push(src.err(name_span, "name", format!("variant `{}` is defined twice", variant.name)));
            continue;
        }
        device_spans.push(device_span);
        variants.push(variant);
    }

    if workload_tables.as_ref().is_some_and(Vec::is_empty) {
        errors.push(src.err(0..0, "workload", "at least one [[workload]] is needed"));
    }
    let mut workload_tables = workload_tables.unwrap_or_default();
    if workload_tables.len() > MAX_WORKLOADS {
        let span = workload_tables[MAX_WORKLOADS].span.clone();
        errors.push(src.err(span, "workload", format!("at most {MAX_WORKLOADS}")));
        workload_tables.truncate(MAX_WORKLOADS);
    }
    let mut workloads: Vec<WorkloadConfig> = Vec::new();
    let mut kind_spans = Vec::new();
    for table in workload_tables {
        let (mut workload, named, kind_span) = match resolve_workload(src, table) {
            Ok(resolved) => resolved,
            Err(found) => {
                errors.append(found);
                continue;
            }
        };
        if workloads.iter().any(|w| w.label == workload.label) {
            if let Some(span) = named {
                errors.push(src.err(span, "name", format!("workload `{}` is defined twice", workload.label)));
                continue;
            }
            // Unnamed repeats of a kind get a numbered label.
            let mut i = 2;
            while workloads.iter().any(|w| w.label == format!("{}-{i}", workload.label)) {
                i += 1;
            }
            workload.label = format!("{}-{i}", workload.label);
        }
        kind_spans.push(kind_span);
        workloads.push(workload);
    }
    check_read_only_workloads(src, &variants, &workloads, &kind_spans, &mut errors);
    check_media_speed(src, &variants, &device_spans, &workloads, &mut errors);
    let mut baseline = variants.first().map(|v| v.name.clone()).unwrap_or_default();
    if let Some(b) = file.as_ref().and_then(|f| f.baseline.as_ref()) {
        if variants.iter().any(|v| &v.name == b.get_ref()) {
            baseline = b.get_ref().clone();
        } else if all_variants {
            errors.push(src.err(b.span(), "baseline", format!("no variant is named `{}`", b.get_ref())));
        }
    }
    // (An overriding `--workdir` is checked by the runner, where it is known.)
    if let (Some(span), Some(why), None) = (workdir_span, system_dir(&workdir), &overrides.workdir) {
        let msg = format!("{why}: fslab creates testbeds and its input cache there");
        system_paths.push(("workdir".to_string(), format!("{:#}", src.err(span, "workdir", msg))));
    }
    if let Some(error) = file_error(errors, src) {
        return Err(error);
    }
    let file = file.expect("no errors, so the top level parsed");
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

/// The file's errors as one error, with the exit class they share (every
/// one needing the network: 3); a mix is the file's fault, which the
/// caller says (2).
fn file_error(errors: Errors, src: &Source) -> Option<anyhow::Error> {
    let classes: Vec<Option<Exit>> = errors.iter().map(crate::exit::class).collect();
    let shared = classes.first().copied().flatten().filter(|c| classes.iter().all(|k| *k == Some(*c)));
    let error = errors.into_error(src.origin)?;
    Some(match shared {
        Some(Exit::Environment) => crate::exit::environment(error),
        Some(Exit::Usage) => crate::exit::usage(error),
        _ => error,
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

/// A variant that passed its checks, with the spans later checks point at.
struct ResolvedVariant {
    variant: VariantConfig,
    name_span: Span,
    fs_span: Span,
    device_span: Option<Span>,
}

/// A variant's keys, each checked on its own: every bad key is reported,
/// not only the first. Without a name, or without a known `fs` (which
/// decides what the other keys mean), nothing else is checked.
fn resolve_variant<'a>(
    src: &Source,
    mut table: Table<'a>,
    defaults: &Table<'a>,
    kernel_cache: &std::path::Path,
) -> std::result::Result<ResolvedVariant, Errors> {
    let mut errors = Errors::default();
    let header = table.span.clone();
    table.inherit(defaults);
    let image_table = table.split_off(&fs::image_keys());
    let found = |e: anyhow::Error| {
        let mut errors = Errors::default();
        errors.push(e);
        errors
    };
    let keys: VariantKeys = table.parse(src).map_err(found)?;
    let Some(name) = &keys.name else {
        return Err(found(src.err(header, "variant.name", "every [[variant]] needs a name")));
    };
    let name_text = name.get_ref().to_string();
    if let Err(msg) = check_name(&name_text) {
        errors.push(src.err(name.span(), "name", msg));
    }
    let Some(fs_value) = &keys.fs else {
        errors.push(src.err(
            name.span(),
            "fs",
            format!("variant `{name_text}` has no `fs` (and [defaults] gives none)"),
        ));
        return Err(errors);
    };
    let kind = match FsKind::parse(fs_value.get_ref()) {
        Ok(kind) => kind,
        Err(msg) => {
            errors.push(src.err(fs_value.span(), "fs", msg));
            return Err(errors);
        }
    };
    let mut config = TestbedConfig::new(kind.clone());
    config.image = errors.ok(resolve_image(src, &kind, image_table)).flatten();

    config.size = DEFAULT_SIZE;
    if let Some(s) = &keys.size {
        if kind.is_read_only_image() {
            let msg = format!("cannot be used with fs = \"{kind}\" (the image is as large as its content)");
            errors.push(src.err(s.span(), "size", msg));
        } else if s.get_ref().0 < 16 << 20 {
            errors.push(src.err(s.span(), "size", "must be at least 16MiB"));
        } else {
            config.size = *s.get_ref();
        }
    }
    if let Some(m) = &keys.mount {
        let text = m.get_ref();
        if text.contains(char::is_whitespace) || text.split(',').any(str::is_empty) && !text.is_empty() {
            let msg = "must be a comma-separated option list without spaces or empty items";
            errors.push(src.err(m.span(), "mount", msg));
        } else if let Some(Err(msg)) = kind.fs().image().map(|format| format.check_mount(text)) {
            errors.push(src.err(m.span(), "mount", msg));
        }
        config.mount = text.clone();
    }
    if let Some(s) = &keys.scheduler {
        if !SCHEDULERS.contains(&s.get_ref().as_str()) {
            errors.push(src.err(s.span(), "scheduler", format!("must be one of {}", SCHEDULERS.join(", "))));
        }
        config.scheduler = Some(s.get_ref().clone());
    }
    if let Some(tunables) = &keys.sysfs {
        for (key, value) in tunables.get_ref() {
            if key.is_empty() || key.contains('/') || key.starts_with('.') {
                errors.push(src.err(tunables.span(), &format!("sysfs.{key}"), "is not a tunable name"));
                continue;
            }
            let text = match value {
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                toml::Value::String(s) => s.clone(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    let msg = "must be a number, boolean or string";
                    errors.push(src.err(tunables.span(), &format!("sysfs.{key}"), msg));
                    continue;
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
            .map_err(|(key, msg)| src.err(d.span(), &key, msg));
        config.device = errors.ok(spec);
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
            errors.push(src.err(fs_value.span(), key, msg));
        }
    }
    let place = super::place::resolve(src, keys.kernel.as_ref(), keys.vm.as_ref(), &kind, kernel_cache);
    let (kernel, vm) = errors.ok(place).unwrap_or_default();
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(ResolvedVariant {
        variant: VariantConfig { name: name_text, testbed: config, kernel, vm },
        name_span: name.span(),
        fs_span: fs_value.span(),
        device_span: keys.device.as_ref().map(Spanned::span),
    })
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
    errors: &mut Errors,
) {
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
                errors.push(src.err(span.clone(), &format!("device.{key}"), msg));
                break; // one refusal per variant: the same key for every workload
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

/// The common keys of a `[[workload]]`, then the kind's own (skipped when
/// the kind is missing: they depend on it). Returns the workload, the span
/// of its `name` when it has one, and of its `kind`; or every error found.
fn resolve_workload(
    src: &Source,
    mut table: Table,
) -> std::result::Result<(WorkloadConfig, Option<Span>, Span), Errors> {
    let mut errors = Errors::default();
    let header = table.span.clone();
    let common: Option<WorkloadKeys> = errors.ok(table.split_off(keys::names::<WorkloadKeys>()).parse(src));
    let Some(common) = common else { return Err(errors) };
    let params = match &common.kind {
        Some(kind) => errors.ok(WorkloadParams::resolve(kind.get_ref(), kind.span(), table, src)),
        None => {
            let msg = format!("every [[workload]] needs a `kind` ({})", workload::names().join(", "));
            errors.push(src.err(header, "kind", msg));
            None
        }
    };
    if let Some(n) = &common.name {
        if let Err(msg) = check_name(n.get_ref()) {
            errors.push(src.err(n.span(), "name", msg));
        }
    }
    let decisive = errors.ok(decisive_metrics(src, common.decisive.as_ref()));
    let (Some(kind), Some(params), Some(decisive), true) = (&common.kind, params, decisive, errors.is_empty()) else {
        return Err(errors);
    };
    let config = WorkloadConfig {
        label: common.name.as_ref().map_or_else(|| params.kind().to_string(), |n| n.get_ref().clone()),
        timeout: common.timeout.as_ref().map(|t| t.get_ref().0),
        cache: common.cache.unwrap_or_default(),
        params,
        decisive,
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
    errors: &mut Errors,
) {
    let Some(image) = variants.iter().find(|v| v.testbed.fs.is_read_only_image()) else { return };
    for (w, span) in workloads.iter().zip(kind_spans) {
        if !w.params.read_only() {
            let msg = format!(
                "`{}` cannot run on read-only image variants (variant `{}` is {}); those run {}",
                w.params.kind(),
                image.name,
                image.testbed.fs,
                workload::read_only_names().join(", ")
            );
            errors.push(src.err(span.clone(), "kind", msg));
        }
    }
}

/// The one rule for variant and workload names: they are addressed on the
/// command line (`history WORKLOAD/METRIC`, `--variants A,B`, `--baseline`)
/// and in paths, so only ASCII letters, digits and `. _ - = +`
/// (`optimize_scan=0`, `6.12-rt`); no `/`, `,`, whitespace or control
/// characters, not `.` or `..`, and no leading `-` (`--variants -a` is
/// taken for a flag).
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
    if name.starts_with('-') {
        return Err(format!("`{name}` starts with `-`: the command line would take it for a flag"));
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
        for bad in
            ["", "a/b", "../../w", "a,b", "a b", "tab\t", "nl\n", "bell\u{7}", "..", ".", "b<script>", "-a", "--x"]
        {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
