//! Database connection (SQLite file or PostgreSQL, chosen by the URL), migrations, the schema
//! check every command makes before touching data, and the run lock.

pub use crate::config::database::DatabaseLimits;
use crate::config::database::describe;
pub use crate::config::is_postgres;
use crate::exit::{Failure, fail};
use anyhow::Result;
use sqlx::ConnectOptions as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, PgPool, SqlitePool};
use std::fs::File;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Migrations for the embedded default (SQLite), compiled into the binary.
pub static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
/// Migrations for PostgreSQL, compiled into the binary.
pub static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// PostgreSQL advisory lock key of the run lock ("recon" in ASCII).
pub const RUN_LOCK_KEY: i64 = 0x0072_6563_6f6e;

/// Process-wide settings for SQLite's memory, made before the first connection opens
/// (`sqlite3_config` refuses them afterwards, and then nothing changes). SQLite allocates
/// through the C library's malloc, not recon's allocator:
/// - no allocation statistics: with them, every SQLite malloc and free takes a global mutex;
/// - glibc keeps freed heap memory instead of handing it back after each statement. A
///   write statement's journal and cache pages were otherwise faulted in anew every time,
///   which costs ~20 µs a page on this kind of VM.
pub fn tune_sqlite_memory() {
    // SAFETY: both calls only set process-wide options; they are made by `main` before any
    // thread or connection exists. SQLITE_CONFIG_MEMSTATUS takes one int.
    unsafe {
        libsqlite3_sys::sqlite3_config(
            libsqlite3_sys::SQLITE_CONFIG_MEMSTATUS,
            0 as std::ffi::c_int,
        );
        #[cfg(target_env = "gnu")]
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// A connection pool on either backend.
#[derive(Debug, Clone)]
pub enum Pool {
    /// The embedded default.
    Sqlite(SqlitePool),
    /// Production.
    Postgres(PgPool),
}

/// An open database whose schema matches this binary.
#[derive(Debug, Clone)]
pub struct Db {
    /// The pool.
    pub pool: Pool,
    /// The SQLite database file (None for PostgreSQL and in-memory SQLite).
    pub file: Option<PathBuf>,
    /// The URL (for messages; always shown masked).
    pub(crate) url: String,
    /// Which ledger id columns are `uuid`, once read ([`Db::id_types`]); shared by the clones.
    id_types: Arc<OnceLock<IdTypes>>,
    /// How long each wait for the database may last.
    pub(crate) limits: DatabaseLimits,
}

/// A ledger column that holds a payment or attempt id. The payment service may declare any of
/// them `uuid` on PostgreSQL (the bundled schema has `text`); recon's own tables
/// (`review_tickets`, `recon_followups`, …) keep `text` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdColumn {
    /// `payments.payment_id`.
    PaymentId,
    /// `payments.attempt_id`.
    PaymentAttemptId,
    /// `payment_attempts.attempt_id`.
    AttemptId,
    /// `payment_attempts.payment_id`.
    AttemptPaymentId,
    /// `payment_status_history.payment_id`.
    HistoryPaymentId,
    /// `payment_status_history.attempt_id`.
    HistoryAttemptId,
}

impl IdColumn {
    /// Every ledger id column.
    pub const ALL: [IdColumn; 6] = [
        IdColumn::PaymentId,
        IdColumn::PaymentAttemptId,
        IdColumn::AttemptId,
        IdColumn::AttemptPaymentId,
        IdColumn::HistoryPaymentId,
        IdColumn::HistoryAttemptId,
    ];

    /// Its table.
    pub fn table(self) -> &'static str {
        match self {
            IdColumn::PaymentId | IdColumn::PaymentAttemptId => "payments",
            IdColumn::AttemptId | IdColumn::AttemptPaymentId => "payment_attempts",
            IdColumn::HistoryPaymentId | IdColumn::HistoryAttemptId => "payment_status_history",
        }
    }

    /// Its name in the table.
    pub fn column(self) -> &'static str {
        match self {
            IdColumn::PaymentId | IdColumn::AttemptPaymentId | IdColumn::HistoryPaymentId => {
                "payment_id"
            }
            IdColumn::PaymentAttemptId | IdColumn::AttemptId | IdColumn::HistoryAttemptId => {
                "attempt_id"
            }
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl std::fmt::Display for IdColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.table(), self.column())
    }
}

/// Which of the ledger's id columns ([`IdColumn`]) are `uuid` in the database; the others are
/// text (SQLite, the bundled PostgreSQL schema, `varchar`), and ids are bound to them and read
/// from them as text. Where a column is `uuid`, a statement binds the id as `CAST($n AS uuid)`
/// (the value is converted, so the column's index still serves) and reads the column as
/// `col::text`: PostgreSQL's canonical text of a UUID, lower case with hyphens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdTypes(u8);

impl IdTypes {
    /// Every id column text.
    pub const TEXT: IdTypes = IdTypes(0);

    /// Whether `col` is a `uuid` column.
    pub fn is_uuid(self, col: IdColumn) -> bool {
        self.0 & col.bit() != 0
    }

    /// These types with `col` a `uuid` column.
    #[must_use]
    pub fn with_uuid(self, col: IdColumn) -> IdTypes {
        IdTypes(self.0 | col.bit())
    }
}

/// The ledger id columns ([`IdColumn`], given as two arrays: tables and columns) whose type is
/// `uuid` or a domain over it. `to_regclass` resolves a name as the statements do (search path;
/// a view as well as a table) and is NULL for a missing table, which is no error: its columns
/// count as text.
const UUID_COLUMNS_SQL: &str = "SELECT c.tbl, c.col \
     FROM unnest($1::text[], $2::text[]) AS c(tbl, col) \
     JOIN pg_attribute a ON a.attrelid = to_regclass(c.tbl) AND a.attname = c.col \
          AND a.attnum > 0 AND NOT a.attisdropped \
     JOIN pg_type t ON t.oid = a.atttypid \
     WHERE 'uuid'::regtype IN (t.oid, t.typbasetype)";

pub(crate) fn db_error(url: &str, what: &str, e: impl std::fmt::Display) -> anyhow::Error {
    fail(
        Failure::Database,
        format!("database {}: {what}: {}", crate::mask::url(url), message(e)),
    )
}

/// A database error as text. A "line N" in it counts lines of what recon sent the server (a
/// statement or a COPY stream), never of an input file; the message says so, so nobody looks
/// for the fault at that line of a statement.
pub fn message(e: impl std::fmt::Display) -> String {
    let text = crate::mask::secrets(&e.to_string());
    if text.contains(" line ") {
        format!(
            "{text} (that line is one of the data recon sent the database, not of any input file)"
        )
    } else {
        text
    }
}

/// One connection before the pool: the pool retries a refused connection until its acquire
/// timeout (`connect_timeout`) and then only says it timed out. A refused connection, a wrong password
/// or a missing database fails here at once with what the server or the OS said; a server
/// that is merely slow still gets `connect_timeout`.
async fn probe(url: &str, opts: &PgConnectOptions, limit: Duration) -> Result<()> {
    match tokio::time::timeout(limit, sqlx::PgConnection::connect_with(opts)).await {
        Ok(Ok(conn)) => {
            let _ = tokio::time::timeout(limit, conn.close()).await;
            Ok(())
        }
        Ok(Err(sqlx::Error::Io(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Err(db_error(
                url,
                "cannot connect: connection refused (hint: is PostgreSQL running and listening at that host and port?)",
                e,
            ))
        }
        Ok(Err(e)) => Err(db_error(url, "cannot connect", e)),
        Err(_) => Err(db_error(
            url,
            "cannot connect",
            format!(
                "no connection within {} (`[database] connect_timeout`)",
                describe(limit)
            ),
        )),
    }
}

/// What a wait that ran out of `limit` (the `[database]` key `key`) says.
pub fn timeout_text(limit: Duration, key: &str) -> String {
    format!(
        "no answer within {} (`[database] {key}`; the database or the network to it stalled)",
        describe(limit)
    )
}

/// Statements slower than this are logged at debug level, not as warnings: building an index
/// over a million imported rows takes seconds by design, and sqlx's default (a WARN per
/// statement over 1 s) put database internals into every large import's output.
const SLOW_STATEMENT: Duration = Duration::from_secs(1);

impl Db {
    /// Connects without touching the schema, with the default [`DatabaseLimits`].
    pub async fn connect(url: &str) -> Result<Db> {
        Self::connect_with(url, DatabaseLimits::default()).await
    }

    /// Connects without touching the schema (`recon migrate` uses this); every later wait for
    /// this database is bounded by `limits`.
    pub async fn connect_with(url: &str, limits: DatabaseLimits) -> Result<Db> {
        // A URL that does not parse (an invalid port, say) is a configuration error: nothing
        // was tried yet.
        let bad_url = |e: sqlx::Error| {
            fail(
                Failure::Config,
                format!(
                    "key `database_url`: cannot use {}: {}",
                    crate::mask::url(url),
                    message(e)
                ),
            )
        };
        if is_postgres(url) {
            let opts = PgConnectOptions::from_str(url)
                .map_err(bad_url)?
                .options(limits.pg_keepalive_options())
                .log_slow_statements(log::LevelFilter::Debug, SLOW_STATEMENT);
            probe(url, &opts, limits.connect_timeout).await?;
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(limits.connect_timeout)
                .connect_with(opts)
                .await
                .map_err(|e| db_error(url, "cannot connect", e))?;
            return Ok(Db {
                pool: Pool::Postgres(pool),
                file: None,
                url: url.to_string(),
                id_types: Arc::default(),
                limits,
            });
        }
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(bad_url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(limits.busy_timeout)
            // 16 MiB page cache: larger caches were no faster at a million payments, only bigger
            // (each page a run touches is mostly touched once).
            .pragma("cache_size", "-16384")
            .pragma("temp_store", "memory")
            .log_slow_statements(log::LevelFilter::Debug, SLOW_STATEMENT);
        let file = {
            let p = opts.get_filename();
            (p.as_os_str() != ":memory:").then(|| p.to_path_buf())
        };
        if let Some(parent) = file.as_ref().and_then(|f| f.parent())
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|e| db_error(url, "cannot create its folder", e))?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(limits.connect_timeout)
            .connect_with(opts)
            .await
            .map_err(|e| db_error(url, "cannot open", e))?;
        Ok(Db {
            pool: Pool::Sqlite(pool),
            file,
            url: url.to_string(),
            id_types: Arc::default(),
            limits,
        })
    }

    /// Connects and checks the schema, with the default [`DatabaseLimits`].
    pub async fn open(url: &str) -> Result<Db> {
        Self::open_with(url, DatabaseLimits::default()).await
    }

    /// The job's database ([`Db::open_with`] its URL and `[database]` limits).
    pub async fn for_job(cfg: &crate::config::Config) -> Result<Db> {
        Self::open_with(&cfg.database_url, cfg.database).await
    }

    /// Connects and checks the schema. A brand-new, empty SQLite file (the embedded default)
    /// is migrated on the spot; anything else must have been migrated by `recon migrate`.
    pub async fn open_with(url: &str, limits: DatabaseLimits) -> Result<Db> {
        let db = Self::connect_with(url, limits).await?;
        if let Pool::Sqlite(pool) = &db.pool {
            let tables: i64 = db
                .bounded(
                    "cannot read",
                    sqlx::query_scalar("SELECT count(*) FROM sqlite_master").fetch_one(pool),
                )
                .await?;
            if tables == 0 {
                db.migrate().await?;
            }
        }
        db.check_schema().await?;
        Ok(db)
    }

    /// How long each wait for this database may last.
    pub fn limits(&self) -> DatabaseLimits {
        self.limits
    }

    /// `fut`, a wait for this database (a statement, or a read of many rows), bounded by
    /// `statement_timeout`: when it runs out, a [`Failure::Database`] error that names `what`
    /// recon waited for and the bound.
    pub async fn bounded<T, E: std::fmt::Display>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = std::result::Result<T, E>>,
    ) -> Result<T> {
        let limit = self.limits.statement_timeout;
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r.map_err(|e| db_error(&self.url, what, e)),
            Err(_) => Err(self.timed_out(what, limit, "statement_timeout")),
        }
    }

    /// [`Db::bounded`] with an error that is already an `anyhow::Error` (the loaders').
    pub async fn bounded_any<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.limits.statement_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(self.timed_out(what, self.limits.statement_timeout, "statement_timeout")),
        }
    }

    /// The error of a wait for `what` that ran out of `limit` (the `[database]` key `key`).
    fn timed_out(&self, what: &str, limit: Duration, key: &str) -> anyhow::Error {
        db_error(&self.url, what, timeout_text(limit, key))
    }

    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        match self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    /// Applies pending migrations; returns the versions applied now.
    pub async fn migrate(&self) -> Result<Vec<i64>> {
        let before = self.applied_versions().await?.unwrap_or_default();
        match &self.pool {
            Pool::Sqlite(p) => self.migrator().run(p).await,
            Pool::Postgres(p) => self.migrator().run(p).await,
        }
        .map_err(|e| db_error(&self.url, "migration failed", e))?;
        let after = self.applied_versions().await?.unwrap_or_default();
        Ok(after
            .into_iter()
            .filter(|(v, _)| !before.iter().any(|(b, _)| b == v))
            .map(|(v, _)| v)
            .collect())
    }

    /// (version, checksum) of every applied migration, or None if never migrated.
    async fn applied_versions(&self) -> Result<Option<Vec<(i64, Vec<u8>)>>> {
        let sql = "SELECT version, checksum FROM _sqlx_migrations WHERE success ORDER BY version";
        let limit = self.limits.statement_timeout;
        let r = tokio::time::timeout(limit, async {
            match &self.pool {
                Pool::Sqlite(p) => sqlx::query_as::<_, (i64, Vec<u8>)>(sql).fetch_all(p).await,
                Pool::Postgres(p) => sqlx::query_as::<_, (i64, Vec<u8>)>(sql).fetch_all(p).await,
            }
        })
        .await
        .map_err(|_| {
            self.timed_out("cannot read the schema version", limit, "statement_timeout")
        })?;
        match r {
            Ok(v) => Ok(Some(v)),
            Err(sqlx::Error::Database(d))
                if d.message().contains("no such table")
                    || d.code().as_deref() == Some("42P01") =>
            {
                Ok(None)
            }
            Err(e) => Err(db_error(&self.url, "cannot read the schema version", e)),
        }
    }

    /// Fails with a clear message unless the database has exactly the migrations this binary
    /// knows: not migrated (or behind) → run `recon migrate`; newer or altered → wrong binary.
    pub async fn check_schema(&self) -> Result<()> {
        let url = crate::mask::url(&self.url);
        let Some(applied) = self.applied_versions().await? else {
            return Err(fail(
                Failure::Database,
                format!(
                    "database {url} has no recon schema (hint: run `recon migrate --config FILE` first)"
                ),
            ));
        };
        let known: Vec<(i64, &[u8])> = self
            .migrator()
            .iter()
            .filter(|m| m.migration_type.is_up_migration())
            .map(|m| (m.version, m.checksum.as_ref()))
            .collect();
        if let Some((v, _)) = applied
            .iter()
            .find(|(v, _)| !known.iter().any(|(k, _)| k == v))
        {
            return Err(fail(
                Failure::Database,
                format!(
                    "database {url} has schema version {v}, newer than this recon knows (latest {}); \
                     use the recon release that migrated it",
                    known.last().map(|k| k.0).unwrap_or(0)
                ),
            ));
        }
        if let Some((v, _)) = applied
            .iter()
            .find(|(v, c)| known.iter().any(|(k, kc)| k == v && *kc != c.as_slice()))
        {
            return Err(fail(
                Failure::Database,
                format!("database {url}: migration {v} differs from the one this recon ships"),
            ));
        }
        let missing: Vec<i64> = known
            .iter()
            .filter(|(k, _)| !applied.iter().any(|(v, _)| v == k))
            .map(|(k, _)| *k)
            .collect();
        if !missing.is_empty() {
            return Err(fail(
                Failure::Database,
                format!(
                    "database {url} lacks migration(s) {missing:?} (hint: run `recon migrate --config FILE`)"
                ),
            ));
        }
        Ok(())
    }

    /// Which ledger id columns are `uuid` ([`IdTypes`]): on PostgreSQL read from the catalog
    /// the first time it is asked (the ledger's schema is the payment service's and does not
    /// change under a run), on SQLite every column is text.
    pub async fn id_types(&self) -> Result<IdTypes> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(IdTypes::TEXT);
        };
        if let Some(t) = self.id_types.get() {
            return Ok(*t);
        }
        let tables: Vec<&str> = IdColumn::ALL.iter().map(|c| c.table()).collect();
        let columns: Vec<&str> = IdColumn::ALL.iter().map(|c| c.column()).collect();
        let uuid: Vec<(String, String)> = self
            .bounded(
                "cannot read the types of the ledger's id columns",
                sqlx::query_as(UUID_COLUMNS_SQL)
                    .bind(tables)
                    .bind(columns)
                    .fetch_all(pool),
            )
            .await?;
        let mut types = IdTypes::TEXT;
        for (table, column) in &uuid {
            if let Some(c) = IdColumn::ALL
                .into_iter()
                .find(|c| c.table() == table && c.column() == column)
            {
                types = types.with_uuid(c);
            }
        }
        if types != IdTypes::TEXT {
            let list: Vec<String> = IdColumn::ALL
                .into_iter()
                .filter(|&c| types.is_uuid(c))
                .map(|c| c.to_string())
                .collect();
            tracing::debug!(columns = %list.join(", "), "Ledger id columns of type uuid.");
        }
        Ok(*self.id_types.get_or_init(|| types))
    }

    /// The rows of a query from the job's configuration (not user input, like the ledger
    /// queries) that returns one text column; the error is the database's message.
    pub async fn configured_texts(
        &self,
        sql: &str,
    ) -> std::result::Result<Vec<Option<String>>, String> {
        let q = || sqlx::AssertSqlSafe(sql.to_string());
        let limit = self.limits.statement_timeout;
        tokio::time::timeout(limit, async {
            match &self.pool {
                Pool::Sqlite(p) => sqlx::query_scalar(q()).fetch_all(p).await,
                Pool::Postgres(p) => sqlx::query_scalar(q()).fetch_all(p).await,
            }
        })
        .await
        .map_err(|_| timeout_text(limit, "statement_timeout"))?
        .map_err(message)
    }

    /// Closes the pool (waits for connections to finish, at most `connect_timeout`: a
    /// connection left stalled by a database that stopped answering is given up, and ends with
    /// the process).
    pub async fn close(&self) {
        let close = async {
            match &self.pool {
                Pool::Sqlite(p) => p.close().await,
                Pool::Postgres(p) => p.close().await,
            }
        };
        if tokio::time::timeout(self.limits.connect_timeout, close)
            .await
            .is_err()
        {
            tracing::debug!("Database connections not closed in time; left to the process end.");
        }
    }

    /// Takes the exclusive run lock: one recon run per database at a time (whatever their
    /// ranges: a range's scope includes older carried-over payments, so two "disjoint" runs can
    /// still touch the same payment). SQLite: a lock file beside the database; PostgreSQL: a
    /// session advisory lock on a dedicated connection. Both vanish with the process, so a
    /// killed run never leaves a stale lock. Without `wait`, a held lock fails with the LOCKED
    /// exit code; with it, this waits.
    pub async fn lock(&self, wait: bool) -> Result<RunLock> {
        let held = || {
            fail(
                Failure::Locked,
                format!(
                    "another recon run holds the run lock on {} (hint: wait for it, or pass --wait)",
                    crate::mask::url(&self.url)
                ),
            )
        };
        match &self.pool {
            Pool::Postgres(p) => {
                let mut conn = p
                    .acquire()
                    .await
                    .map_err(|e| db_error(&self.url, "cannot connect for the run lock", e))?
                    .detach();
                let got = self
                    .try_pg_lock(
                        &mut conn,
                        "cannot take the run lock",
                        &format!("SELECT pg_try_advisory_lock({RUN_LOCK_KEY})"),
                    )
                    .await?;
                if !got {
                    if !wait {
                        let _ =
                            tokio::time::timeout(self.limits.connect_timeout, conn.close()).await;
                        return Err(held());
                    }
                    // Unbounded by design: `--wait` waits as long as the other run works (the
                    // server's keepalive still drops a connection whose peer is gone).
                    tracing::info!("Another run holds the run lock; waiting for it.");
                    sqlx::query("SELECT pg_advisory_lock($1)")
                        .bind(RUN_LOCK_KEY)
                        .execute(&mut conn)
                        .await
                        .map_err(|e| db_error(&self.url, "waiting for the run lock", e))?;
                }
                Ok(RunLock {
                    _file: None,
                    _pg: Some(conn),
                })
            }
            Pool::Sqlite(_) => {
                let Some(file) = &self.file else {
                    return Ok(RunLock {
                        _file: None,
                        _pg: None,
                    });
                };
                let mut lock_path = file.clone().into_os_string();
                lock_path.push(".lock");
                let lock_path = PathBuf::from(lock_path);
                let f = File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&lock_path)
                    .map_err(|e| {
                        fail(
                            Failure::Database,
                            format!("{}: cannot open lock file: {e}", lock_path.display()),
                        )
                    })?;
                let lock_err = |e: std::io::Error| {
                    fail(
                        Failure::Database,
                        format!("{}: cannot lock: {e}", lock_path.display()),
                    )
                };
                match f.try_lock() {
                    Ok(()) => {}
                    Err(std::fs::TryLockError::WouldBlock) if wait => {
                        tracing::info!("Another run holds the run lock; waiting for it.");
                        let f2 = f.try_clone().map_err(lock_err)?;
                        tokio::task::spawn_blocking(move || f2.lock())
                            .await
                            .map_err(|e| lock_err(std::io::Error::other(e)))?
                            .map_err(lock_err)?;
                    }
                    Err(std::fs::TryLockError::WouldBlock) => return Err(held()),
                    Err(std::fs::TryLockError::Error(e)) => return Err(lock_err(e)),
                }
                Ok(RunLock {
                    _file: Some(f),
                    _pg: None,
                })
            }
        }
    }
}

/// How long taking a PostgreSQL advisory lock keeps trying before it says another process
/// holds it: the time a server may take to end the backend of a connection its process closed
/// (and with it that connection's locks).
const LOCK_GRACE: Duration = Duration::from_secs(2);

/// Advisory locks of partitioned nights (the two-key form, a key space apart from
/// [`RUN_LOCK_KEY`]): the first key names what is locked, the second which one.
pub const SHARD_LOCK_CLASS: i32 = 0x7265_6301;
/// The gather of a run group.
pub const GATHER_LOCK_CLASS: i32 = 0x7265_6302;
/// Creating a run group (the first shard applies the decisions inbox under it).
pub const GROUP_LOCK_CLASS: i32 = 0x7265_6303;

impl Db {
    /// Whether the database is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// Takes PostgreSQL advisory locks on one connection of its own, held until the returned
    /// lock is dropped: each of `tries` is a query that returns whether it got its lock
    /// (`pg_try_advisory_lock…`). With `wait`, `waits[i]` is run instead when `tries[i]`
    /// fails. `what` names the lock in the error (exit [`crate::exit::LOCKED`]).
    pub async fn pg_locks(
        &self,
        what: &str,
        tries: &[String],
        waits: Option<&[String]>,
    ) -> Result<RunLock> {
        let Pool::Postgres(p) = &self.pool else {
            return Err(fail(
                Failure::Config,
                format!("{what}: needs PostgreSQL (a SQLite job runs as one process)"),
            ));
        };
        let mut conn = p
            .acquire()
            .await
            .map_err(|e| db_error(&self.url, "cannot connect for the lock", e))?
            .detach();
        for (i, q) in tries.iter().enumerate() {
            let got = self
                .try_pg_lock(&mut conn, "cannot take the lock", q)
                .await?;
            if got {
                continue;
            }
            match waits.and_then(|w| w.get(i)) {
                Some(w) => {
                    tracing::info!(lock = what, "Waiting for the lock.");
                    sqlx::query(sqlx::AssertSqlSafe(w.clone()))
                        .execute(&mut conn)
                        .await
                        .map_err(|e| db_error(&self.url, "waiting for the lock", e))?;
                }
                None => {
                    let _ = tokio::time::timeout(self.limits.connect_timeout, conn.close()).await;
                    return Err(fail(
                        Failure::Locked,
                        format!("{what} (hint: wait for it, or pass --wait)"),
                    ));
                }
            }
        }
        Ok(RunLock {
            _file: None,
            _pg: Some(conn),
        })
    }

    /// Runs `try_query` (a `pg_try_advisory_lock…` that returns whether it got its lock) on
    /// `conn`, and while it does not, again for up to [`LOCK_GRACE`]: a process that just
    /// released the lock by closing its connection (every recon process, on exit) holds it
    /// until its server backend has noticed, and a run started right after it must not be
    /// refused as if another run were at work.
    async fn try_pg_lock(
        &self,
        conn: &mut sqlx::PgConnection,
        what: &str,
        try_query: &str,
    ) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + LOCK_GRACE;
        loop {
            let got: bool = self
                .bounded(
                    what,
                    sqlx::query_scalar(sqlx::AssertSqlSafe(try_query.to_string()))
                        .fetch_one(&mut *conn),
                )
                .await?;
            if got || tokio::time::Instant::now() >= deadline {
                return Ok(got);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether no process holds shard `index`'s lock (a run of it that is RUNNING was
    /// killed). Takes the lock and gives it back at once, on the same connection.
    pub async fn shard_lock_free(&self, index: u32) -> Result<bool> {
        let Pool::Postgres(p) = &self.pool else {
            return Ok(false);
        };
        let mut conn = p
            .acquire()
            .await
            .map_err(|e| db_error(&self.url, "cannot connect to probe a shard lock", e))?;
        let got: bool = self
            .bounded(
                "cannot probe the shard lock",
                sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
                    .bind(SHARD_LOCK_CLASS)
                    .bind(index as i32)
                    .fetch_one(&mut *conn),
            )
            .await?;
        if got {
            self.bounded(
                "cannot release the probed shard lock",
                sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock($1, $2)")
                    .bind(SHARD_LOCK_CLASS)
                    .bind(index as i32)
                    .fetch_one(&mut *conn),
            )
            .await?;
        }
        Ok(got)
    }
}

/// Held while a run works; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: Option<File>,
    _pg: Option<sqlx::PgConnection>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_in_a_database_error_is_not_taken_for_a_file_line() {
        let m = super::message("invalid byte sequence for encoding \"UTF8\": 0x00 at line 1798");
        assert!(m.contains("not of any input file"), "{m}");
        assert_eq!(
            super::message("relation x does not exist"),
            "relation x does not exist"
        );
    }
}
