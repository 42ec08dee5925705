//! Stored rows derived from their Rust type, so a field cannot be dropped
//! on the way in or out.
//!
//! A type stored in its own table (a monitor sample, device totals, a
//! metric, a machine, the store's own row structs) is written by
//! serialising it with serde into `(column, value)` pairs, and read by
//! deserialising a result row by column name. The column list is the
//! type's field list: a new field without a matching column makes the
//! insert fail loudly (and the round-trip tests catch it); a column the
//! type does not know is ignored on read.

use std::fmt;

use anyhow::{anyhow, bail, Result};
use serde::de::value::{Error as DeError, MapDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::Serialize;

use super::sql::{insert_rows, Row, Sql, Value};

/// `value`'s fields as `(column, value)` pairs, in name order.
///
/// Only flat structs of numbers, booleans, strings and options of those
/// are stored this way; anything nested is an error naming the field.
pub fn to_columns<T: Serialize>(value: &T) -> Result<Vec<(String, Value)>> {
    let json = serde_json::to_value(value)?;
    let serde_json::Value::Object(map) = json else { bail!("only structs are stored as rows, got {json}") };
    map.into_iter()
        .map(|(k, v)| {
            let sql = match v {
                // serde_json turns NaN into null, which is how NaN is stored.
                serde_json::Value::Null => Value::Null,
                serde_json::Value::Bool(b) => Value::from(b),
                serde_json::Value::Number(n) => {
                    if let Some(i) = n.as_i64() {
                        Value::Int(i)
                    } else if let Some(u) = n.as_u64() {
                        bail!("field {k} = {u} does not fit in a 64-bit SQL integer")
                    } else {
                        Value::from(n.as_f64().ok_or_else(|| anyhow!("field {k}: number {n} is not representable"))?)
                    }
                }
                serde_json::Value::String(s) => Value::Text(s),
                other => bail!("field {k} is not a scalar ({other}); it cannot be one column"),
            };
            Ok((k, sql))
        })
        .collect()
}

/// Inserts `items` into `table`, each row prefixed with the `fixed` columns
/// (e.g. `run_id`, `idx`) whose values `fixed_of` gives per item.
pub fn insert_all<T: Serialize>(
    q: &mut dyn Sql,
    table: &str,
    fixed: &[&str],
    items: &[T],
    mut fixed_of: impl FnMut(usize) -> Result<Vec<Value>>,
) -> Result<()> {
    let mut columns: Option<Vec<String>> = None;
    let mut rows = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let cols = to_columns(item)?;
        let names: Vec<String> =
            fixed.iter().map(|s| s.to_string()).chain(cols.iter().map(|(k, _)| k.clone())).collect();
        match &columns {
            None => columns = Some(names),
            Some(c) if *c != names => bail!("{table}: item {i} serialises to different columns"),
            Some(_) => {}
        }
        let mut row = fixed_of(i)?;
        row.extend(cols.into_iter().map(|(_, v)| v));
        rows.push(row);
    }
    match columns {
        Some(columns) => insert_rows(q, table, &columns, rows),
        None => Ok(()),
    }
}

/// Inserts one item with `fixed` leading columns; returns the `RETURNING`
/// row if `returning` names columns.
pub fn insert_one<T: Serialize>(
    q: &mut dyn Sql,
    table: &str,
    fixed: &[(&str, Value)],
    item: &T,
    returning: Option<&str>,
) -> Result<Option<Row>> {
    let cols = to_columns(item)?;
    let names: Vec<&str> = fixed.iter().map(|(k, _)| *k).chain(cols.iter().map(|(k, _)| k.as_str())).collect();
    let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    let mut sql = format!("INSERT INTO {table} ({}) VALUES ({})", names.join(", "), marks.join(", "));
    let params: Vec<Value> = fixed.iter().map(|(_, v)| v.clone()).chain(cols.into_iter().map(|(_, v)| v)).collect();
    match returning {
        Some(r) => {
            sql.push_str(&format!(" RETURNING {r}"));
            Ok(Some(q.query_one(&sql, &params)?))
        }
        None => {
            q.execute(&sql, &params)?;
            Ok(None)
        }
    }
}

/// Reads `T` from a row by column name (extra columns are ignored,
/// missing ones take the field's serde default).
pub fn from_row<T: DeserializeOwned>(row: &Row) -> Result<T> {
    let pairs = row.names().iter().map(String::as_str).zip(row.values().iter().map(ValueDe));
    T::deserialize(MapDeserializer::new(pairs)).map_err(|e| anyhow!("{e}"))
}

/// Deserialises one [`Value`] with the store's rules: NULL is NaN for a
/// float and `None` for an option; 0/1 are booleans.
struct ValueDe<'a>(&'a Value);

impl<'de> IntoDeserializer<'de, DeError> for ValueDe<'_> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for ValueDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_none(),
            Value::Int(i) => v.visit_i64(*i),
            Value::Real(f) => v.visit_f64(*f),
            Value::Text(s) => v.visit_str(s),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_f64(f64::NAN),
            Value::Int(i) => v.visit_f64(*i as f64),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(v)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Int(0) => v.visit_bool(false),
            Value::Int(1) => v.visit_bool(true),
            other => Err(de::Error::custom(format!("expected 0 or 1 for a boolean, found {other:?}"))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl fmt::Debug for ValueDe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
pub mod testing {
    //! A value of a stored type with every field distinct, so a dropped or
    //! swapped column shows up in a round trip.

    use serde::de::DeserializeOwned;
    use serde::Serialize;

    pub fn distinct<T: Serialize + DeserializeOwned + Default>(seed: u32) -> T {
        distinct_from(&T::default(), seed)
    }

    /// [`distinct`] for a type without `Default`: `template` gives the shape.
    pub fn distinct_from<T: Serialize + DeserializeOwned>(template: &T, seed: u32) -> T {
        let serde_json::Value::Object(map) = serde_json::to_value(template).unwrap() else { panic!("not a struct") };
        let mut out = map.clone();
        for (i, (k, v)) in map.into_iter().enumerate() {
            let n = f64::from(seed) * 1000.0 + i as f64 + 1.0;
            let candidates = match &v {
                serde_json::Value::Bool(b) => vec![serde_json::json!(!b)],
                serde_json::Value::Number(x) if x.is_f64() => vec![serde_json::json!(n + 0.25)],
                serde_json::Value::Number(_) => vec![serde_json::json!(n as u64)],
                serde_json::Value::String(_) => vec![serde_json::json!(format!("{k}-{n}"))],
                // An option: try the shapes a stored field can have.
                _ => vec![
                    serde_json::json!(format!("{k}-{n}")),
                    serde_json::json!(n as u64),
                    serde_json::json!(n + 0.25),
                ],
            };
            // A value of a closed set (a status) keeps the template's: the
            // caller sets one other than the default.
            let mut chosen = None;
            for c in candidates.into_iter().chain([v.clone()]) {
                let mut trial = out.clone();
                trial.insert(k.clone(), c.clone());
                if serde_json::from_value::<T>(serde_json::Value::Object(trial)).is_ok() {
                    chosen = Some(c);
                    break;
                }
            }
            out.insert(k.clone(), chosen.unwrap_or_else(|| panic!("no distinct value for field {k}")));
        }
        serde_json::from_value(serde_json::Value::Object(out)).unwrap()
    }
}
