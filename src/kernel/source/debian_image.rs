//! A kernel image package of Debian's archive by version:
//! `kernel = "debian:6.1-cloud"` ([`super::super::debian`] finds it with a
//! private apt setup, downloads it once and it is unpacked like any `.deb`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{Form, OfferedKernel, ParseContext, SourceKind};
use crate::kernel::debian::{Archive, Package, ResolveError, Wanted, INDEX_MAX_AGE, SCHEME};
use crate::kernel::KernelArtifacts;

/// The package chosen for a reference, with the archive it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebianImage {
    /// As written (`debian:6.1-cloud`).
    pub reference: String,
    /// `<cache>/debian-archive`.
    pub archive: PathBuf,
    pub package: Package,
}

impl DebianImage {
    /// The newest package of the archive in `cache` that `reference` names.
    pub fn find(reference: &str, cache: &Path) -> std::result::Result<DebianImage, ResolveError> {
        let wanted = match Wanted::parse(reference) {
            Some(Ok(w)) => w,
            Some(Err(e)) => return Err(ResolveError::NoMatch(format!("{e:#}"))),
            None => return Err(ResolveError::NoMatch(format!("`{reference}` is not a {SCHEME} reference"))),
        };
        let archive = Archive::at(cache);
        let package = archive.resolve(&wanted)?;
        Ok(DebianImage { reference: wanted.to_string(), archive: archive.root().to_path_buf(), package })
    }
}

/// A resolve error as the file's (exit 2), the environment's (exit 3) or neither.
pub(crate) fn classified(e: ResolveError, located: anyhow::Error) -> anyhow::Error {
    match e {
        ResolveError::Offline(_) => crate::exit::environment(located),
        ResolveError::NoMatch(_) => crate::exit::usage(located),
        ResolveError::Other(_) => located,
    }
}

impl SourceKind for DebianImage {
    const NAME: &'static str = "debian-image";
    const FORMS: &'static str =
        "kernel = \"debian:VERSION[-FLAVOUR]\" (a kernel image package of Debian's archive, e.g. debian:6.1-cloud)";
    const SCHEME: Option<&'static str> = Some(SCHEME);

    fn claims(form: &Form, _cx: &ParseContext) -> bool {
        form.text().is_some_and(|t| t.starts_with(SCHEME))
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let text = form.text().unwrap_or_default();
        DebianImage::find(text, cx.cache).map_err(|e| {
            let located = cx.err("kernel", &e);
            classified(e, located)
        })
    }

    fn release(&self) -> &str {
        self.package.kernel_release()
    }

    fn shown(&self) -> String {
        self.reference.clone()
    }

    fn origin(&self) -> String {
        format!("{} = {} {} ({})", self.reference, self.package.name, self.package.version, self.package.suite)
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        let p = &self.package;
        let deb = Archive::at_root(&self.archive)
            .download(p)
            .with_context(|| format!("{}: {} {} ({})", self.reference, p.name, p.version, p.suite))?;
        crate::kernel::unpacked_deb(cache, &deb, self.reference.clone(), Some(p.recorded()))
    }

    fn keeps(&self) -> Vec<String> {
        // The unpacked entry is keyed by the package's SHA-256, which the
        // downloaded file has too.
        vec![self.package.sha256.clone()]
    }

    fn offered(cache: &Path) -> Result<Vec<OfferedKernel>> {
        let archive = Archive::at(cache);
        archive.refresh(INDEX_MAX_AGE).map_err(classified_plain)?;
        let debs = archive.downloaded();
        Ok(archive
            .index()?
            .iter()
            .map(|p| OfferedKernel {
                kernel: match &p.flavour {
                    Some(f) => format!("{SCHEME}{}-{f}", p.abi),
                    None => format!("{SCHEME}{}", p.abi),
                },
                kind: Self::NAME.to_string(),
                release: p.kernel_release().to_string(),
                version: p.version.clone(),
                from: p.suite.clone(),
                flavour: p.flavour_name().to_string(),
                bytes: Some(p.size),
                cached: debs.iter().any(|d| {
                    d.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}_{}_", p.name, p.version)))
                }),
            })
            .collect())
    }
}

/// A resolve error classified, with its own words.
pub(crate) fn classified_plain(e: ResolveError) -> anyhow::Error {
    let text = anyhow::anyhow!("{e}");
    classified(e, text)
}
