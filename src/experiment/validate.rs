//! Checks that turn a parsed [`spec::ExperimentFile`] into an [`Experiment`].
//! Every error names the file, line, column and key.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use toml::Spanned;

use super::spec::{ExperimentFile, Repetitions, VariantTable, WorkloadTable};
use super::{
    Experiment, FioJob, FsKind, ImageOptions, UntarSource, VariantConfig, WorkloadConfig, WorkloadParams,
    DEFAULT_WORKDIR, UNTAR_PROFILES,
};
use crate::units::Bytes;

/// `:line:column` for a byte offset in `text`.
pub(super) fn location(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    format!(":{line}:{column}")
}

/// Builds errors that point into the experiment text.
struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, key: &str, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}{}: `{key}`: {message}", self.origin, location(self.text, span.start))
    }
}

const DEFAULT_SIZE: u64 = 1 << 30;
const MIN_INTERVAL: Duration = Duration::from_millis(100);
const SCHEDULERS: &[&str] = &["none", "mq-deadline", "bfq", "kyber"];

pub(super) fn resolve(file: ExperimentFile, text: &str, origin: &str, path: Option<&Path>) -> Result<Experiment> {
    let cx = Ctx { text, origin };
    let name = file.name.get_ref().trim().to_string();
    if name.is_empty() {
        return Err(cx.err(file.name.span(), "name", "must not be empty"));
    }
    let repetitions = match &file.repetitions {
        None => Repetitions::Fixed(5),
        Some(r) => {
            match *r.get_ref() {
                Repetitions::Fixed(0) => return Err(cx.err(r.span(), "repetitions", "must be at least 1")),
                Repetitions::Adaptive { min, max } if min < 2 || max < min => {
                    return Err(cx.err(r.span(), "repetitions", "needs 2 <= min <= max"));
                }
                _ => {}
            }
            *r.get_ref()
        }
    };
    let theta = fraction(&cx, file.theta.as_ref(), "theta", 0.02)?;
    let alpha = fraction(&cx, file.alpha.as_ref(), "alpha", 0.05)?;
    let sample_interval = match &file.sample_interval {
        None => Duration::from_secs(1),
        Some(s) if s.get_ref().0 < MIN_INTERVAL => {
            return Err(cx.err(s.span(), "sample_interval", "must be at least 100ms"));
        }
        Some(s) => s.get_ref().0,
    };

    let base_dir = path.and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let defaults = match &file.defaults {
        Some(d) => {
            if let Some(n) = &d.get_ref().name {
                return Err(cx.err(n.span(), "defaults.name", "a name belongs in [[variant]], not [defaults]"));
            }
            d.get_ref().clone()
        }
        None => VariantTable::default(),
    };
    if file.variant.is_empty() {
        return Err(cx.err(0..0, "variant", "at least one [[variant]] is needed"));
    }
    let mut variants: Vec<VariantConfig> = Vec::new();
    for table in &file.variant {
        let variant = resolve_variant(&cx, table, &defaults)?;
        if variants.iter().any(|v| v.name == variant.name) {
            let span = table.name.as_ref().map(Spanned::span).unwrap_or(0..0);
            return Err(cx.err(span, "name", format!("variant `{}` is defined twice", variant.name)));
        }
        variants.push(variant);
    }
    if file.workload.is_empty() {
        return Err(cx.err(0..0, "workload", "at least one [[workload]] is needed"));
    }
    let mut workloads: Vec<WorkloadConfig> = Vec::new();
    for table in &file.workload {
        let mut workload = resolve_workload(&cx, table, &base_dir)?;
        if workloads.iter().any(|w| w.label == workload.label) {
            if let Some(n) = &table.name {
                return Err(cx.err(n.span(), "name", format!("workload `{}` is defined twice", workload.label)));
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
    check_read_only_workloads(&cx, &variants, &file.workload, &workloads)?;
    let baseline = match &file.baseline {
        None => variants[0].name.clone(),
        Some(b) => {
            if !variants.iter().any(|v| &v.name == b.get_ref()) {
                return Err(cx.err(b.span(), "baseline", format!("no variant is named `{}`", b.get_ref())));
            }
            b.get_ref().clone()
        }
    };
    Ok(Experiment {
        name,
        description: file.description.clone(),
        source_path: None,
        source_text: String::new(),
        spec_hash: String::new(),
        repetitions,
        order: file.order.unwrap_or_default(),
        seed: file.seed.unwrap_or(1),
        workdir: PathBuf::from(file.workdir.clone().unwrap_or_else(|| DEFAULT_WORKDIR.to_string())),
        baseline,
        theta,
        alpha,
        sample_interval,
        variants,
        workloads,
    })
}

fn fraction(cx: &Ctx, value: Option<&Spanned<f64>>, key: &str, default: f64) -> Result<f64> {
    match value {
        None => Ok(default),
        Some(v) if *v.get_ref() > 0.0 && *v.get_ref() < 1.0 => Ok(*v.get_ref()),
        Some(v) => Err(cx.err(v.span(), key, "must be a fraction between 0 and 1 (e.g. 0.02 for 2%)")),
    }
}

fn resolve_variant(cx: &Ctx, table: &VariantTable, defaults: &VariantTable) -> Result<VariantConfig> {
    let Some(name) = &table.name else {
        // A [[variant]] with no name: point at any key it has.
        let span = table.fs.as_ref().map(Spanned::span).unwrap_or(0..0);
        return Err(cx.err(span, "variant.name", "every [[variant]] needs a name"));
    };
    let name_str = name.get_ref().trim().to_string();
    if name_str.is_empty() || name_str.contains(char::is_whitespace) {
        return Err(cx.err(name.span(), "name", "must be a non-empty word without spaces"));
    }
    let Some(fs_spanned) = table.fs.as_ref().or(defaults.fs.as_ref()) else {
        return Err(cx.err(name.span(), "fs", format!("variant `{name_str}` has no `fs` (and [defaults] gives none)")));
    };
    let fs = parse_fs(cx, fs_spanned)?;
    let size = table.size.as_ref().or(defaults.size.as_ref());
    let mount = table.mount.as_ref().or(defaults.mount.as_ref());
    let mkfs = table.mkfs.clone().or_else(|| defaults.mkfs.clone());
    let throttle = table.throttle.or(defaults.throttle).unwrap_or_default();
    let read_ahead_kb = table.read_ahead_kb.or(defaults.read_ahead_kb);
    let scheduler = table.scheduler.as_ref().or(defaults.scheduler.as_ref());
    let sysfs = table.sysfs.as_ref().or(defaults.sysfs.as_ref());

    let image = resolve_image(cx, &fs, table, defaults)?;
    if let Some(s) = size.filter(|_| fs.is_read_only_image()) {
        return Err(cx.err(
            s.span(),
            "size",
            format!("cannot be used with fs = \"{fs}\" (the image is as large as its content)"),
        ));
    }
    if let Some(m) = mount.filter(|_| fs.is_read_only_image()) {
        check_read_only_mount(cx, &fs, m)?;
    }
    if let Some(s) = size {
        if s.get_ref().0 < 16 << 20 {
            return Err(cx.err(s.span(), "size", "must be at least 16MiB"));
        }
    }
    if let Some(m) = mount {
        if m.get_ref().contains(char::is_whitespace)
            || m.get_ref().split(',').any(str::is_empty) && !m.get_ref().is_empty()
        {
            return Err(cx.err(
                m.span(),
                "mount",
                "must be a comma-separated option list without spaces or empty items",
            ));
        }
    }
    if let Some(s) = scheduler {
        if !SCHEDULERS.contains(&s.get_ref().as_str()) {
            return Err(cx.err(s.span(), "scheduler", format!("must be one of {}", SCHEDULERS.join(", "))));
        }
    }
    let mut sysfs_pairs = Vec::new();
    if let Some(tunables) = sysfs {
        for (key, value) in tunables.get_ref() {
            if key.is_empty() || key.contains('/') || key.starts_with('.') {
                return Err(cx.err(tunables.span(), &format!("sysfs.{key}"), "is not a tunable name"));
            }
            let text = match value {
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                toml::Value::String(s) => s.clone(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    return Err(cx.err(tunables.span(), &format!("sysfs.{key}"), "must be a number, boolean or string"))
                }
            };
            sysfs_pairs.push((key.clone(), text));
        }
    }
    // Settings that only make sense on a block device we create.
    if !fs.is_block() {
        let offending = [
            ("mkfs", mkfs.is_some()),
            ("throttle", !throttle.is_empty()),
            ("read_ahead_kb", read_ahead_kb.is_some()),
            ("scheduler", scheduler.is_some()),
            ("sysfs", sysfs.is_some()),
            ("size", size.is_some() && matches!(fs, FsKind::Dir(_))),
            ("mount", mount.is_some() && matches!(fs, FsKind::Dir(_))),
        ];
        if let Some((key, _)) = offending.iter().find(|(_, set)| *set) {
            return Err(cx.err(fs_spanned.span(), key, format!("cannot be used with fs = \"{fs}\" (no block device)")));
        }
    }
    Ok(VariantConfig {
        name: name_str,
        fs,
        size: size.map_or(Bytes(DEFAULT_SIZE), |s| *s.get_ref()),
        mkfs: mkfs.unwrap_or_default(),
        mount: mount.map(|m| m.get_ref().clone()).unwrap_or_default(),
        throttle,
        read_ahead_kb,
        scheduler: scheduler.map(|s| s.get_ref().clone()),
        sysfs: sysfs_pairs,
        image,
    })
}

const SQUASHFS_COMPRESSORS: &[&str] = &["gzip", "lzo", "lz4", "xz", "zstd", "none"];
const EROFS_COMPRESSORS: &[&str] = &["lz4", "lz4hc", "lzma", "deflate", "libdeflate", "zstd", "none"];

/// Levels each compressor accepts; absent means it takes no level.
fn level_range(fs: &FsKind, compressor: &str) -> Option<std::ops::RangeInclusive<i64>> {
    match (fs, compressor) {
        (FsKind::Squashfs, "gzip") => Some(1..=9),
        (FsKind::Squashfs, "zstd") | (FsKind::Erofs, "zstd") => Some(1..=22),
        (FsKind::Erofs, "lz4hc") | (FsKind::Erofs, "libdeflate") => Some(0..=12),
        (FsKind::Erofs, "lzma") | (FsKind::Erofs, "deflate") => Some(0..=9),
        _ => None,
    }
}

/// The image keys (`compressor`, `level`, `block_size`, `fragments`,
/// `pcluster_size`): only on squashfs/erofs, each only where that format has it.
fn resolve_image(cx: &Ctx, fs: &FsKind, table: &VariantTable, defaults: &VariantTable) -> Result<Option<ImageOptions>> {
    let compressor = table.compressor.as_ref().or(defaults.compressor.as_ref());
    let level = table.level.as_ref().or(defaults.level.as_ref());
    let block_size = table.block_size.as_ref().or(defaults.block_size.as_ref());
    let fragments = table.fragments.as_ref().or(defaults.fragments.as_ref());
    let pcluster = table.pcluster_size.as_ref().or(defaults.pcluster_size.as_ref());
    let keys = [
        ("compressor", compressor.map(Spanned::span)),
        ("level", level.map(Spanned::span)),
        ("block_size", block_size.map(Spanned::span)),
        ("fragments", fragments.map(Spanned::span)),
        ("pcluster_size", pcluster.map(Spanned::span)),
    ];
    let only_for = |key: &str| match key {
        "block_size" | "fragments" => Some(FsKind::Squashfs),
        "pcluster_size" => Some(FsKind::Erofs),
        _ => None,
    };
    for (key, span) in keys {
        let Some(span) = span else { continue };
        if !fs.is_read_only_image() {
            return Err(cx.err(
                span,
                key,
                format!("is a read-only image setting (squashfs, erofs), not one of fs = \"{fs}\""),
            ));
        }
        if let Some(owner) = only_for(key).filter(|owner| owner != fs) {
            return Err(cx.err(span, key, format!("is a {owner} setting, not one of fs = \"{fs}\"")));
        }
    }
    if !fs.is_read_only_image() {
        return Ok(None);
    }
    // Defaults are the tools' own: mksquashfs gzip, mkfs.erofs uncompressed.
    let (allowed, default) =
        if *fs == FsKind::Squashfs { (SQUASHFS_COMPRESSORS, "gzip") } else { (EROFS_COMPRESSORS, "none") };
    let compressor_name = match compressor {
        None => default.to_string(),
        Some(c) if allowed.contains(&c.get_ref().as_str()) => c.get_ref().clone(),
        Some(c) => {
            return Err(cx.err(
                c.span(),
                "compressor",
                format!("unknown {fs} compressor `{}` (one of {})", c.get_ref(), allowed.join(", ")),
            ))
        }
    };
    let level = match level {
        None => None,
        Some(l) => match level_range(fs, &compressor_name) {
            Some(range) if range.contains(l.get_ref()) => Some(*l.get_ref() as u32),
            Some(range) => {
                return Err(cx.err(
                    l.span(),
                    "level",
                    format!("{fs} {compressor_name} takes a level from {} to {}", range.start(), range.end()),
                ))
            }
            None => {
                return Err(cx.err(l.span(), "level", format!("{fs} compressor `{compressor_name}` takes no level")))
            }
        },
    };
    let block_size = match block_size {
        None => None,
        Some(b) if b.get_ref().0.is_power_of_two() && (4096..=1 << 20).contains(&b.get_ref().0) => Some(b.get_ref().0),
        Some(b) => return Err(cx.err(b.span(), "block_size", "must be a power of two from 4KiB to 1MiB")),
    };
    let pcluster_size = match pcluster {
        None => None,
        Some(p) if compressor_name == "none" => {
            return Err(cx.err(
                p.span(),
                "pcluster_size",
                "needs a `compressor` (an uncompressed erofs has no clusters)",
            ))
        }
        Some(p) if p.get_ref().0 % 4096 == 0 && (4096..=1 << 20).contains(&p.get_ref().0) => Some(p.get_ref().0),
        Some(p) => return Err(cx.err(p.span(), "pcluster_size", "must be a multiple of 4KiB from 4KiB to 1MiB")),
    };
    Ok(Some(ImageOptions {
        compressor: compressor_name,
        level,
        block_size,
        fragments: fragments.is_none_or(|f| *f.get_ref()),
        pcluster_size,
    }))
}

/// Read-only images are mounted `ro`; `rw` cannot work, and squashfs's
/// `threads=` takes the decompressor modes the kernel knows.
fn check_read_only_mount(cx: &Ctx, fs: &FsKind, mount: &Spanned<String>) -> Result<()> {
    for option in mount.get_ref().split(',').filter(|o| !o.is_empty()) {
        if option == "rw" {
            return Err(cx.err(mount.span(), "mount", format!("`rw`: a {fs} image is read-only")));
        }
        if let (FsKind::Squashfs, Some(threads)) = (fs, option.strip_prefix("threads=")) {
            let ok = ["single", "multi", "percpu"].contains(&threads) || threads.parse::<u32>().is_ok_and(|n| n >= 1);
            if !ok {
                return Err(cx.err(
                    mount.span(),
                    "mount",
                    format!("`{option}`: squashfs threads= takes single, multi, percpu or a number"),
                ));
            }
        }
    }
    Ok(())
}

/// Workload kinds that can write the content of a read-only image.
const READ_ONLY_KINDS: &[&str] = &["coldstart"];

/// A read-only image variant can only run workloads that supply its content.
fn check_read_only_workloads(
    cx: &Ctx,
    variants: &[VariantConfig],
    tables: &[WorkloadTable],
    workloads: &[WorkloadConfig],
) -> Result<()> {
    let Some(variant) = variants.iter().find(|v| v.fs.is_read_only_image()) else { return Ok(()) };
    for (table, workload) in tables.iter().zip(workloads) {
        if !READ_ONLY_KINDS.contains(&workload.kind()) {
            return Err(cx.err(
                table.kind.span(),
                "kind",
                format!(
                    "`{}` cannot run on read-only image variants (variant `{}` is {}); those run {}",
                    workload.kind(),
                    variant.name,
                    variant.fs,
                    READ_ONLY_KINDS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn parse_fs(cx: &Ctx, fs: &Spanned<String>) -> Result<FsKind> {
    let value = fs.get_ref().trim();
    Ok(match value {
        "ext4" => FsKind::Ext4,
        "xfs" => FsKind::Xfs,
        "btrfs" => FsKind::Btrfs,
        "tmpfs" => FsKind::Tmpfs,
        "squashfs" => FsKind::Squashfs,
        "erofs" => FsKind::Erofs,
        _ => {
            if let Some(dir) = value.strip_prefix("dir:") {
                let dir = PathBuf::from(dir);
                if !dir.is_absolute() || !dir.is_dir() {
                    return Err(cx.err(
                        fs.span(),
                        "fs",
                        format!("`{}` is not an existing absolute directory", dir.display()),
                    ));
                }
                FsKind::Dir(dir)
            } else {
                return Err(cx.err(
                    fs.span(),
                    "fs",
                    format!("unknown filesystem `{value}` (ext4, xfs, btrfs, tmpfs, squashfs, erofs or dir:/path)"),
                ));
            }
        }
    })
}

fn resolve_workload(cx: &Ctx, table: &WorkloadTable, base_dir: &Path) -> Result<WorkloadConfig> {
    let kind = table.kind.get_ref().as_str();
    let allowed: &[&str] = match kind {
        "untar" => &["profile", "scale", "list", "compressibility", "sync"],
        "command" => &["command", "prepare", "cleanup"],
        "shell1" => &["concurrency", "duration"],
        "metadata" => &["files", "file_size", "dirs", "threads", "fsync"],
        "fio" => &["job", "jobfile"],
        "filemix" => &["users", "duration", "seed", "working_set"],
        "coldstart" => &["files", "scale", "compressibility", "readers"],
        _ => {
            return Err(cx.err(
                table.kind.span(),
                "kind",
                format!("unknown workload kind `{kind}` (untar, command, shell1, metadata, fio, filemix, coldstart)"),
            ))
        }
    };
    if let Some((key, span)) = table.specific_keys().into_iter().find(|(k, _)| !allowed.contains(k)) {
        return Err(cx.err(
            span,
            key,
            format!("is not a setting of `{kind}` workloads (it takes {})", allowed.join(", ")),
        ));
    }
    let params = match kind {
        "untar" => {
            let source = match (&table.profile, &table.list) {
                (Some(p), Some(_)) => {
                    return Err(cx.err(p.span(), "profile", "give either `profile` or `list`, not both"))
                }
                (Some(p), None) => {
                    if !UNTAR_PROFILES.contains(&p.get_ref().as_str()) {
                        return Err(cx.err(
                            p.span(),
                            "profile",
                            format!("unknown profile (built in: {})", UNTAR_PROFILES.join(", ")),
                        ));
                    }
                    UntarSource::Profile(p.get_ref().clone())
                }
                (None, Some(l)) => {
                    let path = base_dir.join(l.get_ref());
                    if !path.is_file() {
                        return Err(cx.err(l.span(), "list", format!("{} is not a readable file", path.display())));
                    }
                    UntarSource::List(path)
                }
                (None, None) => UntarSource::Profile("rpi-firmware".to_string()),
            };
            let scale = match &table.scale {
                None => 1.0,
                Some(s) if *s.get_ref() > 0.0 && *s.get_ref() <= 1.0 => *s.get_ref(),
                Some(s) => return Err(cx.err(s.span(), "scale", "must be greater than 0 and at most 1")),
            };
            let compressibility = match &table.compressibility {
                None => 0.5,
                Some(c) if (0.0..=1.0).contains(c.get_ref()) => *c.get_ref(),
                Some(c) => return Err(cx.err(c.span(), "compressibility", "must be between 0 and 1")),
            };
            WorkloadParams::Untar {
                source,
                scale,
                compressibility,
                sync: table.sync.as_ref().is_none_or(|s| *s.get_ref()),
            }
        }
        "shell1" => resolve_shell1(cx, table)?,
        "metadata" => resolve_metadata(cx, table)?,
        "fio" => resolve_fio(cx, table, base_dir)?,
        "filemix" => resolve_filemix(cx, table)?,
        "coldstart" => resolve_coldstart(cx, table)?,
        _ => {
            let Some(command) = &table.command else {
                return Err(cx.err(table.kind.span(), "command", "a `command` workload needs `command = \"...\"`"));
            };
            if command.get_ref().trim().is_empty() {
                return Err(cx.err(command.span(), "command", "must not be empty"));
            }
            WorkloadParams::Command {
                command: command.get_ref().clone(),
                prepare: table.prepare.as_ref().map(|p| p.get_ref().clone()),
                cleanup: table.cleanup.as_ref().map(|p| p.get_ref().clone()),
            }
        }
    };
    let label = match &table.name {
        Some(n) if n.get_ref().trim().is_empty() || n.get_ref().contains(char::is_whitespace) => {
            return Err(cx.err(n.span(), "name", "must be a non-empty word without spaces"));
        }
        Some(n) => n.get_ref().clone(),
        None => kind.to_string(),
    };
    Ok(WorkloadConfig { label, timeout: table.timeout.map(|t| t.0), cache: table.cache.unwrap_or_default(), params })
}

/// Most looping copies a `shell1` level may run.
const MAX_CONCURRENCY: i64 = 256;

/// A sweep list (`concurrency`, `users`, `readers`): non-empty, each level
/// in 1..=max, no repeats.
fn levels(
    cx: &Ctx,
    value: Option<&Spanned<Vec<i64>>>,
    key: &str,
    default: Vec<u32>,
    example: &str,
    max: i64,
) -> Result<Vec<u32>> {
    let Some(list) = value else { return Ok(default) };
    if list.get_ref().is_empty() {
        return Err(cx.err(list.span(), key, format!("needs at least one level, e.g. {example}")));
    }
    let mut out: Vec<u32> = Vec::new();
    for &level in list.get_ref() {
        if !(1..=max).contains(&level) {
            return Err(cx.err(list.span(), key, format!("{level} is not between 1 and {max}")));
        }
        if out.contains(&(level as u32)) {
            return Err(cx.err(list.span(), key, format!("{level} is listed twice")));
        }
        out.push(level as u32);
    }
    Ok(out)
}

fn resolve_shell1(cx: &Ctx, table: &WorkloadTable) -> Result<WorkloadParams> {
    let concurrency = levels(cx, table.concurrency.as_ref(), "concurrency", vec![1], "[1, 2, 4, 8]", MAX_CONCURRENCY)?;
    let duration = match &table.duration {
        None => Duration::from_secs(60),
        Some(d) if d.get_ref().0 < Duration::from_secs(1) => {
            return Err(cx.err(d.span(), "duration", "must be at least 1s"));
        }
        Some(d) => d.get_ref().0,
    };
    Ok(WorkloadParams::Shell1 { concurrency, duration })
}

fn resolve_metadata(cx: &Ctx, table: &WorkloadTable) -> Result<WorkloadParams> {
    let count = |value: &Option<Spanned<i64>>, key: &str, default: i64, max: i64| -> Result<i64> {
        match value {
            None => Ok(default),
            Some(v) if (1..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(cx.err(v.span(), key, format!("must be between 1 and {max}"))),
        }
    };
    let files = count(&table.files, "files", 100_000, 100_000_000)?;
    let dirs = count(&table.dirs, "dirs", 100, 1_000_000)?;
    let threads = count(&table.threads, "threads", 1, 256)?;
    if let Some(d) = &table.dirs {
        if dirs > files {
            return Err(cx.err(d.span(), "dirs", format!("{dirs} directories for {files} files leaves some empty")));
        }
    }
    if let Some(t) = &table.threads {
        if threads > files {
            return Err(cx.err(t.span(), "threads", format!("{threads} threads for {files} files leaves some idle")));
        }
    }
    let file_size = match &table.file_size {
        None => 0,
        Some(s) if s.get_ref().0 > 1 << 30 => return Err(cx.err(s.span(), "file_size", "must be at most 1GiB")),
        Some(s) => s.get_ref().0,
    };
    Ok(WorkloadParams::Metadata {
        files: files as u64,
        file_size,
        dirs: dirs as u64,
        threads: threads as u32,
        fsync: table.fsync.as_ref().is_some_and(|f| *f.get_ref()),
    })
}

/// fio options fslab sets itself (or that would send the output elsewhere).
const FIO_RESERVED: &[&str] = &["output", "output-format", "output_format"];

fn resolve_fio(cx: &Ctx, table: &WorkloadTable, base_dir: &Path) -> Result<WorkloadParams> {
    let job = match (&table.job, &table.jobfile) {
        (Some(j), Some(_)) => return Err(cx.err(j.span(), "job", "give either `job` or `jobfile`, not both")),
        (None, None) => {
            return Err(cx.err(
                table.kind.span(),
                "job",
                "a `fio` workload needs `job = { rw = \"randwrite\", bs = \"4k\", size = \"64M\" }` or `jobfile = \"path\"`",
            ))
        }
        (None, Some(f)) => {
            let path = base_dir.join(f.get_ref());
            if !path.is_file() {
                return Err(cx.err(f.span(), "jobfile", format!("{} is not a readable file", path.display())));
            }
            FioJob::File(path)
        }
        (Some(j), None) => {
            let mut name = "job".to_string();
            let mut options = Vec::new();
            for (key, value) in j.get_ref() {
                let full = format!("job.{key}");
                if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    return Err(cx.err(j.span(), &full, "is not a fio option name"));
                }
                if FIO_RESERVED.contains(&key.as_str()) {
                    return Err(cx.err(j.span(), &full, "is set by fslab (JSON output on stdout)"));
                }
                let text = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => u8::from(*b).to_string(),
                    _ => return Err(cx.err(j.span(), &full, "must be a string, number or boolean")),
                };
                if text.contains(['\n', '\r', '\0']) {
                    return Err(cx.err(j.span(), &full, "must be a single line"));
                }
                if key == "name" {
                    if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
                        return Err(cx.err(j.span(), &full, "must be a word of letters, digits, `_`, `-` or `.`"));
                    }
                    name = text;
                } else {
                    options.push((key.clone(), text));
                }
            }
            FioJob::Inline { name, options }
        }
    };
    Ok(WorkloadParams::Fio { job })
}

/// Most concurrent users a `filemix` level may run.
const MAX_USERS: i64 = 1024;
/// Smallest and largest per-user `filemix` working set.
const MIN_WORKING_SET: u64 = 64 << 10;
const MAX_WORKING_SET: u64 = 1 << 30;

fn resolve_filemix(cx: &Ctx, table: &WorkloadTable) -> Result<WorkloadParams> {
    let users = levels(cx, table.users.as_ref(), "users", vec![1, 8], "[1, 8, 16]", MAX_USERS)?;
    let duration = match &table.duration {
        None => Duration::from_secs(60),
        Some(d) if d.get_ref().0 < Duration::from_secs(1) => {
            return Err(cx.err(d.span(), "duration", "must be at least 1s"));
        }
        Some(d) => d.get_ref().0,
    };
    let seed = match &table.seed {
        None => None,
        Some(s) if *s.get_ref() < 0 => return Err(cx.err(s.span(), "seed", "must not be negative")),
        Some(s) => Some(*s.get_ref() as u64),
    };
    let working_set = match &table.working_set {
        None => 1 << 20,
        Some(w) if !(MIN_WORKING_SET..=MAX_WORKING_SET).contains(&w.get_ref().0) => {
            return Err(cx.err(w.span(), "working_set", "must be between 64KiB and 1GiB (per user)"));
        }
        Some(w) => w.get_ref().0,
    };
    Ok(WorkloadParams::Filemix { users, duration, seed, working_set })
}
fn resolve_coldstart(cx: &Ctx, table: &WorkloadTable) -> Result<WorkloadParams> {
    let files = match &table.files {
        None => 300,
        Some(f) if (1..=100_000).contains(f.get_ref()) => *f.get_ref() as u64,
        Some(f) => return Err(cx.err(f.span(), "files", "must be between 1 and 100000")),
    };
    let scale = match &table.scale {
        None => 1.0,
        Some(s) if *s.get_ref() > 0.0 && *s.get_ref() <= 1.0 => *s.get_ref(),
        Some(s) => return Err(cx.err(s.span(), "scale", "must be greater than 0 and at most 1")),
    };
    let compressibility = match &table.compressibility {
        None => 0.6,
        Some(c) if (0.0..=1.0).contains(c.get_ref()) => *c.get_ref(),
        Some(c) => return Err(cx.err(c.span(), "compressibility", "must be between 0 and 1")),
    };
    let readers = levels(cx, table.readers.as_ref(), "readers", vec![1, 2, 4], "[1, 2, 4]", MAX_CONCURRENCY)?;
    Ok(WorkloadParams::Coldstart { files, scale, compressibility, readers })
}
