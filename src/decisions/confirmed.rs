//! `confirm N` as evidence later runs keep: a line a reviewer confirmed as a payment's is
//! loaded as naming that payment (its reference becomes the payment id), so the run's own
//! identifier pass links the two and classifies the pair by recon's rules (money still
//! compared, transitions guarded). Done where the lines are loaded, before any matching.

use crate::db::Db;
use crate::model::Id;
use crate::sources::StatementLine;
use anyhow::Result;
use std::collections::HashMap;

/// Sets the reference of every confirmed line among `lines` to its payment's id. Returns the
/// lines read as a confirmed payment's (indices, ascending).
pub async fn overlay(db: &Db, lines: &mut [StatementLine]) -> Result<Vec<u32>> {
    let mut tx = db.begin().await?;
    let confirmed = tx.confirmed_lines().await?;
    tx.rollback().await?;
    Ok(apply(&confirmed, lines))
}

/// [`overlay`] with the confirmed pairs given: (source, line id) → payment id.
pub fn apply(
    confirmed: &HashMap<(String, String), String>,
    lines: &mut [StatementLine],
) -> Vec<u32> {
    let mut read = Vec::new();
    if confirmed.is_empty() {
        return read;
    }
    // By source first: a night's lines are looked up without building a key each.
    let mut by_source: HashMap<&str, HashMap<&str, &str>> = HashMap::new();
    for ((source, line), payment) in confirmed {
        by_source
            .entry(source.as_str())
            .or_default()
            .insert(line.as_str(), payment.as_str());
    }
    for (li, l) in lines.iter_mut().enumerate() {
        let Some(ids) = by_source.get(l.source()) else {
            continue;
        };
        let Some(payment) = ids.get(l.uid().as_ref()).copied() else {
            continue;
        };
        if l.reference().map(|r| r.to_string()).as_deref() != Some(payment) {
            l.reference = Some(Id::new(payment));
        }
        read.push(li as u32);
    }
    read
}
