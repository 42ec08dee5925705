//! Scaling a listing down (a deterministic subset with the same shape) or
//! up (whole copies side by side).

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Result};

use super::{Entry, EntryKind, Listing, MAX_SCALE};

impl Listing {
    /// A listing with about `scale` times the files and bytes of this one.
    ///
    /// For `0 < scale < 1` it keeps a deterministic subset of the regular
    /// files such that both the file count and the total bytes are close to
    /// `scale` × the original (within 1% for the Raspberry Pi listing at
    /// scale ≥ 0.02; at very small scales the count drifts low because the
    /// byte budget holds only a few files). Files are taken in descending
    /// size order with error diffusion on bytes: a file is kept when the
    /// bytes "owed" so far reach half its size. Within each size band this
    /// keeps every 1/scale-th file, so kept files are spread over the whole
    /// tree and the size mix is preserved. Zero-byte files and empty
    /// directories are thinned by the same rule applied to counts. Kept
    /// entries keep their listed ancestors; hard links and symlinks are
    /// dropped when their target (resolved lexically, for symlinks) was a
    /// listed entry that was dropped; symlinks pointing outside the listing
    /// are kept. Archive order is preserved.
    ///
    /// For `scale >= 1` the whole listing is kept once at its own paths and
    /// repeated under `copy1/`, `copy2/`, … (whole copies for the integer
    /// part, a scaled subset for the fraction), so the tree shape per copy
    /// is unchanged and everything still extracts into one directory.
    ///
    /// Errors: `scale` not finite, `<= 0` or above [`MAX_SCALE`], or a
    /// scale so small that no file is kept.
    pub fn scaled(&self, scale: f64) -> Result<Listing> {
        if !scale.is_finite() || scale <= 0.0 || scale > MAX_SCALE {
            bail!("{}: scale must be a number in (0, {MAX_SCALE}], got {scale}", self.origin);
        }
        let origin = format!("{}*{scale}", self.origin);
        let mut entries;
        if scale < 1.0 {
            entries = self.subset(scale);
        } else {
            let whole = scale.floor() as usize;
            let frac = scale - whole as f64;
            entries = self.entries.clone();
            // Copy directories take the newest listed time so that the
            // result depends on the listing only.
            let mtime = self.entries.iter().map(|e| e.mtime).max().unwrap_or(0);
            let copies =
                (1..whole).map(|k| (k, self.entries.clone())).chain((frac > 1e-9).then(|| (whole, self.subset(frac))));
            for (k, subset) in copies {
                if subset.is_empty() {
                    continue;
                }
                let prefix = format!("copy{k}");
                entries.push(Entry { path: prefix.clone(), kind: EntryKind::Dir, size: 0, mode: 0o755, mtime });
                entries.extend(subset.into_iter().map(|mut e| {
                    e.path = format!("{prefix}/{}", e.path);
                    // Relative symlinks stay valid inside the copy; hard
                    // links name an archive path, so they move with it.
                    if let EntryKind::Hardlink { target } = &mut e.kind {
                        *target = format!("{prefix}/{target}");
                    }
                    e
                }));
            }
        }
        let scaled = Listing { origin, entries };
        if self.file_count() > 0 && scaled.file_count() == 0 {
            bail!("{}: scale {scale} keeps no file of {} (use a larger scale)", self.origin, self.file_count());
        }
        Ok(scaled)
    }

    /// The entries kept at `0 < scale < 1` (see [`Listing::scaled`]).
    fn subset(&self, scale: f64) -> Vec<Entry> {
        let n = self.entries.len();
        let mut keep = vec![false; n];

        // Regular files: descending size, ties by listing order; error
        // diffusion on bytes (zero-byte files on counts, else they would all
        // pass the "owed >= size/2" test).
        let mut files: Vec<usize> = (0..n).filter(|&i| self.entries[i].kind == EntryKind::File).collect();
        files.sort_by_key(|&i| (std::cmp::Reverse(self.entries[i].size), i));
        let mut owed_bytes = 0.0f64;
        let mut owed_empty = 0.0f64;
        for &i in &files {
            let size = self.entries[i].size as f64;
            if size == 0.0 {
                owed_empty += scale;
                if owed_empty >= 0.5 {
                    owed_empty -= 1.0;
                    keep[i] = true;
                }
            } else {
                owed_bytes += scale * size;
                if owed_bytes >= size / 2.0 {
                    owed_bytes -= size;
                    keep[i] = true;
                }
            }
        }

        let index: HashMap<&str, usize> = self.entries.iter().enumerate().map(|(i, e)| (e.path.as_str(), i)).collect();

        // Hard links follow their file.
        for (i, e) in self.entries.iter().enumerate() {
            if let EntryKind::Hardlink { target } = &e.kind {
                keep[i] = index.get(target.as_str()).is_some_and(|&t| keep[t]);
            }
        }

        // Empty directories (no listed descendant) are thinned like files.
        let mut has_child: HashSet<&str> = HashSet::new();
        for e in &self.entries {
            for a in ancestors(&e.path) {
                has_child.insert(a);
            }
        }
        let mut owed_dirs = 0.0f64;
        for (i, e) in self.entries.iter().enumerate() {
            if e.kind == EntryKind::Dir && !has_child.contains(e.path.as_str()) {
                owed_dirs += scale;
                if owed_dirs >= 0.5 {
                    owed_dirs -= 1.0;
                    keep[i] = true;
                }
            }
        }

        // A directory survives when something kept lives under it; decide
        // this before symlinks, which may point at directories.
        let mut needed: HashSet<&str> = HashSet::new();
        for (i, e) in self.entries.iter().enumerate() {
            if keep[i] {
                needed.extend(ancestors(&e.path));
            }
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.kind == EntryKind::Dir && needed.contains(e.path.as_str()) {
                keep[i] = true;
            }
        }

        // Symlinks: kept unless they point at a listed entry that was
        // dropped; chains are followed (bounded, like the kernel's ELOOP).
        let mut link_kept: Vec<Option<bool>> = vec![None; n];
        for i in 0..n {
            if matches!(self.entries[i].kind, EntryKind::Symlink { .. }) {
                let k = self.symlink_survives(i, &keep, &index, &mut link_kept, 0);
                keep[i] = k;
            }
        }
        let mut needed: HashSet<&str> = HashSet::new();
        for (i, e) in self.entries.iter().enumerate() {
            if keep[i] && matches!(e.kind, EntryKind::Symlink { .. }) {
                needed.extend(ancestors(&e.path));
            }
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.kind == EntryKind::Dir && needed.contains(e.path.as_str()) {
                keep[i] = true;
            }
        }

        self.entries.iter().zip(keep).filter(|&(_, k)| k).map(|(e, _)| e.clone()).collect()
    }

    fn symlink_survives(
        &self,
        i: usize,
        keep: &[bool],
        index: &HashMap<&str, usize>,
        memo: &mut [Option<bool>],
        depth: usize,
    ) -> bool {
        if let Some(k) = memo[i] {
            return k;
        }
        if depth > 40 {
            return false; // a loop: drop it rather than recurse forever
        }
        let EntryKind::Symlink { target } = &self.entries[i].kind else {
            return keep[i];
        };
        let result = match resolve_symlink(&self.entries[i].path, target).and_then(|p| index.get(p.as_str()).copied()) {
            None => true, // points outside the listing: nothing was dropped
            Some(t) if matches!(self.entries[t].kind, EntryKind::Symlink { .. }) => {
                self.symlink_survives(t, keep, index, memo, depth + 1)
            }
            Some(t) => keep[t],
        };
        memo[i] = Some(result);
        result
    }
}

/// Proper ancestors of a normalised path, nearest last: `a/b/c` → `a`, `a/b`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Lexically resolve a symlink target against the link's directory.
/// `None` when the target is absolute or climbs above the archive root.
fn resolve_symlink(link_path: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link_path.split('/').collect();
    parts.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::listing::tartv::tests::SAMPLE;
    fn assert_close(what: &str, got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol * want, "{what}: got {got}, want {want} ±{}%", tol * 100.0);
    }
    /// Every kept entry's parent is kept; every kept link's target is kept.
    fn assert_consistent(l: &Listing) {
        let paths: HashSet<&str> = l.entries.iter().map(|e| e.path.as_str()).collect();
        for e in &l.entries {
            if let Some((parent, _)) = e.path.rsplit_once('/') {
                assert!(paths.contains(parent), "{} lost its parent", e.path);
            }
            if let EntryKind::Hardlink { target } = &e.kind {
                assert!(paths.contains(target.as_str()), "{} lost its target", e.path);
            }
        }
    }
    #[test]
    fn scaled_tracks_files_and_bytes() {
        for base in [Listing::rpi_firmware(), Listing::synthetic()] {
            for scale in [0.1, 0.25, 0.5, 0.9] {
                let s = base.scaled(scale).unwrap();
                assert_close("files", s.file_count() as f64, base.file_count() as f64 * scale, 0.10);
                assert_close("bytes", s.total_bytes() as f64, base.total_bytes() as f64 * scale, 0.10);
                assert_consistent(&s);
                assert_eq!(s, base.scaled(scale).unwrap(), "deterministic");
            }
        }
        // The Raspberry Pi listing is big enough for a tighter bound.
        let rpi = Listing::rpi_firmware();
        let s = rpi.scaled(0.1).unwrap();
        assert_close("files", s.file_count() as f64, 770.1, 0.01);
        assert_close("bytes", s.total_bytes() as f64, 15_121_756.5, 0.01);
        // Kept files come from all over the tree, not one corner.
        let dirs: HashSet<&str> = s
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::File)
            .filter_map(|e| e.path.rsplit_once('/').map(|(d, _)| d))
            .collect();
        assert!(dirs.len() > 200, "{} directories hold files", dirs.len());
    }
    #[test]
    fn scaled_drops_links_to_dropped_targets() {
        let l = Listing::parse(SAMPLE, "s").unwrap();
        // Keep a small fraction: the big COPYING.linux file goes, so the
        // hard link to it must go too; symlinks to unlisted paths stay.
        let s = l.scaled(0.3).unwrap();
        let has = |p: &str| s.entries.iter().any(|e| e.path == p);
        assert_eq!(has("fw/COPYING.linux"), has("fw/hard copy"));
        assert!(has("fw/dtparam") && has("fw/my link") && has("fw"));
        assert_consistent(&s);

        let small = Listing::synthetic();
        for scale in [0.05, 0.2, 0.5] {
            let s = small.scaled(scale).unwrap();
            let paths: HashSet<&str> = s.entries.iter().map(|e| e.path.as_str()).collect();
            for e in &s.entries {
                if let EntryKind::Symlink { target } = &e.kind {
                    let t = resolve_symlink(&e.path, target).unwrap();
                    assert!(paths.contains(t.as_str()), "{} -> {t} dangling", e.path);
                }
            }
        }
    }
    #[test]
    fn scaled_up_repeats_into_copies() {
        let small = Listing::synthetic();
        let s = small.scaled(2.5).unwrap();
        assert_close("files", s.file_count() as f64, small.file_count() as f64 * 2.5, 0.05);
        assert_close("bytes", s.total_bytes() as f64, small.total_bytes() as f64 * 2.5, 0.05);
        assert!(s.entries.iter().any(|e| e.path == "copy1/fslab-small/boot/kernel.img"));
        assert!(s.entries.iter().any(|e| e.path.starts_with("copy2/")));
        assert!(!s.entries.iter().any(|e| e.path.starts_with("copy3")));
        assert_consistent(&s);
        assert_eq!(small.scaled(1.0).unwrap().entries, small.entries);
        // Re-parsing catches duplicates and bad hard-link targets.
        Listing::parse(&s.to_text(), "x").unwrap();
    }
    #[test]
    fn scaled_rejects_bad_scales() {
        let small = Listing::synthetic();
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_SCALE * 2.0] {
            let e = small.scaled(bad).unwrap_err().to_string();
            assert!(e.contains("builtin:synthetic") && e.contains("scale"), "{e}");
        }
        assert!(small.scaled(1e-9).is_err(), "keeps no file");
    }
}
