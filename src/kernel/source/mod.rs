//! Where a kernel under test comes from: one file per kind of source, each
//! implementing [`SourceKind`], listed by one line in [`kernel_sources!`].
//!
//! A variant's `kernel = …` is offered to each kind in the list's order;
//! the first that [claims](SourceKind::claims) it parses it (checking it
//! now, so a bad reference fails when the file is read, naming file, line
//! and key). What parsing gives is the kind's own type: it is stored with
//! the experiment (the record of exactly what ran), resolved into bootable
//! files ([`SourceKind::resolve`]), listed and fetched by `fslab kernel`,
//! and kept by `fslab kernel prune` ([`SourceKind::keeps`]). The kinds that
//! fslab builds share one pipeline ([`super::build`]): each gives it a
//! [`super::build::Tree`], the pipeline does the rest.
//!
//! Adding a kind (a Fedora or Ubuntu archive, say) is a file here with its
//! type, its `SourceKind` impl and, when it is built from source, its
//! `Tree` impl, plus its line in the list below; nothing else names the
//! kinds.

pub mod build_tree;
pub mod deb_file;
pub mod debian_image;
pub mod debian_source;
pub mod git;
pub mod image;
pub mod local_tree;

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::build::{BuildRequest, BuildToolsMissing, ConfigBase, KernelBuild, SetRejected};
use super::KernelArtifacts;
use crate::keys::Source;

/// A variant's `kernel` value as written: a text (a path, `debian:6.1-cloud`)
/// or a table (`{ image = … }`, `{ source = … }`, `{ git = …, rev = … }`).
#[derive(Clone, Copy, Debug)]
pub enum Form<'a> {
    Text(&'a str),
    Table(&'a toml::Table),
}

impl<'a> Form<'a> {
    pub fn of(value: &'a toml::Value) -> Option<Form<'a>> {
        match value {
            toml::Value::String(s) => Some(Form::Text(s)),
            toml::Value::Table(t) => Some(Form::Table(t)),
            _ => None,
        }
    }

    /// The text, when the form is one.
    pub fn text(&self) -> Option<&'a str> {
        match self {
            Form::Text(s) => Some(s),
            Form::Table(_) => None,
        }
    }

    /// Does the form (a table) have `key`?
    pub fn has(&self, key: &str) -> bool {
        matches!(self, Form::Table(t) if t.contains_key(key))
    }

    /// The text of `key` in a table form.
    pub fn str_key(&self, key: &str) -> Option<&'a str> {
        match self {
            Form::Table(t) => t.get(key).and_then(toml::Value::as_str),
            Form::Text(_) => None,
        }
    }
}

/// What a kind needs to parse a form: where errors point, what relative
/// paths are relative to, and the kernel cache (archive lists, source
/// trees, prepared configs).
pub struct ParseContext<'a> {
    pub src: &'a Source<'a>,
    /// The `kernel` value's span.
    pub span: Range<usize>,
    pub cache: &'a Path,
}

impl ParseContext<'_> {
    /// `file:line:col: \`key\`: message` at the kernel value.
    pub fn err(&self, key: &str, message: impl std::fmt::Display) -> anyhow::Error {
        self.src.err(self.span.clone(), key, message)
    }

    /// The same, marked as the file's fault (exit 2).
    pub fn usage(&self, key: &str, message: impl std::fmt::Display) -> anyhow::Error {
        crate::exit::usage(self.err(key, message))
    }

    /// A path of the file, absolute.
    pub fn path(&self, text: &str) -> PathBuf {
        self.src.resolve_path(text)
    }
}

/// One kernel the kinds offer for `fslab kernel list --available`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OfferedKernel {
    /// What a variant writes: `debian:6.1-cloud`.
    pub kernel: String,
    /// The kind that offers it ([`SourceKind::NAME`]).
    pub kind: String,
    pub release: String,
    /// The package version (or commit) it is.
    pub version: String,
    /// Where it comes from: an archive suite, a repository.
    pub from: String,
    /// Its variant of the kernel (`cloud`, `rt`, `generic`).
    pub flavour: String,
    /// Download size, when known.
    pub bytes: Option<u64>,
    /// Already downloaded or built here.
    pub cached: bool,
}

/// One kind of kernel source. The type is what parsing made of the file's
/// value and what the experiment stores: it names exactly what ran.
pub trait SourceKind: Sized {
    /// How listings, errors and the docs name the kind.
    const NAME: &'static str;
    /// The forms it takes in an experiment file, for errors and `--help`.
    const FORMS: &'static str;
    /// The text scheme it owns (`debian:`), if any: a near miss is
    /// answered with the nearest scheme.
    const SCHEME: Option<&'static str> = None;

    /// Is `form` this kind's? Cheap: no network, no building (a path is
    /// looked at, relative to the file).
    fn claims(form: &Form, cx: &ParseContext) -> bool;
    /// Check what `form` names and resolve it as far as the file needs
    /// (a package chosen, a config made, a commit resolved).
    fn parse(form: &Form, cx: &ParseContext) -> Result<Self>;
    /// `uname -r` of the kernel.
    fn release(&self) -> &str;
    /// As the user named it.
    fn shown(&self) -> String;
    /// What it resolved to, for plans and reports (the package and its
    /// version, the commit, the files).
    fn origin(&self) -> String;
    /// The files a VM boots: downloaded, unpacked, built as needed.
    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts>;
    /// The prepared build of the kinds fslab builds.
    fn build(&self) -> Option<&KernelBuild> {
        None
    }
    /// The same source built as `request` asks (bisect-kconfig's steps).
    fn with_request(&self, _request: &BuildRequest, _cache: &Path) -> Result<Self> {
        anyhow::bail!("a {} kernel is not built by fslab: it has no build to change", Self::NAME)
    }
    /// The names in the kernel cache this kernel needs (cache entry keys,
    /// source tree keys, downloaded files): `fslab kernel prune` keeps them.
    fn keeps(&self) -> Vec<String>;
    /// What this kind offers for `kernel list --available`.
    fn offered(_cache: &Path) -> Result<Vec<OfferedKernel>> {
        Ok(Vec::new())
    }
}

/// What each line of the list declares: the enum variant and the kind's type.
macro_rules! kernel_sources {
    ($($(#[$attr:meta])* $variant:ident => $ty:ty,)+) => {
        /// A variant's kernel, as its kind resolved it: one variant per
        /// kind of [`SourceKind`], in the order kinds are offered a form.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum KernelSource {
            $($(#[$attr])* $variant($ty),)+
        }

        impl KernelSource {
            /// The kinds, in the order they are offered a form: name, forms, scheme.
            pub const KINDS: &'static [(&'static str, &'static str, Option<&'static str>)] =
                &[$((<$ty as SourceKind>::NAME, <$ty as SourceKind>::FORMS, <$ty as SourceKind>::SCHEME),)+];

            /// The first kind that claims `form`, parsing it.
            fn parse_claimed(form: &Form, cx: &ParseContext) -> Option<Result<KernelSource>> {
                $(if <$ty as SourceKind>::claims(form, cx) {
                    return Some(<$ty as SourceKind>::parse(form, cx).map(KernelSource::$variant));
                })+
                None
            }

            /// Every kind's offer, for `kernel list --available`.
            pub fn offered(cache: &Path) -> Result<Vec<OfferedKernel>> {
                let mut all = Vec::new();
                $(all.extend(<$ty as SourceKind>::offered(cache)?);)+
                Ok(all)
            }

            /// The kind's name.
            pub fn kind(&self) -> &'static str {
                match self { $(KernelSource::$variant(_) => <$ty as SourceKind>::NAME,)+ }
            }
            pub fn release(&self) -> &str {
                match self { $(KernelSource::$variant(s) => s.release(),)+ }
            }
            pub fn shown(&self) -> String {
                match self { $(KernelSource::$variant(s) => s.shown(),)+ }
            }
            pub fn origin(&self) -> String {
                match self { $(KernelSource::$variant(s) => s.origin(),)+ }
            }
            pub fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
                match self { $(KernelSource::$variant(s) => s.resolve(cache),)+ }
            }
            pub fn build(&self) -> Option<&KernelBuild> {
                match self { $(KernelSource::$variant(s) => s.build(),)+ }
            }
            pub fn with_request(&self, request: &BuildRequest, cache: &Path) -> Result<KernelSource> {
                match self {
                    $(KernelSource::$variant(s) => s.with_request(request, cache).map(KernelSource::$variant),)+
                }
            }
            pub fn keeps(&self) -> Vec<String> {
                match self { $(KernelSource::$variant(s) => s.keeps(),)+ }
            }
        }
    };
}

kernel_sources! {
    #[serde(alias = "Debian")]
    DebianImage => debian_image::DebianImage,
    DebianSource => debian_source::DebianSource,
    Git => git::GitSource,
    LocalTree => local_tree::LocalTree,
    BuildTree => build_tree::BuildTree,
    Deb => deb_file::DebFile,
    Image => image::Image,
}

impl KernelSource {
    /// What `value` (a variant's `kernel`) names, checked; errors are
    /// located at the value and say which forms exist.
    pub fn parse(value: &toml::Value, cx: &ParseContext) -> Result<KernelSource> {
        let Some(form) = Form::of(value) else {
            return Err(cx.usage("kernel", format!("must be a text or a table, not a {}", value.type_str())));
        };
        if let Some(parsed) = Self::parse_claimed(&form, cx) {
            return parsed;
        }
        Err(cx.usage("kernel", Self::unclaimed(&form, cx)))
    }

    /// A kernel named on the command line (`debian:6.1-cloud`, a path,
    /// relative to the current directory), as a file would name it.
    pub fn from_argument(value: &toml::Value, cache: &Path) -> Result<KernelSource> {
        let text =
            toml::to_string(&toml::Table::from_iter([("kernel".to_string(), value.clone())])).unwrap_or_default();
        let here = std::env::current_dir().unwrap_or_default();
        let src = Source { text: &text, origin: "the command line", base_dir: &here };
        KernelSource::parse(value, &ParseContext { src: &src, span: 0..text.len(), cache })
    }

    /// Why no kind took `form`: a near miss of a scheme, a path that does
    /// not exist, or a table of no kind's keys, with the forms that exist.
    fn unclaimed(form: &Form, cx: &ParseContext) -> String {
        let forms = || Self::KINDS.iter().map(|(_, f, _)| format!("  {f}")).collect::<Vec<_>>().join("\n");
        match form {
            Form::Text(text) => {
                if let Some((scheme, _)) = scheme_of(text) {
                    let schemes: Vec<&str> = Self::KINDS.iter().filter_map(|(_, _, s)| *s).collect();
                    let nearest = schemes.iter().min_by_key(|s| edit_distance(&format!("{scheme}:"), s));
                    let hint = nearest
                        .filter(|s| edit_distance(&format!("{scheme}:"), s) <= 3)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    return format!("`{scheme}:` is not a kernel source{hint}; a kernel is one of:\n{}", forms());
                }
                let path = cx.path(text);
                format!("{} does not exist; a kernel is one of:\n{}", path.display(), forms())
            }
            Form::Table(t) => {
                let keys: Vec<&str> = t.keys().map(String::as_str).collect();
                format!("a table of keys {keys:?} is no kind of kernel; a kernel is one of:\n{}", forms())
            }
        }
    }
}

/// `("debian", "6.1")` for `debian:6.1`; None for paths (`./a:b` has a
/// slash or dot before the colon; a scheme is letters).
pub fn scheme_of(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once(':')?;
    (!scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic())).then_some((scheme, rest))
}

/// Levenshtein distance, for "did you mean" (a few short words: no crate
/// needed for it).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The path a text form names (relative to the file), when it is no scheme.
pub(crate) fn local_path(form: &Form, cx: &ParseContext) -> Option<PathBuf> {
    let text = form.text().filter(|t| !t.trim().is_empty() && scheme_of(t).is_none())?;
    Some(cx.path(text))
}

/// A path the file names must exist (as `key`), else a usage error.
pub(crate) fn existing(cx: &ParseContext, key: &str, text: &str) -> Result<PathBuf> {
    if text.trim().is_empty() {
        return Err(cx.usage(key, "must be a path (a non-empty string)"));
    }
    let path = cx.path(text);
    if !path.exists() {
        return Err(cx.usage(key, format!("{} does not exist", path.display())));
    }
    Ok(path)
}

/// Does `path` start with the `ar` magic of a Debian package?
pub(crate) fn is_deb(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"!<arch>\n"
}

/// The keys every built kind shares (`config`, `set`, `patches`), read
/// from a table form whose own keys are `own`: the config request and the
/// patch files. Any other key is refused, naming the kind's keys.
pub(crate) fn build_keys(form: &Form, cx: &ParseContext, own: &[&str]) -> Result<(BuildRequest, Vec<PathBuf>)> {
    let Form::Table(t) = form else { return Err(cx.usage("kernel", "a built kernel is a table")) };
    let shared = ["config", "set", "patches"];
    if let Some(k) = t.keys().find(|k| !own.contains(&k.as_str()) && !shared.contains(&k.as_str())) {
        let keys: Vec<&str> = own.iter().chain(shared.iter()).copied().collect();
        return Err(cx.usage(&format!("kernel.{k}"), format!("is not a setting of this kernel ({})", keys.join(", "))));
    }
    let text = |key: &str, v: &toml::Value| -> Result<String> {
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
            _ => Err(cx.usage(key, "must be a non-empty string")),
        }
    };
    let config = match t.get("config").map(|c| text("kernel.config", c)).transpose()?.as_deref() {
        None | Some("minimal") => ConfigBase::Minimal,
        Some("debian") => ConfigBase::Debian,
        Some(file) => {
            let path = cx.path(file);
            if !path.is_file() {
                let msg = format!("{} does not exist (write \"minimal\", \"debian\" or a config file)", path.display());
                return Err(cx.usage("kernel.config", msg));
            }
            ConfigBase::File(path)
        }
    };
    let mut set = std::collections::BTreeMap::new();
    if let Some(v) = t.get("set") {
        let Some(table) = v.as_table() else {
            return Err(cx.usage("kernel.set", "must be a table of Kconfig options"));
        };
        for (name, value) in table {
            let key = format!("kernel.set.{name}");
            let symbol = name.strip_prefix("CONFIG_").unwrap_or(name);
            if symbol.is_empty() || !symbol.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(cx.usage(&key, "is not a Kconfig symbol"));
            }
            let value = match value {
                toml::Value::String(s) if !s.is_empty() => s.clone(),
                toml::Value::Boolean(b) => if *b { "y" } else { "n" }.to_string(),
                toml::Value::Integer(i) => i.to_string(),
                _ => return Err(cx.usage(&key, "must be \"y\", \"m\", \"n\", a string or a number")),
            };
            set.insert(symbol.to_string(), value);
        }
    }
    let mut patches = Vec::new();
    if let Some(v) = t.get("patches") {
        let Some(list) = v.as_array() else {
            return Err(cx.usage("kernel.patches", "must be a list of patch files"));
        };
        for p in list {
            let path = cx.path(&text("kernel.patches", p)?);
            if !path.is_file() {
                return Err(cx.usage("kernel.patches", format!("{} does not exist", path.display())));
            }
            patches.push(path);
        }
    }
    Ok((BuildRequest { config, set }, patches))
}

/// A failed [`super::build::prepare`] as the file's error: a `set` the tree
/// cannot honour is the file's (exit 2), missing build tools the host's
/// (exit 3).
pub(crate) fn build_error(cx: &ParseContext, e: anyhow::Error) -> anyhow::Error {
    if let Some(rejected) = e.downcast_ref::<SetRejected>() {
        cx.usage("kernel.set", &rejected.0)
    } else if e.downcast_ref::<BuildToolsMissing>().is_some() {
        crate::exit::environment(cx.err("kernel", format!("{e:#}")))
    } else {
        cx.err("kernel", format!("{e:#}"))
    }
}

/// ` + a.patch, b.patch` (two variants can differ only by their patches).
pub(crate) fn patch_names(patches: &[PathBuf]) -> String {
    if patches.is_empty() {
        return String::new();
    }
    let names: Vec<String> =
        patches.iter().map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect();
    format!(" + {}", names.join(", "))
}

/// Apply `patch` in `dir` (`patch -p1`), or fail naming both.
pub(crate) fn apply_patch(patch: &Path, dir: &Path, onto: &str) -> Result<()> {
    // patch runs in the tree: a path relative to where fslab was started would not be found.
    let file = std::fs::canonicalize(patch).map_err(|e| anyhow::anyhow!("patch {}: {e}", patch.display()))?;
    let out = std::process::Command::new("patch")
        .args(["-p1", "--forward", "--batch", "-i"])
        .arg(&file)
        .current_dir(dir)
        .output()
        .map_err(|e| anyhow::anyhow!("running patch: {e}"))?;
    if !out.status.success() {
        let tail = |b: &[u8], n: usize| {
            let text = String::from_utf8_lossy(b);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        anyhow::bail!(
            "patch {} does not apply to {onto}:\n{}{}",
            patch.display(),
            tail(&out.stdout, 15),
            tail(&out.stderr, 5)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx_parse(text: &str, cache: &Path) -> Result<KernelSource> {
        let doc = format!("kernel = {text}\n");
        let value: toml::Table = toml::from_str(&doc).unwrap();
        let src = Source { text: &doc, origin: "exp.toml", base_dir: cache };
        KernelSource::parse(&value["kernel"], &ParseContext { src: &src, span: 9..doc.len(), cache })
    }

    #[test]
    fn a_near_miss_of_a_scheme_is_answered_with_the_nearest_kind() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", cx_parse("\"debain:6.1\"", dir.path()).unwrap_err());
        assert!(err.contains("exp.toml:1:10: `kernel`"), "{err}");
        assert!(err.contains("`debain:` is not a kernel source (did you mean `debian:`?)"), "{err}");
        for (name, _, _) in KernelSource::KINDS {
            let forms = KernelSource::KINDS.iter().find(|k| k.0 == *name).unwrap().1;
            assert!(err.contains(forms), "{name}'s forms missing: {err}");
        }
        let err = format!("{:#}", cx_parse("\"zzzzzz:1\"", dir.path()).unwrap_err());
        assert!(err.contains("`zzzzzz:` is not a kernel source;"), "no hint for a far miss: {err}");
        let err = format!("{:#}", cx_parse("\"nope/bzImage\"", dir.path()).unwrap_err());
        assert!(err.contains("nope/bzImage does not exist"), "{err}");
        let err = format!("{:#}", cx_parse("{ colour = \"red\" }", dir.path()).unwrap_err());
        assert!(err.contains("[\"colour\"] is no kind of kernel"), "{err}");
        assert_eq!(
            crate::exit::classify(&cx_parse("\"debain:6.1\"", dir.path()).unwrap_err()),
            crate::exit::Exit::Usage
        );
    }

    #[test]
    fn schemes_are_letters_before_a_colon() {
        assert_eq!(scheme_of("debian:6.1"), Some(("debian", "6.1")));
        assert_eq!(scheme_of("./a:b"), None);
        assert_eq!(scheme_of("/boot/vmlinuz"), None);
        assert_eq!(edit_distance("debain:", "debian:"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn every_kind_has_a_name_and_forms_and_names_are_unique() {
        let mut names: Vec<&str> = KernelSource::KINDS.iter().map(|k| k.0).collect();
        assert!(KernelSource::KINDS.iter().all(|k| !k.0.is_empty() && k.1.contains("kernel")));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KernelSource::KINDS.len());
    }
}
