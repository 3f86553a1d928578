//! What a bank's payout status records prove about one payment, on top of what the
//! statements (and a status answer) gave its row. Nothing here does more than a status
//! answer may ([`crate::status_api::verdict::overlay`]):
//! - a record whose amount or currency differs from the ledger's is not evidence: a ticket
//!   (AMOUNT_MISMATCH / CURRENCY_MISMATCH) saying why;
//! - a rejection (pain.002 RJCT, the transaction's own or inherited) is final: an UNKNOWN or
//!   stale SUBMITTING payment that no line shows paid is RESOLVED_FAILED; against a statement
//!   line, a status answer, a reviewer, recon's earlier SUCCEEDED or the ledger's, it is
//!   CONTRADICTED (a critical case naming both) and resolves nothing;
//! - a return (NACHA addenda 99) makes a RETURNED case, never a transition (DESIGN.md rule
//!   10); a notification of change (98) is a note;
//! - an acceptance or a pending status is not money: a note on the row (the payment stays
//!   AWAITING_EVIDENCE); against a complete window without a line it is AMBIGUOUS, and a
//!   settled acceptance (ACSC, ACCC) against a rejection, or against FAILED decided earlier,
//!   is CONTRADICTED.

use super::{Claim, Night, format_name};
use crate::config::payout_status::LedgerKey;
use crate::ledger::{Payment, Status};
use crate::outcome::{Action, Outcome, ResultRow};
use crate::sources::payout::State;
use std::borrow::Cow;
use std::sync::Arc;

/// Whether an acceptance says the money left the debtor's or reached the creditor's
/// account (so a rejection of the same payout contradicts it).
fn settled(c: &Claim) -> bool {
    c.record.state == State::Accepted && matches!(c.record.code.as_str(), "ACSC" | "ACCC")
}

/// The claims of one payment, sorted by what they say.
#[derive(Default)]
struct Said<'a> {
    rejected: Option<&'a Claim>,
    returned: Option<&'a Claim>,
    settled: Option<&'a Claim>,
    accepted: Vec<&'a Claim>,
    changes: Vec<&'a Claim>,
}

impl Night {
    /// The claim in words: `pain.002 <file>:<line> RJCT rejected (AC01: reason text)`, the
    /// free text and corrected data masked.
    pub fn said(&self, c: &Claim) -> String {
        let r = &c.record;
        let file = std::path::Path::new(&c.path)
            .file_name()
            .map_or_else(|| c.path.clone(), |f| f.to_string_lossy().into_owned());
        let fmt = format_name(self.blocks[c.block].format);
        let code = match r.state {
            State::Returned | State::NotificationOfChange => String::new(),
            _ => format!("{} ", r.code),
        };
        let mut why: Vec<String> = Vec::new();
        if let Some(reason) = &r.reason {
            why.push(reason.clone());
        }
        if let Some(info) = &r.additional_info {
            why.push(crate::mask::accounts_in_text(info));
        }
        if let Some(data) = &r.corrected_data {
            why.push(format!("corrected data {}", crate::mask::account(data)));
        }
        let inherited = match r.inherited_from {
            Some(l) => format!(", the status of its {} level", l.as_str()),
            None => String::new(),
        };
        format!(
            "{fmt} {file}:{} {code}{}{}{inherited}",
            r.line,
            r.state.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(": "))
            }
        )
    }

    fn rule(&self, c: &Claim) -> Arc<str> {
        Arc::from(format!("payout_status:{}", self.blocks[c.block].name))
    }

    /// Payment `i`'s row once its payout status claims are taken into account (`row`: what
    /// the statements and a status answer gave it; `decided`: the status recon or a reviewer
    /// moved it to earlier, and who, when the night judges that decision).
    pub fn overlay(
        &self,
        i: usize,
        p: &Payment,
        row: ResultRow,
        decided: Option<(Status, &str)>,
    ) -> ResultRow {
        match self.by_payment.get(&(i as u32)) {
            Some(ks) => {
                let claims: Vec<&Claim> = ks.iter().map(|&k| &self.claims[k as usize]).collect();
                self.judge(p, row, &claims, decided)
            }
            None => row,
        }
    }

    /// See [`Night::overlay`].
    fn judge(
        &self,
        p: &Payment,
        row: ResultRow,
        claims: &[&Claim],
        decided: Option<(Status, &str)>,
    ) -> ResultRow {
        if let Some((outcome, c, why)) = self.money_gate(p, claims) {
            return if row.action == Action::Ticket {
                note(row, why)
            } else {
                ticket(row, outcome, self.rule(c), why)
            };
        }
        let mut said = Said::default();
        for &c in claims {
            match c.record.state {
                State::Rejected => {
                    said.rejected.get_or_insert(c);
                }
                State::Returned => {
                    said.returned.get_or_insert(c);
                }
                State::NotificationOfChange => said.changes.push(c),
                State::Accepted | State::Pending | State::Partial => {
                    if settled(c) {
                        said.settled.get_or_insert(c);
                    }
                    said.accepted.push(c);
                }
            }
        }
        let row = self.noted(row, &said.changes);
        if let (Some(r), Some(o)) = (said.rejected, said.returned.or(said.settled)) {
            return ticket(
                row,
                Outcome::Contradicted,
                self.rule(r),
                format!(
                    "{} but {}: the bank's records of this payout disagree, nothing is resolved \
                     on either",
                    self.said(o),
                    self.said(r)
                ),
            );
        }
        if let Some(c) = said.returned {
            return self.returned(row, c);
        }
        if let Some(c) = said.rejected {
            return self.rejected(p, row, c, decided);
        }
        self.accepted(row, &said, decided)
    }

    /// The first claim that states money other than the ledger's, with the ticket's outcome
    /// and why: it is not about this payment's payout, so none of the claims is evidence.
    fn money_gate<'c>(
        &self,
        p: &Payment,
        claims: &[&'c Claim],
    ) -> Option<(Outcome, &'c Claim, String)> {
        let (c, (minor, currency)) = claims.iter().find_map(|c| {
            c.record
                .amount
                .filter(|&(m, cur)| cur != p.currency || m != p.amount_minor)
                .map(|a| (*c, a))
        })?;
        let outcome = if currency == p.currency {
            Outcome::AmountMismatch
        } else {
            Outcome::CurrencyMismatch
        };
        let why = format!(
            "{} names this payment but states {} {currency}, the ledger {} {}: not evidence \
             about this payment",
            self.said(c),
            crate::money::format_minor(minor, currency),
            crate::money::format_minor(p.amount_minor, p.currency),
            p.currency
        );
        Some((outcome, c, why))
    }

    /// The notifications of change, as notes.
    fn noted(&self, row: ResultRow, changes: &[&Claim]) -> ResultRow {
        changes.iter().fold(row, |row, c| {
            note(
                row,
                format!(
                    "{}: the payout was made; the receiving bank asks for corrected details \
                     on the next one (no transition)",
                    self.said(c)
                ),
            )
        })
    }

    /// A return: the payout was made and its money came back.
    fn returned(&self, row: ResultRow, c: &Claim) -> ResultRow {
        let says = format!(
            "{}: the payout was made and its money came back; a return confirms nothing \
             (DESIGN.md rule 10), a human decides",
            self.said(c)
        );
        match row.outcome.ticket_severity() {
            Some(crate::model::Severity::Critical) => note(row, says),
            _ => {
                let before = row.detail.to_string();
                let mut row = ticket(row, Outcome::Returned, self.rule(c), says);
                if !before.is_empty() {
                    row.detail = format!("{}; before it: {before}", row.detail).into();
                }
                row
            }
        }
    }

    /// A rejection: final, so evidence of FAILED where nothing says otherwise.
    fn rejected(
        &self,
        p: &Payment,
        row: ResultRow,
        c: &Claim,
        decided: Option<(Status, &str)>,
    ) -> ResultRow {
        let says = self.said(c);
        let line_paid = !row.lines.is_empty()
            && matches!(
                row.outcome,
                Outcome::ResolvedSucceeded
                    | Outcome::Matched
                    | Outcome::AmountMismatch
                    | Outcome::CurrencyMismatch
                    | Outcome::ProposedMatch
                    | Outcome::DuplicateAtProvider
                    | Outcome::Returned
            );
        let paid = if line_paid {
            Some("a statement line shows this payment paid".to_string())
        } else if let Some((Status::Succeeded, who)) = decided {
            Some(format!("{who} decided this payment SUCCEEDED"))
        } else if row.action == Action::Transition(Status::Succeeded) {
            Some(format!("{} says it was paid", row.rule))
        } else if decided.is_none() && p.current_status == Status::Succeeded {
            Some("the ledger holds this payment SUCCEEDED".to_string())
        } else {
            None
        };
        if let Some(paid) = paid {
            let before = if row.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", row.detail)
            };
            return ticket(
                row,
                Outcome::Contradicted,
                self.rule(c),
                format!(
                    "{paid}{before}, but {says}: the two claims disagree, nothing is resolved \
                     on either"
                ),
            );
        }
        let unresolved = matches!(p.status, Status::Unknown | Status::Submitting);
        if row.outcome == Outcome::AwaitingEvidence && unresolved {
            if let Some(why) = other_attempt(p, c) {
                return ticket(
                    row,
                    Outcome::Ambiguous,
                    self.rule(c),
                    format!("{says}, but {why}"),
                );
            }
            return ResultRow {
                outcome: Outcome::ResolvedFailed,
                action: Action::Transition(Status::Failed),
                rule: self.rule(c),
                detail: Cow::Owned(format!(
                    "{} and {says}: a rejection is final",
                    p.status.as_str()
                )),
                ..row
            };
        }
        note(row, says)
    }

    /// Acceptances and pending statuses alone: not money.
    fn accepted(
        &self,
        row: ResultRow,
        said: &Said<'_>,
        decided: Option<(Status, &str)>,
    ) -> ResultRow {
        let Some(&last) = said
            .accepted
            .iter()
            .max_by_key(|c| (c.known_at, c.record.line))
        else {
            return row;
        };
        if let (Some(c), Some((Status::Failed, who))) = (said.settled, decided) {
            return ticket(
                row,
                Outcome::Contradicted,
                self.rule(c),
                format!(
                    "{who} decided this payment FAILED, but {}: the two claims disagree, and a \
                     retry since then may have paid twice",
                    self.said(c)
                ),
            );
        }
        let says = self.said(last);
        if row.outcome == Outcome::ResolvedFailed {
            return ticket(
                row,
                Outcome::Ambiguous,
                self.rule(last),
                format!(
                    "no statement line in a complete window, but {says}: the evidence \
                     contradicts itself"
                ),
            );
        }
        note(
            row,
            format!("{says}: an acceptance is not money, only a statement line is"),
        )
    }

    /// The rows of the payments a reported claim names that the night does not classify
    /// (`classified[i]` false: neither in scope nor watched), when their claims raise a
    /// ticket (a return of a payment the ledger holds SUCCEEDED, a rejection of one), then one
    /// ticket per id no payment has, in block and id order.
    pub fn extra_rows(&self, payments: &[Payment], classified: &[bool]) -> Vec<ResultRow> {
        let mut out = Vec::new();
        let mut named: Vec<u32> = self.reported_payments().into_iter().collect();
        named.sort_unstable();
        for i in named {
            let p = &payments[i as usize];
            if classified[i as usize] {
                continue;
            }
            let base = ResultRow {
                outcome: match p.current_status {
                    Status::Succeeded => Outcome::Matched,
                    Status::Failed => Outcome::FailedOk,
                    Status::Pending => Outcome::NotSubmitted,
                    _ => Outcome::InFlight,
                },
                payment: Some(i),
                lines: Vec::new(),
                rule: Arc::from(""),
                action: Action::None,
                detail: Cow::Borrowed(""),
            };
            let row = self.overlay(i as usize, p, base, None);
            if row.action == Action::Ticket {
                out.push(row);
            }
        }
        for ((b, id), ks) in &self.unknown {
            let field = self.blocks[*b].id_field.as_str();
            let all: Vec<String> = ks
                .iter()
                .map(|&k| self.said(&self.claims[k as usize]))
                .collect();
            let names = match (id.is_empty(), self.blocks[*b].ledger_key) {
                (true, _) => format!("has no {field}, so it names no payment"),
                (false, LedgerKey::PaymentId) => {
                    format!("names {field} {id:?}, which is no payment of the ledger")
                }
                (false, LedgerKey::ProviderPaymentId) => format!(
                    "names {field} {id:?}, which is the provider id of no payment of the ledger \
                     (or of more than one)"
                ),
            };
            out.push(ResultRow {
                outcome: Outcome::OrphanAtProvider,
                payment: None,
                lines: Vec::new(),
                rule: Arc::from(format!("payout_status:{}#{id}", self.blocks[*b].name)),
                action: Action::Ticket,
                detail: Cow::Owned(format!(
                    "{} {names} (not a prefix, not another case: exactly): evidence for no \
                     payment, a human decides",
                    all.join("; ")
                )),
            });
        }
        out
    }
}

/// Why a rejection may be about another attempt than the payment's current one (DESIGN.md
/// rule 11: the current attempt's clock), if it may: its file was written before the current
/// attempt started, or the payment was sent more than once (the record names the payment, not
/// the attempt; a retry may have paid).
fn other_attempt(p: &Payment, c: &Claim) -> Option<String> {
    let start = p.started_at?;
    if c.known_at < start {
        return Some(format!(
            "its file was written at {}, before the current attempt started ({}): it is about \
             an earlier attempt, not evidence about this one",
            crate::timeparse::format_utc(c.known_at),
            crate::timeparse::format_utc(start)
        ));
    }
    if p.first_started_at.is_some_and(|f| f < start) {
        return Some(format!(
            "the payment was sent more than once (first at {}, the current attempt at {}) and \
             the record names the payment, not an attempt: a human decides which it rejects",
            crate::timeparse::format_utc(p.first_started_at.unwrap_or(start)),
            crate::timeparse::format_utc(start)
        ));
    }
    None
}

/// `row` as a ticket of `outcome` decided by `rule`, saying `detail`.
fn ticket(mut row: ResultRow, outcome: Outcome, rule: Arc<str>, detail: String) -> ResultRow {
    row.outcome = outcome;
    row.action = Action::Ticket;
    row.rule = rule;
    row.detail = Cow::Owned(detail);
    row
}

/// `row` with `text` added to its detail.
fn note(mut row: ResultRow, text: String) -> ResultRow {
    row.detail = if row.detail.is_empty() {
        Cow::Owned(text)
    } else {
        Cow::Owned(format!("{}; {text}", row.detail))
    };
    row
}
