//! The PostgreSQL backend: connecting (TLS when the URL asks), running the
//! store's `?N` SQL, and telling retryable failures from real ones.
//!
//! Uses the synchronous `postgres` crate; TLS is rustls
//! (`tokio-postgres-rustls`), so no system OpenSSL is needed.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use postgres::error::SqlState;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::{Client, Config, GenericClient, NoTls, Statement};

use super::location::{conninfo_pairs, conninfo_text, is_postgres_url, redact};
use super::sql::{Dialect, Row, Sql, Value};

/// A PostgreSQL connection that comes back after the server went away:
/// a lost connection fails the operation that noticed it, and the next
/// operation connects again.
pub struct Pg {
    url: String,
    config: Config,
    tls: Option<Arc<rustls::ClientConfig>>,
    client: Option<Client>,
    /// Prepared statements by their `?N` text, for the current connection.
    statements: HashMap<String, Statement>,
}

/// How long a connection attempt may take unless the URL says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Pg {
    /// Parses `url` (a URL or a keyword/value string) and connects.
    pub fn connect(url: &str) -> Result<Pg> {
        let (config, tls) = parse_location(url)?;
        let mut pg = Pg { url: url.to_string(), config, tls, client: None, statements: HashMap::new() };
        pg.client()?;
        Ok(pg)
    }

    /// The open connection, reconnecting if the last one was lost.
    pub fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            self.statements.clear();
            let loc = redact(&self.url);
            let client = match &self.tls {
                None => self.config.connect(NoTls),
                Some(tls) => self.config.connect(tokio_postgres_rustls::MakeRustlsConnect::new((**tls).clone())),
            }
            .map_err(|e| {
                // The error stays the source: a refused connection is a lost one.
                let text = describe(&e);
                anyhow::Error::new(e).context(format!("cannot connect to PostgreSQL at {loc}: {text}"))
            })?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    /// Forgets the connection if `err` says it is gone, so the next call reconnects.
    pub fn note_error(&mut self, err: &anyhow::Error) {
        if is_connection_lost(err) || self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
            self.statements.clear();
        }
    }

    /// The connection and the statement cache, split so a transaction can
    /// borrow the one while using the other.
    pub fn parts(&mut self) -> Result<(&mut Client, &mut HashMap<String, Statement>)> {
        self.client()?;
        Ok((self.client.as_mut().expect("connected above"), &mut self.statements))
    }
}

/// Splits fslab's own parameters off a URL or a keyword/value string before
/// the `postgres` crate (which rejects unknown ones) parses the rest.
///
/// `sslmode=require`, `verify-ca` and `verify-full` all mean TLS with the
/// server certificate verified (chain and host name) against the system's
/// roots plus `sslrootcert=FILE` if given: fslab never sends results over
/// an unverified connection. `disable`, `prefer` and no `sslmode` connect
/// without TLS.
fn parse_location(location: &str) -> Result<(Config, Option<Arc<rustls::ClientConfig>>)> {
    let loc = redact(location);
    let own = |key: &str| key == "sslmode" || key == "sslrootcert";
    // fslab's parameters (decoded), and the rest in the form it was given.
    let (ours, rest, form): (Vec<(String, String)>, String, &str) = if is_postgres_url(location) {
        let (base, query) = location.split_once('?').unwrap_or((location, ""));
        let pairs = query.split('&').filter(|p| !p.is_empty()).map(|p| (p, p.split_once('=').unwrap_or((p, ""))));
        let (ours, kept): (Vec<_>, Vec<_>) = pairs.partition(|(_, (key, _))| own(key));
        let kept: Vec<&str> = kept.into_iter().map(|(pair, _)| pair).collect();
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        (ours.into_iter().map(|(_, (k, v))| (k.to_string(), percent_decode(v))).collect(), rest, "URL")
    } else {
        let pairs = conninfo_pairs(location).map_err(|why| anyhow!("{loc}: {why}"))?;
        let (ours, kept): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(key, _)| own(key));
        (ours, conninfo_text(&kept, false), "keyword/value string")
    };
    let mut tls = false;
    let mut root_cert = None;
    for (key, value) in ours {
        match (key.as_str(), value.as_str()) {
            ("sslmode", "disable" | "prefer" | "allow") => {}
            ("sslmode", "require" | "verify-ca" | "verify-full") => tls = true,
            ("sslmode", other) => {
                bail!("{loc}: unknown sslmode {other:?} (disable, prefer, require, verify-ca, verify-full)")
            }
            _ => root_cert = Some(value),
        }
    }
    // The crate's error says which option in its source: keep the chain.
    let mut config: Config = rest.parse().with_context(|| format!("{loc} is not a valid PostgreSQL {form}"))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("fslab");
    }
    if !tls {
        config.ssl_mode(postgres::config::SslMode::Disable);
        return Ok((config, None));
    }
    config.ssl_mode(postgres::config::SslMode::Require);
    Ok((config, Some(Arc::new(tls_config(root_cert.as_deref()).with_context(|| format!("TLS setup for {loc}"))?))))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn tls_config(root_cert: Option<&str>) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are not fatal: sslrootcert may be all we need.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = root_cert {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("cannot read sslrootcert {path}"))?
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("sslrootcert {path} is not a PEM certificate file"))?;
        if certs.is_empty() {
            bail!("sslrootcert {path} holds no certificate");
        }
        for cert in certs {
            roots.add(cert).with_context(|| format!("sslrootcert {path}"))?;
        }
    }
    if roots.is_empty() {
        bail!("no trusted root certificates: the system has none readable and no sslrootcert=FILE was given");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A `postgres` error with its server detail (the crate's Display alone
/// says just "db error").
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{}: {}", db.severity(), db.message());
        if let Some(d) = db.detail() {
            s.push_str(&format!(" ({d})"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    if e.is_closed() {
        s.push_str(" (the connection to the server was lost)");
    }
    s
}

fn pg_error(e: postgres::Error) -> anyhow::Error {
    let text = describe(&e);
    anyhow::Error::new(e).context(text)
}

/// Unique keys concurrent writers race on; losing on one of them means
/// "someone else wrote it first", and the retry sees their row. (A
/// violation of any other unique key is a real error: no retry.)
const RACE_KEYS: &[&str] =
    &["runs_experiment_id_seq_key", "machines_fingerprint_key", "experiments_campaign", "shards_pkey", "leases_pkey"];

/// Whether `err` means the transaction lost a race (a unique key of
/// [`RACE_KEYS`], a serialization failure, a deadlock) and may simply run again.
pub fn is_retryable(err: &anyhow::Error) -> bool {
    let Some(e) = err.chain().find_map(|c| c.downcast_ref::<postgres::Error>()) else { return false };
    let Some(db) = e.as_db_error() else { return false };
    let code = db.code();
    *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || (*code == SqlState::UNIQUE_VIOLATION && db.constraint().is_some_and(|c| RACE_KEYS.contains(&c)))
}

/// Whether `err` means the connection is gone (server stopped, network cut).
pub fn is_connection_lost(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        if let Some(e) = c.downcast_ref::<postgres::Error>() {
            return e.is_closed()
                || matches!(e.code(), Some(s) if *s == SqlState::ADMIN_SHUTDOWN || *s == SqlState::CANNOT_CONNECT_NOW)
                || e.source().is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
        }
        c.downcast_ref::<std::io::Error>().is_some()
    })
}

/// Rewrites the store's SQL for PostgreSQL: `?N` placeholders become `$N`
/// (outside string literals) and `COLLATE BINARY` (SQLite's byte order)
/// becomes `COLLATE "C"` (the same order, whatever the database locale).
pub fn translate(sql: &str) -> String {
    placeholders(sql).replace(" COLLATE BINARY", " COLLATE \"C\"")
}

fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut in_string = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_string = !in_string;
                out.push(c);
            }
            '?' if !in_string && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            c => out.push(c),
        }
    }
    out
}

/// A connection or transaction with the statement cache of its connection.
pub struct PgSql<'a, C: GenericClient> {
    pub client: &'a mut C,
    pub statements: &'a mut HashMap<String, Statement>,
}

impl<C: GenericClient> PgSql<'_, C> {
    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&translate(sql)).map_err(pg_error)?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

impl<C: GenericClient> Sql for PgSql<'_, C> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let stmt = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        self.client.execute(&stmt, &refs).map_err(pg_error)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let stmt = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = self.client.query(&stmt, &refs).map_err(pg_error)?;
        let names: Rc<[String]> = stmt.columns().iter().map(|c| c.name().to_string()).collect();
        let types: Vec<Type> = stmt.columns().iter().map(|c| c.type_().clone()).collect();
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut values = Vec::with_capacity(types.len());
            for (i, ty) in types.iter().enumerate() {
                let v = match *ty {
                    Type::INT8 => r.try_get::<_, Option<i64>>(i).map(|v| v.map(Value::Int)),
                    Type::INT4 => r.try_get::<_, Option<i32>>(i).map(|v| v.map(|v| Value::Int(v.into()))),
                    Type::INT2 => r.try_get::<_, Option<i16>>(i).map(|v| v.map(|v| Value::Int(v.into()))),
                    Type::BOOL => r.try_get::<_, Option<bool>>(i).map(|v| v.map(Value::from)),
                    Type::FLOAT8 => r.try_get::<_, Option<f64>>(i).map(|v| v.map(Value::from)),
                    Type::FLOAT4 => r.try_get::<_, Option<f32>>(i).map(|v| v.map(|f| Value::from(f64::from(f)))),
                    Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => {
                        r.try_get::<_, Option<String>>(i).map(|v| v.map(Value::Text))
                    }
                    ref other => bail!("column {:?} has type {other}, which the store does not read", names[i]),
                }
                .map_err(pg_error)?;
                values.push(v.unwrap_or(Value::Null));
            }
            out.push(Row::new(names.clone(), values));
        }
        Ok(out)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.client.batch_execute(sql).map_err(pg_error)
    }
}

/// Values take the type PostgreSQL inferred for their placeholder.
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Int(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (Value::Int(i), t) if is_text(t) => i.to_string().to_sql(&Type::TEXT, out),
            (Value::Text(s), t) if is_text(t) => s.to_sql(&Type::TEXT, out),
            (v, t) => Err(format!("cannot send {v:?} as PostgreSQL type {t}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn is_text(t: &Type) -> bool {
    matches!(*t, Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_outside_strings() {
        assert_eq!(placeholders("SELECT ?1, '?2', ?10 WHERE a = ?"), "SELECT $1, '?2', $10 WHERE a = ?");
        assert_eq!(translate("ORDER BY name COLLATE BINARY, ?1"), "ORDER BY name COLLATE \"C\", $1");
    }

    #[test]
    fn url_parameters() {
        let (c, tls) = parse_location("postgres://u@h:5433/d?sslmode=disable&connect_timeout=3").unwrap();
        assert!(tls.is_none());
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(c.get_dbname(), Some("d"));
        let e = format!("{:#}", parse_location("postgres://u:pw@h/d?sslmode=bogus").unwrap_err());
        assert!(e.contains("unknown sslmode") && !e.contains("pw"), "{e}");
        let e = format!("{:#}", parse_location("postgres://h/d?sslmode=require&sslrootcert=/no/such.pem").unwrap_err());
        assert!(e.contains("/no/such.pem"), "{e}");
        // The keyword/value form, with fslab's own parameters taken off.
        let text = "host=h port=5433 dbname=d user=u password='p w' sslmode=disable connect_timeout=3";
        let (c, tls) = parse_location(text).unwrap();
        assert!(tls.is_none());
        assert_eq!((c.get_dbname(), c.get_user(), c.get_password()), (Some("d"), Some("u"), Some(&b"p w"[..])));
        assert_eq!(c.get_ports(), [5433]);
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
        let e = format!("{:#}", parse_location("host=h password=pw sslmode=bogus").unwrap_err());
        assert!(e.contains("unknown sslmode") && !e.contains("pw "), "{e}");
        let e = format!("{:#}", parse_location("host=h password=pw service=x").unwrap_err());
        assert!(e.contains("unknown option `service`") && e.contains("password=***") && !e.contains("=pw"), "{e}");
        let e = format!("{:#}", parse_location("host=h sslmode=require sslrootcert='/no/such file.pem'").unwrap_err());
        assert!(e.contains("/no/such file.pem"), "{e}");
        assert_eq!(percent_decode("-csearch_path%3Dx"), "-csearch_path=x");
    }
}
