//! `/proc/self/mountinfo` (see proc(5)): the one parser every caller uses.
//!
//! Hand-written rather than taken from the `procfs` crate: the doctor wants
//! errors naming the file and line (fixtures, pasted text), testbed
//! teardown and `cleanup` want a lenient reader that skips a line it cannot
//! read instead of failing, and the format is a dozen lines of splitting.
//!
//! A line is
//! `ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER_OPTIONS`;
//! paths are octal-escaped (`\040` for a space).

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The kernel's file.
pub const PATH: &str = "/proc/self/mountinfo";

/// One line of mountinfo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    pub major: u32,
    pub minor: u32,
    /// Root of the mount within its filesystem.
    pub root: String,
    /// Where it is mounted (unescaped).
    pub mountpoint: String,
    /// Per-mount options (field 6).
    pub mount_options: String,
    pub fstype: String,
    /// Mount source, usually a device (unescaped).
    pub source: String,
    /// Superblock options (after the ` - ` separator).
    pub super_options: String,
}

/// A line that is not mountinfo: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct MountInfoError {
    /// What was parsed (a file name, or `/proc/self/mountinfo`).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MountInfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// Undo mountinfo's octal escapes (`\040` space, `\011` tab, `\012`
/// newline, `\134` backslash). An escape above `\377` is kept as text.
pub fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                // Computed in u32: `\777` must not overflow a byte.
                let v = oct.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line, or why it is not mountinfo.
fn parse_line(line: &str) -> Result<MountInfo, &'static str> {
    let fields: Vec<&str> = line.split(' ').collect();
    let sep = fields.iter().position(|f| *f == "-").ok_or("no ` - ` separator")?;
    if sep < 6 || fields.len() < sep + 3 {
        return Err("too few fields");
    }
    let (major, minor) = fields[2].split_once(':').ok_or("bad major:minor")?;
    Ok(MountInfo {
        major: major.parse().map_err(|_| "bad major number")?,
        minor: minor.parse().map_err(|_| "bad minor number")?,
        root: unescape(fields[3]),
        mountpoint: unescape(fields[4]),
        mount_options: fields[5].to_string(),
        fstype: fields[sep + 1].to_string(),
        source: unescape(fields[sep + 2]),
        super_options: fields.get(sep + 3).map(|s| s.to_string()).unwrap_or_default(),
    })
}

/// Strict: every non-blank line must be mountinfo; the first that is not
/// is an error naming `source` and the line (the kernel never writes one;
/// a fixture or pasted text might).
pub fn parse(text: &str, source: &str) -> Result<Vec<MountInfo>, MountInfoError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let m = parse_line(line).map_err(|message| MountInfoError {
            file: source.to_string(),
            line: idx + 1,
            message: message.to_string(),
        })?;
        out.push(m);
    }
    Ok(out)
}

/// Lenient: lines that are not mountinfo are skipped (for teardown and
/// cleanup, which must go on whatever one line says).
pub fn parse_lenient(text: &str) -> Vec<MountInfo> {
    text.lines().filter_map(|l| parse_line(l).ok()).collect()
}

/// This process's mounts, strictly parsed.
pub fn read() -> anyhow::Result<Vec<MountInfo>> {
    let text = std::fs::read_to_string(PATH).map_err(|e| anyhow::anyhow!("reading {PATH}: {e}"))?;
    Ok(parse(&text, PATH)?)
}

/// The mount that holds `path` (already canonical): the longest mount
/// point that is a path prefix; among equals the last one (it is on top).
pub fn find_mount<'a>(mounts: &'a [MountInfo], path: &Path) -> Option<&'a MountInfo> {
    let mut best: Option<&MountInfo> = None;
    for m in mounts {
        if path.starts_with(Path::new(&m.mountpoint)) && best.is_none_or(|b| m.mountpoint.len() >= b.mountpoint.len()) {
            best = Some(m);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
36 27 7:3 / /mnt/my\\040disk rw,noatime shared:1 master:2 - xfs /dev/loop3 rw,attr2,inode64
40 36 7:4 / /mnt/my\\040disk/inner rw - btrfs /dev/loop4 rw,space_cache=v2
";

    #[test]
    fn fields_escapes_and_lookup() {
        let m = parse(TEXT, "mi").unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[2].mountpoint, "/mnt/my disk");
        assert_eq!(m[2].fstype, "xfs");
        assert_eq!(m[2].source, "/dev/loop3");
        assert_eq!(m[2].mount_options, "rw,noatime");
        assert_eq!(m[2].super_options, "rw,attr2,inode64");
        assert_eq!((m[2].major, m[2].minor), (7, 3));
        assert_eq!(find_mount(&m, Path::new("/mnt/my disk/x")).unwrap().fstype, "xfs");
        assert_eq!(find_mount(&m, Path::new("/mnt/my disk/inner/y")).unwrap().fstype, "btrfs");
        assert_eq!(find_mount(&m, Path::new("/mnt/my diskette")).unwrap().fstype, "ext4");
        assert_eq!(find_mount(&m, Path::new("/proc/1")).unwrap().fstype, "proc");
        assert_eq!(parse_lenient(TEXT), m);
    }

    #[test]
    fn strict_names_the_line_lenient_skips_it() {
        let e = parse("1 2 3:4 / /x rw\n", "mi").unwrap_err();
        assert_eq!(e.to_string(), "mi:1: no ` - ` separator");
        let e = parse("\n1 2 a:4 / /x rw - ext4 /dev/x rw\n", "mi").unwrap_err();
        assert_eq!(e.to_string(), "mi:2: bad major number");
        let mixed = format!("garbage line\n{TEXT}1 2 3:4 / /y rw - ext4\n");
        assert_eq!(parse_lenient(&mixed).len(), 4);
    }

    #[test]
    fn escapes_at_the_end_and_out_of_range() {
        assert_eq!(unescape("/a\\040"), "/a ");
        assert_eq!(unescape("/a\\134b"), "/a\\b");
        assert_eq!(unescape("/a\\04"), "/a\\04");
        // \777 is not a byte: kept as text, no overflow.
        assert_eq!(unescape("/a\\777"), "/a\\777");
        assert_eq!(unescape("/a\\4x1"), "/a\\4x1");
    }

    #[test]
    fn this_machine() {
        let m = read().unwrap();
        assert!(find_mount(&m, Path::new("/")).is_some());
    }
}
