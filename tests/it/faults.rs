//! The fault matrix (issue 16): recon against a broken world — SMTP servers that stall, giant
//! or hostile input, secrets in odd places. One test per cell; cells already covered
//! elsewhere are listed in docs/operations.md ("Fault matrix") with the module that tests them.

use crate::report::{file_email, hostile_env, run_bin, smtp_email};
use crate::support::{Backend, PAYMENTS_HEADER, Settings, TestEnv, read_columns};
use calamine::{Data, Reader, Xlsx, open_workbook};
use recon::report::outbox::{self, AlertStatus};
use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

// ----------------------------------------------------------------------------------------
// A server that stalls
// ----------------------------------------------------------------------------------------

/// A TCP server on loopback that accepts every connection and then stalls: it sends nothing,
/// or only an SMTP greeting, and never reads. Connections stay open until it is dropped.
struct StalledServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StalledServer {
    fn start(greeting: bool) -> StalledServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let mut open = Vec::new();
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(mut c) = conn {
                        if greeting {
                            let _ = c.write_all(b"220 stalled.test ESMTP\r\n");
                        }
                        open.push(c);
                    }
                }
            }
        });
        StalledServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StalledServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `[email]` over plain SMTP to `port` on loopback with `timeout_seconds = secs`.
fn email_with_timeout(port: u16, secs: u64) -> String {
    smtp_email(port, "").replace("timeout_seconds = 10", &format!("timeout_seconds = {secs}"))
}

/// The status and error of run `run_id` in `recon_runs`.
async fn run_record(env: &TestEnv, run_id: &str) -> (String, Option<String>) {
    let db = env.db().await;
    let sql = "SELECT status, error FROM recon_runs WHERE run_id = $1";
    let record = match &db.pool {
        recon::db::Pool::Sqlite(p) => sqlx::query_as(sql).bind(run_id).fetch_one(p).await,
        recon::db::Pool::Postgres(p) => sqlx::query_as(sql).bind(run_id).fetch_one(p).await,
    }
    .unwrap_or_else(|e| panic!("run {run_id}: {e}"));
    db.close().await;
    record
}

/// The status of run `run_id` in `recon_runs`.
async fn run_status(env: &TestEnv, run_id: &str) -> String {
    run_record(env, run_id).await.0
}

// ----------------------------------------------------------------------------------------
// SMTP
// ----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_smtp_server_times_out_and_the_alert_waits_in_the_outbox() {
    for greeting in [false, true] {
        let what = if greeting { "greeting only" } else { "silent" };
        let server = StalledServer::start(greeting);
        let env = hostile_env(email_with_timeout(server.port, 1)).await;
        let report = tokio::time::timeout(Duration::from_secs(15), env.try_standard_day("r1"))
            .await
            .unwrap_or_else(|_| panic!("{what}: the run hangs on a stalled SMTP server"))
            .expect("run");
        match &report.alert.status {
            AlertStatus::Queued { path, error } => {
                assert!(path.exists(), "{what}: {}", path.display());
                assert!(error.contains("no answer within 1 s"), "{what}: {error}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(run_status(&env, "r1").await, "COMPLETED", "{what}");
        // The next run takes the lock (no exit 6), tries r1's alert first, and keeps both.
        let next = tokio::time::timeout(Duration::from_secs(15), env.try_standard_day("r2"))
            .await
            .unwrap_or_else(|_| panic!("{what}: the next run hangs"))
            .expect("the next run takes the lock");
        assert!(
            next.alert.outbox_error.is_some(),
            "{what}: {:?}",
            next.alert
        );
        let queued = outbox::queued(&env.path("out")).expect("outbox");
        let names: Vec<_> = queued
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["r1.eml", "r2.eml"], "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_is_queued_before_sending_and_the_lock_does_not_wait_for_smtp() {
    let server = StalledServer::start(true);
    // Long enough that r2 runs while r1 is still waiting on the server, even on a slow box.
    let env = hostile_env(email_with_timeout(server.port, 6)).await;
    let dir = outbox::dir(&env.path("out"));
    let both = async {
        tokio::join!(env.try_standard_day("r1"), async {
            // While r1 waits on the server, its alert is already safe in the outbox (a kill
            // now loses nothing) and its lock is free: the next run starts and completes.
            let deadline = Instant::now() + Duration::from_secs(15);
            while !(dir.join("r1.eml").exists() && dir.join("r1.envelope.json").exists()) {
                assert!(
                    Instant::now() < deadline,
                    "r1's alert is not in the outbox while it is being delivered"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            env.try_standard_day("r2").await
        })
    };
    let (r1, r2) = tokio::time::timeout(Duration::from_secs(40), both)
        .await
        .expect("both runs return");
    let (r1, r2) = (
        r1.expect("r1"),
        r2.expect("r2 is not locked out by r1's delivery"),
    );
    // r2 left r1's message to r1 (it is being delivered), so it never waited on it.
    assert_eq!(r2.alert.outbox_error, None, "{:?}", r2.alert);
    for r in [&r1, &r2] {
        assert!(
            matches!(r.alert.status, AlertStatus::Queued { .. }),
            "{:?}",
            r.alert
        );
        assert_eq!(run_status(&env, &r.run_id).await, "COMPLETED");
    }
    assert_eq!(outbox::queued(&env.path("out")).expect("outbox").len(), 2);
}

#[tokio::test]
async fn outbox_log_lines_are_json_with_one_message_key() {
    // Nothing listens on the port: r1's alert is queued; r2 tries it first and logs why not.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let env = hostile_env(email_with_timeout(port, 1)).await;
    assert_eq!(
        run_bin(&env, "r1", &[]).status.code(),
        Some(recon::exit::ALERT_FAILED)
    );
    let out = run_bin(&env, "r2", &[]);
    assert_eq!(out.status.code(), Some(recon::exit::ALERT_FAILED));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("Queued alert not sent"))
        .unwrap_or_else(|| panic!("no outbox line in {stderr}"));
    let record: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    assert!(
        record["fields"]["queued"]
            .as_str()
            .is_some_and(|p| p.ends_with("r1.eml")),
        "{line}"
    );
    // serde_json keeps the last of two equal keys: count them in the text.
    assert_eq!(line.matches("\"message\":").count(), 1, "{line}");
}

// ----------------------------------------------------------------------------------------
// Giant and hostile input
// ----------------------------------------------------------------------------------------

const IBAN: &str = "DE89370400440532013000";

/// A job of the standard day with no ledger and the statement `rows`.
async fn statement_only(rows: &str) -> TestEnv {
    let env = TestEnv::new();
    env.import("", "").await;
    env.statement(rows);
    env
}

/// Every text cell of every sheet of `xlsx`.
fn xlsx_cells(xlsx: &std::path::Path) -> Vec<String> {
    let mut wb: Xlsx<_> = open_workbook(xlsx).expect("open xlsx");
    let mut out = Vec::new();
    for name in wb.sheet_names() {
        let range = wb.worksheet_range(&name).expect("sheet");
        for c in range.used_cells() {
            if let Data::String(s) = c.2 {
                out.push(s.clone());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_field_longer_than_an_excel_cell_is_cut_visibly_in_xlsx_and_kept_whole_in_csv() {
    let id = format!("L-{}", "7".repeat(40_000));
    let env = statement_only(&format!(
        "{id},REF-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n"
    ))
    .await;
    let report = env.try_standard_day("r1").await.expect("the run completes");
    let cells = xlsx_cells(&report.out_dir.join("report.xlsx"));
    let cut = cells
        .iter()
        .find(|c| c.starts_with("L-777"))
        .expect("the line's id is in the report");
    assert!(cut.encode_utf16().count() <= 32_767, "{}", cut.len());
    assert!(
        cut.ends_with("… [truncated, 40002 chars]"),
        "{}",
        &cut[cut.len() - 40..]
    );
    for csv in ["results.csv", "diff.csv"] {
        let ids = read_columns(&report.out_dir.join(csv), &["provider_txn_id"]);
        assert!(ids.iter().any(|r| r[0] == id), "{csv} keeps the whole id");
    }
}

#[tokio::test]
async fn a_file_of_nul_bytes_is_named_unreadable_with_a_short_message_and_the_run_completes() {
    let env = statement_only("").await;
    std::fs::write(env.path("statement.csv"), vec![0u8; 5 << 20]).expect("write");
    env.control("statement.csv");
    let out = run_bin(&env, "r1", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::INPUT_UNREADABLE),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    assert!(stderr.len() < 64 * 1024, "{} bytes of stderr", stderr.len());
    assert!(
        stderr.contains("line 1: the header line is 5242880 bytes, more than the 65536"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    // The rest of the run went on (nothing else to read here) and was committed; the file is
    // named with a bounded message.
    let (status, _) = run_record(&env, "r1").await;
    assert_eq!(status, "COMPLETED");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("out/r1/summary.json")).expect("summary.json"),
    )
    .expect("json");
    let error = summary["unreadable_inputs"][0]["error"]
        .as_str()
        .expect("the summary names the file and why");
    assert!(
        error.len() <= 4096 + 64,
        "{} bytes of error in summary.json",
        error.len()
    );
}

#[tokio::test]
async fn a_field_over_the_limit_rejects_its_line_and_says_how_long_it_was() {
    let env = statement_only(&format!(
        "L-1,R-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-2,{},{IBAN},11.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n",
        "R".repeat(100_000)
    ))
    .await;
    let report = env.try_standard_day("r1").await.expect("the run completes");
    let rejected = read_columns(&report.out_dir.join("rejected.csv"), &["line", "reason"]);
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0][0], "3");
    assert_eq!(
        rejected[0][1],
        "column \"reference\": the field is 100000 bytes, more than the 65536 a field may have"
    );
    let ids: Vec<String> = crate::support::outcomes(&report)
        .into_iter()
        .map(|(o, _, l)| format!("{o} {l}"))
        .collect();
    assert_eq!(ids, ["ORPHAN_AT_PROVIDER L-1"]);
}

#[tokio::test]
async fn a_mapped_column_named_twice_in_the_header_is_an_error_naming_both_positions() {
    let env = statement_only("").await;
    env.deliver_csv(
        "statement.csv",
        "id,reference,recipient,amount,currency,amount,booked_at,type",
        &format!("L-1,R-1,{IBAN},10.00,EUR,99.00,2026-11-10T10:00:00Z,PAYMENT\n"),
    );
    let report = env
        .try_standard_day("r1")
        .await
        .expect("an unreadable file does not stop the run");
    let unreadable = report.unreadable_inputs();
    assert_eq!(unreadable.len(), 1, "which amount is meant? {unreadable:?}");
    let msg = &unreadable[0].error;
    assert!(
        msg.contains("column \"amount\" (config key columns.amount) appears twice in the header, as column 4 and column 6"),
        "{msg}"
    );
    // An unmapped duplicate is no question: the run reads the file.
    env.deliver_csv(
        "statement.csv",
        "id,reference,recipient,amount,currency,note,booked_at,type,note",
        &format!("L-1,R-1,{IBAN},10.00,EUR,a,2026-11-10T10:00:00Z,PAYMENT,b\n"),
    );
    let r2 = env
        .try_standard_day("r2")
        .await
        .expect("an unmapped duplicate is fine");
    assert!(r2.unreadable_inputs().is_empty());
}

#[tokio::test]
async fn invisible_characters_show_escaped_in_results_reports_and_the_email() {
    let env = TestEnv::with(Settings {
        extra: file_email(),
        ..Settings::default()
    });
    env.import("", "").await;
    // The ledger is the customer's database: a NUL can come from it (SQLite keeps one), and
    // a NUL before `=` must not hide a formula.
    env.exec(
        "INSERT INTO payments (payment_id, recipient_account, amount_minor, currency, status, \
         created_at, started_at, attempt_id, provider_payment_id, updated_at) \
         VALUES (char(0) || '=HYPERLINK(\"http://evil.test\")', \
         'DE89370400440532013000', 1000, 'EUR', 'PENDING', '2026-11-10 09:00:00.000000', \
         NULL, NULL, NULL, '2026-11-10 09:00:00.000000')",
    )
    .await;
    // A right-to-left override in a provider id and an isolate in a reference.
    env.statement(&format!(
        "L-\u{202e}1gnp.exe,R-\u{2066}x,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n"
    ));
    let report = env.try_standard_day("r1").await.expect("run");
    let raw = |text: &str| text.contains(['\0', '\u{202e}', '\u{2066}']);
    let results = std::fs::read_to_string(report.out_dir.join("results.csv")).expect("csv");
    assert!(!raw(&results), "{results:?}");
    let ids = read_columns(
        &report.out_dir.join("results.csv"),
        &["payment_id", "provider_txn_id"],
    );
    assert!(
        ids.iter()
            .any(|r| r[0] == "<U+0000>=HYPERLINK(\"http://evil.test\")"),
        "{ids:?}"
    );
    assert!(ids.iter().any(|r| r[1] == "L-<U+202E>1gnp.exe"), "{ids:?}");
    let html = std::fs::read_to_string(report.out_dir.join("report.html")).expect("html");
    assert!(!raw(&html));
    assert!(html.contains("L-&lt;U+202E&gt;1gnp.exe"));
    let body = |mime: &str| crate::report::email_body(&report.out_dir, mime);
    let (text, html) = (body("text/plain"), body("text/html"));
    assert!(!raw(&text) && !raw(&html), "{text}");
    assert!(text.contains("L-<U+202E>1gnp.exe"), "{text}");
    assert!(text.contains("R-<U+2066>x"), "{text}");
    assert!(html.contains("L-&lt;U+202E&gt;1gnp.exe"), "{html}");
}

/// The invisible characters of issue 33 (zero-width ones, direction controls) and a few more
/// of category Cf.
const INVISIBLE: [char; 18] = [
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{202A}', '\u{202B}', '\u{202C}',
    '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}',
    '\u{00AD}', '\u{2061}',
];

/// Every invisible character in a payment id, a provider id and a reference, through every
/// output: results.csv, diff.csv, report.xlsx, report.html, the email (both parts), `recon
/// tickets list|show` and `recon explain`. None of them is written raw; each shows as
/// `<U+XXXX>`. Zero-width characters used to pass raw into every file, and the terminal
/// commands printed U+202E raw.
#[tokio::test]
async fn every_invisible_character_shows_escaped_in_every_output() {
    let env = TestEnv::with(Settings {
        extra: file_email(),
        ..Settings::default()
    });
    // One payment whose id holds every character, SUCCEEDED with no line: a ticket.
    let payment: String = INVISIBLE.iter().map(|c| format!("{c}P")).collect();
    let payment = format!("P-{payment}");
    env.import(
        &format!(
            "{payment},{IBAN},999.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"
        ),
        &format!("A-1,{payment},2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,SUCCEEDED,,\n"),
    )
    .await;
    // One line per character, in its provider id and its reference: each an orphan ticket.
    let rows: String = INVISIBLE
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "L-{:04X}-{c}x,R-{:04X}-{c}y,{IBAN},{}.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n",
                *c as u32,
                *c as u32,
                10 + i
            )
        })
        .collect();
    env.statement(&rows);
    let report = env.try_standard_day("r1").await.expect("run");
    let raw = |text: &str| text.chars().find(|c| INVISIBLE.contains(c));
    let check = |what: &str, text: &str, escaped: &dyn Fn(char) -> String| {
        assert_eq!(raw(text), None, "{what} holds a raw invisible character");
        for c in INVISIBLE {
            assert!(text.contains(&escaped(c)), "{what} lacks {}", escaped(c));
        }
    };
    let plain = |c: char| format!("<U+{:04X}>", c as u32);
    let html = |c: char| format!("&lt;U+{:04X}&gt;", c as u32);
    for file in ["results.csv", "diff.csv"] {
        let text = std::fs::read_to_string(report.out_dir.join(file)).expect(file);
        check(file, &text, &plain);
    }
    let ids = read_columns(
        &report.out_dir.join("results.csv"),
        &["payment_id", "provider_txn_id"],
    );
    let escaped_payment: String = INVISIBLE
        .iter()
        .map(|c| format!("{}P", plain(*c)))
        .collect();
    assert!(
        ids.iter().any(|r| r[0] == format!("P-{escaped_payment}")),
        "{ids:?}"
    );
    assert!(ids.iter().any(|r| r[1] == "L-202E-<U+202E>x"), "{ids:?}");
    check(
        "report.xlsx",
        &xlsx_cells(&report.out_dir.join("report.xlsx")).join("\n"),
        &plain,
    );
    let page = std::fs::read_to_string(report.out_dir.join("report.html")).expect("html");
    check("report.html", &page, &html);
    let body = |mime: &str| crate::report::email_body(&report.out_dir, mime);
    check("the email's text part", &body("text/plain"), &plain);
    check("the email's HTML part", &body("text/html"), &html);

    // The terminal: the review queue, every ticket, and `recon explain` of the payment and a
    // line.
    let (code, list) = recon_cmd(&env, &["tickets", "list"]);
    assert_eq!(code, Some(0), "{list}");
    check("recon tickets list", &list, &plain);
    let db = env.db().await;
    let tickets = recon::tickets::list(&db, false).await.expect("tickets");
    assert_eq!(
        tickets.len(),
        INVISIBLE.len() + 1,
        "one ticket per line, one for the payment"
    );
    let mut shown = String::new();
    for t in &tickets {
        let (code, text) = recon_cmd(&env, &["tickets", "show", &t.ticket_id.to_string()]);
        assert_eq!(code, Some(0), "{text}");
        assert_eq!(
            raw(&text),
            None,
            "recon tickets show {}: {text}",
            t.ticket_id
        );
        shown.push_str(&text);
    }
    db.close().await;
    check("recon tickets show", &shown, &plain);
    let mut explained = String::new();
    for id in [payment.clone(), "L-202E-\u{202E}x".to_string()] {
        let (code, text) = recon_cmd(&env, &["explain", &id, "--run", "r1"]);
        assert_eq!(code, Some(0), "{text}");
        explained.push_str(&text);
    }
    assert_eq!(raw(&explained), None, "{explained}");
    assert!(
        explained.contains(&format!("P-{escaped_payment}")),
        "{explained}"
    );
    assert!(explained.contains("L-202E-<U+202E>x"), "{explained}");
}

/// A NUL byte, an escape sequence and a C1 control in statement text: each line is rejected
/// at its own file and line, identically on both databases, and the run completes with the
/// other lines (a tab inside a field is text).
async fn control_characters_reject_their_line_at_the_statement_position(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,SUCCEEDED,,\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:05:00Z,PAYMENT\n\
         L-\0-2,R-2,{IBAN},5.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-3,R-\u{1b}[31m,{IBAN},6.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n\
         L-4,R-4,{IBAN}\u{9b},7.00,EUR,2026-11-10T12:00:00Z,PAYMENT\n\
         L-5,R-5\twith a tab,{IBAN},8.00,EUR,2026-11-10T13:00:00Z,PAYMENT\n"
    ));
    let report = env
        .try_standard_day("r1")
        .await
        .expect("the run completes on both databases");
    let rejected = read_columns(
        &report.out_dir.join("rejected.csv"),
        &["file", "line", "reason"],
    );
    let at: Vec<(String, &str)> = rejected
        .iter()
        .map(|r| {
            let file = std::path::Path::new(&r[0]).file_name().expect("name");
            (
                format!("{}:{}", file.to_string_lossy(), r[1]),
                r[2].as_str(),
            )
        })
        .collect();
    assert_eq!(
        at.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        ["statement.csv:3", "statement.csv:4", "statement.csv:5"],
        "{rejected:?}"
    );
    assert!(
        at[0]
            .1
            .contains("provider_txn_id holds the control character U+0000"),
        "{}",
        at[0].1
    );
    assert!(
        at[1]
            .1
            .contains("reference holds the control character U+001B"),
        "{}",
        at[1].1
    );
    assert!(
        at[2]
            .1
            .contains("recipient holds the control character U+009B"),
        "{}",
        at[2].1
    );
    let ids: Vec<String> = crate::support::outcomes(&report)
        .into_iter()
        .map(|(o, p, l)| format!("{o} {p} {l}"))
        .collect();
    assert_eq!(ids, ["MATCHED P-1 L-1", "ORPHAN_AT_PROVIDER  L-5"]);

    // The ledger import refuses such a file whole, naming file, line and column.
    env.write(
        "bad.csv",
        &format!("{PAYMENTS_HEADER}\nP-\0-9,{IBAN},1.00,EUR,PENDING,2026-11-10T09:00:00Z,,,\n"),
    );
    let db = env.db().await;
    let err = recon::ledger::import::import(&db, &env.path("bad.csv"), None)
        .await
        .expect_err("a NUL in a payment id");
    db.close().await;
    assert!(
        format!("{err:#}").contains("bad.csv:2: column payment_id: the control character U+0000"),
        "{err:#}"
    );
}

on_both_backends!(control_characters_reject_their_line_at_the_statement_position);

// ----------------------------------------------------------------------------------------
// Passwords with any character (issue 33 point 5)
// ----------------------------------------------------------------------------------------

/// Runs `recon ARGS --config <env's config>` and returns (exit code, stdout + stderr).
fn recon_cmd(env: &TestEnv, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args)
        .arg("--config")
        .arg(&env.config_path)
        .env("RECON_LOG", "debug")
        .output()
        .expect("recon binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// `env`'s config with `database_url` replaced by `url` (a TOML basic string, escaped).
fn set_database_url(env: &TestEnv, url: &str) {
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    let line = config
        .lines()
        .find(|l| l.starts_with("database_url = "))
        .expect("a database_url line")
        .to_string();
    let quoted = toml::Value::String(url.to_string()).to_string();
    env.write(
        "recon.toml",
        &config.replace(&line, &format!("database_url = {quoted}")),
    );
}

/// Every command that opens the database, on a URL whose password holds `# / ? @ :` or a
/// space: the password is in no output, and the URL is named masked. Masking used to stop at
/// the first `/ ? #` or space and printed `postgres://u:SeCr#Et8@host/db` in clear.
#[tokio::test]
async fn a_database_password_with_any_character_never_shows() {
    let passwords = [
        "SeCr#Et8",
        "Se/Cr?Et",
        "Se@Cr@Et",
        "Se:Cr:Et",
        "Se Cr Et",
        "Se%23Cr%2FEt",
    ];
    for password in passwords {
        // Nothing listens on port 1 of loopback: every command fails on the database (or,
        // when the URL does not parse, on the URL), and says which, masked.
        let env = TestEnv::new();
        set_database_url(&env, &format!("postgres://u:{password}@127.0.0.1:1/db"));
        for args in [
            &[
                "run",
                "--date",
                "2026-11-10",
                "--as-of",
                "2026-11-20T00:00:00Z",
            ][..],
            &["runs", "list"],
            &["tickets", "list"],
            &["migrate"],
            &["explain", "P-1"],
        ] {
            let (code, text) = recon_cmd(&env, args);
            assert_ne!(code, Some(0), "{args:?}: {text}");
            for part in password.split([' ', '#', '/', '?', '@', ':', '%']) {
                assert!(
                    !text.contains(part),
                    "{password:?} in the output of {args:?}: {text}"
                );
            }
            assert!(
                text.contains("***"),
                "{args:?} names the URL masked: {text}"
            );
        }
    }
}

/// A password with a space is a URL PostgreSQL takes: the run connects and completes, and the
/// password is in no output, no run record and `recon runs list` (the test server trusts
/// loopback, so any password connects).
#[tokio::test]
async fn a_password_with_a_space_connects_and_stays_out_of_the_run_records() {
    let env = TestEnv::on(Backend::Postgres, Settings::default()).await;
    let url = env.config().database_url;
    let rest = url.strip_prefix("postgres://").expect("a postgres URL");
    let (user, host) = rest.split_once('@').expect("the test URL names a user");
    assert!(
        !user.contains(':'),
        "the test server's URL has a password of its own: {}",
        recon::mask::url(&url)
    );
    let secret = "s3cr3t with spaces";
    set_database_url(&env, &format!("postgres://{user}:{secret}@{host}"));
    env.import("", "").await;
    env.statement(&format!(
        "L-1,R-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n"
    ));
    let out = run_bin(&env, "r1", &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let (code, runs) = recon_cmd(&env, &["runs", "list"]);
    assert_eq!(code, Some(0), "{runs}");
    assert!(runs.contains("r1"), "{runs}");
    for (what, shown) in [("recon run", &text), ("recon runs list", &runs)] {
        assert!(!shown.contains("s3cr3t"), "{what}: {shown}");
    }
    let db = env.db().await;
    let mut tx = db.begin().await.expect("tx");
    let records = tx.list_runs(10).await.expect("runs");
    tx.rollback().await.expect("rollback");
    db.close().await;
    assert!(!format!("{records:?}").contains("s3cr3t"), "{records:?}");
    // An unmigrated database stops every command with a message that names it, masked.
    let (_, fresh) = crate::support::fresh_pg_database().await;
    let fresh_rest = fresh.strip_prefix("postgres://").expect("postgres URL");
    let (_, fresh_host) = fresh_rest.split_once('@').expect("user");
    set_database_url(&env, &format!("postgres://{user}:{secret}@{fresh_host}"));
    let (code, text) = recon_cmd(&env, &["runs", "list"]);
    assert_eq!(code, Some(recon::exit::DATABASE), "{text}");
    assert!(text.contains(&format!("{user}:***@")), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
    let name = fresh.rsplit('/').next().expect("database name");
    let _ = std::process::Command::new(crate::support::psql())
        .arg(crate::support::pg_admin_url())
        .arg("-qc")
        .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .output();
}

// ----------------------------------------------------------------------------------------
// PostgreSQL
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn an_unreachable_postgresql_fails_fast_and_says_connection_refused() {
    // Nothing listens on port 1 of loopback: the OS refuses at once.
    let env = TestEnv::with(Settings {
        database_url: Some("postgres://root@127.0.0.1:1/test".into()),
        ..Settings::default()
    });
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(20), env.try_standard_day("r1"))
        .await
        .expect("the run returns")
        .expect_err("no database");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(recon::exit::code_for(&err), recon::exit::DATABASE);
    assert!(format!("{err:#}").contains("connection refused"), "{err:#}");
}

// ----------------------------------------------------------------------------------------
// Secrets
// ----------------------------------------------------------------------------------------

#[tokio::test]
async fn a_database_password_never_shows_whatever_form_the_url_takes() {
    let admin = crate::support::pg_admin_url();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    let cases = [
        // A password in the URL query; the database does not exist, so the run fails (5).
        (
            format!("{base}/recon_no_such_db?password=s3cr3t-query-1"),
            "s3cr3t-query-1",
            recon::exit::DATABASE,
        ),
        // A libpq key-value string: not a URL recon takes (3), said without the password.
        (
            "host=127.0.0.1 user=bob password=s3cr3t-libpq-2 dbname=x".to_string(),
            "s3cr3t-libpq-2",
            recon::exit::CONFIG,
        ),
    ];
    for (url, secret, code) in cases {
        let env = TestEnv::with(Settings {
            database_url: Some(url),
            ..Settings::default()
        });
        let out = run_bin(&env, "r1", &[]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains("***"), "the URL is named, masked: {stderr}");
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stderr}"
        );
    }
    // A TOML error on the database_url line quotes that line: masked too, the position kept.
    let env = TestEnv::new();
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    env.write(
        "recon.toml",
        &config.replace(
            "database_url = \"sqlite://recon.db\"",
            "database_url = \"postgres://bob:s3cr3t-toml-3@db/x",
        ),
    );
    let out = run_bin(&env, "r1", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
    assert!(stderr.contains("postgres://bob:***@db/x"), "{stderr}");
    assert!(!stderr.contains("s3cr3t-toml-3"), "{stderr}");
}
