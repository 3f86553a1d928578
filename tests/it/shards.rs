//! Partitioned nights (issue 34): the same generated night, run once as one process and once
//! as N = 1, 3 and 4 shard processes plus `recon gather` on loopback PostgreSQL, must give the
//! same outcomes, transitions, tickets, cases and report content. A shard killed mid-run is
//! re-run alone and lands once; a gather whose shards are missing names them and exits 13;
//! SQLite, unbound sources and a range run as shards are refused.
//!
//! The nights are `recon-tools generate`'s realistic data (twins, near misses, duplicates,
//! money mismatches, retries, orphans, busy recipients) in five merchants, each with its own
//! provider file and source: `generate --partitions 5` (the bundled schema's `merchant_id`,
//! scenario groups inside a merchant, look-alike pairs across merchants that only the wall
//! tells apart), and the unpartitioned world split afterwards by the test (a payment's merchant
//! follows its recipient, a line's the payment it names, else its recipient), read through a
//! custom `payments_query` that joins the merchant from a table of its own.

use crate::support::{fresh_pg_database, pg_admin_url, pg_described, psql, write_control};
use recon_tools::generate::{self, GenerateOptions, GenerateReport};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const MERCHANTS: [&str; 5] = ["M1", "M2", "M3", "M4", "M5"];

fn canonical(account: &str) -> String {
    account
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_uppercase()
}

fn merchant_of(recipient: &str) -> &'static str {
    let h = recon::partition::stable_hash(&canonical(recipient));
    // Skewed: M1 gets about a third.
    MERCHANTS[[0, 0, 1, 2, 3, 4][(h % 6) as usize]]
}

/// A generated night split into merchants, in `dir`: payments.csv, attempts.csv,
/// merchants.csv (payment_id, merchant), statement-M*.csv with control files, and the job
/// file template `recon.toml` (database URL and output folder filled in per database).
pub(crate) struct Night {
    pub(crate) dir: PathBuf,
    pub(crate) report: GenerateReport,
    merchants: Vec<(String, String)>,
}

/// `recon-tools generate --partitions k`: the bundled schema's merchant_id column, one
/// provider file per merchant, scenario groups inside one merchant, and cross-merchant
/// look-alikes that only the wall tells apart.
pub(crate) fn generated_night(dir: &Path, payments: usize, seed: u64, k: u32) -> Night {
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
    let report = generate::generate(&GenerateOptions {
        partitions: k,
        ..GenerateOptions::new(dir, payments, seed, date)
    })
    .unwrap();
    assert!(report.look_alike_pairs >= 1);
    let text = std::fs::read_to_string(&report.files.config).unwrap();
    let job: String = text
        .lines()
        .map(|l| {
            if l.starts_with("database_url") {
                "database_url = \"@URL@\"".to_string()
            } else if l.starts_with("output_dir") {
                "output_dir = \"@OUT@\"".to_string()
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    assert!(job.contains("[partition]"), "{job}");
    // The night's one email, as a file in its folder.
    let job = format!("{job}\n{}", crate::report::file_email());
    std::fs::write(dir.join("recon.toml.in"), job).unwrap();
    Night {
        dir: dir.to_path_buf(),
        report,
        merchants: Vec::new(),
    }
}

/// What the test plants besides the generator's crossing lines (issue 40 point 6), each the
/// outcome it must get: (payment id or a line's provider id, outcome, provider ids of its row).
type Planted = Vec<(&'static str, &'static str, &'static str)>;

/// Plants, in a generated partitioned night of at least three merchants (before its ledger is
/// imported), lines that name payments of other merchants where only the whole-ledger lookup or
/// another merchant's shard can see them:
/// - an old FAILED payment of M02 (weeks before the night, beyond its ledger range) whose payout
///   is booked tonight in M01's file: FAILED_BUT_PAID, reported though no line of M02 names it;
/// - an old SUCCEEDED payment of M03 paid again tonight in M03's own file and in M01's: one
///   DUPLICATE_AT_PROVIDER row with both lines;
/// - a line in M01's file whose reference names an UNKNOWN payment of M02 and whose provider id
///   is the one recorded for a SUCCEEDED payment of M03: one payout named for two payments,
///   both CONTRADICTED (never resolved on it), and the line CONTRADICTED;
/// - a line in M02's own file whose reference names an UNKNOWN payment of M02 and whose
///   provider id is recorded for a SUCCEEDED payment of M03: the same (M02's shard must not
///   resolve its payment on a line that also names another shard's).
fn with_cross_partition_cases(n: &Night) -> Planted {
    const OLD_FAILED: &str = "0c0ffee0-0000-4000-8000-000000000001";
    const OLD_PAID: &str = "0c0ffee0-0000-4000-8000-000000000002";
    const NAMED_BY_REF: &str = "0c0ffee0-0000-4000-8000-000000000003";
    const NAMED_BY_ID: &str = "0c0ffee0-0000-4000-8000-000000000004";
    const OWN_BY_REF: &str = "0c0ffee0-0000-4000-8000-000000000005";
    const OTHER_BY_ID: &str = "0c0ffee0-0000-4000-8000-000000000006";
    let append = |file: &str, rows: &[String]| {
        let path = n.dir.join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        for r in rows {
            text.push_str(r);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        if file.starts_with("statement-") {
            write_control(&path);
        }
    };
    let day = n.report.date;
    let at = |h: u32| format!("{day}T{h:02}:00:00Z");
    append(
        "payments.csv",
        &[
            format!(
                "{OLD_FAILED},DE89370400440532013000,310.00,EUR,FAILED,2026-10-01T08:00:00Z,2026-10-01T08:00:01Z,0c0ffee0-a000-4000-8000-000000000001,,M02"
            ),
            format!(
                "{OLD_PAID},DE75512108001245126199,420.00,EUR,SUCCEEDED,2026-10-02T08:00:00Z,2026-10-02T08:00:01Z,0c0ffee0-a000-4000-8000-000000000002,pt_cross_old_paid_a,M03"
            ),
            format!(
                "{NAMED_BY_REF},DE02120300000000202051,123.45,EUR,UNKNOWN,{},{},0c0ffee0-a000-4000-8000-000000000003,,M02",
                at(9),
                at(9)
            ),
            format!(
                "{NAMED_BY_ID},DE02500105170137075030,234.56,EUR,SUCCEEDED,{},{},0c0ffee0-a000-4000-8000-000000000004,pt_cross_two_names,M03",
                at(10),
                at(10)
            ),
            format!(
                "{OWN_BY_REF},DE12500105170648489890,345.67,EUR,UNKNOWN,{},{},0c0ffee0-a000-4000-8000-000000000005,,M02",
                at(9),
                at(9)
            ),
            format!(
                "{OTHER_BY_ID},DE44500105175407324931,456.78,EUR,SUCCEEDED,{},{},0c0ffee0-a000-4000-8000-000000000006,pt_cross_own_and_other,M03",
                at(10),
                at(10)
            ),
        ],
    );
    append(
        "attempts.csv",
        &[
            format!(
                "0c0ffee0-a000-4000-8000-000000000001,{OLD_FAILED},2026-10-01T08:00:01Z,2026-10-01T08:00:05Z,FAILED,,insufficient funds"
            ),
            format!(
                "0c0ffee0-a000-4000-8000-000000000002,{OLD_PAID},2026-10-02T08:00:01Z,2026-10-02T08:00:05Z,SUCCEEDED,pt_cross_old_paid_a,"
            ),
            format!(
                "0c0ffee0-a000-4000-8000-000000000003,{NAMED_BY_REF},{},,UNKNOWN,,timeout",
                at(9)
            ),
            format!(
                "0c0ffee0-a000-4000-8000-000000000004,{NAMED_BY_ID},{},{},SUCCEEDED,pt_cross_two_names,",
                at(10),
                at(10)
            ),
            format!(
                "0c0ffee0-a000-4000-8000-000000000005,{OWN_BY_REF},{},,UNKNOWN,,timeout",
                at(9)
            ),
            format!(
                "0c0ffee0-a000-4000-8000-000000000006,{OTHER_BY_ID},{},{},SUCCEEDED,pt_cross_own_and_other,",
                at(10),
                at(10)
            ),
        ],
    );
    append(
        "statement-M01.csv",
        &[
            format!(
                "pt_cross_old_failed,{OLD_FAILED},DE89370400440532013000,310.00,EUR,{},PAYMENT",
                at(11)
            ),
            format!(
                "pt_cross_old_paid_b,{OLD_PAID},DE75512108001245126199,420.00,EUR,{},PAYMENT",
                at(12)
            ),
            format!(
                "pt_cross_two_names,{NAMED_BY_REF},DE02120300000000202051,123.45,EUR,{},PAYMENT",
                at(13)
            ),
        ],
    );
    append(
        "statement-M02.csv",
        &[format!(
            "pt_cross_own_and_other,{OWN_BY_REF},DE12500105170648489890,345.67,EUR,{},PAYMENT",
            at(14)
        )],
    );
    append(
        "statement-M03.csv",
        &[format!(
            "pt_cross_old_paid_a,{OLD_PAID},DE75512108001245126199,420.00,EUR,{},PAYMENT",
            at(12)
        )],
    );
    vec![
        (OLD_FAILED, "FAILED_BUT_PAID", "pt_cross_old_failed"),
        (
            OLD_PAID,
            "DUPLICATE_AT_PROVIDER",
            "pt_cross_old_paid_a;pt_cross_old_paid_b",
        ),
        (NAMED_BY_REF, "CONTRADICTED", "pt_cross_two_names"),
        (NAMED_BY_ID, "CONTRADICTED", "pt_cross_two_names"),
        ("pt_cross_two_names", "CONTRADICTED", "pt_cross_two_names"),
        (OWN_BY_REF, "CONTRADICTED", "pt_cross_own_and_other"),
        (OTHER_BY_ID, "CONTRADICTED", "pt_cross_own_and_other"),
        (
            "pt_cross_own_and_other",
            "CONTRADICTED",
            "pt_cross_own_and_other",
        ),
    ]
}

/// The payouts of a generated partitioned night reach one bank account that every partition
/// shares (issue 34: read once, by the gather). Each merchant's provider lines become one
/// settlement batch per currency (a `batch` column), and `bank.csv` (a source without
/// `partition`) gets one credit per batch: exactly its net, but for the first batch of the
/// second merchant (5.00 more: a mismatch) and the first batch of the third (two equal
/// credits: ambiguous); plus a credit no batch explains and a debit. Returns each batch's
/// (merchant, currency) net and the status its credits call for.
fn with_shared_bank(
    n: &Night,
) -> BTreeMap<(String, String), (rust_decimal::Decimal, &'static str)> {
    use rust_decimal::Decimal;
    let mut nets: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    for p in &n.report.partitions {
        let path = &p.statement;
        let mut rd = csv::Reader::from_path(path).unwrap();
        let mut header = rd.headers().unwrap().clone();
        let (amount, currency) = (
            header.iter().position(|c| c == "amount").unwrap(),
            header.iter().position(|c| c == "currency").unwrap(),
        );
        let records: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        header.push_field("batch");
        let mut w = csv::Writer::from_path(path).unwrap();
        w.write_record(&header).unwrap();
        for mut r in records {
            let key = (p.name.clone(), r[currency].to_string());
            *nets.entry(key).or_default() += r[amount].parse::<Decimal>().unwrap();
            r.push_field(&format!("B-{}", p.name));
            w.write_record(&r).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        write_control(path);
    }
    let names: Vec<&str> = n
        .report
        .partitions
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let at = format!("{}T12:00:00Z", n.report.date);
    let bank = n.dir.join("bank.csv");
    let mut w = csv::Writer::from_path(&bank).unwrap();
    w.write_record(generate::STATEMENT_HEADER).unwrap();
    let mut credit = |id: String, amount: String, currency: &str| {
        w.write_record([id.as_str(), "", "", &amount, currency, &at, "PAYMENT"])
            .unwrap();
    };
    let mut expected = BTreeMap::new();
    for (i, ((m, c), net)) in nets.into_iter().enumerate() {
        let first = !expected.keys().any(|(x, _): &(String, String)| *x == m);
        let (amount, status) = if first && m == names[1] {
            (net + Decimal::new(500, 2), "SETTLEMENT_MISMATCH")
        } else if first && m == names[2] {
            credit(format!("BANK-{i:03}b"), net.to_string(), &c);
            (net, "AMBIGUOUS")
        } else {
            (net, "SETTLED")
        };
        credit(format!("BANK-{i:03}"), amount.to_string(), &c);
        expected.insert((m, c), (net, status));
    }
    credit("BANK-900".into(), "77.00".into(), "SEK");
    credit("BANK-901".into(), "-12.34".into(), "EUR");
    w.flush().unwrap();
    drop(w);
    write_control(&bank);
    // The job: the batch column, the bank source, the settlement rules.
    let job = std::fs::read_to_string(n.dir.join("recon.toml.in")).unwrap();
    let start = job.find("[[source]]").unwrap();
    let end = job[start..].find("\n\n[source.columns]").unwrap() + start;
    let bank_source = job[start..end]
        .lines()
        .filter(|l| !l.starts_with("partition") && !l.starts_with("name") && !l.starts_with("path"))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replacen(
            "[[source]]\n",
            "[[source]]\nname = \"bank\"\nrole = \"bank\"\npath = \"bank.csv\"\n",
            1,
        );
    let columns = "[source.columns]\nprovider_txn_id = \"txn_id\"\nreference = \"reference\"\n\
                   recipient = \"beneficiary\"\namount = \"amount\"\ncurrency = \"currency\"\n\
                   booked_at = \"booked_at\"\nkind = \"type\"\n";
    let job = format!(
        "rules_dir = \"rules\"\n{}\n{bank_source}\n{columns}",
        job.replace("kind = \"type\"\n", "kind = \"type\"\nbatch = \"batch\"\n")
    );
    std::fs::write(n.dir.join("recon.toml.in"), job).unwrap();
    let rules = n.dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("default.toml"),
        include_str!("../../rules/default.toml"),
    )
    .unwrap();
    let settlement: String = names
        .iter()
        .map(|m| {
            format!(
                "[[settlement]]\nid = \"payout-{m}\"\nprovider = \"provider-{m}\"\nbank = \"bank\"\n\
                 group_by = \"batch\"\nwindow_before = \"30d\"\nwindow_after = \"30d\"\n\n"
            )
        })
        .collect();
    std::fs::write(rules.join("settlement.toml"), settlement).unwrap();
    expected
}

pub(crate) fn night(dir: &Path, payments: usize, seed: u64) -> Night {
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
    let report = generate::generate(&GenerateOptions::new(dir, payments, seed, date)).unwrap();
    // Payments: merchant by recipient; provider ids and ids name them.
    let mut rd = csv::Reader::from_path(dir.join("payments.csv")).unwrap();
    let h = rd.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (pid, rcpt, ppid) = (
        col("payment_id"),
        col("recipient_account"),
        col("provider_payment_id"),
    );
    let mut merchants = Vec::new();
    let mut by_key: HashMap<String, &'static str> = HashMap::new();
    for r in rd.records() {
        let r = r.unwrap();
        let m = merchant_of(&r[rcpt]);
        merchants.push((r[pid].to_string(), m.to_string()));
        by_key.insert(r[pid].to_uppercase(), m);
        if !r[ppid].is_empty() {
            by_key.insert(r[ppid].to_uppercase(), m);
        }
    }
    let mut ra = csv::Reader::from_path(dir.join("attempts.csv")).unwrap();
    let ha = ra.headers().unwrap().clone();
    let (apid, appid) = (
        ha.iter().position(|c| c == "payment_id").unwrap(),
        ha.iter().position(|c| c == "provider_payment_id").unwrap(),
    );
    let mut extra = Vec::new();
    for r in ra.records() {
        let r = r.unwrap();
        if let Some(&m) = by_key.get(&r[apid].to_uppercase())
            && !r[appid].is_empty()
        {
            extra.push((r[appid].to_uppercase(), m));
        }
    }
    by_key.extend(extra);
    // Lines: the merchant of the payment they name, else of their recipient.
    let mut rs = csv::Reader::from_path(dir.join("statement.csv")).unwrap();
    let hs = rs.headers().unwrap().clone();
    let scol = |name: &str| hs.iter().position(|c| c == name).unwrap();
    let (txn, reference, beneficiary) = (scol("txn_id"), scol("reference"), scol("beneficiary"));
    let mut files: BTreeMap<&str, csv::Writer<std::fs::File>> = MERCHANTS
        .iter()
        .map(|m| {
            let mut w = csv::Writer::from_path(dir.join(format!("statement-{m}.csv"))).unwrap();
            w.write_record(&hs).unwrap();
            (*m, w)
        })
        .collect();
    for r in rs.records() {
        let r = r.unwrap();
        let m = by_key
            .get(&r[reference].trim().to_uppercase())
            .or_else(|| by_key.get(&r[txn].trim().to_uppercase()))
            .copied()
            .unwrap_or_else(|| merchant_of(&r[beneficiary]));
        files.get_mut(m).unwrap().write_record(&r).unwrap();
    }
    for (m, mut w) in files {
        w.flush().unwrap();
        drop(w);
        write_control(&dir.join(format!("statement-{m}.csv")));
    }
    let mut mw = csv::Writer::from_path(dir.join("merchants.csv")).unwrap();
    for (p, m) in &merchants {
        mw.write_record([p, m]).unwrap();
    }
    mw.flush().unwrap();
    // The job: one source per merchant, cut from the generated one.
    let text = std::fs::read_to_string(&report.files.config).unwrap();
    let (head, source) = text.split_at(text.find("[[source]]").unwrap());
    let head: String = head
        .lines()
        .filter(|l| !l.starts_with("database_url") && !l.starts_with("output_dir"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut job = format!(
        "{head}database_url = \"@URL@\"\noutput_dir = \"@OUT@\"\n\n[partition]\ncolumn = \"merchant_id\"\n\n\
         [ledger]\npayments_query = \"SELECT p.payment_id, p.recipient_account, p.amount_minor, p.currency, p.status, p.created_at, p.started_at, p.attempt_id, p.provider_payment_id, p.updated_at, m.merchant_id FROM payments p LEFT JOIN test_merchants m ON m.payment_id = p.payment_id\"\n\n"
    );
    for m in MERCHANTS {
        job.push_str(
            &source
                .replace(
                    "name = \"psp\"",
                    &format!("name = \"psp-{m}\"\npartition = \"{m}\""),
                )
                .replace("statement.csv", &format!("statement-{m}.csv")),
        );
        job.push('\n');
    }
    std::fs::write(dir.join("recon.toml.in"), job).unwrap();
    Night {
        dir: dir.to_path_buf(),
        report,
        merchants,
    }
}

/// One variant's database and output folder, with the night's ledger imported.
pub(crate) struct Variant {
    database: Option<String>,
    pub(crate) url: String,
    pub(crate) config: PathBuf,
    pub(crate) out: PathBuf,
}

/// The night `n` as a job on a SQLite file in `dir` (`r.db`, outputs in `out/`), written as
/// `dir/<name>`: what a sharded night refuses.
pub(crate) fn sqlite_variant(dir: &Path, n: &Night, name: &str) -> Variant {
    let base = std::fs::read_to_string(n.dir.join("recon.toml.in")).unwrap();
    let v = Variant {
        database: None,
        url: format!("sqlite://{}", dir.join("r.db").display()),
        config: dir.join(name),
        out: dir.join("out"),
    };
    std::fs::write(
        &v.config,
        base.replace("@URL@", &v.url).replace("@OUT@", "out"),
    )
    .unwrap();
    v
}

impl Drop for Variant {
    fn drop(&mut self) {
        if let Some(name) = &self.database {
            // Best effort, as TestEnv does.
            let _ = Command::new(psql())
                .arg(pg_admin_url())
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .output();
        }
    }
}

/// The night's job file template with its database URL and output folder, written to `to`.
fn job_file(n: &Night, url: &str, out: &str, to: &Path) {
    let text = std::fs::read_to_string(n.dir.join("recon.toml.in"))
        .unwrap()
        .replace("@URL@", url)
        .replace("@OUT@", out);
    std::fs::write(to, text).unwrap();
}

/// Imports the night's payments and attempts into the (migrated or new) ledger at `url`.
async fn import_night(n: &Night, url: &str) {
    let db = recon::db::Db::open(url).await.unwrap();
    recon::ledger::import::import(
        &db,
        &n.dir.join("payments.csv"),
        Some(&n.dir.join("attempts.csv")),
    )
    .await
    .unwrap();
    db.close().await;
}

pub(crate) async fn variant(n: &Night, name: &str) -> Variant {
    let (database, url) = fresh_pg_database().await;
    let out = n.dir.join(format!("out-{name}"));
    let config = n.dir.join(format!("recon-{name}.toml"));
    job_file(n, &url, &out.display().to_string(), &config);
    let db = recon::db::Db::connect(&url).await.unwrap();
    db.migrate().await.unwrap();
    db.close().await;
    import_night(n, &url).await;
    if n.merchants.is_empty() {
        return Variant {
            database: Some(database),
            url,
            config,
            out,
        };
    }
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", pg_described()));
    sqlx::query("CREATE TABLE test_merchants (payment_id text PRIMARY KEY, merchant_id text)")
        .execute(&mut conn)
        .await
        .unwrap();
    for chunk in n.merchants.chunks(1000) {
        let (ids, ms): (Vec<String>, Vec<String>) = chunk.iter().cloned().unzip();
        sqlx::query("INSERT INTO test_merchants SELECT * FROM unnest($1::text[], $2::text[])")
            .bind(ids)
            .bind(ms)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    Variant {
        database: Some(database),
        url,
        config,
        out,
    }
}

pub(crate) fn recon(args: &[&str], v: &Variant) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args)
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap()
}

/// `recon gather` of the night, which must succeed: its output.
fn gather(v: &Variant, date: &str, what: &str) -> String {
    let cfg = v.config.display().to_string();
    ok(
        recon(
            &["gather", "--config", &cfg, "--date", date, "--group", NIGHT],
            v,
        ),
        what,
    )
}

/// `recon gather` with `extra` arguments, which must exit SHARDS_MISSING: its stderr.
fn gather_missing(v: &Variant, date: &str, extra: &[&str]) -> String {
    let cfg = v.config.display().to_string();
    let mut args = vec!["gather", "--config", &cfg, "--date", date];
    args.extend_from_slice(extra);
    let out = recon(&args, v);
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(recon::exit::SHARDS_MISSING),
        "{text}"
    );
    text
}

/// `recon ARGS` against the variant's database, paused at fault point `stage` (it creates
/// `marker` there and waits until the file is gone): returns once it is there.
pub(crate) fn paused_at(
    v: &Variant,
    args: &[&str],
    stage: &str,
    marker: &Path,
) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args)
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .env("RECON_FAULT_PAUSE", format!("{stage}:{}", marker.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "{args:?} never reached {stage}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

pub(crate) fn ok(out: std::process::Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what}: {:?}\n{text}", out.status);
    text
}

/// The night as one process: its run folder.
fn one_process(n: &Night, v: &Variant) -> PathBuf {
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    ok(
        recon(
            &[
                "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--run-id", NIGHT,
            ],
            v,
        ),
        "one process",
    );
    v.out.join(NIGHT)
}

/// The id of the night: the one process's run id, the shards' run group (so the reports,
/// which name it, compare as they are).
pub(crate) const NIGHT: &str = "the-night";

/// The night as `count` shard processes at once, then the gather: its folder.
fn sharded(n: &Night, v: &Variant, count: u32) -> PathBuf {
    let cfg = v.config.display().to_string();
    let date = n.report.date.to_string();
    indexed_shards(n, v, count, &["--group", NIGHT]);
    let out = recon(
        &[
            "gather", "--config", &cfg, "--date", &date, "--group", NIGHT,
        ],
        v,
    );
    let text = ok(out, "gather");
    assert!(text.contains(&format!("shard {}:", count - 1)), "{text}");
    v.out.join(NIGHT)
}

/// The night's `count` shards started at once as a Kubernetes Indexed Job starts them (`recon
/// run --shards N` with `$JOB_COMPLETION_INDEX`, and `extra` arguments), each of which must
/// succeed: their outputs, in index order.
pub(crate) fn indexed_shards(n: &Night, v: &Variant, count: u32, extra: &[&str]) -> Vec<String> {
    let cfg = v.config.display().to_string();
    let (date, as_of, count_text) = (
        n.report.date.to_string(),
        n.report.as_of_rfc3339(),
        count.to_string(),
    );
    let mut args = vec![
        "run",
        "--config",
        &cfg,
        "--date",
        &date,
        "--as-of",
        &as_of,
        "--shards",
        &count_text,
    ];
    args.extend_from_slice(extra);
    let children: Vec<_> = (0..count)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_recon"))
                .args(&args)
                .env("RECON_DATABASE_URL", &v.url)
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .enumerate()
        .map(|(i, c)| ok(c.wait_with_output().unwrap(), &format!("shard {i}/{count}")))
        .collect()
}

/// What must be equal: results, diff, report sheets but the summary, the summary's counts,
/// and the database's transitions, tickets and cases (without run ids and times).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    results: String,
    diff: String,
    rejected: String,
    settlement: Vec<String>,
    html: Option<String>,
    email: Option<String>,
    sheets: BTreeMap<String, Vec<Vec<String>>>,
    counts: serde_json::Value,
    transitions: Vec<String>,
    tickets: Vec<String>,
    cases: Vec<String>,
}

async fn outcome(dir: &Path, v: &Variant) -> Seen {
    use calamine::Reader as _;
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let mut book: calamine::Xlsx<_> = calamine::open_workbook(dir.join("report.xlsx")).unwrap();
    let mut sheets = BTreeMap::new();
    for name in book.sheet_names() {
        if name == "Summary" {
            continue;
        }
        let range = book.worksheet_range(&name).unwrap();
        sheets.insert(
            name.clone(),
            range
                .rows()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect(),
        );
    }
    let summary: serde_json::Value = serde_json::from_str(&read("summary.json")).unwrap();
    let t = &summary["tickets"];
    let counts = serde_json::json!({
        "outcomes": summary["outcomes"],
        "transitions_planned": summary["transitions"]["planned"],
        "tickets": t["created"].as_u64().unwrap() + t["existing"].as_u64().unwrap(),
        "cases": summary["cases"],
        "payments_in_scope": summary["payments_in_scope"],
        "statement_lines": summary["statement_lines"],
        "inputs": summary["inputs"],
    });
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap();
    let transitions: Vec<String> = sqlx::query_scalar(
        "SELECT concat_ws('|', payment_id, from_status, to_status, attempt_id, provider_payment_id, actor, reason)
         FROM payment_status_history ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let tickets: Vec<String> = sqlx::query_scalar(
        "SELECT concat_ws('|', dedupe_key, kind, severity, payment_id, line_ids, amount_minor, currency, status)
         FROM review_tickets ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let cases: Vec<String> = sqlx::query_scalar(
        "SELECT concat_ws('|', case_key, kind, severity, outcome, fingerprint, what, why, at_risk, payments, candidates, status)
         FROM review_cases ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut settlement: Vec<String> = read("settlement.csv").lines().map(str::to_string).collect();
    settlement.sort();
    Seen {
        results: read("results.csv"),
        diff: read("diff.csv"),
        rejected: read("rejected.csv"),
        settlement,
        html: std::fs::read_to_string(dir.join("report.html")).ok(),
        // Both parts, decoded, with the night's folder (it differs per database) named OUT.
        email: dir.join("email.eml").exists().then(|| {
            let folder = v.out.display().to_string();
            ["text/plain", "text/html"]
                .map(|mime| crate::report::email_body(dir, mime).replace(&folder, "OUT"))
                .join("\n")
        }),
        sheets,
        counts,
        transitions,
        tickets,
        cases,
    }
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  one process: {x}\n  sharded:     {y}", i + 1);
        }
    }
    format!("lengths {} vs {}", a.lines().count(), b.lines().count())
}

/// Two sets of database rows are equal; else says which rows only one of them has.
fn same_rows(whole: &[String], other: &[String], what: &str) {
    if whole == other {
        return;
    }
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|r| !b.contains(r)).cloned().collect()
    };
    panic!(
        "{what} differ\n  only in one process: {:#?}\n  only sharded: {:#?}",
        only(whole, other),
        only(other, whole)
    );
}

fn assert_same(whole: &Seen, other: &Seen, what: &str) {
    assert_eq!(
        whole.results,
        other.results,
        "{what}: results.csv differs at {}",
        first_difference(&whole.results, &other.results)
    );
    assert_eq!(whole.diff, other.diff, "{what}: diff.csv");
    assert_eq!(whole.rejected, other.rejected, "{what}: rejected.csv");
    assert_eq!(whole.settlement, other.settlement, "{what}: settlement.csv");
    if let (Some(a), Some(b)) = (&whole.html, &other.html) {
        assert_eq!(
            a,
            b,
            "{what}: report.html differs at {}",
            first_difference(a, b)
        );
    }
    assert_eq!(
        whole.email.is_some(),
        other.email.is_some(),
        "{what}: one email"
    );
    if let (Some(a), Some(b)) = (&whole.email, &other.email) {
        assert_eq!(
            a,
            b,
            "{what}: the email differs at {}",
            first_difference(a, b)
        );
    }
    assert_eq!(whole.counts, other.counts, "{what}: summary counts");
    same_rows(
        &whole.transitions,
        &other.transitions,
        &format!("{what}: transitions"),
    );
    same_rows(&whole.tickets, &other.tickets, &format!("{what}: tickets"));
    same_rows(&whole.cases, &other.cases, &format!("{what}: cases"));
    assert_eq!(
        whole.sheets.keys().collect::<Vec<_>>(),
        other.sheets.keys().collect::<Vec<_>>(),
        "{what}: report sheets"
    );
    for (name, rows) in &whole.sheets {
        assert_eq!(rows, &other.sheets[name], "{what}: report sheet {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_night_as_one_three_or_four_shards_plus_the_gather_is_the_night_of_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let n = generated_night(dir.path(), 3000, 34, 5);
    // The planted lines cross shards: M01, M02 and M03 are three shards' with 3 and 4 shards.
    for count in [3, 4] {
        let shards: std::collections::BTreeSet<u64> = ["M01", "M02", "M03"]
            .iter()
            .map(|m| recon::partition::stable_hash(m) % count)
            .collect();
        assert_eq!(shards.len(), 3, "{count} shards");
    }
    let planted = with_cross_partition_cases(&n);
    let nets = with_shared_bank(&n);
    let v = variant(&n, "whole").await;
    let whole_dir = one_process(&n, &v);
    let whole = outcome(&whole_dir, &v).await;
    // The night is not trivial: every kind of decision is in it (each outcome exactly, as the
    // first column of a row: a substring would find MATCHED in UNMATCHED_BANK_CREDIT).
    let rows = crate::support::read_columns(
        &whole_dir.join("results.csv"),
        &["outcome", "payment_id", "provider_txn_id", "detail"],
    );
    let outcomes: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    for o in [
        "MATCHED",
        "RESOLVED_SUCCEEDED",
        "RESOLVED_FAILED",
        "AMBIGUOUS",
        "ORPHAN_AT_PROVIDER",
        "SETTLED",
        "SETTLEMENT_MISMATCH",
        "UNMATCHED_BANK_CREDIT",
    ] {
        assert!(outcomes.contains(o), "the night has no {o}: {outcomes:?}");
    }
    // Lines booked in another merchant's file that name their payment (issue 40): each
    // payment gets the outcome the generator planted (an UNKNOWN one RESOLVED_SUCCEEDED, never
    // FAILED; a SUCCEEDED one MATCHED, never MISSING) on that line, whose file the row names,
    // and the line is no orphan. The shards below must give the same rows.
    let crossing = &n.report.cross_partition_lines;
    assert!(
        crossing.iter().any(|c| c.outcome == "RESOLVED_SUCCEEDED")
            && crossing.iter().any(|c| c.outcome == "MATCHED"),
        "{crossing:#?}"
    );
    for c in crossing {
        let row = rows
            .iter()
            .find(|r| r[1] == c.payment_id)
            .unwrap_or_else(|| panic!("no row for {c:?}"));
        assert_eq!(
            (row[0].as_str(), row[2].as_str()),
            (c.outcome, c.txn_id.as_str()),
            "{c:?}: {row:?}"
        );
        assert!(
            row[3].contains(&format!(
                "booked in partition {:?}'s source provider-{}",
                c.line_partition, c.line_partition
            )),
            "{c:?}: {row:?}"
        );
        assert!(
            !rows.iter().any(|r| r[1].is_empty() && r[2] == c.txn_id),
            "{c:?} has a line row of its own"
        );
    }
    // The planted ones: each its outcome, on exactly its lines, and no other row for them.
    for (id, want, txns) in &planted {
        let found: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| r[1] == *id || (r[1].is_empty() && r[2] == *id))
            .collect();
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        let mut got: Vec<&str> = found[0][2].split(';').collect();
        got.sort_unstable();
        assert_eq!(
            (found[0][0].as_str(), got.join(";")),
            (*want, txns.to_string()),
            "{id}"
        );
    }
    for txn in ["pt_cross_old_failed", "pt_cross_old_paid_b"] {
        assert!(
            !rows.iter().any(|r| r[1].is_empty() && r[2] == txn),
            "{txn} has a line row of its own"
        );
    }
    // The shared bank account's three-way view, as the test wrote it: every batch's net, the
    // second merchant's first batch 5.00 short of its credit, the third's with two credits.
    for ((m, c), (net, want)) in &nets {
        let row = whole
            .settlement
            .iter()
            .find(|r| r.starts_with(&format!("payout-{m},provider-{m},B-{m},{c},")))
            .unwrap_or_else(|| panic!("no settlement row for {m} {c}: {:#?}", whole.settlement));
        assert!(row.ends_with(want), "{m} {c}: {row}");
        let net_text = net.to_string();
        assert!(
            row.contains(&format!(",{net_text},")),
            "{m} {c} net {net_text}: {row}"
        );
    }
    assert!(
        whole
            .settlement
            .iter()
            .any(|r| r.contains("BANK-900") && r.ends_with("UNMATCHED_BANK_CREDIT")),
        "{:#?}",
        whole.settlement
    );
    assert!(
        whole
            .results
            .lines()
            .any(|l| l.starts_with("ORPHAN_AT_PROVIDER")
                && l.contains("bank:")
                && l.contains("every partition shares")),
        "the bank's debit is for a human"
    );
    assert!(!whole.transitions.is_empty() && !whole.cases.is_empty());
    for count in [1, 3, 4] {
        let v = variant(&n, &format!("n{count}")).await;
        let dir = sharded(&n, &v, count);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        let shards = summary["shards"].as_array().unwrap();
        assert_eq!(
            shards.len(),
            count as usize,
            "summary.json lists every shard"
        );
        let per_shard: u64 = shards
            .iter()
            .map(|s| s["payments_in_scope"].as_u64().unwrap())
            .sum();
        assert_eq!(per_shard, summary["payments_in_scope"].as_u64().unwrap());
        assert_same(
            &whole,
            &outcome(&dir, &v).await,
            &format!("{count} shard(s)"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_killed_mid_run_is_re_run_alone_and_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 800, 35);
    let whole_v = variant(&n, "whole").await;
    let whole = outcome(&one_process(&n, &whole_v), &whole_v).await;
    let v = variant(&n, "killed").await;
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    let shard = |i: u32| {
        recon(
            &[
                "run",
                "--config",
                &cfg,
                "--date",
                &date,
                "--as-of",
                &as_of,
                "--shard",
                &format!("{i}/3"),
                "--group",
                NIGHT,
            ],
            &v,
        )
    };
    ok(shard(0), "shard 0");
    // Shard 1 is killed after its commit, before its folder is in place: its effects are
    // in the database, its run record says RUNNING.
    let marker = dir.path().join("paused");
    let args = [
        "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", "1/3", "--group",
        NIGHT,
    ];
    let mut child = paused_at(&v, &args, "after_commit", &marker);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(&marker).unwrap();
    ok(shard(2), "shard 2");
    // The gather sees shard 1 missing and says so: killed (its run RUNNING, its lock free).
    let text = gather_missing(&v, &date, &["--group", NIGHT]);
    assert!(
        text.contains("shard 1/3: killed (its run is RUNNING"),
        "{text}"
    );
    assert!(!v.out.join(NIGHT).exists(), "nothing gathered");
    // Re-run index 1 only: it recovers its killed run and lands.
    ok(shard(1), "shard 1 again");
    // And only once: a third attempt does nothing.
    let again = ok(shard(1), "shard 1 a third time");
    assert!(again.contains("already landed"), "{again}");
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap();
    let states: Vec<(i64, String)> = sqlx::query_as(
        "SELECT s.shard, r.status FROM recon_run_shards s JOIN recon_runs r USING (run_id)
         ORDER BY r.started_at",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        states,
        vec![
            (0, "COMPLETED".to_string()),
            (1, "FAILED".to_string()),
            (2, "COMPLETED".to_string()),
            (1, "COMPLETED".to_string()),
        ]
    );
    gather(&v, &date, "gather");
    let killed = outcome(&v.out.join(NIGHT), &v).await;
    assert_same(&whole, &killed, "killed and re-run");
    // The re-run found the killed attempt's transitions applied: none twice.
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(v.out.join(NIGHT).join("summary.json")).unwrap(),
    )
    .unwrap();
    assert!(summary["transitions"]["already_applied"].as_u64().unwrap() > 0);
    // A second gather sends nothing again.
    let twice = gather(&v, &date, "gather again");
    assert!(twice.contains("already gathered"), "{twice}");
}

#[tokio::test]
async fn a_gather_past_its_deadline_names_the_shards_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 200, 36);
    let v = variant(&n, "deadline").await;
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    ok(
        recon(
            &[
                "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", "0/2",
            ],
            &v,
        ),
        "shard 0",
    );
    let text = gather_missing(&v, &date, &["--wait", "1s"]);
    assert!(text.contains("shard 1/2: never started"), "{text}");
    // The run group records why the night was not gathered (issue 41 point 1).
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap();
    let (gathered_at, error): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT gathered_at, gather_error FROM recon_run_groups WHERE group_id = $1",
    )
    .bind(&date)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(gathered_at.is_none());
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("shard 1/2: never started")),
        "{error:?}"
    );
    // A shard of another shard count cannot join the night.
    let out = recon(
        &[
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", "1/3",
        ],
        &v,
    );
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{text}");
    assert!(text.contains("the shard count is 2"), "{text}");
}

#[test]
fn sqlite_jobs_and_unbound_sources_are_refused_at_config_time() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 50, 37);
    let v = sqlite_variant(dir.path(), &n, "sqlite.toml");
    let base = std::fs::read_to_string(n.dir.join("recon.toml.in")).unwrap();
    let cfg = v.config.display().to_string();
    let out = recon(
        &[
            "run",
            "--config",
            &cfg,
            "--date",
            "2026-11-28",
            "--shard",
            "0/2",
        ],
        &v,
    );
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{text}");
    assert!(text.contains("--shard needs PostgreSQL"), "{text}");
    // `--shards N` outside an Indexed Job: no index to take, said in one readable line.
    let out = recon(
        &[
            "run",
            "--config",
            &cfg,
            "--date",
            "2026-11-28",
            "--shards",
            "2",
        ],
        &v,
    );
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{text}");
    assert!(
        text.contains("$JOB_COMPLETION_INDEX, which is not set (hint: --shard I/N)"),
        "{text}"
    );
    // A source without a partition in a partitioned job.
    let refused = |job: &str| -> String {
        std::fs::write(
            &v.config,
            job.replace("@URL@", &v.url).replace("@OUT@", "out"),
        )
        .unwrap();
        let out = recon(&["run", "--config", &cfg, "--date", "2026-11-28"], &v);
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{text}");
        text
    };
    let unbound = base.replacen("partition = \"M2\"\n", "", 1);
    let text = refused(&unbound);
    assert!(text.contains("source[1].partition` is missing"), "{text}");
    assert!(text.contains("only a bank source"), "{text}");
    // A bank source may be shared by all partitions only as the bank of a settlement rule.
    let shared = unbound.replacen(
        "name = \"psp-M2\"\n",
        "name = \"psp-M2\"\nrole = \"bank\"\n",
        1,
    );
    assert_ne!(shared, unbound);
    let text = refused(&shared);
    assert!(
        text.contains("source[1].partition` is missing (source \"psp-M2\"): a bank source shared by all partitions"),
        "{text}"
    );
}

#[test]
fn a_range_is_not_sharded_but_refused_naming_the_day_by_day_commands() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 20, 41);
    let v = sqlite_variant(dir.path(), &n, "range.toml");
    let cfg = v.config.display().to_string();
    let range = ["--from", "2026-11-27", "--to", "2026-11-29"];
    for (shard, env_index) in [(["--shard", "1/3"], None), (["--shards", "3"], Some("1"))] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_recon"));
        cmd.args(["run", "--config", &cfg])
            .args(range)
            .args(shard)
            .env("RECON_DATABASE_URL", &v.url)
            .env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = env_index {
            cmd.env("JOB_COMPLETION_INDEX", i);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(
            out.status.code(),
            Some(recon::exit::CONFIG),
            "{shard:?}: {text}"
        );
        // Why, and what to run instead: each day as a sharded night, then its gather.
        for said in [
            "--shard runs one night, not a range (--from 2026-11-27 --to 2026-11-29)",
            "the gather writes that one night",
            "Nothing was run",
            "`recon run --date D --shard I/3` for every shard I, then `recon gather --date D`",
            "or run the range in one process, without --shard",
        ] {
            assert!(text.contains(said), "{shard:?}: no {said:?} in {text}");
        }
        assert!(out.stdout.is_empty(), "{shard:?}");
    }
    // Refused before anything was opened: no database file, no run folder.
    assert!(!dir.path().join("r.db").exists());
    assert!(!v.out.exists() || std::fs::read_dir(&v.out).unwrap().next().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_run_at_once_but_the_same_shard_twice_or_a_whole_night_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 300, 38);
    let v = variant(&n, "locks").await;
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    let args = |shard: &str| -> Vec<String> {
        [
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", shard,
            "--group", NIGHT,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // Shard 0 holds its lock, paused after planning.
    let marker = dir.path().join("paused");
    let first = paused_at(
        &v,
        &args("0/2").iter().map(String::as_str).collect::<Vec<_>>(),
        "after_plan",
        &marker,
    );
    let arg_refs = |a: &[String]| a.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
    let twice = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args("0/2"))
        .env("RECON_DATABASE_URL", &v.url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&twice.stderr).to_string();
    assert_eq!(
        twice.status.code(),
        Some(recon::exit::LOCKED),
        "{}: {text}",
        arg_refs(&args("0/2"))
    );
    assert!(text.contains("another process runs shard 0/2"), "{text}");
    // The other shard runs beside it.
    ok(
        Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(args("1/2"))
            .env("RECON_DATABASE_URL", &v.url)
            .output()
            .unwrap(),
        "shard 1 beside shard 0",
    );
    // A whole-night run is excluded while a shard works.
    let whole = recon(
        &["run", "--config", &cfg, "--date", &date, "--as-of", &as_of],
        &v,
    );
    assert_eq!(
        whole.status.code(),
        Some(recon::exit::LOCKED),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    std::fs::remove_file(&marker).unwrap();
    ok(first.wait_with_output().unwrap(), "shard 0 after its pause");
    let text = gather(&v, &date, "gather");
    assert!(text.contains("shard 1:"), "{text}");
}

/// The generator's cross-merchant look-alikes (same recipient, money and start in two
/// merchants, each paid by one unnamed line in its own merchant's file): one process on a
/// SQLite ledger matches each to its own line, and `recon explain` says why the other
/// merchant's line is no candidate.
#[tokio::test]
async fn look_alikes_of_two_merchants_each_match_their_own_line_and_explain_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let n = generated_night(dir.path(), 2000, 39, 3);
    let db = dir.path().join("recon.db");
    job_file(
        &n,
        &format!("sqlite://{}", db.display()),
        "out",
        &n.dir.join("recon.toml"),
    );
    let cfg = recon::config::Config::load(&n.dir.join("recon.toml")).unwrap();
    import_night(&n, &cfg.database_url).await;
    // The look-alike pairs, from the ledger alone: same recipient, money and start, two
    // merchants.
    let rows = crate::support::read_columns(
        &n.dir.join("payments.csv"),
        &[
            "payment_id",
            "recipient_account",
            "amount",
            "currency",
            "started_at",
            "merchant_id",
        ],
    );
    // (recipient, amount, currency, start) → (payment, merchant).
    type Money = (String, String, String, String);
    let mut groups: BTreeMap<Money, Vec<(String, String)>> = BTreeMap::new();
    for r in &rows {
        groups
            .entry((r[1].clone(), r[2].clone(), r[3].clone(), r[4].clone()))
            .or_default()
            .push((r[0].clone(), r[5].clone()));
    }
    let pairs: Vec<&Vec<(String, String)>> = groups
        .values()
        .filter(|g| g.len() == 2 && g[0].1 != g[1].1)
        .collect();
    assert!(
        !pairs.is_empty(),
        "the night has cross-merchant look-alikes"
    );
    let report = recon::run::run(
        &cfg,
        &recon::run::RunOptions {
            from: n.report.date,
            to: n.report.date,
            as_of: Some(n.report.as_of),
            dry_run: false,
            run_id: Some("r1".into()),
            wait: false,
        },
    )
    .await
    .unwrap();
    let results = crate::support::read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "source_lines"],
    );
    for pair in &pairs {
        for (id, merchant) in pair.iter() {
            let row = results.iter().find(|r| &r[1] == id).unwrap();
            assert!(
                matches!(row[0].as_str(), "MATCHED" | "RESOLVED_SUCCEEDED"),
                "look-alike {id}: {row:?}"
            );
            assert!(
                row[2].contains(&format!("statement-{merchant}.csv")),
                "look-alike {id} of {merchant} matched another merchant's line: {row:?}"
            );
        }
    }
    let (id, merchant) = &pairs[0][0];
    let text = recon::explain::explain(
        &cfg,
        &recon::explain::ExplainOptions {
            id: id.clone(),
            run: Some("r1".into()),
            date: None,
            as_of: None,
        },
    )
    .await
    .unwrap();
    assert!(
        text.contains(&format!(
            "payment partition \"{merchant}\"'s: never its evidence"
        )),
        "{text}"
    );
}
