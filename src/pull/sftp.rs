//! `sftp://user@host[:port]/path` sources (russh + russh-sftp, pure Rust on ring). The server's
//! host key must equal the pinned `remote.host_key`: an unknown or changed key is refused
//! before authentication, never accepted. Login is by key only.

use super::remote::{Location, Remote, secret_env};
use super::{FetchError, Got, download::Download, manifest::Entry};
use crate::exit::{Failure, fail};
use anyhow::Result;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh_sftp::client::SftpSession;
use russh_sftp::protocol::StatusCode;
use std::sync::Arc;
use tokio::io::AsyncReadExt as _;

/// Why the SSH layer failed.
#[derive(Debug)]
enum SshError {
    Ssh(russh::Error),
    HostKey(String),
}

impl From<russh::Error> for SshError {
    fn from(e: russh::Error) -> Self {
        SshError::Ssh(e)
    }
}

/// Checks the server's key against the pinned one.
struct Pinned {
    key: PublicKey,
    server: String,
}

impl russh::client::Handler for Pinned {
    type Error = SshError;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let pinned = self.key.fingerprint(HashAlg::Sha256);
        match offered {
            PublicKeyOrCertificate::PublicKey { key, .. }
                if key.key_data() == self.key.key_data() =>
            {
                Ok(true)
            }
            PublicKeyOrCertificate::PublicKey { key, .. } => Err(SshError::HostKey(format!(
                "host key of {} is {} ({}), but remote.host_key pins {pinned}: refusing to \
                 connect (hint: if the provider rotated its key, confirm the new fingerprint \
                 with them out of band, then update remote.host_key)",
                self.server,
                key.fingerprint(HashAlg::Sha256),
                key.algorithm()
            ))),
            PublicKeyOrCertificate::Certificate(_) => Err(SshError::HostKey(format!(
                "{} offered a host certificate; recon only accepts the pinned key {pinned}",
                self.server
            ))),
        }
    }
}

/// An SFTP connection for one source, opened on first use and again after a failure.
pub struct Client {
    host: String,
    port: u16,
    user: String,
    pinned: PublicKey,
    key: Arc<PrivateKey>,
    conn: Option<(russh::client::Handle<Pinned>, SftpSession)>,
    timeout: std::time::Duration,
}

impl Client {
    /// Reads the pinned host key and the private key now (nothing is sent yet).
    pub fn new(source: &str, remote: &Remote) -> Result<Client> {
        let Location::Sftp {
            host, port, user, ..
        } = &remote.location
        else {
            anyhow::bail!("source {source}: not an sftp:// location");
        };
        let a = &remote.access;
        let config_err = |k: &str, m: String| {
            fail(
                Failure::Config,
                format!("source {source}: key `remote.{k}`: {m}"),
            )
        };
        let line = a.host_key.clone().unwrap_or_default();
        let pinned = line
            .split_whitespace()
            .nth(1)
            .and_then(|b| russh::keys::parse_public_key_base64(b).ok())
            .ok_or_else(|| config_err("host_key", "not a public key line".into()))?;
        let text = match (&a.private_key_file, &a.private_key_env) {
            (Some(f), _) => std::fs::read_to_string(f).map_err(|e| {
                config_err(
                    "private_key_file",
                    format!("cannot read {}: {e}", f.display()),
                )
            })?,
            (None, Some(v)) => secret_env(source, "private_key_env", v)?,
            (None, None) => return Err(config_err("private_key_file", "is missing".into())),
        };
        let key = russh::keys::decode_secret_key(&text, None).map_err(|e| {
            // The error never quotes the key.
            config_err(
                if a.private_key_file.is_some() {
                    "private_key_file"
                } else {
                    "private_key_env"
                },
                format!("not an unencrypted OpenSSH private key: {e}"),
            )
        })?;
        Ok(Client {
            host: host.clone(),
            port: *port,
            user: user.clone(),
            pinned,
            key: Arc::new(key),
            conn: None,
            timeout: remote.timeout,
        })
    }

    async fn connect(&mut self) -> Result<(), FetchError> {
        let config = russh::client::Config {
            inactivity_timeout: Some(self.timeout),
            ..Default::default()
        };
        let server = format!("{}:{}", self.host, self.port);
        let handler = Pinned {
            key: self.pinned.clone(),
            server: server.clone(),
        };
        let mut session =
            russh::client::connect(Arc::new(config), (self.host.as_str(), self.port), handler)
                .await
                .map_err(|e| match e {
                    SshError::HostKey(m) => FetchError::Fatal(m),
                    SshError::Ssh(e) => FetchError::Transient(format!("ssh to {server}: {e}")),
                })?;
        let hash = session
            .best_supported_rsa_hash()
            .await
            .map_err(|e| FetchError::Transient(format!("ssh to {server}: {e}")))?
            .flatten();
        let auth = session
            .authenticate_publickey(
                self.user.clone(),
                PrivateKeyWithHashAlg::new(self.key.clone(), hash),
            )
            .await
            .map_err(|e| FetchError::Transient(format!("ssh to {server}: {e}")))?;
        if !auth.success() {
            return Err(FetchError::Fatal(format!(
                "{server} refused the key of user {} (remote.private_key_*)",
                self.user
            )));
        }
        let channel = session
            .channel_open_session()
            .await
            .map_err(|e| FetchError::Transient(format!("ssh to {server}: {e}")))?;
        channel
            .request_subsystem(true, "sftp")
            .await
            .map_err(|e| FetchError::Transient(format!("ssh to {server}: {e}")))?;
        let sftp = SftpSession::new(channel.into_stream())
            .await
            .map_err(|e| FetchError::Transient(format!("sftp on {server}: {e}")))?;
        sftp.set_timeout(self.timeout.as_secs().max(1));
        self.conn = Some((session, sftp));
        Ok(())
    }

    /// Drops the connection; the next request opens a new one.
    pub fn reset(&mut self) {
        self.conn = None;
    }

    /// Reads `path`, unless its size and mtime are `known`'s.
    pub async fn get(
        &mut self,
        path: &str,
        known: Option<&Entry>,
        to: &mut Download,
    ) -> Result<Got, FetchError> {
        if self.conn.is_none() {
            self.connect().await?;
        }
        let result = self.read(path, known, to).await;
        if matches!(result, Err(FetchError::Transient(_))) {
            // The next attempt reconnects.
            self.conn = None;
        }
        result
    }

    async fn read(
        &self,
        path: &str,
        known: Option<&Entry>,
        to: &mut Download,
    ) -> Result<Got, FetchError> {
        let Some((_, sftp)) = &self.conn else {
            return Err(FetchError::Transient("not connected".into()));
        };
        let meta = sftp.metadata(path).await.map_err(sftp_error)?;
        let mtime = meta.mtime.and_then(|t| {
            chrono::DateTime::from_timestamp(i64::from(t), 0)
                .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        });
        if let Some(k) = known
            && mtime.is_some()
            && k.mtime == mtime
            && meta.size == Some(k.size)
        {
            return Ok(Got::NotModified);
        }
        let mut file = sftp.open(path).await.map_err(sftp_error)?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = file
                .read(&mut buf)
                .await
                .map_err(|e| FetchError::Transient(format!("sftp: reading {path}: {e}")))?;
            if n == 0 {
                break;
            }
            to.write(&buf[..n])?;
        }
        Ok(Got::Body {
            declared: meta.size,
            etag: None,
            mtime,
        })
    }
}

fn sftp_error(e: russh_sftp::client::error::Error) -> FetchError {
    use russh_sftp::client::error::Error as E;
    match &e {
        E::Status(s) if s.status_code == StatusCode::NoSuchFile => FetchError::NotFound,
        E::Status(s) if s.status_code == StatusCode::PermissionDenied => {
            FetchError::Fatal(format!("sftp: {e}"))
        }
        _ => FetchError::Transient(format!("sftp: {e}")),
    }
}
