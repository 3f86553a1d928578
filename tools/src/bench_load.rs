//! `recon-tools bench-load`: how fast the ledger comes out of the database, on the path a run
//! uses (SQLite: raw statement stepping; PostgreSQL: `COPY … TO STDOUT`) and, for comparison,
//! with sqlx's row-by-row decoding. Prints rows/s; a benchmark, not a test (timings never decide
//! pass/fail).

use anyhow::Result;
use futures_util::TryStreamExt;
use recon::config::Config;
use recon::db::{Db, Pool};
use recon::exit::{Failure, fail};
use recon::ledger::load::{self, LoadRange};
use std::fmt::Write as _;
use std::time::Instant;

/// Loads the whole ledger `repeat` times per path and reports the best time of each.
pub async fn bench_load(cfg: &Config, repeat: usize) -> Result<String> {
    let db = Db::open(&cfg.database_url).await?;
    // 1970 .. 3000: the whole ledger.
    let range = LoadRange {
        lo: 0,
        hi: 32_503_680_000_000_000,
        attempts_lo: 0,
        from_day: "1970-01-01".into(),
        partition: None,
        rewind: None,
    };
    let mut out = String::new();
    let (db_ref, ledger, range) = (&db, &cfg.ledger, &range);
    let (best, rows) = best_of(repeat, || async move {
        Ok(load::load(db_ref, ledger, range).await?.payments.len())
    })
    .await?;
    let attempts = count_attempts(&db).await?;
    let backend = match db.pool {
        Pool::Sqlite(_) => "sqlite raw",
        Pool::Postgres(_) => "postgres COPY",
    };
    let _ = writeln!(
        out,
        "{backend:<22} {rows} payments + {attempts} attempts in {best:.3} s = {:.0} rows/s \
         (the run's whole ledger load: rows, sort, index, history, follow-ups)",
        (rows + attempts) as f64 / best
    );
    if let Pool::Postgres(pool) = &db.pool {
        // The same rows as the row-by-row decode below, through COPY: the fair comparison.
        let (best, rows) = best_of(repeat, || copy_raw(pool)).await?;
        let _ = writeln!(
            out,
            "{:<22} {rows} rows in {best:.3} s = {:.0} rows/s",
            "postgres COPY (raw)",
            rows as f64 / best
        );
        let (best, rows) = best_of(repeat, || row_by_row(pool)).await?;
        let _ = writeln!(
            out,
            "{:<22} {rows} rows in {best:.3} s = {:.0} rows/s",
            "postgres row-by-row",
            rows as f64 / best
        );
    }
    db.close().await;
    Ok(out)
}

/// Runs `load` `repeat` times (at least once): the best time in seconds and the rows it read.
async fn best_of<F, Fut>(repeat: usize, mut load: F) -> Result<(f64, usize)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<usize>>,
{
    let (mut best, mut rows) = (f64::MAX, 0);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        rows = load().await?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((best, rows))
}

async fn count_attempts(db: &Db) -> Result<usize> {
    let sql = "SELECT count(*) FROM payment_attempts WHERE provider_payment_id IS NOT NULL";
    let n: i64 = match &db.pool {
        Pool::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await,
        Pool::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p).await,
    }
    .map_err(|e| fail(Failure::Database, format!("counting attempts: {e}")))?;
    Ok(n as usize)
}

/// The payments and attempts streamed through `COPY … TO STDOUT` and parsed (timestamps
/// included), without the run's sorting and indexing.
async fn copy_raw(pool: &sqlx::PgPool) -> Result<usize> {
    let err = |e: sqlx::Error| fail(Failure::Database, format!("COPY load: {e}"));
    let mut conn = pool.acquire().await.map_err(err)?;
    sqlx::query("SET TIME ZONE 'UTC'")
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    let mut n = 0usize;
    recon::ledger::pg_copy::copy_rows(
        &mut conn,
        "SELECT payment_id, recipient_account, amount_minor, currency, status, created_at,
                started_at, attempt_id, provider_payment_id FROM payments",
        |f| {
            let ts = |i: usize| {
                f.get(i)
                    .and_then(|v| v.as_deref())
                    .map(recon::timeparse::from_pg_utc)
            };
            std::hint::black_box((
                ts(5),
                ts(6),
                f.get(2).and_then(|v| v.as_deref()).map(str::parse::<i64>),
            ));
            std::hint::black_box(owned(f));
            n += 1;
            Ok(())
        },
    )
    .await?;
    recon::ledger::pg_copy::copy_rows(
        &mut conn,
        "SELECT payment_id, provider_payment_id FROM payment_attempts
         WHERE provider_payment_id IS NOT NULL",
        |f| {
            std::hint::black_box(owned(f));
            n += 1;
            Ok(())
        },
    )
    .await?;
    Ok(n)
}

/// Owned copies of a row's fields, as sqlx's decoding into `String`s makes them.
fn owned(f: &[Option<std::borrow::Cow<'_, str>>]) -> Vec<Option<String>> {
    f.iter().map(|v| v.as_deref().map(str::to_string)).collect()
}

/// The same columns decoded by sqlx, row by row (what COPY replaces). The ids are read as text,
/// as recon reads them (a `uuid` column decodes into no `String`).
async fn row_by_row(pool: &sqlx::PgPool) -> Result<usize> {
    type PaymentRow = (
        String,
        String,
        i64,
        String,
        String,
        chrono::DateTime<chrono::Utc>,
        Option<chrono::DateTime<chrono::Utc>>,
        Option<String>,
        Option<String>,
    );
    let err = |e: sqlx::Error| fail(Failure::Database, format!("row-by-row load: {e}"));
    let mut n = 0usize;
    let mut s = sqlx::query_as::<_, PaymentRow>(
        "SELECT payment_id::text, recipient_account, amount_minor, currency, status, created_at,
                started_at, attempt_id::text, provider_payment_id FROM payments",
    )
    .fetch(pool);
    while let Some(row) = s.try_next().await.map_err(err)? {
        std::hint::black_box(&row);
        n += 1;
    }
    drop(s);
    let mut s = sqlx::query_as::<_, (String, String)>(
        "SELECT payment_id::text, provider_payment_id FROM payment_attempts
         WHERE provider_payment_id IS NOT NULL",
    )
    .fetch(pool);
    while let Some(row) = s.try_next().await.map_err(err)? {
        std::hint::black_box(&row);
        n += 1;
    }
    Ok(n)
}
