//! Where a store lives: an SQLite file or a PostgreSQL URL.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A store's address, as given to `--db` or `FSLAB_DB`.
///
/// Anything starting with `postgres://` or `postgresql://` is a PostgreSQL
/// connection URL; everything else is an SQLite file path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    /// The URL exactly as given (it may hold a password: print it with
    /// [`StoreLocation::display`], which hides it).
    Postgres(String),
}

impl StoreLocation {
    /// Parses `s` (never fails: a string that is not a PostgreSQL URL is a path).
    pub fn parse(s: &str) -> StoreLocation {
        if is_postgres_url(s) {
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

fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
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
/// `postgres://user:***@host/db?sslmode=require`.
pub fn redact(url: &str) -> String {
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
    let kept: Vec<&str> =
        query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.starts_with("password=")).collect();
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
            Some(s) if is_postgres_url(s) => StoreLocation::Postgres(s.to_string()),
            _ => StoreLocation::Sqlite(p.to_path_buf()),
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
}
