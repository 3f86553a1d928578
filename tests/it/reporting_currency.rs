//! One reporting currency, one ordering everywhere (issue 42 points 1 and 6): a night with
//! JPY, EUR, GBP, USD, SEK and CHF cases, a rates file in the ECB's one-day layout the test
//! writes, and a fixed table. The ranking of the email's cases, the Decide sheet's rows and
//! `recon cases list`, and the total at risk, are checked against values this test computes
//! from the rates it wrote (rust_decimal, `amount / rate`: the reporting currency is the euro).

use crate::support::{Settings, TestEnv};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

const IBAN: &str = "DE89370400440532013000";

/// The rates file, as the ECB publishes eurofxref.csv (a space after each comma, a trailing
/// `, `): USD, JPY and GBP; no SEK (the fixed table has it) and no CHF (nothing has it).
const RATES_CSV: &str = "Date, USD, JPY, GBP, \n10 November 2026, 1.1252, 162.91, 0.8477, \n";

/// The job file's fixed table: SEK, and a GBP the file's rate must win over.
const FIXED: &str = "[rates.fixed]\nSEK = \"11.0\"\nGBP = \"0.5\"\n";

/// The rate of each currency per 1 EUR, as this test wrote it (the file first, then the
/// fixed table for what the file lacks).
fn rates_written() -> BTreeMap<&'static str, Decimal> {
    let d = |s: &str| s.parse::<Decimal>().expect("rate");
    BTreeMap::from([
        ("EUR", Decimal::ONE),
        ("USD", d("1.1252")),
        ("JPY", d("162.91")),
        ("GBP", d("0.8477")),
        ("SEK", d("11.0")),
    ])
}

/// The critical cases (FAILED in the ledger, paid at the provider): payment, amount, currency.
const PAID_AFTER_FAILED: [(&str, &str, &str); 6] = [
    ("P-JPY", "500000", "JPY"),
    ("P-EUR", "4000.00", "EUR"),
    ("P-GBP", "3000.00", "GBP"),
    ("P-USD", "3500.00", "USD"),
    ("P-SEK", "40000.00", "SEK"),
    ("P-CHF", "9000.00", "CHF"),
];

/// A medium case: a line no ledger payment is for, the largest money of the night.
const ORPHAN: (&str, &str, &str) = ("L-ORPHAN", "1000000.00", "EUR");

async fn night() -> (TestEnv, recon::run::RunReport) {
    night_with(&format!(
        "reporting_currency = \"EUR\"\n{}[rates]\npath = \"rates/eurofxref-{{date}}.csv\"\n{FIXED}",
        crate::report::file_email()
    ))
    .await
}

/// The night of [`night`] with `extra` job lines.
async fn night_with(extra: &str) -> (TestEnv, recon::run::RunReport) {
    let env = TestEnv::with(Settings {
        extra: extra.to_string(),
        ..Settings::default()
    });
    std::fs::create_dir_all(env.path("rates")).expect("rates dir");
    env.write("rates/eurofxref-2026-11-10.csv", RATES_CSV);
    let (mut payments, mut attempts, mut lines) = (String::new(), String::new(), String::new());
    for (k, (p, amount, cur)) in PAID_AFTER_FAILED.iter().enumerate() {
        let at = format!("2026-11-10T{:02}:00:00Z", 8 + k);
        payments.push_str(&format!(
            "{p},{IBAN},{amount},{cur},FAILED,{at},{at},A-{k},\n"
        ));
        attempts.push_str(&format!("A-{k},{p},{at},{at},FAILED,,declined\n"));
        lines.push_str(&format!(
            "L-{p},{p},{IBAN},{amount},{cur},2026-11-10T{:02}:05:00Z,PAYMENT\n",
            8 + k
        ));
    }
    let (id, amount, cur) = ORPHAN;
    lines.push_str(&format!(
        "{id},,{IBAN},{amount},{cur},2026-11-10T18:00:00Z,PAYMENT\n"
    ));
    env.import(&payments, &attempts).await;
    env.statement(&lines);
    let report = env.try_standard_day("fx").await.expect("run");
    (env, report)
}

/// `amount` of `currency` in EUR at the rates this test wrote, or None without a rate.
fn eur(amount: &str, currency: &str) -> Option<Decimal> {
    let rate = *rates_written().get(currency)?;
    Some(amount.parse::<Decimal>().expect("amount") / rate)
}

/// The critical payments in the order the reports must list them: by value in EUR, largest
/// first, the one without a rate last.
fn expected_critical_order() -> Vec<&'static str> {
    let mut valued: Vec<(Decimal, &str)> = PAID_AFTER_FAILED
        .iter()
        .filter_map(|(p, a, c)| eur(a, c).map(|v| (v, *p)))
        .collect();
    valued.sort_by_key(|v| std::cmp::Reverse(v.0));
    let mut order: Vec<&str> = valued.into_iter().map(|(_, p)| p).collect();
    order.extend(
        PAID_AFTER_FAILED
            .iter()
            .filter(|(_, a, c)| eur(a, c).is_none())
            .map(|(p, _, _)| *p),
    );
    order
}

/// Digits grouped in thousands, as a person reads them (`1,018,118.44`): this test's own.
fn grouped(d: Decimal) -> String {
    let text = d.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let digits: Vec<char> = int.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(*c);
    }
    if frac.is_empty() {
        out
    } else {
        format!("{out}.{frac}")
    }
}

#[tokio::test]
async fn cases_rank_by_value_in_the_reporting_currency_in_the_email_the_sheet_and_the_list() {
    let (env, report) = night().await;
    let order = expected_critical_order();
    // The ranking differs from the number of units (JPY 500000 first, CHF 9000 second).
    assert_eq!(
        order,
        ["P-EUR", "P-SEK", "P-GBP", "P-USD", "P-JPY", "P-CHF"]
    );

    // The stored cases: `recon cases list`, in its order.
    let db = env.db().await;
    let listed = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases list");
    let who = |c: &recon::store::cases::StoredCase| -> String {
        match c.payments.first() {
            Some(p) => p.payment_id.clone(),
            None => c.lines.first().map(|l| l.1.clone()).unwrap_or_default(),
        }
    };
    let list_order: Vec<String> = listed.iter().map(who).collect();
    let mut want: Vec<String> = order.iter().map(|p| p.to_string()).collect();
    want.push(ORPHAN.0.to_string());
    assert_eq!(list_order, want, "recon cases list");
    let key_of: BTreeMap<String, String> = listed.iter().map(|c| (who(c), c.key.clone())).collect();
    let rendered = recon::decisions::queue::render(&listed);
    assert!(
        rendered.contains("value (EUR, for ordering)") && rendered.contains("no rate"),
        "{rendered}"
    );

    // The Decide sheet: the same order, by case key.
    let want_keys: Vec<String> = want.iter().map(|p| key_of[p].clone()).collect();
    let decide = crate::decisions::decide_cases(&report.out_dir.join("report.xlsx"));
    assert_eq!(decide, want_keys, "Decide sheet");

    // The email: its cases in the same order, each amount in its own currency beside its
    // value; the total at risk in its first lines.
    let text = crate::report::email_body(&report.out_dir, "text/plain");
    // Each listed case is a block: `N. SEVERITY Title: amount`, then its lines up to a blank
    // one (the footer carries the value for ordering).
    let mut case_lines: Vec<String> = Vec::new();
    for l in text.lines() {
        let starts = l
            .split_once(". ")
            .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if starts {
            case_lines.push(l.to_string());
        } else if let Some(last) = case_lines.last_mut()
            && l.starts_with("   ")
        {
            last.push('\n');
            last.push_str(l);
        }
    }
    assert_eq!(case_lines.len(), want.len(), "{text}");
    let amounts: BTreeMap<&str, (&str, &str)> = PAID_AFTER_FAILED
        .iter()
        .map(|(p, a, c)| (*p, (*a, *c)))
        .chain([(ORPHAN.0, (ORPHAN.1, ORPHAN.2))])
        .collect();
    for (line, who) in case_lines.iter().zip(&want) {
        let (amount, cur) = amounts[who.as_str()];
        let shown = format!("{} {cur}", grouped(amount.parse().expect("amount")));
        assert!(line.contains(&shown), "{who}: {line:?} lacks {shown}");
        match eur(amount, cur) {
            // An amount in the reporting currency is its own value: not said twice.
            Some(_) if cur == "EUR" => {
                assert!(!line.contains("value for ordering"), "{who}: {line:?}")
            }
            Some(v) => {
                let value = format!("value for ordering: {} EUR", grouped(v.round_dp(2)));
                assert!(line.contains(&value), "{who}: {line:?} lacks {value}");
            }
            None => assert!(line.contains(&format!("no rate for {cur}")), "{line:?}"),
        }
    }
    let valued: Vec<Decimal> = amounts.values().filter_map(|(a, c)| eur(a, c)).collect();
    let total: Decimal = valued.iter().copied().sum::<Decimal>().round_dp(2);
    let critical: Decimal = PAID_AFTER_FAILED
        .iter()
        .filter_map(|(_, a, c)| eur(a, c))
        .sum::<Decimal>()
        .round_dp(2);
    let first_lines: Vec<&str> = text.lines().take(4).collect();
    let total_line = format!(
        "Total at risk: {} EUR in {} cases, 1 more without a rate (CHF) left out",
        grouped(total),
        valued.len()
    );
    assert!(
        first_lines.contains(&total_line.as_str()),
        "{first_lines:#?} lacks {total_line}"
    );
    assert!(
        text.contains(&format!("value {} EUR", grouped(critical))),
        "the critical cases' value: {text}"
    );
    assert!(
        text.contains("ECB rates of 2026-11-10") && text.contains("fixed rates for SEK"),
        "which rates: {text}"
    );

    // summary.json: the totals, the rates with their day, and the missing rate said.
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.out_dir.join("summary.json")).expect("summary.json"),
    )
    .expect("json");
    let r = &summary["reporting"];
    assert_eq!(r["currency"], "EUR");
    assert_eq!(r["total_at_risk"], total.to_string(), "{r}");
    assert_eq!(
        r["at_risk_by_severity"]["CRITICAL"],
        critical.to_string(),
        "{r}"
    );
    assert_eq!(r["cases_without_rate"], 1);
    assert_eq!(r["currencies_without_rate"], serde_json::json!(["CHF"]));
    assert_eq!(r["rates"]["GBP"]["per_eur"], "0.8477", "the file wins: {r}");
    assert_eq!(r["rates"]["GBP"]["date"], "2026-11-10");
    assert_eq!(r["rates"]["SEK"]["from"], "fixed");
    let warning =
        "no rate for CHF: its cases are ordered after valued ones and left out of the total";
    assert!(
        summary["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w == warning),
        "{}",
        summary["warnings"]
    );
    assert!(text.contains(warning), "the email says it: {text}");
}

/// Without a reporting currency the one ordering still holds: `recon cases list` lists the
/// cases as the Decide sheet does (within a severity by the units of the largest amount, as
/// the reports rank them then). Before, the list ordered them by when they changed.
#[tokio::test]
async fn without_a_reporting_currency_cases_list_follows_the_decide_sheet() {
    let (env, report) = night_with(&crate::report::file_email()).await;
    let db = env.db().await;
    let listed = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases list");
    let keys: Vec<String> = listed.iter().map(|c| c.key.clone()).collect();
    let decide = crate::decisions::decide_cases(&report.out_dir.join("report.xlsx"));
    assert_eq!(keys, decide, "recon cases list against the Decide sheet");
    let first: Vec<String> = listed
        .iter()
        .take(3)
        .filter_map(|c| c.payments.first().map(|p| p.payment_id.clone()))
        .collect();
    // By units: 500,000 JPY, 40,000 SEK, 9,000 CHF.
    assert_eq!(first, ["P-JPY", "P-SEK", "P-CHF"]);
    assert!(
        !recon::decisions::queue::render(&listed).contains("for ordering"),
        "no value column without a reporting currency"
    );
}

#[tokio::test]
async fn a_missing_rates_file_is_said_and_the_fixed_table_still_values() {
    let env = TestEnv::with(Settings {
        extra: format!(
            "reporting_currency = \"EUR\"\n[rates]\npath = \"rates/eurofxref-{{date}}.csv\"\n{FIXED}"
        ),
        ..Settings::default()
    });
    env.import(
        &format!("P-1,{IBAN},110.00,SEK,FAILED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,FAILED,,declined\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},110.00,SEK,2026-11-10T09:05:00Z,PAYMENT\n"
    ));
    let report = env.try_standard_day("nofile").await.expect("run");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.out_dir.join("summary.json")).expect("summary.json"),
    )
    .expect("json");
    let warnings = summary["warnings"].to_string();
    assert!(
        warnings.contains("eurofxref-2026-11-10.csv") && warnings.contains("fixed rates"),
        "{warnings}"
    );
    // 110 SEK at 11 per EUR.
    assert_eq!(summary["reporting"]["total_at_risk"], "10.00");
}

#[test]
fn rates_need_a_reporting_currency_and_are_positive_decimals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("recon.toml");
    let base = "timezone = \"UTC\"\ndatabase_url = \"sqlite://r.db\"\noutput_dir = \"out\"\n";
    let err = |extra: &str| -> String {
        match recon::config::Config::parse(&format!("{base}{extra}"), &path) {
            Ok(_) => panic!("{extra:?} was accepted"),
            Err(e) => format!("{e:#}"),
        }
    };
    assert!(
        err("[rates.fixed]\nUSD = \"1.08\"\n").contains("reporting_currency"),
        "rates without a reporting currency"
    );
    let e = err("reporting_currency = \"EUR\"\n[rates.fixed]\nUSD = \"-1\"\n");
    assert!(
        e.contains("rates.fixed.USD") && e.contains("positive"),
        "{e}"
    );
    let e = err("reporting_currency = \"EUR\"\n[rates.fixed]\nUSD = \"abc\"\n");
    assert!(e.contains("rates.fixed.USD"), "{e}");
    let e = err("reporting_currency = \"EUROS\"\n");
    assert!(e.contains("reporting_currency"), "{e}");
    let ok = recon::config::Config::parse(
        &format!("{base}reporting_currency = \"USD\"\n[rates]\npath = \"r/{{date}}.xml\"\n"),
        &path,
    )
    .expect("valid");
    let r = ok.reporting.expect("reporting");
    assert_eq!(r.currency, "USD");
    assert!(
        r.rates_path
            .as_deref()
            .is_some_and(|p| p.ends_with("r/{date}.xml")),
        "{r:?}"
    );
}

/// The rows of the family sheet `title` of `report`: (payment id, or the line ids of a row
/// without a payment; the amount the row puts at risk: the payment's, or its line's without
/// one; its currency; its severity), in sheet order.
fn family_rows(report: &std::path::Path, title: &str) -> Vec<(String, Decimal, String, String)> {
    let (header, rows) = crate::support::sheet_rows(report, title);
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let number = |d: &calamine::Data| -> Option<Decimal> {
        match d {
            calamine::Data::Float(f) => Some(format!("{f}").parse().expect("decimal")),
            calamine::Data::Int(i) => Some(Decimal::from(*i)),
            _ => None,
        }
    };
    rows.iter()
        .map(|r| {
            let payment = r[col("payment_id")].to_string();
            let (who, amount, currency) = match number(&r[col("amount")]) {
                Some(a) if !payment.is_empty() => (payment, a, r[col("currency")].to_string()),
                _ => (
                    r[col("line_ids")].to_string(),
                    number(&r[col("line_amount")]).expect("a line amount"),
                    r[col("line_currency")].to_string(),
                ),
            };
            (who, amount, currency, r[col("severity")].to_string())
        })
        .collect()
}

/// `rows` as the one ordering must list them, by this test's own values: the more severe
/// first, then the valued rows by their value in EUR at the rates this test wrote (largest
/// first), then those without a rate.
fn ordered_by_value(rows: &[(String, Decimal, String, String)]) -> Vec<String> {
    let severity = |s: &str| {
        ["CRITICAL", "HIGH", "MEDIUM", "LOW"]
            .iter()
            .position(|x| *x == s)
    };
    let mut keyed: Vec<(Option<usize>, bool, std::cmp::Reverse<Decimal>, String)> = rows
        .iter()
        .map(|(who, amount, cur, sev)| {
            let v = eur(&amount.abs().to_string(), cur);
            (
                severity(sev),
                v.is_none(),
                std::cmp::Reverse(v.unwrap_or(amount.abs())),
                who.clone(),
            )
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|k| k.3).collect()
}

/// Near misses in JPY, EUR, GBP and USD (an UNKNOWN payment and a line of its recipient and
/// currency with a fee netted): payment, amount, line amount, currency. By number of units
/// the JPY, USD, EUR, GBP; by value in EUR the JPY, GBP, USD, EUR.
const NEAR_MISSES: [(&str, &str, &str, &str, &str); 4] = [
    (
        "P-NJPY",
        "600000",
        "599000",
        "JPY",
        "DE89370400440532013000",
    ),
    ("P-NEUR", "3400.00", "3395.00", "EUR", "NL91ABNA0417164300"),
    (
        "P-NGBP",
        "3000.00",
        "2995.00",
        "GBP",
        "GB33BUKB20201555555555",
    ),
    (
        "P-NUSD",
        "3900.00",
        "3895.00",
        "USD",
        "FR7630006000011234567890189",
    ),
];

#[tokio::test]
async fn family_sheets_list_rows_by_value_in_the_reporting_currency() {
    // Money at risk: the critical rows of the night by value, CHF (no rate) after them, the
    // medium orphan last, whatever its money.
    let (_env, report) = night().await;
    let rows = family_rows(&report.out_dir.join("report.xlsx"), "Money at risk");
    let order: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    assert_eq!(order, ordered_by_value(&rows), "{rows:?}");
    let mut want: Vec<String> = expected_critical_order()
        .iter()
        .map(|p| p.to_string())
        .collect();
    want.push(ORPHAN.0.to_string());
    assert_eq!(order, want);

    // Review: near misses in four currencies, each a payment row and a line row.
    let env = TestEnv::with(Settings {
        extra: "reporting_currency = \"EUR\"\n[rates]\npath = \"rates/eurofxref-{date}.csv\"\n"
            .to_string(),
        ..Settings::default()
    });
    std::fs::create_dir_all(env.path("rates")).expect("rates dir");
    env.write("rates/eurofxref-2026-11-10.csv", RATES_CSV);
    let (mut payments, mut attempts, mut lines) = (String::new(), String::new(), String::new());
    for (k, (p, amount, line, cur, iban)) in NEAR_MISSES.iter().enumerate() {
        let at = format!("2026-11-10T{:02}:00:00Z", 8 + k);
        payments.push_str(&format!(
            "{p},{iban},{amount},{cur},UNKNOWN,{at},{at},A-{k},\n"
        ));
        attempts.push_str(&format!("A-{k},{p},{at},,UNKNOWN,,timeout\n"));
        lines.push_str(&format!(
            "L-{p},,{iban},{line},{cur},2026-11-10T{:02}:30:00Z,PAYMENT\n",
            8 + k
        ));
    }
    env.import(&payments, &attempts).await;
    env.statement(&lines);
    let report = env.try_standard_day("review").await.expect("run");
    let rows = family_rows(&report.out_dir.join("report.xlsx"), "Review");
    assert!(
        NEAR_MISSES
            .iter()
            .all(|(p, ..)| rows.iter().any(|r| r.0 == *p)),
        "every near miss is in the Review sheet: {rows:?}"
    );
    let order: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    assert_eq!(order, ordered_by_value(&rows), "{rows:?}");
    let payments_in_order: Vec<&str> = order
        .iter()
        .map(String::as_str)
        .filter(|w| w.starts_with("P-"))
        .collect();
    assert_eq!(payments_in_order, ["P-NJPY", "P-NGBP", "P-NUSD", "P-NEUR"]);
}
