//! Sizes, rates and durations as people write them in experiment files.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count written as `1GiB`, `512MiB`, `64M`, `4k`, `1.5GB` or a bare
/// integer. Binary suffixes (`k`, `M`, `G`, `T`, with or without `iB`) are
/// powers of 1024; `kB`, `MB`, `GB`, `TB` are powers of 1000 (as in `dd`).
/// A trailing `/s` is accepted so rates read naturally (`write_bps = "32MiB/s"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn parse(text: &str) -> Result<Bytes, String> {
        let trimmed = text.trim();
        let body = trimmed.strip_suffix("/s").unwrap_or(trimmed).trim();
        let split = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
        let (number, suffix) = body.split_at(split);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size (expected e.g. 1GiB, 512MiB, 64M or a byte count)"))?;
        let multiplier: f64 = match suffix.trim() {
            "" | "B" | "b" => 1.0,
            "k" | "K" | "KiB" | "kiB" => 1024.0,
            "M" | "MiB" => 1024.0 * 1024.0,
            "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
            "T" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            other => {
                return Err(format!(
                    "`{text}`: unknown size unit `{other}` (use k, M, G, T, KiB, MiB, GiB, kB, MB, GB)"
                ))
            }
        };
        let bytes = value * multiplier;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{text}` is out of range"));
        }
        Ok(Bytes(bytes.round() as u64))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (name, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{}", self.0 / size, name);
            }
        }
        for (name, size) in UNITS {
            if self.0 >= size {
                return write!(f, "{:.1}{}", self.0 as f64 / size as f64, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a size such as \"1GiB\" or a byte count"))?
        {
            Raw::Int(n) => Ok(Bytes(n)),
            Raw::Text(s) => Bytes::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A duration written as `10m`, `30s`, `100ms`, `1h 30m` or a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub Duration);

impl Seconds {
    pub fn parse(text: &str) -> Result<Seconds, String> {
        humantime::parse_duration(text.trim())
            .map(Seconds)
            .map_err(|e| format!("`{text}` is not a duration (e.g. 30s, 10m, 100ms): {e}"))
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Float(f64),
            Text(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a duration such as \"30s\" or a number of seconds"))?
        {
            Raw::Int(n) => Ok(Seconds(Duration::from_secs(n))),
            Raw::Float(x) if x.is_finite() && x >= 0.0 => Ok(Seconds(Duration::from_secs_f64(x))),
            Raw::Float(x) => Err(serde::de::Error::custom(format!("{x} is not a valid number of seconds"))),
            Raw::Text(s) => Seconds::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_binary_and_decimal_units() {
        assert_eq!(Bytes::parse("1GiB").unwrap().0, 1 << 30);
        assert_eq!(Bytes::parse("64MiB").unwrap().0, 64 << 20);
        assert_eq!(Bytes::parse("32M").unwrap().0, 32 << 20);
        assert_eq!(Bytes::parse("4k").unwrap().0, 4096);
        assert_eq!(Bytes::parse("1.5GB").unwrap().0, 1_500_000_000);
        assert_eq!(Bytes::parse("32MiB/s").unwrap().0, 32 << 20);
        assert_eq!(Bytes::parse("4096").unwrap().0, 4096);
        assert!(Bytes::parse("12 parsecs").is_err());
        assert!(Bytes::parse("GiB").is_err());
        assert!(Bytes::parse("").is_err());
    }

    #[test]
    fn sizes_display_compactly() {
        assert_eq!(Bytes(1 << 30).to_string(), "1GiB");
        assert_eq!(Bytes(3 << 19).to_string(), "1536KiB");
        assert_eq!(Bytes(1_500_000).to_string(), "1.4MiB");
        assert_eq!(Bytes(100).to_string(), "100B");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(Seconds::parse("100ms").unwrap().0, Duration::from_millis(100));
        assert_eq!(Seconds::parse("10m").unwrap().0, Duration::from_secs(600));
        assert!(Seconds::parse("soon").is_err());
    }
}
