//! The files a bank sends back about our payouts (`[[payout_status]]`: pain.002 status
//! reports, NACHA returns and notifications of change) as evidence of a night (issue 46).
//!
//! Each transaction-level record is a claim about one payout (DESIGN.md rule 14), with a time
//! (the file's creation time) and an author (the bank's file and line). A record names a
//! payment only when the configured field (`payment_id_field`) equals the payment's id
//! exactly: no prefix, no case folding, nothing trimmed but the format's own padding. What a
//! claim does to a payment's row is [`verdict`]'s.
//!
//! How a night reads them ([`Night::read`]): every file of each block (a file, or a folder's
//! files in name order); a file whose bytes (sha256) were read already this night is a
//! re-delivery and counts once; a file that cannot be read is unreadable, like a statement
//! file (named, the exit code says so; nothing it holds is used); a file's records are known
//! from its creation time, so a night as of an earlier moment leaves them out (and says so),
//! as it does webhook events after its as-of. A group or payment-information status with no
//! transaction listed under it names no payment: a warning saying what it covers.
//!
//! Which night reports a record ([`Night::mark_reported`]): the night whose days hold its
//! creation time, or the first night that reads its file (a late delivery), as statement
//! lines are reported. A record for an unresolved payment is its evidence every night the
//! payment is classified; a record that names a finished payment (the ledger's SUCCEEDED, a
//! return the night after) or no payment at all makes a row only the night that reports it.

pub mod verdict;

use crate::config::payout_status::{LedgerKey, PayoutStatusConfig};
use crate::ledger::load::LoadedLedger;
use crate::model::PayoutFormat;
use crate::sources::payout::{Created, Level, PayoutStatus};
use crate::sources::{InputFile, Unreadable};
use crate::timeparse::Micros;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One transaction-level record of a payout status file that a night knows.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The `[[payout_status]]` block it was read by (index in the job's list).
    pub block: usize,
    /// The record.
    pub record: PayoutStatus,
    /// The file's path as read (an input of the run).
    pub path: String,
    /// When the bank wrote the file (UTC micros).
    pub known_at: Micros,
    /// Whether this night reports it ([`Night::mark_reported`]).
    pub reported: bool,
}

/// The payout status evidence of one night.
#[derive(Debug, Clone, Default)]
pub struct Night {
    /// The blocks of the job.
    blocks: Vec<PayoutStatusConfig>,
    /// The claims known at the night's as-of, in block, file and record order.
    claims: Vec<Claim>,
    /// The files read (summary.json's inputs; a late file is reported by the first night that
    /// reads it).
    pub inputs: Vec<InputFile>,
    /// Files that are there but could not be read.
    pub unreadable: Vec<Unreadable>,
    /// For summary.json.
    pub warnings: Vec<String>,
    /// Payment index → its claims (positions in `claims`), once bound.
    by_payment: HashMap<u32, Vec<u32>>,
    /// (block, the id as written, empty when the record has none) → the reported claims that
    /// name no payment of the ledger, once bound.
    unknown: BTreeMap<(usize, String), Vec<u32>>,
}

/// The files of `path`: itself, or a folder's files (names not starting with `.`) in name
/// order.
fn files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    crate::sources::file_or_folder(path, |p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
    })
}

/// The instant a file's records are known from: its creation time (in `tz` when the file
/// writes no offset), or the last instant of its creation day when it gives no time. A local
/// time the clock shows twice (the autumn fold) is the later instant, one it skips (the spring
/// gap) the first instant after the gap: the records are known only once they surely exist.
fn known_at(c: &Created, tz: chrono_tz::Tz) -> Option<Micros> {
    use chrono::TimeZone as _;
    let Some(time) = c.time else {
        let next = c.date.succ_opt()?;
        return Some(crate::timeparse::day_start(next, tz) - 1);
    };
    let naive = c.date.and_time(time);
    if let Some(off) = c.offset {
        return Some((naive - off).and_utc().timestamp_micros());
    }
    // A gap lasts at most an hour (or two, in a few zones' history).
    (0..=2).find_map(|h| {
        tz.from_local_datetime(&(naive + chrono::Duration::hours(h)))
            .latest()
            .map(|t| {
                let t = t.timestamp_micros();
                if h == 0 {
                    t
                } else {
                    t - t.rem_euclid(crate::timeparse::HOUR)
                }
            })
    })
}

/// The format's name as people know it.
pub fn format_name(f: PayoutFormat) -> &'static str {
    match f {
        PayoutFormat::Pain002 => "pain.002",
        PayoutFormat::Nacha => "NACHA",
    }
}

impl Night {
    /// Reads every block's files (see the module docs) with the claims known at `as_of`.
    pub fn read(blocks: &[PayoutStatusConfig], as_of: Micros) -> Night {
        let mut night = Night {
            blocks: blocks.to_vec(),
            ..Night::default()
        };
        let mut seen: HashMap<String, String> = HashMap::new();
        for (b, block) in blocks.iter().enumerate() {
            let list = match files(&block.path) {
                Ok(list) => list,
                Err(e) => {
                    night.warnings.push(format!(
                        "payout_status {}: path {}: {e}: no payout status records from it this run",
                        block.name,
                        block.path.display()
                    ));
                    continue;
                }
            };
            let mut later = 0usize;
            for file in list {
                later += night.read_file(b, &file, as_of, &mut seen);
            }
            if later > 0 {
                night.warnings.push(format!(
                    "payout_status {}: {later} record(s) of files created after the run's as-of were left out",
                    block.name
                ));
            }
        }
        night
    }

    /// Reads one file of block `b`; returns how many of its records were left out as written
    /// after `as_of`. `seen`: sha256 → the file first read with those bytes.
    fn read_file(
        &mut self,
        b: usize,
        file: &Path,
        as_of: Micros,
        seen: &mut HashMap<String, String>,
    ) -> usize {
        let block = &self.blocks[b];
        let limits = &block.limits;
        let path = file.display().to_string();
        let mut input = InputFile::new(&block.name, path.clone());
        let unreadable = |e: anyhow::Error| Unreadable {
            source: block.name.clone(),
            path: path.clone(),
            period: "?".into(),
            error: format!("{e:#}"),
        };
        let bytes = match limits.read(file) {
            Ok(b) => b,
            Err(e) => {
                self.unreadable.push(unreadable(e));
                return 0;
            }
        };
        input.sha256 = crate::sources::sha256_hex(&bytes);
        let parsed = crate::sources::parse_payout_bytes(
            block.format,
            &std::sync::Arc::from(path.as_str()),
            &bytes,
            limits,
        );
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.unreadable.push(unreadable(e));
                return 0;
            }
        };
        if let Some(first) = seen.get(&input.sha256) {
            self.warnings.push(format!(
                "payout_status {}: {path} holds the same bytes as {first} (a re-delivery): its records count once",
                block.name
            ));
            input.duplicates = parsed.records.len();
            self.inputs.push(input);
            return 0;
        }
        seen.insert(input.sha256.clone(), path.clone());
        input.lines = parsed.records.len();
        self.inputs.push(input);
        let Some(at) = parsed
            .created
            .as_ref()
            .and_then(|c| known_at(c, block.timezone))
        else {
            self.warnings.push(format!(
                "payout_status {}: {path} says no creation time (pain.002 GrpHdr/CreDtTm, NACHA file creation date): its records are not read",
                block.name
            ));
            return 0;
        };
        if at > as_of {
            return parsed.records.len();
        }
        self.warn_uncovered(b, &path, &parsed.records);
        for record in parsed.records {
            if record.level == Level::Transaction {
                self.claims.push(Claim {
                    block: b,
                    record,
                    path: path.clone(),
                    known_at: at,
                    reported: false,
                });
            }
        }
        0
    }

    /// A warning for each group or payment-information status of a file that has no
    /// transaction listed under it: it names no payment, so it resolves nothing.
    fn warn_uncovered(&mut self, b: usize, path: &str, records: &[PayoutStatus]) {
        let tx = || records.iter().filter(|r| r.level == Level::Transaction);
        for r in records {
            let listed = match r.level {
                Level::Transaction => continue,
                Level::Group => tx().next().is_some(),
                Level::PaymentInformation => tx().any(|t| {
                    t.original_payment_information_id == r.original_payment_information_id
                }),
            };
            if !listed {
                self.warnings.push(format!(
                    "payout_status {}: {path}:{} says {} ({}) at {} level for {}, but lists no transaction under it: it names no payment and resolves nothing",
                    self.blocks[b].name,
                    r.line,
                    r.code,
                    r.state.as_str(),
                    r.level.as_str(),
                    r.applies_to()
                ));
            }
        }
    }

    /// Marks the claims this night reports: known within `[t0, t1)`, or from a file `late`
    /// says no earlier night read (block name, path).
    pub fn mark_reported(&mut self, (t0, t1): (Micros, Micros), late: impl Fn(&str, &str) -> bool) {
        for c in &mut self.claims {
            let name = &self.blocks[c.block].name;
            c.reported = (c.known_at >= t0 && c.known_at < t1) || late(name, &c.path);
        }
    }

    /// The keys the reported claims name, to look up in the whole ledger (a return may name
    /// a payment paid weeks ago): payment ids, and provider ids.
    pub fn lookup_keys(&self, keys: &mut crate::ledger::lookup::Keys) {
        for c in self.claims.iter().filter(|c| c.reported) {
            if let Some(id) = self.id_of(c) {
                match self.blocks[c.block].ledger_key {
                    LedgerKey::PaymentId => keys.payment_ids.insert(id.to_string()),
                    LedgerKey::ProviderPaymentId => keys.provider_ids.insert(id.to_string()),
                };
            }
        }
    }

    /// The id `c` names, by its block's field.
    fn id_of<'c>(&self, c: &'c Claim) -> Option<&'c str> {
        self.blocks[c.block].id_field.value(&c.record)
    }

    /// Binds every claim to the payment of `ledger` its id names exactly (its payment id, or
    /// the one payment holding it as a provider id); the reported ones that name none are kept
    /// apart (a ticket each).
    pub fn bind(&mut self, ledger: &LoadedLedger) {
        self.by_payment.clear();
        self.unknown.clear();
        let payments = &ledger.payments;
        let by_provider = self.provider_ids(ledger);
        for (k, c) in self.claims.iter().enumerate() {
            let id = self.id_of(c);
            let found = id.and_then(|id| match self.blocks[c.block].ledger_key {
                LedgerKey::PaymentId => {
                    crate::ledger::lookup::position(payments, id).map(|i| i as u32)
                }
                LedgerKey::ProviderPaymentId => match by_provider.get(id).map(Vec::as_slice) {
                    Some([i]) => Some(*i),
                    _ => None,
                },
            });
            match found {
                Some(i) => self.by_payment.entry(i).or_default().push(k as u32),
                None if c.reported => self
                    .unknown
                    .entry((c.block, id.unwrap_or("").to_string()))
                    .or_default()
                    .push(k as u32),
                None => {}
            }
        }
    }

    /// Provider id → the payments holding it (row or attempt), for the blocks that compare
    /// with provider ids (empty otherwise).
    fn provider_ids<'l>(&self, ledger: &'l LoadedLedger) -> HashMap<&'l str, Vec<u32>> {
        let mut out: HashMap<&str, Vec<u32>> = HashMap::new();
        if !(self.blocks.iter()).any(|b| b.ledger_key == LedgerKey::ProviderPaymentId) {
            return out;
        }
        let rows = (ledger.payments.iter().enumerate())
            .filter_map(|(i, p)| p.provider_payment_id.as_deref().map(|id| (i as u32, id)));
        let attempts = (ledger.provider_ids.iter()).map(|(i, id)| (*i, id.as_str()));
        for (i, id) in rows.chain(attempts) {
            let held = out.entry(id).or_default();
            if !held.contains(&i) {
                held.push(i);
            }
        }
        out
    }

    /// The payments a reported claim names (bound first).
    pub fn reported_payments(&self) -> HashSet<u32> {
        self.by_payment
            .iter()
            .filter(|(_, ks)| ks.iter().any(|&k| self.claims[k as usize].reported))
            .map(|(&i, _)| i)
            .collect()
    }

    /// Whether the night has no claim at all.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

/// Puts `extra` rows into `rows` (payment rows in payment order, then line rows): each
/// payment row among the payment rows by its payment, the rows of neither payment nor line
/// at the end.
pub fn merge_rows(
    rows: &mut Vec<crate::outcome::ResultRow>,
    extra: Vec<crate::outcome::ResultRow>,
) {
    if extra.is_empty() {
        return;
    }
    let first_line_row = rows
        .iter()
        .position(|r| r.payment.is_none())
        .unwrap_or(rows.len());
    let tail = rows.split_off(first_line_row);
    let (with, without): (Vec<_>, Vec<_>) = extra.into_iter().partition(|r| r.payment.is_some());
    rows.extend(with);
    rows.sort_by_key(|r| r.payment);
    rows.extend(tail);
    rows.extend(without);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, NaiveTime};

    fn at(d: &str, t: &str) -> Created {
        Created {
            date: d.parse::<NaiveDate>().unwrap(),
            time: Some(t.parse::<NaiveTime>().unwrap()),
            offset: None,
        }
    }

    #[test]
    fn a_local_creation_time_in_a_fold_or_gap_is_known_once_it_surely_exists() {
        let tz = chrono_tz::Europe::Berlin;
        let utc = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_micros()
        };
        // 02:46 on 2026-10-25 is shown twice (00:46Z in summer time, 01:46Z in winter time).
        assert_eq!(
            known_at(&at("2026-10-25", "02:46:00"), tz),
            Some(utc("2026-10-25T01:46:00Z"))
        );
        // 02:30 on 2026-03-29 is never shown: the first instant after the gap, 03:00 CEST.
        assert_eq!(
            known_at(&at("2026-03-29", "02:30:00"), tz),
            Some(utc("2026-03-29T01:00:00Z"))
        );
        assert_eq!(
            known_at(&at("2026-11-10", "09:30:00"), tz),
            Some(utc("2026-11-10T08:30:00Z"))
        );
        // A day without a time: its last instant.
        let day = Created {
            time: None,
            ..at("2026-11-10", "00:00:00")
        };
        assert_eq!(known_at(&day, tz), Some(utc("2026-11-10T23:00:00Z") - 1));
    }
}
