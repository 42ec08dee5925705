//! Where a variant's runs happen: on the host (no `kernel` key), or in a
//! virtual machine booting the variant's own kernel (`kernel = "…"`, sized
//! and run as `vm = { … }` says).

use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::kernel::build::{BuildRequest, BuildSource, BuildToolsMissing, ConfigBase, KernelBuild, SetRejected};
use crate::kernel::debian::{Archive, ResolveError, Wanted, SCHEME};
use crate::kernel::KernelSource;
use crate::keys::Source;
use crate::testbed::{FsKind, Medium};
use crate::units::{Bytes, Seconds};
use crate::vm::Accel;

/// A variant's kernel, as the file names it (paths absolute), checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelSpec {
    pub source: KernelSource,
    /// The release the image's header (or the package's name) gives.
    pub release: String,
}

/// When a kernel variant's VM is booted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootPolicy {
    /// One VM per variant, booted for its first run and kept for the rest
    /// (each run still gets a fresh filesystem and, when cold, dropped
    /// caches); a kernel that fails to boot fails the variant's runs at once.
    #[default]
    PerVariant,
    /// A fresh VM for every run: nothing carries over from run to run.
    PerRun,
}

/// How a kernel variant's VM is sized and run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSpec {
    pub cpus: u32,
    pub memory_mib: u64,
    pub accel: Accel,
    pub boot: BootPolicy,
    /// From starting QEMU to the guest being ready.
    pub boot_timeout: Duration,
    /// Extra kernel command line words.
    pub cmdline: Vec<String>,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            cpus: 2,
            memory_mib: 2048,
            accel: Accel::Auto,
            boot: BootPolicy::PerVariant,
            boot_timeout: Duration::from_secs(300),
            cmdline: Vec::new(),
        }
    }
}

/// `vm = { … }` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmKeys {
    cpus: Option<Spanned<u32>>,
    memory: Option<Spanned<Bytes>>,
    accel: Option<Spanned<String>>,
    boot: Option<Spanned<String>>,
    boot_timeout: Option<Spanned<Seconds>>,
    cmdline: Option<Spanned<Vec<String>>>,
}

/// Most vCPUs and memory a guest may be given.
const MAX_CPUS: u32 = 256;
const MIN_MEMORY_MIB: u64 = 256;

/// Resolve `kernel` (a path, or `{ image, modules, config }`) and `vm`.
/// Without a kernel the variant runs on the host and `vm` (often inherited
/// from `[defaults]`) does not apply.
pub fn resolve(
    src: &Source,
    kernel: Option<&Spanned<toml::Value>>,
    vm: Option<&Spanned<VmKeys>>,
    fs: &FsKind,
    kernel_cache: &std::path::Path,
) -> Result<(Option<KernelSpec>, Option<VmSpec>)> {
    let Some(kernel) = kernel else { return Ok((None, None)) };
    if fs.medium() == Medium::Directory {
        return Err(src.err(
            kernel.span(),
            "kernel",
            format!("cannot be used with fs = \"{fs}\": the guest builds its own testbed"),
        ));
    }
    if let Some(wanted) = kernel.get_ref().as_str().and_then(Wanted::parse) {
        let wanted = wanted.map_err(|e| src.err(kernel.span(), "kernel", format!("{e:#}")))?;
        let found = Archive::at(kernel_cache).resolve(&wanted).map_err(|e| {
            let located = src.err(kernel.span(), "kernel", &e);
            match e {
                ResolveError::Offline(_) => crate::exit::environment(located),
                ResolveError::NoMatch(_) => crate::exit::usage(located),
                ResolveError::Other(_) => located,
            }
        })?;
        let release = found.package.kernel_release().to_string();
        return Ok((Some(KernelSpec { source: KernelSource::Debian(found), release }), Some(resolve_vm(src, vm)?)));
    }
    if let Some(table) = kernel.get_ref().as_table().filter(|t| t.contains_key("source")) {
        let build = built_kernel(src, kernel, table, kernel_cache)?;
        let release = build.release.clone();
        return Ok((Some(KernelSpec { source: KernelSource::Build(build), release }), Some(resolve_vm(src, vm)?)));
    }
    let path = |key: &str, value: &toml::Value| -> Result<std::path::PathBuf> {
        match value.as_str() {
            Some(p) if !p.trim().is_empty() => Ok(src.resolve_path(p)),
            _ => Err(src.err(kernel.span(), key, "must be a path (a string)")),
        }
    };
    let (image, modules, config) = match kernel.get_ref() {
        toml::Value::String(_) => (path("kernel", kernel.get_ref())?, None, None),
        toml::Value::Table(t) => {
            if let Some(k) = t.keys().find(|k| !["image", "modules", "config"].contains(&k.as_str())) {
                let msg =
                    "is not a kernel setting (a path, { image, modules, config }, or { source, config, set, patches })";
                return Err(src.err(kernel.span(), &format!("kernel.{k}"), msg));
            }
            let Some(image) = t.get("image") else {
                return Err(src.err(kernel.span(), "kernel.image", "a kernel table needs `image = \"…/bzImage\"`"));
            };
            (
                path("kernel.image", image)?,
                t.get("modules").map(|m| path("kernel.modules", m)).transpose()?,
                t.get("config").map(|c| path("kernel.config", c)).transpose()?,
            )
        }
        other => {
            let msg = format!("must be a path or {{ image, modules, config }}, not a {}", other.type_str());
            return Err(src.err(kernel.span(), "kernel", msg));
        }
    };
    for p in [Some(&image), modules.as_ref(), config.as_ref()].into_iter().flatten() {
        if !p.exists() {
            return Err(src.err(kernel.span(), "kernel", format!("{} does not exist", p.display())));
        }
    }
    let checked = KernelSource::detect(&image, modules.as_deref(), config.as_deref())
        .and_then(|source| Ok((source.check()?, source)));
    let (release, source) = checked.map_err(|e| src.err(kernel.span(), "kernel", format!("{e:#}")))?;
    Ok((Some(KernelSpec { source, release }), Some(resolve_vm(src, vm)?)))
}

/// `kernel = { source, config, set, patches }`: the source found, the
/// config made and every `set` option checked (see `kernel::build`).
fn built_kernel(
    src: &Source,
    kernel: &Spanned<toml::Value>,
    t: &toml::Table,
    kernel_cache: &std::path::Path,
) -> Result<KernelBuild> {
    let err = |key: &str, msg: String| src.err(kernel.span(), key, msg);
    if let Some(k) = t.keys().find(|k| !["source", "config", "set", "patches"].contains(&k.as_str())) {
        return Err(err(
            &format!("kernel.{k}"),
            "is not a setting of a built kernel (source, config, set, patches)".into(),
        ));
    }
    let text = |key: &str, v: &toml::Value| -> Result<String> {
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
            _ => Err(err(key, "must be a non-empty string".into())),
        }
    };
    let reference = text("kernel.source", &t["source"])?;
    let source = match Wanted::parse(&reference) {
        Some(wanted) => {
            let wanted = wanted.map_err(|e| err("kernel.source", format!("{e:#}")))?;
            if let Some(fl) = &wanted.flavour {
                return Err(crate::exit::usage(err(
                    "kernel.source",
                    format!("a source package has no flavour (`-{fl}`): write {SCHEME}{}", wanted.version),
                )));
            }
            let archive = Archive::at(kernel_cache);
            let package = archive.resolve_source(&wanted.version).map_err(|e| {
                let located = err("kernel.source", e.to_string());
                match e {
                    ResolveError::Offline(_) => crate::exit::environment(located),
                    ResolveError::NoMatch(_) => crate::exit::usage(located),
                    ResolveError::Other(_) => located,
                }
            })?;
            BuildSource::Debian { archive: archive.root().to_path_buf(), package }
        }
        None => {
            let tree = src.resolve_path(&reference);
            if !tree.is_dir() {
                return Err(crate::exit::usage(err(
                    "kernel.source",
                    format!("{} is not a directory (a kernel source tree) nor {SCHEME}<version>", tree.display()),
                )));
            }
            BuildSource::Tree(tree)
        }
    };
    let config = match t.get("config").map(|c| text("kernel.config", c)).transpose()?.as_deref() {
        None | Some("minimal") => ConfigBase::Minimal,
        Some("debian") => ConfigBase::Debian,
        Some(file) => {
            let path = src.resolve_path(file);
            if !path.is_file() {
                let msg = format!("{} does not exist (write \"minimal\", \"debian\" or a config file)", path.display());
                return Err(crate::exit::usage(err("kernel.config", msg)));
            }
            ConfigBase::File(path)
        }
    };
    let mut set = std::collections::BTreeMap::new();
    if let Some(v) = t.get("set") {
        let Some(table) = v.as_table() else {
            return Err(crate::exit::usage(err("kernel.set", "must be a table of Kconfig options".into())));
        };
        for (name, value) in table {
            let key = format!("kernel.set.{name}");
            let symbol = name.strip_prefix("CONFIG_").unwrap_or(name);
            if symbol.is_empty() || !symbol.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(crate::exit::usage(err(&key, "is not a Kconfig symbol".into())));
            }
            let value = match value {
                toml::Value::String(s) if !s.is_empty() => s.clone(),
                toml::Value::Boolean(b) => if *b { "y" } else { "n" }.to_string(),
                toml::Value::Integer(i) => i.to_string(),
                _ => {
                    return Err(crate::exit::usage(err(
                        &key,
                        "must be \"y\", \"m\", \"n\", a string or a number".into(),
                    )))
                }
            };
            set.insert(symbol.to_string(), value);
        }
    }
    let mut patches = Vec::new();
    if let Some(v) = t.get("patches") {
        let Some(list) = v.as_array() else {
            return Err(crate::exit::usage(err("kernel.patches", "must be a list of patch files".into())));
        };
        for p in list {
            let path = src.resolve_path(&text("kernel.patches", p)?);
            if !path.is_file() {
                return Err(crate::exit::usage(err("kernel.patches", format!("{} does not exist", path.display()))));
            }
            patches.push(path);
        }
    }
    let req = BuildRequest { reference, source, config, set, patches };
    crate::kernel::build::prepare(&req, kernel_cache).map_err(|e| {
        if let Some(rejected) = e.downcast_ref::<SetRejected>() {
            crate::exit::usage(err("kernel.set", rejected.0.clone()))
        } else if e.downcast_ref::<BuildToolsMissing>().is_some() {
            crate::exit::environment(err("kernel", format!("{e:#}")))
        } else {
            err("kernel", format!("{e:#}"))
        }
    })
}

fn resolve_vm(src: &Source, vm: Option<&Spanned<VmKeys>>) -> Result<VmSpec> {
    let mut spec = VmSpec::default();
    let Some(vm) = vm else { return Ok(spec) };
    let k = vm.get_ref();
    if let Some(c) = &k.cpus {
        if !(1..=MAX_CPUS).contains(c.get_ref()) {
            return Err(src.err(c.span(), "vm.cpus", format!("must be between 1 and {MAX_CPUS}")));
        }
        spec.cpus = *c.get_ref();
    }
    if let Some(m) = &k.memory {
        let mib = m.get_ref().0 >> 20;
        if mib < MIN_MEMORY_MIB {
            return Err(src.err(m.span(), "vm.memory", format!("must be at least {MIN_MEMORY_MIB}MiB")));
        }
        spec.memory_mib = mib;
    }
    if let Some(a) = &k.accel {
        spec.accel = Accel::parse(a.get_ref()).map_err(|e| src.err(a.span(), "vm.accel", e))?;
    }
    if let Some(b) = &k.boot {
        spec.boot = match b.get_ref().as_str() {
            "per-variant" => BootPolicy::PerVariant,
            "per-run" => BootPolicy::PerRun,
            _ => return Err(src.err(b.span(), "vm.boot", "must be `per-variant` or `per-run`")),
        };
    }
    if let Some(t) = &k.boot_timeout {
        if t.get_ref().0 < Duration::from_secs(5) {
            return Err(src.err(t.span(), "vm.boot_timeout", "must be at least 5s"));
        }
        spec.boot_timeout = t.get_ref().0;
    }
    if let Some(c) = &k.cmdline {
        if let Some(word) = c.get_ref().iter().find(|w| w.is_empty() || w.contains(char::is_whitespace)) {
            return Err(src.err(c.span(), "vm.cmdline", format!("{word:?} is not one kernel command line word")));
        }
        spec.cmdline = c.get_ref().clone();
    }
    Ok(spec)
}
