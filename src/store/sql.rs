//! The one seam between the store's queries and its two backends.
//!
//! Why a small dialect layer and not a trait with each query implemented
//! once per backend: fslab's queries are the same SQL on SQLite and
//! PostgreSQL once three things are smoothed over, and all three are
//! mechanical: placeholders (`?1` here, `$1` on PostgreSQL, rewritten in
//! [`super::pg`]), value types (SQLite is dynamically typed, PostgreSQL
//! strict: every value crosses as a [`Value`] and is converted to the
//! column's declared type), and a few DDL spellings (tokens in
//! [`super::schema`]). Writing each query twice would let the backends
//! drift; here each query is one string and each row is mapped by one piece
//! of code ([`Row`], and [`super::columns`] for serde-derived rows).
//!
//! Portable SQL only: `INSERT … RETURNING`, `ON CONFLICT … DO NOTHING`,
//! `count()`/`max()` over integers; no `sum()` (numeric on PostgreSQL) and
//! no booleans (stored as 0/1 integers on both).

use std::rc::Rc;

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::stored::ExperimentStatus;

/// Which SQL the backend speaks, where it matters (DDL, locking).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One SQL value as both backends see it. NaN is stored as NULL (SQLite
/// cannot store NaN), so a REAL column read back as NULL is NaN.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        if v.is_nan() {
            Value::Null
        } else {
            Value::Real(v)
        }
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<ExperimentStatus> for Value {
    fn from(v: ExperimentStatus) -> Self {
        Value::from(v.as_str())
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A count or position as an SQL integer (SQL integers are signed 64-bit).
pub fn int<T>(v: T) -> Result<Value>
where
    T: TryInto<i64> + Copy + std::fmt::Display,
{
    v.try_into().map(Value::Int).map_err(|_| anyhow!("{v} does not fit in a 64-bit SQL integer"))
}

/// Builds a parameter list: `params![a, b, c]`.
macro_rules! params {
    ($($v:expr),* $(,)?) => { &[$($crate::store::sql::Value::from($v)),*][..] };
}
pub(crate) use params;

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

/// One result row with its column names, read the same way from both
/// backends.
#[derive(Clone, Debug)]
pub struct Row {
    names: Rc<[String]>,
    values: Vec<Value>,
}

/// A column by position or by name.
pub trait Col: Copy + std::fmt::Display {
    fn index(self, row: &Row) -> Result<usize>;
}
impl Col for usize {
    fn index(self, row: &Row) -> Result<usize> {
        if self < row.values.len() {
            Ok(self)
        } else {
            bail!("no column {self} in a row of {}", row.values.len())
        }
    }
}
impl Col for &str {
    fn index(self, row: &Row) -> Result<usize> {
        row.names.iter().position(|n| n == self).ok_or_else(|| anyhow!("no column {self:?} in the result"))
    }
}

impl Row {
    pub fn new(names: Rc<[String]>, values: Vec<Value>) -> Row {
        Row { names, values }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn values(&self) -> &[Value] {
        &self.values
    }

    pub fn value<C: Col>(&self, c: C) -> Result<&Value> {
        Ok(&self.values[c.index(self)?])
    }

    pub fn get<T: FromValue, C: Col>(&self, c: C) -> Result<T> {
        T::from_value(self.value(c)?).with_context(|| format!("column {c}"))
    }
}

/// Conversion of a [`Value`] into a Rust type, with the store's rules
/// (NULL REAL = NaN, booleans as 0/1, unsigned values must not be negative).
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Result<Self>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Int(i) => Ok(*i),
            other => bail!("expected an integer, found {other:?}"),
        }
    }
}
macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| anyhow!("{i} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}
unsigned!(u64, usize, u32);

impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Null => Ok(f64::NAN),
            Value::Real(f) => Ok(*f),
            // SQLite hands back integral REALs it was given as integers.
            Value::Int(i) => Ok(*i as f64),
            other => bail!("expected a number, found {other:?}"),
        }
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Int(0) => Ok(false),
            Value::Int(1) => Ok(true),
            other => bail!("expected 0 or 1, found {other:?}"),
        }
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => bail!("expected text, found {other:?}"),
        }
    }
}
impl FromValue for ExperimentStatus {
    fn from_value(v: &Value) -> Result<Self> {
        String::from_value(v)?.parse()
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// What every query runs against: a connection or an open transaction of
/// either backend. Placeholders are `?1`, `?2`, …
pub trait Sql {
    fn dialect(&self) -> Dialect;
    /// Runs one statement; returns the number of rows changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64>;
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>>;
    /// Runs several `;`-separated statements without parameters (DDL).
    fn batch(&mut self, sql: &str) -> Result<()>;

    fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>> {
        let mut rows = self.query(sql, params)?;
        if rows.len() > 1 {
            bail!("query returned {} rows where at most one was expected", rows.len());
        }
        Ok(rows.pop())
    }

    fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Row> {
        self.query_opt(sql, params)?.ok_or_else(|| anyhow!("query returned no row"))
    }
}

/// Inserts `rows` into `table` in multi-row `INSERT`s (one round trip per
/// chunk on PostgreSQL instead of one per row).
pub fn insert_rows(q: &mut dyn Sql, table: &str, columns: &[String], rows: Vec<Vec<Value>>) -> Result<()> {
    // Both backends allow far more parameters per statement; small chunks
    // keep the statement cache to a few shapes per table.
    const MAX_PARAMS: usize = 2000;
    if rows.is_empty() {
        return Ok(());
    }
    let width = columns.len();
    let per_chunk = (MAX_PARAMS / width.max(1)).max(1);
    for chunk in rows.chunks(per_chunk) {
        let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
        let mut n = 0;
        for (i, row) in chunk.iter().enumerate() {
            if row.len() != width {
                bail!("row {i} for {table} has {} values for {width} columns", row.len());
            }
            sql.push_str(if i == 0 { "(" } else { ", (" });
            for j in 0..width {
                n += 1;
                if j > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("?{n}"));
            }
            sql.push(')');
        }
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        q.execute(&sql, &params)?;
    }
    Ok(())
}

/// SQLite: a connection or a transaction (which derefs to one).
pub struct Lite<'a>(pub &'a rusqlite::Connection);

impl Sql for Lite<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let n = stmt.execute(rusqlite::params_from_iter(params))?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let names: Rc<[String]> = stmt.column_names().map(str::to_string).collect();
        let width = names.len();
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(match r.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Real(f) => Value::Real(f),
                    ValueRef::Text(t) => Value::Text(
                        std::str::from_utf8(t)
                            .with_context(|| format!("column {:?} holds text that is not UTF-8", names[i]))?
                            .to_string(),
                    ),
                    ValueRef::Blob(_) => bail!("column {:?} holds a blob; the store writes none", names[i]),
                });
            }
            out.push(Row::new(names.clone(), values));
        }
        Ok(out)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.0.execute_batch(sql)?)
    }
}
