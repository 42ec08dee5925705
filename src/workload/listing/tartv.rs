//! GNU `tar tv` text: reading a listing from it and writing one back.

use std::collections::HashMap;
use std::fmt::Write as _;

use anyhow::{anyhow, bail, Result};

use super::{Entry, EntryKind, Listing};

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

/// `2022-08-09` + `14:49[:SS]` (UTC) → Unix seconds. Times before 1970
/// (which `tar tv` prints for negative mtimes) become 0, as generated
/// archives clamp them anyway.
fn parse_datetime(date: &str, time: &str) -> Result<i64> {
    let bad_date = || anyhow!("bad date {date:?} (expected YYYY-MM-DD)");
    let bad_time = || anyhow!("bad time {time:?} (expected HH:MM or HH:MM:SS)");
    let fields: Vec<u32> = time
        .split(':')
        .map(|f| if f.len() == 2 { f.parse().ok() } else { None })
        .collect::<Option<_>>()
        .ok_or_else(bad_time)?;
    let (h, m, sec) = match fields[..] {
        [h, m] => (h, m, 0),
        [h, m, s] => (h, m, s),
        _ => return Err(bad_time()),
    };
    if h > 23 || m > 59 || sec > 59 {
        return Err(bad_time());
    }
    if date.len() != 10 || !date.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(bad_date());
    }
    match humantime::parse_rfc3339(&format!("{date}T{h:02}:{m:02}:{sec:02}Z")) {
        Ok(t) => Ok(t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)),
        Err(humantime::TimestampError::OutOfRange) if date < "1970" => Ok(0),
        Err(_) => Err(bad_date()),
    }
}

/// Unix seconds → (`YYYY-MM-DD`, `HH:MM:SS`) in UTC, for [`Listing::to_text`].
fn format_utc(t: i64) -> (String, String) {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64);
    let stamp = humantime::format_rfc3339_seconds(time).to_string();
    (stamp[..10].to_string(), stamp[11..19].to_string())
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    pub(in crate::workload::listing) const SAMPLE: &str = "\
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
    fn to_text_round_trips() {
        for l in [Listing::synthetic(), Listing::rpi_firmware()] {
            let back = Listing::parse(&l.to_text(), &l.origin).unwrap();
            assert_eq!(back, l);
        }
        let sample = Listing::parse(SAMPLE, "s").unwrap();
        assert_eq!(Listing::parse(&sample.to_text(), "s").unwrap(), sample);
    }
    #[test]
    fn civil_dates_round_trip() {
        for t in [0, 951_868_740, 1_660_056_540, 4_102_444_800] {
            let (d, h) = format_utc(t);
            assert_eq!(parse_datetime(&d, &h).unwrap(), t, "{d} {h}");
        }
        assert_eq!(parse_datetime("2000-02-29", "23:59").unwrap(), 951_868_740);
        assert_eq!(parse_datetime("1969-12-31", "00:00:00").unwrap(), 0, "before 1970 clamps");
        for (d, t) in [("2001-02-29", "00:00"), ("2022-13-01", "00:00"), ("2022-01-01", "24:00"), ("22-1-1", "1:2")] {
            assert!(parse_datetime(d, t).is_err(), "{d} {t}");
        }
    }
}
