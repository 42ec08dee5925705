//! Typed keys of experiment-file tables, with the spans errors point at.
//!
//! An experiment file is parsed once into toml's span-keeping tree
//! ([`toml::de::DeTable`]). Each part of fslab that owns some keys (the
//! experiment's top level, a variant's common settings, a filesystem
//! kind's image options, a workload kind's parameters) declares them as
//! its own serde struct with `deny_unknown_fields` and `Spanned` values,
//! takes its keys out of the table ([`Table::split_off`]) and deserializes
//! them ([`Table::parse`]). So a kind's keys live in the kind's file, and
//! every error still names the file, line, column and key.

use std::ops::Range;
use std::path::Path;

use anyhow::anyhow;
use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

/// The text an experiment came from, for errors and relative paths.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub text: &'a str,
    /// How errors name the file (`exp.toml`, `<built-in>`).
    pub origin: &'a str,
    /// Directory relative paths in the file are resolved against.
    pub base_dir: &'a Path,
}

impl Source<'_> {
    /// `origin:line:col: \`key\`: message`.
    pub fn err(&self, span: Range<usize>, key: &str, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("{}{}: `{key}`: {message}", self.origin, location(self.text, span.start))
    }

    /// A toml parse/deserialize error, located, with the key it is about
    /// named when the message does not already name it.
    pub fn toml_err(&self, e: &toml::de::Error) -> anyhow::Error {
        let message = e.message().trim();
        let Some(span) = e.span() else { return anyhow!("{}: {message}", self.origin) };
        let at = location(self.text, span.start);
        match key_at(self.text, span.start) {
            Some(key) if !message.contains(&format!("`{key}`")) => anyhow!("{}{at}: `{key}`: {message}", self.origin),
            _ => anyhow!("{}{at}: {message}", self.origin),
        }
    }

    /// `path` resolved against the experiment file's directory.
    pub fn resolve_path(&self, path: &str) -> std::path::PathBuf {
        self.base_dir.join(path)
    }
}

/// The located errors of one file, collected so that checking goes on past
/// the first and every independent error is reported, as a compiler does.
/// The same message twice (a bad `[defaults]` key every variant inherits)
/// is kept once.
#[derive(Debug, Default)]
pub struct Errors(Vec<anyhow::Error>);

impl Errors {
    pub fn push(&mut self, error: anyhow::Error) {
        let text = format!("{error:#}");
        if !self.0.iter().any(|e| format!("{e:#}") == text) {
            self.0.push(error);
        }
    }

    /// The value of `result`, or None with its error kept.
    pub fn ok<T>(&mut self, result: anyhow::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    /// Keep `other`'s errors too.
    pub fn append(&mut self, other: Errors) {
        for e in other.0 {
            self.push(e);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &anyhow::Error> {
        self.0.iter()
    }

    /// None when nothing was found; one error as it is (its class and
    /// chain kept); several as one [`FileErrors`].
    pub fn into_error(mut self, origin: &str) -> Option<anyhow::Error> {
        match self.0.len() {
            0 => None,
            1 => self.0.pop(),
            _ => Some(anyhow::Error::new(FileErrors {
                origin: origin.to_string(),
                errors: self.0.iter().map(|e| format!("{e:#}")).collect(),
            })),
        }
    }
}

/// Several errors of one file: each on its own line (`file:line:col:
/// \`key\`: …`), then how many.
#[derive(Debug)]
pub struct FileErrors {
    pub origin: String,
    pub errors: Vec<String>,
}

impl std::fmt::Display for FileErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for e in &self.errors {
            writeln!(f, "{e}")?;
        }
        write!(f, "{} errors in {}", self.errors.len(), self.origin)
    }
}

impl std::error::Error for FileErrors {}

/// `:line:column` (1-based) of byte `offset` in `text`.
pub fn location(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    format!(":{line}:{column}")
}

/// The key whose value starts at `offset`: the bare key before the last
/// `=` (or `{`/`,` inside an inline table) on that line.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let line_start = text[..offset.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..offset.min(text.len())];
    let eq = before.rfind('=')?;
    let lhs = before[..eq].trim_end();
    let key = lhs.rsplit(['{', ',', ' ']).next()?.trim().trim_matches('"').trim_matches('\'');
    let ok = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    ok.then(|| key.to_string())
}

/// One table of the file (the top level, a `[[variant]]`, `[defaults]`, a
/// `[[workload]]`), keys not yet taken by anyone.
#[derive(Clone, Debug)]
pub struct Table<'a> {
    /// Where the table starts (its header, or 0 for the top level).
    pub span: Range<usize>,
    entries: DeTable<'a>,
}

impl<'a> Table<'a> {
    /// The top-level table of `text`.
    pub fn parse_document(src: &Source<'a>) -> anyhow::Result<Table<'a>> {
        let root = DeTable::parse(src.text).map_err(|e| src.toml_err(&e))?;
        let span = root.span();
        Ok(Table { span, entries: root.into_inner() })
    }

    /// An empty table located at `span` (e.g. a missing `[defaults]`).
    pub fn empty(span: Range<usize>) -> Table<'a> {
        Table { span, entries: DeTable::new() }
    }

    /// Remove and return a value.
    pub fn take(&mut self, key: &str) -> Option<Spanned<DeValue<'a>>> {
        self.entries.remove(key)
    }

    /// Remove `key`, which must be a table (`[defaults]`, an inline table).
    pub fn take_table(&mut self, src: &Source, key: &str) -> anyhow::Result<Option<Table<'a>>> {
        let Some(value) = self.take(key) else { return Ok(None) };
        let span = value.span();
        match value.into_inner() {
            DeValue::Table(entries) => Ok(Some(Table { span, entries })),
            other => Err(src.err(span, key, format!("must be a table, not a {}", other.type_str()))),
        }
    }

    /// Remove `key`, which must be an array of tables (`[[variant]]`).
    pub fn take_tables(&mut self, src: &Source, key: &str) -> anyhow::Result<Vec<Table<'a>>> {
        let Some(value) = self.take(key) else { return Ok(Vec::new()) };
        let span = value.span();
        let DeValue::Array(items) = value.into_inner() else {
            return Err(src.err(span, key, format!("must be a list of tables (`[[{key}]]`)")));
        };
        items
            .into_iter()
            .map(|item| {
                let span = item.span();
                match item.into_inner() {
                    DeValue::Table(entries) => Ok(Table { span, entries }),
                    other => Err(src.err(span, key, format!("must be a table, not a {}", other.type_str()))),
                }
            })
            .collect()
    }

    /// The keys still in the table, with the span of each key.
    pub fn keys(&self) -> impl Iterator<Item = (&str, Range<usize>)> {
        self.entries.keys().map(|k| (k.get_ref().as_ref(), k.span()))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Span of `key` (the key itself), if present.
    pub fn key_span(&self, key: &str) -> Option<Range<usize>> {
        self.keys().find(|(k, _)| *k == key).map(|(_, s)| s)
    }

    /// Split off the keys named in `names` into a table of their own.
    pub fn split_off(&mut self, names: &[&str]) -> Table<'a> {
        let mut out = Table::empty(self.span.clone());
        for name in names {
            if let Some((key, value)) = self.entries.remove_entry(*name) {
                out.entries.insert(key, value);
            }
        }
        out
    }

    /// Keys of `defaults` this table does not set, copied in (a variant
    /// inherits every key it does not set from `[defaults]`).
    pub fn inherit(&mut self, defaults: &Table<'a>) {
        for (key, value) in &defaults.entries {
            if !self.entries.contains_key(key.get_ref().as_ref()) {
                self.entries.insert(key.clone(), value.clone());
            }
        }
    }

    /// Deserialize the remaining keys into `T` (a `deny_unknown_fields`
    /// struct, so a key nobody took is an error naming it).
    pub fn parse<T: DeserializeOwned>(self, src: &Source) -> anyhow::Result<T> {
        let value = Spanned::new(self.span, DeValue::Table(self.entries));
        T::deserialize(ValueDeserializer::from(value)).map_err(|e| src.toml_err(&e))
    }
}

/// The field names of a keys struct, as serde sees them: the one list of a
/// kind's keys, for splitting tables and for documentation.
pub fn names<T: DeserializeOwned>() -> &'static [&'static str] {
    serde_aux::serde_introspection::serde_introspect::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_values_are_found_on_their_line() {
        let text = "a = 1\nsize = \"1 parsec\"\nthrottle = { write_bps = \"x\" }\n";
        assert_eq!(key_at(text, text.find("\"1 parsec").unwrap()).as_deref(), Some("size"));
        assert_eq!(key_at(text, text.find("\"x\"").unwrap()).as_deref(), Some("write_bps"));
        assert_eq!(location(text, text.find("size").unwrap()), ":2:1");
    }
}
