//! `recon explain ID [--run RUN]`: why a payment or a statement line got its outcome — which
//! pass and rule decided, which candidates were considered, and why each was rejected.
//!
//! The run's day is planned again exactly as `recon run --dry-run` would (same day, same
//! as-of, recon's own transitions undone by the ledger load), nothing is written, and the
//! inputs' sha256 are compared with the run record so a changed statement file is flagged.
//! Candidate reasons are computed for the one item asked about, by direct comparison with the
//! rules' criteria; the decision itself is the one the matcher and classifier made.

use crate::config::Config;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::ledger::Payment;
use crate::matching::{MatchResult, Pair, criteria, pass_name};
use crate::outcome::ResultRow;
use crate::rules::RuleSet;
use crate::run::{RunData, RunOptions};
use crate::sources::{InputFile, StatementLine};
use crate::timeparse;
use crate::{mask, money, normalize};
use anyhow::Result;
use chrono::{DateTime, NaiveDate, Utc};
use std::fmt::Write as _;

/// What to explain.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// A payment id, a statement line id (provider id or `source#Lnn`), or `source:line id`.
    pub id: String,
    /// The run to explain (default: the latest completed run, unless `date` is given).
    pub run: Option<String>,
    /// Or a day to plan now (with `as_of`, default now).
    pub date: Option<NaiveDate>,
    /// Cut-off with `date`.
    pub as_of: Option<DateTime<Utc>>,
}

/// Plans the run's day again and explains `opts.id`.
pub async fn explain(cfg: &Config, opts: &ExplainOptions) -> Result<String> {
    let rules = RuleSet::for_job(cfg)?;
    let db = Db::for_job(cfg).await?;
    let mut out = String::new();
    let (day, as_of, recorded) = match (opts.date, &opts.run) {
        (Some(d), None) => (
            d,
            opts.as_of.unwrap_or_else(Utc::now).timestamp_micros(),
            None,
        ),
        _ => {
            let (run_id, day, as_of, inputs) = recorded_night(&db, opts.run.as_deref()).await?;
            let _ = writeln!(
                out,
                "{run_id}: {day}, as of {}",
                timeparse::format_utc(as_of)
            );
            (day, as_of, Some(inputs))
        }
    };
    if recorded.is_none() {
        let _ = writeln!(
            out,
            "day {day}, as of {} (planned now)",
            timeparse::format_utc(as_of)
        );
    }
    let ropts = RunOptions {
        from: day,
        to: day,
        as_of: None,
        dry_run: true,
        run_id: None,
        wait: false,
    };
    let job = crate::run::Job {
        cfg,
        rules: &rules,
        db: &db,
        as_of,
        part: crate::run::Part::Whole,
        rewind: None,
        ask_providers: true,
    };
    let plan = Box::pin(crate::run::plan(
        job,
        &ropts,
        "explain",
        &mut Default::default(),
    ))
    .await?;
    if let Some(recorded) = recorded {
        input_changes(&mut out, &recorded, &plan.summary_inputs());
    }
    let data = &plan.data;
    let payment = |id: &str| {
        data.payments
            .iter()
            .position(|p| *p.payment_id.text() == *id)
    };
    // A UUID in another spelling (upper case, as a provider may echo it) names the payment
    // whose id is its canonical text, as a `uuid` column of the ledger holds it.
    let found = payment(&opts.id)
        .or_else(|| crate::model::canonical_uuid(&opts.id).and_then(|c| payment(&c)));
    let attempt_start = match found {
        Some(pi) => {
            crate::ledger::clock::current_attempt_start(&db, &cfg.ledger, &data.payments[pi])
                .await?
        }
        None => None,
    };
    db.close().await;
    if let Some(pi) = found {
        let clock = (pi as u32, attempt_start);
        explain_payment(&mut out, data, &plan.matched, &rules, clock);
    } else if let Some(li) = data.lines.iter().position(|l| {
        l.uid() == opts.id.as_str() || format!("{}:{}", l.source(), l.uid()) == opts.id
    }) {
        explain_line(&mut out, data, &plan.matched, &rules, li as u32);
    } else if let Some(li) = line_at(data, &opts.id, day)? {
        explain_line(&mut out, data, &plan.matched, &rules, li);
    } else {
        return Err(fail(
            Failure::Input,
            format!(
                "{:?} is neither a payment nor a statement line of {day} (payments are found by \
                 payment_id, lines by provider id, `source#Lnn` (the line's number in its file) \
                 or `source:id`)",
                opts.id
            ),
        ));
    }
    Ok(for_terminal(&out))
}

/// The recorded night to explain: run `run` (default: the latest completed run), or the
/// sharded night of run group `run`, or the night a shard run belongs to. A sharded night is
/// explained whole, as one process plans it (its shards and gather equal one process): its day
/// and as-of are the group's, its inputs those of every landed shard and of the gather.
/// Returns (what it is, in words; day; as-of; the inputs it read).
pub(crate) async fn recorded_night(
    db: &Db,
    run: Option<&str>,
) -> Result<(String, NaiveDate, timeparse::Micros, Vec<serde_json::Value>)> {
    let mut tx = db.begin().await?;
    let group = match run {
        Some(r) => tx.group(r).await?,
        None => None,
    };
    let found = match &group {
        Some(_) => None,
        None => tx.find_run(run).await?,
    };
    let group = match (&group, &found) {
        (Some(g), _) => Some(g.clone()),
        (None, Some((run_id, ..))) => match tx.group_of_run(run_id).await? {
            Some(g) => tx.group(&g).await?,
            None => None,
        },
        (None, None) => None,
    };
    let Some(g) = group else {
        tx.rollback().await?;
        let Some((run_id, from, as_of, inputs)) = found else {
            return Err(fail(
                Failure::Input,
                match run {
                    Some(r) => format!("no run or run group {r:?} in the database"),
                    None => "no completed run yet (hint: pass --date)".to_string(),
                },
            ));
        };
        let day = night_day(&run_id, &from)?;
        let as_of = DateTime::parse_from_rfc3339(&as_of)
            .map_err(|e| {
                fail(
                    Failure::Database,
                    format!("run {run_id}: bad as_of {as_of:?}: {e}"),
                )
            })?
            .timestamp_micros();
        let inputs = serde_json::from_str(&inputs).unwrap_or_default();
        return Ok((format!("run {run_id}"), day, as_of, inputs));
    };
    let runs = tx.shard_runs(&g.group_id).await?;
    let mut inputs: Vec<serde_json::Value> = Vec::new();
    let landed: Vec<&str> = runs
        .iter()
        .filter(|r| r.status == "COMPLETED")
        .map(|r| r.run_id.as_str())
        .collect();
    for run_id in &landed {
        if let Some((_, _, _, text)) = tx.find_run(Some(run_id)).await? {
            let read: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
            inputs.extend(read);
        }
    }
    tx.rollback().await?;
    // The gather's own reads (a shared bank source) are in the night's summary.
    if let Some(folder) = &g.gather_folder
        && let Ok(text) = std::fs::read_to_string(std::path::Path::new(folder).join("summary.json"))
        && let Ok(summary) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(read) = summary["inputs"].as_array()
    {
        inputs.extend(read.iter().cloned());
    }
    let day = night_day(&g.group_id, &g.range_from)?;
    let as_of = timeparse::parse_ledger(&g.as_of).map_err(|e| {
        fail(
            Failure::Database,
            format!("run group {}: as_of: {e}", g.group_id),
        )
    })?;
    let state = match &g.gathered_at {
        Some(_) => "gathered".to_string(),
        None => format!(
            "{} of {} shards landed, not gathered",
            landed.len(),
            g.shards
        ),
    };
    let what = format!(
        "night {} ({} shards, {state}; explained as one process plans it)",
        g.group_id, g.shards
    );
    Ok((what, day, as_of, inputs))
}

/// The day a recorded night begins on (`range_from`).
fn night_day(what: &str, from: &str) -> Result<NaiveDate> {
    from.parse().map_err(|_| {
        fail(
            Failure::Database,
            format!("run {what}: bad range_from {from:?}"),
        )
    })
}

/// `text` line by line as the terminal shows it: control characters (escape sequences) and
/// invisible ones (U+202E, U+200B, …) in any value as `<U+XXXX>` ([`crate::textsafe::terminal`]).
fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(&crate::textsafe::terminal(line));
        out.push('\n');
    }
    out
}

/// The line `source#Lnn` names: line `nn` of a file of `source`, whatever id the line has.
/// `None` when `id` is not of that form or no line is there; an error when several lines are
/// there (files of several days, or entries of one record): it lists their ids.
fn line_at(data: &RunData, id: &str, day: NaiveDate) -> Result<Option<u32>> {
    let Some((source, n)) = id
        .rsplit_once("#L")
        .and_then(|(s, n)| Some((s, n.parse::<u64>().ok()?)))
    else {
        return Ok(None);
    };
    let hits: Vec<usize> = (0..data.lines.len())
        .filter(|&i| data.lines[i].source() == source && data.lines[i].line_no == n)
        .collect();
    match hits[..] {
        [] => Ok(None),
        [one] => Ok(Some(one as u32)),
        _ => Err(fail(
            Failure::Input,
            format!(
                "{id:?} fits {} lines of source {source} for {day}: name one by its id: {}",
                hits.len(),
                hits.iter()
                    .map(|&i| {
                        let l = &data.lines[i];
                        format!("{}:{} ({})", l.source(), l.uid(), l.file())
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Says which inputs differ from the ones the run read.
fn input_changes(out: &mut String, recorded: &[serde_json::Value], now: &[InputFile]) {
    for f in now {
        let then = recorded.iter().find(|r| {
            r["source"] == f.source.as_str()
                && r["path"].as_str().is_some_and(|p| same_file(p, &f.path))
        });
        match then.and_then(|r| r["sha256"].as_str()) {
            Some(sha) if sha == f.sha256 => {}
            Some(_) => {
                let _ = writeln!(
                    out,
                    "warning: {} changed since the run (sha256 differs): this explanation uses the file as it is now",
                    f.path
                );
            }
            None => {
                let _ = writeln!(out, "warning: {} was not read by the run", f.path);
            }
        }
    }
}

/// Whether a path the run recorded and one read now name the same file: the run and
/// `explain` may name the config differently (absolute in the scheduler, `--config recon.toml`
/// by hand), and the input paths follow the config's.
fn same_file(recorded: &str, now: &str) -> bool {
    recorded == now
        || matches!(
            (std::fs::canonicalize(recorded), std::fs::canonicalize(now)),
            (Ok(a), Ok(b)) if a == b
        )
}

fn payment_text(p: &Payment) -> String {
    format!(
        "payment {} ({}, {} {}, to {}, started {}, attempt {})",
        p.payment_id,
        p.status.as_str(),
        money::format_minor(p.amount_minor, p.currency),
        p.currency,
        mask::account(&p.recipient),
        p.started_at
            .map(timeparse::format_utc)
            .unwrap_or_else(|| "never".into()),
        p.attempt_id
            .as_ref()
            .map_or_else(|| "-".to_string(), |a| a.to_string()),
    )
}

/// Which start the payment's clock is (DESIGN.md rule 11): staleness, the evidence horizon and
/// every window were measured from the `started` the payment line shows.
fn clock_text(out: &mut String, p: &Payment, attempt_start: Option<timeparse::Micros>) {
    let Some(started) = p.started_at else {
        return;
    };
    let started = timeparse::format_utc(started);
    let _ = match (&p.attempt_id, attempt_start) {
        (Some(a), Some(_)) => writeln!(
            out,
            "clock: started {started} is the start of attempt {a}, the one the guarded \
             transition names; staleness, the evidence horizon and every window are measured from it"
        ),
        (Some(a), None) => writeln!(
            out,
            "clock: started {started} is the payment's own start (attempt {a} has no start in \
             the attempts); staleness, the evidence horizon and every window are measured from it"
        ),
        (None, _) => writeln!(
            out,
            "clock: started {started} is the payment's own start (it names no attempt); \
             staleness, the evidence horizon and every window are measured from it"
        ),
    };
    if let (true, Some(first)) = (p.has_earlier_attempt(), p.first_started_at) {
        let _ = writeln!(
            out,
            "absence of evidence: an earlier attempt started {}; a line is matched only inside \
             the current attempt's window, but \"no line\" (RESOLVED_FAILED, MISSING_AT_PROVIDER) \
             needs every source complete and no look-alike line from the earlier attempt's window \
             on (near misses are looked for there too)",
            timeparse::format_utc(first)
        );
    }
}

fn line_text(l: &StatementLine) -> String {
    format!(
        "line {} ({}:{}, {} {} {}, to {}, booked {}, reference {:?})",
        l.uid(),
        l.file(),
        l.line_no,
        l.kind.as_str(),
        money::format_minor(l.amount_minor, l.currency),
        l.currency,
        mask::account(&l.recipient),
        l.booked_text(),
        l.reference().as_deref().unwrap_or(""),
    )
}

fn write_row(out: &mut String, row: &ResultRow) {
    let _ = writeln!(
        out,
        "outcome: {}   rule: {}   action: {}",
        row.outcome.as_str(),
        if row.rule.is_empty() { "-" } else { &row.rule },
        row.action.label(),
    );
    if !row.detail.is_empty() {
        let _ = writeln!(out, "  {}", row.detail);
    }
}

/// Why `l` is or is not a fuzzy candidate of `p` in each fuzzy pass: every failed criterion.
fn fuzzy_reasons(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<(usize, Vec<String>)> {
    criteria::fuzzy_passes(rules, p, l)
        .into_iter()
        .map(|(i, checks)| {
            let why = checks.into_iter().filter(|c| !c.ok).map(|c| c.text);
            (i, why.collect())
        })
        .collect()
}

fn write_reasons(out: &mut String, rules: &RuleSet, p: &Payment, l: &StatementLine) {
    for (pass, why) in fuzzy_reasons(rules, p, l) {
        let verdict = if why.is_empty() {
            "fits, but a side had other candidates or was already decided".to_string()
        } else {
            format!("rejected: {}", why.join("; "))
        };
        let _ = writeln!(out, "  pass {:?}: {verdict}", pass_name(rules, pass));
    }
}

fn pairs_of<'a>(
    list: &'a [Pair],
    f: impl Fn(&Pair) -> bool + 'a,
) -> impl Iterator<Item = &'a Pair> {
    list.iter().filter(move |p| f(p))
}

/// `(pi, attempt_start)`: the payment and its current attempt's start in the attempts.
fn explain_payment(
    out: &mut String,
    data: &RunData,
    m: &MatchResult,
    rules: &RuleSet,
    (pi, attempt_start): (u32, Option<timeparse::Micros>),
) {
    let p = &data.payments[pi as usize];
    let _ = writeln!(out, "{}", payment_text(p));
    clock_text(out, p, attempt_start);
    match data.rows.iter().find(|r| r.payment == Some(pi)) {
        Some(row) => write_row(out, row),
        None => {
            let _ = writeln!(
                out,
                "not reported on this day: loaded as a candidate only (it belongs to another day, \
                 or is resolved and outside the carry-over)"
            );
        }
    }
    let mut mentioned = Vec::new();
    for pair in pairs_of(&m.links, |x| x.payment == pi) {
        mentioned.push(pair.line);
        let _ = writeln!(
            out,
            "linked by pass {:?}: {}",
            pass_name(rules, pair.pass),
            line_text(&data.lines[pair.line as usize])
        );
    }
    for pair in pairs_of(&m.ambiguous, |x| x.payment == pi) {
        mentioned.push(pair.line);
        let others = m
            .ambiguous
            .iter()
            // Any pass: an old-named line's pairs, or a contested confirmation's, come from
            // two passes.
            .filter(|x| x.line == pair.line && x.payment != pi)
            .map(|x| x.payment)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let _ = writeln!(
            out,
            "candidate in pass {:?}, not unique ({} other payment(s) also fit this line): {}",
            pass_name(rules, pair.pass),
            others,
            line_text(&data.lines[pair.line as usize])
        );
    }
    for (list, unique) in [(&m.returns, true), (&m.returns_ambiguous, false)] {
        for pair in pairs_of(list, |x| x.payment == pi) {
            mentioned.push(pair.line);
            let pass = pass_name(rules, pair.pass);
            let what = if unique {
                format!(
                    "returned by {pass:?}: its money came back, so nothing is confirmed (RETURNED)"
                )
            } else {
                format!("a return that could be this payment's money or another's ({pass:?})")
            };
            let _ = writeln!(
                out,
                "{what}: {}",
                line_text(&data.lines[pair.line as usize])
            );
        }
    }
    for pair in pairs_of(&m.near_misses, |x| x.payment == pi) {
        mentioned.push(pair.line);
        let _ = writeln!(
            out,
            "near miss (same recipient inside the evidence horizon, any amount or currency; blocks \
             RESOLVED_FAILED): {}",
            line_text(&data.lines[pair.line as usize])
        );
    }
    // Identifier evidence that was not used, and look-alikes the fuzzy passes rejected.
    let mut considered = 0;
    for (li, l) in data.lines.iter().enumerate() {
        let li = li as u32;
        if mentioned.contains(&li) {
            continue;
        }
        // Named as the identifier passes compare keys (their normalisation and identifiers).
        let named = criteria::named_by_a_pass(rules, p, l);
        // Any currency: the near-miss gate looks at every line to the recipient.
        let same_party = normalize::account(&l.recipient) == normalize::account(&p.recipient);
        if !(named || same_party) {
            continue;
        }
        considered += 1;
        if considered > 20 {
            let _ = writeln!(out, "… more look-alike lines not shown");
            break;
        }
        let _ = writeln!(out, "considered: {}", line_text(l));
        if walled(l, p, named) {
            let _ = writeln!(out, "  {}", other_partition(l, p));
            continue;
        }
        if let Some(claim) = m.links.iter().find(|x| x.line == li) {
            let owner = &data.payments[claim.payment as usize];
            let steps = rules
                .passes
                .get(claim.pass)
                .map(|p| p.normalize.as_slice())
                .unwrap_or(&[]);
            if criteria::clean_link(steps, owner, l) {
                let _ = writeln!(
                    out,
                    "  not a look-alike: proven to be payment {}'s by pass {:?} (its money and \
                     recipient check out), so it neither matches nor blocks this one",
                    owner.payment_id,
                    pass_name(rules, claim.pass)
                );
            } else {
                let _ = writeln!(
                    out,
                    "  linked to payment {} by pass {:?}, but its money or recipient differ from \
                     that payment's: disputed evidence",
                    owner.payment_id,
                    pass_name(rules, claim.pass)
                );
            }
            continue;
        }
        if named {
            let _ = writeln!(
                out,
                "  names this payment, but was not linked (refund line, or the payment is PENDING)"
            );
        }
        write_reasons(out, rules, p, l);
    }
    if mentioned.is_empty() && considered == 0 {
        let _ = writeln!(
            out,
            "no statement line names this payment or pays its recipient"
        );
    }
}

fn explain_line(out: &mut String, data: &RunData, m: &MatchResult, rules: &RuleSet, li: u32) {
    let l = &data.lines[li as usize];
    let _ = writeln!(out, "{}", line_text(l));
    let rows: Vec<&ResultRow> = data.rows.iter().filter(|r| r.lines.contains(&li)).collect();
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "not reported on this day (booked outside the day and not claimed by its payments)"
        );
    }
    for row in rows {
        if let Some(pi) = row.payment {
            let _ = writeln!(
                out,
                "reported with {}",
                payment_text(&data.payments[pi as usize])
            );
        }
        write_row(out, row);
    }
    let mut mentioned = Vec::new();
    for (what, list) in [
        ("linked", &m.links),
        ("candidate, not unique", &m.ambiguous),
        ("near miss", &m.near_misses),
        ("return of", &m.returns),
        ("return, not unique", &m.returns_ambiguous),
    ] {
        for pair in pairs_of(list, |x| x.line == li) {
            mentioned.push(pair.payment);
            let pass = if what == "near miss" {
                "near-miss gate".to_string()
            } else {
                format!("pass {:?}", pass_name(rules, pair.pass))
            };
            let _ = writeln!(
                out,
                "{what} ({pass}): {}",
                payment_text(&data.payments[pair.payment as usize])
            );
        }
    }
    let mut considered = 0;
    for (pi, p) in data.payments.iter().enumerate() {
        if mentioned.contains(&(pi as u32)) {
            continue;
        }
        let same_party = normalize::account(&l.recipient) == normalize::account(&p.recipient);
        let named = criteria::named_by_a_pass(rules, p, l);
        if !(same_party || named) {
            continue;
        }
        considered += 1;
        if considered > 20 {
            let _ = writeln!(out, "… more look-alike payments not shown");
            break;
        }
        if walled(l, p, named) {
            let _ = writeln!(
                out,
                "considered: {}\n  {}",
                payment_text(p),
                other_partition(l, p)
            );
            continue;
        }
        let _ = writeln!(out, "considered: {}", payment_text(p));
        write_reasons(out, rules, p, l);
    }
    if mentioned.is_empty() && considered == 0 {
        let _ = writeln!(
            out,
            "no loaded payment is named by this line or has its recipient"
        );
    }
}

/// Whether the partition wall keeps line `l` from payment `p`: a look-alike of another
/// partition, or any line of a bank source every partition shares. A line that names the
/// payment (`named`) crosses (DESIGN.md rule 12).
fn walled(l: &StatementLine, p: &Payment, named: bool) -> bool {
    l.origin.partition != p.partition && (!named || l.origin.partition == crate::partition::SHARED)
}

/// Why a look-alike of another partition is no candidate (the partition wall,
/// docs/sharding.md).
fn other_partition(l: &StatementLine, p: &Payment) -> String {
    format!(
        "the line is partition {:?}'s and the payment partition {:?}'s: never its evidence (only \
         a line that names a payment crosses partitions)",
        crate::partition::value(l.origin.partition),
        crate::partition::value(p.partition)
    )
}
