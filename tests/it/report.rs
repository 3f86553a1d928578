//! Reports and the email alert (issue 5): XLSX read back with calamine, the HTML report, the
//! email received by a real SMTP server (Debian's python3-aiosmtpd on loopback; plain, STARTTLS
//! and implicit TLS, with a throwaway CA made per test by the `openssl` CLI), the outbox when
//! SMTP is down, refuses or fails certificate verification, and hostile statement text in
//! every format.
//!
//! Snapshots are insta's, in `tests/snapshots/report/`. A changed output fails the test and
//! leaves `<name>.snap.new` beside the snapshot (not under CI); when the change is intended,
//! accept it with `INSTA_UPDATE=always cargo test --test it report` (or `cargo insta review`)
//! and read the diff before committing it.

use crate::support::{Settings, TestEnv, read_columns};
use calamine::{Data, Reader, Xlsx, open_workbook};
use recon::report::outbox::AlertStatus;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IBAN: &str = "DE89370400440532013000";
/// A 34-character account (the IBAN maximum).
const LONG_ACCOUNT: &str = "GB33BUKB20201555555555123456789012";
const FR_ACCOUNT: &str = "FR1420041010050500013M02606";
const HOSTILE_FORMULA: &str = "=HYPERLINK(\"http://evil.example\",\"click\")";
const HOSTILE_SCRIPT: &str = "<script>alert(1)</script>";

// ----------------------------------------------------------------------------------------
// A real SMTP server
// ----------------------------------------------------------------------------------------

/// A Python that can run aiosmtpd, and the PYTHONPATH it needs: Debian's `python3-aiosmtpd`
/// when installed (CI installs it), else the PyPI package, installed once into
/// `/var/tmp/recon-test-pydeps` by the first test that needs it, so `cargo test` works on a
/// machine where nothing was installed by hand.
fn aiosmtpd() -> &'static (PathBuf, Option<PathBuf>) {
    static FOUND: std::sync::OnceLock<(PathBuf, Option<PathBuf>)> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        crate::support::python_with(
            "aiosmtpd",
            "aiosmtpd==1.4.6",
            "install Debian's python3-aiosmtpd (apt-get install -y python3-aiosmtpd)",
        )
    })
}

/// aiosmtpd writing every message it accepts into a Maildir; killed on drop.
pub(crate) struct SmtpServer {
    child: Child,
    pub(crate) port: u16,
    maildir: tempfile::TempDir,
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

impl SmtpServer {
    pub(crate) fn start() -> SmtpServer {
        SmtpServer::start_with(free_port(), &[])
    }

    /// Starts on `port` with extra aiosmtpd options (e.g. `-s 100` to refuse big messages).
    fn start_with(port: u16, options: &[&str]) -> SmtpServer {
        let maildir = tempfile::tempdir().expect("maildir");
        let (python, path) = aiosmtpd();
        let mut cmd = Command::new(python);
        if let Some(p) = path {
            cmd.env("PYTHONPATH", p);
        }
        let child = cmd
            .args(["-m", "aiosmtpd", "-n"])
            .args(options)
            .args(["-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            // Python's Maildir creates its tmp/new/cur only for a folder that does not exist.
            .arg(maildir.path().join("mail"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("aiosmtpd starts");
        let server = SmtpServer {
            child,
            port,
            maildir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "aiosmtpd did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// The raw messages received so far, in arrival order.
    pub(crate) fn messages(&self) -> Vec<String> {
        let dir = self.maildir.path().join("mail/new");
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| {
                        let p = e.path();
                        (e.metadata().and_then(|m| m.modified()).expect("mtime"), p)
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
            .into_iter()
            .map(|(_, p)| std::fs::read_to_string(p).expect("message"))
            .collect()
    }
}

/// How an aiosmtpd test server speaks TLS.
#[derive(Debug, Clone, Copy)]
enum ServerTls {
    /// Offers STARTTLS and refuses mail before it (aiosmtpd's require_starttls default).
    StartTls,
    /// TLS from the first byte (SMTPS).
    Implicit,
}

impl SmtpServer {
    /// Starts a TLS server presenting `pki`'s server certificate.
    fn start_tls(pki: &TestPki, tls: ServerTls) -> SmtpServer {
        let (cert_opt, key_opt) = match tls {
            ServerTls::StartTls => ("--tlscert", "--tlskey"),
            ServerTls::Implicit => ("--smtpscert", "--smtpskey"),
        };
        let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
        SmtpServer::start_with(
            free_port(),
            &[
                cert_opt,
                cert.to_str().expect("utf-8 path"),
                key_opt,
                key.to_str().expect("utf-8 path"),
            ],
        )
    }
}

/// A throwaway CA and a server certificate it signed, made per test with the `openssl` CLI.
/// rustls accepts only X.509 v3 with the name in subjectAltName and a CA marked
/// basicConstraints CA:TRUE, so all of that is explicit.
pub(crate) struct TestPki {
    dir: tempfile::TempDir,
}

impl TestPki {
    /// A CA (`ca.pem`) and a server certificate (`server.pem`, `server.key`) for `names`,
    /// subjectAltName entries such as `IP:127.0.0.1`.
    pub(crate) fn new(names: &[&str]) -> TestPki {
        let pki = TestPki {
            dir: tempfile::tempdir().expect("pki dir"),
        };
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        pki.openssl(&format!(
            "req -x509 {key} -keyout ca.key -out ca.pem -days 2 -subj /CN=recon-test-CA \
             -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
        ));
        pki.openssl(&format!(
            "req {key} -keyout server.key -out server.csr -subj /CN=recon-test-server"
        ));
        std::fs::write(
            pki.path("server.ext"),
            format!(
                "basicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=serverAuth\n\
                 subjectAltName={}\n",
                names.join(",")
            ),
        )
        .expect("server.ext");
        pki.openssl(
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 \
             -extfile server.ext -out server.pem",
        );
        pki
    }

    /// For the names a loopback test server answers to.
    pub(crate) fn loopback() -> TestPki {
        TestPki::new(&["IP:127.0.0.1", "DNS:localhost"])
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `openssl` in the folder; `args` are split at whitespace.
    fn openssl(&self, args: &str) {
        let out = Command::new("openssl")
            .current_dir(self.dir.path())
            .args(args.split_whitespace())
            .output()
            .expect("the openssl CLI is installed");
        assert!(
            out.status.success(),
            "openssl {args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `ca_file = "…"` trusting this CA.
    fn ca_file_key(&self) -> String {
        format!(
            "ca_file = {:?}\n",
            self.path("ca.pem").display().to_string()
        )
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ----------------------------------------------------------------------------------------
// A minimal MIME reader (enough for what lettre writes)
// ----------------------------------------------------------------------------------------

/// One leaf part: its headers (lower-case names) and decoded body.
#[derive(Debug)]
pub(crate) struct Part {
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Part {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("utf-8 body")
    }
    /// The decoded body.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.body
    }
}

/// The decoded body of the part of type `mime` (`text/plain`, `text/html`) of the email a run
/// wrote into `out_dir` (the file transport's `email.eml`).
pub(crate) fn email_body(out_dir: &std::path::Path, mime: &str) -> String {
    let eml = std::fs::read_to_string(out_dir.join("email.eml")).expect("email.eml");
    message_body(&eml, mime)
}

/// The `mime` body part (`text/plain`, `text/html`) of a raw message.
pub(crate) fn message_body(raw: &str, mime: &str) -> String {
    let (_, parts) = parse_message(raw);
    parts
        .iter()
        .find(|p| p.header("content-type").starts_with(mime))
        .unwrap_or_else(|| panic!("no {mime} part"))
        .text()
}

/// The run a message is about, as its Run section names it at the end of the body (the subject
/// names none: issue 42 keeps run ids below the cases).
pub(crate) fn message_run(raw: &str) -> String {
    let text = message_body(raw, "text/plain");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("run "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no run line in {text}"))
        .to_string()
}

fn split_headers(raw: &str) -> (BTreeMap<String, String>, &str) {
    let (head, body) = raw.split_once("\n\n").unwrap_or((raw, ""));
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in head.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(k) = &last {
                let v = headers.get_mut(k).expect("header");
                v.push(' ');
                v.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            headers.insert(k.clone(), v.trim().to_string());
            last = Some(k);
        }
    }
    (headers, body)
}

fn param<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k.eq_ignore_ascii_case(name)).then(|| v.trim_matches('"'))
    })
}

fn base64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Top-level headers and every leaf part of a message.
pub(crate) fn parse_message(raw: &str) -> (BTreeMap<String, String>, Vec<Part>) {
    let raw = raw.replace("\r\n", "\n");
    let (headers, body) = split_headers(&raw);
    let mut parts = Vec::new();
    walk(&headers, body, &mut parts);
    (headers, parts)
}

fn walk(headers: &BTreeMap<String, String>, body: &str, parts: &mut Vec<Part>) {
    let ct = headers.get("content-type").cloned().unwrap_or_default();
    if ct.to_ascii_lowercase().starts_with("multipart/") {
        let boundary = param(&ct, "boundary").expect("boundary");
        let delim = format!("--{boundary}");
        for chunk in body.split(&delim).skip(1) {
            if chunk.starts_with("--") {
                break;
            }
            let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
            let (h, b) = split_headers(chunk);
            walk(&h, b, parts);
        }
        return;
    }
    let encoding = headers
        .get("content-transfer-encoding")
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    let body = if encoding == "base64" {
        base64_decode(body)
    } else {
        body.trim_end_matches('\n').as_bytes().to_vec()
    };
    parts.push(Part {
        headers: headers.clone(),
        body,
    });
}

fn part<'a>(parts: &'a [Part], pred: impl Fn(&Part) -> bool, what: &str) -> &'a Part {
    parts
        .iter()
        .find(|p| pred(p))
        .unwrap_or_else(|| panic!("no {what} part"))
}

fn attachment<'a>(parts: &'a [Part], name: &str) -> &'a Part {
    part(
        parts,
        |p| {
            p.header("content-disposition").starts_with("attachment")
                && param(p.header("content-disposition"), "filename") == Some(name)
        },
        name,
    )
}

// ----------------------------------------------------------------------------------------
// Scenario and snapshots
// ----------------------------------------------------------------------------------------

/// `[email]` with the file transport.
pub(crate) fn file_email() -> String {
    "[email]\nfrom = \"recon <recon@bank.test>\"\nto = [\"finance@bank.test\"]\n\
     [email.extra_recipients]\nFAILED_BUT_PAID = [\"treasury@bank.test\"]\npending = [\"ops@bank.test\"]\n"
        .to_string()
}

/// `[email]` sending to an SMTP server on loopback without TLS.
pub(crate) fn smtp_email(port: u16, extra_smtp: &str) -> String {
    smtp_email_tls("127.0.0.1", port, "none", extra_smtp)
}

/// `[email]` sending to `host:port` with the `tls` mode.
fn smtp_email_tls(host: &str, port: u16, tls: &str, extra_smtp: &str) -> String {
    let with_smtp = file_email().replace(
        "to = [\"finance@bank.test\"]\n",
        "to = [\"finance@bank.test\"]\ntransport = \"smtp\"\n",
    );
    format!(
        "{with_smtp}[email.smtp]\nhost = \"{host}\"\nport = {port}\ntls = \"{tls}\"\ntimeout_seconds = 10\n{extra_smtp}"
    )
}

/// A day with one of each money-at-risk case, a resolution, a match and hostile statement
/// text: a formula in a reference and in a line id, markup in a reference, a 34-character
/// account and a negative amount.
pub(crate) async fn hostile_env(email: String) -> TestEnv {
    let env = TestEnv::with(Settings {
        extra: email,
        ..Settings::default()
    });
    env.import(
        &format!(
            "P-1,{IBAN},250.00,EUR,FAILED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},99.00,EUR,SUCCEEDED,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n\
             P-3,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-3,\n\
             P-4,{IBAN},20.00,EUR,SUCCEEDED,2026-11-10T12:00:00Z,2026-11-10T12:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,FAILED,,insufficient funds\n\
         A-2,P-2,2026-11-10T10:00:00Z,2026-11-10T10:00:01Z,SUCCEEDED,,\n\
         A-3,P-3,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-4,P-4,2026-11-10T12:00:00Z,2026-11-10T12:00:01Z,SUCCEEDED,,\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},250.00,EUR,2026-11-10T09:05:00Z,PAYMENT\n\
         L-2,P-2,{IBAN},99.00,EUR,2026-11-10T10:05:00Z,PAYMENT\n\
         L-3,P-2,{IBAN},99.00,EUR,2026-11-10T10:06:00Z,PAYMENT\n\
         L-4,P-3,{IBAN},10.00,EUR,2026-11-10T11:05:00Z,PAYMENT\n\
         L-5,P-4,{IBAN},20.00,EUR,2026-11-10T12:05:00Z,PAYMENT\n\
         @SUM(1+1),\"{}\",{LONG_ACCOUNT},-12.34,EUR,2026-11-10T14:00:00Z,PAYMENT\n\
         X-7,{HOSTILE_SCRIPT},{FR_ACCOUNT},5000,JPY,2026-11-10T15:00:00Z,PAYMENT\n",
        HOSTILE_FORMULA.replace('"', "\"\"")
    ));
    env
}

/// Compares `actual` with the insta snapshot `tests/snapshots/report/<name>.snap` (see the
/// module docs for updating it).
fn snapshot(name: &str, actual: &str) {
    let mut settings = insta::Settings::clone_current();
    settings
        .set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/report"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, actual));
}

/// Replaces the test's temporary folder in text that names files.
fn portable(text: &str, env: &TestEnv) -> String {
    text.replace(&env.dir.path().display().to_string(), "$JOB")
}

/// Asserts no full account number appears in `text` (only the masked last 4).
fn assert_masked(text: &str, what: &str) {
    for account in [IBAN, LONG_ACCOUNT, FR_ACCOUNT] {
        assert!(!text.contains(account), "{what} leaks {account}");
        // Not even a long piece of it.
        assert!(
            !text.contains(&account[..12]),
            "{what} leaks the start of {account}"
        );
    }
}

fn cell(d: &Data) -> String {
    match d {
        Data::Empty => String::new(),
        Data::String(s) => s.clone(),
        Data::Float(f) => format!("{f}"),
        Data::Int(i) => format!("{i}"),
        other => format!("{other:?}"),
    }
}

/// A sheet as text, one row per line, cells separated by ` | `.
fn sheet_text(path: &Path, sheet: &str) -> (String, calamine::Range<Data>) {
    let mut wb: Xlsx<_> = open_workbook(path).expect("open xlsx");
    let range = wb.worksheet_range(sheet).expect("sheet");
    let text = range
        .rows()
        .map(|r| r.iter().map(cell).collect::<Vec<_>>().join(" | "))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    (text, range)
}

/// The list drop-downs of a sheet's XML: for each, the cells it covers (its ranges expanded,
/// one column) and its list as written (`a,b,c`).
fn dropdowns(xml: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for part in xml.split("<dataValidation ").skip(1) {
        let sqref = part
            .split("sqref=\"")
            .nth(1)
            .and_then(|s| s.split('"').next());
        let list = part
            .split("<formula1>")
            .nth(1)
            .and_then(|s| s.split("</formula1>").next());
        let (Some(sqref), Some(list)) = (sqref, list) else {
            continue;
        };
        let mut cells = Vec::new();
        for range in sqref.split(' ') {
            let (from, to) = range.split_once(':').unwrap_or((range, range));
            let split = |c: &str| {
                let i = c.find(|ch: char| ch.is_ascii_digit()).expect("row");
                (
                    c[..i].to_string(),
                    c[i..].parse::<u32>().expect("row number"),
                )
            };
            let ((col, a), (_, b)) = (split(from), split(to));
            cells.extend((a..=b).map(|r| format!("{col}{r}")));
        }
        let list = list.replace("&quot;", "\"");
        out.push((cells, list.trim_matches('"').to_string()));
    }
    out
}

/// A file inside an XLSX (a zip), through Python's zipfile: the sheet XML holds what calamine
/// does not expose (frozen panes, the autofilter, number formats).
fn xlsx_part(path: &Path, member: &str) -> String {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())",
        ])
        .arg(path)
        .arg(member)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn recon_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recon"))
}

pub(crate) fn run_bin(env: &TestEnv, run_id: &str, vars: &[(&str, &str)]) -> std::process::Output {
    recon_bin()
        .args(["run", "--config"])
        .arg(&env.config_path)
        .args([
            "--date",
            "2026-11-10",
            "--as-of",
            "2026-11-20T00:00:00Z",
            "--run-id",
            run_id,
        ])
        .env("RECON_LOG", "debug")
        .envs(vars.iter().copied())
        .output()
        .expect("recon binary")
}

// ----------------------------------------------------------------------------------------
// Tests
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn xlsx_report_has_family_sheets_money_as_numbers_masked_accounts_and_no_formulas() {
    let env = hostile_env(file_email()).await;
    let report = env.try_standard_day("r1").await.expect("run");
    let path = report.out_dir.join("report.xlsx");
    let wb: Xlsx<_> = open_workbook(&path).expect("open xlsx");
    assert_eq!(
        wb.sheet_names(),
        [
            "Summary",
            "Cases",
            "Decide",
            "Money at risk",
            "Review",
            "Pending",
            "Resolved",
            "Informational"
        ]
    );

    let (summary, _) = sheet_text(&path, "Summary");
    snapshot("summary.xlsx.txt", &portable(&summary, &env));
    let (money, range) = sheet_text(&path, "Money at risk");
    snapshot("money_at_risk.xlsx.txt", &money);
    let (resolved, _) = sheet_text(&path, "Resolved");
    snapshot("resolved.xlsx.txt", &resolved);

    // Most severe first: FAILED_BUT_PAID, then DUPLICATE_AT_PROVIDER, then the orphans.
    let outcomes: Vec<String> = (1..range.height() as u32)
        .map(|r| cell(range.get_value((r, 1)).expect("outcome")))
        .collect();
    assert_eq!(
        outcomes,
        [
            "FAILED_BUT_PAID",
            "DUPLICATE_AT_PROVIDER",
            "ORPHAN_AT_PROVIDER",
            "ORPHAN_AT_PROVIDER"
        ]
    );
    // Money is numeric, negative amounts too; text from the statement is neutralised.
    assert_eq!(range.get_value((1, 5)), Some(&Data::Float(250.0)));
    let orphan_row = (1..range.height() as u32)
        .find(|r| cell(range.get_value((*r, 10)).expect("ref")).contains("HYPERLINK"))
        .expect("the hostile orphan");
    assert_eq!(range.get_value((orphan_row, 7)), Some(&Data::Float(-12.34)));
    assert_eq!(
        cell(range.get_value((orphan_row, 10)).expect("reference")),
        format!("'{HOSTILE_FORMULA}")
    );
    assert_eq!(
        cell(range.get_value((orphan_row, 3)).expect("line id")),
        "'@SUM(1+1)"
    );
    assert_eq!(
        cell(range.get_value((orphan_row, 9)).expect("recipient")),
        "****9012"
    );
    assert_masked(&money, "the Money at risk sheet");
    assert_masked(&summary, "the Summary sheet");
    // The Cases sheet: one row per decision, most severe first, the same neutralising and
    // masking; the money at risk is a number (an absolute amount).
    let (cases, range) = sheet_text(&path, "Cases");
    snapshot("cases.xlsx.txt", &cases);
    let column = |name: &str| -> u32 {
        (0..range.width() as u32)
            .find(|c| cell(range.get_value((0, *c)).expect("header")) == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let whats: Vec<String> = (1..range.height() as u32)
        .map(|r| cell(range.get_value((r, column("what"))).expect("what")))
        .collect();
    assert_eq!(
        whats,
        [
            "FAILED_BUT_PAID",
            "DUPLICATE_AT_PROVIDER",
            "ORPHAN_AT_PROVIDER",
            "ORPHAN_AT_PROVIDER"
        ]
    );
    let hostile = (1..range.height() as u32)
        .find(|r| cell(range.get_value((*r, column("lines"))).expect("lines")).contains("SUM"))
        .expect("the hostile orphan's case");
    assert_eq!(
        cell(range.get_value((hostile, column("lines"))).expect("lines")),
        "'@SUM(1+1)"
    );
    assert_eq!(
        range.get_value((hostile, column("amount"))),
        Some(&Data::Float(12.34))
    );
    assert_eq!(
        cell(
            range
                .get_value((hostile, column("recipient")))
                .expect("recipient")
        ),
        "****9012"
    );
    assert_masked(&cases, "the Cases sheet");
    for sheet in ["Review", "Pending", "Resolved", "Informational"] {
        assert_masked(&sheet_text(&path, sheet).0, sheet);
    }

    // The Decide sheet: masked, no formula, not protected (so Calc and Excel sort it), a
    // drop-down per row, the check column hidden but inside the filter range (A..N: a sort
    // moves it with its row).
    assert_masked(&sheet_text(&path, "Decide").0, "the Decide sheet");
    let decide = xlsx_part(&path, "xl/worksheets/sheet3.xml");
    assert!(
        !decide.contains("<f>"),
        "no formula cell in the Decide sheet"
    );
    assert!(!decide.contains("<sheetProtection"), "{decide}");
    assert!(
        decide.contains("<col min=\"14\" max=\"14\" width=\"20.7109375\" hidden=\"1\""),
        "{decide}"
    );
    assert!(decide.contains("<autoFilter ref=\"A1:N"), "{decide}");
    assert!(decide.contains("<dataValidation type=\"list\""), "{decide}");
    // Every row's decision cell has exactly one drop-down, and it lists exactly the decisions
    // the row offers (one validation serves all the rows with the same list).
    let (_, range) = sheet_text(&path, "Decide");
    let header: Vec<String> = range
        .rows()
        .next()
        .expect("header")
        .iter()
        .map(cell)
        .collect();
    let at = |name: &str| header.iter().position(|h| h == name).expect(name);
    let (offered, decision) = (at("offered"), at("decision"));
    let lists = dropdowns(&decide);
    let rows = range.rows().count();
    assert!(rows > 2, "several cases in the Decide sheet");
    for r in 1..rows {
        let cell_name = format!("{}{}", (b'A' + decision as u8) as char, r + 1);
        let found: Vec<&String> = lists
            .iter()
            .filter(|(cells, _)| cells.contains(&cell_name))
            .map(|(_, list)| list)
            .collect();
        let want = cell(&range.get((r, offered)).cloned().unwrap_or_default()).replace(", ", ",");
        assert_eq!(found, vec![&want], "the drop-down of {cell_name}");
    }

    // Frozen header, autofilter and the currency formats, from the sheet XML.
    let xml = xlsx_part(&path, "xl/worksheets/sheet4.xml");
    assert!(
        xml.contains("ySplit=\"1\"") && xml.contains("state=\"frozen\""),
        "{xml}"
    );
    assert!(xml.contains("<autoFilter ref=\"A1:Q5\""), "{xml}");
    assert!(!xml.contains("<f>"), "no formula cell in the sheet");
    let styles = xlsx_part(&path, "xl/styles.xml");
    assert!(styles.contains("#,##0.00 &quot;EUR&quot;"), "{styles}");
    assert!(
        styles.contains("formatCode=\"#,##0 &quot;JPY&quot;\""),
        "{styles}"
    );
}

#[tokio::test]
async fn csv_diff_neutralises_formulas_and_masks_accounts() {
    let env = hostile_env(file_email()).await;
    let report = env.try_standard_day("r1").await.expect("run");
    let diff = report.out_dir.join("diff.csv");
    let rows = read_columns(
        &diff,
        &["outcome", "provider_txn_id", "recipient", "line_amount"],
    );
    // MATCHED is not a difference: only results.csv lists it.
    assert!(rows.iter().all(|r| r[0] != "MATCHED"));
    assert_eq!(rows.len(), 5, "{rows:?}");
    let orphan = rows.iter().find(|r| r[1].contains("SUM")).expect("orphan");
    assert_eq!(orphan[1], "'@SUM(1+1)");
    assert_eq!(orphan[2], "****9012");
    assert_eq!(orphan[3], "-12.34", "amounts stay plain numbers in CSV");
    let text = std::fs::read_to_string(&diff).expect("diff");
    assert_masked(&text, "diff.csv");
}

#[tokio::test]
async fn html_report_is_self_contained_escaped_and_charts_exceptions() {
    let env = hostile_env(file_email()).await;
    let report = env.try_standard_day("r1").await.expect("run");
    let html = std::fs::read_to_string(report.out_dir.join("report.html")).expect("html");
    snapshot("report.html", &portable(&html, &env));
    assert!(!html.contains(HOSTILE_SCRIPT));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("=HYPERLINK(&quot;http://evil.example&quot;,&quot;click&quot;)"));
    assert_masked(&html, "report.html");
    // Nothing is fetched: no script, no link, no remote URL besides the SVG namespace.
    for banned in ["<script", "<link", "src=", "href=", "url(", "@import"] {
        assert!(!html.contains(banned), "report.html contains {banned}");
    }
    let remote = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!remote.contains("=\"http"), "no remote resource");
    // The chart has one bar per exception outcome, with its count.
    let svg = &html[html.find("<svg").expect("svg")..html.find("</svg>").expect("/svg")];
    assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
    assert!(svg.contains(">ORPHAN_AT_PROVIDER</text>") && svg.contains(">2</text>"));
    assert!(!html.contains("Nothing to review"));
}

#[tokio::test]
async fn email_arrives_by_smtp_with_recipients_subject_bodies_and_attachments() {
    let server = SmtpServer::start();
    let env = hostile_env(smtp_email(server.port, "")).await;
    let report = env.try_standard_day("r1").await.expect("run");
    assert!(!report.alert.failed(), "{:?}", report.alert);
    assert!(
        matches!(report.alert.status, AlertStatus::Sent(_)),
        "{:?}",
        report.alert
    );
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    let (headers, parts) = parse_message(&messages[0]);

    // Envelope and headers: finance always, treasury because of FAILED_BUT_PAID; no pending
    // rows, so no ops.
    assert_eq!(headers["x-rcptto"], "finance@bank.test, treasury@bank.test");
    assert_eq!(headers["x-mailfrom"], "recon@bank.test");
    assert!(
        headers["to"].contains("finance@bank.test") && headers["to"].contains("treasury@bank.test")
    );
    assert!(!messages[0].contains("ops@bank.test"));
    assert_eq!(
        headers["subject"],
        "[recon] 2026-11-10: 4 cases to decide, 2 critical, 1 resolved, 0 pending"
    );

    let text = part(
        &parts,
        |p| p.header("content-type").starts_with("text/plain"),
        "text",
    )
    .text();
    snapshot("email.txt", &portable(&text, &env));
    let html = part(
        &parts,
        |p| p.header("content-type").starts_with("text/html"),
        "html",
    )
    .text();
    snapshot("email.html", &portable(&html, &env));
    for body in [&text, &html] {
        assert_masked(body, "the email");
    }
    // Markup is inert in the plain-text part, escaped in the HTML part.
    assert!(text.contains(HOSTILE_SCRIPT));
    assert!(!html.contains(HOSTILE_SCRIPT) && html.contains("&lt;script&gt;"));
    // Most severe first in both bodies.
    let (fbp, dup) = (
        text.find("FAILED_BUT_PAID").expect("fbp"),
        text.find("DUPLICATE_AT_PROVIDER").expect("dup"),
    );
    assert!(fbp < dup);
    assert!(html.find("FAILED_BUT_PAID") < html.find("DUPLICATE_AT_PROVIDER"));

    // The attachments are the run's files, byte for byte.
    for name in ["report.xlsx", "diff.csv"] {
        let a = attachment(&parts, name);
        assert_eq!(
            a.body,
            std::fs::read(report.out_dir.join(name)).expect("file"),
            "{name}"
        );
    }
    assert!(
        attachment(&parts, "report.xlsx")
            .header("content-type")
            .starts_with("application/vnd.openxmlformats")
    );
    assert!(
        recon::report::outbox::queued(&env.path("out"))
            .expect("outbox")
            .is_empty(),
        "nothing left queued"
    );
}

#[tokio::test]
async fn smtp_down_queues_the_alert_exits_8_and_the_next_run_sends_it_first() {
    let port = free_port();
    let env = hostile_env(smtp_email(port, "")).await;
    // Nothing listens on `port`.
    let out = run_bin(&env, "r1", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::ALERT_FAILED),
        "{stdout}"
    );
    assert!(stdout.contains("alert: NOT SENT"), "{stdout}");
    // The run itself completed: results in place, run recorded, transition applied.
    assert!(env.path("out/r1/results.csv").exists());
    let pool = env.pool().await;
    let (status,): (String,) = sqlx::query_as("SELECT status FROM recon_runs WHERE run_id = 'r1'")
        .fetch_one(&pool)
        .await
        .expect("run");
    assert_eq!(status, "COMPLETED");
    let outbox = recon::report::outbox::dir(&env.path("out"));
    assert!(outbox.join("r1.eml").exists() && outbox.join("r1.envelope.json").exists());

    // SMTP is back: the next run sends r1's alert first, then its own, and empties the outbox.
    let server = SmtpServer::start_with(port, &[]);
    let report = env
        .try_run(
            "2026-11-10",
            "2026-11-10",
            "2026-11-20T00:00:00Z",
            false,
            "r2",
        )
        .await
        .expect("run");
    assert!(!report.alert.failed(), "{:?}", report.alert);
    assert_eq!(report.alert.outbox_sent, 1);
    assert_eq!(
        recon::report::outbox::queued(&env.path("out"))
            .expect("outbox")
            .len(),
        0
    );
    let runs: Vec<String> = server.messages().iter().map(|m| message_run(m)).collect();
    assert_eq!(runs, ["r1", "r2"], "the queued alert first");
}

#[tokio::test]
async fn smtp_rejection_is_queued_and_no_secret_reaches_logs_or_files() {
    // The server refuses any message over 200 bytes (SIZE extension).
    let server = SmtpServer::start_with(free_port(), &["-s", "200"]);
    let env = hostile_env(smtp_email(server.port, "")).await;
    let out = run_bin(&env, "r1", &[]);
    assert_eq!(out.status.code(), Some(recon::exit::ALERT_FAILED));
    assert!(server.messages().is_empty());
    assert!(
        recon::report::outbox::dir(&env.path("out"))
            .join("r1.eml")
            .exists()
    );

    // With credentials: the password comes from the environment and appears nowhere. The
    // server offers no AUTH, so sending fails and the message is queued.
    let server = SmtpServer::start();
    let env = hostile_env(smtp_email(
        server.port,
        "username_env = \"RECON_TEST_SMTP_USER\"\npassword_env = \"RECON_TEST_SMTP_PASSWORD\"\n",
    ))
    .await;
    let secret = "s3cr3t-Pa55word-8d1f";
    let out = run_bin(
        &env,
        "r1",
        &[
            ("RECON_TEST_SMTP_USER", "recon"),
            ("RECON_TEST_SMTP_PASSWORD", secret),
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(recon::exit::ALERT_FAILED),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("Alert not sent"), "{stderr}");
    for (what, text) in [("stdout", &*stdout), ("stderr", &*stderr)] {
        assert!(!text.contains(secret), "{what} leaks the password");
        assert_masked(text, what);
    }
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    assert!(!config.contains(secret));
    for entry in std::fs::read_dir(recon::report::outbox::dir(&env.path("out"))).expect("outbox") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        assert!(!text.contains(secret), "the outbox leaks the password");
    }

    // Without the variables the run refuses to start (a configuration error, nothing read).
    let out = run_bin(&env, "r2", &[]);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RECON_TEST_SMTP_USER"));
    assert!(!env.path("out/r2").exists());
}

/// Asserts the message arrived once, to the expected recipients with the run's subject.
fn assert_alert_received(server: &SmtpServer, run_id: &str) {
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    let (headers, _) = parse_message(&messages[0]);
    assert_eq!(headers["x-rcptto"], "finance@bank.test, treasury@bank.test");
    assert_eq!(headers["x-mailfrom"], "recon@bank.test");
    assert_eq!(
        headers["subject"],
        "[recon] 2026-11-10: 4 cases to decide, 2 critical, 1 resolved, 0 pending"
    );
    assert_eq!(message_run(&messages[0]), run_id);
}

/// Runs the binary, expects the alert queued with exit 8, nothing received, and returns the
/// terminal line that says why.
fn assert_alert_refused(env: &TestEnv, server: &SmtpServer, run_id: &str) -> String {
    let out = run_bin(env, run_id, &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(recon::exit::ALERT_FAILED),
        "{stdout}{stderr}"
    );
    // The run itself completed; only the alert waits.
    assert!(env.path(&format!("out/{run_id}/results.csv")).exists());
    assert!(
        recon::report::outbox::dir(&env.path("out"))
            .join(format!("{run_id}.eml"))
            .exists(),
        "queued"
    );
    assert!(server.messages().is_empty(), "nothing delivered");
    stdout
        .lines()
        .find(|l| l.contains("alert: NOT SENT"))
        .unwrap_or_else(|| panic!("no alert line in {stdout}"))
        .to_string()
}

/// A run whose alert goes to a TLS server (`server_tls`) at `host` in mode `tls`, trusting the
/// test CA through `ca_file`: the message must be sent and received.
async fn delivers_over_tls(server_tls: ServerTls, host: &str, tls: &str) {
    let pki = TestPki::loopback();
    let server = SmtpServer::start_tls(&pki, server_tls);
    let env = hostile_env(smtp_email_tls(host, server.port, tls, &pki.ca_file_key())).await;
    let report = env.try_standard_day("r1").await.expect("run");
    assert!(
        matches!(report.alert.status, AlertStatus::Sent(_)),
        "{:?}",
        report.alert
    );
    assert!(!report.alert.failed());
    assert_alert_received(&server, "r1");
}

#[tokio::test]
async fn starttls_delivers_to_a_server_whose_ca_is_in_ca_file() {
    // aiosmtpd refuses MAIL before STARTTLS, so a delivery proves the upgrade happened.
    delivers_over_tls(ServerTls::StartTls, "127.0.0.1", "starttls").await;
}

#[tokio::test]
async fn implicit_tls_delivers_to_a_server_whose_ca_is_in_ca_file() {
    // By name this time: the certificate's DNS:localhost entry is checked.
    delivers_over_tls(ServerTls::Implicit, "localhost", "implicit").await;
}

#[tokio::test]
async fn certificates_are_verified_an_unknown_ca_or_wrong_name_queues_the_alert() {
    let pki = TestPki::loopback();
    for (tls, mode) in [
        ("starttls", ServerTls::StartTls),
        ("implicit", ServerTls::Implicit),
    ] {
        // Without ca_file the test CA is unknown: refused, queued, exit 8.
        let server = SmtpServer::start_tls(&pki, mode);
        let env = hostile_env(smtp_email_tls("127.0.0.1", server.port, tls, "")).await;
        let line = assert_alert_refused(&env, &server, "r1");
        assert!(line.contains("UnknownIssuer"), "{tls}: {line}");

        // The CA is trusted but the certificate names another host: refused too.
        let other = TestPki::new(&["DNS:other.test"]);
        let server = SmtpServer::start_tls(&other, mode);
        let env = hostile_env(smtp_email_tls(
            "127.0.0.1",
            server.port,
            tls,
            &other.ca_file_key(),
        ))
        .await;
        let line = assert_alert_refused(&env, &server, "r1");
        assert!(line.contains("not valid for name"), "{tls}: {line}");
    }
}

#[tokio::test]
async fn starttls_never_falls_back_to_plain_text() {
    let pki = TestPki::loopback();
    // A plain server: it offers no STARTTLS and would accept the message in clear text.
    let server = SmtpServer::start();
    let env = hostile_env(smtp_email_tls(
        "127.0.0.1",
        server.port,
        "starttls",
        &pki.ca_file_key(),
    ))
    .await;
    let line = assert_alert_refused(&env, &server, "r1");
    assert!(line.contains("STARTTLS"), "{line}");
}

#[tokio::test]
async fn an_unusable_ca_file_stops_the_run_before_any_data_is_read() {
    let env = hostile_env(smtp_email_tls("127.0.0.1", free_port(), "starttls", "")).await;
    // Named after the data is in place (loading the config for the import would fail).
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    let broken = config.replace(
        "tls = \"starttls\"\n",
        "tls = \"starttls\"\nca_file = \"missing-ca.pem\"\n",
    );
    assert_ne!(config, broken);
    std::fs::write(&env.config_path, broken).expect("config");
    let out = run_bin(&env, "r1", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{stderr}");
    assert!(
        stderr.contains("email.smtp.ca_file") && stderr.contains("missing-ca.pem"),
        "{stderr}"
    );
    assert!(!env.path("out/r1").exists());
}

#[tokio::test]
async fn dry_run_writes_reports_and_the_message_but_sends_nothing() {
    let server = SmtpServer::start();
    let env = hostile_env(smtp_email(server.port, "")).await;
    let report = env
        .try_run(
            "2026-11-10",
            "2026-11-10",
            "2026-11-20T00:00:00Z",
            true,
            "dry",
        )
        .await
        .expect("run");
    let eml = report.out_dir.join("email.eml");
    assert_eq!(report.alert.status, AlertStatus::DryRun(eml.clone()));
    assert!(!report.alert.failed());
    for f in ["report.xlsx", "report.html", "diff.csv"] {
        assert!(report.out_dir.join(f).exists(), "{f}");
    }
    let (headers, _) = parse_message(&std::fs::read_to_string(&eml).expect("eml"));
    assert!(
        headers["subject"].starts_with("[recon] [dry run] 2026-11-10"),
        "{headers:?}"
    );
    // Give a wrongly sent message time to arrive before asserting none did.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_clean_run_says_nothing_to_review_through_the_file_transport() {
    let env = TestEnv::with(Settings {
        extra: file_email(),
        ..Settings::default()
    });
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,SUCCEEDED,,\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:05:00Z,PAYMENT\n"
    ));
    let report = env.try_standard_day("clean").await.expect("run");
    let eml = report.out_dir.join("email.eml");
    assert_eq!(report.alert.status, AlertStatus::Written(eml.clone()));
    let (headers, parts) = parse_message(&std::fs::read_to_string(&eml).expect("eml"));
    assert_eq!(
        headers["subject"],
        "[recon] 2026-11-10: nothing to review, 0 resolved, 0 pending"
    );
    // No extra recipients: no FAILED_BUT_PAID, nothing pending.
    assert_eq!(headers["to"], "finance@bank.test");
    let text = part(
        &parts,
        |p| p.header("content-type").starts_with("text/plain"),
        "text",
    )
    .text();
    assert!(text.contains("Nothing to review"), "{text}");
    let html = part(
        &parts,
        |p| p.header("content-type").starts_with("text/html"),
        "html",
    )
    .text();
    assert!(html.contains("Nothing to review"));
    let report_html = std::fs::read_to_string(report.out_dir.join("report.html")).expect("html");
    assert!(report_html.contains("No exceptions to chart."));
    let (cases, _) = sheet_text(&report.out_dir.join("report.xlsx"), "Cases");
    assert_eq!(cases.lines().count(), 1, "header only: {cases}");
    let (money, _) = sheet_text(&report.out_dir.join("report.xlsx"), "Money at risk");
    assert_eq!(money.lines().count(), 1, "header only: {money}");
}

#[tokio::test]
async fn completeness_warnings_reach_the_email_and_the_reports() {
    let env = TestEnv::with(Settings {
        extra: file_email(),
        complete: None,
        ..Settings::default()
    });
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    let report = env.try_standard_day("warn").await.expect("run");
    assert!(
        !report.summary.warnings.is_empty(),
        "the scenario has a warning"
    );
    let warning = &report.summary.warnings[0];
    let (headers, parts) =
        parse_message(&std::fs::read_to_string(report.out_dir.join("email.eml")).expect("eml"));
    // AWAITING_EVIDENCE is pending: ops gets the alert too.
    assert_eq!(headers["to"], "finance@bank.test, ops@bank.test");
    let text = part(
        &parts,
        |p| p.header("content-type").starts_with("text/plain"),
        "text",
    )
    .text();
    assert!(
        text.contains("Completeness warnings:") && text.contains(warning.as_str()),
        "{text}"
    );
    let html = std::fs::read_to_string(report.out_dir.join("report.html")).expect("html");
    assert!(html.contains(&*recon::report::html::escape(warning)));
}

#[tokio::test]
async fn attachments_over_the_limit_are_left_out_and_named_in_the_body() {
    let env = hostile_env(file_email().replace(
        "to = [\"finance@bank.test\"]\n",
        "to = [\"finance@bank.test\"]\nmax_attachment_kib = 0\n",
    ))
    .await;
    let report = env.try_standard_day("r1").await.expect("run");
    let (_, parts) =
        parse_message(&std::fs::read_to_string(report.out_dir.join("email.eml")).expect("eml"));
    assert!(
        parts
            .iter()
            .all(|p| !p.header("content-disposition").starts_with("attachment")),
        "no attachment"
    );
    let text = part(
        &parts,
        |p| p.header("content-type").starts_with("text/plain"),
        "text",
    )
    .text();
    assert!(
        text.contains("report.xlsx (")
            && text.contains("is not attached: over the attachment limit"),
        "{text}"
    );
    assert!(
        text.contains("decide.xlsx is not attached: even one case is over"),
        "{text}"
    );
    assert!(
        text.contains("diff.csv (") && text.contains("stays in the run folder"),
        "{text}"
    );
    assert!(
        text.contains("Nothing is attached.") && !text.contains("attached report.xlsx"),
        "{text}"
    );
}

/// A range re-run sends ONE message for the whole range, from the range folder, with each item
/// once: a payment carried over from one day to the next is not listed twice. Each day still
/// has its own reports; the range folder has the merged ones.
#[tokio::test]
async fn a_range_sends_one_message_with_each_item_once() {
    let env = TestEnv::with(Settings {
        extra: file_email(),
        ..Settings::default()
    });
    env.import(
        &format!(
            "P-CARRY,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-PAID,{IBAN},20.00,EUR,FAILED,2026-11-11T09:00:00Z,2026-11-11T09:00:00Z,A-2,\n"
        ),
        "A-1,P-CARRY,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-PAID,2026-11-11T09:00:00Z,2026-11-11T09:00:01Z,FAILED,,declined\n",
    )
    .await;
    env.statement(&format!(
        "L-2,P-PAID,{IBAN},20.00,EUR,2026-11-11T09:05:00Z,PAYMENT\n"
    ));
    // As of the 12th, P-CARRY's window is still open: AWAITING_EVIDENCE on the 10th and,
    // carried over, on the 11th.
    let report = env
        .try_run(
            "2026-11-10",
            "2026-11-11",
            "2026-11-12T00:00:00Z",
            false,
            "rng",
        )
        .await
        .expect("range");
    let (days, _) = report.range.as_ref().expect("range report");
    let carried = |d: &recon::run::RunReport| {
        crate::support::outcomes(d)
            .iter()
            .any(|r| r.0 == "AWAITING_EVIDENCE" && r.1 == "P-CARRY")
    };
    assert!(
        carried(&days[0]) && carried(&days[1]),
        "listed on both days"
    );
    let eml = env.path("out/rng/email.eml");
    assert_eq!(report.alert.status, AlertStatus::Written(eml.clone()));
    for day in ["2026-11-10", "2026-11-11"] {
        let dir = env.path(&format!("out/rng/{day}"));
        assert!(dir.join("report.xlsx").exists(), "{day} keeps its reports");
        assert!(
            !dir.join("email.eml").exists(),
            "{day} sends nothing itself"
        );
    }
    let (headers, parts) = parse_message(&std::fs::read_to_string(&eml).expect("eml"));
    assert!(
        headers["subject"].starts_with("[recon] 2026-11-10..2026-11-11:"),
        "{}",
        headers["subject"]
    );
    assert_eq!(
        message_run(&std::fs::read_to_string(&eml).expect("eml")),
        "rng"
    );
    // FAILED_BUT_PAID on the 11th reaches treasury too.
    assert!(
        headers["to"].contains("treasury@bank.test"),
        "{}",
        headers["to"]
    );
    let text = part(
        &parts,
        |p| p.header("content-type").starts_with("text/plain"),
        "text",
    )
    .text();
    assert_eq!(
        text.matches("payment P-PAID, line L-2").count(),
        1,
        "{text}"
    );
    assert!(text.contains("1 case to decide, 1 critical"), "{text}");
    // The range's summary.json counts the range's cases, each item once.
    let range_summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("out/rng/summary.json")).expect("summary.json"),
    )
    .expect("json");
    assert_eq!(
        range_summary["cases"],
        serde_json::json!({"cases": 1, "tickets": 1, "by_severity": {"CRITICAL": 1}})
    );
    // Counted once in the totals, listed once in the report, though both days reported it.
    let pending_line = text
        .lines()
        .find(|l| l.contains("AWAITING_EVIDENCE"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        pending_line.split_whitespace().any(|w| w == "1")
            && !pending_line.split_whitespace().any(|w| w == "2"),
        "{pending_line}"
    );
    let (pending, _) = sheet_text(&env.path("out/rng/report.xlsx"), "Pending");
    assert_eq!(pending.matches("P-CARRY").count(), 1, "{pending}");
    let diff = std::fs::read_to_string(env.path("out/rng/diff.csv")).expect("diff");
    assert_eq!(diff.matches("outcome,").count(), 1, "one header: {diff}");
    assert!(diff.contains("FAILED_BUT_PAID,P-PAID"), "{diff}");
    let (money, _) = sheet_text(&env.path("out/rng/report.xlsx"), "Money at risk");
    assert!(money.contains("P-PAID"), "{money}");
}
