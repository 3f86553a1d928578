//! A small test environment: a temporary folder with a job config, a fresh SQLite database and
//! the recon library called directly.

use recon::config::Config;
use recon::run::{RunOptions, RunReport};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Statement header every scenario uses.
pub const STATEMENT_HEADER: &str = "id,reference,recipient,amount,currency,booked_at,type";
/// Payments header (the import contract).
pub const PAYMENTS_HEADER: &str = "payment_id,recipient_account,amount,currency,status,created_at,started_at,attempt_id,provider_payment_id";
/// Attempts header (the import contract).
pub const ATTEMPTS_HEADER: &str =
    "attempt_id,payment_id,started_at,finished_at,outcome,provider_payment_id,error_detail";

/// Settings a scenario can vary.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Job time zone.
    pub timezone: String,
    /// Statement completeness (inclusive days) or None.
    pub complete: Option<(String, String)>,
    /// Extra top-level TOML lines (e.g. `stale_submitting_minutes = 60`).
    pub extra: String,
    /// Rules TOML replacing the bundled default, if any.
    pub rules: Option<String>,
    /// Database URL (default: a fresh SQLite file in the job folder).
    pub database_url: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            timezone: "UTC".into(),
            complete: Some(("2026-11-01".into(), "2026-11-30".into())),
            extra: String::new(),
            rules: None,
            database_url: None,
        }
    }
}

/// A temporary job.
pub struct TestEnv {
    /// Keeps the folder alive.
    pub dir: tempfile::TempDir,
    /// The job config file.
    pub config_path: PathBuf,
    /// A PostgreSQL database created for this job (dropped with it).
    pub pg_database: Option<String>,
}

/// Instantiates each `async fn name(b: Backend)` of the calling module as two tests,
/// `sqlite::name` and `postgres::name` (the module must have `Backend` in scope).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::Backend::Sqlite).await
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::Backend::Postgres).await
            })*
        }
    };
}

/// Which database a backend-generic test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A fresh SQLite file.
    Sqlite,
    /// A fresh database on the PostgreSQL at 127.0.0.1:5432 (`RECON_TEST_PG_URL` to change).
    Postgres,
}

/// The PostgreSQL server tests create their databases on.
pub fn pg_admin_url() -> String {
    std::env::var("RECON_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".to_string())
}

/// Creates an empty database on the test server; returns (name, URL).
pub async fn fresh_pg_database() -> (String, String) {
    use sqlx::Connection;
    let admin = pg_admin_url();
    let name = format!("recon_t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("PostgreSQL on 127.0.0.1:5432 (see .ci/run)");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let _ = conn.close().await;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    (name.clone(), format!("{base}/{name}"))
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if let Some(name) = &self.pg_database {
            // Best effort, synchronously (Drop cannot await): psql is PostgreSQL's own client.
            let _ = std::process::Command::new("psql")
                .arg(pg_admin_url())
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .output();
        }
    }
}

impl TestEnv {
    /// A job with the default settings.
    pub fn new() -> TestEnv {
        TestEnv::with(Settings::default())
    }

    /// A job on `backend` (PostgreSQL: a fresh, migrated database).
    pub async fn on(backend: Backend, mut settings: Settings) -> TestEnv {
        let mut pg = None;
        if backend == Backend::Postgres {
            let (name, url) = fresh_pg_database().await;
            let db = recon::db::Db::connect(&url).await.expect("connect");
            db.migrate().await.expect("migrate");
            db.close().await;
            settings.database_url = Some(url);
            pg = Some(name);
        }
        let mut env = TestEnv::with(settings);
        env.pg_database = pg;
        env
    }

    /// A job with `settings`.
    pub fn with(settings: Settings) -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let complete = settings
            .complete
            .as_ref()
            .map(|(a, b)| format!("complete_from = \"{a}\"\ncomplete_to = \"{b}\"\n"))
            .unwrap_or_default();
        let rules = match &settings.rules {
            Some(text) => {
                std::fs::create_dir_all(dir.path().join("rules")).expect("rules dir");
                std::fs::write(dir.path().join("rules/rules.toml"), text).expect("rules");
                "rules_dir = \"rules\"\n"
            }
            None => "",
        };
        let config = format!(
            r#"timezone = "{tz}"
database_url = "{db}"
output_dir = "out"
{rules}{extra}

{source}"#,
            source = psp_source("statement.csv", &complete),
            tz = settings.timezone,
            extra = settings.extra,
            db = settings
                .database_url
                .as_deref()
                .unwrap_or("sqlite://recon.db"),
        );
        let config_path = dir.path().join("recon.toml");
        std::fs::write(&config_path, config).expect("config");
        let env = TestEnv {
            dir,
            config_path,
            pg_database: None,
        };
        env.statement("");
        env
    }

    /// Path inside the job folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a file into the job folder.
    pub fn write(&self, name: &str, content: &str) {
        std::fs::write(self.path(name), content).expect("write");
    }

    /// Loaded config.
    pub fn config(&self) -> Config {
        Config::load(&self.config_path).expect("config loads")
    }

    /// Imports payment rows (without header) and attempt rows (without header).
    pub async fn import(&self, payments: &str, attempts: &str) {
        self.write("payments.csv", &format!("{PAYMENTS_HEADER}\n{payments}"));
        self.write("attempts.csv", &format!("{ATTEMPTS_HEADER}\n{attempts}"));
        self.import_files().await;
    }

    /// Imports the job folder's payments.csv and attempts.csv (with headers).
    pub async fn import_files(&self) {
        let db = recon::db::Db::open(&self.config().database_url)
            .await
            .expect("db");
        recon::ledger::import::import(
            &db,
            &self.path("payments.csv"),
            Some(&self.path("attempts.csv")),
        )
        .await
        .expect("import");
        db.close().await;
    }

    /// Writes the statement rows (without header), with its control file: the provider
    /// delivered it complete.
    pub fn statement(&self, rows: &str) {
        self.deliver("statement.csv", rows);
    }

    /// Delivers a provider file `name` of `psp`'s layout ([`STATEMENT_HEADER`], then `rows`)
    /// complete, with its control file.
    pub fn deliver(&self, name: &str, rows: &str) {
        self.deliver_csv(name, STATEMENT_HEADER, rows);
    }

    /// Delivers a CSV file `name` (`header`, then `rows`) with its control file.
    pub fn deliver_csv(&self, name: &str, header: &str, rows: &str) {
        self.write(name, &format!("{header}\n{rows}"));
        self.control(name);
    }

    /// Writes `<name>.ctl` beside a CSV file of the job folder: its record count (header
    /// excluded) and sha256, as a bank or provider delivers a control file with a complete file.
    pub fn control(&self, name: &str) {
        write_control(&self.path(name));
    }

    /// Runs `date` with `as_of`.
    pub async fn run(&self, date: &str, as_of: &str, dry_run: bool, run_id: &str) -> RunReport {
        self.try_run(date, date, as_of, dry_run, run_id)
            .await
            .expect("run succeeds")
    }

    /// Runs the day most tests use (2026-11-10, as of 2026-11-20) for real.
    pub async fn try_standard_day(&self, run_id: &str) -> anyhow::Result<RunReport> {
        self.try_run(
            "2026-11-10",
            "2026-11-10",
            "2026-11-20T00:00:00Z",
            false,
            run_id,
        )
        .await
    }

    /// Runs a range; returns the error.
    pub async fn try_run(
        &self,
        from: &str,
        to: &str,
        as_of: &str,
        dry_run: bool,
        run_id: &str,
    ) -> anyhow::Result<RunReport> {
        recon::run::run(
            &self.config(),
            &RunOptions {
                from: from.parse().expect("date"),
                to: to.parse().expect("date"),
                as_of: Some(as_of.parse().expect("as_of")),
                dry_run,
                run_id: Some(run_id.to_string()),
                wait: false,
            },
        )
        .await
    }

    /// The job's database, open and checked.
    pub async fn db(&self) -> recon::db::Db {
        recon::db::Db::open(&self.config().database_url)
            .await
            .expect("db")
    }

    /// Open pool on the job's SQLite database.
    pub async fn pool(&self) -> sqlx::SqlitePool {
        match self.db().await.pool {
            recon::db::Pool::Sqlite(p) => p,
            recon::db::Pool::Postgres(_) => panic!("pool() is for SQLite jobs; use texts()/exec()"),
        }
    }

    /// Runs a statement on the job's database, whichever backend.
    pub async fn exec(&self, sql: &'static str) {
        match self.db().await.pool {
            recon::db::Pool::Sqlite(p) => sqlx::query(sql).execute(&p).await.map(|_| ()),
            recon::db::Pool::Postgres(p) => sqlx::query(sql).execute(&p).await.map(|_| ()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The first column of every row of `sql` as text (cast it in the query), any backend.
    pub async fn texts(&self, sql: &'static str) -> Vec<String> {
        match self.db().await.pool {
            recon::db::Pool::Sqlite(p) => sqlx::query_scalar(sql).fetch_all(&p).await,
            recon::db::Pool::Postgres(p) => sqlx::query_scalar(sql).fetch_all(&p).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

/// The `[[source]]` table of the provider source `psp` every test job has: a CSV of
/// [`STATEMENT_HEADER`]'s columns at `path` (`{date}` for daily files), proven complete by
/// control files; `extra` holds further keys of the table (e.g. `complete_from`).
pub fn psp_source(path: &str, extra: &str) -> String {
    format!(
        r#"[[source]]
name = "psp"
format = "csv"
path = "{path}"
timestamp_format = "rfc3339"
completeness = "control_file"
{extra}
[source.columns]
provider_txn_id = "id"
reference = "reference"
recipient = "recipient"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
kind = "type"
"#
    )
}

/// Writes `<path>.ctl` for a CSV file with a header: `lines=` its records, `sha256=` its bytes.
pub fn write_control(path: &Path) {
    let bytes = std::fs::read(path).expect("read statement");
    let records = csv::Reader::from_reader(bytes.as_slice()).records().count();
    std::fs::write(
        format!("{}.ctl", path.display()),
        recon::sources::control_text(Some(records), Some(&recon::sources::sha256_hex(&bytes))),
    )
    .expect("write control file");
}

/// Reads a CSV file as rows of the named columns (header excluded).
pub fn read_columns(path: &Path, columns: &[&str]) -> Vec<Vec<String>> {
    let mut rdr = csv::Reader::from_path(path).expect("open csv");
    let header: Vec<String> = rdr
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    let idx: Vec<usize> = columns
        .iter()
        .map(|c| {
            header
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("no column {c}"))
        })
        .collect();
    rdr.records()
        .map(|r| {
            let r = r.expect("record");
            idx.iter().map(|&i| r[i].to_string()).collect()
        })
        .collect()
}

/// (outcome, payment_id, provider_txn_id) of a run's results.csv.
pub fn outcomes(report: &RunReport) -> Vec<(String, String, String)> {
    read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "provider_txn_id"],
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
    .collect()
}

/// A Python that can import `module`, and the PYTHONPATH it needs: the system's when it has
/// it, else `pip install --target /var/tmp/recon-test-pydeps <package>` once (so `cargo test`
/// works on a machine where nothing was installed by hand). `hint` says how to install it
/// by hand when neither works.
pub(crate) fn python_with(module: &str, package: &str, hint: &str) -> (PathBuf, Option<PathBuf>) {
    let has = |python: &str, path: Option<&Path>| {
        let mut c = Command::new(python);
        if let Some(p) = path {
            c.env("PYTHONPATH", p);
        }
        c.args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    for python in ["python3", "/usr/bin/python3"] {
        if has(python, None) {
            return (python.into(), None);
        }
    }
    let dir = PathBuf::from(
        std::env::var("RECON_TEST_PYDEPS").unwrap_or_else(|_| "/var/tmp/recon-test-pydeps".into()),
    );
    for python in ["python3", "/usr/bin/python3"] {
        if has(python, Some(&dir)) {
            return (python.into(), Some(dir));
        }
        let installed = Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg("--target")
            .arg(&dir)
            .arg(package)
            .status()
            .is_ok_and(|s| s.success());
        if installed && has(python, Some(&dir)) {
            return (python.into(), Some(dir));
        }
    }
    panic!("no Python with {module}: {hint} (or let pip reach PyPI)")
}
