//! `s3://bucket/key` sources on AWS or any S3-compatible service (the `object_store` crate,
//! which polars already builds). The retries are recon's own (see [`super`]), so
//! object_store's are switched off.

use super::remote::{Location, Remote, secret_env};
use super::{FetchError, Got, download::Download, manifest::Entry};
use crate::exit::{Failure, fail};
use anyhow::Result;
use futures_util::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, GetOptions, ObjectStore, RetryConfig};

/// A client for one bucket.
pub struct Client {
    store: AmazonS3,
}

impl Client {
    /// Builds the client from the source's settings and credential variables.
    pub fn new(source: &str, remote: &Remote) -> Result<Client> {
        let Location::S3 { bucket, .. } = &remote.location else {
            anyhow::bail!("source {source}: not an s3:// location");
        };
        let a = &remote.access;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(&a.region)
            .with_retry(RetryConfig {
                max_retries: 0,
                ..RetryConfig::default()
            })
            .with_client_options({
                let mut options = ClientOptions::new()
                    .with_timeout(remote.timeout)
                    .with_connect_timeout(remote.timeout);
                if let Some(ca) = &a.ca_file {
                    for c in super::https::ca_certificates(
                        source,
                        ca,
                        object_store::Certificate::from_pem_bundle,
                    )? {
                        options = options.with_root_certificate(c);
                    }
                }
                options
            });
        if let Some(e) = &a.endpoint {
            builder = builder
                .with_endpoint(e)
                .with_allow_http(e.to_ascii_lowercase().starts_with("http://"));
        }
        if let Some((id, secret)) = &a.s3_keys_env {
            builder = builder
                .with_access_key_id(secret_env(source, "access_key_id_env", id)?)
                .with_secret_access_key(secret_env(source, "secret_access_key_env", secret)?);
        }
        let store = builder.build().map_err(|e| {
            fail(
                Failure::Config,
                format!("source {source}: cannot set up S3 access: {e}"),
            )
        })?;
        Ok(Client { store })
    }

    /// GETs `key` into `to`; `known`'s etag makes it conditional.
    pub async fn get(
        &mut self,
        key: &str,
        known: Option<&Entry>,
        to: &mut Download,
    ) -> Result<Got, FetchError> {
        let path = ObjectPath::from(key);
        let opts = GetOptions {
            if_none_match: known.and_then(|k| k.etag.clone()),
            ..GetOptions::default()
        };
        let result = match self.store.get_opts(&path, opts).await {
            Ok(r) => r,
            Err(object_store::Error::NotModified { .. }) if known.is_some() => {
                return Ok(Got::NotModified);
            }
            Err(e) => return Err(classify(e)),
        };
        let meta = result.meta.clone();
        let mut stream = result.into_stream();
        while let Some(chunk) = stream.try_next().await.map_err(classify)? {
            to.write(&chunk)?;
        }
        Ok(Got::Body {
            declared: Some(meta.size),
            etag: meta.e_tag,
            mtime: Some(
                meta.last_modified
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
        })
    }
}

fn classify(e: object_store::Error) -> FetchError {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => FetchError::NotFound,
        E::NotModified { .. } => FetchError::Transient("unexpected 304".into()),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            FetchError::Fatal(crate::mask::secrets(&e.to_string()))
        }
        e => {
            // With its causes: the TLS reason is in the chain.
            let mut msg = e.to_string();
            let mut cur = std::error::Error::source(&e);
            while let Some(c) = cur {
                let text = c.to_string();
                if !msg.contains(&text) {
                    msg.push_str(": ");
                    msg.push_str(&text);
                }
                cur = c.source();
            }
            let msg = crate::mask::secrets(&msg);
            // An untrusted certificate will not become trusted by asking again (as https).
            if msg.contains("certificate") || msg.contains("UnknownIssuer") {
                FetchError::Fatal(msg)
            } else {
                FetchError::Transient(msg)
            }
        }
    }
}
