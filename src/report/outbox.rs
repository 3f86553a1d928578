//! Delivering the alert, and the outbox that keeps it when SMTP is down, stalls or refuses it.
//!
//! The alert leaves only after the run committed and its folder is in place, so a failed
//! alert never undoes a run. Over SMTP the message is first written to
//! `<output_dir>/outbox/<run id>.eml` (the message as sent) with `<run id>.envelope.json`
//! (sender and recipients), then the run lock is released, then it is sent; it is deleted only
//! once the server accepted it, so neither a stalled server nor a kill loses it. Every stage
//! of the SMTP exchange is bounded by `email.smtp.timeout_seconds`. The next run sends queued
//! messages first, oldest first, skipping one another process is delivering. Credentials are
//! read from the environment at sending time and never logged.
//!
//! The gather keeps the night's message in its folder before the commit that marks the night
//! gathered ([`keep`]) and moves it into the outbox once the folder is in place ([`release`]),
//! so a gather killed in between has the next gather queue it, once.

use crate::config::{EmailConfig, EmailTransport, SmtpConfig, SmtpTls};
use anyhow::{Context, Result};
use lettre::Message;
use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Certificate, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use std::path::{Path, PathBuf};

/// The outbox folder under the output root.
pub fn dir(output_dir: &Path) -> PathBuf {
    output_dir.join("outbox")
}

/// What happened to a run's alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertStatus {
    /// No `[email]` section.
    Disabled,
    /// Dry run: the message was written here and sent to nobody.
    DryRun(PathBuf),
    /// File transport: the message was written here.
    Written(PathBuf),
    /// The SMTP server accepted it for these recipients.
    Sent(Vec<String>),
    /// SMTP failed; the message waits in the outbox.
    Queued {
        /// The queued message.
        path: PathBuf,
        /// Why sending failed.
        error: String,
    },
    /// The message could be neither sent nor kept.
    Failed(String),
}

/// The alert side of a run: its own message and the outbox it tried to empty first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// This run's message.
    pub status: AlertStatus,
    /// Earlier messages sent from the outbox by this run.
    pub outbox_sent: usize,
    /// Messages still in the outbox after this run.
    pub outbox_left: usize,
    /// Why emptying the outbox stopped, if it did.
    pub outbox_error: Option<String>,
}

impl Alert {
    /// No alert configured.
    pub fn disabled() -> Alert {
        Alert {
            status: AlertStatus::Disabled,
            outbox_sent: 0,
            outbox_left: 0,
            outbox_error: None,
        }
    }

    /// Whether an alert (this run's or a queued one) could not be delivered: the run exits
    /// with [`crate::exit::ALERT_FAILED`].
    pub fn failed(&self) -> bool {
        matches!(
            self.status,
            AlertStatus::Queued { .. } | AlertStatus::Failed(_)
        ) || self.outbox_error.is_some()
    }

    /// One line for the terminal.
    pub fn text(&self) -> String {
        let mut s = match &self.status {
            AlertStatus::Disabled => "alert: none configured".to_string(),
            AlertStatus::DryRun(p) => {
                format!("alert: dry run, not sent; written to {}", p.display())
            }
            AlertStatus::Written(p) => format!("alert: written to {}", p.display()),
            AlertStatus::Sent(to) => format!("alert: sent to {}", to.join(", ")),
            AlertStatus::Queued { path, error } => {
                format!("alert: NOT SENT ({error}); queued in {}", path.display())
            }
            AlertStatus::Failed(e) => format!("alert: NOT SENT and not queued: {e}"),
        };
        if self.outbox_sent > 0 {
            s.push_str(&format!("; {} queued alert(s) sent", self.outbox_sent));
        }
        if let Some(e) = &self.outbox_error {
            s.push_str(&format!("; outbox not emptied ({e})"));
        }
        if self.outbox_left > 0 {
            s.push_str(&format!(
                "; {} alert(s) wait in the outbox",
                self.outbox_left
            ));
        }
        s
    }
}

/// TLS parameters for `smtp.host`: the system roots plus the roots of `ca_file`. The server
/// certificate is always verified (chain and name); there is no way to switch that off.
fn tls_parameters(smtp: &SmtpConfig) -> Result<TlsParameters> {
    let mut b = TlsParameters::builder(smtp.host.clone());
    if let Some(ca) = &smtp.ca {
        let cert = Certificate::from_pem(&ca.pem)
            .with_context(|| format!("email.smtp.ca_file {}", ca.path.display()))?;
        b = b.add_root_certificate(cert);
    }
    b.build()
        .with_context(|| format!("TLS parameters for {}", smtp.host))
}

/// One stage of the SMTP exchange, bounded by the configured timeout: lettre's own timeout
/// covers only the TCP connect, so a server that accepts and then never answers (or sends
/// only its greeting) would otherwise hang the alert, and with it the run, forever.
async fn stage<T>(
    smtp: &SmtpConfig,
    what: &str,
    work: impl std::future::Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T> {
    let server = format!("SMTP {}:{}", smtp.host, smtp.port);
    match tokio::time::timeout(smtp.timeout, work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(anyhow::anyhow!("{server}: {what}: {e}")),
        Err(_) => Err(anyhow::anyhow!(
            "{server}: {what}: no answer within {} s (email.smtp.timeout_seconds)",
            smtp.timeout.as_secs()
        )),
    }
}

/// Sends raw bytes, every stage (connect with TLS, greeting and EHLO; STARTTLS; AUTH; the
/// envelope and the data; QUIT) within `smtp.timeout`. `starttls` is required: a server that
/// does not offer it gets no message. The error says which server and stage, never the
/// credentials.
async fn send_raw(smtp: &SmtpConfig, envelope: &Envelope, bytes: &[u8]) -> Result<()> {
    let hello = ClientId::default();
    let implicit = match smtp.tls {
        SmtpTls::Implicit => Some(tls_parameters(smtp)?),
        SmtpTls::StartTls | SmtpTls::None => None,
    };
    let credentials = smtp
        .credentials()?
        .map(|(user, password)| Credentials::new(user, password));
    let mut conn = stage(
        smtp,
        "connect and greeting",
        AsyncSmtpConnection::connect_tokio1(
            (smtp.host.as_str(), smtp.port),
            Some(smtp.timeout),
            &hello,
            implicit,
            None,
        ),
    )
    .await?;
    let sent = async {
        if smtp.tls == SmtpTls::StartTls {
            let params = tls_parameters(smtp)?;
            stage(smtp, "STARTTLS", conn.starttls(params, &hello)).await?;
        }
        if let Some(c) = &credentials {
            stage(smtp, "AUTH", conn.auth(DEFAULT_MECHANISMS, c)).await?;
        }
        stage(smtp, "sending the message", conn.send(envelope, bytes)).await
    }
    .await;
    // The server accepted the message: QUIT is a courtesy, bounded too. After a failed stage
    // the connection is only dropped (a failed TLS upgrade leaves nothing to write to).
    if sent.is_ok() {
        let _ = tokio::time::timeout(smtp.timeout, conn.quit()).await;
    }
    sent.map(|_| ())
}

fn envelope_json(envelope: &Envelope) -> String {
    serde_json::json!({
        "from": envelope.from().map(|a| a.to_string()),
        "to": envelope.to().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
    })
    .to_string()
}

fn read_envelope(path: &Path) -> Result<Envelope> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let addr = |v: &serde_json::Value| -> Result<lettre::Address> {
        v.as_str()
            .context("address is not a string")?
            .parse()
            .with_context(|| format!("address in {}", path.display()))
    };
    let from = match v.get("from") {
        Some(serde_json::Value::Null) | None => None,
        Some(f) => Some(addr(f)?),
    };
    let to = v
        .get("to")
        .and_then(|t| t.as_array())
        .with_context(|| format!("{}: no recipients", path.display()))?
        .iter()
        .map(addr)
        .collect::<Result<Vec<_>>>()?;
    Envelope::new(from, to).with_context(|| format!("envelope in {}", path.display()))
}

/// Writes a file through a temporary name, so a reader never sees half of it; a failed write
/// leaves no temporary file behind.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("part");
    let written = std::fs::write(&tmp, bytes)
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Queues a message: the envelope first, the message last (its presence marks the entry
/// complete). When the message cannot be written, its envelope goes too: a failed queueing
/// leaves nothing behind.
fn queue(output_dir: &Path, run_id: &str, envelope: &Envelope, bytes: &[u8]) -> Result<PathBuf> {
    let dir = dir(output_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let eml = dir.join(format!("{run_id}.eml"));
    let envelope_path = dir.join(format!("{run_id}.envelope.json"));
    write_atomic(&envelope_path, envelope_json(envelope).as_bytes())?;
    if let Err(e) = write_atomic(&eml, bytes) {
        let _ = std::fs::remove_file(&envelope_path);
        return Err(e);
    }
    Ok(eml)
}

/// Queued messages, oldest run first (run ids start with their UTC start time).
pub fn queued(output_dir: &Path) -> Result<Vec<PathBuf>> {
    let dir = dir(output_dir);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .collect();
    v.sort();
    Ok(v)
}

/// Sends queued messages until the first failure. Returns (sent, left, error).
pub async fn flush(cfg: &EmailConfig, output_dir: &Path) -> (usize, usize, Option<String>) {
    let queue = match queued(output_dir) {
        Ok(q) => q,
        Err(e) => return (0, 0, Some(format!("{e:#}"))),
    };
    if queue.is_empty() {
        return (0, 0, None);
    }
    let EmailTransport::Smtp(smtp) = &cfg.transport else {
        tracing::warn!(
            queued = queue.len(),
            "Alerts wait in the outbox but the email transport is `file`; not sent."
        );
        return (0, queue.len(), None);
    };
    let (mut sent, mut busy) = (0, 0);
    for (k, eml) in queue.iter().enumerate() {
        let env_path = eml.with_extension("envelope.json");
        let result = async {
            let Some(claim) = Claim::take(eml)? else {
                return Ok(None);
            };
            let envelope = read_envelope(&env_path)?;
            let bytes = std::fs::read(eml).with_context(|| format!("reading {}", eml.display()))?;
            send_raw(smtp, &envelope, &bytes)
                .await
                .map(|()| Some(claim))
        }
        .await;
        match result {
            Ok(Some(claim)) => {
                sent += 1;
                tracing::info!(queued = %eml.display(), "Queued alert sent.");
                claim.remove();
            }
            // Another run is delivering it right now.
            Ok(None) => busy += 1,
            Err(e) => {
                let error = format!("{e:#}");
                tracing::error!(queued = %eml.display(), error = %error, "Queued alert not sent; kept in the outbox.");
                return (sent, queue.len() - k + busy, Some(error));
            }
        }
    }
    (sent, busy, None)
}

/// A queued message this process is delivering: its `.eml`, open and exclusively locked, so
/// another run's [`flush`] leaves it alone. The OS drops the lock with the process, so a
/// delivery killed half-way leaves the message queued for the next run.
#[derive(Debug)]
struct Claim {
    eml: PathBuf,
    _file: std::fs::File,
}

impl Claim {
    /// Claims `eml`; `None` when another process holds it.
    fn take(eml: &Path) -> Result<Option<Claim>> {
        let file =
            std::fs::File::open(eml).with_context(|| format!("opening {}", eml.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Claim {
                eml: eml.to_path_buf(),
                _file: file,
            })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", eml.display()))
            }
        }
    }

    /// The server accepted the message: it leaves the outbox (the message first: an envelope
    /// without a message is ignored).
    fn remove(self) {
        let _ = std::fs::remove_file(&self.eml);
        let _ = std::fs::remove_file(self.eml.with_extension("envelope.json"));
    }
}

/// Delivers this run's message after the commit and rename. Never fails: what went wrong is
/// in the returned status (and the outbox). Over SMTP the message is queued in the outbox and
/// claimed *before* anything is sent, then `lock` (the run lock) is released: the database
/// work is done, and a stalled server must not keep the next run out. The message leaves the
/// outbox only once the server accepted it.
#[allow(clippy::too_many_arguments)]
pub async fn deliver<L>(
    cfg: &EmailConfig,
    output_dir: &Path,
    run_dir: &Path,
    run_id: &str,
    message: &Message,
    dry_run: bool,
    lock: L,
) -> AlertStatus {
    let eml = run_dir.join(super::EML_FILE);
    deliver_to(cfg, output_dir, &eml, run_id, message, dry_run, lock).await
}

/// [`deliver`], the file transport writing the message to `eml`.
async fn deliver_to<L>(
    cfg: &EmailConfig,
    output_dir: &Path,
    eml: &Path,
    run_id: &str,
    message: &Message,
    dry_run: bool,
    lock: L,
) -> AlertStatus {
    let eml = eml.to_path_buf();
    let bytes = message.formatted();
    let smtp = match &cfg.transport {
        EmailTransport::Smtp(smtp) if !dry_run => smtp,
        _ => {
            drop(lock);
            return match write_atomic(&eml, &bytes) {
                Ok(()) if dry_run => AlertStatus::DryRun(eml),
                Ok(()) => AlertStatus::Written(eml),
                Err(e) => {
                    tracing::error!(run_id, error = %format!("{e:#}"), "Alert not written.");
                    AlertStatus::Failed(format!("{e:#}"))
                }
            };
        }
    };
    let envelope = message.envelope();
    // Under the run lock no other run flushes the outbox, so the claim is taken before any
    // other process can see the entry.
    let queued = queue(output_dir, run_id, envelope, &bytes).and_then(|path| {
        let claim = Claim::take(&path)?.with_context(|| format!("{} is locked", path.display()))?;
        Ok((path, claim))
    });
    drop(lock);
    match (send_raw(smtp, envelope, &bytes).await, queued) {
        (Ok(()), queued) => {
            let to: Vec<String> = envelope.to().iter().map(|a| a.to_string()).collect();
            match queued {
                Ok((_, claim)) => claim.remove(),
                Err(q) => {
                    tracing::warn!(run_id, error = %format!("{q:#}"), "Alert sent, but it could not be queued first.")
                }
            }
            tracing::info!(run_id, recipients = to.len(), "Alert sent.");
            AlertStatus::Sent(to)
        }
        (Err(e), Ok((path, _claim))) => {
            let error = format!("{e:#}");
            tracing::error!(run_id, error = %error, queued = %path.display(), "Alert not sent; queued in the outbox.");
            AlertStatus::Queued { path, error }
        }
        (Err(e), Err(q)) => {
            let both = format!("{e:#}; queueing failed too: {q:#}");
            tracing::error!(run_id, error = %both, "Alert not sent and not queued.");
            AlertStatus::Failed(both)
        }
    }
}

/// The alert a gather keeps in its folder (SMTP) from before the commit that marks the night
/// gathered until the folder is in place: then [`release`] moves it into the outbox. A gather
/// killed in between leaves it there, and the next gather of the night (which finds it
/// gathered) releases it, so the alert is queued once whenever the gather is killed.
pub const PENDING_EML: &str = "email.pending.eml";

/// What [`keep`] did with an alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// No `[email]` section.
    Disabled,
    /// File transport: written into the folder; its path once the folder is in place.
    Written(PathBuf),
    /// SMTP: waits in the folder as [`PENDING_EML`] for [`release`].
    Pending,
}

/// Builds the alert of the run whose files are in `tmp` (its folder before the rename into
/// `run_dir`) and keeps it there: as `email.eml` for the file transport, else as
/// [`PENDING_EML`] with its envelope. Call before the commit: an alert that cannot be kept
/// fails the step (nothing is committed, a retry can send it).
pub fn keep(
    email: Option<&EmailConfig>,
    view: &super::ReportView,
    tmp: &Path,
    run_dir: &Path,
) -> Result<Kept> {
    let Some(email) = email else {
        return Ok(Kept::Disabled);
    };
    let message = super::email::build_in(email, view, tmp, run_dir)?;
    let bytes = message.formatted();
    match &email.transport {
        EmailTransport::File => {
            write_atomic(&tmp.join(super::EML_FILE), &bytes)?;
            Ok(Kept::Written(run_dir.join(super::EML_FILE)))
        }
        EmailTransport::Smtp(_) => {
            let eml = tmp.join(PENDING_EML);
            write_atomic(
                &eml.with_extension("envelope.json"),
                envelope_json(message.envelope()).as_bytes(),
            )?;
            write_atomic(&eml, &bytes)?;
            Ok(Kept::Pending)
        }
    }
}

/// An alert [`release`] moved into the outbox, claimed by this process.
#[derive(Debug)]
pub struct Released {
    path: PathBuf,
    claim: Claim,
}

/// Moves the alert [`keep`] left in `run_dir` (in place, its night committed) into the outbox
/// as `<run_id>.eml`, claimed first (the claim follows the file), so no other process sends
/// it before this one has tried. `None` when the folder holds none (it was released already).
pub fn release(output_dir: &Path, run_dir: &Path, run_id: &str) -> Result<Option<Released>> {
    let pending = run_dir.join(PENDING_EML);
    let pending_envelope = pending.with_extension("envelope.json");
    if !pending.exists() {
        // A release killed after its rename leaves only the envelope's copy behind.
        let _ = std::fs::remove_file(&pending_envelope);
        return Ok(None);
    }
    let Some(mut claim) = Claim::take(&pending)? else {
        return Ok(None);
    };
    let dir = dir(output_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let eml = dir.join(format!("{run_id}.eml"));
    let envelope = std::fs::read(&pending_envelope)
        .with_context(|| format!("reading {}", pending_envelope.display()))?;
    // The envelope first, the message last (its presence marks the entry complete), as
    // [`queue`] does; the message is moved, so it is in exactly one place.
    write_atomic(&eml.with_extension("envelope.json"), &envelope)?;
    std::fs::rename(&pending, &eml)
        .with_context(|| format!("moving {} to {}", pending.display(), eml.display()))?;
    claim.eml = eml.clone();
    let _ = std::fs::remove_file(&pending_envelope);
    tracing::info!(run_id, queued = %eml.display(), "Alert queued in the outbox.");
    Ok(Some(Released { path: eml, claim }))
}

impl Released {
    /// Where it waits in the outbox.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends it (after releasing `lock`: it is safe in the outbox) and removes it from the
    /// outbox once the server accepted it; else it stays queued for the next run.
    pub async fn send<L>(self, cfg: &EmailConfig, lock: L) -> AlertStatus {
        let Released { path, claim } = self;
        drop(lock);
        let EmailTransport::Smtp(smtp) = &cfg.transport else {
            return AlertStatus::Queued {
                path,
                error: "the email transport is `file` now".to_string(),
            };
        };
        let sent = async {
            let envelope = read_envelope(&path.with_extension("envelope.json"))?;
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            send_raw(smtp, &envelope, &bytes).await?;
            Ok::<_, anyhow::Error>(envelope)
        }
        .await;
        match sent {
            Ok(envelope) => {
                claim.remove();
                let to: Vec<String> = envelope.to().iter().map(|a| a.to_string()).collect();
                tracing::info!(queued = %path.display(), recipients = to.len(), "Alert sent.");
                AlertStatus::Sent(to)
            }
            Err(e) => {
                let error = format!("{e:#}");
                tracing::error!(error = %error, queued = %path.display(), "Alert not sent; queued in the outbox.");
                AlertStatus::Queued { path, error }
            }
        }
    }
}

/// Sends a short plain-text alert to `email.to` when a step could not do its work (a gather
/// that gathered nothing): written to `<output_dir>/<id>.eml` with the file transport, else
/// queued in the outbox as `<id>` (a newer one of the same id replaces one still unsent) and
/// sent.
pub async fn alert_failure(
    email: &EmailConfig,
    output_dir: &Path,
    id: &str,
    subject: &str,
    body: &str,
) -> AlertStatus {
    let subject = if email.subject_prefix.is_empty() {
        subject.to_string()
    } else {
        format!("{} {subject}", email.subject_prefix)
    };
    let body: String = body
        .lines()
        .map(|l| format!("{}\n", super::text_safe(l)))
        .collect();
    let mut builder = lettre::Message::builder()
        .from(email.from.clone())
        .subject(super::text_safe(&subject).into_owned())
        .date_now()
        .user_agent(format!("recon {}", env!("CARGO_PKG_VERSION")));
    for m in &email.to {
        builder = builder.to(m.clone());
    }
    // Base64, as the run's alert: every client decodes it, long lines stay valid.
    let part = lettre::message::SinglePart::builder()
        .header(lettre::message::header::ContentType::TEXT_PLAIN)
        .header(lettre::message::header::ContentTransferEncoding::Base64)
        .body(body);
    let message = match builder.singlepart(part) {
        Ok(m) => m,
        Err(e) => return AlertStatus::Failed(format!("building the alert: {e}")),
    };
    if let Err(e) = std::fs::create_dir_all(output_dir) {
        return AlertStatus::Failed(format!("creating {}: {e}", output_dir.display()));
    }
    let eml = output_dir.join(format!("{id}.eml"));
    deliver_to(email, output_dir, &eml, id, &message, false, ()).await
}

/// Call under the run lock, before the run: sends what earlier runs queued (not in a dry run)
/// and returns the alert record the run completes with [`after_run`].
pub async fn before_run(email: Option<&EmailConfig>, output_dir: &Path, dry_run: bool) -> Alert {
    let mut alert = Alert::disabled();
    if let Some(email) = email
        && !dry_run
    {
        (alert.outbox_sent, alert.outbox_left, alert.outbox_error) = flush(email, output_dir).await;
    }
    alert
}

/// Call after the commit and the rename of `run_dir`, with the run lock: builds the run's
/// message from `view` and delivers it (or queues it), recording what happened in `alert`.
/// The lock is released once the message is safe in the outbox, before it is sent.
pub async fn after_run<L>(
    email: Option<&EmailConfig>,
    alert: &mut Alert,
    view: &super::ReportView,
    output_dir: &Path,
    run_dir: &Path,
    dry_run: bool,
    lock: L,
) {
    let Some(email) = email else {
        return;
    };
    let run_id = view.summary.run_id.as_str();
    alert.status = match super::email::build(email, view, run_dir) {
        Ok(message) => deliver(email, output_dir, run_dir, run_id, &message, dry_run, lock).await,
        Err(e) => {
            tracing::error!(run_id, error = %format!("{e:#}"), "Alert not built.");
            AlertStatus::Failed(format!("{e:#}"))
        }
    };
    if matches!(alert.status, AlertStatus::Queued { .. }) {
        alert.outbox_left += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: a failed outbox write left its `.part` file and its envelope for good.
    #[test]
    fn a_failed_queueing_leaves_no_part_file_and_no_envelope() {
        let out = tempfile::tempdir().expect("tempdir");
        let outbox = dir(out.path());
        // The message's own name is taken by a folder that is not empty: writing the `.part`
        // works, renaming it into place fails.
        std::fs::create_dir_all(outbox.join("r1.eml/taken")).expect("folder");
        let envelope = Envelope::new(
            Some("recon@example.com".parse().expect("from")),
            vec!["ops@example.com".parse().expect("to")],
        )
        .expect("envelope");
        let err = queue(out.path(), "r1", &envelope, b"Subject: x\r\n\r\nbody\r\n");
        assert!(err.is_err(), "{err:?}");
        let mut left: Vec<String> = std::fs::read_dir(&outbox)
            .expect("outbox")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["r1.eml"], "only the folder that was in the way");
    }
}
