//! `recon demo`: a fresh SQLite database, the bundled sample ledger imported, one run, and a
//! summary that says what to try next.

use crate::config::Config;
use crate::run::{RunOptions, RunReport};
use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The sample's run date and cut-off (the sample statement is complete up to 2026-11-30).
pub const SAMPLE_DATE: &str = "2026-11-27";
/// The sample's as-of: late enough to close most windows, early enough that one UNKNOWN
/// payment from the evening is still AWAITING_EVIDENCE.
pub const SAMPLE_AS_OF: &str = "2026-12-01T12:00:00Z";

/// Runs the demo from `sample_dir` (holding recon.toml, payments.csv, attempts.csv,
/// statement.csv). The database named in recon.toml is deleted first.
pub async fn run(sample_dir: &Path) -> Result<RunReport> {
    let cfg = Config::load(&sample_dir.join("recon.toml"))?;
    let Some(file) = cfg.database_url.strip_prefix("sqlite://") else {
        return Err(crate::exit::fail(
            crate::exit::Failure::Config,
            "the demo uses the embedded SQLite database (hint: unset RECON_DATABASE_URL / DATABASE_URL)",
        ));
    };
    {
        for suffix in ["", "-wal", "-shm"] {
            let p = format!("{file}{suffix}");
            if Path::new(&p).exists() {
                std::fs::remove_file(&p)
                    .with_context(|| format!("removing old demo database {p}"))?;
            }
        }
    }
    let db = crate::db::Db::for_job(&cfg).await?;
    crate::ledger::import::import(
        &db,
        &sample_dir.join("payments.csv"),
        Some(&sample_dir.join("attempts.csv")),
    )
    .await?;
    db.close().await;
    let date: NaiveDate = SAMPLE_DATE.parse()?;
    let as_of: DateTime<Utc> = SAMPLE_AS_OF.parse()?;
    crate::run::run(
        &cfg,
        &RunOptions {
            from: date,
            to: date,
            as_of: Some(as_of),
            dry_run: false,
            run_id: None,
            wait: false,
        },
    )
    .await
}

/// Outcome → (rows, currency → sum), in outcome name order.
type Tally = BTreeMap<String, (usize, BTreeMap<String, Decimal>)>;

/// What `recon demo` prints: the run, the payments by outcome and, apart from them, the
/// statement lines no single payment claims by outcome (a line two payments fit is counted
/// once there, each payment once above), transitions and tickets, where the files are, and
/// what to try next: `recon explain` on a payment that went to review and on a statement line
/// (one no payment claims, if any), and the review queue. `config` is the job file as the user
/// names it.
pub fn text(report: &RunReport, config: &Path) -> Result<String> {
    let results = report.out_dir.join("results.csv");
    let mut rdr = csv::Reader::from_path(&results)
        .with_context(|| format!("reading {}", results.display()))?;
    let header = rdr.headers()?.clone();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("{}: no column {name}", results.display()))
    };
    let (outcome, payment, line, action) = (
        col("outcome")?,
        col("payment_id")?,
        col("provider_txn_id")?,
        col("action")?,
    );
    let (amount, currency) = (col("amount")?, col("currency")?);
    let (line_amount, line_currency) = (col("line_amount")?, col("line_currency")?);
    let (mut payments, mut lines) = (Tally::new(), Tally::new());
    // (payment id, outcome) of the first payment sent to review, AMBIGUOUS preferred; (line
    // id, outcome) of the first line row, ORPHAN_AT_PROVIDER (no payment of ours) preferred.
    let mut review: Option<(String, String)> = None;
    let mut first_line: Option<(String, String)> = None;
    for r in rdr.records() {
        let r = r.with_context(|| format!("reading {}", results.display()))?;
        let first = |i: usize| r[i].split(';').next().unwrap_or("").trim().to_string();
        let o = r[outcome].to_string();
        let (tally, money) = if r[payment].is_empty() {
            let better = match &first_line {
                None => true,
                Some((_, seen)) => o == "ORPHAN_AT_PROVIDER" && seen != "ORPHAN_AT_PROVIDER",
            };
            if better {
                first_line = Some((first(line), o.clone()));
            }
            (&mut lines, (first(line_amount), first(line_currency)))
        } else {
            let ticket = &r[action] == "ticket";
            let better = match &review {
                None => ticket,
                Some((_, seen)) => ticket && o == "AMBIGUOUS" && seen != "AMBIGUOUS",
            };
            if better {
                review = Some((r[payment].to_string(), o.clone()));
            }
            (
                &mut payments,
                (r[amount].to_string(), r[currency].to_string()),
            )
        };
        let entry = tally.entry(o).or_default();
        entry.0 += 1;
        if let Ok(v) = money.0.parse::<Decimal>()
            && !money.1.is_empty()
        {
            *entry.1.entry(money.1).or_default() += v;
        }
    }
    let s = &report.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "recon demo: run {} of {} (as of {})",
        s.run_id, s.range_from, s.as_of
    );
    let _ = writeln!(
        out,
        "  {} payments in scope, {} statement lines read, {} rejected",
        s.payments_in_scope, s.statement_lines, s.rejected_lines
    );
    let mut table = |title: String, tally: &Tally| {
        let _ = writeln!(out, "  {title}");
        for (name, (n, sums)) in tally {
            let money: Vec<String> = sums.iter().map(|(c, v)| format!("{v} {c}")).collect();
            let _ = writeln!(out, "    {name:<22} {n:>6}   {}", money.join(", "));
        }
    };
    let count = |t: &Tally| t.values().map(|(n, _)| n).sum::<usize>();
    table(
        format!("payments: {}, one outcome each", count(&payments)),
        &payments,
    );
    if !lines.is_empty() {
        table(
            format!(
                "statement lines not claimed by exactly one payment: {}, one outcome each",
                count(&lines)
            ),
            &lines,
        );
    }
    crate::outputs::summary::write_totals(
        &mut out,
        &BTreeMap::new(),
        &s.transitions,
        &s.tickets,
        &s.warnings,
    );
    let _ = writeln!(
        out,
        "  results: {} (results.csv, summary.json, report.html, report.xlsx, diff.csv, email.eml)",
        report.out_dir.display()
    );
    let _ = writeln!(out, "  {}", report.alert.text());
    let config = config.display();
    let _ = writeln!(
        out,
        "\nNext (`recon` on your PATH: `cargo install --locked --debug --path .`; or `cargo run --` for it):"
    );
    if let Some((id, o)) = &review {
        let _ = writeln!(
            out,
            "  recon explain --config {config} {id}\n      why payment {id} is {o}"
        );
    }
    if let Some((id, o)) = &first_line {
        let _ = writeln!(
            out,
            "  recon explain --config {config} {id}\n      why statement line {id} is {o}"
        );
    }
    let _ = writeln!(
        out,
        "  recon cases list --config {config} --open\n      what this run left to decide, one case per decision (decide them in report.xlsx, \
         sheet Decide, then `recon decisions apply --config {config} FILE.xlsx`)"
    );
    Ok(out)
}
