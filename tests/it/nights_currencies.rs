//! Money in several currencies in the night simulator (issue 42): a child module of `nights`,
//! on the same [`Harness`].
//!
//! The worlds (`recon_tools::sim`, each a probability of `Probs`, 0 switches it off):
//! - a provider payout that names its payment by reference but is booked in another currency
//!   (`currency_mismatch`; the same number of minor units, of units, or about the converted
//!   amount; JPY among them);
//! - one recipient paid in three or four of EUR, GBP, USD and JPY within hours by unnamed
//!   payouts of the same number of minor units (`multi_currency`: 25000 JPY beside 250.00 EUR);
//! - a payout netted by a fee, within the job's `write_off_limit` or above it, named by
//!   reference (AMOUNT_MISMATCH) or unnamed (a near miss) (`netted_fee`, `fee_above_limit`);
//! - the job runs with `reporting_currency = "EUR"` and an ECB daily rates file per weekday
//!   (`rates/eurofxref-{date}.csv`; none on weekends, so a Saturday uses Friday's), sometimes
//!   without one currency or with `N/A` (`rate_missing`), sometimes with a fixed GBP rate in the
//!   job file (`fixed_rate`); the email goes to the run folder (file transport).
//!
//! What it checks, after every run:
//! - no automatic row (MATCHED, RESOLVED_*: no ticket) pairs a payment with a line of another
//!   currency, or of another amount unless a reviewer accepted exactly that difference; a
//!   recon `→SUCCEEDED` never rests on such a line;
//! - a line that names its payment in another currency is reported as that payment's
//!   CURRENCY_MISMATCH (until a reviewer decides the payment);
//! - what the email lists first is what is worth most: the cases of the text part (and the
//!   same keys in the same order in the HTML part) by non-increasing severity, within one
//!   severity the valued before the unvalued and values non-increasing, each value computed
//!   here from the case's amounts and the simulator's own copy of the rates it wrote; a case
//!   with a currency that has no rate is never shown with a value (nor one with every rate
//!   without); after a committed one-day run, no open case it stored but the email left out
//!   outranks the last one it lists;
//! - at the end, the expected outcomes of the multi-currency recipients: each payment paid by
//!   the one payout of its currency to that recipient is MATCHED or resolved SUCCEEDED (unless
//!   a reviewer decided it).

use super::{Harness, History, Row, parse_results};
use recon_tools::sim::{self, LedgerStatus, LineRole, Shape, World};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Values closer than this (EUR) are a tie: recon keeps 6 decimals per currency.
fn tolerance() -> Decimal {
    Decimal::new(1, 4)
}

/// The currencies' side of a world.
#[derive(Debug, Default)]
pub(super) struct Currencies {
    /// (line, payment) pairs already reported.
    reported: BTreeSet<(usize, usize, &'static str)>,
    /// Emails already judged (a run folder is judged once).
    emails: BTreeSet<String>,
    /// Payments whose accepted difference took effect: (line, payment id).
    pub(super) accepted: BTreeSet<(usize, String)>,
}

/// One case as the email's text part lists it.
#[derive(Debug, Clone)]
struct Listed {
    number: usize,
    severity: String,
    /// (amount, currency) as shown.
    amounts: Vec<(Decimal, String)>,
    shown: Shown,
    key: String,
    text: String,
}

/// The value an email shows beside a case.
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    /// `value for ordering: 3,069.17 EUR`.
    Value(Decimal),
    /// `no rate for JPY`.
    NoRate(Vec<String>),
    /// Nothing: no reporting currency.
    Nothing,
}

fn rank(severity: &str) -> u8 {
    match severity {
        "CRITICAL" => 0,
        "HIGH" => 1,
        "MEDIUM" => 2,
        "LOW" => 3,
        _ => 4,
    }
}

/// `1,234.56 EUR, 25,000 JPY` (the email's grouped amounts, or a stored case's plain ones).
fn parse_amounts(text: &str) -> Option<Vec<(Decimal, String)>> {
    text.split(", ")
        .map(|part| {
            let (n, c) = part.trim().rsplit_once(' ')?;
            let d: Decimal = n.replace(',', "").parse().ok()?;
            Some((d, c.to_string()))
        })
        .collect()
}

/// The cases of the email's text part, in order, and the number of cases it says there are.
/// A case is `N. SEVERITY Title: amounts`, its lines indented, and a footer `case C-… · … ·
/// value for ordering: 1,234.56 EUR` (or `no rate for JPY`; nothing when its money is all in
/// the reporting currency).
fn parse_text(text: &str) -> (usize, Vec<Listed>) {
    let mut out: Vec<Listed> = Vec::new();
    let mut total = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("The ")
            && let Some((_, n)) = rest.split_once(" most urgent of ")
            && let Some((n, _)) = n.split_once(" cases")
        {
            total = n.replace(',', "").trim().parse().unwrap_or(0);
            continue;
        }
        if let Some(rest) = line.strip_prefix("   case C-")
            && let Some(last) = out.last_mut()
            && last.key.is_empty()
        {
            let key: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            last.key = format!("C-{key}");
            for part in rest.split(" · ") {
                if let Some(v) = part.strip_prefix("value for ordering: ") {
                    last.shown = match v
                        .rsplit_once(' ')
                        .and_then(|(n, _)| n.replace(',', "").parse::<Decimal>().ok())
                    {
                        Some(d) => Shown::Value(d),
                        None => Shown::Nothing,
                    };
                } else if let Some(c) = part.strip_prefix("no rate for ") {
                    last.shown = Shown::NoRate(c.split(", ").map(String::from).collect());
                }
            }
            continue;
        }
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(number) = number.parse::<usize>() else {
            continue;
        };
        let Some((severity, rest)) = rest.split_once(' ') else {
            continue;
        };
        if rank(severity) > 3 || number != out.len() + 1 {
            continue;
        }
        let amounts = rest.rsplit_once(": ").map(|(_, a)| a).unwrap_or("");
        out.push(Listed {
            number,
            severity: severity.to_string(),
            amounts: parse_amounts(amounts).unwrap_or_default(),
            shown: Shown::Nothing,
            key: String::new(),
            text: line.to_string(),
        });
    }
    let total = total.max(out.len());
    (total, out)
}

/// The case keys of the email's HTML part, in the order of its `<div id="case-N">` blocks.
fn html_keys(html: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for (at, _) in html.match_indices("<div id=\"case-") {
        // The block's last line starts with its key (its why may name other cases).
        let rest = &html[at..];
        if let Some(k) = rest.find("\">case C-") {
            let key: String = rest[k + 9..]
                .chars()
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            keys.push(format!("C-{key}"));
        }
    }
    keys
}

/// The value of `amounts` in EUR with `rates` (units per 1 EUR), or None when a currency has
/// no rate.
fn value_of(
    amounts: &[(Decimal, String)],
    rates: &BTreeMap<&'static str, Decimal>,
) -> Option<Decimal> {
    let mut sum = Decimal::ZERO;
    for (a, c) in amounts {
        let r = rates.get(c.as_str())?;
        sum += a.abs() / *r;
    }
    Some(sum)
}

/// Whether case `a` (severity, value) must be listed before `b`; None when either may come
/// first (a tie).
fn outranks(a: (&str, Option<Decimal>), b: (&str, Option<Decimal>)) -> Option<bool> {
    if rank(a.0) != rank(b.0) {
        return Some(rank(a.0) < rank(b.0));
    }
    match (a.1, b.1) {
        (Some(_), None) => Some(true),
        (None, Some(_)) => Some(false),
        (Some(x), Some(y)) if (x - y).abs() > tolerance() => Some(x > y),
        _ => None,
    }
}

fn fmt_value(v: Option<Decimal>) -> String {
    match v {
        Some(v) => format!("{} EUR", v.round_dp(2)),
        None => "no rate".into(),
    }
}

impl Harness {
    /// The rates files the job reads, the email by file transport, and the world's currency
    /// shapes counted.
    pub(super) fn set_up_currencies(&mut self) {
        for (rel, bytes) in self.world.rates_files() {
            let path = self.env.path(&rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("rates folder");
            }
            std::fs::write(&path, bytes).expect("rates file");
        }
        let mut cfg = std::fs::read_to_string(&self.env.config_path).expect("config");
        cfg.push_str(
            "\n[email]\nfrom = \"recon <recon@bank.test>\"\nto = [\"finance@bank.test\"]\n",
        );
        std::fs::write(&self.env.config_path, cfg).expect("config");
        recon::config::Config::load(&self.env.config_path)
            .expect("the simulator's config with rates and email loads");
        let mut groups = BTreeSet::new();
        for p in &self.world.payments {
            let name = match p.shape {
                Some(Shape::CurrencyMismatch { .. }) => "shape: currency mismatch (world)",
                Some(Shape::MultiCurrency { first, .. }) => {
                    if !groups.insert(first) {
                        continue;
                    }
                    "shape: multi-currency recipient (world)"
                }
                Some(Shape::NettedFee {
                    within_limit: true, ..
                }) => "shape: netted fee within the limit (world)",
                Some(Shape::NettedFee { .. }) => "shape: netted fee above the limit (world)",
                _ => continue,
            };
            *self.stats.entry(name).or_insert(0) += 1;
        }
        let missing = self
            .world
            .rates
            .values()
            .filter(|d| d.len() < 4 || d.iter().any(|(_, r)| r.is_none()))
            .count();
        if missing > 0 {
            *self
                .stats
                .entry("rates: days with a currency missing (world)")
                .or_insert(0) += missing;
        }
    }

    /// Money rows of run `i`: no automatic pairing across currencies or amounts, and a line
    /// naming its payment in another currency reported as its CURRENCY_MISMATCH.
    pub(super) fn check_currency_rows(&mut self, i: usize) {
        let dr = self.runs[i].clone();
        let rows = parse_results(&dr.results, self.start());
        let mut found: Vec<(&'static str, String)> = Vec::new();
        for r in &rows {
            let Some(&p) = self.payment_by_id.get(&r.payment_id) else {
                continue;
            };
            let automatic = r.action == "none" || r.action.starts_with("transition");
            for k in &r.lines {
                let Some(&l) = dr.visible.get(k).or(dr.maybe.get(k)) else {
                    continue;
                };
                let line = &self.world.lines[l];
                let pay = &self.world.payments[p];
                // A return's row names the payout and the return: compare the payouts.
                if matches!(line.role, LineRole::Return { .. }) {
                    continue;
                }
                let other_currency = line.currency != pay.currency;
                let other_amount = !other_currency && line.amount_minor.abs() != pay.amount_minor;
                if !other_currency && !other_amount {
                    continue;
                }
                if !automatic {
                    *self
                        .stats
                        .entry(if other_currency {
                            "currencies: a line of another currency on a ticket row"
                        } else {
                            "currencies: a line of another amount on a ticket row"
                        })
                        .or_insert(0) += 1;
                    continue;
                }
                let accepted = self.cur.accepted.contains(&(l, pay.id.clone()));
                if other_amount && accepted {
                    *self
                        .stats
                        .entry("currencies: pairs on an accepted difference")
                        .or_insert(0) += 1;
                    continue;
                }
                let category = if other_currency {
                    "a payment paired with a line of another currency (issue 42)"
                } else {
                    "a payment paired with a line of another amount, no difference accepted (issue 42)"
                };
                if !self.cur.reported.insert((l, p, category)) {
                    continue;
                }
                found.push((
                    category,
                    format!(
                        "(shape: {}) row {} {} of payment {} takes {}\n    row: {}\n    truth: {}\n    every row recon wrote about it:{}",
                        shape_name(&self.world, p, l),
                        r.outcome,
                        r.action,
                        r.payment_id,
                        line.describe(l, self.start()),
                        r.text,
                        self.world.describe_payment(p),
                        self.timeline(&pay.id)
                    ),
                ));
            }
        }
        // A line that names its payment in another currency is that payment's
        // CURRENCY_MISMATCH, in every run that reports the line.
        for (key, &l) in &dr.visible {
            let Some(p) = self.world.lines[l].payment(&self.world.lines) else {
                continue;
            };
            if self.world.payments[p].shape != Some(Shape::CurrencyMismatch { line: l }) {
                continue;
            }
            let containing: Vec<&Row> = rows.iter().filter(|r| r.lines.contains(key)).collect();
            if containing.is_empty() {
                continue;
            }
            let pid = self.world.payments[p].id.clone();
            if self.human_decided.contains(&pid) {
                *self
                    .stats
                    .entry("currencies: mismatch after a reviewer decided the payment")
                    .or_insert(0) += 1;
                continue;
            }
            let ok = containing
                .iter()
                .any(|r| r.payment_id == pid && r.outcome == "CURRENCY_MISMATCH");
            if ok {
                *self
                    .stats
                    .entry("currencies: CURRENCY_MISMATCH reported")
                    .or_insert(0) += 1;
                continue;
            }
            let category = "a line naming its payment in another currency not reported as its CURRENCY_MISMATCH (issue 42)";
            if !self.cur.reported.insert((l, p, category)) {
                continue;
            }
            let mut s = format!(
                "(shape: CurrencyMismatch) {}\n    truth: {}",
                self.world.lines[l].describe(l, self.start()),
                self.world.describe_payment(p)
            );
            for r in &containing {
                let _ = write!(s, "\n    row: {}", r.text);
            }
            found.push((category, s));
        }
        for (category, text) in found {
            self.violation(dr.night, &dr.label, category, text);
        }
    }

    /// A recon transition `h` of payment `p`: `→SUCCEEDED` never rests on a payout in another
    /// currency, nor on one of another amount whose difference no reviewer accepted.
    pub(super) fn check_currency_transition(
        &mut self,
        night: u32,
        label: &str,
        h: &History,
        p: usize,
    ) {
        if h.to != "SUCCEEDED" {
            return;
        }
        let pay = &self.world.payments[p];
        let (category, line) = match pay.shape {
            Some(Shape::CurrencyMismatch { line }) => (
                "recon resolved a payment whose only payout is in another currency (issue 42)",
                line,
            ),
            Some(Shape::NettedFee { line, .. })
                if !self.cur.accepted.contains(&(line, pay.id.clone())) =>
            {
                (
                    "recon resolved a payment on a payout of another amount, no difference accepted (issue 42)",
                    line,
                )
            }
            Some(Shape::NettedFee { .. }) => {
                *self
                    .stats
                    .entry("currencies: transitions on an accepted difference")
                    .or_insert(0) += 1;
                return;
            }
            _ => return,
        };
        let text = format!(
            "(shape: {}) recon moved {} {}→{} (run {}: {})\n    its payout: {}\n    truth: {}\n    every row recon wrote about it:{}",
            shape_name(&self.world, p, line),
            pay.id,
            h.from,
            h.to,
            h.run_id,
            h.reason,
            self.world.lines[line].describe(line, self.start()),
            self.world.describe_payment(p),
            self.timeline(&pay.id)
        );
        self.violation(night, label, category, text);
    }

    /// After a run: what its email lists first is what is worth most (see the module docs).
    /// `to` is the run's last day (whose rates it values with), `run_ids` its days' runs.
    pub(super) async fn check_email(
        &mut self,
        night: u32,
        label: &str,
        out_dir: &Path,
        to: i64,
        committed_day: Option<String>,
    ) {
        let key = out_dir.display().to_string();
        if !self.cur.emails.insert(key) {
            return;
        }
        let label = format!("{label} (email)");
        if !out_dir.join("email.eml").exists() {
            self.violation(
                night,
                &label,
                "no email in the run folder (issue 42)",
                format!("{} has no email.eml", out_dir.display()),
            );
            return;
        }
        let text = crate::report::email_body(out_dir, "text/plain");
        let html = crate::report::email_body(out_dir, "text/html");
        let (total, listed) = parse_text(&text);
        *self.stats.entry("email: runs checked").or_insert(0) += 1;
        let date = sim::day_date(self.start(), to);
        let rates = self.world.rates_on(date);
        let mut problems: Vec<(&'static str, String)> = Vec::new();
        // The HTML part lists the same cases in the same order.
        let keys: Vec<String> = listed.iter().map(|c| c.key.clone()).collect();
        let hkeys = html_keys(&html);
        if keys != hkeys {
            problems.push((
                "the email's HTML and text parts list other cases or another order (issue 42)",
                format!("text: {keys:?}\n    html: {hkeys:?}"),
            ));
        }
        let valued: Vec<Option<Decimal>> = listed
            .iter()
            .map(|c| value_of(&c.amounts, &rates))
            .collect();
        let rates_text = || {
            rates
                .iter()
                .map(|(c, r)| format!("{c} {r}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (c, v) in listed.iter().zip(&valued) {
            *self.stats.entry("email: cases checked").or_insert(0) += 1;
            if c.amounts.is_empty() || c.key.is_empty() {
                problems.push((
                    "an email case the simulator cannot read (issue 42)",
                    format!("{:?}", c.text),
                ));
                continue;
            }
            match (&c.shown, v) {
                (Shown::Value(shown), Some(mine)) => {
                    if (*shown - mine.round_dp(2)).abs() > Decimal::new(1, 2) {
                        problems.push((
                            "an email case's value is not its amounts at the rates of the night (issue 42)",
                            format!(
                                "case {} ({}): shown {shown} EUR, the rates file of {date} gives {} ({})",
                                c.number,
                                c.text,
                                fmt_value(Some(*mine)),
                                rates_text()
                            ),
                        ));
                    }
                }
                (Shown::Value(shown), None) => problems.push((
                    "an email case with a currency that has no rate is valued (issue 42)",
                    format!(
                        "case {} ({}): shown {shown} EUR, but the rates of {date} have no rate for one of its currencies ({})",
                        c.number,
                        c.text,
                        rates_text()
                    ),
                )),
                (Shown::NoRate(_), None) => {
                    *self.stats.entry("email: cases without a rate").or_insert(0) += 1;
                }
                (Shown::NoRate(cs), Some(mine)) => problems.push((
                    "an email case said to have no rate although the rates file has every one of its currencies (issue 42)",
                    format!(
                        "case {} ({}): no rate for {cs:?}, the rates of {date} give {} ({})",
                        c.number,
                        c.text,
                        fmt_value(Some(*mine)),
                        rates_text()
                    ),
                )),
                // Money all in the reporting currency is its own value: not said twice.
                (Shown::Nothing, Some(_))
                    if c.amounts
                        .iter()
                        .all(|(_, cur)| cur == sim::REPORTING_CURRENCY) => {}
                (Shown::Nothing, _) => problems.push((
                    "an email case without its value in the reporting currency (issue 42)",
                    format!("case {} ({})", c.number, c.text),
                )),
            }
            if c.amounts
                .iter()
                .any(|(_, cur)| cur != sim::REPORTING_CURRENCY)
            {
                *self
                    .stats
                    .entry("email: cases in another currency than EUR")
                    .or_insert(0) += 1;
            }
        }
        // The order: severity, then the valued first, then value, by the simulator's values.
        for k in 1..listed.len() {
            let (a, b) = (&listed[k - 1], &listed[k]);
            *self.stats.entry("email: pairs ordered").or_insert(0) += 1;
            if outranks((&b.severity, valued[k]), (&a.severity, valued[k - 1])) == Some(true) {
                problems.push((
                    "the email lists a case before one worth more (issue 42)",
                    format!(
                        "case {} {} ({}, {}) is listed before case {} {} ({}, {}) with the rates of {date} ({})\n    {}\n    {}",
                        a.number,
                        a.key,
                        a.severity,
                        fmt_value(valued[k - 1]),
                        b.number,
                        b.key,
                        b.severity,
                        fmt_value(valued[k]),
                        rates_text(),
                        a.text,
                        b.text
                    ),
                ));
            }
        }
        // The cases the email leaves out are worth no more than the last it lists.
        if let (Some(run_id), Some(last)) = (committed_day, listed.last())
            && total > listed.len()
        {
            let db = self.env.db().await;
            let stored = recon::decisions::queue::list(&db, false)
                .await
                .expect("cases");
            db.close().await;
            let shown: BTreeSet<&str> = listed.iter().map(|c| c.key.as_str()).collect();
            let lv = valued[listed.len() - 1];
            for c in stored.iter().filter(|c| {
                c.last_seen_run_id == run_id
                    && matches!(c.status.as_str(), "OPEN" | "ESCALATED")
                    && !shown.contains(c.key.as_str())
            }) {
                *self
                    .stats
                    .entry("email: cases left out checked")
                    .or_insert(0) += 1;
                let Some(amounts) = parse_amounts(&c.at_risk) else {
                    continue;
                };
                let v = value_of(&amounts, &rates);
                if outranks((&c.severity, v), (&last.severity, lv)) == Some(true) {
                    problems.push((
                        "the email leaves out a case worth more than one it lists (issue 42)",
                        format!(
                            "case {} ({}, {}, {}) is not among the {} listed, whose last is case {} {} ({}, {}) with the rates of {date} ({})",
                            c.key,
                            c.severity,
                            c.at_risk,
                            fmt_value(v),
                            listed.len(),
                            last.number,
                            last.key,
                            last.severity,
                            fmt_value(lv),
                            rates_text()
                        ),
                    ));
                }
            }
        }
        for (category, text) in problems {
            self.violation(night, &label, category, text);
        }
    }

    /// At the end: the multi-currency recipients' expected outcomes (see the module docs).
    pub(super) async fn check_currency_outcomes(&mut self, last: u32) {
        let status: BTreeMap<String, String> = self
            .query("SELECT payment_id, status FROM payments")
            .await
            .into_iter()
            .map(|r| (r[0].clone(), r[1].clone()))
            .collect();
        let paired: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| !r.dry)
            .flat_map(|r| parse_results(&r.results, self.start()))
            .filter(|row| row.outcome == "MATCHED" || row.outcome == "RESOLVED_SUCCEEDED")
            .map(|row| row.payment_id)
            .collect();
        let inbox = self.world.inbox_at(last);
        let final_as_of = sim::night_as_of(self.start(), last);
        let mut missed = Vec::new();
        for (i, p) in self.world.payments.iter().enumerate() {
            let Some(Shape::MultiCurrency { .. }) = p.shape else {
                continue;
            };
            let key = match (p.fate.paid(), p.status) {
                (true, LedgerStatus::Succeeded) => "multi-currency: paid, SUCCEEDED",
                (true, _) => "multi-currency: paid, unresolved",
                (false, LedgerStatus::Succeeded) => "multi-currency: lost, SUCCEEDED",
                (false, _) => "multi-currency: lost, unresolved",
            };
            *self.stats.entry(key).or_insert(0) += 1;
            if self.human_decided.contains(&p.id) || !p.fate.paid() {
                continue;
            }
            let l = p.lines[0];
            let line = &self.world.lines[l];
            let complete = inbox.get(&(line.source, line.file_day)).is_some_and(|&k| {
                let v = &self.world.versions[k];
                v.complete() && v.lines.contains(&l)
            });
            // Copied by a flawed file: a duplicate until corrected.
            let copied = self
                .world
                .lines
                .iter()
                .any(|x| matches!(x.role, LineRole::Spurious { copy_of } if copy_of == l));
            if !complete || copied || line.booked_at > final_as_of {
                continue;
            }
            let done = paired.contains(&p.id)
                || (p.status != LedgerStatus::Succeeded
                    && status.get(&p.id).is_some_and(|s| s == "SUCCEEDED"));
            if done {
                *self
                    .stats
                    .entry("multi-currency: paired in its own currency")
                    .or_insert(0) += 1;
            } else {
                missed.push(format!(
                    "(shape: MultiCurrency) the one payout of its currency to its recipient is in a complete file, but by the end no run matched or resolved it (ledger now {})\n    truth: {}\n    every row recon wrote about it:{}",
                    status.get(&p.id).map(String::as_str).unwrap_or("-"),
                    self.world.describe_payment(i),
                    self.timeline(&p.id)
                ));
            }
        }
        for m in missed {
            self.violation(
                last,
                "-",
                "no progress on a recipient paid in several currencies (issue 42)",
                m,
            );
        }
    }
}

/// The shape of payment `p` (or of line `l`'s payment) for the summary's per-shape counts.
fn shape_name(world: &World, p: usize, l: usize) -> String {
    world.payments[p]
        .shape
        .or_else(|| {
            world.lines[l]
                .payment(&world.lines)
                .and_then(|q| world.payments[q].shape)
        })
        .map(|s| {
            format!("{s:?}")
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect()
        })
        .unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nights::{DayRun, LineKey};
    use crate::support::Backend;
    use recon_tools::sim::SimOptions;

    /// A run whose results.csv holds `rows` (`outcome,payment,line,action`) about world lines.
    fn fake_run(h: &Harness, rows: &[(&str, &str, usize, &str)]) -> DayRun {
        let mut results =
            String::from("outcome,payment_id,provider_txn_id,action,source_lines,booked_at\n");
        let mut visible = BTreeMap::new();
        for (k, (outcome, payment, l, action)) in rows.iter().enumerate() {
            let line = &h.world.lines[*l];
            let txn = line.txn_id.clone().expect("a provider line");
            visible.insert(LineKey::Psp(txn.clone()), *l);
            let _ = writeln!(
                results,
                "{outcome},{payment},{txn},{action},psp:{},{}",
                k + 2,
                recon::timeparse::format_utc(line.booked_at)
            );
        }
        DayRun {
            run_id: "fake".into(),
            label: "fake".into(),
            night: 0,
            day: 0,
            as_of: 0,
            dry: false,
            dry_range: false,
            range_from: 0,
            nightly: true,
            inputs: Vec::new(),
            delivered: Vec::new(),
            extra_key: String::new(),
            visible,
            maybe: BTreeMap::new(),
            results: results.into_bytes(),
            applied: 0,
        }
    }

    /// The currency checks are not blind: an automatic row that takes a line of another
    /// currency, or of another amount without an accepted difference, and a mismatch line
    /// reported as anything but its payment's CURRENCY_MISMATCH, are violations; the same rows
    /// as tickets, or on an accepted difference, are not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_currency_checks_catch_pairings_across_currencies_and_amounts() {
        let mut o = SimOptions::new(super::super::CI_SEED);
        o.days = 3;
        o.payments_per_day = 10;
        o.probs.currency_mismatch = 10_000;
        o.probs.multi_currency = 10_000;
        o.probs.netted_fee = 10_000;
        let mut h = Harness::new(&o, Backend::Sqlite).await;
        let w = &h.world;
        let shaped = |f: &dyn Fn(&Shape) -> bool| {
            (0..w.payments.len())
                .filter(|&i| w.payments[i].shape.as_ref().is_some_and(f))
                .collect::<Vec<_>>()
        };
        // Two payments to one recipient in two currencies, the second paid.
        let group = shaped(&|s| matches!(s, Shape::MultiCurrency { .. }));
        let (p, q) = group
            .iter()
            .flat_map(|&a| group.iter().map(move |&b| (a, b)))
            .find(|&(a, b)| {
                w.payments[a].recipient == w.payments[b].recipient
                    && w.payments[a].currency != w.payments[b].currency
                    && !w.payments[b].lines.is_empty()
            })
            .expect("a recipient paid in two currencies");
        let (pid, lq) = (w.payments[p].id.clone(), w.payments[q].lines[0]);
        let fee = shaped(&|s| matches!(s, Shape::NettedFee { .. }))[0];
        let (fid, lf) = (w.payments[fee].id.clone(), w.payments[fee].lines[0]);
        let cm = shaped(&|s| matches!(s, Shape::CurrencyMismatch { .. }))[0];
        let (cid, lc) = (w.payments[cm].id.clone(), w.payments[cm].lines[0]);
        let count =
            |h: &Harness, what: &str| h.violations.iter().filter(|v| v.contains(what)).count();
        let across = "a payment paired with a line of another currency";
        let amount = "a payment paired with a line of another amount";
        let unreported = "not reported as its CURRENCY_MISMATCH";
        // As tickets: nothing.
        let run = fake_run(
            &h,
            &[
                ("AMBIGUOUS", &pid, lq, "ticket"),
                ("AMOUNT_MISMATCH", &fid, lf, "ticket"),
                ("CURRENCY_MISMATCH", &cid, lc, "ticket"),
            ],
        );
        h.runs.push(run);
        h.check_currency_rows(0);
        assert!(h.violations.is_empty(), "{:?}", h.violations);
        // Automatic: three violations of pairing, one of reporting.
        let run = fake_run(
            &h,
            &[
                ("MATCHED", &pid, lq, "none"),
                (
                    "RESOLVED_SUCCEEDED",
                    &fid,
                    lf,
                    "transition UNKNOWN→SUCCEEDED",
                ),
                ("MATCHED", &cid, lc, "none"),
            ],
        );
        h.runs.push(run);
        h.check_currency_rows(1);
        assert_eq!(count(&h, across), 2, "{:?}", h.violations);
        assert_eq!(count(&h, amount), 1, "{:?}", h.violations);
        assert_eq!(count(&h, unreported), 1, "{:?}", h.violations);
        // The fee's difference accepted: its pairing is the reviewer's.
        h.violations.clear();
        h.cur.reported.clear();
        h.cur.accepted.insert((lf, fid.clone()));
        h.check_currency_rows(1);
        assert_eq!(count(&h, amount), 0, "{:?}", h.violations);
        assert_eq!(count(&h, across), 2, "{:?}", h.violations);
    }

    #[test]
    fn the_email_text_is_read_as_recon_writes_it() {
        let text = "Total at risk: 1,234.00 EUR in 2 cases\n\
                    The 20 most urgent of 1,031 cases (severity, then value):\n\
                    \n\
                    [NEW]\n\
                    1. CRITICAL Paid a different amount: 25,000 JPY\n   \
                    Next: Check it. Then act: now.\n   payment P-1\n   why\n   \
                    case C-00aa11bb22cc33dd · AMOUNT_MISMATCH · 2 days old · value for ordering: 154.32 EUR\n\
                    \n\
                    2. HIGH Paid twice: 1,250.00 EUR, 10 USD\n   \
                    Next: x\n   y\n   case C-ffee000000000001 · DUPLICATE_AT_PROVIDER · 0 days old · 1 possible match · no rate for USD\n\
                    \n\
                    3. LOW A likely match to approve: 3.00 EUR\n   Next: x\n   y\n   \
                    case C-0000000000000002 · PROPOSED_MATCH · 1 day old\n";
        let (total, cases) = parse_text(text);
        assert_eq!(total, 1031);
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].key, "C-00aa11bb22cc33dd");
        assert_eq!(
            cases[0].amounts,
            vec![(Decimal::new(25_000, 0), "JPY".into())]
        );
        assert_eq!(cases[0].shown, Shown::Value(Decimal::new(15_432, 2)));
        assert_eq!(
            cases[1].amounts,
            vec![
                (Decimal::new(125_000, 2), "EUR".into()),
                (Decimal::new(10, 0), "USD".into())
            ]
        );
        assert_eq!(cases[1].shown, Shown::NoRate(vec!["USD".into()]));
        assert_eq!(cases[2].shown, Shown::Nothing);
        let html = "<div id=\"case-1\" style=\"x\">a <div>regrouped from case C-0000000000000009</div>\
                    <div style=\"y\">case C-00aa11bb22cc33dd · 2</div></div>\
                    <div id=\"case-2\"><div>b</div><div style=\"z\">case C-ffee000000000001 · 0</div>";
        assert_eq!(
            html_keys(html),
            vec![
                "C-00aa11bb22cc33dd".to_string(),
                "C-ffee000000000001".into()
            ]
        );
    }

    #[test]
    fn ranking_is_severity_then_valued_then_value() {
        let v = |x: i64| Some(Decimal::new(x, 2));
        assert_eq!(outranks(("CRITICAL", None), ("HIGH", v(100))), Some(true));
        assert_eq!(outranks(("HIGH", v(1)), ("HIGH", None)), Some(true));
        assert_eq!(outranks(("HIGH", None), ("HIGH", v(1))), Some(false));
        assert_eq!(outranks(("HIGH", v(200)), ("HIGH", v(100))), Some(true));
        assert_eq!(outranks(("HIGH", v(100)), ("HIGH", v(100))), None);
        assert_eq!(outranks(("HIGH", None), ("HIGH", None)), None);
        // 25000 JPY at 162.50 is 153.85 EUR: less than 250.00 EUR, though more units.
        let rates: BTreeMap<&'static str, Decimal> =
            [("EUR", Decimal::ONE), ("JPY", Decimal::new(16_250, 2))].into();
        let jpy = value_of(&[(Decimal::new(25_000, 0), "JPY".into())], &rates);
        assert_eq!(jpy.map(|d| d.round_dp(2)), Some(Decimal::new(15_385, 2)));
        assert_eq!(outranks(("HIGH", v(25_000)), ("HIGH", jpy)), Some(true));
        assert_eq!(value_of(&[(Decimal::ONE, "USD".into())], &rates), None);
    }
}
