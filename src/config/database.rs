//! `[database]`: how long recon waits for the database, at most, at each kind of wait (issue 33:
//! a database that stops answering hung a run with the lock held, with no bound anywhere).

use crate::sources::keys::config_error;
use anyhow::Result;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// The `[database]` table as written (every key optional; durations like `30s`, `5m`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDatabase {
    /// How long opening a connection may take (default `30s`).
    connect_timeout: Option<String>,
    /// How long one statement, or one read of the ledger's rows for a run, may take (default
    /// `5m`).
    statement_timeout: Option<String>,
    /// How long a COMMIT may take (default `2m`).
    commit_timeout: Option<String>,
    /// PostgreSQL: after this long without traffic the server probes recon's connection (TCP
    /// keepalive), and drops it, releasing the run lock, when no probe is answered (default
    /// `60s`; `off` sends no such setting, for a pooler that refuses startup options).
    keepalive: Option<String>,
    /// SQLite: how long a statement waits for a lock another process holds on the file
    /// (default `30s`).
    busy_timeout: Option<String>,
}

/// Bounds on every wait for the database (`[database]`, see docs/configuration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseLimits {
    /// Opening a connection (also: waiting for a free connection of the pool).
    pub connect_timeout: Duration,
    /// One statement, or one read of the ledger's rows.
    pub statement_timeout: Duration,
    /// One COMMIT. When it runs out, whether the commit happened is unknown (a re-run finds
    /// either state and does the rest once).
    pub commit_timeout: Duration,
    /// PostgreSQL's TCP keepalive idle time for recon's connections (server side); `None`:
    /// the server's own setting (`keepalive = "off"`).
    pub keepalive: Option<Duration>,
    /// SQLite's busy timeout.
    pub busy_timeout: Duration,
}

impl Default for DatabaseLimits {
    fn default() -> Self {
        DatabaseLimits {
            connect_timeout: Duration::from_secs(30),
            statement_timeout: Duration::from_secs(300),
            commit_timeout: Duration::from_secs(120),
            keepalive: Some(Duration::from_secs(60)),
            busy_timeout: Duration::from_secs(30),
        }
    }
}

impl DatabaseLimits {
    /// PostgreSQL server settings for each connection: TCP keepalive probes start after
    /// [`Self::keepalive`] of silence, every quarter of it, and four unanswered probes drop
    /// the connection (the server then ends the session, and the run lock with it).
    /// None with `keepalive = "off"`.
    pub fn pg_keepalive_options(&self) -> Vec<(&'static str, String)> {
        let Some(keepalive) = self.keepalive else {
            return Vec::new();
        };
        let idle = keepalive.as_secs().max(1);
        vec![
            ("tcp_keepalives_idle", idle.to_string()),
            ("tcp_keepalives_interval", (idle / 4).max(1).to_string()),
            ("tcp_keepalives_count", "4".to_string()),
        ]
    }
}

/// A duration as written in the job file, for messages (`2s`, `5m`).
pub fn describe(d: Duration) -> String {
    crate::timeparse::format_duration(d.as_micros().min(i64::MAX as u128) as i64)
}

impl RawDatabase {
    /// Checks every key: a positive duration.
    pub(super) fn validate(&self, path: &Path) -> Result<DatabaseLimits> {
        let d = DatabaseLimits::default();
        let key = |name: &str, v: &Option<String>, default: Duration| -> Result<Duration> {
            let Some(text) = v else {
                return Ok(default);
            };
            match crate::timeparse::parse_duration(text) {
                Ok(us) if us > 0 => Ok(Duration::from_micros(us as u64)),
                Ok(_) => Err(config_error(
                    path,
                    format!("key `database.{name}`: must be positive"),
                )),
                Err(e) => Err(config_error(path, format!("key `database.{name}`: {e}"))),
            }
        };
        Ok(DatabaseLimits {
            connect_timeout: key("connect_timeout", &self.connect_timeout, d.connect_timeout)?,
            statement_timeout: key(
                "statement_timeout",
                &self.statement_timeout,
                d.statement_timeout,
            )?,
            commit_timeout: key("commit_timeout", &self.commit_timeout, d.commit_timeout)?,
            keepalive: match self.keepalive.as_deref().map(str::trim) {
                Some("off") => None,
                _ => Some(key("keepalive", &self.keepalive, Duration::from_secs(60))?),
            },
            busy_timeout: key("busy_timeout", &self.busy_timeout, d.busy_timeout)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(toml_text: &str) -> Result<DatabaseLimits> {
        let raw: RawDatabase = toml::from_str(toml_text).expect("toml");
        raw.validate(Path::new("recon.toml"))
    }

    #[test]
    fn defaults_durations_off_and_errors_naming_the_key() {
        assert_eq!(limits("").expect("defaults"), DatabaseLimits::default());
        let l = limits("statement_timeout = \"2s\"\nkeepalive = \"off\"").expect("set");
        assert_eq!(l.statement_timeout, Duration::from_secs(2));
        assert_eq!(l.keepalive, None);
        assert!(l.pg_keepalive_options().is_empty());
        assert_eq!(
            DatabaseLimits::default().pg_keepalive_options(),
            [
                ("tcp_keepalives_idle", "60".to_string()),
                ("tcp_keepalives_interval", "15".to_string()),
                ("tcp_keepalives_count", "4".to_string()),
            ]
        );
        for (bad, says) in [
            (
                "commit_timeout = \"0s\"",
                "`database.commit_timeout`: must be positive",
            ),
            ("connect_timeout = \"soon\"", "`database.connect_timeout`"),
        ] {
            let e = format!("{:#}", limits(bad).expect_err(bad));
            assert!(e.contains(says), "{e}");
        }
    }
}
