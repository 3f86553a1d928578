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
    /// A fresh database on the test server ([`pg_admin_url`]).
    Postgres,
}

/// The PostgreSQL server tests create their databases on: `RECON_TEST_PG_URL` when it is set,
/// else the suite's own throwaway cluster ([`own_cluster`]), started by the first test that
/// needs it.
pub fn pg_admin_url() -> String {
    match pg_url_from_env() {
        Some(url) => url,
        None => own_cluster().url.clone(),
    }
}

/// `RECON_TEST_PG_URL`, when it is set and not empty.
pub fn pg_url_from_env() -> Option<String> {
    std::env::var("RECON_TEST_PG_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// Where the test server is, for messages: the URL actually used (password masked) and where
/// it came from.
pub fn pg_described() -> String {
    let origin = match pg_url_from_env() {
        Some(_) => "RECON_TEST_PG_URL".to_string(),
        None => format!(
            "the suite's own cluster in {}, RECON_TEST_PG_URL unset",
            own_cluster().dir.display()
        ),
    };
    format!(
        "PostgreSQL at {} ({origin})",
        recon::mask::url(&pg_admin_url())
    )
}

/// `psql`: the own cluster's, else the one on the PATH.
pub fn psql() -> PathBuf {
    match pg_url_from_env() {
        Some(_) => PathBuf::from("psql"),
        None => own_cluster().bin.join("psql"),
    }
}

/// Creates an empty database on the test server; returns (name, URL).
pub async fn fresh_pg_database() -> (String, String) {
    use sqlx::Connection;
    let admin = pg_admin_url();
    let name = format!("recon_t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", pg_described()));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{}: create database {name}: {e}", pg_described()));
    let _ = conn.close().await;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    (name.clone(), format!("{base}/{name}"))
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if let Some(name) = &self.pg_database {
            // Best effort, synchronously (Drop cannot await): psql is PostgreSQL's own client.
            let _ = std::process::Command::new(psql())
                .arg(pg_admin_url())
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .output();
        }
    }
}

/// The suite's own PostgreSQL: one throwaway cluster per test process, made with Debian's
/// `initdb` and `pg_ctl` (`/usr/lib/postgresql/<version>/bin`, the package `postgresql`
/// installed with apt-get when missing) in a folder under the system's temp dir, listening on
/// a free port of 127.0.0.1 with trust auth. Run as root, the server runs as the user
/// `postgres` (PostgreSQL refuses root). A watchdog process stops the cluster and removes its
/// folder when this process ends, however it ends (its stdin is a pipe only this process
/// holds); at a normal exit an `atexit` hook waits for that.
pub struct OwnCluster {
    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub url: String,
    /// The cluster's folder (data, socket, log).
    pub dir: PathBuf,
    /// The PostgreSQL programs used.
    pub bin: PathBuf,
}

/// The own cluster, started on first use (under the lock of a `OnceLock`: one per process).
pub fn own_cluster() -> &'static OwnCluster {
    static CLUSTER: std::sync::OnceLock<Result<OwnCluster, String>> = std::sync::OnceLock::new();
    match CLUSTER.get_or_init(start_own_cluster) {
        Ok(c) => c,
        Err(e) => panic!(
            "the suite's own PostgreSQL (RECON_TEST_PG_URL unset) did not start: {e}\n\
             (install Debian's postgresql, or set RECON_TEST_PG_URL to a server with trust auth \
             on which the tests may create databases)"
        ),
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has initdb, pg_ctl and postgres.
fn pg_bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            ["initdb", "pg_ctl", "postgres", "psql"]
                .iter()
                .all(|p| bin.join(p).exists())
                .then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Installs Debian's `package` with apt-get (updating the lists once if the first try fails),
/// for a test that needs a program the machine lacks; `why` names who needs it. Whether it
/// worked is for the caller to check (it looks for the program again).
pub fn apt_install(package: &str, why: &str) {
    eprintln!("tests: installing {package} (apt-get) for {why}");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !apt(&["install", "-y", "-qq", package]) {
        apt(&["update", "-qq"]);
        apt(&["install", "-y", "-qq", package]);
    }
}

/// [`pg_bin_dir`], installing Debian's `postgresql` with apt-get when there is none.
fn pg_bin_dir_or_install() -> Result<PathBuf, String> {
    if let Some(bin) = pg_bin_dir() {
        return Ok(bin);
    }
    apt_install("postgresql", "the suite's own PostgreSQL cluster");
    pg_bin_dir().ok_or_else(|| {
        "no /usr/lib/postgresql/<version>/bin with initdb and pg_ctl, and `apt-get install \
         postgresql` did not provide one"
            .to_string()
    })
}

/// A command that runs `program` as `user` (`runuser -u`), or as this process's user.
fn as_user(user: Option<&str>, program: &Path) -> Command {
    match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn start_own_cluster() -> Result<OwnCluster, String> {
    use std::os::unix::process::CommandExt as _;
    let bin = pg_bin_dir_or_install()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    // Root: the cluster belongs to `postgres` (Debian's package makes it), else `nobody`.
    let user = if root {
        let ids = |name: &str| {
            let c = std::ffi::CString::new(name).expect("no NUL");
            // SAFETY: getpwnam reads a NUL-terminated name; the record is copied out at once
            // (the tests' only getpwnam caller, under the OnceLock).
            let pw = unsafe { libc::getpwnam(c.as_ptr()) };
            // SAFETY: a non-null result points to a valid passwd record.
            (!pw.is_null()).then(|| unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
        };
        let (name, uid, gid) = ["postgres", "nobody"]
            .into_iter()
            .find_map(|n| ids(n).map(|(u, g)| (n, u, g)))
            .ok_or("running as root, and there is neither a user postgres nor nobody")?;
        Some((name, uid, gid))
    } else {
        None
    };
    let dir = std::env::temp_dir().join(format!(
        "recon-test-pg-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if let Some((_, uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
    }
    let user = user.map(|(n, _, _)| n);
    let data = dir.join("data");
    let log = dir.join("log");
    // Stops the cluster and removes the folder when this process ends (EOF on stdin).
    let stop = format!(
        "trap '' INT HUP TERM; cat >/dev/null; {runas}'{pg_ctl}' -D '{data}' stop -m immediate \
         >/dev/null 2>&1; rm -rf '{dir}'",
        runas = user
            .map(|u| format!("runuser -u {u} -- "))
            .unwrap_or_default(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let mut watchdog = Command::new("sh")
        .args(["-c", &stop])
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("watchdog: {e}"))?;
    let pipe = watchdog.stdin.take();
    *WATCHDOG.lock().unwrap_or_else(|e| e.into_inner()) = Some((watchdog, pipe));
    // SAFETY: registers a function without arguments that only touches WATCHDOG.
    unsafe { libc::atexit(stop_own_cluster) };

    let run = |mut c: Command, what: &str| -> Result<(), String> {
        let out = c
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{what}: {}\n{}{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    };
    let mut initdb = as_user(user, &bin.join("initdb"));
    initdb.arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]);
    run(initdb, "initdb")?;
    let mut last = String::new();
    // A free port can be taken between the probe and the start: try a few.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?
            .port();
        let mut start = as_user(user, &bin.join("pg_ctl"));
        // pg_ctl's output must not be a pipe: the server keeps it open (null, the log file).
        start
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "120", "-o"])
            .arg(format!(
                "-c listen_addresses=127.0.0.1 -p {port} -k {dir} -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
                dir = dir.display()
            ))
            .arg("start")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match run(start, "pg_ctl start") {
            Ok(()) => {
                let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
                eprintln!(
                    "tests: own PostgreSQL cluster at {url} in {} (RECON_TEST_PG_URL unset)",
                    dir.display()
                );
                return Ok(OwnCluster { url, dir, bin });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The own cluster's watchdog and the write end of its stdin.
type Watchdog = (std::process::Child, Option<std::process::ChildStdin>);
static WATCHDOG: std::sync::Mutex<Option<Watchdog>> = std::sync::Mutex::new(None);

/// At exit: closes the watchdog's stdin and waits until it stopped the cluster.
extern "C" fn stop_own_cluster() {
    let taken = WATCHDOG.lock().map(|mut w| w.take());
    if let Ok(Some((mut child, pipe))) = taken {
        drop(pipe);
        let _ = child.wait();
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

/// Copies the repository's `sample-data/` (with its sub-folders, `rules-next/`) to `to`.
pub fn copy_sample_data(to: &Path) {
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("folder") {
            let p = e.expect("entry").path();
            let dest = to.join(p.file_name().expect("name"));
            if p.is_dir() {
                copy_dir(&p, &dest);
            } else {
                std::fs::copy(&p, &dest).expect("copy");
            }
        }
    }
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-data"),
        to,
    );
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

/// A Python with openpyxl 3.1.5 (a spreadsheet library other than the one recon writes with):
/// a venv under the test target folder (`CARGO_TARGET_TMPDIR/venv-openpyxl`), made once with
/// `python3 -m venv` and `pip install openpyxl==3.1.5`. Fails, never skips, when it cannot be
/// made (pip needs PyPI).
pub fn openpyxl_python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("venv-openpyxl");
            let python = venv.join("bin").join("python");
            let ready = || {
                Command::new(&python)
                    .args([
                        "-c",
                        "import openpyxl, sys; sys.exit(openpyxl.__version__ != '3.1.5')",
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !ready() {
                let made = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(
                    made,
                    "python3 -m venv {} failed (hint: apt-get install python3-venv)",
                    venv.display()
                );
                let installed = Command::new(&python)
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        "openpyxl==3.1.5",
                    ])
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(
                    installed && ready(),
                    "pip install openpyxl==3.1.5 into {} failed (pip needs PyPI)",
                    venv.display()
                );
            }
            python
        })
        .clone()
}

/// A Decide sheet as a reviewer returns it: the report's columns and, per row, the case key,
/// the hidden check cell (`<key> <fingerprint>`), a decision and a note — what a spreadsheet
/// program saves.
pub fn write_decide_file(path: &Path, rows: &[(String, String, String)], note: &str) {
    let rows: Vec<[String; 5]> = rows
        .iter()
        .map(|(key, fingerprint, decision)| {
            [
                key.clone(),
                format!("{key} {fingerprint}"),
                decision.clone(),
                note.to_string(),
                String::new(),
            ]
        })
        .collect();
    write_decide_rows(path, &rows);
}

/// A Decide sheet of raw rows: `case`, `check`, `decision`, `note`, `reviewer` cells as given
/// (an empty one left out), written by a spreadsheet library as a spreadsheet program saves
/// them (control characters as `_xHHHH_`).
pub fn write_decide_rows(path: &Path, rows: &[[String; 5]]) {
    use recon::report::xlsx::{DECIDE_COLUMNS, DECIDE_SHEET};
    let col = |name: &str| DECIDE_COLUMNS.iter().position(|c| *c == name).expect(name) as u16;
    let mut wb = rust_xlsxwriter::Workbook::new();
    let ws = wb.add_worksheet();
    ws.set_name(DECIDE_SHEET).expect("sheet name");
    for (c, h) in DECIDE_COLUMNS.iter().enumerate() {
        ws.write_string(0, c as u16, *h).expect("header");
    }
    for (r, cells) in rows.iter().enumerate() {
        let r = r as u32 + 1;
        for (name, value) in ["case", "check", "decision", "note", "reviewer"]
            .into_iter()
            .zip(cells)
        {
            if !value.is_empty() {
                ws.write_string(r, col(name), value).expect("cell");
            }
        }
    }
    wb.save(path).expect("save the decision file");
}

/// A `[[status_api]]` block that only reads the stored webhook events in `hooks/`.
pub const HOOKS: &str = r#"[[status_api]]
name = "psp"
webhook_path = "hooks"
[status_api.pointers]
status = "/status"
reference = "/reference"
provider_payment_id = "/id"
amount = "/amount"
currency = "/currency"
event_time = "/at"
[status_api.statuses]
succeeded = ["PAID"]
failed = ["FAILED"]
pending = ["PROCESSING"]
not_found = ["UNKNOWN_PAYMENT"]
"#;

/// The sheet `title` of the workbook `file` as its header row and its other rows (calamine's
/// cells): what the tests that read a sheet by column name start from.
pub fn sheet_rows(file: &Path, title: &str) -> (Vec<String>, Vec<Vec<calamine::Data>>) {
    use calamine::Reader as _;
    let mut book: calamine::Xlsx<_> =
        calamine::open_workbook(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let range = book
        .worksheet_range(title)
        .unwrap_or_else(|e| panic!("{}: sheet {title}: {e}", file.display()));
    let mut rows = range.rows();
    let header = rows
        .next()
        .unwrap_or_else(|| panic!("{}: sheet {title} has no header", file.display()))
        .iter()
        .map(|c| c.to_string())
        .collect();
    (header, rows.map(<[calamine::Data]>::to_vec).collect())
}
