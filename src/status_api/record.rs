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
        // One body for both backends; only the timestamp's bound type differs.
        macro_rules! insert {
            ($db:ty, $conn:expr, $ts:expr) => {{
                let mut q: QueryBuilder<$db> = QueryBuilder::new(COLUMNS);
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
                        .push_bind($ts(r.sent_at));
                });
                q.build().execute($conn).await.map_err(err)?;
            }};
        }
        match tx {
            Tx::Sqlite(t) => insert!(sqlx::Sqlite, &mut **t, crate::timeparse::to_db),
            Tx::Postgres(t) => insert!(
                sqlx::Postgres,
                &mut **t,
                chrono::DateTime::from_timestamp_micros
            ),
        }
    }
    Ok(())
}
