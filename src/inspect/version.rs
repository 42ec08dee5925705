//! Kernel versions (`6.1.0-18-amd64` → 6.1.0) and version ranges
//! (`">=5.8, <5.17"`) as used by known-issue rules.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Mainline version of a kernel release: `major.minor.patch`.
///
/// Release candidates count as the release they lead to (`5.17-rc1` is
/// `5.17.0`), because mainline fixes are usually quoted as "in 5.17-rc1".
/// Distribution suffixes (`-18-amd64`, `+`, `-fc-v657`) are ignored; such
/// kernels may carry backports, which a version check cannot see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl KernelVersion {
    /// Build a version from its parts.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        KernelVersion { major, minor, patch }
    }

    /// Parse the leading `X.Y[.Z]` of a release string.
    pub fn parse(release: &str) -> Result<Self, String> {
        let s = release.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        // Only the numeric head matters: "5.15.0-91-generic" → "5.15.0".
        let head_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let head = s[..head_len].trim_end_matches('.');
        let mut parts = head.split('.');
        let num = |p: Option<&str>, what: &str| -> Result<Option<u32>, String> {
            match p {
                None => Ok(None),
                Some(t) => {
                    t.parse::<u32>().map(Some).map_err(|_| format!("bad {what} number in kernel version `{release}`"))
                }
            }
        };
        let major = num(parts.next().filter(|p| !p.is_empty()), "major")?
            .ok_or_else(|| format!("`{release}` is not a kernel version (expected X.Y[.Z])"))?;
        let minor = num(parts.next(), "minor")?
            .ok_or_else(|| format!("`{release}` is not a kernel version (expected X.Y[.Z])"))?;
        let patch = num(parts.next(), "patch")?.unwrap_or(0);
        Ok(KernelVersion { major, minor, patch })
    }
}

impl FromStr for KernelVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KernelVersion::parse(s)
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Serialize for KernelVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KernelVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        KernelVersion::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: KernelVersion,
    /// `=5.15` matches the whole 5.15.y series; `=5.15.3` only that release.
    series: bool,
}

impl Comparator {
    fn matches(&self, v: KernelVersion) -> bool {
        match self.op {
            Op::Lt => v < self.version,
            Op::Le => v <= self.version,
            Op::Gt => v > self.version,
            Op::Ge => v >= self.version,
            Op::Eq if self.series => v.major == self.version.major && v.minor == self.version.minor,
            Op::Eq => v == self.version,
        }
    }
}

/// A set of kernel versions: comparators joined by `,` (all must hold),
/// alternatives joined by `||`. Examples: `">=5.8, <5.17"`,
/// `">=5.13, <6.0 || =5.10"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionReq {
    text: String,
    alternatives: Vec<Vec<Comparator>>,
}

impl VersionReq {
    /// Parse a range such as `">=5.8, <5.17"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut alternatives = Vec::new();
        for alt in text.split("||") {
            let mut comps = Vec::new();
            for part in alt.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    return Err(format!("empty comparator in version range `{text}`"));
                }
                let (op, rest) = if let Some(r) = part.strip_prefix(">=") {
                    (Op::Ge, r)
                } else if let Some(r) = part.strip_prefix("<=") {
                    (Op::Le, r)
                } else if let Some(r) = part.strip_prefix('>') {
                    (Op::Gt, r)
                } else if let Some(r) = part.strip_prefix('<') {
                    (Op::Lt, r)
                } else if let Some(r) = part.strip_prefix('=') {
                    (Op::Eq, r)
                } else {
                    return Err(format!("comparator `{part}` in version range `{text}` needs one of >= > <= < ="));
                };
                let rest = rest.trim();
                if rest.is_empty() || !rest.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    return Err(format!("`{rest}` in version range `{text}` is not X.Y[.Z]"));
                }
                let version = KernelVersion::parse(rest)?;
                comps.push(Comparator { op, version, series: rest.matches('.').count() == 1 });
            }
            alternatives.push(comps);
        }
        Ok(VersionReq { text: text.trim().to_string(), alternatives })
    }

    /// Does `v` fall in this range?
    pub fn matches(&self, v: KernelVersion) -> bool {
        self.alternatives.iter().any(|alt| alt.iter().all(|c| c.matches(v)))
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for VersionReq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for VersionReq {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for VersionReq {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        VersionReq::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KernelVersion {
        KernelVersion::parse(s).unwrap()
    }

    #[test]
    fn parses_releases() {
        assert_eq!(v("6.18.44-fc-v657"), KernelVersion::new(6, 18, 44));
        assert_eq!(v("5.15.0-91-generic"), KernelVersion::new(5, 15, 0));
        assert_eq!(v("5.17-rc1"), KernelVersion::new(5, 17, 0));
        assert_eq!(v("v6.1"), KernelVersion::new(6, 1, 0));
        assert_eq!(v("6.1.0+"), KernelVersion::new(6, 1, 0));
        assert_eq!(v("4.19.282-rt121"), KernelVersion::new(4, 19, 282));
        assert!(KernelVersion::parse("linux").is_err());
        assert!(KernelVersion::parse("6").is_err());
        assert!(KernelVersion::parse("").is_err());
    }

    #[test]
    fn ranges() {
        let r = VersionReq::parse(">=5.8, <5.17").unwrap();
        assert!(!r.matches(v("5.7.19")));
        assert!(r.matches(v("5.8")));
        assert!(r.matches(v("5.15.32")));
        assert!(!r.matches(v("5.17-rc1")));
        assert!(!r.matches(v("6.1")));
        let alt = VersionReq::parse("<5.4 || =5.10").unwrap();
        assert!(alt.matches(v("5.10.200")));
        assert!(alt.matches(v("4.19")));
        assert!(!alt.matches(v("5.11")));
        let exact = VersionReq::parse("=5.10.3").unwrap();
        assert!(exact.matches(v("5.10.3")) && !exact.matches(v("5.10.4")));
        assert_eq!(r.to_string(), ">=5.8, <5.17");
    }

    #[test]
    fn bad_ranges() {
        assert!(VersionReq::parse("5.8").is_err());
        assert!(VersionReq::parse(">=5.8,").is_err());
        assert!(VersionReq::parse(">=five").is_err());
        assert!(VersionReq::parse(">=5.8-rc1").is_err());
    }
}
