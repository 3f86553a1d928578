//! Reading the keys of a `[[source]]` table (or a mapping file), for the dispatch in
//! `config.rs` and for each format's own keys: where a key is written ([`KeyAt`], so an error
//! quotes its line), splitting a table by keys ([`split_off`]), a struct's keys read from its
//! `Deserialize` derive ([`keys_of`]), and the configuration errors naming the file. The job
//! file and the rule files read their keys with them too.

use crate::exit::{Failure, fail};
use anyhow::Result;
use chrono_tz::Tz;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A configuration error naming the file.
pub(crate) fn config_error(path: &Path, msg: impl std::fmt::Display) -> anyhow::Error {
    fail(Failure::Config, format!("{}: {msg}", path.display()))
}

/// A TOML error (with the line it quotes) as a configuration error naming the file. The line
/// may hold a database password, so it is masked.
pub(crate) fn toml_error(path: &Path, text: &str, mut e: toml::de::Error) -> anyhow::Error {
    e.set_input(Some(text));
    config_error(path, crate::mask::secrets(&e.to_string()))
}

/// Parses the IANA time zone of key `key`.
pub(crate) fn parse_tz(path: &Path, key: &str, value: &str) -> Result<Tz> {
    value
        .parse::<Tz>()
        .map_err(|_| config_error(path, format!("key `{key}`: {}", unknown_tz(value))))
}

/// Why `value` is no time zone.
pub(crate) fn unknown_tz(value: &str) -> String {
    format!("unknown time zone {value:?} (hint: an IANA name such as Europe/Berlin or UTC)")
}

/// Joins `rel` to `base` and removes `.` and `name/..` pairs lexically, so messages show
/// `var/demo/out` rather than `sample-data/../var/demo/out`.
pub fn join_clean(base: &Path, rel: impl AsRef<Path>) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Names the keys of one source in errors: the config file, the prefix of the source's keys
/// (`source[0].`; empty in a mapping file), the file's text (for the line a TOML error
/// quotes) and where each of the source's keys is written.
pub struct KeyAt<'a> {
    /// The config (or mapping) file.
    pub file: &'a Path,
    /// Put before every key: `source[0].`, or empty.
    pub prefix: String,
    /// The file's text.
    text: &'a str,
    /// Where the value of each key is written, by its name as errors give it after the prefix
    /// (`currency`, `columns.amount`, `kinds.SALE`, `skip_rows[0].column`).
    values: Vec<(String, std::ops::Range<usize>)>,
    /// The table's header (`[[source]]`), where a key that is missing belongs; `None` in a
    /// mapping file, whose keys are at the top and have no header.
    header: Option<std::ops::Range<usize>>,
}

impl<'a> KeyAt<'a> {
    /// Names keys of `file` (whose text is `text`) with `prefix` before each key.
    pub fn new(file: &'a Path, prefix: String, text: &'a str) -> KeyAt<'a> {
        KeyAt {
            file,
            prefix,
            text,
            values: Vec::new(),
            header: None,
        }
    }

    /// Names the keys of `table` too, so that an error about one of them is on its value's
    /// line ([`KeyAt::on`]); `header`: the table has a header line of its own (a job's
    /// `[[source]]`, not a mapping file).
    pub(crate) fn with_values(mut self, table: &Spanned<DeTable<'_>>, header: bool) -> KeyAt<'a> {
        fn walk(
            name: String,
            value: &Spanned<DeValue<'_>>,
            out: &mut Vec<(String, std::ops::Range<usize>)>,
        ) {
            match value.get_ref() {
                DeValue::Table(t) => {
                    for (k, v) in t {
                        walk(format!("{name}.{}", k.get_ref()), v, out);
                    }
                }
                DeValue::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        walk(format!("{name}[{i}]"), v, out);
                    }
                }
                _ => {}
            }
            out.push((name, value.span()));
        }
        for (k, v) in table.get_ref() {
            walk(k.get_ref().to_string(), v, &mut self.values);
        }
        self.header = header.then(|| table.span());
        self
    }

    /// A configuration error about key `k` (as [`KeyAt::bad`] names it; `msg` is the whole
    /// message): on the line of its value when the file has one, else on the header of the
    /// nearest table that holds it (`[source.columns]` for `columns.amount`, else
    /// `[[source]]`). A missing key of a mapping file, which has no header, names no line.
    pub fn on(&self, k: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        let mut name = k;
        loop {
            if let Some((_, span)) = self.values.iter().find(|(n, _)| n == name) {
                return self.at(span.clone(), msg);
            }
            match name.rfind(['.', '[']) {
                Some(i) => name = &name[..i],
                None => break,
            }
        }
        match &self.header {
            Some(span) => self.at(span.clone(), msg),
            None => self.error(msg),
        }
    }

    /// A configuration error about the text at `span` of the file, in the form of a TOML
    /// error: the file, "TOML parse error at line L, column C", the line with the span marked,
    /// then `msg`. (Raised through the TOML deserializer, which is what gives an error a span.)
    pub fn at(&self, span: std::ops::Range<usize>, msg: impl std::fmt::Display) -> anyhow::Error {
        struct Refuse(String);
        impl<'de> serde::de::Visitor<'de> for Refuse {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("nothing")
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
                Err(E::custom(self.0))
            }
        }
        let de = toml::de::ValueDeserializer::from(Spanned::new(span, DeValue::Boolean(true)));
        match serde::Deserializer::deserialize_any(de, Refuse(msg.to_string())) {
            Err(e) => toml_error(self.file, self.text, e),
            Ok(()) => self.error("unreachable: a refusal accepted"),
        }
    }

    /// The key as the message names it (`source[0].columns`).
    pub fn key(&self, k: &str) -> String {
        format!("{}{k}", self.prefix)
    }

    /// A configuration error naming the file.
    pub fn error(&self, msg: impl std::fmt::Display) -> anyhow::Error {
        config_error(self.file, msg)
    }

    /// "key `source[0].k`: msg", on the line of `k` ([`KeyAt::on`]).
    pub fn bad(&self, k: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        self.on(k, format!("key `{}`: {msg}", self.key(k)))
    }

    /// Deserializes `T` (a raw struct of a format's keys) from `table`; a TOML error quotes
    /// the file's line.
    pub fn read<T: DeserializeOwned>(&self, table: Spanned<DeTable<'_>>) -> Result<T> {
        let span = table.span();
        T::deserialize(toml::de::ValueDeserializer::from(Spanned::new(
            span,
            DeValue::Table(table.into_inner()),
        )))
        .map_err(|e| toml_error(self.file, self.text, e))
    }
}

/// The tables of `[[name]]` in job file `file` (text `text`), each with its span.
pub(crate) fn array_tables<'i>(
    file: &Path,
    text: &'i str,
    name: &str,
) -> Result<Vec<Spanned<DeValue<'i>>>> {
    Ok(
        match DeTable::parse(text)
            .map_err(|e| toml_error(file, text, e))?
            .into_inner()
            .remove(name)
            .map(Spanned::into_inner)
        {
            Some(DeValue::Array(a)) => a.into_iter().collect(),
            _ => Vec::new(),
        },
    )
}

/// Table number `i` of `[[name]]` (`value`, from [`array_tables`]) with where its keys are
/// written (named `name[i].key`), or the error that it is no table.
pub(crate) fn array_table<'a, 'i>(
    (file, text): (&'a Path, &'a str),
    name: &str,
    i: usize,
    value: Spanned<DeValue<'i>>,
) -> Result<(KeyAt<'a>, Spanned<DeTable<'i>>)> {
    let at = KeyAt::new(file, format!("{name}[{i}]."), text);
    let span = value.span();
    let DeValue::Table(table) = value.into_inner() else {
        return Err(at.at(
            span,
            format!("key `{name}[{i}]`: not a table (each [[{name}]] is one)"),
        ));
    };
    let table = Spanned::new(span, table);
    Ok((at.with_values(&table, true), table))
}

/// Splits off the entries of `table` whose key is in `keys`, as a table of their own (with
/// the same span).
pub fn split_off<'i>(table: &mut Spanned<DeTable<'i>>, keys: &[&str]) -> Spanned<DeTable<'i>> {
    let span = table.span();
    let mut taken = DeTable::new();
    let all = std::mem::take(table.get_mut());
    for (k, v) in all {
        if keys.contains(&k.get_ref().as_ref()) {
            taken.insert(k, v);
        } else {
            table.get_mut().insert(k, v);
        }
    }
    Spanned::new(span, taken)
}

/// The field names of a struct that derives `Deserialize`, read from the derive itself (the
/// list it hands `deserialize_struct`), so a format's keys are written once: in its struct.
pub fn keys_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'f>(&'f mut &'static [&'static str]);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fields read")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}
