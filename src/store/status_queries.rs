//! The status-query log (`recon_status_queries`): every request recon sent to a provider's
//! status API.

use super::sql::Bind;
use super::{Tx, db_err};
use anyhow::Result;

/// One request recon sent to a provider's status API, as the query log
/// (`recon_status_queries`) keeps it.
#[derive(Debug, Clone)]
pub struct StatusQuery {
    /// Sent as `X-Request-Id`.
    pub request_id: String,
    /// The payment.
    pub payment_id: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The URL (no secrets: those are only in headers).
    pub url: String,
    /// HTTP status, when one came back.
    pub status_code: Option<u16>,
    /// Time to the whole body (or the failure).
    pub latency_ms: u64,
    /// sha256 of the body, when one was read.
    pub body_sha256: Option<String>,
    /// `succeeded`, `failed`, `pending`, `not_found`, `not_evidence`, `retry`, `unanswered`.
    pub verdict: String,
    /// The provider's status as written (evidence only).
    pub provider_status: Option<String>,
    /// Why (for all but evidence).
    pub detail: String,
    /// When it was sent (UTC micros).
    pub sent_at: i64,
}

impl Tx {
    /// Appends `queries` of the status API `api` in `run_id` to the query log.
    pub async fn append_status_queries(
        &mut self,
        run_id: &str,
        api: &str,
        queries: &[StatusQuery],
    ) -> Result<()> {
        // 13 binds a row: a batch stays under either backend's parameter limit.
        for chunk in queries.chunks(self.batch()) {
            let mut q = self.sql(
                "INSERT INTO recon_status_queries (request_id, run_id, api, payment_id, \
                 attempt, url, status_code, latency_ms, body_sha256, verdict, \
                 provider_status, detail, sent_at) ",
            );
            q.push_values(chunk, |mut b, r| {
                let sent_at = crate::timeparse::to_db(r.sent_at);
                b.push_bind(&r.request_id)
                    .push_bind(run_id)
                    .push_bind(api)
                    .push_bind(&r.payment_id)
                    .push_bind(i64::from(r.attempt))
                    .push_bind(&r.url)
                    .push_bind(r.status_code.map(i64::from))
                    .push_bind(r.latency_ms as i64)
                    .push_bind(&r.body_sha256)
                    .push_bind(&r.verdict)
                    .push_bind(&r.provider_status)
                    .push_bind(&r.detail)
                    .push_bind(Bind::Ts(&sent_at));
            });
            self.execute(q)
                .await
                .map_err(db_err("recording status queries"))?;
        }
        Ok(())
    }
}
