//! The `[[status_api]]` block: how to ask the provider about one payment and how to read its
//! answer. Validated before any data is read; secrets are read from environment variables
//! named here, only when the run asks (a missing variable is a configuration error then).

use crate::exit::{Failure, fail};
use anyhow::Result;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The block as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStatusApi {
    /// Name (tickets, the query log and results.csv's rule column say `status_api:<name>`).
    name: String,
    /// `GET` (default) or `POST` (without a body).
    #[serde(default = "default_method")]
    method: String,
    /// URL template: `{payment_id}`, `{provider_payment_id}`, `{reference}` are replaced by the
    /// payment's values, percent-encoded. `https://` (plain `http://` only to a loopback host).
    /// Without it recon asks no one and reads only `webhook_path`.
    url: Option<String>,
    /// The provider's callbacks as the payment service stored them: a JSON-lines file, or a
    /// folder of `*.jsonl` files (relative to the config). One event a line.
    webhook_path: Option<std::path::PathBuf>,
    /// The same callbacks read from the job's database: one SELECT whose first column is each
    /// event's JSON as text (PostgreSQL: `SELECT payload::text FROM …`).
    webhook_query: Option<String>,
    /// Plain headers (no secrets here: this file is not a secret store).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Header name → name of the environment variable that holds its whole value
    /// (`Authorization = "PSP_STATUS_AUTH"` with `PSP_STATUS_AUTH="Bearer …"`).
    #[serde(default)]
    secret_headers: BTreeMap<String, String>,
    /// Requests open at once, at most (default 16).
    #[serde(default = "default_in_flight")]
    max_in_flight: usize,
    /// Per-request timeout in milliseconds, body included (default 5000).
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
    /// Attempts per payment, first one included (default 4); retried on timeouts, connection
    /// errors, 429 and 5xx.
    #[serde(default = "default_attempts")]
    max_attempts: u32,
    /// First backoff in milliseconds, doubled per retry with full jitter (default 200).
    #[serde(default = "default_backoff")]
    backoff_ms: u64,
    /// Longest wait between two attempts, `Retry-After` included (default 30000).
    #[serde(default = "default_backoff_max")]
    backoff_max_ms: u64,
    /// Time budget of all queries of a run, in seconds (default 300): payments not answered by
    /// then stay AWAITING_EVIDENCE and the run says so.
    #[serde(default = "default_budget")]
    budget_seconds: u64,
    /// Whether the provider's `failed` is final (RESOLVED_FAILED on it). Default false.
    #[serde(default)]
    failed_is_final: bool,
    /// Whether the provider's `not_found` is final (RESOLVED_FAILED once the payment's
    /// evidence horizon has closed). Default false.
    #[serde(default)]
    not_found_is_final: bool,
    /// Whether the answer's amount is in major units (`"12.34"`, default) or minor (`1234`).
    #[serde(default = "default_amount_unit")]
    amount_unit: String,
    /// With `pointers.list`: what an empty list means. Only `"not_found"` (the provider knows
    /// no such payout); without it an empty list is not evidence (an AMBIGUOUS ticket).
    empty_list: Option<String>,
    /// JSON pointers into the answer.
    pointers: RawPointers,
    /// Provider status → meaning.
    statuses: RawStatuses,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPointers {
    /// The status API answers a list (`{"data": [ … ]}` at `/data`): the other pointers are
    /// inside its one element. Not used for webhook events (one event a line).
    list: Option<String>,
    status: String,
    payment_id: Option<String>,
    reference: Option<String>,
    provider_payment_id: Option<String>,
    amount: String,
    currency: String,
    /// A webhook event's time (RFC 3339): the latest event of a payment wins.
    event_time: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatuses {
    #[serde(default)]
    succeeded: Vec<String>,
    #[serde(default)]
    failed: Vec<String>,
    #[serde(default)]
    pending: Vec<String>,
    #[serde(default)]
    not_found: Vec<String>,
}

fn default_method() -> String {
    "GET".into()
}
fn default_in_flight() -> usize {
    16
}
fn default_timeout() -> u64 {
    5000
}
fn default_attempts() -> u32 {
    4
}
fn default_backoff() -> u64 {
    200
}
fn default_backoff_max() -> u64 {
    30_000
}
fn default_budget() -> u64 {
    300
}
fn default_amount_unit() -> String {
    "major".into()
}

/// What a provider status means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// The provider paid.
    Succeeded,
    /// The provider refused or failed it.
    Failed,
    /// Still being processed.
    Pending,
    /// The provider does not know the payment.
    NotFound,
}

impl Meaning {
    /// Name in the query log.
    pub fn as_str(self) -> &'static str {
        match self {
            Meaning::Succeeded => "succeeded",
            Meaning::Failed => "failed",
            Meaning::Pending => "pending",
            Meaning::NotFound => "not_found",
        }
    }
}

/// The JSON pointers of an answer.
#[derive(Debug, Clone)]
pub struct Pointers {
    /// Where the status API's answer holds a list of payouts (the other pointers are then
    /// inside its single element); `None`: the answer is the payout itself.
    pub list: Option<String>,
    /// Provider status.
    pub status: String,
    /// Echoed payment id.
    pub payment_id: Option<String>,
    /// Echoed reference.
    pub reference: Option<String>,
    /// Provider's id of the payment.
    pub provider_payment_id: Option<String>,
    /// Amount.
    pub amount: String,
    /// Currency.
    pub currency: String,
    /// A webhook event's time.
    pub event_time: Option<String>,
}

/// A validated `[[status_api]]` block.
#[derive(Debug, Clone)]
pub struct StatusApiConfig {
    /// Name.
    pub name: String,
    /// HTTP method.
    pub method: reqwest::Method,
    /// URL template (`None`: webhooks only).
    pub url: Option<String>,
    /// Webhook events file or folder.
    pub webhook_path: Option<std::path::PathBuf>,
    /// Webhook events query.
    pub webhook_query: Option<String>,
    /// Plain headers.
    pub headers: Vec<(String, String)>,
    /// Header → environment variable with its value.
    pub secret_headers: Vec<(String, String)>,
    /// Requests open at once, at most.
    pub max_in_flight: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Attempts per payment.
    pub max_attempts: u32,
    /// First backoff.
    pub backoff: Duration,
    /// Longest wait between attempts.
    pub backoff_max: Duration,
    /// Time budget of a run's queries.
    pub budget: Duration,
    /// Provider's `failed` is final.
    pub failed_is_final: bool,
    /// Provider's `not_found` is final.
    pub not_found_is_final: bool,
    /// Amounts in minor units (else major).
    pub amount_minor: bool,
    /// With `pointers.list`: what an empty list means (`None`: not evidence).
    pub empty_list: Option<Meaning>,
    /// JSON pointers.
    pub pointers: Pointers,
    /// Provider status → meaning.
    pub statuses: BTreeMap<String, Meaning>,
}

const PLACEHOLDERS: [&str; 3] = ["{payment_id}", "{provider_payment_id}", "{reference}"];

impl RawStatusApi {
    /// Validates block `i` of the file at `path`.
    pub fn validate(self, path: &Path, i: usize) -> Result<StatusApiConfig> {
        let err = |key: &str, msg: String| {
            fail(
                Failure::Config,
                format!("{}: status_api[{i}] key `{key}`: {msg}", path.display()),
            )
        };
        if self.name.trim().is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        let method = match self.method.to_ascii_uppercase().as_str() {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            other => return Err(err("method", format!("{other:?} (hint: GET or POST)"))),
        };
        let hooks = self.webhook_path.is_some() || self.webhook_query.is_some();
        if self.url.is_none() && !hooks {
            return Err(err(
                "url",
                "is missing (hint: a status URL, webhook_path / webhook_query, or both)".into(),
            ));
        }
        if hooks && self.pointers.event_time.is_none() {
            return Err(err(
                "pointers.event_time",
                "is needed with webhooks: the latest event of a payment wins".into(),
            ));
        }
        if self
            .webhook_query
            .as_deref()
            .is_some_and(|q| q.trim().is_empty() || q.contains(';'))
        {
            return Err(err(
                "webhook_query",
                "must be one SELECT without `;`".into(),
            ));
        }
        if let Some(url) = &self.url {
            // Every `{…}` must be a known placeholder; at least one must name the payment.
            let mut rest = url.as_str();
            while let Some(open) = rest.find('{') {
                let close = rest[open..]
                    .find('}')
                    .ok_or_else(|| err("url", "unclosed `{`".into()))?;
                let ph = &rest[open..open + close + 1];
                if !PLACEHOLDERS.contains(&ph) {
                    return Err(err(
                        "url",
                        format!(
                            "unknown placeholder {ph} (hint: {})",
                            PLACEHOLDERS.join(", ")
                        ),
                    ));
                }
                rest = &rest[open + close + 1..];
            }
            if !PLACEHOLDERS.iter().any(|p| url.contains(p)) {
                return Err(err(
                    "url",
                    "names no payment (hint: use {payment_id}, {provider_payment_id} or {reference})"
                        .into(),
                ));
            }
            let probe = PLACEHOLDERS
                .iter()
                .fold(url.clone(), |u, p| u.replace(p, "x"));
            let parsed = reqwest::Url::parse(&probe).map_err(|e| err("url", format!("{e}")))?;
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(err(
                    "url",
                    "must not hold credentials (hint: put them in secret_headers)".into(),
                ));
            }
            let loopback = matches!(
                parsed.host_str(),
                Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
            );
            match parsed.scheme() {
                "https" => {}
                "http" if loopback => {}
                s => {
                    return Err(err(
                        "url",
                        format!("scheme {s}: must be https (plain http only to a loopback host)"),
                    ));
                }
            }
        }
        if self.max_in_flight == 0 {
            return Err(err("max_in_flight", "must be at least 1".into()));
        }
        if self.max_attempts == 0 {
            return Err(err("max_attempts", "must be at least 1".into()));
        }
        if self.timeout_ms == 0 {
            return Err(err("timeout_ms", "must be positive".into()));
        }
        if self.budget_seconds == 0 {
            return Err(err("budget_seconds", "must be positive".into()));
        }
        let amount_minor = match self.amount_unit.as_str() {
            "major" => false,
            "minor" => true,
            other => {
                return Err(err(
                    "amount_unit",
                    format!("{other:?} (hint: major or minor)"),
                ));
            }
        };
        let p = self.pointers;
        let empty_list = match (self.empty_list.as_deref(), &p.list) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(err(
                    "empty_list",
                    "needs pointers.list (where the answer's list is)".into(),
                ));
            }
            (Some("not_found"), Some(_)) => Some(Meaning::NotFound),
            (Some(other), Some(_)) => {
                return Err(err(
                    "empty_list",
                    format!(
                        "{other:?} (hint: \"not_found\", or leave it out: an empty list is then not evidence)"
                    ),
                ));
            }
        };
        if p.list.is_some() && self.url.is_none() {
            return Err(err(
                "pointers.list",
                "applies to the status API's answers, and this block has no url".into(),
            ));
        }
        for (key, v) in [
            ("pointers.list", p.list.as_ref()),
            ("pointers.status", Some(&p.status)),
            ("pointers.payment_id", p.payment_id.as_ref()),
            ("pointers.reference", p.reference.as_ref()),
            (
                "pointers.provider_payment_id",
                p.provider_payment_id.as_ref(),
            ),
            ("pointers.amount", Some(&p.amount)),
            ("pointers.currency", Some(&p.currency)),
            ("pointers.event_time", p.event_time.as_ref()),
        ] {
            if let Some(v) = v
                && !v.is_empty()
                && !v.starts_with('/')
            {
                return Err(err(
                    key,
                    format!("{v:?} is not a JSON pointer (hint: /data/status)"),
                ));
            }
        }
        if p.payment_id.is_none() && p.reference.is_none() {
            return Err(err(
                "pointers",
                "needs payment_id or reference: an answer is evidence only if it names the payment"
                    .into(),
            ));
        }
        let mut statuses = BTreeMap::new();
        let s = self.statuses;
        for (meaning, list) in [
            (Meaning::Succeeded, s.succeeded),
            (Meaning::Failed, s.failed),
            (Meaning::Pending, s.pending),
            (Meaning::NotFound, s.not_found),
        ] {
            for v in list {
                if let Some(old) = statuses.insert(v.clone(), meaning) {
                    return Err(err(
                        &format!("statuses.{}", meaning.as_str()),
                        format!("{v:?} is also listed under {}", old.as_str()),
                    ));
                }
            }
        }
        if !statuses.values().any(|m| *m == Meaning::Succeeded) {
            return Err(err(
                "statuses.succeeded",
                "must list at least one status".into(),
            ));
        }
        for (h, v) in &self.secret_headers {
            if v.is_empty() {
                return Err(err(
                    &format!("secret_headers.{h}"),
                    "names no variable".into(),
                ));
            }
        }
        for h in self.headers.keys().chain(self.secret_headers.keys()) {
            reqwest::header::HeaderName::from_bytes(h.as_bytes())
                .map_err(|_| err("headers", format!("{h:?} is not a header name")))?;
        }
        Ok(StatusApiConfig {
            name: self.name,
            method,
            url: self.url,
            webhook_path: self
                .webhook_path
                .map(|w| path.parent().map(|base| base.join(&w)).unwrap_or(w)),
            webhook_query: self.webhook_query,
            headers: self.headers.into_iter().collect(),
            secret_headers: self.secret_headers.into_iter().collect(),
            max_in_flight: self.max_in_flight,
            timeout: Duration::from_millis(self.timeout_ms),
            max_attempts: self.max_attempts,
            backoff: Duration::from_millis(self.backoff_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
            budget: Duration::from_secs(self.budget_seconds),
            failed_is_final: self.failed_is_final,
            not_found_is_final: self.not_found_is_final,
            amount_minor,
            empty_list,
            pointers: Pointers {
                list: p.list,
                status: p.status,
                payment_id: p.payment_id,
                reference: p.reference,
                provider_payment_id: p.provider_payment_id,
                amount: p.amount,
                currency: p.currency,
                event_time: p.event_time,
            },
            statuses,
        })
    }
}

impl StatusApiConfig {
    /// The header values, secrets read from their variables now (a missing one is a
    /// configuration error naming the key, never its value).
    pub fn header_values(&self) -> Result<Vec<(String, String)>> {
        let mut out = self.headers.clone();
        for (h, var) in &self.secret_headers {
            match std::env::var(var) {
                Ok(v) if !v.is_empty() => out.push((h.clone(), v)),
                _ => {
                    return Err(fail(
                        Failure::Config,
                        format!(
                            "status_api {}: environment variable {var} (named by secret_headers.{h}) is not set",
                            self.name
                        ),
                    ));
                }
            }
        }
        Ok(out)
    }
}
