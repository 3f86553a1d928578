//! The only part of the store that differs between the backends: how a statement's values are
//! bound, how it runs on the open transaction and how its rows are read.
//!
//! A statement is written once, as an [`Sql`]: its text and its values, each a [`Bind`]. The
//! text is assembled the way sqlx's `QueryBuilder` assembles it (`push`, `push_bind`,
//! `separated`, `push_values`), or written whole with numbered parameters (`$1`, `$2`, …) and
//! its values added with `bind`. The [`Tx`] it runs on decides the rest:
//!
//! - the placeholder `push_bind` writes: `?` on SQLite, `$N` on PostgreSQL (the driver's own
//!   `format_placeholder`, as `QueryBuilder` writes it);
//! - how a value is encoded: text and integers alike on both, and a timestamp (recon's UTC
//!   text, [`Bind::Ts`]) as that TEXT on SQLite and as a `timestamptz` on PostgreSQL;
//! - how a column is read back ([`Row`]): a stored timestamp comes back in the report form
//!   (`2026-11-28T10:15:00Z`) from either;
//! - how a ledger id meets its column ([`IdTypes`]): where the column is a PostgreSQL `uuid`,
//!   a bound id is written `CAST($n AS uuid)` ([`Sql::push_id`]: text is converted to uuid
//!   only explicitly, and converting the value, not the column, keeps the column's index in
//!   use) and the column is read as `col::text` ([`Sql::push_id_text`]: recon keeps ids as
//!   text, and a uuid's text is PostgreSQL's canonical one, which is also what recon loaded
//!   and binds back). Anywhere else the placeholder and the column stand bare, as they always
//!   did.
//!
//! Values are borrowed and encoded into the driver's arguments as they are bound, exactly as
//! `QueryBuilder::push_bind` and `Query::bind` encode them: nothing is copied on the way.

use super::{Conn, Tx, bounded};
use crate::db::{IdColumn, IdTypes};
use futures_util::TryStreamExt as _;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments as _, AssertSqlSafe, Postgres, Row as _, Sqlite};
use std::borrow::Cow;

/// One value of a statement. The variants are the types recon binds; each is bound as the
/// same SQL type on both backends, but for the timestamps.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bind<'a> {
    /// TEXT.
    Text(&'a str),
    /// TEXT or NULL.
    OptText(Option<&'a str>),
    /// A 64-bit integer (`INTEGER` on SQLite, `int8` on PostgreSQL).
    Int(i64),
    /// A 64-bit integer or NULL.
    OptInt(Option<i64>),
    /// A timestamp in recon's UTC text form (`YYYY-MM-DD HH:MM:SS.ffffff`): that TEXT on
    /// SQLite, a `timestamptz` on PostgreSQL (NULL if the text is not that form).
    Ts(&'a str),
    /// A timestamp or NULL.
    OptTs(Option<&'a str>),
}

impl<'a> From<&'a str> for Bind<'a> {
    fn from(v: &'a str) -> Self {
        Bind::Text(v)
    }
}

impl<'a> From<&'a String> for Bind<'a> {
    fn from(v: &'a String) -> Self {
        Bind::Text(v)
    }
}

impl<'a> From<Option<&'a str>> for Bind<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Bind::OptText(v)
    }
}

impl<'a> From<&'a Option<String>> for Bind<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Bind::OptText(v.as_deref())
    }
}

impl From<i64> for Bind<'_> {
    fn from(v: i64) -> Self {
        Bind::Int(v)
    }
}

impl From<Option<i64>> for Bind<'_> {
    fn from(v: Option<i64>) -> Self {
        Bind::OptInt(v)
    }
}

/// Timestamp bound for PostgreSQL: a `timestamptz` from recon's UTC text form.
fn pg_ts(db_text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    crate::timeparse::from_db(db_text)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
}

/// A stored SQLite timestamp in the report form (`2026-11-28T10:15:00Z`).
fn sqlite_ts_read(db_text: String) -> String {
    crate::timeparse::from_db(&db_text)
        .map(crate::timeparse::format_utc)
        .unwrap_or(db_text)
}

/// A stored PostgreSQL timestamp in the report form (`2026-11-28T10:15:00Z`).
fn pg_ts_read(t: chrono::DateTime<chrono::Utc>) -> String {
    crate::timeparse::format_utc(t.timestamp_micros())
}

/// A statement's encoded values, in the driver's own form.
enum Args {
    Sqlite(SqliteArguments),
    Postgres(PgArguments),
}

impl Args {
    fn len(&self) -> usize {
        match self {
            Args::Sqlite(a) => a.len(),
            Args::Postgres(a) => a.len(),
        }
    }

    /// Encodes `value` as the next argument.
    fn add(&mut self, value: Bind<'_>) -> Result<(), BoxDynError> {
        match self {
            Args::Sqlite(a) => match value {
                Bind::Text(v) | Bind::Ts(v) => a.add(v),
                Bind::OptText(v) | Bind::OptTs(v) => a.add(v),
                Bind::Int(v) => a.add(v),
                Bind::OptInt(v) => a.add(v),
            },
            Args::Postgres(a) => match value {
                Bind::Text(v) => a.add(v),
                Bind::OptText(v) => a.add(v),
                Bind::Int(v) => a.add(v),
                Bind::OptInt(v) => a.add(v),
                Bind::Ts(v) => a.add(pg_ts(v)),
                Bind::OptTs(v) => a.add(v.and_then(pg_ts)),
            },
        }
    }

    /// Writes the placeholder of the argument added last.
    fn placeholder(&self, text: &mut String) {
        // Writing into a String cannot fail.
        let _ = match self {
            Args::Sqlite(a) => a.format_placeholder(text),
            Args::Postgres(a) => a.format_placeholder(text),
        };
    }
}

/// One statement for the backend of the [`Tx`] that made it ([`Tx::sql`]): its text and its
/// encoded values.
pub(super) struct Sql {
    text: Cow<'static, str>,
    args: Args,
    /// The first value that could not be encoded: the statement then fails with it, unsent
    /// (as sqlx's `Query::bind` keeps it).
    error: Option<BoxDynError>,
    /// Which ledger id columns are `uuid` on the statement's database.
    ids: IdTypes,
}

impl Sql {
    /// Appends text: recon's own, never a value (a value is bound), hence `'static`.
    pub(super) fn push(&mut self, text: &'static str) -> &mut Self {
        self.text.to_mut().push_str(text);
        self
    }

    /// Adds the value of the text's next numbered parameter (`$1`, `$2`, …).
    pub(super) fn bind<'a>(&mut self, value: impl Into<Bind<'a>>) -> &mut Self {
        if self.error.is_none() {
            let number = self.args.len() + 1;
            if let Err(e) = self.args.add(value.into()) {
                self.error = Some(format!("Encoding argument ${number} failed: {e}").into());
            }
        }
        self
    }

    /// Adds a value and writes its placeholder into the text.
    pub(super) fn push_bind<'a>(&mut self, value: impl Into<Bind<'a>>) -> &mut Self {
        self.bind(value);
        self.args.placeholder(self.text.to_mut());
        self
    }

    /// Adds an id that is compared with, or stored into, the ledger column `col`, and writes
    /// its placeholder: `CAST($n AS uuid)` where that column is a `uuid`, the bare placeholder
    /// otherwise. Only the literal type `uuid` is ever written.
    pub(super) fn push_id<'a>(&mut self, col: IdColumn, value: impl Into<Bind<'a>>) -> &mut Self {
        let uuid = self.ids.is_uuid(col);
        if uuid {
            self.push("CAST(");
        }
        self.push_bind(value);
        if uuid {
            self.push(" AS uuid)");
        }
        self
    }

    /// Writes `expr`, the ledger column `col`, to be read as text: `expr::text` where the
    /// column is a `uuid` (which sqlx decodes into no `String`), `expr` otherwise.
    pub(super) fn push_id_text(&mut self, col: IdColumn, expr: &'static str) -> &mut Self {
        self.push(expr);
        if self.ids.is_uuid(col) {
            self.push("::text");
        }
        self
    }

    /// Writes `expr`, the ledger column `of`, converted to the type of the ledger column `like`
    /// where the two differ (`::uuid` or `::text`), to compare the two: `like` is the column
    /// whose index serves the comparison, so it stays as it is.
    pub(super) fn push_id_as(
        &mut self,
        of: IdColumn,
        expr: &'static str,
        like: IdColumn,
    ) -> &mut Self {
        self.push(expr);
        match (self.ids.is_uuid(of), self.ids.is_uuid(like)) {
            (false, true) => self.push("::uuid"),
            (true, false) => self.push("::text"),
            _ => self,
        }
    }

    /// Pushes text and values with `separator` between them (`a, b, c`).
    pub(super) fn separated(&mut self, separator: &'static str) -> Separated<'_> {
        Separated {
            sql: self,
            separator,
            push_separator: false,
        }
    }

    /// Pushes `VALUES (…), (…)`: one parenthesised tuple per item, whose values `tuple` pushes
    /// (text as sqlx's `QueryBuilder::push_values` writes it).
    pub(super) fn push_values<I>(
        &mut self,
        items: I,
        mut tuple: impl FnMut(Separated<'_>, I::Item),
    ) -> &mut Self
    where
        I: IntoIterator,
    {
        self.push("VALUES ");
        let mut first = true;
        for item in items {
            self.push(if first { "(" } else { ", (" });
            first = false;
            tuple(self.separated(", "), item);
            self.push(")");
        }
        debug_assert!(!first, "VALUES without a tuple is not SQL");
        self
    }

    /// The text and the arguments, or the encoding error.
    fn into_parts(self) -> Result<(AssertSqlSafe<Cow<'static, str>>, Args), sqlx::Error> {
        match self.error {
            Some(e) => Err(sqlx::Error::Encode(e)),
            // recon's own statement text; every value is a bound parameter.
            None => Ok((AssertSqlSafe(self.text), self.args)),
        }
    }
}

/// Text and values with a separator between them (see [`Sql::separated`]).
pub(super) struct Separated<'s> {
    sql: &'s mut Sql,
    separator: &'static str,
    push_separator: bool,
}

impl Separated<'_> {
    /// Adds a value and writes its placeholder, after the separator unless it is the first.
    pub(super) fn push_bind<'a>(&mut self, value: impl Into<Bind<'a>>) -> &mut Self {
        if self.push_separator {
            self.sql.push(self.separator);
        }
        self.sql.push_bind(value);
        self.push_separator = true;
        self
    }

    /// Adds an id of the ledger column `col` (see [`Sql::push_id`]), after the separator
    /// unless it is the first.
    pub(super) fn push_id<'a>(&mut self, col: IdColumn, value: impl Into<Bind<'a>>) -> &mut Self {
        if self.push_separator {
            self.sql.push(self.separator);
        }
        self.sql.push_id(col, value);
        self.push_separator = true;
        self
    }
}

/// A column by index or by name.
pub(super) trait Col: sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow> {}

impl<I: sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow>> Col for I {}

/// A row a statement returned, read by column.
pub(super) enum Row<'r> {
    Sqlite(&'r SqliteRow),
    Postgres(&'r PgRow),
}

impl Row<'_> {
    fn get<T>(&self, col: impl Col) -> Result<T, sqlx::Error>
    where
        T: for<'v> sqlx::Decode<'v, Sqlite>
            + sqlx::Type<Sqlite>
            + for<'v> sqlx::Decode<'v, Postgres>
            + sqlx::Type<Postgres>,
    {
        match self {
            Row::Sqlite(r) => r.try_get(col),
            Row::Postgres(r) => r.try_get(col),
        }
    }

    /// A TEXT column.
    pub(super) fn text(&self, col: impl Col) -> Result<String, sqlx::Error> {
        self.get(col)
    }

    /// A TEXT column that may be NULL.
    pub(super) fn opt_text(&self, col: impl Col) -> Result<Option<String>, sqlx::Error> {
        self.get(col)
    }

    /// A 64-bit integer column.
    pub(super) fn int(&self, col: impl Col) -> Result<i64, sqlx::Error> {
        self.get(col)
    }

    /// A 64-bit integer column that may be NULL.
    pub(super) fn opt_int(&self, col: impl Col) -> Result<Option<i64>, sqlx::Error> {
        self.get(col)
    }

    /// A timestamp column, in the report form (`2026-11-28T10:15:00Z`).
    pub(super) fn ts(&self, col: impl Col) -> Result<String, sqlx::Error> {
        match self {
            Row::Sqlite(r) => r.try_get::<String, _>(col).map(sqlite_ts_read),
            Row::Postgres(r) => r
                .try_get::<chrono::DateTime<chrono::Utc>, _>(col)
                .map(pg_ts_read),
        }
    }

    /// A timestamp column that may be NULL, in the report form.
    pub(super) fn opt_ts(&self, col: impl Col) -> Result<Option<String>, sqlx::Error> {
        match self {
            Row::Sqlite(r) => Ok(r.try_get::<Option<String>, _>(col)?.map(sqlite_ts_read)),
            Row::Postgres(r) => Ok(r
                .try_get::<Option<chrono::DateTime<chrono::Utc>>, _>(col)?
                .map(pg_ts_read)),
        }
    }
}

/// A statement was made by the transaction of one backend and run on the other's.
fn wrong_backend() -> sqlx::Error {
    sqlx::Error::InvalidArgument(
        "a statement made for one database backend ran on the other".to_string(),
    )
}

/// The statements' executor: one arm per backend.
impl Tx {
    /// A statement for this transaction's backend, starting with `text`.
    pub(super) fn sql(&self, text: &'static str) -> Sql {
        let args = match self.conn {
            Conn::Sqlite(_) => Args::Sqlite(SqliteArguments::default()),
            Conn::Postgres(..) => Args::Postgres(PgArguments::default()),
        };
        let ids = self.id_types();
        Sql {
            text: Cow::Borrowed(text),
            args,
            error: None,
            ids,
        }
    }

    /// Which ledger id columns are `uuid` on this transaction's database.
    pub(super) fn id_types(&self) -> IdTypes {
        match &self.conn {
            Conn::Sqlite(_) => IdTypes::TEXT,
            Conn::Postgres(_, ids) => *ids,
        }
    }

    /// Runs a statement; returns the number of rows it changed.
    pub(super) async fn execute(&mut self, sql: Sql) -> Result<u64, sqlx::Error> {
        let (text, args) = sql.into_parts()?;
        let limit = self.limits.statement_timeout;
        bounded(limit, "statement_timeout", async {
            Ok(match (&mut self.conn, args) {
                (Conn::Sqlite(t), Args::Sqlite(a)) => sqlx::query_with(text, a)
                    .execute(&mut **t)
                    .await?
                    .rows_affected(),
                (Conn::Postgres(t, _), Args::Postgres(a)) => sqlx::query_with(text, a)
                    .execute(&mut **t)
                    .await?
                    .rows_affected(),
                _ => return Err(wrong_backend()),
            })
        })
        .await
    }

    /// Runs a statement and reads each row it returns with `read`, as the rows arrive.
    pub(super) async fn fetch_all<T>(
        &mut self,
        sql: Sql,
        mut read: impl FnMut(Row<'_>) -> Result<T, sqlx::Error>,
    ) -> Result<Vec<T>, sqlx::Error> {
        let (text, args) = sql.into_parts()?;
        let limit = self.limits.statement_timeout;
        bounded(limit, "statement_timeout", async {
            let mut out = Vec::new();
            match (&mut self.conn, args) {
                (Conn::Sqlite(t), Args::Sqlite(a)) => {
                    let mut rows = sqlx::query_with(text, a).fetch(&mut **t);
                    while let Some(r) = rows.try_next().await? {
                        out.push(read(Row::Sqlite(&r))?);
                    }
                }
                (Conn::Postgres(t, _), Args::Postgres(a)) => {
                    let mut rows = sqlx::query_with(text, a).fetch(&mut **t);
                    while let Some(r) = rows.try_next().await? {
                        out.push(read(Row::Postgres(&r))?);
                    }
                }
                _ => return Err(wrong_backend()),
            }
            Ok(out)
        })
        .await
    }

    /// Runs a statement and reads its first row with `read`, if it returned one.
    pub(super) async fn fetch_optional<T>(
        &mut self,
        sql: Sql,
        read: impl FnOnce(Row<'_>) -> Result<T, sqlx::Error>,
    ) -> Result<Option<T>, sqlx::Error> {
        let (text, args) = sql.into_parts()?;
        let limit = self.limits.statement_timeout;
        bounded(limit, "statement_timeout", async {
            match (&mut self.conn, args) {
                (Conn::Sqlite(t), Args::Sqlite(a)) => sqlx::query_with(text, a)
                    .fetch_optional(&mut **t)
                    .await?
                    .as_ref()
                    .map(|r| read(Row::Sqlite(r)))
                    .transpose(),
                (Conn::Postgres(t, _), Args::Postgres(a)) => sqlx::query_with(text, a)
                    .fetch_optional(&mut **t)
                    .await?
                    .as_ref()
                    .map(|r| read(Row::Postgres(r)))
                    .transpose(),
                _ => Err(wrong_backend()),
            }
        })
        .await
    }

    /// Runs a statement and reads its first row with `read`; no row is
    /// [`sqlx::Error::RowNotFound`].
    pub(super) async fn fetch_one<T>(
        &mut self,
        sql: Sql,
        read: impl FnOnce(Row<'_>) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        self.fetch_optional(sql, read)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }
}
