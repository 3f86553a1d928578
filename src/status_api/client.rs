//! Asking the provider: one task per payment, at most `max_in_flight` requests open (a slot
//! held only while a request is open, never during a backoff), a timeout per request (body
//! included), retries with exponential backoff and full jitter on timeouts, connection errors,
//! 429 and 5xx (a `Retry-After` in seconds or as an HTTP date is honoured), and one time budget
//! for all. A retry whose backoff is over takes the next free slot before any payment not yet
//! asked (`Slots`), so it is sent at its own backoff, not after every first attempt.

use super::config::StatusApiConfig;
use super::verdict::{self, Answer};
use crate::exit::{Failure, fail};
use crate::ledger::Payment;
use crate::store::StatusQuery as Query;
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Largest body read; a longer one is not an answer.
const MAX_BODY: usize = 1 << 20;

/// All queries of a run.
#[derive(Debug, Default)]
pub struct Asked {
    /// Payment index → its answer.
    pub answers: Vec<(u32, Answer)>,
    /// Every request, in the order they finished.
    pub queries: Vec<Query>,
    /// Payments never asked because the budget ran out.
    pub not_asked: usize,
    /// The most requests open at once.
    pub peak_in_flight: usize,
}

/// The `max_in_flight` request slots, retries first. Every payment's task is spawned at once
/// and tokio's semaphore serves waiters in the order they came, so a retry queued behind all
/// first attempts would wait for every one of them. First attempts therefore queue for a slot
/// one at a time (`first`, held until the slot is granted): at most one first attempt waits
/// among the slots' waiters, and a retry due now is granted at most the second slot freed.
struct Slots {
    open: Semaphore,
    first: Semaphore,
}

impl Slots {
    fn new(max_in_flight: usize) -> Slots {
        Slots {
            open: Semaphore::new(max_in_flight),
            first: Semaphore::new(1),
        }
    }

    /// A slot for attempt `attempt` (1 = the payment's first); `None` once closed.
    async fn acquire(&self, attempt: u32) -> Option<SemaphorePermit<'_>> {
        if attempt > 1 {
            return self.open.acquire().await.ok();
        }
        let _turn = self.first.acquire().await.ok()?;
        self.open.acquire().await.ok()
    }
}

/// The URL for `p`: placeholders replaced by percent-encoded values; `None` when the template
/// needs a provider id the payment does not have.
pub fn url_for(template: &str, p: &Payment) -> Option<String> {
    let enc = |s: &str| {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    let mut url = template
        .replace("{payment_id}", &enc(&p.payment_id.text()))
        .replace("{reference}", &enc(&p.payment_id.text()));
    if url.contains("{provider_payment_id}") {
        url = url.replace(
            "{provider_payment_id}",
            &enc(p.provider_payment_id.as_deref()?),
        );
    }
    Some(url)
}

/// Asks about `targets` (indexes into `payments`).
pub async fn ask(cfg: &StatusApiConfig, payments: &[Payment], targets: &[u32]) -> Result<Asked> {
    let Some(template) = cfg.url.as_deref() else {
        return Ok(Asked::default());
    };
    let headers = cfg.header_values()?;
    let mut map = reqwest::header::HeaderMap::new();
    for (h, v) in &headers {
        let name = reqwest::header::HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
            fail(
                Failure::Config,
                format!("status_api {}: header {h:?}", cfg.name),
            )
        })?;
        let mut value = reqwest::header::HeaderValue::from_str(v).map_err(|_| {
            // Never the value: it may be a secret.
            fail(
                Failure::Config,
                format!(
                    "status_api {}: header {h}: value is not valid header text",
                    cfg.name
                ),
            )
        })?;
        if cfg.secret_headers.iter().any(|(s, _)| s == h) {
            value.set_sensitive(true);
        }
        map.insert(name, value);
    }
    let http = reqwest::Client::builder()
        .use_rustls_tls()
        .https_only(template.starts_with("https://"))
        .default_headers(map)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(cfg.timeout)
        .pool_max_idle_per_host(cfg.max_in_flight)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| {
            fail(
                Failure::Config,
                format!("status_api {}: cannot set up HTTP: {e}", cfg.name),
            )
        })?;
    let cfg = Arc::new(cfg.clone());
    let sem = Arc::new(Slots::new(cfg.max_in_flight));
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + cfg.budget;
    let mut set = tokio::task::JoinSet::new();
    for &i in targets {
        let p = payments[i as usize].clone();
        let (http, cfg, sem, open, peak) = (
            http.clone(),
            Arc::clone(&cfg),
            Arc::clone(&sem),
            Arc::clone(&open),
            Arc::clone(&peak),
        );
        set.spawn(async move {
            let (answer, queries, asked) =
                one(&http, &cfg, &p, &sem, deadline, (&open, &peak)).await;
            (i, answer, queries, asked)
        });
    }
    let mut out = Asked::default();
    while let Some(done) = set.join_next().await {
        let (i, answer, queries, asked) =
            done.map_err(|e| anyhow::anyhow!("status_api {}: query task: {e}", cfg.name))?;
        if !asked {
            out.not_asked += 1;
        }
        out.queries.extend(queries);
        out.answers.push((i, answer));
    }
    out.answers.sort_by_key(|(i, _)| *i);
    out.peak_in_flight = peak.load(std::sync::atomic::Ordering::SeqCst);
    Ok(out)
}

/// A `Retry-After` value: delay-seconds, or an HTTP date (RFC 9110: IMF-fixdate, which RFC 2822
/// parsing reads), as seconds from `now` (0 for a date already past). Anything else: `None`.
fn retry_after_secs(v: &str, now: chrono::DateTime<chrono::Utc>) -> Option<u64> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(s);
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    Some(u64::try_from((at.with_timezone(&chrono::Utc) - now).num_seconds()).unwrap_or(0))
}

/// A random duration in [0, cap] ("full jitter"; uuid's v4 source, no extra crate), in whole
/// microseconds.
fn jitter(cap: Duration) -> Duration {
    let cap_us = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
    let r = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_micros(r % cap_us.saturating_add(1).max(1))
}

/// Asks about one payment until an answer, a final error, or the budget.
async fn one(
    http: &reqwest::Client,
    cfg: &StatusApiConfig,
    p: &Payment,
    sem: &Slots,
    deadline: Instant,
    (open, peak): (
        &std::sync::atomic::AtomicUsize,
        &std::sync::atomic::AtomicUsize,
    ),
) -> (Answer, Vec<Query>, bool) {
    use std::sync::atomic::Ordering::SeqCst;
    let mut queries = Vec::new();
    let Some(url) = cfg.url.as_deref().and_then(|t| url_for(t, p)) else {
        return (
            Answer::Unanswered {
                why: "the URL needs a provider id the ledger does not have".into(),
            },
            queries,
            true,
        );
    };
    let logged_url = crate::mask::secrets(&url);
    let budget_gone = || Answer::Unanswered {
        why: "the status_api time budget ran out".into(),
    };
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let Some(permit) = sem.acquire(attempt).await else {
            return (budget_gone(), queries, attempt > 1);
        };
        let now = Instant::now();
        if now >= deadline {
            return (budget_gone(), queries, attempt > 1);
        }
        let limit = cfg.timeout.min(deadline - now);
        let request_id = uuid::Uuid::new_v4().simple().to_string();
        let sent_at = chrono::Utc::now().timestamp_micros();
        let n = open.fetch_add(1, SeqCst) + 1;
        peak.fetch_max(n, SeqCst);
        let started = Instant::now();
        let result = tokio::time::timeout(limit, async {
            let resp = http
                .request(cfg.method.clone(), &url)
                .header("X-Request-Id", &request_id)
                .send()
                .await?;
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after_secs(v, chrono::Utc::now()));
            let mut resp = resp;
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await? {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY {
                    break;
                }
            }
            Ok::<_, reqwest::Error>((status, retry_after, body))
        })
        .await;
        open.fetch_sub(1, SeqCst);
        drop(permit);
        let latency_ms = started.elapsed().as_millis() as u64;
        let mut q = Query {
            request_id,
            payment_id: p.payment_id.to_string(),
            attempt,
            url: logged_url.clone(),
            status_code: None,
            latency_ms,
            body_sha256: None,
            verdict: String::new(),
            provider_status: None,
            detail: String::new(),
            sent_at,
        };
        // (retryable, why, Retry-After) or a final answer.
        let retry: (String, Option<u64>) = match result {
            Err(_) => (format!("timed out after {} ms", limit.as_millis()), None),
            Ok(Err(e)) => (
                format!(
                    "request failed: {}",
                    crate::mask::secrets(&e.without_url().to_string())
                ),
                None,
            ),
            Ok(Ok((status, retry_after, body))) => {
                q.status_code = Some(status.as_u16());
                q.body_sha256 = Some(hex::encode(Sha256::digest(&body)));
                if status.is_success() {
                    let answer = if body.len() > MAX_BODY {
                        Answer::NotEvidence {
                            outcome: crate::outcome::Outcome::Ambiguous,
                            why: format!("malformed body: longer than {MAX_BODY} bytes"),
                        }
                    } else {
                        verdict::judge(cfg, p, &body)
                    };
                    q.verdict = answer.verdict().to_string();
                    match &answer {
                        Answer::NotEvidence { why, .. } => q.detail = why.clone(),
                        Answer::Evidence { status, .. } => q.provider_status = Some(status.clone()),
                        Answer::Unanswered { .. } => {}
                    }
                    queries.push(q);
                    return (answer, queries, true);
                }
                if status.as_u16() == 429 || status.is_server_error() {
                    (format!("HTTP {}", status.as_u16()), retry_after)
                } else {
                    let why = format!("HTTP {} (not retried)", status.as_u16());
                    q.verdict = "unanswered".into();
                    q.detail = why.clone();
                    queries.push(q);
                    return (Answer::Unanswered { why }, queries, true);
                }
            }
        };
        let (why, retry_after) = retry;
        if attempt >= cfg.max_attempts {
            q.verdict = "unanswered".into();
            q.detail = format!("{why}; gave up after {attempt} attempt(s)");
            let why = q.detail.clone();
            queries.push(q);
            return (Answer::Unanswered { why }, queries, true);
        }
        let wait = match retry_after {
            Some(s) => Duration::from_secs(s),
            None => {
                let cap = cfg
                    .backoff
                    .saturating_mul(1u32 << (attempt - 1).min(16))
                    .min(cfg.backoff_max);
                jitter(cap)
            }
        };
        if wait > cfg.backoff_max || Instant::now() + wait >= deadline {
            q.verdict = "unanswered".into();
            // No wait in the answer: results.csv stays the same for the same answers.
            let why = format!(
                "{why}; the next attempt would be beyond {}",
                if wait > cfg.backoff_max {
                    "backoff_max_ms"
                } else {
                    "the time budget"
                }
            );
            q.detail = format!("{why} ({} ms away)", wait.as_millis());
            queries.push(q);
            return (Answer::Unanswered { why }, queries, true);
        }
        q.verdict = "retry".into();
        q.detail = format!("{why}; retrying in {} ms", wait.as_millis());
        queries.push(q);
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_within_its_cap_and_varies() {
        let cap = Duration::from_millis(200);
        let waits: Vec<Duration> = (0..200).map(|_| jitter(cap)).collect();
        assert!(waits.iter().all(|w| *w <= cap), "{waits:?}");
        // 200 draws from 200,001 values: all equal would mean no randomness at all.
        assert!(waits.iter().any(|w| *w != waits[0]));
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-02T07:28:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(retry_after_secs(" 7 ", now), Some(7));
        assert_eq!(
            retry_after_secs("Wed, 02 Dec 2026 07:28:30 GMT", now),
            Some(30)
        );
        assert_eq!(
            retry_after_secs("Wed, 02 Dec 2026 07:00:00 GMT", now),
            Some(0)
        );
        assert_eq!(retry_after_secs("soon", now), None);
        assert_eq!(retry_after_secs("-5", now), None);
    }
}
