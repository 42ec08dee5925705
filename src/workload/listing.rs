//! Content lists for the `untar` workload: which paths an archive holds,
//! with their kinds, sizes, modes and times.
//!
//! A [`Listing`] is read from the output of GNU `tar tv` (so a real archive
//! from a bug report can be described by a text file without shipping its
//! bytes), built in ([`Listing::rpi_firmware`], [`Listing::synthetic`]), or
//! scaled down/up ([`Listing::scaled`]). The archive generator in
//! [`super::archive`] turns a listing into a tar file with synthetic content.
//!
//! Paths are stored normalised: relative, `/`-separated, no `.`/empty
//! components, no trailing `/`. Paths that would leave the extraction
//! directory (absolute, or with `..`) are rejected, because fslab extracts
//! these archives as root.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

/// What an entry of a listing is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file with `size` bytes of content.
    File,
    /// A directory.
    Dir,
    /// A symbolic link; `target` is stored verbatim (it may be relative,
    /// absolute or dangling).
    Symlink {
        /// The link's target, as written in the listing.
        target: String,
    },
    /// A hard link to a regular file listed earlier; `target` is that file's
    /// normalised path.
    Hardlink {
        /// Path of the earlier regular file this entry links to.
        target: String,
    },
}

/// One entry of a [`Listing`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Normalised relative path (no trailing `/`, no `.`/`..` components).
    pub path: String,
    /// Kind of entry.
    pub kind: EntryKind,
    /// Content size in bytes; always 0 for anything but [`EntryKind::File`].
    pub size: u64,
    /// Permission bits (`0o7777` at most, including setuid/setgid/sticky);
    /// the file-type bits are carried by `kind`.
    pub mode: u32,
    /// Modification time, Unix seconds, from the listing's date and time read
    /// as UTC.
    pub mtime: i64,
}

/// An ordered list of archive entries, in archive order (parents before
/// children, as `tar` writes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Where the listing came from (file name or built-in name); used in
    /// error messages and reports.
    pub origin: String,
    /// The entries in archive order.
    pub entries: Vec<Entry>,
}

/// Largest factor [`Listing::scaled`] accepts; it bounds memory and archive
/// size (100 × the Raspberry Pi listing is ~15 GB).
pub const MAX_SCALE: f64 = 100.0;

/// The real `tar tv` listing of the Raspberry Pi firmware archive from the
/// ext4 `mb_optimize_scan` SD-card regression (see
/// `data/rpi-firmware-4dde751.LICENSE` for its licence).
const RPI_FIRMWARE_LIST: &str = include_str!("../../data/rpi-firmware-4dde751.list");

impl Listing {
    /// Parse GNU `tar tv` output, one entry per line, e.g.
    /// `-rw-rw-r-- root/root 18693 2022-08-09 14:49 dir/COPYING.linux`.
    ///
    /// Accepted: regular files (`-`), directories (`d`), symlinks (`l`,
    /// `name -> target`) and hard links (`h`, `name link to target`); owners
    /// by name or number (`1000/1000`, which is not kept: generated archives
    /// are owned by root); times `HH:MM` or `HH:MM:SS` (`--full-time`); names
    /// with spaces and GNU tar's default backslash escapes (`\\`, `\n`,
    /// `\ooo`, …). Blank lines are ignored. A leading `./` and a trailing `/`
    /// are dropped; an entry naming `.` itself is skipped.
    ///
    /// Errors read `ORIGIN:LINE: what is wrong`: malformed fields, device or
    /// FIFO entries (`c`, `b`, `p`), paths leaving the extraction directory,
    /// duplicate paths, and hard links whose target is not a regular file
    /// listed earlier (GNU tar could not extract those).
    pub fn parse(text: &str, origin: &str) -> Result<Listing> {
        let mut entries: Vec<Entry> = Vec::new();
        // path -> (line number, index in `entries`), for duplicate and
        // hard-link checks.
        let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
        for (idx, raw) in text.lines().enumerate() {
            let line_no = idx + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if line.trim().is_empty() {
                continue;
            }
            let entry = parse_line(line).map_err(|e| anyhow!("{origin}:{line_no}: {e}"))?;
            let Some(entry) = entry else { continue };
            if let EntryKind::Hardlink { target } = &entry.kind {
                let ok = seen.get(target).is_some_and(|&(_, i)| entries[i].kind == EntryKind::File);
                if !ok {
                    bail!(
                        "{origin}:{line_no}: hard link target {target:?} is not a regular file \
                         listed earlier"
                    );
                }
            }
            if let Some(&(first, _)) = seen.get(&entry.path) {
                bail!("{origin}:{line_no}: duplicate path {:?} (first listed on line {first})", entry.path);
            }
            seen.insert(entry.path.clone(), (line_no, entries.len()));
            entries.push(entry);
        }
        Ok(Listing { origin: origin.to_string(), entries })
    }

    /// The real listing of `raspberrypi-rpi-firmware-4dde751` (the archive
    /// `rpi-update` unpacks in the ext4 SD-card case): 7,701 regular files
    /// totalling 151,217,565 bytes (151.2 MB, 144.2 MiB), 1,465 directories
    /// and 4 symlinks.
    pub fn rpi_firmware() -> Listing {
        static PARSED: OnceLock<Listing> = OnceLock::new();
        PARSED
            .get_or_init(|| {
                // The text is compiled in and checked by a unit test, so this
                // cannot fail at run time.
                Listing::parse(RPI_FIRMWARE_LIST, "builtin:rpi-firmware-4dde751")
                    .expect("built-in rpi-firmware listing parses")
            })
            .clone()
    }

    /// A small built-in tree for tests and quick runs: 342 regular files,
    /// about 5.0 MB, in 19 nested directories shaped like a firmware tree (a
    /// few large images, many small overlays and compressed modules), with
    /// two symlinks, a hard link, an empty file, an empty directory, names
    /// with spaces and a path longer than 100 bytes (GNU long-name header).
    /// Generated in code from a fixed seed, so it never changes.
    pub fn synthetic() -> Listing {
        build_small()
    }

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

    /// Number of regular files (hard links not counted).
    pub fn file_count(&self) -> usize {
        self.entries.iter().filter(|e| e.kind == EntryKind::File).count()
    }

    /// Sum of the sizes of the regular files, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().filter(|e| e.kind == EntryKind::File).map(|e| e.size).sum()
    }

    /// Number of directories listed.
    pub fn dir_count(&self) -> usize {
        self.entries.iter().filter(|e| e.kind == EntryKind::Dir).count()
    }

    /// Render in the GNU `tar tv` format [`Listing::parse`] reads (owner
    /// `root/root`, times in UTC, names escaped like GNU tar does), so a
    /// generated or scaled listing can be saved and reviewed.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            let (type_char, suffix) = match &e.kind {
                EntryKind::File => ('-', String::new()),
                EntryKind::Dir => ('d', "/".to_string()),
                EntryKind::Symlink { target } => ('l', format!(" -> {}", escape_name(target))),
                EntryKind::Hardlink { target } => ('h', format!(" link to {}", escape_name(target))),
            };
            let (date, time) = format_utc(e.mtime);
            let _ = writeln!(
                out,
                "{type_char}{} root/root {:>9} {date} {time} {}{suffix}",
                format_perms(e.mode),
                e.size,
                escape_name(&e.path)
            );
        }
        out
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

/// Parse one non-blank line; `Ok(None)` for an entry naming `.` itself.
fn parse_line(line: &str) -> Result<Option<Entry>> {
    let mut rest = line;
    let perms = next_field(&mut rest, "permissions")?;
    let owner = next_field(&mut rest, "owner/group")?;
    let size = next_field(&mut rest, "size")?;
    let date = next_field(&mut rest, "date")?;
    let time = next_field(&mut rest, "time")?;
    // GNU tar puts exactly one space before the name; more would be part of
    // the name.
    let name =
        rest.strip_prefix(' ').filter(|n| !n.is_empty()).ok_or_else(|| anyhow!("missing name after the time field"))?;

    let mut chars = perms.chars();
    let type_char = chars.next().unwrap_or(' ');
    match type_char {
        '-' | 'd' | 'l' | 'h' => {}
        'c' => bail!("unsupported entry type 'c' (character device) in {perms:?}"),
        'b' => bail!("unsupported entry type 'b' (block device) in {perms:?}"),
        'p' => bail!("unsupported entry type 'p' (FIFO) in {perms:?}"),
        other => bail!("unsupported entry type {other:?} in {perms:?}"),
    }
    let mode =
        parse_perms(chars.as_str()).ok_or_else(|| anyhow!("bad permissions {perms:?} (expected e.g. `-rw-r--r--`)"))?;
    match owner.split_once('/') {
        Some((u, g)) if !u.is_empty() && !g.is_empty() => {}
        _ => bail!("bad owner/group {owner:?} (expected e.g. `root/root` or `1000/1000`)"),
    }
    let size: u64 = size.parse().map_err(|_| anyhow!("bad size {size:?} (expected a byte count)"))?;
    let mtime = parse_datetime(date, time)?;

    let (name, kind) = match type_char {
        'l' => {
            let (n, t) = name.split_once(" -> ").ok_or_else(|| anyhow!("symlink without ` -> TARGET`"))?;
            let target = unescape(t)?;
            if target.is_empty() {
                bail!("symlink with an empty target");
            }
            (n, EntryKind::Symlink { target })
        }
        'h' => {
            let (n, t) = name.split_once(" link to ").ok_or_else(|| anyhow!("hard link without ` link to TARGET`"))?;
            let target = normalize_path(&unescape(t)?)
                .map_err(|e| anyhow!("hard link target: {e}"))?
                .ok_or_else(|| anyhow!("hard link to the archive root"))?;
            (n, EntryKind::Hardlink { target })
        }
        'd' => (name, EntryKind::Dir),
        _ => (name, EntryKind::File),
    };
    let Some(path) = normalize_path(&unescape(name)?)? else {
        if kind == EntryKind::Dir {
            return Ok(None);
        }
        bail!("entry has an empty name");
    };
    // Only regular files carry content; tar shows 0 for the others anyway.
    let size = if kind == EntryKind::File { size } else { 0 };
    Ok(Some(Entry { path, kind, size, mode, mtime }))
}

/// Split off the next space-separated field (fields may be padded with
/// several spaces, as `tar tv` right-aligns sizes).
fn next_field<'a>(rest: &mut &'a str, what: &str) -> Result<&'a str> {
    let s = rest.trim_start_matches(' ');
    let end = s.find(' ').unwrap_or(s.len());
    if end == 0 {
        bail!("missing {what} (expected `PERMS OWNER/GROUP SIZE YYYY-MM-DD HH:MM NAME`)");
    }
    *rest = &s[end..];
    Ok(&s[..end])
}

/// `rwxr-sr-t` → mode bits, or `None` if malformed.
fn parse_perms(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    if b.len() != 9 {
        return None;
    }
    let mut mode = 0u32;
    for (i, &c) in b.iter().enumerate() {
        let shift = 6 - 3 * (i as u32 / 3);
        let bit = match (i % 3, c) {
            (_, b'-') => 0,
            (0, b'r') => 4 << shift,
            (1, b'w') => 2 << shift,
            (2, b'x') => 1 << shift,
            // s/t: special bit plus x; S/T: special bit without x.
            (2, b's') if i == 2 => 0o4000 | (1 << shift),
            (2, b'S') if i == 2 => 0o4000,
            (2, b's') if i == 5 => 0o2000 | (1 << shift),
            (2, b'S') if i == 5 => 0o2000,
            (2, b't') if i == 8 => 0o1000 | 1,
            (2, b'T') if i == 8 => 0o1000,
            _ => return None,
        };
        mode |= bit;
    }
    Some(mode)
}

fn format_perms(mode: u32) -> String {
    let mut s = String::with_capacity(9);
    for (i, special, special_char) in [(0, 0o4000, 's'), (1, 0o2000, 's'), (2, 0o1000, 't')] {
        let shift = 6 - 3 * i;
        s.push(if mode & (4 << shift) != 0 { 'r' } else { '-' });
        s.push(if mode & (2 << shift) != 0 { 'w' } else { '-' });
        let x = mode & (1 << shift) != 0;
        s.push(match (mode & special != 0, x) {
            (true, true) => special_char,
            (true, false) => special_char.to_ascii_uppercase(),
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// `2022-08-09` + `14:49[:SS]` (UTC) → Unix seconds.
fn parse_datetime(date: &str, time: &str) -> Result<i64> {
    let bad_date = || anyhow!("bad date {date:?} (expected YYYY-MM-DD)");
    let bad_time = || anyhow!("bad time {time:?} (expected HH:MM or HH:MM:SS)");
    let num = |s: &str, len: usize| -> Option<i64> {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    let d: Vec<&str> = date.split('-').collect();
    let [y, m, day] = d[..] else {
        return Err(bad_date());
    };
    let (y, m, day) =
        (num(y, 4).ok_or_else(bad_date)?, num(m, 2).ok_or_else(bad_date)?, num(day, 2).ok_or_else(bad_date)?);
    if !(1..=12).contains(&m) || day < 1 || day > days_in_month(y, m) {
        return Err(bad_date());
    }
    let t: Vec<&str> = time.split(':').collect();
    let (h, min, s) = match t[..] {
        [h, min] => (num(h, 2), num(min, 2), Some(0)),
        [h, min, s] => (num(h, 2), num(min, 2), num(s, 2)),
        _ => return Err(bad_time()),
    };
    let (h, min, s) = (h.ok_or_else(bad_time)?, min.ok_or_else(bad_time)?, s.ok_or_else(bad_time)?);
    // 60 allows a leap second as printed by some tools.
    if h > 23 || min > 59 || s > 60 {
        return Err(bad_time());
    }
    Ok(days_from_civil(y, m, day) * 86_400 + h * 3600 + min * 60 + s)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`), to avoid a date-time dependency for one conversion.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`] for [`Listing::to_text`]: (date, HH:MM:SS).
fn format_utc(t: i64) -> (String, String) {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (format!("{y:04}-{m:02}-{d:02}"), format!("{:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60))
}

/// Undo GNU tar's default `escape` quoting. Unknown escapes are kept
/// literally, so listings made with `--quoting-style=literal` still parse
/// unless they contain one of the recognised sequences.
fn unescape(s: &str) -> Result<String> {
    if !s.contains('\\') {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        let simple = match c {
            b'\\' => Some(b'\\'),
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'v' => Some(0x0b),
            b'?' => Some(0x7f),
            _ => None,
        };
        if let Some(v) = simple {
            out.push(v);
            i += 2;
        } else if (b'0'..=b'7').contains(&c) {
            let mut v: u32 = 0;
            let mut j = i + 1;
            while j < b.len() && j < i + 4 && (b'0'..=b'7').contains(&b[j]) {
                v = v * 8 + u32::from(b[j] - b'0');
                j += 1;
            }
            let v = u8::try_from(v).map_err(|_| anyhow!("bad octal escape in {s:?}"))?;
            if v == 0 {
                bail!("NUL byte in name {s:?}");
            }
            out.push(v);
            i = j;
        } else {
            out.push(b'\\');
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| anyhow!("name {s:?} is not valid UTF-8 after unescaping"))
}

/// GNU tar `escape` quoting, for [`Listing::to_text`].
fn escape_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Normalise an archive path; `Ok(None)` for the root itself (`.`, `./`).
/// Rejects absolute paths and `..`, which would escape the extraction
/// directory.
fn normalize_path(p: &str) -> Result<Option<String>> {
    if p.starts_with('/') {
        bail!("absolute path {p:?} (archive paths must be relative)");
    }
    let mut parts = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => bail!("path {p:?} contains `..`"),
            c => parts.push(c),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// splitmix64 (Steele, Lea, Flood 2014): a tiny, well-mixed PRNG so that
/// [`Listing::synthetic`] is fixed by this code alone, whatever `rand` does.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform integer in [lo, hi]: small files are common, big ones
    /// rare, as in real trees.
    fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        ((l + (h - l) * self.unit()).exp().round() as u64).clamp(lo, hi)
    }
}

fn build_small() -> Listing {
    const ROOT: &str = "fslab-small";
    // 2022-08-09 14:49 UTC, the firmware archive's date.
    const T0: i64 = 1_660_056_540;
    let mut rng = SplitMix64(0x0005_EEDF_51AB);
    let mut entries = Vec::new();
    let dir = |entries: &mut Vec<Entry>, p: &str| {
        entries.push(Entry {
            path: format!("{ROOT}{}{p}", if p.is_empty() { "" } else { "/" }),
            kind: EntryKind::Dir,
            size: 0,
            mode: 0o755,
            mtime: T0,
        });
    };
    let file = |entries: &mut Vec<Entry>, p: &str, size: u64, mode: u32, rng: &mut SplitMix64| {
        entries.push(Entry {
            path: format!("{ROOT}/{p}"),
            kind: EntryKind::File,
            size,
            mode,
            // Spread over a day so times differ, deterministically.
            mtime: T0 - (rng.next_u64() % 86_400) as i64,
        });
    };

    dir(&mut entries, "");
    file(&mut entries, "COPYING.linux", 18_693, 0o644, &mut rng);
    file(&mut entries, "README.md", 628, 0o644, &mut rng);
    file(&mut entries, "Module.symvers", 312_449, 0o644, &mut rng);

    dir(&mut entries, "boot");
    file(&mut entries, "boot/kernel.img", 1_048_576 + 4_321, 0o644, &mut rng);
    file(&mut entries, "boot/start.elf", 612_244, 0o644, &mut rng);
    file(&mut entries, "boot/bootcode.bin", 52_456, 0o644, &mut rng);
    file(&mut entries, "boot/fixup.dat", 7_314, 0o644, &mut rng);
    file(&mut entries, "boot/.keep", 0, 0o644, &mut rng);
    entries.push(Entry {
        path: format!("{ROOT}/boot/kernel-backup.img"),
        kind: EntryKind::Hardlink { target: format!("{ROOT}/boot/kernel.img") },
        size: 0,
        mode: 0o644,
        mtime: T0,
    });
    dir(&mut entries, "boot/empty");
    dir(&mut entries, "boot/overlays");
    for i in 0..120 {
        let size = rng.log_uniform(400, 9_000);
        file(&mut entries, &format!("boot/overlays/overlay-{i:03}.dtbo"), size, 0o644, &mut rng);
    }

    dir(&mut entries, "modules");
    dir(&mut entries, "modules/6.1.0");
    file(&mut entries, "modules/6.1.0/modules.dep", 96_112, 0o644, &mut rng);
    file(&mut entries, "modules/6.1.0/modules.alias", 201_733, 0o644, &mut rng);
    dir(&mut entries, "modules/6.1.0/kernel");
    dir(&mut entries, "modules/6.1.0/kernel/drivers");
    for sub in ["net", "gpu", "usb", "media", "sound"] {
        dir(&mut entries, &format!("modules/6.1.0/kernel/drivers/{sub}"));
        for i in 0..40 {
            let size = rng.log_uniform(900, 40_000);
            let p = format!("modules/6.1.0/kernel/drivers/{sub}/{sub}-mod-{i:02}.ko.xz");
            file(&mut entries, &p, size, 0o644, &mut rng);
        }
    }
    // Longer than 100 bytes: needs a GNU long-name header in the archive.
    let long_dir = "modules/6.1.0/kernel/drivers/a-rather-long-directory-name-to-exercise-gnu-long-names";
    dir(&mut entries, long_dir);
    file(
        &mut entries,
        &format!("{long_dir}/and-an-equally-long-module-file-name-for-good-measure.ko.xz"),
        23_456,
        0o644,
        &mut rng,
    );

    dir(&mut entries, "vc");
    dir(&mut entries, "vc/bin");
    file(&mut entries, "vc/bin/dtoverlay", 37_872, 0o755, &mut rng);
    file(&mut entries, "vc/bin/vcgencmd", 21_304, 0o755, &mut rng);
    dir(&mut entries, "vc/lib");
    file(&mut entries, "vc/lib/libGLESv2.so", 181_444, 0o644, &mut rng);
    file(&mut entries, "vc/lib/libvchiq_arm.so", 27_580, 0o644, &mut rng);
    for (link, target) in [("vc/bin/dtparam", "dtoverlay"), ("vc/lib/libGLESv1_CM.so", "libGLESv2.so")] {
        entries.push(Entry {
            path: format!("{ROOT}/{link}"),
            kind: EntryKind::Symlink { target: target.to_string() },
            size: 0,
            mode: 0o777,
            mtime: T0,
        });
    }

    dir(&mut entries, "docs");
    dir(&mut entries, "docs/release notes");
    for i in 1..=6 {
        let size = rng.log_uniform(1_000, 30_000);
        let p = format!("docs/release notes/Release Notes {i}.txt");
        file(&mut entries, &p, size, 0o644, &mut rng);
    }
    file(&mut entries, "docs/ leading space.txt", 333, 0o644, &mut rng);

    Listing { origin: "builtin:small".to_string(), entries }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
drwxrwxr-x root/root         0 2022-08-09 14:49 fw/
-rw-rw-r-- root/root     18693 2022-08-09 14:49 fw/COPYING.linux

-rw-r--r-- 1000/1000       12 1970-01-01 00:00:07 fw/name with  spaces.txt
lrwxrwxrwx root/root         0 2022-08-09 14:49 fw/dtparam -> dtoverlay
lrwxrwxrwx root/root         0 2022-08-09 14:49 fw/my link -> ../other dir/x y
hrw-rw-r-- root/root         0 2022-08-09 14:49 fw/hard copy link to fw/COPYING.linux
-rwsr-sr-T user/group 5 2000-02-29 23:59 ./fw/setuid\\040odd\\\\name
";

    #[test]
    fn parses_every_entry_type() {
        let l = Listing::parse(SAMPLE, "sample.list").unwrap();
        assert_eq!(l.origin, "sample.list");
        assert_eq!(l.entries.len(), 7);
        let e = &l.entries;
        assert_eq!(e[0].path, "fw");
        assert_eq!(e[0].kind, EntryKind::Dir);
        assert_eq!(e[0].mode, 0o775);
        assert_eq!(e[0].mtime, 1_660_056_540);
        assert_eq!(e[1].path, "fw/COPYING.linux");
        assert_eq!((e[1].size, e[1].mode), (18_693, 0o664));
        assert_eq!(e[2].path, "fw/name with  spaces.txt");
        assert_eq!((e[2].size, e[2].mtime), (12, 7));
        assert_eq!(e[3].kind, EntryKind::Symlink { target: "dtoverlay".into() });
        assert_eq!(e[3].mode, 0o777);
        assert_eq!(e[4].path, "fw/my link");
        assert_eq!(e[4].kind, EntryKind::Symlink { target: "../other dir/x y".into() });
        assert_eq!(e[5].path, "fw/hard copy");
        assert_eq!(e[5].kind, EntryKind::Hardlink { target: "fw/COPYING.linux".into() });
        assert_eq!(e[6].path, "fw/setuid odd\\name");
        assert_eq!(e[6].mode, 0o4000 | 0o2000 | 0o1000 | 0o754);
        assert_eq!(e[6].mtime, 951_868_740); // 2000-02-29 23:59 UTC
        assert_eq!(l.file_count(), 3);
        assert_eq!(l.dir_count(), 1);
        assert_eq!(l.total_bytes(), 18_693 + 12 + 5);
    }

    fn err(text: &str) -> String {
        format!("{:#}", Listing::parse(text, "x.list").unwrap_err())
    }

    #[test]
    fn bad_lines_name_origin_and_line() {
        let ok = "-rw-r--r-- root/root 1 2022-08-09 14:49 a\n";
        let cases = [
            ("-rw-r--r-- root/root 1 2022-08-09 14:49", "missing name"),
            ("-rw-r--r-- root/root x 2022-08-09 14:49 b", "bad size"),
            ("-rw-r--r-- root/root 1 2022-13-09 14:49 b", "bad date"),
            ("-rw-r--r-- root/root 1 2022-02-30 14:49 b", "bad date"),
            ("-rw-r--r-- root/root 1 2022-08-09 24:00 b", "bad time"),
            ("-rw-r--rX- root/root 1 2022-08-09 14:49 b", "bad permissions"),
            ("-rw-r--r-- root 1 2022-08-09 14:49 b", "bad owner"),
            ("crw-r--r-- root/root 1,3 2022-08-09 14:49 null", "character device"),
            ("brw-r--r-- root/root 8,0 2022-08-09 14:49 sda", "block device"),
            ("prw-r--r-- root/root 0 2022-08-09 14:49 fifo", "FIFO"),
            ("lrwxrwxrwx root/root 0 2022-08-09 14:49 l", "without ` -> TARGET`"),
            ("hrw-r--r-- root/root 0 2022-08-09 14:49 h link to nope", "not a regular file"),
            ("-rw-r--r-- root/root 1 2022-08-09 14:49 ../evil", "`..`"),
            ("-rw-r--r-- root/root 1 2022-08-09 14:49 /etc/passwd", "absolute path"),
            ("-rw-r--r-- root/root 1 2022-08-09 14:49 a", "duplicate path"),
            ("garbage", "missing owner/group"),
        ];
        for (line, what) in cases {
            // Line 3: after a valid line and a blank one.
            let msg = err(&format!("{ok}\n{line}\n"));
            assert!(msg.starts_with("x.list:3: "), "{line:?} -> {msg}");
            assert!(msg.contains(what), "{line:?} -> {msg} (wanted {what:?})");
        }
    }

    #[test]
    fn skips_root_dot_entry() {
        let l = Listing::parse("drwxr-xr-x root/root 0 2022-08-09 14:49 ./\n", "x").unwrap();
        assert!(l.entries.is_empty());
    }

    #[test]
    fn rpi_firmware_parses_fully() {
        let l = Listing::rpi_firmware();
        let lines = RPI_FIRMWARE_LIST.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(lines, 9170);
        assert_eq!(l.entries.len(), lines);
        // The issue's "151 MB / 7,701 files" holds (decimal megabytes).
        assert_eq!(l.file_count(), 7_701);
        assert_eq!(l.total_bytes(), 151_217_565);
        assert_eq!(l.dir_count(), 1_465);
        let links = l.entries.iter().filter(|e| matches!(e.kind, EntryKind::Symlink { .. })).count();
        assert_eq!(links, 4);
    }

    #[test]
    fn small_is_a_few_mb_of_a_few_hundred_files() {
        let l = Listing::synthetic();
        assert_eq!(l, Listing::synthetic(), "deterministic");
        let (files, bytes) = (l.file_count(), l.total_bytes());
        assert!((250..=500).contains(&files), "{files} files");
        assert!((3_000_000..=6_000_000).contains(&bytes), "{bytes} bytes");
        assert!(l.dir_count() >= 10);
        assert!(l.entries.iter().any(|e| e.path.len() > 100));
        assert!(l.entries.iter().any(|e| e.path.contains(' ')));
        let symlinks = l.entries.iter().filter(|e| matches!(e.kind, EntryKind::Symlink { .. })).count();
        assert_eq!(symlinks, 2);
    }

    #[test]
    fn to_text_round_trips() {
        for l in [Listing::synthetic(), Listing::rpi_firmware()] {
            let back = Listing::parse(&l.to_text(), &l.origin).unwrap();
            assert_eq!(back, l);
        }
        let sample = Listing::parse(SAMPLE, "s").unwrap();
        assert_eq!(Listing::parse(&sample.to_text(), "s").unwrap(), sample);
    }

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
            assert!(e.contains("builtin:small") && e.contains("scale"), "{e}");
        }
        assert!(small.scaled(1e-9).is_err(), "keeps no file");
    }

    #[test]
    fn civil_dates_round_trip() {
        for t in [0, 951_868_740, 1_660_056_540, -86_400, 4_102_444_800] {
            let (d, h) = format_utc(t);
            assert_eq!(parse_datetime(&d, &h).unwrap(), t, "{d} {h}");
        }
    }
}
