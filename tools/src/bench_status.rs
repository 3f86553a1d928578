//! `recon-tools bench-status`: status-query throughput against a provider stub on loopback that
//! answers every request after a fixed latency (a benchmark, not a test: timings never decide
//! pass/fail). Nothing is written to any database.

use anyhow::{Context, Result};
use recon::ledger::{Payment, Status};
use recon::status_api::client;
use recon::status_api::config::RawStatusApi;
use recon::status_api::verdict::Answer;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Asks about `payments` UNKNOWN payments with `max_in_flight` requests open at most, each
/// answered by the stub after `latency`.
pub async fn run(payments: usize, max_in_flight: usize, latency: Duration) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("bench-status: binding the stub")?;
    let port = listener.local_addr()?.port();
    let stub = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve(sock, latency));
        }
    });
    let block = format!(
        r#"name = "stub"
url = "http://127.0.0.1:{port}/v1/payments/{{payment_id}}"
max_in_flight = {max_in_flight}
timeout_ms = 5000
budget_seconds = 60
[pointers]
status = "/status"
reference = "/reference"
provider_payment_id = "/id"
amount = "/amount"
currency = "/currency"
[statuses]
succeeded = ["PAID"]
"#
    );
    let raw: RawStatusApi = toml::from_str(&block).context("bench-status: the stub's block")?;
    let cfg = raw.validate(std::path::Path::new("<bench-status>"), 0)?;
    let list: Vec<Payment> = (0..payments)
        .map(|i| Payment {
            payment_id: format!("P-{i:06}").into(),
            recipient: "DE89370400440532013000".into(),
            amount_minor: 1234,
            currency: "EUR",
            current_status: Status::Unknown,
            status: Status::Unknown,
            attempt_id: Some(format!("A-{i:06}").into()),
            provider_payment_id: None,
            started_at: Some(0),
            first_started_at: Some(0),
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: recon::partition::NONE,
        })
        .collect();
    let targets: Vec<u32> = (0..payments as u32).collect();
    let started = Instant::now();
    let asked = client::ask(&cfg, &list, &targets).await?;
    let secs = started.elapsed().as_secs_f64();
    stub.abort();
    let evidence = asked
        .answers
        .iter()
        .filter(|(_, a)| matches!(a, Answer::Evidence { .. }))
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench-status: {payments} UNKNOWN payments, stub latency {} ms, max_in_flight {max_in_flight}: \
         {evidence} answered as evidence in {secs:.3} s = {:.0} payments/s \
         (peak {} requests open; floor {:.3} s = payments / max_in_flight × latency)",
        latency.as_millis(),
        evidence as f64 / secs,
        asked.peak_in_flight,
        (payments as f64 / max_in_flight as f64).ceil() * latency.as_secs_f64(),
    );
    Ok(out)
}

/// HTTP/1.1 keep-alive: every request is answered `PAID` for the id in its path after `latency`.
async fn serve(mut sock: tokio::net::TcpStream, latency: Duration) {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("");
        let id = path.rsplit('/').next().unwrap_or("");
        let body = format!(
            r#"{{"id":"psp-{id}","status":"PAID","reference":"{id}","amount":"12.34","currency":"EUR"}}"#
        );
        tokio::time::sleep(latency).await;
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if sock.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}
