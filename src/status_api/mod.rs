//! Provider status queries (`[[status_api]]`, issue 14 part 2): recon asks the provider about
//! the UNKNOWN and stale SUBMITTING payments of a run, after the ledger and the statements are
//! loaded and matched, before classification. Answers are evidence like statement lines, with
//! the same precedence and conflict rules ([`verdict::overlay`]); every request is kept in the
//! query log ([`crate::store::StatusQuery`], written in its own transaction as soon as the
//! queries are done: they happened, whatever the run does next).

pub mod client;
pub use crate::config::status_api as config;
pub mod verdict;
pub mod webhooks;

pub use config::StatusApiConfig;

use crate::db::Db;
use crate::ledger::{Payment, Status};
use crate::outcome::ResultRow;
use crate::timeparse::Micros;
use anyhow::Result;
use std::collections::HashMap;
use std::sync::Arc;
use verdict::Answer;

/// The payments a run asks about: in scope, and UNKNOWN or SUBMITTING older than the stale age
/// by the status classification uses (so a re-run asks about the same payments), or moved to
/// SUCCEEDED or FAILED by a reviewer (the provider's later word may contradict them).
pub fn targets(
    payments: &[Payment],
    in_scope: &[bool],
    as_of: Micros,
    stale_after: Micros,
) -> Vec<u32> {
    payments
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            in_scope[*i]
                && ((matches!(p.status, Status::Unknown | Status::Submitting)
                    && crate::outcome::unresolved(p, as_of, stale_after))
                    || p.human.is_some())
        })
        .map(|(i, _)| i as u32)
        .collect()
}

/// The answers of one run, ready to be folded into classification.
pub struct StatusEvidence {
    cfg: StatusApiConfig,
    answers: HashMap<u32, Answer>,
    /// The webhook event an answer comes from (`webhook event <file>:<line> at <time>`), when
    /// the answer is the webhook's.
    events: HashMap<u32, String>,
    rule: Arc<str>,
    /// How long after a payment's start statement evidence can still arrive, lag included.
    horizon: Micros,
    as_of: Micros,
    /// Warnings for summary.json.
    pub warnings: Vec<String>,
}

impl StatusEvidence {
    /// Row `row` of payment `i` with its answer, if it has one; `decided` is the status recon
    /// or a reviewer moved the payment to earlier and who, when the run judges that decision
    /// ([`verdict::overlay`]).
    pub fn overlay(
        &self,
        i: usize,
        p: &Payment,
        row: ResultRow,
        decided: Option<(Status, &str)>,
    ) -> ResultRow {
        match self.answers.get(&(i as u32)) {
            Some(a) => {
                let closed = p.started_at.is_some_and(|s| s + self.horizon <= self.as_of);
                let from = self.events.get(&(i as u32)).map(String::as_str);
                verdict::overlay(row, p, a, &self.cfg, closed, &self.rule, decided, from)
            }
            None => row,
        }
    }

    /// The provider id each answer that is evidence names (its transition records it).
    pub fn provider_ids(&self) -> HashMap<u32, String> {
        self.answers
            .iter()
            .filter_map(|(&i, a)| match a {
                Answer::Evidence {
                    provider_id: Some(id),
                    ..
                } => Some((i, id.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Asks about `targets`, records every request (not in a dry run) and returns the evidence.
/// `window_after` is the evidence window after a payment's start; `lag` the settlement lag;
/// `payouts` the payout ids of the night's confirmed lines (see [`webhooks::answers`]).
#[allow(clippy::too_many_arguments)]
pub async fn ask_for_run(
    cfg: &StatusApiConfig,
    db: &Db,
    run_id: &str,
    payments: &[Payment],
    targets: &[u32],
    dry_run: bool,
    (window_after, lag, as_of): (Micros, Micros, Micros),
    payouts: &std::collections::HashSet<String>,
) -> Result<StatusEvidence> {
    let started = std::time::Instant::now();
    let asked = client::ask(cfg, payments, targets).await?;
    let (hooks, mut warnings) =
        webhooks::answers(cfg, db, payments, targets, as_of, payouts).await?;
    let unanswered = asked
        .answers
        .iter()
        .filter(|(_, a)| matches!(a, Answer::Unanswered { .. }))
        .count();
    if asked.not_asked > 0 {
        warnings.push(format!(
            "status_api {}: the time budget of {} s ran out: {} payment(s) not asked stay AWAITING_EVIDENCE",
            cfg.name,
            cfg.budget.as_secs(),
            asked.not_asked
        ));
    }
    if unanswered > asked.not_asked {
        warnings.push(format!(
            "status_api {}: {} payment(s) got no usable answer (timeouts, errors; see recon_status_queries)",
            cfg.name,
            unanswered - asked.not_asked
        ));
    }
    tracing::info!(
        api = %cfg.name,
        payments = targets.len(),
        requests = asked.queries.len(),
        unanswered,
        peak_in_flight = asked.peak_in_flight,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Asked the provider."
    );
    if !dry_run && !asked.queries.is_empty() {
        let mut tx = db.begin().await?;
        tx.append_status_queries(run_id, &cfg.name, &asked.queries)
            .await?;
        tx.commit().await?;
    }
    let mut events = HashMap::new();
    Ok(StatusEvidence {
        rule: Arc::from(format!("status_api:{}", cfg.name)),
        cfg: cfg.clone(),
        answers: {
            let mut api: HashMap<u32, Answer> = asked.answers.into_iter().collect();
            let mut all = HashMap::new();
            for (i, h, at) in hooks {
                let hook = h.clone();
                if let Some(a) = webhooks::combine(api.remove(&i), Some(h)) {
                    // The webhook's word (alone, or the final word over a `pending`).
                    if a == hook {
                        events.insert(i, at);
                    }
                    all.insert(i, a);
                }
            }
            all.extend(api);
            all
        },
        events,
        horizon: window_after + lag,
        as_of,
        warnings,
    })
}
