//! Where a pulled source's files are published: the `sftp://`, `s3://` or `https://` location
//! of a `[[source]]` and its `[source.remote]` settings, validated before anything is fetched.
//!
//! This module is configuration only (a key every source takes, so it sits with the sources,
//! below `config` and `pull` in the layers); fetching is in `pull`'s modules.

use super::keys::{KeyAt, join_clean};
use crate::exit::{Failure, fail};
use anyhow::Result;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[source.remote]` as written in the job file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRemote {
    /// sftp: the server's public key, pinned (`ssh-ed25519 AAAA…`, as in a `.pub` file or the
    /// key part of a known_hosts line). Required: an unknown or changed host key is an error.
    host_key: Option<String>,
    /// sftp: file holding the OpenSSH private key (relative to the config; a mounted secret).
    private_key_file: Option<PathBuf>,
    /// sftp: environment variable holding the OpenSSH private key text (instead of the file).
    private_key_env: Option<String>,
    /// https: environment variable holding a bearer token (`Authorization: Bearer …`).
    token_env: Option<String>,
    /// https: environment variables holding a basic-auth user and password.
    user_env: Option<String>,
    /// https: see `user_env`.
    password_env: Option<String>,
    /// https and s3: extra trusted root certificate(s), PEM (relative to the config), for a
    /// server behind a company CA.
    ca_file: Option<PathBuf>,
    /// s3: endpoint of an S3-compatible service (`https://s3.example.com`; plain `http://` only
    /// to a loopback host, as for https sources and the status API). Default: AWS for the
    /// region.
    endpoint: Option<String>,
    /// s3: region (default `us-east-1`).
    region: Option<String>,
    /// s3: environment variables holding the access key id and secret access key.
    access_key_id_env: Option<String>,
    /// s3: see `access_key_id_env`.
    secret_access_key_env: Option<String>,
    /// Seconds one request (connect, listing, download) may take (default 60).
    timeout_seconds: Option<u64>,
    /// Seconds all retries of one source's pull may take together (default 300). A file that
    /// still fails after it leaves its days incomplete.
    retry_budget_seconds: Option<u64>,
    /// First pause between retries in milliseconds (default 500), doubled each time up to 30 s.
    retry_initial_ms: Option<u64>,
}

/// The protocol of a remote location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `sftp://user@host[:port]/path`.
    Sftp {
        /// Host name or address.
        host: String,
        /// Port (default 22).
        port: u16,
        /// Login name.
        user: String,
        /// Remote path template (absolute, `{date}` allowed).
        path: String,
    },
    /// `s3://bucket/key`.
    S3 {
        /// Bucket.
        bucket: String,
        /// Object key template (`{date}` allowed).
        key: String,
    },
    /// `https://host/path`: the URL template.
    Https(String),
}

/// Credentials and trust of a remote source (names of environment variables, never values).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Access {
    /// sftp: pinned host key line.
    pub host_key: Option<String>,
    /// sftp: private key file.
    pub private_key_file: Option<PathBuf>,
    /// sftp: private key variable.
    pub private_key_env: Option<String>,
    /// https: bearer token variable.
    pub token_env: Option<String>,
    /// https: basic-auth variables (user, password).
    pub basic_env: Option<(String, String)>,
    /// https and s3: extra root certificates.
    pub ca_file: Option<PathBuf>,
    /// s3: endpoint.
    pub endpoint: Option<String>,
    /// s3: region.
    pub region: String,
    /// s3: key variables (access key id, secret).
    pub s3_keys_env: Option<(String, String)>,
}

/// A validated remote location of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The location as written (no credentials can be in it), `{date}` kept.
    pub url: String,
    /// Protocol and parts.
    pub location: Location,
    /// Credentials and trust.
    pub access: Access,
    /// Path of the local copy under `<inbox>/<source>/` (`{date}` kept).
    pub local: String,
    /// `<inbox>/<source>/`: the local copies and the source's manifest (set by the job
    /// config, which knows the inbox).
    pub inbox_dir: PathBuf,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retry budget of one pull of the source.
    pub budget: Duration,
    /// First retry pause.
    pub initial_backoff: Duration,
}

/// Whether a source `path` names a remote location rather than a local file.
/// Any `scheme://` counts (so `ftp://` is an error that names the key, not a local folder).
pub fn is_remote(path: &str) -> bool {
    path.split_once("://").is_some_and(|(scheme, _)| {
        scheme.len() >= 2
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
    })
}

impl Remote {
    /// The remote path (or key or URL) for `day` (`{date}` replaced).
    pub fn remote_for(&self, date: &str) -> String {
        match &self.location {
            Location::Sftp { path, .. } => path.replace("{date}", date),
            Location::S3 { key, .. } => key.replace("{date}", date),
            Location::Https(url) => url.replace("{date}", date),
        }
    }

    /// The location for `day` as shown in messages and the manifest.
    pub fn display_for(&self, date: &str) -> String {
        crate::mask::url(&self.url.replace("{date}", date))
    }

    /// Validates `url` (the source's `path`) and its `[source.remote]` table. `at` names the
    /// keys in errors (`source[0].`, on their lines), `base` anchors relative files.
    pub fn parse(at: &KeyAt<'_>, url: &str, raw: Option<RawRemote>, base: &Path) -> Result<Remote> {
        let err = |k: &str, msg: String| at.bad(k, crate::mask::secrets(&msg));
        let raw = raw.unwrap_or_default();
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| err("path", format!("{url:?} is not a URL")))?;
        let scheme = scheme.to_ascii_lowercase();
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if path.len() <= 1 || path.ends_with('/') {
            return Err(err(
                "path",
                format!("{url:?} names no file (hint: sftp://user@host/dir/file-{{date}}.csv)"),
            ));
        }
        if path.split('/').any(|s| s == ".." || s == ".") {
            return Err(err(
                "path",
                format!("{url:?}: `.` and `..` segments are not allowed"),
            ));
        }
        let needs = |present: bool, k: &str, why: &str| -> Result<()> {
            if present {
                Ok(())
            } else {
                Err(err(&format!("remote.{k}"), format!("is missing: {why}")))
            }
        };
        let not_for = |present: bool, k: &str, what: &str| -> Result<()> {
            if present {
                Err(err(
                    &format!("remote.{k}"),
                    format!("does not apply to {what} sources"),
                ))
            } else {
                Ok(())
            }
        };
        let sftp_keys = raw.host_key.is_some()
            || raw.private_key_file.is_some()
            || raw.private_key_env.is_some();
        let https_auth =
            raw.token_env.is_some() || raw.user_env.is_some() || raw.password_env.is_some();
        let https_keys = https_auth || raw.ca_file.is_some();
        let s3_keys = raw.endpoint.is_some()
            || raw.region.is_some()
            || raw.access_key_id_env.is_some()
            || raw.secret_access_key_env.is_some();
        let mut access = Access {
            region: raw.region.clone().unwrap_or_else(|| "us-east-1".into()),
            ..Access::default()
        };
        let location = match scheme.as_str() {
            "sftp" => {
                not_for(
                    https_keys,
                    "token_env/user_env/password_env/ca_file",
                    "sftp",
                )?;
                not_for(s3_keys, "endpoint/region/access_key_id_env", "sftp")?;
                let Some((user, hostport)) = authority.rsplit_once('@') else {
                    return Err(err(
                        "path",
                        format!("{url:?} names no user (hint: sftp://user@host/…)"),
                    ));
                };
                if user.contains(':') {
                    return Err(err(
                        "path",
                        "an sftp URL must not carry a password: recon logs in with a key only \
                         (remote.private_key_file or remote.private_key_env)"
                            .into(),
                    ));
                }
                let (host, port) = match hostport.rsplit_once(':') {
                    Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                        h.trim_matches(['[', ']']).to_string(),
                        p.parse::<u16>()
                            .map_err(|_| err("path", format!("{url:?}: bad port {p:?}")))?,
                    ),
                    _ => (hostport.trim_matches(['[', ']']).to_string(), 22),
                };
                if host.is_empty() || user.is_empty() {
                    return Err(err("path", format!("{url:?}: empty user or host")));
                }
                let Some(host_key) = raw.host_key.clone() else {
                    return Err(err(
                        "remote.host_key",
                        "is missing: an sftp source pins the server's public key (hint: \
                         `ssh-keyscan -t ed25519 HOST`, checked with the provider out of band)"
                            .into(),
                    ));
                };
                let mut parts = host_key.split_whitespace();
                let valid = match (parts.next(), parts.next()) {
                    (Some(_alg), Some(b64)) => russh::keys::parse_public_key_base64(b64).is_ok(),
                    _ => false,
                };
                if !valid {
                    return Err(err(
                        "remote.host_key",
                        "is not a public key line like `ssh-ed25519 AAAA…`".into(),
                    ));
                }
                access.host_key = Some(host_key);
                match (&raw.private_key_file, &raw.private_key_env) {
                    (Some(_), Some(_)) => {
                        return Err(err(
                            "remote.private_key_file",
                            "give private_key_file or private_key_env, not both".into(),
                        ));
                    }
                    (None, None) => needs(
                        false,
                        "private_key_file",
                        "sftp logs in with a key only (or remote.private_key_env)",
                    )?,
                    _ => {}
                }
                access.private_key_file =
                    raw.private_key_file.as_ref().map(|p| join_clean(base, p));
                access.private_key_env = raw.private_key_env.clone();
                Location::Sftp {
                    host,
                    port,
                    user: user.to_string(),
                    path: path.to_string(),
                }
            }
            "s3" => {
                not_for(sftp_keys, "host_key/private_key_file/private_key_env", "s3")?;
                not_for(https_auth, "token_env/user_env/password_env", "s3")?;
                if authority.is_empty() || authority.contains(['@', ':']) {
                    return Err(err(
                        "path",
                        format!(
                            "{url:?}: expected s3://bucket/key (credentials go in remote.access_key_id_env / remote.secret_access_key_env)"
                        ),
                    ));
                }
                match (&raw.access_key_id_env, &raw.secret_access_key_env) {
                    (Some(a), Some(s)) => access.s3_keys_env = Some((a.clone(), s.clone())),
                    (None, None) => {}
                    _ => {
                        return Err(err(
                            "remote.access_key_id_env",
                            "give access_key_id_env and secret_access_key_env together".into(),
                        ));
                    }
                }
                if let Some(e) = &raw.endpoint {
                    let parsed = reqwest::Url::parse(e).ok().filter(|_| is_remote(e));
                    let Some(parsed) = parsed.filter(|u| {
                        u.username().is_empty() && u.password().is_none() && u.has_host()
                    }) else {
                        return Err(err(
                            "remote.endpoint",
                            format!("{e:?} is not an http(s) URL without credentials"),
                        ));
                    };
                    let loopback = matches!(
                        parsed.host_str(),
                        Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
                    );
                    match parsed.scheme() {
                        "https" => {}
                        "http" if loopback && raw.ca_file.is_some() => {
                            return Err(err(
                                "remote.ca_file",
                                format!("does not apply to the plain http endpoint {e:?}"),
                            ));
                        }
                        "http" if loopback => {}
                        s => {
                            return Err(err(
                                "remote.endpoint",
                                format!(
                                    "{e:?}: scheme {s}: must be https (plain http only to a \
                                     loopback host)"
                                ),
                            ));
                        }
                    }
                    access.endpoint = Some(e.trim_end_matches('/').to_string());
                }
                access.ca_file = raw.ca_file.as_ref().map(|p| join_clean(base, p));
                Location::S3 {
                    bucket: authority.to_string(),
                    key: path.trim_start_matches('/').to_string(),
                }
            }
            "https" => {
                not_for(
                    sftp_keys,
                    "host_key/private_key_file/private_key_env",
                    "https",
                )?;
                not_for(s3_keys, "endpoint/region/access_key_id_env", "https")?;
                if authority.contains('@') {
                    return Err(err(
                        "path",
                        "a URL must not carry credentials: name environment variables in \
                         remote.token_env or remote.user_env/password_env"
                            .into(),
                    ));
                }
                if reqwest::Url::parse(&url.replace("{date}", "2026-01-01")).is_err() {
                    return Err(err("path", format!("{url:?} is not a valid URL")));
                }
                match (&raw.user_env, &raw.password_env) {
                    (Some(u), Some(p)) => access.basic_env = Some((u.clone(), p.clone())),
                    (None, None) => {}
                    _ => {
                        return Err(err(
                            "remote.user_env",
                            "give user_env and password_env together".into(),
                        ));
                    }
                }
                if access.basic_env.is_some() && raw.token_env.is_some() {
                    return Err(err(
                        "remote.token_env",
                        "give token_env or user_env/password_env, not both".into(),
                    ));
                }
                access.token_env = raw.token_env.clone();
                access.ca_file = raw.ca_file.as_ref().map(|p| join_clean(base, p));
                Location::Https(url.to_string())
            }
            "http" => {
                return Err(err(
                    "path",
                    format!("{url:?}: plain http is not allowed for statements (use https://)"),
                ));
            }
            other => {
                return Err(err(
                    "path",
                    format!("unsupported scheme {other:?} (sftp://, s3:// or https://)"),
                ));
            }
        };
        // The local copy: from the first path segment that holds `{date}` (or the file name),
        // so daily files in daily folders do not collide.
        let segments: Vec<&str> = path
            .split(['?', '#'])
            .next()
            .unwrap_or(path)
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let first = segments
            .iter()
            .position(|s| s.contains("{date}"))
            .unwrap_or(segments.len().saturating_sub(1));
        let local = segments[first..].join("/");
        if local.is_empty() {
            return Err(err("path", format!("{url:?} names no file")));
        }
        let secs = |v: Option<u64>, default: u64, k: &str| -> Result<Duration> {
            match v.unwrap_or(default) {
                0 => Err(err(&format!("remote.{k}"), "must be positive".into())),
                n => Ok(Duration::from_secs(n)),
            }
        };
        Ok(Remote {
            url: url.to_string(),
            location,
            access,
            local,
            inbox_dir: PathBuf::new(),
            timeout: secs(raw.timeout_seconds, 60, "timeout_seconds")?,
            budget: secs(raw.retry_budget_seconds, 300, "retry_budget_seconds")?,
            initial_backoff: Duration::from_millis(raw.retry_initial_ms.unwrap_or(500).max(1)),
        })
    }
}

/// Reads the environment variable `name` (the value of a `*_env` key `key` of `source`).
pub fn secret_env(source: &str, key: &str, name: &str) -> Result<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(fail(
            Failure::Config,
            format!(
                "source {source}: environment variable {name} (named by remote.{key}) is not set"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str, table: &str) -> Result<Remote> {
        let raw: RawRemote = toml::from_str(table).expect("table");
        Remote::parse(
            &KeyAt::new(Path::new("job.toml"), "source[0].".into(), ""),
            url,
            Some(raw),
            Path::new("/etc/recon"),
        )
    }

    const KEY: &str = "host_key = \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\"\nprivate_key_file = \"k\"\n";

    #[test]
    fn the_local_copy_starts_at_the_first_dated_segment() {
        let r = parse("sftp://recon@h:2222/out/{date}/stmt.csv", KEY).expect("valid");
        assert_eq!(r.local, "{date}/stmt.csv");
        assert_eq!(
            r.location,
            Location::Sftp {
                host: "h".into(),
                port: 2222,
                user: "recon".into(),
                path: "/out/{date}/stmt.csv".into()
            }
        );
        assert_eq!(
            r.access.private_key_file,
            Some(PathBuf::from("/etc/recon/k"))
        );
        let r = parse("s3://b/a/b/psp-{date}.csv", "").expect("valid");
        assert_eq!(r.local, "psp-{date}.csv");
        assert_eq!(r.remote_for("2026-11-10"), "a/b/psp-2026-11-10.csv");
        let r = parse("https://h/x/all.csv?format=csv", "").expect("valid");
        assert_eq!(r.local, "all.csv");
    }

    #[test]
    fn secrets_never_sit_in_the_url_and_keys_belong_to_their_protocol() {
        let e = parse("sftp://u:pw@h/x.csv", KEY).expect_err("password");
        assert!(format!("{e}").contains("key only") && !format!("{e}").contains("pw@"));
        let e = parse("s3://b/x.csv", "token_env = \"T\"").expect_err("https key on s3");
        assert!(format!("{e}").contains("source[0].remote.token_env"), "{e}");
        let e = parse("https://h/x.csv", "user_env = \"U\"").expect_err("half basic");
        assert!(format!("{e}").contains("together"), "{e}");
        assert!(parse("https://h/", "").is_err());
        // S3 endpoints: https, plain http only to loopback, never with credentials.
        for (endpoint, want) in [
            (
                "http://s3.example.com",
                "plain http only to a loopback host",
            ),
            ("http://10.0.0.7:9000", "plain http only to a loopback host"),
            ("ftp://s3.example.com", "scheme ftp"),
            ("https://k:s@s3.example.com", "without credentials"),
        ] {
            let e = parse("s3://b/x.csv", &format!("endpoint = {endpoint:?}")).expect_err(endpoint);
            let e = format!("{e:#}");
            assert!(
                e.contains("source[0].remote.endpoint") && e.contains(want),
                "{endpoint}: {e}"
            );
        }
        for ok in [
            "https://s3.example.com",
            "http://127.0.0.1:9000",
            "http://localhost:9000",
        ] {
            parse("s3://b/x.csv", &format!("endpoint = {ok:?}")).expect(ok);
        }
        let r = parse(
            "s3://b/x.csv",
            "endpoint = \"https://s3.example.com\"\nca_file = \"ca.pem\"",
        )
        .expect("ca_file for s3");
        assert_eq!(r.access.ca_file, Some(PathBuf::from("/etc/recon/ca.pem")));
        let e = parse(
            "s3://b/x.csv",
            "endpoint = \"http://127.0.0.1:9000\"\nca_file = \"ca.pem\"",
        )
        .expect_err("ca_file over plain http");
        assert!(format!("{e:#}").contains("remote.ca_file"), "{e:#}");
        assert!(parse("https://h/../x.csv", "").is_err());
        assert!(is_remote("SFTP://h/x") && is_remote("ftp://h/x") && !is_remote("C:x.csv"));
    }
}
