//! A `[[source]]` table (or a `recon parse --mapping` file): the keys every source takes, and
//! the dispatch by `format` to the keys of that format, which its own module defines.
//!
//! | keys | where |
//! |---|---|
//! | `name`, `role`, `format`, `path`, `timezone`, `complete_from`, `complete_to`, `completeness`, `empty_file`, `remote`, `partition` | [`RawCommon`] here; `remote` in [`super::remote`] |
//! | csv: `encoding`, `delimiter`, `quote` + the tabular keys | [`super::csv::RawCsv`] |
//! | xlsx: `sheet` + the tabular keys | [`super::xlsx::RawXlsx`] |
//! | the tabular keys of csv and xlsx (`timestamp_format`, `columns`, `kinds`, …) | [`super::tabular::RawTabular`] |
//! | camt053, camt054, camt052: none | [`super::camt::RawCamt`] |
//! | mt940: `encoding` | [`super::mt940::RawMt940`] |
//! | bai2: `encoding` | [`super::bai2::RawBai2`] |
//! | ofx: none | [`super::ofx::RawOfx`] |
//! | jsonl: the tabular keys but `has_header`, `skip_lines`, `skip_footer`; columns are JSON pointers | [`super::jsonl`] |
//! | parquet: the tabular keys but `has_header`, `skip_lines`, `skip_footer`; columns by name or `#N` | [`super::parquet`] |
//!
//! Every raw struct has `#[serde(deny_unknown_fields)]`. serde cannot combine that with
//! `flatten`, nor default the tag of an internally tagged enum (`format` defaults to `csv`), so
//! the dispatch is written by hand: the table is read with its spans ([`toml::de::DeTable`]),
//! the common keys are split off, `format` is read, and the rest goes to the format's module
//! (`FormatSettings::read`). A key no format takes is an unknown key (the TOML error, with
//! the file's line, listing the keys this format takes); a key of another format is an error
//! saying so. An error about a value, raised once the keys are read, quotes its line too
//! ([`KeyAt::on`]: the spans are recorded at the dispatch). Adding a format = its module (raw
//! struct, settings, `settings` function), one variant of [`FormatSettings`] and its arms in
//! this file, and a fixture folder.

use super::keys::{KeyAt, config_error, join_clean, keys_of, split_off, toml_error, unknown_tz};
use super::remote;
use super::text::TextEncoding;
use super::{bai2, camt, csv, jsonl, mt940, ofx, parquet, tabular, xlsx};
use crate::model::{Format, Role};
use anyhow::Result;
use chrono::NaiveDate;
use chrono_tz::Tz;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The keys every source takes, whatever its format, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCommon {
    /// Unique name, used in results and ticket keys.
    name: Option<String>,
    /// `provider` (default): lines are what the provider paid out for us; `bank`: our own
    /// bank account, where payments appear as debits and provider payouts as credits.
    role: Option<String>,
    /// File format: `csv` (default), `xlsx`, `camt053`, `camt054`, `camt052`, `mt940`,
    /// `bai2`, `ofx`, `jsonl` or `parquet`.
    format: Option<String>,
    /// File path (relative to the config). `{date}` is replaced by each day (YYYY-MM-DD):
    /// one file per day, each complete for its day when present.
    path: Option<String>,
    /// Time zone of timestamps without an offset; defaults to the job's.
    timezone: Option<String>,
    /// First day (in the source time zone) the file covers completely (fixed paths only).
    complete_from: Option<NaiveDate>,
    /// Last day (inclusive) the file covers completely (fixed paths only).
    complete_to: Option<NaiveDate>,
    /// How a file proves it is complete for its period: `control_file`, `last_line`,
    /// `statement` (bank formats' own balances and control totals) or `none`.
    completeness: Option<String>,
    /// `no_activity`: a file without lines is complete for its period (the source says so);
    /// `incomplete` (default): an empty file proves nothing.
    empty_file: Option<String>,
    /// Settings of a remote `path` (`sftp://`, `s3://`, `https://`): see the `pull` module.
    remote: Option<remote::RawRemote>,
    /// In a partitioned job (`[partition]`): the partition every line of this source belongs
    /// to (a value of the partition column, e.g. a merchant id).
    partition: Option<String>,
}

/// A validated statement source: the settings every source has, and its format's own.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Unique name.
    pub name: String,
    /// Provider (default) or bank.
    pub role: Role,
    /// File location.
    pub path: SourcePath,
    /// Zone for timestamps (and dates) without an offset.
    pub timezone: Tz,
    /// How a file proves it is complete.
    pub completeness: Completeness,
    /// Whether an empty file is complete for its period (`empty_file = "no_activity"`).
    pub empty_means_no_activity: bool,
    /// Where the files are published when `path` is remote; `path` is then the local copy in
    /// the inbox, which runs read (see the `pull` module).
    pub remote: Option<remote::Remote>,
    /// The format, with its own settings.
    pub settings: FormatSettings,
    /// The bounds on one of its files (the job's `max_file_mb`, `max_line_bytes`,
    /// `max_rejected_lines`).
    pub limits: super::InputLimits,
    /// `partition`: the partition of a partitioned job that every line of this source belongs
    /// to (`None`: the source is not bound to one; see the partition module).
    pub partition: Option<String>,
    /// A replayed night (`recon backtest`): the only files of this source it may read, the
    /// ones its run read (by path). `None`: every file there is.
    pub replay: Option<std::sync::Arc<std::collections::BTreeSet<String>>>,
}

impl SourceConfig {
    /// Whether the night may read the file at `path` (see [`SourceConfig::replay`]).
    /// The run and the replay may name a file differently (`--config recon.toml` by hand,
    /// an absolute path in the scheduler): the paths are compared as written and as resolved.
    pub fn may_read(&self, path: &std::path::Path) -> bool {
        let Some(read) = &self.replay else {
            return true;
        };
        read.contains(path.display().to_string().as_str())
            || std::fs::canonicalize(path)
                .is_ok_and(|c| read.contains(c.display().to_string().as_str()))
    }
}

/// A source's format and the settings of that format (each defined in the format's module).
#[derive(Debug, Clone)]
pub enum FormatSettings {
    /// CSV: delimiter, quote, encoding and the tabular mapping.
    Csv(csv::CsvSettings),
    /// XLSX / XLS: the sheet and the tabular mapping.
    Xlsx(xlsx::XlsxSettings),
    /// camt.053 (account statements).
    Camt053(camt::CamtSettings),
    /// camt.054 (debit/credit notifications).
    Camt054(camt::CamtSettings),
    /// camt.052 (intraday account reports).
    Camt052(camt::CamtSettings),
    /// MT940 / MT942.
    Mt940(mt940::Mt940Settings),
    /// BAI2.
    Bai2(bai2::Bai2Settings),
    /// OFX / QFX.
    Ofx(ofx::OfxSettings),
    /// JSON lines with a mapping of JSON pointers.
    Jsonl(jsonl::JsonlSettings),
    /// Parquet with the tabular mapping.
    Parquet(parquet::ParquetSettings),
}

impl FormatSettings {
    /// The format.
    pub fn format(&self) -> Format {
        match self {
            FormatSettings::Csv(_) => Format::Csv,
            FormatSettings::Xlsx(_) => Format::Xlsx,
            FormatSettings::Camt053(_) => Format::Camt053,
            FormatSettings::Camt054(_) => Format::Camt054,
            FormatSettings::Camt052(_) => Format::Camt052,
            FormatSettings::Mt940(_) => Format::Mt940,
            FormatSettings::Bai2(_) => Format::Bai2,
            FormatSettings::Ofx(_) => Format::Ofx,
            FormatSettings::Jsonl(_) => Format::Jsonl,
            FormatSettings::Parquet(_) => Format::Parquet,
        }
    }

    /// The keys `format` takes besides the common ones.
    fn keys(format: Format) -> Vec<&'static str> {
        match format {
            Format::Csv => csv::keys(),
            Format::Xlsx => xlsx::keys(),
            Format::Camt053 | Format::Camt054 | Format::Camt052 => camt::keys(),
            Format::Mt940 => mt940::keys(),
            Format::Bai2 => bai2::keys(),
            Format::Ofx => ofx::keys(),
            Format::Jsonl => jsonl::keys(),
            Format::Parquet => parquet::keys(),
        }
    }

    /// Reads and validates the format's keys (`table`: the source's table without the common
    /// keys, every key checked to be one of `format`'s).
    fn read(format: Format, table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<Self> {
        Ok(match format {
            Format::Csv => FormatSettings::Csv(csv::settings(table, at)?),
            Format::Xlsx => FormatSettings::Xlsx(xlsx::settings(table, at)?),
            Format::Camt053 => FormatSettings::Camt053(camt::settings(table, at)?),
            Format::Camt054 => FormatSettings::Camt054(camt::settings(table, at)?),
            Format::Camt052 => FormatSettings::Camt052(camt::settings(table, at)?),
            Format::Mt940 => FormatSettings::Mt940(mt940::settings(table, at)?),
            Format::Bai2 => FormatSettings::Bai2(bai2::settings(table, at)?),
            Format::Ofx => FormatSettings::Ofx(ofx::settings(table, at)?),
            Format::Jsonl => FormatSettings::Jsonl(jsonl::settings(table, at)?),
            Format::Parquet => FormatSettings::Parquet(parquet::settings(table, at)?),
        })
    }

    /// The defaults of `format` (a bank format read without a mapping file; a tabular one gets
    /// an empty mapping).
    fn defaults(format: Format) -> Self {
        match format {
            Format::Csv => FormatSettings::Csv(csv::CsvSettings::default()),
            Format::Xlsx => FormatSettings::Xlsx(xlsx::XlsxSettings::default()),
            Format::Camt053 => FormatSettings::Camt053(camt::CamtSettings::default()),
            Format::Camt054 => FormatSettings::Camt054(camt::CamtSettings::default()),
            Format::Camt052 => FormatSettings::Camt052(camt::CamtSettings::default()),
            Format::Mt940 => FormatSettings::Mt940(mt940::Mt940Settings::default()),
            Format::Bai2 => FormatSettings::Bai2(bai2::Bai2Settings::default()),
            Format::Ofx => FormatSettings::Ofx(ofx::OfxSettings::default()),
            Format::Jsonl => FormatSettings::Jsonl(jsonl::JsonlSettings::default()),
            Format::Parquet => FormatSettings::Parquet(parquet::ParquetSettings::default()),
        }
    }

    /// Why `key`, a key of another format, does not apply to `format`.
    fn not_for(format: Format, key: &str) -> String {
        if key == "encoding" {
            format!("{format} files declare their own encoding; remove the key")
        } else if format.needs_mapping() {
            format!("not used by format {format}")
        } else {
            format!("not used by format {format} (bank formats need no column mapping)")
        }
    }

    /// The text encoding of a csv, mt940 or bai2 source (`None`: strict UTF-8; xlsx, camt and
    /// ofx declare their own, jsonl is UTF-8, parquet's strings are UTF-8 by the format).
    pub fn encoding(&self) -> Option<TextEncoding> {
        match self {
            FormatSettings::Csv(s) => s.encoding,
            FormatSettings::Mt940(s) => s.encoding,
            FormatSettings::Bai2(s) => s.encoding,
            FormatSettings::Xlsx(_)
            | FormatSettings::Camt053(_)
            | FormatSettings::Camt054(_)
            | FormatSettings::Camt052(_)
            | FormatSettings::Ofx(_)
            | FormatSettings::Jsonl(_)
            | FormatSettings::Parquet(_) => None,
        }
    }

    /// The column mapping of a csv or xlsx source.
    pub fn tabular(&self) -> Option<&tabular::TabularSettings> {
        match self {
            FormatSettings::Csv(s) => Some(&s.table),
            FormatSettings::Xlsx(s) => Some(&s.table),
            FormatSettings::Jsonl(s) => Some(&s.table),
            FormatSettings::Parquet(s) => Some(&s.table),
            _ => None,
        }
    }

    /// The column mapping of a csv or xlsx source, to change.
    pub fn tabular_mut(&mut self) -> Option<&mut tabular::TabularSettings> {
        match self {
            FormatSettings::Csv(s) => Some(&mut s.table),
            FormatSettings::Xlsx(s) => Some(&mut s.table),
            FormatSettings::Jsonl(s) => Some(&mut s.table),
            FormatSettings::Parquet(s) => Some(&mut s.table),
            _ => None,
        }
    }
}

/// Where a source's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourcePath {
    /// One file; complete for `complete` (inclusive days) if declared.
    Fixed {
        /// The file.
        path: PathBuf,
        /// Inclusive days covered completely.
        complete: Option<(NaiveDate, NaiveDate)>,
    },
    /// One file per day: the template with `{date}`.
    Daily(String),
}

/// How a source's files prove that they hold every line of their period (DESIGN.md rule 2:
/// coverage rests on something the file proves, never on its mere presence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    /// A control file `<file>.ctl` delivered beside each file gives its line count
    /// (`lines=N`) and/or its sha256 (`sha256=HEX`); the file is complete only when they agree.
    ControlFile,
    /// The file is written in booking order, so it covers its period up to its last line's
    /// booking (a file cut at a line boundary covers less; an empty one nothing).
    LastLine,
    /// The statement's own balances and control totals (camt, MT940, BAI2): a statement that
    /// declares neither proves nothing.
    Statement,
    /// Never complete: absence of a line in this source never proves anything.
    None,
}

impl Completeness {
    /// Every value, in documentation order.
    pub const ALL: [Completeness; 4] = [
        Completeness::ControlFile,
        Completeness::LastLine,
        Completeness::Statement,
        Completeness::None,
    ];

    /// Parses a config value.
    pub fn parse(value: &str) -> Option<Completeness> {
        Completeness::ALL.into_iter().find(|c| c.as_str() == value)
    }

    /// Name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Completeness::ControlFile => "control_file",
            Completeness::LastLine => "last_line",
            Completeness::Statement => "statement",
            Completeness::None => "none",
        }
    }
}

/// The error for a key no format takes, as serde words an unknown field (with the keys this
/// source takes), on the key's line.
fn unknown_key(
    at: &KeyAt<'_>,
    key: Spanned<std::borrow::Cow<'_, str>>,
    expected: &[&str],
) -> anyhow::Error {
    let list: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
    at.at(
        key.span(),
        format!(
            "unknown field `{}`, expected one of {}",
            key.get_ref(),
            list.join(", ")
        ),
    )
}

/// One source's table, read: the common keys as written, the format, and the format's keys
/// (each one of the format's; read by [`FormatSettings::read`]).
struct ReadSource<'i> {
    common: RawCommon,
    format: Format,
    rest: Spanned<DeTable<'i>>,
}

/// Reads one source table: splits off the common keys, reads `format` (`forced` by `recon
/// parse --format`, else the key, else csv), checks that every other key is one of the
/// format's.
fn read_source<'i>(
    mut table: Spanned<DeTable<'i>>,
    at: &KeyAt<'_>,
    forced: Option<Format>,
) -> Result<ReadSource<'i>> {
    let common_keys = keys_of::<RawCommon>();
    let common: RawCommon = at.read(split_off(&mut table, common_keys))?;
    let written = match &common.format {
        None => None,
        Some(f) => Some(Format::parse(f).ok_or_else(|| {
            at.bad(
                "format",
                format!("unsupported format {f:?} (hint: one of csv, xlsx, camt053, camt054, camt052, mt940, bai2, ofx, jsonl, parquet)"),
            )
        })?),
    };
    let format = match (forced, written) {
        (Some(a), Some(b)) if a != b => {
            return Err(at.bad("format", format!("the file says {b} but --format is {a}")));
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => Format::Csv,
    };
    let own = FormatSettings::keys(format);
    let keys: Vec<_> = table.get_ref().keys().cloned().collect();
    for k in keys {
        let name = k.get_ref().as_ref();
        if own.contains(&name) {
            continue;
        }
        if Format::ALL
            .iter()
            .any(|&f| FormatSettings::keys(f).contains(&name))
        {
            return Err(at.bad(name, FormatSettings::not_for(format, name)));
        }
        let expected: Vec<&str> = common_keys.iter().copied().chain(own).collect();
        return Err(unknown_key(at, k, &expected));
    }
    Ok(ReadSource {
        common,
        format,
        rest: table,
    })
}

/// Validates the common keys that a mapping file has too: role, time zone, completeness and
/// empty files.
fn common_settings(
    at: &KeyAt<'_>,
    s: &RawCommon,
    format: Format,
    job_tz: Tz,
) -> Result<(Role, Tz, Completeness, bool)> {
    let role = match s.role.as_deref() {
        None | Some("provider") => Role::Provider,
        Some("bank") => Role::Bank,
        Some(other) => {
            return Err(at.bad(
                "role",
                format!("unknown role {other:?} (hint: `provider` or `bank`)"),
            ));
        }
    };
    let timezone = match &s.timezone {
        Some(t) => t
            .parse::<Tz>()
            .map_err(|_| at.bad("timezone", unknown_tz(t)))?,
        None => job_tz,
    };
    let completeness = match s
        .completeness
        .as_deref()
        .map(|v| (v, Completeness::parse(v)))
    {
        None if format.needs_mapping() || format.intraday() => Completeness::None,
        None => Completeness::Statement,
        Some((_, Some(c))) if format.intraday() && c != Completeness::None => {
            return Err(at.bad(
                "completeness",
                format!(
                    "a {format} file is an intraday report: it never proves a day complete, \
                     so `completeness` can only be `none`"
                ),
            ));
        }
        Some((_, Some(Completeness::Statement))) if format.needs_mapping() => {
            return Err(at.bad(
                "completeness",
                format!(
                    "`statement` is for bank formats, whose files declare balances and \
                     control totals; a {format} file proves its completeness with `control_file` \
                     or `last_line`"
                ),
            ));
        }
        Some((_, Some(c))) => c,
        Some((other, None)) => {
            return Err(at.bad(
                "completeness",
                format!(
                    "unknown value {other:?} (hint: control_file, last_line, statement or none)"
                ),
            ));
        }
    };
    let empty_means_no_activity = match s.empty_file.as_deref() {
        None | Some("incomplete") => false,
        Some("no_activity") => true,
        Some(other) => {
            return Err(at.bad(
                "empty_file",
                format!("unknown value {other:?} (hint: `incomplete` or `no_activity`)"),
            ));
        }
    };
    Ok((role, timezone, completeness, empty_means_no_activity))
}

/// Where the sources of a job file are: the file, its folder, its inbox and its time zone.
pub(crate) struct Job<'a> {
    /// The job file.
    pub file: &'a Path,
    /// Its text.
    pub text: &'a str,
    /// Its folder (relative paths are resolved against it).
    pub base: &'a Path,
    /// The job's `inbox`.
    pub inbox: &'a Path,
    /// The job's time zone.
    pub timezone: Tz,
}

/// Reads and validates `[[source]]` number `i` of a job file; its name must be none of
/// `taken`'s (the sources before it).
pub(crate) fn job_source(
    job: &Job<'_>,
    i: usize,
    value: Spanned<DeValue<'_>>,
    taken: &[SourceConfig],
) -> Result<SourceConfig> {
    let (at, table) = super::keys::array_table((job.file, job.text), "source", i, value)?;
    let key = |k: &str| at.key(k);
    let ReadSource {
        common: mut s,
        format,
        rest,
    } = read_source(table, &at, None)?;
    let Some(name) = s.name.clone() else {
        return Err(at.on("name", format!("key `{}` is missing", key("name"))));
    };
    let Some(file) = s.path.clone() else {
        return Err(at.on("path", format!("key `{}` is missing", key("path"))));
    };
    if name.trim().is_empty() || name.contains(['|', ';', '#']) {
        return Err(at.bad("name", "must be non-empty without | ; #"));
    }
    let complete = match (s.complete_from, s.complete_to) {
        (Some(a), Some(b)) if a <= b => Some((a, b)),
        (None, None) => None,
        (from, _) => {
            return Err(at.on(
                if from.is_some() {
                    "complete_from"
                } else {
                    "complete_to"
                },
                format!(
                    "keys `{}`/`{}`: give both, with from <= to",
                    key("complete_from"),
                    key("complete_to")
                ),
            ));
        }
    };
    // A remote source is read from its copy in the inbox (`recon pull` fetches it).
    let mut remote = if remote::is_remote(&file) {
        Some(remote::Remote::parse(
            &at,
            &file,
            s.remote.take(),
            job.base,
        )?)
    } else if s.remote.is_some() {
        return Err(at.bad(
            "remote",
            "[source.remote] needs a remote path (sftp://, s3:// or https://)",
        ));
    } else {
        None
    };
    // Its `path` is then the local copy under `<inbox>/<source>/`.
    let (base, file) = match &mut remote {
        Some(r) => {
            r.inbox_dir = job.inbox.join(&name);
            (r.inbox_dir.clone(), r.local.clone())
        }
        None => (job.base.to_path_buf(), file),
    };
    let base = base.as_path();
    let source_path = if file.contains("{date}") {
        if complete.is_some() {
            return Err(at.bad(
                "path",
                "a daily `{date}` path is complete per file; remove complete_from/complete_to",
            ));
        }
        SourcePath::Daily(join_clean(base, &file).to_string_lossy().into_owned())
    } else {
        SourcePath::Fixed {
            path: join_clean(base, &file),
            complete,
        }
    };
    let (role, timezone, completeness, empty_means_no_activity) =
        common_settings(&at, &s, format, job.timezone)?;
    let settings = FormatSettings::read(format, rest, &at)?;
    let claims = match &source_path {
        SourcePath::Daily(_) => Some("a daily `{date}` source"),
        SourcePath::Fixed {
            complete: Some(_), ..
        } => Some("a source with complete_from/complete_to"),
        SourcePath::Fixed { complete: None, .. } => None,
    };
    if let Some(what) = claims
        && s.completeness.is_none()
        && format.needs_mapping()
    {
        return Err(at.on(
            "completeness",
            format!(
                "key `{}` is missing: {what} claims completeness, so say how its files prove \
                 it (DESIGN.md rule 2): `control_file` (a `<file>.ctl` with lines=N and/or \
                 sha256=HEX beside each file), `last_line` (the file is in booking order and \
                 covers its period up to its last line) or `none`",
                key("completeness")
            ),
        ));
    }
    if taken.iter().any(|o| o.name == name) {
        return Err(at.on(
            "name",
            format!("source[{i}]: duplicate source name {name:?}"),
        ));
    }
    Ok(SourceConfig {
        name,
        role,
        path: source_path,
        timezone,
        completeness,
        empty_means_no_activity,
        remote,
        settings,
        limits: super::InputLimits::default(),
        partition: s.partition.clone(),
        replay: None,
    })
}

impl SourceConfig {
    /// The file format.
    pub fn format(&self) -> Format {
        self.settings.format()
    }

    /// The column mapping of a csv or xlsx source (`None` for the bank formats).
    pub fn tabular(&self) -> Option<&tabular::TabularSettings> {
        self.settings.tabular()
    }

    /// The column mapping of a csv or xlsx source, to change.
    pub fn tabular_mut(&mut self) -> Option<&mut tabular::TabularSettings> {
        self.settings.tabular_mut()
    }

    /// What the csv and xlsx parsers need of the source besides their format's settings.
    pub fn table_source(&self) -> csv::TableSource<'_> {
        csv::TableSource {
            name: &self.name,
            timezone: self.timezone,
            limits: &self.limits,
        }
    }

    /// Reads a `--mapping` file of `recon parse`: the keys of one `[[source]]` table, where
    /// `name` and `path` may be left out. `format` (from the command line) must agree with a
    /// `format` key in the file, if there is one.
    pub fn load_mapping(path: &Path, format: Format) -> Result<SourceConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| config_error(path, format!("cannot read: {e}")))?;
        let table = DeTable::parse(&text).map_err(|e| toml_error(path, &text, e))?;
        let at = KeyAt::new(path, String::new(), &text).with_values(&table, false);
        let ReadSource {
            common: s,
            format,
            rest,
        } = read_source(table, &at, Some(format))?;
        if s.remote.is_some() {
            return Err(at.bad("remote", "only a job's [[source]] can be remote"));
        }
        let (role, timezone, completeness, empty_means_no_activity) =
            common_settings(&at, &s, format, Tz::UTC)?;
        let settings = FormatSettings::read(format, rest, &at)?;
        Ok(SourceConfig {
            name: s.name.unwrap_or_else(|| format.as_str().to_string()),
            role,
            path: SourcePath::Fixed {
                path: PathBuf::new(),
                complete: None,
            },
            timezone,
            completeness,
            empty_means_no_activity,
            remote: None,
            settings,
            limits: super::InputLimits::default(),
            partition: None,
            replay: None,
        })
    }

    /// The settings of a bank format read without a mapping file (`recon parse --format
    /// camt053 FILE`): dates without an offset are UTC, text is UTF-8.
    pub fn bank_default(format: Format) -> SourceConfig {
        SourceConfig {
            name: format.as_str().to_string(),
            role: Role::Provider,
            path: SourcePath::Fixed {
                path: PathBuf::new(),
                complete: None,
            },
            timezone: Tz::UTC,
            completeness: if format.needs_mapping() || format.intraday() {
                Completeness::None
            } else {
                Completeness::Statement
            },
            empty_means_no_activity: false,
            remote: None,
            settings: FormatSettings::defaults(format),
            limits: super::InputLimits::default(),
            partition: None,
            replay: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str =
        "timezone = \"UTC\"\ndatabase_url = \"sqlite://x.db\"\noutput_dir = \"out\"\n";

    fn parse(source: &str) -> Result<crate::config::Config> {
        crate::config::Config::parse(
            &format!("{JOB}[[source]]\nname = \"s\"\npath = \"f\"\n{source}"),
            Path::new("job.toml"),
        )
    }

    #[test]
    fn the_keys_of_a_struct_are_read_from_its_derive() {
        assert_eq!(
            keys_of::<RawCommon>(),
            [
                "name",
                "role",
                "format",
                "path",
                "timezone",
                "complete_from",
                "complete_to",
                "completeness",
                "empty_file",
                "remote",
                "partition"
            ]
        );
        assert_eq!(camt::keys(), Vec::<&str>::new());
        assert_eq!(mt940::keys(), ["encoding"]);
    }

    #[test]
    fn no_format_key_is_a_common_key_or_taken_twice() {
        // A key in both would be split off as a common key and never reach the format.
        for f in Format::ALL {
            let keys = FormatSettings::keys(f);
            for k in &keys {
                assert!(!keys_of::<RawCommon>().contains(k), "{f}: {k}");
                assert_eq!(keys.iter().filter(|o| *o == k).count(), 1, "{f}: {k}");
            }
        }
    }

    #[test]
    fn every_format_reads_its_own_keys_and_names_a_key_of_another() {
        let tabular = "timestamp_format = \"rfc3339\"\ncurrency = \"EUR\"\n\
                       [source.columns]\nbooked_at = \"d\"\namount = \"a\"\n";
        for (format, own, foreign, says) in [
            (
                "csv",
                "delimiter = \";\"\n",
                "sheet = \"x\"\n",
                "not used by format csv",
            ),
            (
                "xlsx",
                "sheet = \"x\"\n",
                "quote = \"'\"\n",
                "not used by format xlsx",
            ),
            (
                "xlsx",
                "sheet = \"x\"\n",
                "encoding = \"latin1\"\n",
                "xlsx files declare their own encoding",
            ),
            (
                "camt053",
                "",
                "encoding = \"latin1\"\n",
                "camt053 files declare their own encoding",
            ),
            (
                "camt054",
                "",
                "skip_lines = 1\n",
                "not used by format camt054 (bank formats need no column mapping)",
            ),
            (
                "mt940",
                "encoding = \"latin1\"\n",
                "decimal_separator = \",\"\n",
                "not used by format mt940 (bank formats need no column mapping)",
            ),
            (
                "bai2",
                "encoding = \"latin1\"\n",
                "has_header = false\n",
                "not used by format bai2 (bank formats need no column mapping)",
            ),
        ] {
            let mapping = if format == "csv" || format == "xlsx" {
                tabular
            } else {
                ""
            };
            let cfg = parse(&format!("format = \"{format}\"\n{own}{mapping}"))
                .unwrap_or_else(|e| panic!("{format}: {e:#}"));
            assert_eq!(cfg.sources[0].format().as_str(), format);
            let key = foreign.split(' ').next().unwrap();
            let err = parse(&format!("format = \"{format}\"\n{own}{foreign}{mapping}"))
                .expect_err(format);
            let msg = format!("{err:#}");
            assert!(msg.contains(says), "{format}: {msg}");
            assert!(msg.contains("job.toml"), "{msg}");
            assert!(msg.contains(&format!("key `source[0].{key}`")), "{msg}");
            assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
        }
    }

    #[test]
    fn a_key_no_format_takes_is_an_unknown_field_on_its_line() {
        let err = parse("format = \"camt053\"\ncolour = 1\n").unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("job.toml: TOML parse error at line 8"),
            "{msg}"
        );
        assert!(
            msg.contains("unknown field `colour`, expected one of `name`"),
            "{msg}"
        );
        // The list names what this format takes, not every format's keys.
        assert!(!msg.contains("sheet"), "{msg}");
        assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
    }

    #[test]
    fn an_intraday_report_never_proves_a_day_complete() {
        let cfg = parse("format = \"camt052\"\n").unwrap();
        assert_eq!(cfg.sources[0].format(), Format::Camt052);
        assert_eq!(cfg.sources[0].completeness, Completeness::None);
        assert_eq!(
            SourceConfig::bank_default(Format::Camt052).completeness,
            Completeness::None
        );
        for c in ["statement", "control_file", "last_line"] {
            let err =
                parse(&format!("format = \"camt052\"\ncompleteness = \"{c}\"\n")).unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains("key `source[0].completeness`"), "{msg}");
            assert!(msg.contains("never proves a day complete"), "{msg}");
        }
        assert!(parse("format = \"camt052\"\ncompleteness = \"none\"\n").is_ok());
        // A statement still proves its days.
        assert_eq!(
            parse("format = \"camt053\"\n").unwrap().sources[0].completeness,
            Completeness::Statement
        );
    }

    #[test]
    fn a_jsonl_mapping_takes_json_pointers_and_no_header_keys() {
        let mapping =
            "format = \"jsonl\"\ntimestamp_format = \"rfc3339\"\ncompleteness = \"none\"\n";
        let ok = parse(&format!(
            "{mapping}[source.columns]\nbooked_at = \"/t\"\namount = \"/a/v\"\ncurrency = \"/a/c\"\nreference = [\"/r\", \"/m/x\"]\n"
        ))
        .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(ok.sources[0].format(), Format::Jsonl);
        assert_eq!(
            ok.sources[0]
                .tabular()
                .and_then(|t| t.columns.amount.as_deref()),
            Some("/a/v")
        );
        let err = parse(&format!(
            "{mapping}[source.columns]\nbooked_at = \"/t\"\namount = \"#2\"\ncurrency = \"/c\"\n"
        ))
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("key `source[0].columns.amount`"), "{msg}");
        assert!(msg.contains("\"#2\" is not a JSON pointer"), "{msg}");
        let err = parse(&format!(
            "{mapping}has_header = false\n[source.columns]\nbooked_at = \"/t\"\namount = \"/a\"\ncurrency = \"/c\"\n"
        ))
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("key `source[0].has_header`: not used by format jsonl"),
            "{msg}"
        );
    }

    #[test]
    fn the_format_defaults_to_csv() {
        let err = parse("timestamp_format = \"rfc3339\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("key `source[0].columns` is missing (format csv needs"),
            "{err:#}"
        );
    }
}
