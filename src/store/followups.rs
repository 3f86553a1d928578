//! The follow-ups (`recon_followups`): payments a run left unresolved stay in later runs'
//! scope until a run resolves them.

use super::{Tx, db_err};
use anyhow::Result;

impl Tx {
    /// Follow-ups: `open` stay in later runs' scope; `closed` are remembered as closed by `day`
    /// so re-runs of that range reproduce them.
    pub async fn followups(&mut self, open: &[String], closed: &[String], day: &str) -> Result<()> {
        let err = db_err("follow-ups");
        for chunk in open.chunks(self.batch()) {
            let mut q = self.sql("INSERT INTO recon_followups (payment_id, opened_on, closed_on) ");
            q.push_values(chunk, |mut b, id| {
                b.push_bind(id.as_str())
                    .push_bind(day)
                    .push_bind(None::<&str>);
            });
            q.push(
                " ON CONFLICT (payment_id) DO UPDATE SET closed_on = NULL \
                 WHERE recon_followups.closed_on IS NOT NULL AND recon_followups.closed_on <= ",
            );
            q.push_bind(day);
            self.execute(q).await.map_err(&err)?;
        }
        for chunk in closed.chunks(self.batch()) {
            let mut q = self.sql("INSERT INTO recon_followups (payment_id, opened_on, closed_on) ");
            q.push_values(chunk, |mut b, id| {
                b.push_bind(id.as_str()).push_bind(day).push_bind(day);
            });
            // The latest day that closed it: a payment carried (unresolved) past an earlier
            // close stays in the scope of re-runs of the day that resolved it.
            q.push(
                " ON CONFLICT (payment_id) DO UPDATE SET closed_on = CASE \
                 WHEN recon_followups.closed_on IS NULL \
                   OR recon_followups.closed_on < excluded.closed_on \
                 THEN excluded.closed_on ELSE recon_followups.closed_on END \
                 WHERE recon_followups.opened_on <= excluded.closed_on",
            );
            self.execute(q).await.map_err(&err)?;
        }
        Ok(())
    }
}
