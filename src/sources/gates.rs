//! Completeness gates (DESIGN.md rule 2): the checks of what a statement declares about
//! itself (balance chain, control totals) and of the hand-over between consecutive statements
//! (continuity). A failed gate names the period it removes from the source's coverage.

use super::config::SourceConfig;
use super::{StatementFacts, days_span};
use crate::timeparse::Micros;

/// One completeness gate (DESIGN.md rule 2, issue 4 point 4): a check of what a statement
/// declares about itself, or of an expected daily file. A failed gate removes the period it
/// names from the source's coverage, so no payment whose window it touches is resolved FAILED.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gate {
    /// Source name.
    pub source: String,
    /// File (or the expected path of a missing daily file).
    pub file: String,
    /// Days checked, `YYYY-MM-DD..YYYY-MM-DD` (inclusive), or `?` when the statement names none.
    pub period: String,
    /// `balance_chain`, `control_totals`, `continuity` or `daily_file`.
    pub check: &'static str,
    /// Whether the check passed.
    pub ok: bool,
    /// What was compared (amounts, counts, position).
    pub detail: String,
}

/// A gate as summary.json holds it, read back by the gather.
#[derive(serde::Deserialize)]
pub(crate) struct GateText {
    source: String,
    file: String,
    period: String,
    check: String,
    ok: bool,
    detail: String,
}

impl<'de> serde::Deserialize<'de> for Gate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Gate, D::Error> {
        GateText::deserialize(d).map(Gate::from)
    }
}

impl From<GateText> for Gate {
    /// The check name is one of the known ones, or kept for the process's life (a handful
    /// per night).
    fn from(g: GateText) -> Gate {
        let check = match [
            "balance_chain",
            "control_totals",
            "continuity",
            "daily_file",
        ]
        .into_iter()
        .find(|k| *k == g.check)
        {
            Some(k) => k,
            None => Box::leak(g.check.into_boxed_str()),
        };
        Gate {
            source: g.source,
            file: g.file,
            period: g.period,
            check,
            ok: g.ok,
            detail: g.detail,
        }
    }
}

impl Gate {
    /// The completeness warning a failed gate adds to the summary.
    pub fn warning(&self) -> String {
        format!(
            "source {}: {} gate failed for {} ({}): {}; this period is not treated as complete",
            self.source, self.check, self.file, self.period, self.detail
        )
    }
}

/// Checks the statements of one file (`facts`) and records a gate per check. Returns the UTC
/// intervals a failed gate removes from coverage: the failed statement's period, or `file_span`
/// (what the file alone would cover) when the statement names no period.
pub(super) fn statement_gates(
    cfg: &SourceConfig,
    facts: &[StatementFacts],
    file_span: Option<(Micros, Micros)>,
    gates: &mut Vec<Gate>,
) -> Vec<(Micros, Micros)> {
    let mut holes = Vec::new();
    for f in facts {
        let period = match (f.from, f.to) {
            (Some(a), Some(b)) => format!("{a}..{b}"),
            _ => "?".to_string(),
        };
        let span = match (f.from, f.to) {
            (Some(a), Some(b)) => Some(days_span(a, b, cfg.timezone)),
            _ => file_span,
        };
        let cur = f
            .currency
            .or(f.opening.map(|b| b.currency))
            .unwrap_or("EUR");
        let money = |m: i64| crate::money::format_minor(m, cur);
        let mut checks: Vec<(&'static str, bool, String)> = Vec::new();
        if let Some(ok) = f.balance_chains()
            && let (Some(o), Some(c)) = (f.opening, f.closing)
        {
            let got = o.amount_minor.saturating_add(f.entries_sum);
            checks.push((
                "balance_chain",
                ok,
                format!(
                    "{}: opening {} + {} entries {} = {}, closing {} {cur} (difference {})",
                    f.position,
                    money(o.amount_minor),
                    f.entries,
                    money(f.entries_sum),
                    money(got),
                    money(c.amount_minor),
                    money(c.amount_minor.saturating_sub(got)),
                ),
            ));
        }
        if let Some(ok) = f.declared_totals_agree() {
            let mut parts = vec![format!("{}: {} entries", f.position, f.entries)];
            if let Some(n) = f.declared_entries {
                parts.push(format!("declared {n}"));
            }
            if let Some(n) = f.declared_net {
                parts.push(format!(
                    "net {} declared {}",
                    money(f.entries_sum),
                    money(n)
                ));
            }
            if let Some(n) = f.declared_gross {
                parts.push(format!(
                    "gross {} declared {}",
                    money(f.entries_gross),
                    money(n)
                ));
            }
            parts.extend(f.control_problems.iter().cloned());
            checks.push(("control_totals", ok, parts.join("; ")));
        }
        for (check, ok, detail) in checks {
            if !ok && let Some(h) = span {
                holes.push(h);
            }
            gates.push(Gate {
                source: cfg.name.clone(),
                file: f.file.clone(),
                period: period.clone(),
                check,
                ok,
                detail,
            });
        }
    }
    holes
}

/// Continuity across a source's statements (DESIGN.md rule 2): for each account and currency,
/// consecutive statements (by period, re-deliveries counted once, overlapping periods skipped)
/// must hand over the balance — one's closing is the next one's opening. If not, entries are
/// missing somewhere in the two statements or between them, so both periods and the gap lose
/// their coverage.
pub(super) fn continuity_gates(
    cfg: &SourceConfig,
    facts: &[StatementFacts],
    gates: &mut Vec<Gate>,
) -> Vec<(Micros, Micros)> {
    type Key<'f> = (Option<&'f str>, &'static str);
    let mut by_account: std::collections::BTreeMap<Key<'_>, Vec<&StatementFacts>> =
        Default::default();
    for f in facts {
        let (Some(_), Some(_), Some(o), Some(c)) = (f.from, f.to, f.opening, f.closing) else {
            continue;
        };
        if o.currency != c.currency {
            continue;
        }
        by_account
            .entry((f.account.as_deref(), o.currency))
            .or_default()
            .push(f);
    }
    let mut holes = Vec::new();
    for ((_, cur), mut list) in by_account {
        let key = |f: &StatementFacts| {
            (
                f.from,
                f.to,
                f.opening.map(|b| b.amount_minor),
                f.closing.map(|b| b.amount_minor),
            )
        };
        list.sort_by_key(|f| key(f));
        list.dedup_by(|a, b| key(a) == key(b));
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let (Some(pf), Some(pt), Some(nf), Some(nt)) = (prev.from, prev.to, next.from, next.to)
            else {
                continue;
            };
            if nf <= pt {
                continue; // overlapping periods: not a hand-over
            }
            let (Some(closing), Some(opening)) = (prev.closing, next.opening) else {
                continue;
            };
            let ok = closing.amount_minor == opening.amount_minor;
            let money = |m: i64| crate::money::format_minor(m, cur);
            if !ok {
                holes.push(days_span(pf, nt, cfg.timezone));
            }
            gates.push(Gate {
                source: cfg.name.clone(),
                file: next.file.clone(),
                period: format!("{pf}..{nt}"),
                check: "continuity",
                ok,
                detail: format!(
                    "{} closes {} {cur}, {} opens {} {cur} (difference {})",
                    prev.position,
                    money(closing.amount_minor),
                    next.position,
                    money(opening.amount_minor),
                    money(opening.amount_minor.saturating_sub(closing.amount_minor)),
                ),
            });
        }
    }
    holes
}
