//! `recon ledger import` on BOTH backends (SQLite file; real PostgreSQL, where rows go through
//! `COPY … FROM STDIN`): every field lands exactly as the file says, one bad row anywhere
//! rejects the whole import and leaves the database as it was, ids already in the database are
//! rejected, and text with the COPY format's special characters round-trips.

use crate::support::{ATTEMPTS_HEADER, Backend, PAYMENTS_HEADER, Settings, TestEnv};
use recon::exit;
use sqlx::Row as _;

const IBAN: &str = "DE89370400440532013000";

/// A table's rows as text (NULL = None), timestamps in the SQLite form on both backends.
type Dump = Vec<Vec<Option<String>>>;

/// Every column the import writes, for payments (updated_at apart) and attempts, in id order.
async fn dump(env: &TestEnv, backend: Backend) -> (Dump, Dump) {
    let (ts, int) = match backend {
        Backend::Sqlite => ("{}", "CAST({} AS TEXT)"),
        Backend::Postgres => (
            "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
            "{}::text",
        ),
    };
    let t = |c: &str| ts.replace("{}", c);
    let payments = format!(
        "SELECT payment_id, recipient_account, {}, currency, status, {}, {}, attempt_id, \
         provider_payment_id FROM payments ORDER BY payment_id",
        int.replace("{}", "amount_minor"),
        t("created_at"),
        t("started_at"),
    );
    let attempts = format!(
        "SELECT attempt_id, payment_id, {}, {}, outcome, provider_payment_id, error_detail \
         FROM payment_attempts ORDER BY attempt_id",
        t("started_at"),
        t("finished_at"),
    );
    (rows(env, &payments, 9).await, rows(env, &attempts, 7).await)
}

async fn rows(env: &TestEnv, sql: &str, width: usize) -> Dump {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match env.db().await.pool {
        recon::db::Pool::Sqlite(p) => sqlx::query(sql)
            .fetch_all(&p)
            .await
            .expect("query")
            .iter()
            .map(|r| (0..width).map(|i| r.get::<Option<String>, _>(i)).collect())
            .collect(),
        recon::db::Pool::Postgres(p) => sqlx::query(sql)
            .fetch_all(&p)
            .await
            .expect("query")
            .iter()
            .map(|r| (0..width).map(|i| r.get::<Option<String>, _>(i)).collect())
            .collect(),
    }
}

fn row(fields: &[Option<&str>]) -> Vec<Option<String>> {
    fields.iter().map(|f| f.map(String::from)).collect()
}

async fn count(env: &TestEnv, table: &str) -> usize {
    let sql = format!("SELECT CAST(count(*) AS TEXT) FROM {table}");
    rows(env, &sql, 1).await[0][0]
        .as_deref()
        .expect("a count")
        .parse()
        .expect("a number")
}

/// Imports files of the job folder through the library, as `recon ledger import` does.
pub(crate) async fn import(
    env: &TestEnv,
    payments: &str,
    attempts: Option<&str>,
) -> anyhow::Result<()> {
    let db = env.db().await;
    let r = recon::ledger::import::import(
        &db,
        &env.path(payments),
        attempts.map(|a| env.path(a)).as_deref(),
    )
    .await;
    db.close().await;
    r.map(|_| ())
}

async fn every_field_round_trips_exactly(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    env.write(
        "payments.csv",
        &format!(
            "{PAYMENTS_HEADER}\n\
             P-1,de89 3704 0044 0532 0130 00,120.00,EUR,succeeded,2026-11-27T08:59:58Z,2026-11-27T09:00:00.123456Z,A-1,PSP-1\n\
             P-2,GB33BUKB20201555555555,1500,JPY,PENDING,2026-11-27T10:00:00+01:00,,,\n\
             P-3,{IBAN},-0.5,EUR,UNKNOWN,2026-11-27 23:30:00.5,2026-11-28T00:30:00+01:00,A-3,\n\
             \u{FF30}-4,{IBAN},1.234,BHD,FAILED,2026-11-27T12:00:00Z,2026-11-27T12:00:00Z, A-4 ,\n"
        ),
    );
    env.write(
        "attempts.csv",
        &format!(
            "{ATTEMPTS_HEADER}\n\
             A-1,P-1,2026-11-27T09:00:00.123456Z,2026-11-27T09:00:03Z,succeeded,PSP-1,\n\
             A-3,P-3,2026-11-27T23:30:00Z,,,,timeout\n\
             A-4,P-4,2026-11-27T12:00:00Z,2026-11-27T12:00:01Z,FAILED,,\"card declined, code 51\"\n"
        ),
    );
    let before = chrono::Utc::now();
    import(&env, "payments.csv", Some("attempts.csv"))
        .await
        .expect("import");
    let (payments, attempts) = dump(&env, b).await;
    assert_eq!(
        payments,
        [
            row(&[
                Some("P-1"),
                Some(IBAN),
                Some("12000"),
                Some("EUR"),
                Some("SUCCEEDED"),
                Some("2026-11-27 08:59:58.000000"),
                Some("2026-11-27 09:00:00.123456"),
                Some("A-1"),
                Some("PSP-1"),
            ]),
            row(&[
                Some("P-2"),
                Some("GB33BUKB20201555555555"),
                Some("1500"),
                Some("JPY"),
                Some("PENDING"),
                Some("2026-11-27 09:00:00.000000"),
                None,
                None,
                None,
            ]),
            row(&[
                Some("P-3"),
                Some(IBAN),
                Some("-50"),
                Some("EUR"),
                Some("UNKNOWN"),
                Some("2026-11-27 23:30:00.500000"),
                Some("2026-11-27 23:30:00.000000"),
                Some("A-3"),
                None,
            ]),
            row(&[
                Some("P-4"),
                Some(IBAN),
                Some("1234"),
                Some("BHD"),
                Some("FAILED"),
                Some("2026-11-27 12:00:00.000000"),
                Some("2026-11-27 12:00:00.000000"),
                Some("A-4"),
                None,
            ]),
        ]
    );
    assert_eq!(
        attempts,
        [
            row(&[
                Some("A-1"),
                Some("P-1"),
                Some("2026-11-27 09:00:00.123456"),
                Some("2026-11-27 09:00:03.000000"),
                Some("SUCCEEDED"),
                Some("PSP-1"),
                None,
            ]),
            row(&[
                Some("A-3"),
                Some("P-3"),
                Some("2026-11-27 23:30:00.000000"),
                None,
                None,
                None,
                Some("timeout"),
            ]),
            row(&[
                Some("A-4"),
                Some("P-4"),
                Some("2026-11-27 12:00:00.000000"),
                Some("2026-11-27 12:00:01.000000"),
                Some("FAILED"),
                None,
                Some("card declined, code 51"),
            ]),
        ]
    );
    // One updated_at for the whole import, the time it ran.
    let updated = match b {
        Backend::Sqlite => "SELECT DISTINCT updated_at || 'Z' FROM payments",
        Backend::Postgres => {
            "SELECT DISTINCT to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.USZ') FROM payments"
        }
    };
    let updated = rows(&env, updated, 1).await;
    assert_eq!(updated.len(), 1, "{updated:?}");
    let at = chrono::NaiveDateTime::parse_from_str(
        updated[0][0].as_deref().expect("updated_at"),
        "%Y-%m-%d %H:%M:%S%.fZ",
    )
    .expect("updated_at form")
    .and_utc();
    assert!(before <= at && at <= chrono::Utc::now(), "{at}");
    // Stored types: integers as integers, text as text, NULL as NULL (not '' or 'NULL').
    if b == Backend::Sqlite {
        let types = rows(
            &env,
            "SELECT typeof(payment_id) || typeof(amount_minor) || typeof(created_at) \
             || typeof(started_at) || typeof(provider_payment_id) FROM payments \
             WHERE payment_id = 'P-2'",
            1,
        )
        .await;
        assert_eq!(types[0][0].as_deref(), Some("textintegertextnullnull"));
    }
    // The import changes no status, so it writes no history.
    assert_eq!(count(&env, "payment_status_history").await, 0);
    // And the ledger it wrote is the one a run reads.
    let report = env
        .run("2026-11-27", "2026-12-20T00:00:00Z", true, "r1")
        .await;
    assert!(
        crate::support::outcomes(&report)
            .iter()
            .any(|(o, p, _)| o == "NOT_SUBMITTED" && p == "P-2"),
        "{:?}",
        crate::support::outcomes(&report)
    );
}

/// Makes the database itself (a trigger on SQLite, a CHECK constraint on PostgreSQL) refuse
/// rows of `table` whose `column` is `value`: a fault only the database can find.
async fn refuse(env: &TestEnv, b: Backend, table: &str, column: &str, value: &str) {
    let sql = match b {
        Backend::Sqlite => format!(
            "CREATE TRIGGER refuse_{column} BEFORE INSERT ON {table} WHEN NEW.{column} = '{value}' \
             BEGIN SELECT RAISE(ABORT, 'refused {value}'); END"
        ),
        Backend::Postgres => format!(
            "ALTER TABLE {table} ADD CONSTRAINT refuse_{column} \
             CHECK ({column} IS DISTINCT FROM '{value}')"
        ),
    };
    let sql = sqlx::AssertSqlSafe(sql);
    match env.db().await.pool {
        recon::db::Pool::Sqlite(p) => sqlx::query(sql).execute(&p).await.map(|_| ()),
        recon::db::Pool::Postgres(p) => sqlx::query(sql).execute(&p).await.map(|_| ()),
    }
    .expect("refusing rows");
}

/// Replaces `from` with `to` in the job folder's file `name`.
fn edit(env: &TestEnv, name: &str, from: &str, to: &str) {
    let path = env.path(name);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{name} has no {from:?}");
    std::fs::write(&path, text.replace(from, to)).expect("write");
}

/// The message (with its causes) and the error of an import that must fail.
async fn rejection(
    env: &TestEnv,
    payments: &str,
    attempts: Option<&str>,
) -> (String, anyhow::Error) {
    let err = import(env, payments, attempts)
        .await
        .expect_err("the import must be rejected");
    (format!("{err:#}"), err)
}

/// Asserts that the import is rejected with a message containing `expected`; returns it.
async fn rejected_with(
    env: &TestEnv,
    payments: &str,
    attempts: Option<&str>,
    expected: &str,
) -> String {
    let (msg, _) = rejection(env, payments, attempts).await;
    assert!(msg.contains(expected), "{msg}");
    msg
}

/// Writes `n` payments (each with one attempt) named `{prefix}{i}`; `bad(i)` may replace row i.
fn write_large(env: &TestEnv, prefix: &str, n: usize, bad: impl Fn(usize) -> Option<String>) {
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for i in 0..n {
        let id = format!("{prefix}{i:06}");
        match bad(i) {
            Some(row) => p.push_str(&row),
            None => p.push_str(&format!(
                "{id},{IBAN},{}.{:02},EUR,SUCCEEDED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,A{id},",
                i / 100,
                i % 100
            )),
        }
        p.push('\n');
        a.push_str(&format!(
            "A{id},{id},2026-11-27T09:00:00Z,2026-11-27T09:00:01Z,SUCCEEDED,,\n"
        ));
    }
    env.write(&format!("{prefix}payments.csv"), &p);
    env.write(&format!("{prefix}attempts.csv"), &a);
}

async fn a_bad_row_in_a_large_file_rejects_everything(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    write_large(&env, "OK", 50, |_| None);
    import(&env, "OKpayments.csv", Some("OKattempts.csv"))
        .await
        .expect("first import");
    let before = dump(&env, b).await;
    // Row 12,344 (line 12,346: the header is line 1) has an amount finer than the currency
    // allows.
    write_large(&env, "BIG", 20_000, |i| {
        (i == 12_344).then(|| {
            format!("BIG{i:06},{IBAN},1.001,EUR,SUCCEEDED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,ABIG{i:06},")
        })
    });
    let (msg, err) = rejection(&env, "BIGpayments.csv", Some("BIGattempts.csv")).await;
    assert_eq!(exit::code_for(&err), exit::INPUT, "{msg}");
    assert!(
        msg.contains("BIGpayments.csv:12346:") && msg.contains("1.001"),
        "{msg}"
    );
    assert!(msg.contains("1 row(s) rejected, nothing imported"), "{msg}");
    assert_eq!(dump(&env, b).await, before, "the database is unchanged");

    // A row only the database rejects, deep in the stream (a constraint the parser does not
    // know of): the whole import is rolled back, and the message names the file's line.
    refuse(&env, b, "payments", "recipient_account", "BLOCKED").await;
    write_large(&env, "DB", 20_000, |i| {
        (i == 15_000).then(|| {
            format!("DB{i:06},blocked,1.00,EUR,SUCCEEDED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,ADB{i:06},")
        })
    });
    let msg = rejected_with(
        &env,
        "DBpayments.csv",
        Some("DBattempts.csv"),
        "DBpayments.csv:15002:",
    )
    .await;
    assert!(msg.contains("nothing imported"), "{msg}");
    if b == Backend::Postgres {
        assert!(
            msg.contains("line 15001 of the COPY stream into payments"),
            "{msg}"
        );
    }
    assert_eq!(dump(&env, b).await, before, "the database is unchanged");

    // A bad attempt late in the attempts file also rejects the payments before it.
    write_large(&env, "ATT", 20_000, |_| None);
    edit(
        &env,
        "ATTattempts.csv",
        "AATT019000,ATT019000,",
        "AATT019000,NOPE,",
    );
    rejected_with(
        &env,
        "ATTpayments.csv",
        Some("ATTattempts.csv"),
        "ATTattempts.csv:19002: column payment_id: \"NOPE\" is not a known payment",
    )
    .await;
    assert_eq!(dump(&env, b).await, before, "the database is unchanged");
}

async fn duplicates_in_the_file_name_both_lines(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    write_large(&env, "D", 3_000, |i| {
        (i == 2_500).then(|| format!("D000007,{IBAN},1.00,EUR,PENDING,2026-11-27T08:00:00Z,,,"))
    });
    edit(
        &env,
        "Dattempts.csv",
        "AD000100,D000100,",
        "AD000009,D000100,",
    );
    rejected_with(
        &env,
        "Dpayments.csv",
        Some("Dattempts.csv"),
        "Dpayments.csv:2502: payment_id \"D000007\" also at line 9",
    )
    .await;
    // The payments file is fixed; the attempts file still repeats an attempt id.
    write_large(&env, "E", 3_000, |_| None);
    edit(
        &env,
        "Eattempts.csv",
        "AE000100,E000100,",
        "AE000009,E000100,",
    );
    rejected_with(
        &env,
        "Epayments.csv",
        Some("Eattempts.csv"),
        "Eattempts.csv:102: attempt_id \"AE000009\" also at line 11",
    )
    .await;
    assert_eq!(count(&env, "payments").await, 0);
}

async fn ids_already_in_the_database_reject_the_import(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    write_large(&env, "X", 2_000, |_| None);
    import(&env, "Xpayments.csv", Some("Xattempts.csv"))
        .await
        .expect("first import");
    // New payments plus two that are already there (X000042 and X001999).
    write_large(&env, "Y", 3_000, |i| match i {
        10 => Some(format!(
            "X000042,{IBAN},1.00,EUR,PENDING,2026-11-27T08:00:00Z,,,"
        )),
        2_900 => Some(format!(
            "X001999,{IBAN},1.00,EUR,PENDING,2026-11-27T08:00:00Z,,,"
        )),
        _ => None,
    });
    edit(
        &env,
        "Yattempts.csv",
        "AY000010,Y000010,",
        "AY000010,Y000011,",
    );
    edit(
        &env,
        "Yattempts.csv",
        "AY002900,Y002900,",
        "AY002900,Y002901,",
    );
    let (msg, err) = rejection(&env, "Ypayments.csv", Some("Yattempts.csv")).await;
    assert_eq!(exit::code_for(&err), exit::INPUT, "{msg}");
    assert!(
        msg.contains("payment_id \"X000042\" is already in the database")
            && msg.contains("payment_id \"X001999\" is already in the database")
            && msg.contains("2 row(s) rejected"),
        "{msg}"
    );
    assert_eq!(count(&env, "payments").await, 2_000);
    assert_eq!(count(&env, "payment_attempts").await, 2_000);
    // Attempts may belong to payments imported earlier: this file has only new payments,
    // and its attempts point at both.
    env.write(
        "z.csv",
        &format!("{PAYMENTS_HEADER}\nZ-1,{IBAN},1.00,EUR,PENDING,2026-11-27T08:00:00Z,,,\n"),
    );
    env.write(
        "za.csv",
        &format!(
            "{ATTEMPTS_HEADER}\nAZ-1,Z-1,2026-11-27T09:00:00Z,,,,\nAX-2,X000042,2026-11-27T09:00:00Z,,,,\n"
        ),
    );
    import(&env, "z.csv", Some("za.csv"))
        .await
        .expect("new ids");
    assert_eq!(count(&env, "payments").await, 2_001);
    assert_eq!(count(&env, "payment_attempts").await, 2_002);
}

async fn special_characters_in_text_round_trip(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    let details = [
        "tab\there",
        "quote \"inside\" and 'single'",
        "back\\slash \\N \\. \\t",
        "comma, here; semicolon",
        "line one\nline two\r\nline three",
        "ünïcödé — ✓",
    ];
    let quoted = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for (i, d) in details.iter().enumerate() {
        p.push_str(&format!(
            "P-{i},{IBAN},1.00,EUR,FAILED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,A-{i},{}\n",
            quoted(&format!("psp\\{i}\t\"x\""))
        ));
        a.push_str(&format!(
            "A-{i},P-{i},2026-11-27T09:00:00Z,,FAILED,{},{}\n",
            quoted(&format!("psp\\{i}\t\"x\"")),
            quoted(d)
        ));
    }
    env.write("p.csv", &p);
    env.write("a.csv", &a);
    import(&env, "p.csv", Some("a.csv")).await.expect("import");
    let (payments, attempts) = dump(&env, b).await;
    for (i, d) in details.iter().enumerate() {
        let psp = format!("psp\\{i}\t\"x\"");
        assert_eq!(payments[i][8].as_deref(), Some(psp.as_str()));
        assert_eq!(attempts[i][5].as_deref(), Some(psp.as_str()));
        assert_eq!(attempts[i][6].as_deref(), Some(*d), "detail {i}");
    }
    // NUL cannot be stored in PostgreSQL text: rejected with file:line on both backends.
    env.write(
        "nul.csv",
        &format!("{PAYMENTS_HEADER}\nQ-1,{IBAN},1.00,EUR,PENDING,2026-11-27T08:00:00Z,,,\nQ-2,{IBAN},1.00,EUR,FAILED,2026-11-27T08:00:00Z,2026-11-27T08:00:00Z,A\0,\n"),
    );
    rejected_with(
        &env,
        "nul.csv",
        None,
        "nul.csv:3: column attempt_id: the control character U+0000",
    )
    .await;
    assert_eq!(count(&env, "payments").await, details.len());
}

/// The ledger tables' indexes and constraints, by name.
async fn schema(env: &TestEnv, b: Backend) -> Vec<String> {
    let sql = match b {
        Backend::Sqlite => {
            "SELECT name || ':' || coalesce(sql, '') FROM sqlite_master \
             WHERE tbl_name IN ('payments', 'payment_attempts') ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT indexdef FROM pg_indexes WHERE tablename IN ('payments', 'payment_attempts') \
             UNION ALL SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint \
             WHERE conrelid IN ('payments'::regclass, 'payment_attempts'::regclass) ORDER BY 1"
        }
    };
    rows(env, sql, 1)
        .await
        .into_iter()
        .map(|r| r[0].clone().unwrap_or_default())
        .collect()
}

/// Into an empty ledger the import builds secondary indexes (and, on PostgreSQL, checks foreign
/// keys) after the rows: a failure half-way leaves them as they were, and a success rebuilds
/// every one of them.
async fn a_bulk_load_into_an_empty_ledger_keeps_its_schema(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    let before = schema(&env, b).await;
    assert!(before.len() >= 5, "{before:?}");
    refuse(&env, b, "payment_attempts", "error_detail", "blocked").await;
    let with_check = schema(&env, b).await;
    write_large(&env, "F", 20_000, |_| None);
    edit(
        &env,
        "Fattempts.csv",
        "AF017000,F017000,2026-11-27T09:00:00Z,2026-11-27T09:00:01Z,SUCCEEDED,,",
        "AF017000,F017000,2026-11-27T09:00:00Z,2026-11-27T09:00:01Z,FAILED,,blocked",
    );
    let msg = rejected_with(
        &env,
        "Fpayments.csv",
        Some("Fattempts.csv"),
        "Fattempts.csv:17002:",
    )
    .await;
    if b == Backend::Postgres {
        assert!(
            msg.contains("line 17001 of the COPY stream into payment_attempts"),
            "{msg}"
        );
    }
    assert_eq!(count(&env, "payments").await, 0, "{msg}");
    assert_eq!(schema(&env, b).await, with_check);
    write_large(&env, "G", 20_000, |_| None);
    import(&env, "Gpayments.csv", Some("Gattempts.csv"))
        .await
        .expect("import");
    assert_eq!(schema(&env, b).await, with_check);
    assert_eq!(count(&env, "payment_attempts").await, 20_000);
    // The foreign key holds again: an attempt of no payment is refused.
    let orphan = "INSERT INTO payment_attempts (attempt_id, payment_id, started_at) \
                  VALUES ('AX', 'nope', '2026-11-27 09:00:00.000000')";
    let refused = match env.db().await.pool {
        recon::db::Pool::Sqlite(p) => sqlx::query(orphan).execute(&p).await.is_err(),
        recon::db::Pool::Postgres(p) => sqlx::query(orphan).execute(&p).await.is_err(),
    };
    assert!(refused, "the foreign key is enforced after the import");
}

/// `(payment_id, merchant_id)` of every payment, in id order.
async fn merchants(env: &TestEnv) -> Vec<(String, Option<String>)> {
    rows(
        env,
        "SELECT payment_id, merchant_id FROM payments ORDER BY payment_id",
        2,
    )
    .await
    .into_iter()
    .map(|r| (r[0].clone().expect("payment_id"), r[1].clone()))
    .collect()
}

/// Issue 34: the payments file may name each payment's partition in a 10th column
/// `merchant_id`, stored in `payments.merchant_id` (empty → NULL); a file without it imports as
/// before, and a 10th column by another name is refused before anything is imported.
async fn a_merchant_column_round_trips_and_a_misspelt_one_is_refused(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    env.write(
        "p10.csv",
        &format!(
            "{PAYMENTS_HEADER},merchant_id\n\
             P-1,{IBAN},1.00,EUR,SUCCEEDED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,A-1,PSP-1,M01\n\
             P-2,{IBAN},2.00,EUR,PENDING,2026-11-27T08:00:00Z,,,,\n\
             P-3,{IBAN},3.00,EUR,UNKNOWN,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,A-3,, M02 \n"
        ),
    );
    import(&env, "p10.csv", None).await.expect("10 columns");
    assert_eq!(
        merchants(&env).await,
        [
            ("P-1".to_string(), Some("M01".to_string())),
            ("P-2".to_string(), None),
            ("P-3".to_string(), Some("M02".to_string())),
        ]
    );
    // The other columns land as from a 9-column file.
    let (payments, _) = dump(&env, b).await;
    assert_eq!(
        payments[0],
        row(&[
            Some("P-1"),
            Some(IBAN),
            Some("100"),
            Some("EUR"),
            Some("SUCCEEDED"),
            Some("2026-11-27 08:00:00.000000"),
            Some("2026-11-27 09:00:00.000000"),
            Some("A-1"),
            Some("PSP-1"),
        ])
    );
    if b == Backend::Sqlite {
        let types = rows(
            &env,
            "SELECT group_concat(typeof(merchant_id), ',') FROM \
             (SELECT merchant_id FROM payments ORDER BY payment_id)",
            1,
        )
        .await;
        assert_eq!(types[0][0].as_deref(), Some("text,null,text"));
    }

    // Nine columns, as every ledger file before partitions: imported, merchant_id NULL.
    env.write(
        "p9.csv",
        &format!(
            "{PAYMENTS_HEADER}\nP-4,{IBAN},4.00,EUR,SUCCEEDED,2026-11-27T08:00:00Z,2026-11-27T09:00:00Z,A-4,\n"
        ),
    );
    import(&env, "p9.csv", None).await.expect("9 columns");
    let after = merchants(&env).await;
    assert_eq!(after.len(), 4);
    assert_eq!(after[3], ("P-4".to_string(), None));

    // A misspelt 10th column: refused, naming the file, the header line and the column.
    env.write(
        "bad.csv",
        &format!(
            "{PAYMENTS_HEADER},merchant\nP-5,{IBAN},5.00,EUR,PENDING,2026-11-27T08:00:00Z,,,,M01\n"
        ),
    );
    let (msg, err) = rejection(&env, "bad.csv", None).await;
    assert_eq!(exit::code_for(&err), exit::INPUT, "{msg}");
    assert!(
        msg.contains("bad.csv:1: column 10 \"merchant\" is not a payments column")
            && msg.contains("merchant_id"),
        "{msg}"
    );
    assert_eq!(merchants(&env).await, after, "nothing imported");
    // A row with a field too many for its header is still refused by line.
    env.write(
        "ragged.csv",
        &format!("{PAYMENTS_HEADER}\nP-6,{IBAN},6.00,EUR,PENDING,2026-11-27T08:00:00Z,,,,M01\n"),
    );
    rejected_with(
        &env,
        "ragged.csv",
        None,
        "ragged.csv:2: 10 fields, header has 9",
    )
    .await;
    assert_eq!(merchants(&env).await, after, "nothing imported");
}

on_both_backends!(
    a_merchant_column_round_trips_and_a_misspelt_one_is_refused,
    a_bulk_load_into_an_empty_ledger_keeps_its_schema,
    every_field_round_trips_exactly,
    a_bad_row_in_a_large_file_rejects_everything,
    duplicates_in_the_file_name_both_lines,
    ids_already_in_the_database_reject_the_import,
    special_characters_in_text_round_trip,
);
