//! Which statement files the runs read (`recon_inputs`), and the first day that read each.

use super::{Tx, db_err};
use anyhow::Result;
use std::collections::HashMap;

impl Tx {
    /// Records that the run of `day` read these statement files (source, path, sha256); a
    /// file read before keeps the day that read it first.
    pub async fn record_inputs(&mut self, files: &[(&str, &str, &str)], day: &str) -> Result<()> {
        for chunk in files.chunks(self.batch()) {
            let mut q = self.sql("INSERT INTO recon_inputs (source, path, sha256, first_day) ");
            q.push_values(chunk, |mut b, (source, path, sha)| {
                b.push_bind(*source)
                    .push_bind(*path)
                    .push_bind(*sha)
                    .push_bind(day);
            });
            q.push(" ON CONFLICT (source, path, sha256) DO NOTHING");
            self.execute(q).await.map_err(db_err("recording inputs"))?;
        }
        Ok(())
    }

    /// The day that first read each of these files (source, path, sha256), for those read
    /// before.
    pub async fn inputs_first_read(
        &mut self,
        files: &[(&str, &str, &str)],
    ) -> Result<HashMap<(String, String, String), String>> {
        let mut out = HashMap::new();
        for chunk in files.chunks(self.batch()) {
            let mut q = self
                .sql("SELECT source, path, sha256, first_day FROM recon_inputs WHERE path IN (");
            let mut sep = q.separated(", ");
            for (_, path, _) in chunk {
                sep.push_bind(*path);
            }
            q.push(")");
            let rows = self
                .fetch_all(q, |r| {
                    Ok(((r.text(0)?, r.text(1)?, r.text(2)?), r.text(3)?))
                })
                .await
                .map_err(db_err("reading inputs"))?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// The first day any file of each source was read, for sources read before.
    pub async fn sources_first_read(&mut self) -> Result<HashMap<String, String>> {
        let q = self.sql("SELECT source, min(first_day) FROM recon_inputs GROUP BY source");
        let rows = self
            .fetch_all(q, |r| Ok((r.text(0)?, r.text(1)?)))
            .await
            .map_err(db_err("reading inputs"))?;
        Ok(rows.into_iter().collect())
    }
}
