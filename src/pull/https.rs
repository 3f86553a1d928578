//! `https://` sources: a GET per file (reqwest on rustls + ring, the system roots plus an
//! optional `ca_file`, whose reading S3 endpoints share), conditional on the etag /
//! Last-Modified of the version already pulled, with a bearer token or basic credentials from
//! environment variables.

use super::remote::{Remote, secret_env};
use super::{FetchError, Got, download::Download, manifest::Entry};
use crate::exit::{Failure, fail};
use anyhow::Result;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};

/// How requests authenticate.
enum Auth {
    None,
    Bearer(String),
    Basic(String, String),
}

/// A client for one source.
pub struct Client {
    http: reqwest::Client,
    auth: Auth,
}

impl Client {
    /// Builds the client: reads the credentials and the CA file now, so a missing variable or
    /// a bad certificate stops the pull before any request.
    pub fn new(source: &str, remote: &Remote) -> Result<Client> {
        let a = &remote.access;
        let auth = match (&a.token_env, &a.basic_env) {
            (Some(t), _) => Auth::Bearer(secret_env(source, "token_env", t)?),
            (None, Some((u, p))) => Auth::Basic(
                secret_env(source, "user_env", u)?,
                secret_env(source, "password_env", p)?,
            ),
            (None, None) => Auth::None,
        };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .https_only(true)
            .connect_timeout(remote.timeout)
            .timeout(remote.timeout)
            .redirect(reqwest::redirect::Policy::limited(3));
        if let Some(ca) = &a.ca_file {
            for c in ca_certificates(source, ca, reqwest::Certificate::from_pem_bundle)? {
                builder = builder.add_root_certificate(c);
            }
        }
        let http = builder.build().map_err(|e| {
            fail(
                Failure::Config,
                format!("source {source}: cannot set up HTTPS: {e}"),
            )
        })?;
        Ok(Client { http, auth })
    }

    /// GETs `url` into `to`; `known` makes it conditional.
    pub async fn get(
        &mut self,
        url: &str,
        known: Option<&Entry>,
        to: &mut Download,
    ) -> Result<Got, FetchError> {
        let mut req = self.http.get(url);
        req = match &self.auth {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        if let Some(k) = known {
            if let Some(e) = &k.etag {
                req = req.header(IF_NONE_MATCH, e);
            } else if let Some(m) = &k.mtime {
                req = req.header(IF_MODIFIED_SINCE, m);
            }
        }
        let resp = req.send().await.map_err(transient)?;
        let status = resp.status();
        match status {
            StatusCode::NOT_MODIFIED if known.is_some() => return Ok(Got::NotModified),
            StatusCode::NOT_FOUND | StatusCode::GONE => return Err(FetchError::NotFound),
            s if s.is_success() => {}
            s if s.is_server_error()
                || s == StatusCode::TOO_MANY_REQUESTS
                || s == StatusCode::REQUEST_TIMEOUT =>
            {
                return Err(FetchError::Transient(format!("HTTP {s}")));
            }
            s => return Err(FetchError::Fatal(format!("HTTP {s}"))),
        }
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let etag = header(ETAG);
        let mtime = header(LAST_MODIFIED);
        let declared = resp.content_length();
        let mut resp = resp;
        while let Some(chunk) = resp.chunk().await.map_err(transient)? {
            to.write(&chunk)?;
        }
        Ok(Got::Body {
            declared,
            etag,
            mtime,
        })
    }
}

/// The certificates of `remote.ca_file` (`ca`), read now by `parse` (reqwest's or
/// object_store's PEM bundle reader): a file that cannot be read or holds no PEM certificate
/// is a configuration error naming the key.
pub(super) fn ca_certificates<C, E>(
    source: &str,
    ca: &std::path::Path,
    parse: impl FnOnce(&[u8]) -> Result<Vec<C>, E>,
) -> Result<Vec<C>> {
    let pem = std::fs::read(ca).map_err(|e| {
        fail(
            Failure::Config,
            format!(
                "source {source}: key `remote.ca_file`: cannot read {}: {e}",
                ca.display()
            ),
        )
    })?;
    parse(&pem).ok().filter(|c| !c.is_empty()).ok_or_else(|| {
        fail(
            Failure::Config,
            format!(
                "source {source}: key `remote.ca_file`: {} holds no PEM certificate",
                ca.display()
            ),
        )
    })
}

/// A reqwest error as a retryable failure, without the URL (it may carry a query secret) and
/// with its causes (the TLS reason is in the chain).
fn transient(e: reqwest::Error) -> FetchError {
    let e = e.without_url();
    let mut msg = e.to_string();
    let mut cur = std::error::Error::source(&e);
    while let Some(c) = cur {
        msg.push_str(": ");
        msg.push_str(&c.to_string());
        cur = c.source();
    }
    let msg = crate::mask::secrets(&msg);
    // An untrusted certificate will not become trusted by asking again.
    if msg.contains("certificate") || msg.contains("UnknownIssuer") {
        FetchError::Fatal(msg)
    } else {
        FetchError::Transient(msg)
    }
}
