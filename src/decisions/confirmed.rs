//! `confirm N` as evidence later runs keep: a line a reviewer confirmed as a payment's is
//! loaded as naming that payment (its reference becomes the payment id), so the run's own
//! identifier pass links the two and classifies the pair by recon's rules (money still
//! compared, transitions guarded). Done where the lines are loaded, before any matching.
//!
//! A confirmation is a claim like any other (DESIGN.md rule 14), never an override: when the
//! provider's line now carries another reference than the one the reviewer saw (a corrected
//! re-delivery naming another payment), the two claims disagree. The line is then left as the
//! provider wrote it and reported as *contested*: the run makes it a candidate of both the
//! confirmed payment and whatever it names, and neither is resolved on it or on its absence
//! (CONTRADICTED, a critical case naming both).

use crate::db::Db;
use crate::model::Id;
use crate::sources::StatementLine;
use crate::store::cases::Confirmation;
use anyhow::Result;
use std::collections::HashMap;

/// What the confirmations did to a night's lines.
#[derive(Debug, Default)]
pub struct Overlaid {
    /// By line identity (source, line id): the confirmation, and whether the provider's
    /// reference contests it.
    by_line: HashMap<(String, String), (Confirmation, bool)>,
    /// Line index → the confirmation it is read as (its reference set to the payment), as of
    /// the last [`Overlaid::place`].
    pub applied: HashMap<u32, Confirmation>,
    /// Lines whose provider reference contradicts their confirmation, with it, by line index,
    /// as of the last [`Overlaid::place`].
    pub contested: Vec<(u32, Confirmation)>,
}

impl Overlaid {
    /// The confirmation behind line `li`, applied or contested.
    pub fn of_line(&self, li: u32) -> Option<&Confirmation> {
        self.applied.get(&li).or_else(|| {
            self.contested
                .iter()
                .find(|(l, _)| *l == li)
                .map(|(_, c)| c)
        })
    }

    /// Adds what an overlay of other lines did (a shard's lines of other partitions).
    pub fn extend(&mut self, other: Overlaid) {
        self.by_line.extend(other.by_line);
    }

    /// Finds the overlaid lines among `lines` (the night's, once more lines joined it).
    pub fn place(&mut self, lines: &[StatementLine]) {
        self.applied.clear();
        self.contested.clear();
        if self.by_line.is_empty() {
            return;
        }
        for (li, l) in lines.iter().enumerate() {
            let key = (l.source().to_string(), l.uid().into_owned());
            if let Some((c, contested)) = self.by_line.get(&key) {
                if *contested {
                    self.contested.push((li as u32, c.clone()));
                } else {
                    self.applied.insert(li as u32, c.clone());
                }
            }
        }
    }
}

/// Sets the reference of every confirmed line among `lines` to its payment's id, unless the
/// provider's reference contradicts the confirmation. `until`: only the confirmations made
/// up to then (a replay of a recorded night, `recon backtest`).
pub async fn overlay(
    db: &Db,
    lines: &mut [StatementLine],
    until: Option<crate::timeparse::Micros>,
) -> Result<Overlaid> {
    let until = until.map(crate::timeparse::to_db);
    let mut tx = db.begin().await?;
    let confirmed = tx.confirmed_lines(until.as_deref()).await?;
    tx.rollback().await?;
    Ok(apply(&confirmed, lines))
}

/// Whether reference `now` still says what the reviewer saw: no reference, the one the
/// reviewer saw, or the confirmed payment's id itself (in any spelling of a UUID, any case).
fn agrees(now: Option<&str>, c: &Confirmation) -> bool {
    let Some(now) = now.map(str::trim).filter(|r| !r.is_empty()) else {
        return true;
    };
    let same = |a: &str, b: &str| {
        a.eq_ignore_ascii_case(b)
            || crate::model::canonical_uuid(a)
                .is_some_and(|u| crate::model::canonical_uuid(b).as_deref() == Some(u.as_str()))
    };
    same(now, &c.payment_id)
        || c.reference
            .as_deref()
            .is_some_and(|seen| same(now, seen.trim()))
}

/// [`overlay`] with the confirmations given.
pub fn apply(confirmed: &[Confirmation], lines: &mut [StatementLine]) -> Overlaid {
    let mut out = Overlaid::default();
    if confirmed.is_empty() {
        return out;
    }
    // By source first: a night's lines are looked up without building a key each.
    let mut by_source: HashMap<&str, HashMap<&str, &Confirmation>> = HashMap::new();
    for c in confirmed {
        by_source
            .entry(c.source.as_str())
            .or_default()
            .insert(c.line_id.as_str(), c);
    }
    for (li, l) in lines.iter_mut().enumerate() {
        let Some(ids) = by_source.get(l.source()) else {
            continue;
        };
        let Some(c) = ids.get(l.uid().as_ref()).copied() else {
            continue;
        };
        let now = l.reference().map(|r| r.to_string());
        let key = (c.source.clone(), c.line_id.clone());
        if agrees(now.as_deref(), c) {
            if now.as_deref() != Some(c.payment_id.as_str()) {
                l.reference = Some(Id::new(&c.payment_id));
            }
            out.applied.insert(li as u32, c.clone());
            out.by_line.insert(key, (c.clone(), false));
        } else {
            out.contested.push((li as u32, c.clone()));
            out.by_line.insert(key, (c.clone(), true));
        }
    }
    out
}
