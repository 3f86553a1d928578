//! What every driver of a night opens and closes (issue 43): the whole night and a range
//! (`run` in mod.rs), a shard (`run_shard` in shard.rs) and the gather (`gather` in gather.rs)
//! each open one [`Session`] and drive it.
//!
//! Opening is two steps, so that a driver's own checks keep their place between them:
//! [`Session::check`] compiles the rules and checks the secrets the driver uses before anything
//! is opened or read (a missing one is a configuration error); [`Checked::open`] then opens the
//! database with the job's `[database]` limits. What only some drivers do is a step of its own
//! ([`Session::require_postgres`], [`Session::lock_for_run`], [`Session::recover`],
//! [`Session::apply_inbox`], [`Session::queued_alerts`] …), and [`Session::close`] closes.

use super::{Job, NOTHING_DONE, Part, recovery, stop};
use crate::config::{Config, EmailTransport};
use crate::db::{Db, RunLock};
use crate::exit::{Failure, fail};
use crate::report::outbox::{self, Alert};
use crate::rules::RuleSet;
use crate::timeparse::Micros;
use anyhow::Result;
use std::time::Instant;

/// The secrets a driver uses, checked before anything is opened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Secrets {
    /// The status API's secret headers (the driver plans payments, and may ask the provider).
    pub status_api: bool,
    /// The SMTP credentials (the driver sends the night's email, and is not a dry run).
    pub smtp: bool,
}

/// A job whose rules compiled and whose secrets are there: nothing is opened yet.
pub(crate) struct Checked<'a> {
    /// The job file.
    pub cfg: &'a Config,
    /// The compiled rules.
    pub rules: RuleSet,
}

/// What every driver opens: the job, its rules, its database and the moment it looks from.
pub(crate) struct Session<'a> {
    /// The job file.
    pub cfg: &'a Config,
    /// The compiled rules.
    pub rules: RuleSet,
    /// The ledger and recon's tables, opened with the job's `[database]` limits.
    pub db: Db,
    /// The moment the night looks from: the run's (`--as-of`, or when it began); a shard's is
    /// its run group's, set once it joined the group.
    pub as_of: Micros,
    /// When the database began to open.
    opened: Instant,
}

impl Session<'_> {
    /// Compiles the rules and checks `secrets`, before any data is read.
    pub(crate) fn check(cfg: &Config, secrets: Secrets) -> Result<Checked<'_>> {
        let rules = RuleSet::for_job(cfg)?;
        if secrets.smtp
            && let Some(email) = &cfg.email
            && let EmailTransport::Smtp(smtp) = &email.transport
        {
            smtp.credentials()?;
        }
        if secrets.status_api
            && let Some(api) = &cfg.status_api
        {
            api.header_values()?;
        }
        Ok(Checked { cfg, rules })
    }
}

impl<'a> Checked<'a> {
    /// Opens the job's database (`Db::for_job`: its `[database]` limits apply).
    pub(crate) async fn open(self, as_of: Micros) -> Result<Session<'a>> {
        let opened = Instant::now();
        let db = Db::for_job(self.cfg).await?;
        Ok(self.session(db, as_of, opened))
    }

    /// [`Checked::open`], unless a stop signal comes first: then nothing was done.
    pub(crate) async fn open_unless_stopped(self, as_of: Micros) -> Result<Session<'a>> {
        let opened = Instant::now();
        let db = stop::unless_stopped(NOTHING_DONE, Db::for_job(self.cfg)).await?;
        Ok(self.session(db, as_of, opened))
    }

    fn session(self, db: Db, as_of: Micros, opened: Instant) -> Session<'a> {
        Session {
            cfg: self.cfg,
            rules: self.rules,
            db,
            as_of,
            opened,
        }
    }
}

impl Session<'_> {
    /// Refuses a job whose database is not PostgreSQL with the driver's `refusal`
    /// ([`Failure::Config`]).
    pub(crate) fn require_postgres(&self, refusal: &str) -> Result<()> {
        if self.db.is_postgres() {
            return Ok(());
        }
        Err(fail(Failure::Config, refusal.to_string()))
    }

    /// Takes the run lock, unless a stop signal comes first. A `recon decisions apply` that
    /// holds it is waited for (at most `apply_wait`); with `wait`, any holder is.
    pub(crate) async fn lock_for_run(&self, wait: bool) -> Result<RunLock> {
        let lock = stop::unless_stopped(
            NOTHING_DONE,
            crate::decisions::lock::for_run(&self.db, wait, self.cfg.decisions.apply_wait),
        )
        .await?;
        tracing::debug!(
            elapsed_ms = self.opened.elapsed().as_millis() as u64,
            "Database open, schema checked, run lock held."
        );
        Ok(lock)
    }

    /// Cleans up after the runs that were killed (see `recovery.rs`).
    pub(crate) async fn recover(&self) -> Result<()> {
        recovery::recover_interrupted(&self.db, self.cfg).await
    }

    /// Cleans up after shard `index` of `group`'s runs that were killed.
    pub(crate) async fn recover_shard(&self, group: &str, index: u32) -> Result<()> {
        recovery::recover_shard(&self.db, self.cfg, group, index).await
    }

    /// Applies the reviewers' decisions inbox; its failure is the caller's.
    pub(crate) async fn apply_inbox(&self) -> Result<()> {
        crate::decisions::apply_inbox(&self.db, &self.cfg.decisions).await?;
        Ok(())
    }

    /// Applies the reviewers' decisions inbox for run `run_id`: nothing there stops the run;
    /// what was skipped is recorded under the run id (its summary.json and email name it).
    pub(crate) async fn apply_inbox_for_run(&self, run_id: &str) {
        crate::decisions::inbox::apply_for_run(&self.db, &self.cfg.decisions, run_id).await;
    }

    /// Sends the alerts an earlier run could not send (none in a dry run): call it under the
    /// lock, so they are sent once. The returned alert says what became of them.
    pub(crate) async fn queued_alerts(&self, dry_run: bool) -> Alert {
        outbox::before_run(self.cfg.email.as_ref(), &self.cfg.output_dir, dry_run).await
    }

    /// What every day of the run shares, as `part`.
    pub(crate) fn job<'s>(&'s self, part: Part<'s>) -> Job<'s> {
        Job {
            cfg: self.cfg,
            rules: &self.rules,
            db: &self.db,
            as_of: self.as_of,
            part,
            rewind: None,
            ask_providers: true,
        }
    }

    /// Closes the database.
    pub(crate) async fn close(self) {
        let closing = Instant::now();
        self.db.close().await;
        tracing::debug!(
            elapsed_ms = closing.elapsed().as_millis() as u64,
            "Database closed."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn job(dir: &Path, extra: &str) -> Config {
        let text = format!(
            "timezone = \"UTC\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\
             [[source]]\nname = \"psp\"\nformat = \"csv\"\npath = \"psp.csv\"\n\
             timestamp_format = \"rfc3339\"\n[source.columns]\nprovider_txn_id = \"id\"\n\
             reference = \"reference\"\namount = \"amount\"\ncurrency = \"currency\"\n\
             booked_at = \"booked_at\"\n{extra}"
        );
        Config::parse(&text, &dir.join("job.toml")).expect("job")
    }

    #[tokio::test]
    async fn a_session_opens_with_the_jobs_database_limits_and_refuses_sqlite_where_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = job(
            dir.path(),
            "[database]\nstatement_timeout = \"7s\"\nbusy_timeout = \"3s\"\n",
        );
        let none = Secrets {
            status_api: false,
            smtp: false,
        };
        let session = Session::check(&cfg, none)
            .expect("checked")
            .open(42)
            .await
            .expect("open");
        let limits = session.db.limits();
        assert_eq!(limits.statement_timeout, std::time::Duration::from_secs(7));
        assert_eq!(limits.busy_timeout, std::time::Duration::from_secs(3));
        assert_eq!(session.job(Part::Whole).as_of, 42);
        let refusal = "recon gather needs PostgreSQL (a SQLite job runs the night in one process)";
        let e = session
            .require_postgres(refusal)
            .expect_err("SQLite refused");
        assert_eq!(e.to_string(), refusal);
        assert_eq!(
            crate::exit::code_for(&e),
            Failure::Config.code(),
            "a configuration error"
        );
        session.close().await;
    }
}
