//! Where a store lives: an SQLite file, or a PostgreSQL server named by a
//! URL or a libpq keyword/value string.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A store's address, as given to `--db` or `FSLAB_DB`.
///
/// Anything starting with `postgres://` or `postgresql://` is a PostgreSQL
/// connection URL; a string starting with a libpq keyword and `=`
/// (`host=db dbname=fslab password=…`) is a PostgreSQL keyword/value
/// string; everything else is an SQLite file path (`./host=x.db` for a file
/// of that name).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    /// The URL or keyword/value string exactly as given (it may hold a
    /// password: its `Display` and `Debug` hide it).
    Postgres(String),
}

impl StoreLocation {
    /// Parses `s` (never fails: a string that is not a PostgreSQL URL is a path).
    pub fn parse(s: &str) -> StoreLocation {
        if is_postgres(s) {
            StoreLocation::Postgres(s.to_string())
        } else {
            StoreLocation::Sqlite(PathBuf::from(s))
        }
    }

    /// The location for printing, with any password replaced by `***`.
    /// Kept as a method of this name so code written for `PathBuf` keeps
    /// compiling.
    pub fn display(&self) -> &Self {
        self
    }

    /// The SQLite file, if this is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            StoreLocation::Sqlite(p) => Some(p),
            StoreLocation::Postgres(_) => None,
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, StoreLocation::Postgres(_))
    }
}

pub(super) fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// A URL, or a string whose first word is a libpq keyword followed by `=`.
fn is_postgres(s: &str) -> bool {
    let t = s.trim_start();
    let end = t.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(t.len());
    is_postgres_url(s) || LIBPQ_KEYWORDS.contains(&&t[..end]) && t[end..].trim_start().starts_with('=')
}

/// libpq's connection parameter keywords (PostgreSQL 17, "Parameter Key
/// Words"): what a keyword/value string starts with.
const LIBPQ_KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "require_auth",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "requiressl",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "target_session_attrs",
    "load_balance_hosts",
];

/// Parameters whose values are never printed.
const SECRETS: &[&str] = &["password", "sslpassword"];

/// The `keyword=value` pairs of a libpq keyword/value string, in order,
/// with quotes and backslash escapes resolved; `Err` says what is wrong
/// without quoting the text (it may hold a password). Written here because
/// the `postgres` crate parses this form but does not expose the pairs,
/// and fslab takes `sslmode`/`sslrootcert` itself and hides `password`.
pub(super) fn conninfo_pairs(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut chars = s.chars().peekable();
    let mut pairs = Vec::new();
    let skip_space = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_space(&mut chars);
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let n = pairs.len() + 1;
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        skip_space(&mut chars);
        if key.is_empty() || chars.next() != Some('=') {
            return Err(format!("parameter {n} is not `keyword=value`"));
        }
        skip_space(&mut chars);
        let quoted = chars.next_if_eq(&'\'').is_some();
        let mut value = String::new();
        loop {
            match chars.next() {
                None if quoted => return Err(format!("the value of parameter {n} has no closing quote")),
                Some('\'') if quoted => break,
                Some(c) if c.is_whitespace() && !quoted => break,
                None => break,
                Some('\\') => value.extend(chars.next()),
                Some(c) => value.push(c),
            }
        }
        if value.is_empty() && !quoted {
            return Err(format!("parameter {n} has no value"));
        }
        pairs.push((key, value));
    }
}

/// Pairs written back as a keyword/value string (values quoted when they
/// need it), or with secrets as `***` when `redacted`.
pub(super) fn conninfo_text(pairs: &[(String, String)], redacted: bool) -> String {
    let quote = |v: &str| {
        if !v.is_empty() && !v.contains(|c: char| c.is_whitespace() || c == '\'' || c == '\\') {
            return v.to_string();
        }
        format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
    };
    let words: Vec<String> = pairs
        .iter()
        .map(|(k, v)| match redacted && SECRETS.contains(&k.as_str()) {
            true => format!("{k}=***"),
            false => format!("{k}={}", quote(v)),
        })
        .collect();
    words.join(" ")
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreLocation::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => write!(f, "{}", p.display()),
            StoreLocation::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// `postgres://user:secret@host/db?password=x&sslmode=require` →
/// `postgres://user:***@host/db?sslmode=require`; `host=h password=x` →
/// `host=h password=***` (a keyword/value string that does not parse is
/// not shown at all).
pub fn redact(url: &str) -> String {
    if !is_postgres_url(url) {
        return match conninfo_pairs(url) {
            Ok(pairs) => conninfo_text(&pairs, true),
            Err(why) => format!("(a PostgreSQL keyword/value string, not shown: {why})"),
        };
    }
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (rest, query) = rest.split_once('?').map_or((rest, None), |(r, q)| (r, Some(q)));
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    let mut out = format!("{scheme}://{authority}");
    if let Some(p) = path {
        out.push('/');
        out.push_str(p);
    }
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|p| !SECRETS.iter().any(|k| p.starts_with(&format!("{k}="))))
        .collect();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    out
}

impl FromStr for StoreLocation {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(StoreLocation::parse(s))
    }
}

/// What [`Store::open`](super::Store::open) and friends accept: a
/// [`StoreLocation`], or any path (a path spelling a PostgreSQL URL, as an
/// environment variable would, is taken as one).
pub trait AsLocation {
    fn as_location(&self) -> StoreLocation;
}

impl AsLocation for StoreLocation {
    fn as_location(&self) -> StoreLocation {
        self.clone()
    }
}

impl<T: AsRef<Path> + ?Sized> AsLocation for T {
    fn as_location(&self) -> StoreLocation {
        let p = self.as_ref();
        match p.to_str() {
            Some(s) => StoreLocation::parse(s),
            None => StoreLocation::Sqlite(p.to_path_buf()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_redact() {
        assert_eq!(StoreLocation::parse("fslab.db"), StoreLocation::Sqlite("fslab.db".into()));
        assert!(StoreLocation::parse("postgresql://h/db").is_postgres());
        let loc = StoreLocation::parse("postgres://bob:s3cret@db.example:5433/fslab?sslmode=require&password=x");
        assert_eq!(loc.to_string(), "postgres://bob:***@db.example:5433/fslab?sslmode=require");
        assert_eq!(redact("postgres://bob@h"), "postgres://bob@h");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(Path::new("postgres://u@h/d").as_location(), StoreLocation::Postgres("postgres://u@h/d".into()));
        assert_eq!(Path::new("/tmp/x.db").as_location(), StoreLocation::Sqlite("/tmp/x.db".into()));
    }

    /// A libpq keyword/value string is PostgreSQL, never an SQLite file,
    /// and its password is never shown (issue 28 item 6).
    #[test]
    fn keyword_value_strings_are_postgres_with_the_password_hidden() {
        let text = "host=db.example port=5433 dbname=fslab user=bob password='s3 cr\\'et' sslmode=require";
        let loc = StoreLocation::parse(text);
        assert_eq!(loc, StoreLocation::Postgres(text.into()));
        assert_eq!(Path::new(text).as_location(), loc);
        assert_eq!(loc.to_string(), "host=db.example port=5433 dbname=fslab user=bob password=*** sslmode=require");
        assert!(!format!("{loc:?}").contains("s3"), "{loc:?}");
        assert!(StoreLocation::parse("  dbname = fslab").is_postgres());
        let pairs = conninfo_pairs(text).unwrap();
        assert_eq!(pairs[4], ("password".to_string(), "s3 cr'et".to_string()));
        assert_eq!(conninfo_pairs(&conninfo_text(&pairs, false)).unwrap(), pairs);
        // A file whose name only looks like one stays a file.
        for file in ["./host=x.db", "a=b.db", "results.db", "hostx=1"] {
            assert_eq!(StoreLocation::parse(file), StoreLocation::Sqlite(file.into()), "{file}");
        }
        // Malformed: said without echoing anything.
        let bad = StoreLocation::parse("host=h password='hunter2");
        assert!(bad.is_postgres());
        assert_eq!(
            bad.to_string(),
            "(a PostgreSQL keyword/value string, not shown: the value of parameter 2 has no closing quote)"
        );
        assert_eq!(conninfo_pairs("host=h hunter2").unwrap_err(), "parameter 2 is not `keyword=value`");
        assert_eq!(redact("postgres://h/d?sslpassword=k&x=1"), "postgres://h/d?x=1");
    }
}
