//! `recon pull` and `recon run --pull` (issue 14, part 1) against real servers on loopback,
//! started here: OpenSSH's `sshd` (Debian's `openssh-server`, installed when missing) with a
//! throwaway host key and user key per test, moto's S3 server (PyPI `moto[server]`, installed
//! into `/var/tmp/recon-test-pydeps` when missing) and a small Python HTTPS server with a CA
//! made per test by the `openssl` CLI, which can answer 500s and cut bodies on purpose.

use crate::report::{TestPki, free_port};
use crate::support::{
    ATTEMPTS_HEADER, PAYMENTS_HEADER, STATEMENT_HEADER, TestEnv, outcomes, psp_source, python_with,
};
use recon::pull::{PullReport, Status};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IBAN: &str = "DE89370400440532013000";
const DAYS: [&str; 4] = ["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"];

// ----------------------------------------------------------------------------------------
// Servers
// ----------------------------------------------------------------------------------------

/// Waits until something listens on `port`.
fn wait_listening(port: u16, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening on {port}: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process killed on drop.
struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Publishes `name` (under the served folder) with `content`.
    fn publish(&self, name: &str, content: &str) {
        let p = self.path("files").join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("files dir");
        std::fs::write(p, content).expect("publish");
    }
}

/// The HTTPS test server: serves `files/`, answers `If-None-Match` with 304, requires
/// `Authorization: Bearer <token>`, and follows `plan.json` ({"/path": ["500", "truncate",
/// "404"…]}: one planned answer per request, then normal service). Logs `METHOD path status`
/// lines to `requests.log`.
const HTTPS_SERVER: &str = r#"
import hashlib, http.server, json, os, ssl, sys, threading
root, port, cert, key, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def note(self, code):
        with open(os.path.join(root, "requests.log"), "a") as f:
            f.write("%s %s %d\n" % (self.command, self.path, code))
    def answer(self, code, body=b"", headers=()):
        self.note(code)
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.headers.get("Authorization") != "Bearer " + token:
            return self.answer(401)
        with lock:
            plan_path = os.path.join(root, "plan.json")
            plan = json.load(open(plan_path)) if os.path.exists(plan_path) else {}
            step = None
            if plan.get(self.path):
                step = plan[self.path].pop(0)
                json.dump(plan, open(plan_path, "w"))
        if step in ("500", "503", "429", "404"):
            return self.answer(int(step))
        f = os.path.join(root, "files", self.path.lstrip("/"))
        if not os.path.isfile(f):
            return self.answer(404)
        body = open(f, "rb").read()
        etag = '"%s"' % hashlib.sha256(body).hexdigest()[:16]
        if self.headers.get("If-None-Match") == etag:
            return self.answer(304, headers=[("ETag", etag)])
        if step == "truncate":
            self.note(200)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + 100))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.answer(200, body, [("ETag", etag)])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

const TOKEN: &str = "t0ken-for-tests";

struct Https {
    server: Server,
    pki: TestPki,
}

impl Https {
    fn start() -> Https {
        let pki = TestPki::loopback();
        let dir = tempfile::tempdir().expect("https dir");
        std::fs::create_dir_all(dir.path().join("files")).expect("files");
        std::fs::write(dir.path().join("server.py"), HTTPS_SERVER).expect("script");
        let port = free_port();
        let mut child = Command::new("python3")
            .arg(dir.path().join("server.py"))
            .arg(dir.path())
            .arg(port.to_string())
            .arg(pki.path("server.pem"))
            .arg(pki.path("server.key"))
            .arg(TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts");
        wait_listening(port, "the HTTPS test server", &mut child);
        Https {
            server: Server { child, port, dir },
            pki,
        }
    }

    /// Plans the next answers for `path`.
    fn plan(&self, path: &str, steps: &[&str]) {
        std::fs::write(
            self.server.path("plan.json"),
            serde_json::json!({ path: steps }).to_string(),
        )
        .expect("plan");
    }

    /// `METHOD path status` of every request so far.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(self.server.path("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/psp-{{date}}.csv", self.server.port)
    }

    fn remote_table(&self, extra: &str) -> String {
        format!(
            "[source.remote]\ntoken_env = \"RECON_TEST_PSP_TOKEN\"\nca_file = {:?}\n\
             retry_initial_ms = 50\n{extra}",
            self.pki.path("ca.pem").display().to_string()
        )
    }
}

/// `recon run --pull` of one day as the scheduler runs it (the binary, its own database URL
/// from the job file, the token in the environment).
fn run_pulling(env: &TestEnv, date: &str, as_of: &str, run_id: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["run", "--pull", "--date", date, "--as-of", as_of])
        .args(["--run-id", run_id])
        .arg("--config")
        .arg(&env.config_path)
        .env("RECON_TEST_PSP_TOKEN", TOKEN)
        .env_remove("RECON_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .output()
        .expect("recon runs")
}

/// moto's S3-compatible server on a free port.
fn moto() -> Server {
    static FOUND: std::sync::OnceLock<(PathBuf, Option<PathBuf>)> = std::sync::OnceLock::new();
    let (python, path) = FOUND
        .get_or_init(|| python_with("moto.server", "moto[server]", "pip install 'moto[server]'"));
    let dir = tempfile::tempdir().expect("moto dir");
    let port = free_port();
    let mut cmd = Command::new(python);
    if let Some(p) = path {
        cmd.env("PYTHONPATH", p);
    }
    let mut child = cmd
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto starts");
    wait_listening(port, "moto", &mut child);
    Server { child, port, dir }
}

/// `sshd`, installing Debian's openssh-server when it is missing.
fn sshd_binary() -> PathBuf {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let found = || {
                ["/usr/sbin/sshd", "/usr/local/sbin/sshd"]
                    .into_iter()
                    .map(PathBuf::from)
                    .find(|p| p.exists())
            };
            if let Some(p) = found() {
                return p;
            }
            crate::support::apt_install("openssh-server", "the SFTP tests");
            found().expect(
                "no sshd and apt-get could not install openssh-server: \
                 apt-get install -y openssh-server (the SFTP tests need it)",
            )
        })
        .clone()
}

fn keygen(path: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "recon-test", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(format!("{}.pub", path.display())).expect("public key")
}

struct Sshd {
    server: Server,
    /// The server's public key line.
    host_key: String,
    /// The user's private key file.
    user_key: PathBuf,
    user: String,
}

impl Sshd {
    fn start() -> Sshd {
        let sshd = sshd_binary();
        let dir = tempfile::tempdir().expect("sshd dir");
        let d = dir.path();
        let host_key = keygen(&d.join("host.key"));
        let user_pub = keygen(&d.join("user.key"));
        std::fs::write(d.join("authorized_keys"), user_pub).expect("authorized_keys");
        std::fs::create_dir_all(d.join("files")).expect("files");
        // Privilege separation needs its empty folder (Debian creates it at boot).
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {pid}\n\
                 AuthorizedKeysFile {ak}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nLogLevel ERROR\n",
                hk = d.join("host.key").display(),
                pid = d.join("sshd.pid").display(),
                ak = d.join("authorized_keys").display(),
            ),
        )
        .expect("sshd_config");
        let mut child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        wait_listening(port, "sshd", &mut child);
        let user = String::from_utf8(Command::new("id").arg("-un").output().expect("id").stdout)
            .expect("user")
            .trim()
            .to_string();
        Sshd {
            user_key: d.join("user.key"),
            server: Server { child, port, dir },
            host_key: host_key.trim().to_string(),
            user,
        }
    }

    fn url(&self) -> String {
        format!(
            "sftp://{}@127.0.0.1:{}{}/psp-{{date}}.csv",
            self.user,
            self.server.port,
            self.server.path("files").display()
        )
    }

    fn remote_table(&self, host_key: &str) -> String {
        format!(
            "[source.remote]\nhost_key = {host_key:?}\nprivate_key_file = {:?}\nretry_initial_ms = 50\nretry_budget_seconds = 5\n",
            self.user_key.display().to_string()
        )
    }
}

// ----------------------------------------------------------------------------------------
// Jobs and statements
// ----------------------------------------------------------------------------------------

/// A job whose provider source `psp` is published at `url` (daily, with control files).
fn job(url: &str, remote_table: &str) -> TestEnv {
    job_with(url, "", remote_table)
}

/// [`job`] with further keys of the `[[source]]` table (`source_keys`).
fn job_with(url: &str, source_keys: &str, remote_table: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write(
        "recon.toml",
        &format!(
            "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\n{}{remote_table}",
            psp_source(url, source_keys)
        ),
    );
    env
}

/// A provider file's text (header + rows) and its control file's text.
fn statement(rows: &str) -> (String, String) {
    let text = format!("{STATEMENT_HEADER}\n{rows}");
    let records = rows.lines().filter(|l| !l.is_empty()).count();
    let ctl = recon::sources::control_text(
        Some(records),
        Some(&recon::sources::sha256_hex(text.as_bytes())),
    );
    (text, ctl)
}

/// Publishes `psp-<day>.csv` with its control file via `publish`.
fn publish_day(publish: &dyn Fn(&str, &str), day: &str, rows: &str) {
    let (text, ctl) = statement(rows);
    publish(&format!("psp-{day}.csv"), &text);
    publish(&format!("psp-{day}.csv.ctl"), &ctl);
}

async fn pull(env: &TestEnv, from: &str, to: &str) -> PullReport {
    recon::pull::pull(
        &env.config(),
        from.parse().expect("from"),
        to.parse().expect("to"),
    )
    .await
    .expect("pull runs")
}

/// An UNKNOWN payment P-1 of 25.00 EUR started on the 10th at 08:00 UTC.
async fn unknown_payment(env: &TestEnv) {
    env.write(
        "payments.csv",
        &format!(
            "{PAYMENTS_HEADER}\nP-1,{IBAN},25.00,EUR,UNKNOWN,2026-11-10T08:00:00Z,2026-11-10T08:00:00Z,A-P-1,\n"
        ),
    );
    env.write(
        "attempts.csv",
        &format!("{ATTEMPTS_HEADER}\nA-P-1,P-1,2026-11-10T08:00:00Z,,UNKNOWN,,\n"),
    );
    env.import_files().await;
}

fn statuses(r: &PullReport) -> Vec<(String, Status)> {
    r.files
        .iter()
        .map(|f| {
            (
                f.remote.rsplit('/').next().unwrap_or("").to_string(),
                f.status,
            )
        })
        .collect()
}

/// Every file under `dir`, relative, sorted (temporary files included; the lock file left out).
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.file_name().is_some_and(|n| n != ".pull.lock") {
                out.push(p.strip_prefix(base).expect("prefix").display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn manifest(env: &TestEnv) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(env.path("inbox/psp/manifest.json")).expect("manifest"))
        .expect("json")
}

fn set_token() {
    // SAFETY: every test sets the same value; nothing reads it concurrently with a change.
    unsafe { std::env::set_var("RECON_TEST_PSP_TOKEN", TOKEN) };
}

// ----------------------------------------------------------------------------------------
// HTTPS
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn https_pull_is_atomic_hashed_in_the_manifest_and_a_second_pull_downloads_nothing() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    publish_day(
        &publish,
        "2026-11-10",
        &format!("T-1,P-9,{IBAN},10.00,EUR,2026-11-10T09:00:00Z,PAYMENT\n"),
    );
    let env = job(&https.url(), &https.remote_table(""));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(
        statuses(&r),
        vec![
            ("psp-2026-11-10.csv".into(), Status::New),
            ("psp-2026-11-10.csv.ctl".into(), Status::New)
        ],
        "{r:?}"
    );
    assert!(r.complete());
    assert_eq!(
        tree(&env.path("inbox/psp")),
        vec![
            "manifest.json",
            "psp-2026-11-10.csv",
            "psp-2026-11-10.csv.ctl"
        ]
    );
    let (text, _) = statement(&format!(
        "T-1,P-9,{IBAN},10.00,EUR,2026-11-10T09:00:00Z,PAYMENT\n"
    ));
    assert_eq!(
        std::fs::read_to_string(env.path("inbox/psp/psp-2026-11-10.csv")).expect("copy"),
        text
    );
    let m = manifest(&env);
    let first = &m["files"][0];
    assert_eq!(
        first["remote"],
        format!("https://127.0.0.1:{}/psp-2026-11-10.csv", https.server.port)
    );
    assert_eq!(first["local"], "psp-2026-11-10.csv");
    assert_eq!(first["version"], 1);
    assert_eq!(first["size"], text.len());
    assert_eq!(first["sha256"], recon::sources::sha256_hex(text.as_bytes()));
    assert!(
        first["etag"].as_str().is_some_and(|e| e.starts_with('"')),
        "{m}"
    );
    assert!(
        first["pulled_at"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{m}"
    );
    let before = std::fs::read(env.path("inbox/psp/manifest.json")).expect("manifest");

    // Pulling again: the server answers 304 to both conditional GETs; nothing is written.
    let again = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(again.count(Status::Unchanged), 2, "{again:?}");
    let log = https.requests();
    assert_eq!(
        log[2..].to_vec(),
        vec![
            "GET /psp-2026-11-10.csv 304".to_string(),
            "GET /psp-2026-11-10.csv.ctl 304".to_string()
        ],
        "{log:?}"
    );
    assert_eq!(
        std::fs::read(env.path("inbox/psp/manifest.json")).expect("manifest"),
        before
    );
}

#[tokio::test]
async fn https_transient_500s_are_retried_with_backoff_then_the_file_arrives() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    publish_day(&publish, "2026-11-10", "");
    https.plan("/psp-2026-11-10.csv", &["500", "503", "429"]);
    let env = job(&https.url(), &https.remote_table(""));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert!(r.complete(), "{r:?}");
    assert_eq!(r.files[0].status, Status::New);
    assert_eq!(r.files[0].retries, 3);
    assert!(env.path("inbox/psp/psp-2026-11-10.csv").exists());
}

#[tokio::test]
async fn https_budget_exhausted_leaves_no_partial_file_the_day_incomplete_and_the_run_says_so() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    for d in DAYS {
        publish_day(&publish, d, "");
    }
    // The 11th's body is always cut short (Content-Length promises more than is sent).
    https.plan("/psp-2026-11-11.csv", &["truncate"; 200]);
    let env = job(
        &https.url(),
        &https.remote_table("retry_budget_seconds = 2\n"),
    );
    unknown_payment(&env).await;
    let started = Instant::now();
    let r = pull(&env, DAYS[0], DAYS[3]).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "budget not kept"
    );
    assert!(!r.complete());
    let failed: Vec<_> = r
        .files
        .iter()
        .filter(|f| f.status == Status::Failed)
        .collect();
    assert_eq!(failed.len(), 1, "{r:?}");
    assert_eq!(failed[0].day.as_deref(), Some("2026-11-11"));
    assert!(failed[0].retries >= 2, "{r:?}");
    assert!(
        failed[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("retry_budget_seconds")),
        "{r:?}"
    );
    // Nothing partial where a run would read it (no temp file either), and the other days
    // are there.
    let files = tree(&env.path("inbox/psp"));
    assert!(!files.iter().any(|f| f.contains("2026-11-11")), "{files:?}");
    assert!(!files.iter().any(|f| f.contains(".part")), "{files:?}");
    assert!(
        files.contains(&"psp-2026-11-12.csv".to_string()),
        "{files:?}"
    );
    assert_eq!(manifest(&env)["failed"][0]["day"], "2026-11-11");

    // The run: P-1 has no line, but its horizon touches the 11th, which the pull could not
    // fetch: AWAITING_EVIDENCE, never RESOLVED_FAILED, and the summary says why.
    let run = env.run(DAYS[0], "2026-11-15T02:00:00Z", false, "r1").await;
    assert_eq!(
        outcomes(&run),
        vec![("AWAITING_EVIDENCE".into(), "P-1".into(), String::new())]
    );
    assert!(
        run.summary
            .warnings
            .iter()
            .any(|w| w.contains("could not fetch") && w.contains("2026-11-11")),
        "{:?}",
        run.summary.warnings
    );

    // Once the server behaves, the next pull fetches the 11th and the failure is cleared:
    // now every day is complete and P-1 resolves FAILED (the check above could fail).
    https.plan("/psp-2026-11-11.csv", &[]);
    let r = pull(&env, DAYS[0], DAYS[3]).await;
    assert!(r.complete(), "{r:?}");
    assert_eq!(manifest(&env)["failed"], serde_json::json!([]));
    let run = env.run(DAYS[0], "2026-11-15T02:00:00Z", false, "r2").await;
    assert_eq!(
        outcomes(&run),
        vec![("RESOLVED_FAILED".into(), "P-1".into(), String::new())]
    );
}

#[tokio::test]
async fn https_a_missing_remote_file_is_missing_never_an_empty_file() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    for d in [DAYS[0], DAYS[2], DAYS[3]] {
        publish_day(&publish, d, "");
    }
    let env = job(&https.url(), &https.remote_table(""));
    unknown_payment(&env).await;
    let r = pull(&env, DAYS[0], DAYS[3]).await;
    assert!(r.complete(), "a missing file is not a failed pull: {r:?}");
    assert_eq!(
        r.files
            .iter()
            .filter(|f| f.status == Status::Missing)
            .count(),
        1
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("psp-2026-11-11.csv") && w.contains("missing")),
        "{:?}",
        r.warnings
    );
    assert!(!env.path("inbox/psp/psp-2026-11-11.csv").exists());
    let run = env.run(DAYS[0], "2026-11-15T02:00:00Z", false, "r").await;
    assert_eq!(
        outcomes(&run),
        vec![("AWAITING_EVIDENCE".into(), "P-1".into(), String::new())]
    );
    assert!(
        run.summary
            .warnings
            .iter()
            .any(|w| w.contains("no file for 2026-11-11")),
        "{:?}",
        run.summary.warnings
    );
}

#[tokio::test]
async fn https_a_server_whose_certificate_is_not_trusted_is_refused_without_retrying() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    publish_day(&publish, "2026-11-10", "");
    let env = job(
        &https.url(),
        "[source.remote]\ntoken_env = \"RECON_TEST_PSP_TOKEN\"\nretry_initial_ms = 50\n",
    );
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert!(!r.complete());
    assert_eq!(r.files[0].status, Status::Failed);
    assert_eq!(r.files[0].retries, 0, "{r:?}");
    assert!(https.requests().is_empty(), "no request got through TLS");
    assert!(!env.path("inbox/psp/psp-2026-11-10.csv").exists());
}

// ----------------------------------------------------------------------------------------
// SFTP
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn sftp_pulls_with_the_pinned_host_key_and_keeps_a_changed_file_beside_the_first() {
    let sshd = Sshd::start();
    let publish = |n: &str, t: &str| sshd.server.publish(n, t);
    let first = format!("T-1,P-9,{IBAN},10.00,EUR,2026-11-10T09:00:00Z,PAYMENT\n");
    publish_day(&publish, "2026-11-10", &first);
    let env = job(&sshd.url(), &sshd.remote_table(&sshd.host_key));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert!(r.complete(), "{r:?}");
    assert_eq!(r.count(Status::New), 2, "{r:?}");
    let again = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(again.count(Status::Unchanged), 2, "{again:?}");
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);

    // The provider re-publishes the day with one more line (a changed file, new mtime).
    std::thread::sleep(Duration::from_millis(1100));
    let more = format!("{first}T-2,P-8,{IBAN},11.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n");
    publish_day(&publish, "2026-11-10", &more);
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(
        statuses(&r),
        vec![
            ("psp-2026-11-10.csv".into(), Status::Changed),
            ("psp-2026-11-10.csv.ctl".into(), Status::New)
        ],
        "{r:?}"
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("changed since it was pulled")
                && w.contains("psp-2026-11-10.csv.v2")),
        "{:?}",
        r.warnings
    );
    assert_eq!(
        tree(&env.path("inbox/psp")),
        vec![
            "manifest.json",
            "psp-2026-11-10.csv",
            "psp-2026-11-10.csv.ctl",
            "psp-2026-11-10.csv.v2",
            "psp-2026-11-10.csv.v2.ctl"
        ]
    );
    let m = manifest(&env);
    assert_eq!(m["files"][2]["version"], 2);
    assert!(m["files"][0]["mtime"].as_str().is_some(), "{m}");

    // The run reads both versions: T-1 counts once (re-delivery), T-2 is new.
    env.import("", "").await;
    let run = env
        .run("2026-11-10", "2026-11-12T02:00:00Z", true, "r")
        .await;
    let inputs: Vec<(&str, usize, usize)> = run
        .summary
        .inputs
        .iter()
        .map(|i| {
            (
                i.path.rsplit('/').next().unwrap_or(""),
                i.lines,
                i.duplicates,
            )
        })
        .collect();
    assert_eq!(
        inputs,
        vec![
            ("psp-2026-11-10.csv", 1, 0),
            ("psp-2026-11-10.csv.v2", 1, 1)
        ]
    );
}

#[tokio::test]
async fn sftp_an_unknown_or_changed_host_key_is_refused_before_logging_in() {
    let sshd = Sshd::start();
    let publish = |n: &str, t: &str| sshd.server.publish(n, t);
    publish_day(&publish, "2026-11-10", "");
    publish_day(&publish, "2026-11-11", "");
    let other = keygen(&sshd.server.path("other.key"));
    let env = job(&sshd.url(), &sshd.remote_table(other.trim()));
    let r = pull(&env, "2026-11-10", "2026-11-11").await;
    assert!(!r.complete());
    assert_eq!(r.count(Status::Failed), 2, "{r:?}");
    let e = r.files[0].error.as_deref().unwrap_or("");
    assert!(
        e.contains("refusing to connect") && e.contains("SHA256:"),
        "{e}"
    );
    assert_eq!(r.files[0].retries, 0);
    assert!(
        r.files[1]
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("not tried"))
    );
    assert_eq!(tree(&env.path("inbox/psp")), vec!["manifest.json"]);

    // And a job without a pinned key does not load at all.
    let env = job(
        &sshd.url(),
        &format!(
            "[source.remote]\nprivate_key_file = {:?}\n",
            sshd.user_key.display().to_string()
        ),
    );
    let err = recon::config::Config::load(&env.config_path).expect_err("no host_key");
    assert!(
        format!("{err:#}").contains("source[0].remote.host_key"),
        "{err:#}"
    );
}

// ----------------------------------------------------------------------------------------
// S3 (moto)
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn s3_pull_from_an_s3_compatible_server_is_idempotent_and_keeps_changes_beside() {
    let s3 = moto();
    let base = format!("http://127.0.0.1:{}", s3.port);
    let http = reqwest::Client::new();
    // Objects are written signed (moto refuses an unsigned overwrite).
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name("statements")
        .with_region("us-east-1")
        .with_endpoint(&base)
        .with_allow_http(true)
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .build()
        .expect("store");
    let put = |key: String, body: String| {
        let store = &store;
        async move {
            use object_store::ObjectStoreExt as _;
            store
                .put(
                    &object_store::path::Path::from(key),
                    body.into_bytes().into(),
                )
                .await
                .expect("put");
        }
    };
    let r = http
        .put(format!("{base}/statements"))
        .send()
        .await
        .expect("bucket");
    assert!(r.status().is_success(), "{}", r.status());
    let (text, ctl) = statement("");
    put("out/psp-2026-11-10.csv".into(), text.clone()).await;
    put("out/psp-2026-11-10.csv.ctl".into(), ctl).await;
    // SAFETY: as set_token.
    unsafe {
        std::env::set_var("RECON_TEST_S3_KEY", "testing");
        std::env::set_var("RECON_TEST_S3_SECRET", "testing");
    }
    let env = job(
        "s3://statements/out/psp-{date}.csv",
        &format!(
            "[source.remote]\nendpoint = {base:?}\nregion = \"us-east-1\"\n\
             access_key_id_env = \"RECON_TEST_S3_KEY\"\nsecret_access_key_env = \"RECON_TEST_S3_SECRET\"\n\
             retry_initial_ms = 50\nretry_budget_seconds = 3\n"
        ),
    );
    let r = pull(&env, "2026-11-10", "2026-11-11").await;
    assert_eq!(
        statuses(&r),
        vec![
            ("psp-2026-11-10.csv".into(), Status::New),
            ("psp-2026-11-10.csv.ctl".into(), Status::New),
            ("psp-2026-11-11.csv".into(), Status::Missing),
        ],
        "{r:?}"
    );
    assert_eq!(
        manifest(&env)["files"][0]["remote"],
        "s3://statements/out/psp-2026-11-10.csv"
    );
    assert!(manifest(&env)["files"][0]["etag"].as_str().is_some());
    let again = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(again.count(Status::Unchanged), 2, "{again:?}");
    put(
        "out/psp-2026-11-10.csv".into(),
        format!("{text}T-1,P-9,{IBAN},10.00,EUR,2026-11-10T09:00:00Z,PAYMENT\n"),
    )
    .await;
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(r.files[0].status, Status::Changed, "{r:?}");
    assert!(env.path("inbox/psp/psp-2026-11-10.csv.v2").exists());
}

/// A TLS front for a plain TCP server on loopback (`target`), with the certificate of a
/// [`TestPki`]: each connection is unwrapped and piped through; `handshakes.log` gets `ok` or
/// `refused` per connection.
const TLS_PROXY: &str = r#"
import os, socket, ssl, sys, threading
root, port, target, cert, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.create_server(("127.0.0.1", port))
def note(what):
    with open(os.path.join(root, "handshakes.log"), "a") as f:
        f.write(what + "\n")
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def handle(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
    except (ssl.SSLError, OSError):
        note("refused")
        c.close()
        return
    note("ok")
    u = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(t, u), daemon=True).start()
    pipe(u, t)
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"#;

/// moto behind [`TLS_PROXY`]: the endpoint `https://127.0.0.1:<port>`.
fn tls_front(target: u16, pki: &TestPki) -> Server {
    let dir = tempfile::tempdir().expect("proxy dir");
    std::fs::write(dir.path().join("proxy.py"), TLS_PROXY).expect("script");
    let port = free_port();
    let mut child = Command::new("python3")
        .arg(dir.path().join("proxy.py"))
        .arg(dir.path())
        .arg(port.to_string())
        .arg(target.to_string())
        .arg(pki.path("server.pem"))
        .arg(pki.path("server.key"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 starts");
    wait_listening(port, "the TLS proxy", &mut child);
    Server { child, port, dir }
}

/// Issue 30 point 8: an S3 endpoint behind a company CA is trusted through `remote.ca_file`;
/// without it the endpoint is refused as untrusted, without retrying.
#[tokio::test]
async fn s3_over_https_trusts_ca_file_and_refuses_an_untrusted_endpoint_without_retrying() {
    let s3 = moto();
    let base = format!("http://127.0.0.1:{}", s3.port);
    let r = reqwest::Client::new()
        .put(format!("{base}/statements"))
        .send()
        .await
        .expect("bucket");
    assert!(r.status().is_success(), "{}", r.status());
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name("statements")
        .with_region("us-east-1")
        .with_endpoint(&base)
        .with_allow_http(true)
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .build()
        .expect("store");
    let (text, ctl) = statement("");
    for (key, body) in [
        ("out/psp-2026-11-10.csv", text),
        ("out/psp-2026-11-10.csv.ctl", ctl),
    ] {
        use object_store::ObjectStoreExt as _;
        store
            .put(
                &object_store::path::Path::from(key),
                body.into_bytes().into(),
            )
            .await
            .expect("put");
    }
    let pki = TestPki::loopback();
    let tls = tls_front(s3.port, &pki);
    // SAFETY: as set_token.
    unsafe {
        std::env::set_var("RECON_TEST_S3_KEY", "testing");
        std::env::set_var("RECON_TEST_S3_SECRET", "testing");
    }
    let table = |ca: &str| {
        format!(
            "[source.remote]\nendpoint = \"https://127.0.0.1:{}\"\n{ca}\
             access_key_id_env = \"RECON_TEST_S3_KEY\"\nsecret_access_key_env = \"RECON_TEST_S3_SECRET\"\n\
             retry_initial_ms = 50\nretry_budget_seconds = 3\n",
            tls.port
        )
    };
    let ca = format!("ca_file = {:?}\n", pki.path("ca.pem").display().to_string());
    let env = job("s3://statements/out/psp-{date}.csv", &table(&ca));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(
        statuses(&r),
        vec![
            ("psp-2026-11-10.csv".into(), Status::New),
            ("psp-2026-11-10.csv.ctl".into(), Status::New),
        ],
        "{r:?}"
    );
    let handshakes_ok = || {
        std::fs::read_to_string(tls.path("handshakes.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "ok")
            .count()
    };
    let trusted = handshakes_ok();
    assert!(trusted >= 1, "the pull went through the TLS front");
    // Without ca_file: not trusted, not retried, nothing written, no request through TLS.
    let env = job("s3://statements/out/psp-{date}.csv", &table(""));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(r.files[0].status, Status::Failed, "{r:?}");
    assert_eq!(r.files[0].retries, 0, "{r:?}");
    assert!(!env.path("inbox/psp/psp-2026-11-10.csv").exists());
    assert_eq!(handshakes_ok(), trusted);
}

// ----------------------------------------------------------------------------------------
// recon run --pull, end to end (the binary)
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn run_pull_fetches_then_runs_on_the_inbox_with_inputs_hashed_in_the_summary() {
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    let rows = format!("T-1,P-1,{IBAN},25.00,EUR,2026-11-10T08:05:00Z,PAYMENT\n");
    publish_day(&publish, "2026-11-10", &rows);
    let env = job(&https.url(), &https.remote_table(""));
    unknown_payment(&env).await;
    let out = run_pulling(&env, "2026-11-10", "2026-11-11T02:00:00Z", "nightly");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("pull: 2 new"), "{stdout}");
    assert!(!stderr.contains(TOKEN) && !stdout.contains(TOKEN));
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(env.path("out/nightly/summary.json")).expect("summary"),
    )
    .expect("json");
    let input = &summary["inputs"][0];
    assert!(
        input["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("inbox/psp/psp-2026-11-10.csv")),
        "{summary}"
    );
    let (text, _) = statement(&rows);
    assert_eq!(input["sha256"], recon::sources::sha256_hex(text.as_bytes()));
    assert_eq!(
        input["sha256"],
        manifest(&env)["files"][0]["sha256"],
        "the run read exactly what the pull fetched"
    );
    let results = crate::support::read_columns(
        &env.path("out/nightly/results.csv"),
        &["outcome", "payment_id"],
    );
    assert_eq!(
        results,
        vec![vec!["RESOLVED_SUCCEEDED".to_string(), "P-1".into()]]
    );

    // A pull that fails: the run still runs on what is local, and exits 9.
    https.plan("/psp-2026-11-11.csv", &["500"; 200]);
    publish_day(&publish, "2026-11-11", "");
    std::fs::write(
        &env.config_path,
        std::fs::read_to_string(&env.config_path)
            .expect("cfg")
            .replace(
                "retry_initial_ms = 50\n",
                "retry_initial_ms = 50\nretry_budget_seconds = 1\n",
            ),
    )
    .expect("cfg");
    let out = run_pulling(&env, "2026-11-11", "2026-11-12T02:00:00Z", "nightly2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::PULL_INCOMPLETE),
        "{stderr}"
    );
    assert!(stderr.contains("could not pull"), "{stderr}");
    assert!(
        stderr.contains("the pull could not fetch every file (exit code 9)"),
        "{stderr}"
    );
    let summary = std::fs::read_to_string(env.path("out/nightly2/summary.json")).expect("summary");
    assert!(summary.contains("could not fetch"), "{summary}");
}

// ----------------------------------------------------------------------------------------
// Configuration
// ----------------------------------------------------------------------------------------

#[test]
fn remote_paths_are_checked_before_anything_is_fetched() {
    for (url, table, want) in [
        ("http://h/x-{date}.csv", "", "plain http is not allowed"),
        (
            "s3://b/x-{date}.csv",
            "[source.remote]\nendpoint = \"http://s3.example.com\"\n",
            "plain http only to a loopback host",
        ),
        (
            "https://u:p@h/x-{date}.csv",
            "",
            "must not carry credentials",
        ),
        ("ftp://h/x-{date}.csv", "", "source[0].path"),
        ("sftp://h/x-{date}.csv", "", "names no user"),
        (
            "sftp://u@h/x-{date}.csv",
            "[source.remote]\nhost_key = \"ssh-ed25519 AAAA\"\nprivate_key_env = \"K\"\n",
            "source[0].remote.host_key",
        ),
        (
            "https://h/x-{date}.csv",
            "[source.remote]\nhost_key = \"x\"\n",
            "does not apply to https",
        ),
        (
            "https://h/x-{date}.csv",
            "[source.remote]\ncolour = 1\n",
            "colour",
        ),
        (
            "statement-{date}.csv",
            "[source.remote]\ntoken_env = \"T\"\n",
            "needs a remote path",
        ),
    ] {
        let env = job(url, table);
        let err = recon::config::Config::load(&env.config_path).expect_err(url);
        let text = format!("{err:#}");
        assert!(text.contains(want), "{url}: {text}");
        assert!(!text.contains("u:p@"), "{text}");
        assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG, "{text}");
    }
}

#[tokio::test]
async fn https_a_refused_token_is_not_retried_and_an_unset_variable_stops_before_any_request() {
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    publish_day(&publish, "2026-11-10", "");
    let table = |var: &str| https.remote_table("").replace("RECON_TEST_PSP_TOKEN", var);
    // SAFETY: as set_token (a variable only this test uses).
    unsafe { std::env::set_var("RECON_TEST_WRONG_TOKEN", "not-the-token") };
    let env = job(&https.url(), &table("RECON_TEST_WRONG_TOKEN"));
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(r.files[0].status, Status::Failed, "{r:?}");
    assert_eq!(r.files[0].retries, 0);
    let e = r.files[0].error.as_deref().unwrap_or("");
    assert!(e.contains("401") && !e.contains("not-the-token"), "{e}");
    // The control file is not asked for after its data file failed.
    assert_eq!(https.requests(), vec!["GET /psp-2026-11-10.csv 401"]);

    let env = job(&https.url(), &table("RECON_TEST_UNSET_TOKEN"));
    let err = recon::pull::pull(
        &env.config(),
        "2026-11-10".parse().expect("day"),
        "2026-11-10".parse().expect("day"),
    )
    .await
    .expect_err("unset variable");
    let text = format!("{err:#}");
    assert!(
        text.contains("RECON_TEST_UNSET_TOKEN") && text.contains("remote.token_env"),
        "{text}"
    );
    assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG);
    assert_eq!(https.requests().len(), 1, "no request without credentials");
}

#[tokio::test]
async fn recon_pull_exits_6_while_another_pull_of_the_source_runs_and_9_when_a_file_failed() {
    use std::os::fd::AsRawFd as _;
    set_token();
    let https = Https::start();
    let publish = |n: &str, t: &str| https.server.publish(n, t);
    publish_day(&publish, "2026-11-10", "");
    https.plan("/psp-2026-11-10.csv", &["500"; 200]);
    let env = job(
        &https.url(),
        &https.remote_table("retry_budget_seconds = 1\n"),
    );
    let recon_pull = || {
        Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(["pull", "--date", "2026-11-10", "--config"])
            .arg(&env.config_path)
            .env("RECON_TEST_PSP_TOKEN", TOKEN)
            .output()
            .expect("recon runs")
    };
    std::fs::create_dir_all(env.path("inbox/psp")).expect("inbox");
    let held = std::fs::File::create(env.path("inbox/psp/.pull.lock")).expect("lock file");
    // SAFETY: flock on a descriptor this test owns.
    let locked = unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(locked, 0);
    let out = recon_pull();
    assert_eq!(out.status.code(), Some(recon::exit::LOCKED), "{out:?}");
    assert!(https.requests().is_empty());
    drop(held);
    let out = recon_pull();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::PULL_INCOMPLETE),
        "{out:?}"
    );
    assert!(stdout.contains("1 failed"), "{stdout}");
}

#[tokio::test]
async fn a_fixed_remote_file_missing_at_the_server_covers_nothing_and_the_run_still_runs() {
    set_token();
    let https = Https::start();
    let url = format!("https://127.0.0.1:{}/all.csv", https.server.port);
    let env = job_with(
        &url,
        "complete_from = \"2026-11-01\"\ncomplete_to = \"2026-11-30\"\n",
        &https.remote_table(""),
    );
    unknown_payment(&env).await;
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(statuses(&r), vec![("all.csv".into(), Status::Missing)]);
    let run = env
        .run("2026-11-10", "2026-12-05T00:00:00Z", true, "r")
        .await;
    assert_eq!(
        outcomes(&run),
        vec![("AWAITING_EVIDENCE".into(), "P-1".into(), String::new())]
    );
    assert!(
        run.summary
            .warnings
            .iter()
            .any(|w| w.contains("no pulled copy")),
        "{:?}",
        run.summary.warnings
    );
    // Once published and pulled (with its control file), the month is complete.
    let (text, ctl) = statement("");
    https.server.publish("all.csv", &text);
    https.server.publish("all.csv.ctl", &ctl);
    let r = pull(&env, "2026-11-10", "2026-11-10").await;
    assert_eq!(r.count(Status::New), 2, "{r:?}");
    let run = env
        .run("2026-11-10", "2026-12-05T00:00:00Z", true, "r2")
        .await;
    assert_eq!(
        outcomes(&run),
        vec![("RESOLVED_FAILED".into(), "P-1".into(), String::new())]
    );
}
