//! The kernel's `format` files: where each field of an event record is.

use anyhow::{anyhow, bail, Context, Result};

/// One field of an event record, as the `format` file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFormat {
    pub name: String,
    /// The C declaration without the name (e.g. `unsigned int`, `char[10]`).
    pub decl: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// A parsed `events/<system>/<event>/format` (or `header_page`) file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    /// Event id, matched against each record's `common_type`.
    pub id: Option<u16>,
    pub fields: Vec<FieldFormat>,
}

impl EventFormat {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldFormat> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub(super) fn need(&self, name: &str) -> Result<&FieldFormat> {
        self.field(name).ok_or_else(|| anyhow!("event {} has no field `{name}` in its format", self.name))
    }
}

/// Parses a tracefs `format` file; `label` names it in errors.
///
/// Field lines look like
/// `field:unsigned int nr_sector; offset:24; size:4; signed:0;`; the
/// `print fmt:` line and anything unknown are ignored.
pub fn parse_format(text: &str, label: &str) -> Result<EventFormat> {
    let mut fmt = EventFormat::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let lineno = i + 1;
        if let Some(name) = line.strip_prefix("name:") {
            fmt.name = name.trim().to_string();
        } else if let Some(id) = line.strip_prefix("ID:") {
            let id = id.trim();
            fmt.id = Some(id.parse().with_context(|| format!("{label}:{lineno}: bad event ID {id:?}"))?);
        } else if line.starts_with("field:") {
            fmt.fields.push(parse_field(line).with_context(|| format!("{label}:{lineno}: bad field line {line:?}"))?);
        }
    }
    if fmt.fields.is_empty() {
        bail!("{label}: no fields found; not a tracefs format file");
    }
    Ok(fmt)
}

pub(super) fn parse_field(line: &str) -> Result<FieldFormat> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').ok_or_else(|| anyhow!("`{part}` is not key:value"))?;
        let value = value.trim();
        match key.trim() {
            "field" => decl = Some(value.to_string()),
            "offset" => offset = Some(value.parse::<usize>().with_context(|| format!("offset {value:?}"))?),
            "size" => size = Some(value.parse::<usize>().with_context(|| format!("size {value:?}"))?),
            "signed" => signed = value == "1",
            _ => {}
        }
    }
    let decl = decl.ok_or_else(|| anyhow!("no field declaration"))?;
    // The name is the last word, minus any array suffix (`rwbs[10]`).
    let last = decl.split_whitespace().last().ok_or_else(|| anyhow!("empty field declaration"))?;
    let (name, array) = match last.find('[') {
        Some(i) => (&last[..i], &last[i..]),
        None => (last, ""),
    };
    if name.is_empty() {
        bail!("field declaration {decl:?} has no name");
    }
    let ty = decl[..decl.len() - last.len()].trim();
    Ok(FieldFormat {
        name: name.to_string(),
        decl: format!("{ty}{array}"),
        offset: offset.ok_or_else(|| anyhow!("no offset"))?,
        size: size.ok_or_else(|| anyhow!("no size"))?,
        signed,
    })
}

/// Reads an unsigned integer field of 1, 2, 4 or 8 bytes (host byte order).
pub(super) fn read_uint(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = data.get(offset..offset.checked_add(size)?)?;
    Some(match size {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
        4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
        8 => u64::from_ne_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

pub(super) fn read_field(data: &[u8], f: &FieldFormat) -> Option<u64> {
    read_uint(data, f.offset, f.size)
}
