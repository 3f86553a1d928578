//! Issue 15 points 4–7 and 9–11: mapping keys for the layouts banks and providers really
//! export, each read from its fixture in `tests/formats/input/` (`recon_*`, the shape of a real
//! file in `../shared/real-data/`) with the mapping beside the others in
//! `tests/formats/mappings/`.

use crate::support::{
    ATTEMPTS_HEADER, PAYMENTS_HEADER, STATEMENT_HEADER, TestEnv, outcomes, read_columns,
};
use recon::config::{Config, Format, SourceConfig};
use recon::sources::{self, SourceLoad, StatementLine};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/formats/input").join(rel)
}

/// The mapping of fixture `rel` (`tests/formats/mappings/<file name>.toml`).
fn mapping(rel: &str) -> SourceConfig {
    let name = Path::new(rel).file_name().expect("name").to_string_lossy();
    let m = repo()
        .join("tests/formats/mappings")
        .join(format!("{name}.toml"));
    SourceConfig::load_mapping(&m, Format::Csv).expect("mapping loads")
}

fn read(cfg: &SourceConfig, path: &Path) -> (bool, SourceLoad) {
    let mut load = SourceLoad::default();
    let clean = sources::read_file(cfg, path, &mut load).expect("reads");
    (clean, load)
}

/// The error of a mapping file `text` (written to a temporary file).
fn mapping_error(text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    std::fs::write(&m, text).expect("write");
    match SourceConfig::load_mapping(&m, Format::Csv) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => format!("{e:#}"),
    }
}

/// `recon parse` of `files` as `cfg`: (stdout, stderr) or the error.
fn parse(cfg: &SourceConfig, files: &[PathBuf]) -> Result<(String, String), String> {
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    sources::print_canonical(
        cfg,
        files,
        sources::Recipients::Unmasked,
        &mut out,
        &mut notes,
    )
    .map_err(|e| format!("{e:#}"))?;
    Ok((
        String::from_utf8(out).expect("utf-8"),
        String::from_utf8(notes).expect("utf-8"),
    ))
}

/// A job folder with one source: `source` is the body of its `[[source]]` table (with
/// `path = "st.csv"`), `file` the statement's content; a control file proves it complete.
fn job(source: &str, file: &[u8]) -> (tempfile::TempDir, SourceConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("recon.toml"),
        format!(
            "timezone = \"UTC\"\ndatabase_url = \"sqlite://r.db\"\noutput_dir = \"out\"\n\
             [[source]]\nname = \"bank\"\nrole = \"bank\"\npath = \"st.csv\"\n\
             completeness = \"control_file\"\n{source}"
        ),
    )
    .expect("config");
    deliver(dir.path(), file);
    let cfg = Config::load(&dir.path().join("recon.toml")).expect("config loads");
    (dir, cfg.sources[0].clone())
}

/// Writes `st.csv` with a control file counting its data records (`lines=`, header excluded).
fn deliver(dir: &Path, file: &[u8]) {
    std::fs::write(dir.join("st.csv"), file).expect("statement");
    let records = file
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
        - 1;
    std::fs::write(
        dir.join("st.csv.ctl"),
        sources::control_text(Some(records), Some(&sources::sha256_hex(file))),
    )
    .expect("control");
}

fn load(cfg: &SourceConfig, from: &str, to: &str) -> SourceLoad {
    sources::load(
        cfg,
        (from.parse().expect("day"), to.parse().expect("day")),
        recon::timeparse::parse_ledger("2026-12-31T00:00:00Z").expect("as of"),
    )
    .expect("loads")
}

/// Whether the load covers every instant of the days `from..=to` (UTC).
fn covers(load: &SourceLoad, from: &str, to: &str) -> bool {
    let (a, b) = sources::days_span(
        from.parse().expect("day"),
        to.parse().expect("day"),
        chrono_tz::UTC,
    );
    sources::covers(&load.coverage, a, b - 1)
}

/// A line's amount in its original currency, as (minor units, code).
type Original = Option<(i64, &'static str)>;

fn original(l: &StatementLine) -> Original {
    l.original.as_ref().map(|o| (o.amount_minor, o.currency))
}

// ---------------------------------------------------------------------------------------------
// Point 4: the original (foreign) currency beside the account-currency amount.

#[test]
fn p4_the_original_currency_amount_is_kept_beside_the_account_amount() {
    let rel = "bank-csv/recon_fx_card.csv";
    let cfg = mapping(rel);
    let (clean, load) = read(&cfg, &fixture(rel));
    assert!(clean && load.rejected.is_empty(), "{:?}", load.rejected);
    let got: Vec<_> = load
        .lines
        .iter()
        .map(|l| (l.amount_minor, l.currency, original(l)))
        .collect();
    assert_eq!(
        got,
        [
            // The account moved 4.62 EUR; the card paid 5.00 USD.
            (-462, "EUR", Some((-500, "USD"))),
            (250_000, "EUR", None),
            // JPY has no minor unit: 25000 yen are 25000 minor units, not 2 500 000.
            (-15_310, "EUR", Some((-25_000, "JPY"))),
            // Written with the other sign: the line's direction is the account amount's.
            (1_205, "EUR", Some((1_040, "GBP"))),
        ]
    );
    // Matching reads amount_minor/currency: the foreign amount is never the account's.
    let (out, _) = parse(&cfg, &[fixture(rel)]).expect("parses");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(
            "source,position,provider_txn_id,reference,recipient,amount,currency,booked_at,kind,original_amount,original_currency"
        )
    );
    assert!(
        lines
            .next()
            .is_some_and(|l| l.ends_with(",-4.62,EUR,2026-11-02,PAYMENT,-5.00,USD")),
        "{out}"
    );

    // An original amount without its currency is a rejected line naming file, line, column.
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("fx.csv");
    std::fs::write(
        &bad,
        "Date,Description,Amount,Currency,Orig. amount,Orig. currency\n\
         2026-11-02,Coffee,-4.62,EUR,5.00,USD\n2026-11-03,Taxi,-9.99,EUR,12.00,\n",
    )
    .expect("write");
    let (clean, load) = read(&cfg, &bad);
    assert!(!clean);
    assert_eq!(load.rejected.len(), 1);
    assert_eq!(load.rejected[0].line, 3);
    assert!(
        load.rejected[0]
            .reason
            .contains("column \"Orig. currency\": empty, but column \"Orig. amount\""),
        "{:?}",
        load.rejected
    );
    // The config needs both columns.
    let e = mapping_error(
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n[columns]\nbooked_at = \"D\"\n\
         amount = \"A\"\noriginal_amount = \"O\"\n",
    );
    assert!(e.contains("key `columns.original_currency`"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Point 5: text fields from several columns, including trailing unnamed fields.

#[test]
fn p5_text_fields_join_several_columns_and_the_fields_past_the_header() {
    let rel = "bank-csv/recon_oberbank_wide.csv";
    let cfg = mapping(rel);
    let (clean, load) = read(&cfg, &fixture(rel));
    assert!(clean, "{:?}", load.rejected);
    let refs: Vec<String> = load
        .lines
        .iter()
        .map(|l| l.reference().as_deref().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        refs,
        [
            // Text, Verwendungszweck, then the two fields past the 12-column header.
            "Zahlungsreferenz / RE-2026-001 / Teil 2 / Teil 3",
            // Empty trailing fields add no separator.
            "Überweisung / P-77",
            "Gutschrift / Rechnung 12",
        ]
    );
    // The counterparty is the Empfänger on debits, the Auftraggeber on credits.
    let recipients: Vec<&str> = load.lines.iter().map(|l| l.recipient.as_str()).collect();
    assert_eq!(
        recipients,
        [
            "AT611904300234573201",
            "AT483200000012345864",
            "AT022011100000000018"
        ]
    );
    // Without a header, by position; a list of one column is the column itself.
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "has_header = false\ntimestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\njoin_separator = \"|\"\n\
         [columns]\nbooked_at = \"#1\"\namount = \"#2\"\nreference = [\"#3..\"]\nbatch = [\"#3\"]\n",
    )
    .expect("write");
    let cfg = SourceConfig::load_mapping(&m, Format::Csv).expect("mapping");
    let f = dir.path().join("s.csv");
    std::fs::write(&f, "2026-11-27,1.00,a,b,,c\n2026-11-27,2.00\n").expect("write");
    let (_, load) = read(&cfg, &f);
    assert_eq!(load.lines[0].reference().as_deref(), Some("a|b|c"));
    assert_eq!(load.lines[0].batch.as_deref(), Some("a"));
    assert_eq!(load.lines[1].reference, None);
    // `#N..` is for text fields; an empty list is an error.
    let e = mapping_error(
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n[columns]\nbooked_at = \"D\"\namount = \"#3..\"\n",
    );
    assert!(
        e.contains("key `columns.amount`") && e.contains("text fields"),
        "{e}"
    );
    let e = mapping_error(
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\nreference = []\n",
    );
    assert!(e.contains("key `columns.reference`"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Point 6: rows skipped by value, counted, and no reason to doubt completeness.

#[test]
fn p6_rows_skipped_by_value_are_counted_listed_and_keep_the_file_complete() {
    let rel = "bank-csv/recon_notices.csv";
    let bytes = std::fs::read(fixture(rel)).expect("fixture");
    let keys = "delimiter = \";\"\ntimestamp_format = \"%d.%m.%Y\"\ndecimal_separator = \",\"\n\
                thousands_separator = \".\"\ncomplete_from = \"2026-12-01\"\ncomplete_to = \"2026-12-03\"\n";
    let columns = "[source.columns]\nbooked_at = \"Buchungsdatum\"\namount = \"Betrag\"\n\
                   currency = \"Währung\"\nreference = \"Text\"\n";
    let (_dir, cfg) = job(
        &format!(
            "{keys}\n[[source.skip_rows]]\ncolumn = \"Text\"\ncontains = [\"verständigung\"]\n\
             [[source.skip_rows]]\ncolumn = \"Text\"\nvalues = [\"Saldo\"]\n{columns}"
        ),
        &bytes,
    );
    let load = load(&cfg, "2026-12-01", "2026-12-03");
    let amounts: Vec<i64> = load.lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, [-2_500, 10_000], "the balance row is no line");
    assert_eq!(load.files[0].skipped, 3);
    assert_eq!(load.files[0].not_booked, 0);
    assert!(load.rejected.is_empty());
    // The control file counts 5 data records: 2 lines + 3 skipped rows agree with it.
    assert!(
        covers(&load, "2026-12-01", "2026-12-03"),
        "{:?}",
        load.warnings
    );
    assert!(load.warnings.is_empty(), "{:?}", load.warnings);
    let notes = load.notes.join("\n");
    assert!(
        notes.contains("3 row(s) that are no statement lines were skipped")
            && notes.contains("Text \"Verständigung: Kontoauszug verfügbar\" at line(s) 2")
            && notes.contains("Text \"VERSTÄNDIGUNG\" at line(s) 4")
            && notes.contains("Text \"Saldo\" at line(s) 6"),
        "{notes}"
    );
    // summary.json's file record carries the count.
    let file = serde_json::to_value(&load.files[0]).expect("json");
    assert_eq!(file["skipped"], 3);

    // The fixture's own mapping skips the notices by their zero amount; recon parse says so.
    let cfg = mapping(rel);
    let (out, notes) = parse(&cfg, &[fixture(rel)]).expect("parses");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(notes.contains("amount 0 at line(s) 2, 4"), "{notes}");

    // Without the keys the balance row would be a payment of 1 075.00.
    let (_dir, plain) = job(&format!("{keys}{columns}"), &bytes);
    let load = load_plain(&plain);
    assert!(load.lines.iter().any(|l| l.amount_minor == 107_500));
    // A rule needs values to match.
    let e = mapping_error(
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n[[skip_rows]]\ncolumn = \"T\"\n\
         [columns]\nbooked_at = \"D\"\namount = \"A\"\n",
    );
    assert!(e.contains("key `skip_rows[0]`"), "{e}");
    // A column that is not in the header is named with its key.
    let e = parse(
        &{
            let mut c = mapping(rel);
            c.tabular_mut().expect("a csv source").skip_rows[0].column = "Buchungstext".into();
            c
        },
        &[fixture(rel)],
    )
    .unwrap_err();
    assert!(e.contains("(config key skip_rows[0].column)"), "{e}");
}

fn load_plain(cfg: &SourceConfig) -> SourceLoad {
    load(cfg, "2026-12-01", "2026-12-03")
}

// ---------------------------------------------------------------------------------------------
// Point 7: BALANCE lines (provider balance movements) never take part in ledger matching.

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "DE02120300000000202051";
const IBAN_C: &str = "GB29NWBK60161331926819";

#[tokio::test]
async fn p7_balance_lines_never_resolve_match_return_or_block_a_payment() {
    let env = TestEnv::new();
    let cfg = std::fs::read_to_string(&env.config_path).expect("cfg");
    env.write(
        "recon.toml",
        &format!(
            "{cfg}\n[source.kinds]\nPAYMENT = \"PAYMENT\"\nREFUND = \"REFUND\"\nBALANCETRANSFER = \"BALANCE\"\n"
        ),
    );
    env.write(
        "payments.csv",
        &format!(
            "{PAYMENTS_HEADER}\n\
             P-1,{IBAN_A},25.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},30.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n\
             P-3,{IBAN_C},40.00,EUR,SUCCEEDED,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-3,T-3\n"
        ),
    );
    env.write(
        "attempts.csv",
        &format!(
            "{ATTEMPTS_HEADER}\n\
             A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
             A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n\
             A-3,P-3,2026-11-10T11:00:00Z,2026-11-10T11:00:01Z,SUCCEEDED,T-3,\n"
        ),
    );
    env.import_files().await;
    env.deliver_csv(
        "statement.csv",
        STATEMENT_HEADER,
        &format!(
            // Names P-1 with its money: as a payment line it would resolve P-1 SUCCEEDED.
            "B-1,P-1,{IBAN_A},25.00,EUR,2026-11-10T09:30:00Z,Balancetransfer\n\
             B-2,,{IBAN_B},31.00,EUR,2026-11-10T10:30:00Z,Balancetransfer\n\
             T-3,P-3,{IBAN_C},40.00,EUR,2026-11-10T11:00:05Z,PAYMENT\n\
             B-3,P-3,{IBAN_C},40.00,EUR,2026-11-10T11:10:00Z,Balancetransfer\n\
             B-4,P-3,{IBAN_C},-40.00,EUR,2026-11-10T15:00:00Z,Balancetransfer\n"
        ),
    );
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r")
        .await;
    let got = outcomes(&r);
    let row = |o: &str, p: &str, t: &str| (o.to_string(), p.to_string(), t.to_string());
    // No evidence of P-1 or P-2 in a complete source: they failed, and are safe to retry.
    // B-1 naming P-1 does not resolve it, B-2 (a near miss if it were a payment) does not
    // hold P-2 back; B-3 and B-4 neither duplicate nor return P-3.
    for want in [
        row("RESOLVED_FAILED", "P-1", ""),
        row("RESOLVED_FAILED", "P-2", ""),
        row("MATCHED", "P-3", "T-3"),
        row("SETTLEMENT_ITEM", "", "B-1"),
        row("SETTLEMENT_ITEM", "", "B-2"),
        row("SETTLEMENT_ITEM", "", "B-3"),
        row("SETTLEMENT_ITEM", "", "B-4"),
    ] {
        assert!(got.contains(&want), "{want:?} not in {got:?}");
    }
    assert_eq!(got.len(), 7, "{got:?}");
    let details = read_columns(
        &r.out_dir.join("results.csv"),
        &["provider_txn_id", "detail"],
    );
    assert!(
        details
            .iter()
            .any(|d| d[0] == "B-1" && d[1] == "provider balance line (see settlement.csv)"),
        "{details:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Point 9: a net amount from a separately reported fee.

#[test]
fn p9_the_net_amount_is_computed_exactly_from_the_fee_column() {
    let rel = "provider-csv/recon_adyen_balance_fee.csv";
    let cfg = mapping(rel);
    let (clean, load) = read(&cfg, &fixture(rel));
    assert!(clean, "{:?}", load.rejected);
    let got: Vec<(i64, &str)> = load
        .lines
        .iter()
        .map(|l| (l.amount_minor, l.kind.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (2_460, "PAYMENT"),  // 25.00 − 0.40 commission
            (-1_010, "REFUND"),  // −10.00 − 0.10
            (10_000, "PAYMENT"), // blank commission: no fee
            (38_922, "BALANCE"),
            (-50_372, "PAYOUT"),
        ]
    );
    // "amount + fee" for a fee written with its sign; a bad fee cell names file:line, column.
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\nnet_amount = \"amount + fee\"\n\
         [columns]\nbooked_at = \"date\"\namount = \"gross\"\nfee = \"fee\"\n",
    )
    .expect("write");
    let plus = SourceConfig::load_mapping(&m, Format::Csv).expect("mapping");
    let f = dir.path().join("s.csv");
    std::fs::write(
        &f,
        "date,gross,fee\n2026-11-27,100.00,-2.95\n2026-11-27,0.10,-0.30\n",
    )
    .expect("write");
    let (clean, load) = read(&plus, &f);
    assert!(clean, "{:?}", load.rejected);
    let amounts: Vec<i64> = load.lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, [9_705, -20]);
    std::fs::write(&f, "date,gross,fee\n2026-11-27,5.00,1.5x\n").expect("write");
    let e = parse(&plus, std::slice::from_ref(&f)).unwrap_err();
    assert!(
        e.contains(&format!("{}:2: column \"fee\":", f.display())),
        "{e}"
    );
    // The keys come together, and only the two formulas.
    let base = "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n";
    let e = mapping_error(&format!(
        "{base}[columns]\nbooked_at = \"D\"\namount = \"A\"\nfee = \"F\"\n"
    ));
    assert!(e.contains("key `net_amount` is missing"), "{e}");
    let e = mapping_error(&format!(
        "{base}net_amount = \"amount - fee\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\n"
    ));
    assert!(e.contains("key `columns.fee`"), "{e}");
    let e = mapping_error(&format!(
        "{base}net_amount = \"amount * fee\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\nfee = \"F\"\n"
    ));
    assert!(e.contains("key `net_amount`: \"amount * fee\""), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Point 10: a running balance column is a completeness gate.

#[test]
fn p10_a_running_balance_is_checked_row_by_row_by_the_completeness_gates() {
    let rel = "bank-csv/recon_running_balance.csv";
    let bytes = std::fs::read(fixture(rel)).expect("fixture");
    let source = "timestamp_format = \"%m/%d/%Y\"\ncurrency = \"USD\"\namount_symbols = \"$\"\n\
                  thousands_separator = \",\"\ncomplete_from = \"2026-12-01\"\ncomplete_to = \"2026-12-03\"\n\
                  [source.columns]\nbooked_at = \"DATE\"\namount = \"AMOUNT\"\nprovider_txn_id = \"ID\"\n\
                  balance = \"CURRENT BALANCE\"\n";
    let (dir, cfg) = job(source, &bytes);
    let ok = load(&cfg, "2026-12-01", "2026-12-03");
    let chain: Vec<_> = ok
        .gates
        .iter()
        .filter(|g| g.check == "balance_chain")
        .collect();
    assert_eq!(chain.len(), 1, "{:?}", ok.gates);
    assert!(chain[0].ok, "{:?}", chain[0]);
    assert_eq!(
        chain[0].period, "?",
        "the gate judges the file's whole claim"
    );
    assert!(covers(&ok, "2026-12-01", "2026-12-03"), "{:?}", ok.warnings);
    let facts = &ok.facts[0];
    assert_eq!(
        (
            facts.opening.map(|b| b.amount_minor),
            facts.closing.map(|b| b.amount_minor)
        ),
        (Some(300_750), Some(380_000)),
        "newest first: opening before T1, closing after T3"
    );

    // A row lost in the middle breaks the chain: the period is not complete, whatever the
    // control file says, and the gate names the row.
    let text = String::from_utf8(bytes).expect("utf-8");
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("\"T2\""))
        .map(|l| format!("{l}\n"))
        .collect();
    deliver(dir.path(), cut.as_bytes());
    let broken = load(&cfg, "2026-12-01", "2026-12-03");
    for day in ["2026-12-01", "2026-12-02", "2026-12-03"] {
        assert!(!covers(&broken, day, day), "{day}: {:?}", broken.coverage);
    }
    let failed: Vec<_> = broken.gates.iter().filter(|g| !g.ok).collect();
    assert_eq!(
        failed.iter().map(|g| g.check).collect::<Vec<_>>(),
        ["balance_chain", "control_totals"],
        "{failed:?}"
    );
    assert!(
        failed[1].detail.contains(
            "line 2: balance 3800.00 is not the previous balance 3000.00 + amount -1200.00 = 1800.00 USD"
        ),
        "{:?}",
        failed[1]
    );
    assert!(
        broken.warnings.iter().any(|w| w.contains("gate failed")),
        "{:?}",
        broken.warnings
    );

    // Oldest first, with a row that has no balance (its amount counts towards the next).
    let dir2 = tempfile::tempdir().expect("tempdir");
    let m = dir2.path().join("m.toml");
    std::fs::write(
        &m,
        "delimiter = \";\"\ntimestamp_format = \"%d.%m.%Y\"\ndecimal_separator = \",\"\ncurrency = \"EUR\"\n\
         [columns]\nbooked_at = \"Datum\"\namount = \"Betrag\"\nbalance = \"Saldo\"\n",
    )
    .expect("write");
    let c = SourceConfig::load_mapping(&m, Format::Csv).expect("mapping");
    let f = dir2.path().join("s.csv");
    std::fs::write(
        &f,
        "Datum;Betrag;Saldo\n01.12.2026;-1,00;99,00\n01.12.2026;-2,00;\n02.12.2026;10,00;107,00\n",
    )
    .expect("write");
    let (_, notes) = parse(&c, std::slice::from_ref(&f)).expect("parses");
    assert!(
        notes.contains("opening 100.00 EUR, closing 107.00 EUR, 3 entries summing 7.00 EUR; balances chain: yes"),
        "{notes}"
    );
}

// ---------------------------------------------------------------------------------------------
// Point 11: decoding errors say where, and which `encoding` decodes the file.

#[test]
fn p11_decoding_errors_name_line_and_column_and_suggest_the_encoding() {
    let rel = "bank-csv/recon_latin1_crlf.csv";
    let cfg = mapping(rel);
    let path = fixture(rel);
    let (clean, load) = read(&cfg, &path);
    assert!(!clean);
    assert_eq!(load.rejected.len(), 1, "{:?}", load.rejected);
    assert_eq!(load.rejected[0].line, 2);
    assert!(
        load.rejected[0].reason.starts_with(
            "column #9 (\"Name\"): not valid UTF-8 (hint: set the source's `encoding = \"windows-1252\"`"
        ),
        "{}",
        load.rejected[0].reason
    );
    // With the suggested key the file reads.
    let mut fixed = cfg.clone();
    let recon::config::FormatSettings::Csv(csv) = &mut fixed.settings else {
        panic!("a csv source")
    };
    csv.encoding = Some(recon::config::TextEncoding::Whatwg(
        encoding_rs::WINDOWS_1252,
    ));
    let (clean, load) = read(&fixed, &path);
    assert!(clean, "{:?}", load.rejected);
    assert_eq!(load.lines.len(), 2);

    // A header in the wrong encoding: the file, its line and column.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("h.csv");
    let (bytes, _, _) =
        encoding_rs::WINDOWS_1252.encode("Date;Amount;Währung\n27.11.2026;1,00;EUR\n");
    std::fs::write(&f, &bytes).expect("write");
    let e = parse(&cfg, std::slice::from_ref(&f)).unwrap_err();
    assert!(
        e.contains("h.csv: line 1: the header is not valid UTF-8 in column #3 (hint: set the source's `encoding = \"windows-1252\"`"),
        "{e}"
    );

    // MT940 declared in the wrong single-byte table: the hint names the one that fits.
    let sta = std::fs::read(fixture("mt940/recon_ibm852.sta")).expect("fixture");
    let mut ctx = sources::ParseContext::new(&SourceConfig::bank_default(Format::Mt940), "f");
    ctx.encoding = Some(recon::config::TextEncoding::Whatwg(encoding_rs::ISO_8859_2));
    let e = format!(
        "{:#}",
        sources::parse_bank_bytes(Format::Mt940, &ctx, &sta).unwrap_err()
    );
    assert!(
        e.contains("f:6: decoding as ISO-8859-2 gives the control character U+0081")
            && e.ends_with("(hint: set the source's `encoding = \"ibm852\"`; the file decodes cleanly as ibm852)"),
        "{e}"
    );
    ctx.encoding = Some(recon::config::TextEncoding::Ibm852);
    let p = sources::parse_bank_bytes(Format::Mt940, &ctx, &sta).expect("parses");
    assert_eq!(
        p.lines[0].reference().as_deref(),
        Some("Platba Müller Dvořák účet č. 12")
    );

    // BAI2 the same.
    let (bai2, _, _) = encoding_rs::WINDOWS_1252.encode(
        "01,SENDER,RECEIVER,261127,0100,1,,,2/\n02,RECEIVER,BANK,1,261127,,USD,2/\n\
         03,123456789,USD,010,100000,,/\n16,195,5000,0,,REF1,Zahlung Müller/\n\
         49,105000,2/\n98,105000,1,4/\n99,105000,1,6/\n",
    );
    let e = format!(
        "{:#}",
        sources::parse_bank_bytes(
            Format::Bai2,
            &sources::ParseContext::new(&SourceConfig::bank_default(Format::Bai2), "b"),
            &bai2
        )
        .unwrap_err()
    );
    assert!(
        e.contains("b:4: not valid UTF-8 (hint: set the source's `encoding = \""),
        "{e}"
    );
}
