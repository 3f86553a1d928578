//! The query log (`recon_status_queries`): every request recon sent to a status API, so a
//! reviewer can see what the provider said and when. Written in its own transaction as soon as
//! the queries are done (they happened, whatever the run does next).

use super::client::Query;
use crate::exit::{Failure, fail};
use crate::store::Tx;
use anyhow::Result;
use sqlx::QueryBuilder;

const COLUMNS: &str = "INSERT INTO recon_status_queries (request_id, run_id, api, payment_id, \
     attempt, url, status_code, latency_ms, body_sha256, verdict, provider_status, detail, sent_at) ";

/// Appends `queries` of `api` in `run_id`.
pub async fn append(tx: &mut Tx, run_id: &str, api: &str, queries: &[Query]) -> Result<()> {
    let err = |e: sqlx::Error| {
        fail(
            Failure::Database,
            format!("recording status queries: {}", crate::db::message(e)),
        )
    };
    // 13 binds a row: 500 rows stay under SQLite's and PostgreSQL's parameter limits.
    for chunk in queries.chunks(500) {
        match tx {
            Tx::Sqlite(t) => {
                let mut q: QueryBuilder<sqlx::Sqlite> = QueryBuilder::new(COLUMNS);
                q.push_values(chunk, |mut b, r| {
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
                        .push_bind(crate::timeparse::to_db(r.sent_at));
                });
                q.build().execute(&mut **t).await.map_err(err)?;
            }
            Tx::Postgres(t) => {
                let mut q: QueryBuilder<sqlx::Postgres> = QueryBuilder::new(COLUMNS);
                q.push_values(chunk, |mut b, r| {
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
                        .push_bind(chrono::DateTime::from_timestamp_micros(r.sent_at));
                });
                q.build().execute(&mut **t).await.map_err(err)?;
            }
        }
    }
    Ok(())
}
