//! The hand-over: everything a shard writes for the gather, in one format module.
//!
//! - `shard.json` ([`ShardRecord`]): the shard's summary, its outcome totals and its report
//!   rows (the [`ReportView`] items), in plain values, so that the gather builds the night's
//!   one report from exactly what each shard saw; the batches of the settlement rules whose
//!   bank source every partition shares ([`HandOverRecord`], computed by [`crate::run::shared`]);
//!   the keys of its rows whose cases span shards ([`row_key`], [`take_crossing_cases`]) and
//!   the payments of those cases ([`CasePaymentRecord`]).
//! - Its CSV files ([`HANDED`]; the gather merges [`MERGED`] by their header names).
//! - The seal ([`seal`]): the sha256 and size of every file of the shard's folder, recorded in
//!   the transaction that commits the shard's effects. The gather recomputes them as it reads
//!   ([`Hashing`]) and gathers nothing that differs (issue 41 point 6).
//!
//! What the gather computes from it (the shared settlement, the merge, the night's report) is
//! not here.

use crate::config::Role;
use crate::model::{Action, Id, LineKind, Outcome, Status};
use crate::outputs::summary::{OutcomeTotal, Summary};
use crate::partition::Shard;
use crate::report::{Item, ItemLine, Money, ReportView};
use crate::sources::{EntryRef, Origin, OriginalAmount, StatementLine};
use crate::store::groups::HandoverFile;
use crate::timeparse::Micros;
use anyhow::{Context as _, Result, anyhow};
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The file name in a shard's run folder.
pub const FILE: &str = "shard.json";

/// The files of a shard's folder that the gather reads: each must be in the seal.
pub const HANDED: [&str; 6] = [
    FILE,
    "results.csv",
    crate::report::DIFF_CSV_FILE,
    "rejected.csv",
    "settlement.csv",
    "summary.json",
];

/// The CSV files of a shard's folder that the gather merges into the night's (k-way, as it
/// reads them, hashing each as it goes).
pub const MERGED: [&str; 4] = [
    "results.csv",
    crate::report::DIFF_CSV_FILE,
    "rejected.csv",
    "settlement.csv",
];

/// The seal of a shard's hand-over: every regular file of `dir` (its output folder, complete,
/// before the commit), by name, with its sha256 and size.
pub fn seal(dir: &Path) -> Result<Vec<HandoverFile>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e.with_context(|| format!("listing {}", dir.display()))?;
        if e.file_type()
            .with_context(|| format!("{}", e.path().display()))?
            .is_file()
        {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|file| {
            let path = dir.join(&file);
            let mut reader = Hashing::new(
                std::fs::File::open(&path)
                    .with_context(|| format!("opening {}", path.display()))?,
            );
            std::io::copy(&mut reader, &mut std::io::sink())
                .with_context(|| format!("reading {}", path.display()))?;
            let (sha256, bytes) = reader.finish();
            Ok(HandoverFile {
                file,
                sha256,
                bytes,
            })
        })
        .collect()
}

/// Seals the hand-over in `dir` (shard run `run_id`'s folder, complete) in `tx`, the
/// transaction that commits the shard's effects.
pub async fn seal_in(tx: &mut crate::store::Tx, run_id: &str, dir: &Path) -> Result<()> {
    let started = std::time::Instant::now();
    let files = seal(dir).map_err(|e| {
        crate::exit::fail(
            crate::exit::Failure::Output,
            format!("sealing the hand-over in {}: {e:#}", dir.display()),
        )
    })?;
    tracing::info!(
        run_id,
        files = files.len(),
        bytes = files.iter().map(|f| f.bytes).sum::<u64>(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Hand-over sealed."
    );
    tx.record_handover(run_id, &files).await
}

/// A reader that hashes (sha256) and counts every byte read through it.
pub struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
}

impl<R> Hashing<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            bytes: 0,
        }
    }

    /// The sha256 (lowercase hex) and count of the bytes read so far.
    pub fn finish(self) -> (String, u64) {
        (hex::encode(self.hasher.finalize()), self.bytes)
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// A shard's hand-over to the gather.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardRecord {
    /// The night's run group.
    pub group: String,
    /// Which shard.
    pub shard: Shard,
    /// The shard's run.
    pub run_id: String,
    /// The partitions it reconciled.
    pub partitions: Vec<String>,
    /// Its summary.json.
    pub summary: Summary,
    /// Rows and sums per outcome (every outcome).
    pub totals: Vec<TotalRecord>,
    /// Transitions its rows asked for.
    pub transitions_planned: usize,
    /// Its rows that raise a ticket.
    pub ticket_rows: usize,
    /// How many rows each family listed (by family name): the shard hands over every row
    /// that needs a human but only the first of the others ([`crate::report::ROWS_PER_FAMILY`]).
    pub family_rows: BTreeMap<String, usize>,
    /// Its report rows: written with the record, but not read with it ([`ShardRecord::read`]):
    /// the gather reads them one shard at a time ([`ShardRecord::read_items_each`]), so it never
    /// holds every shard's rows twice (as read and as listed).
    #[serde(skip_deserializing)]
    pub items: Vec<ItemRecord>,
    /// Its batches of the settlement rules whose bank source every partition shares.
    #[serde(default)]
    pub handed: HandOverRecord,
    /// The keys ([`item_key`]) of its rows that share a line with another shard's rows (a line
    /// named across partitions): the cases they are in span shards, and the gather stores them
    /// (the shard stored its other cases).
    #[serde(default)]
    pub crossing: Vec<String>,
    /// The payments of the cases it left to the gather, as it loaded them (what a status
    /// decision on the case is guarded on).
    #[serde(default)]
    pub case_payments: Vec<CasePaymentRecord>,
}

/// A payment of a case a shard left to the gather: its status and current attempt as the
/// shard loaded them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CasePaymentRecord {
    /// The payment.
    pub payment_id: String,
    /// Its status in the ledger.
    pub status: String,
    /// Its current attempt.
    pub attempt_id: Option<String>,
}

/// A shard's batches of the settlement rules whose bank source every partition shares
/// ([`crate::run::shared::HandOver`]) in plain values: what the gather pairs with the shared bank
/// source's credits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandOverRecord {
    /// The batches, sorted by rule, key and currency.
    batches: Vec<BatchRecord>,
    /// The provider lines their rows may show.
    lines: Vec<HandedLineRecord>,
}

/// One batch of a shared rule in plain values ([`crate::run::shared::HandedBatch`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct BatchRecord {
    rule: String,
    key: String,
    currency: String,
    net_minor: i64,
    payout_minor: Option<i64>,
    items: usize,
    /// Items the ledger matched.
    matched: usize,
    /// One of its own lines is booked in the night.
    touched: bool,
    last_booked: Micros,
    /// Into [`HandOverRecord::lines`].
    payout_lines: Vec<u32>,
    /// Into [`HandOverRecord::lines`]: the first item, for a batch without payout lines.
    first_item: Option<u32>,
}

/// A handed statement line in plain values ([`crate::run::shared::HandedLine`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct HandedLineRecord {
    source: String,
    file: String,
    account: Option<String>,
    line_no: u64,
    provider_txn_id: Option<String>,
    reference: Option<String>,
    recipient: String,
    amount_minor: i64,
    currency: String,
    booked_at: Micros,
    booked_to: Micros,
    booked_day: Option<chrono::NaiveDate>,
    kind: String,
    entry: Option<(u32, Option<u32>)>,
    batch: Option<String>,
    bank: bool,
    content_id: u64,
    original: Option<(i64, String)>,
    /// The night reports it (a fee, payout or balance line no three-way row shows gets a row).
    reported: bool,
}

/// Origins shared by the handed lines of one file (of every shard), by (source, file).
pub type HandedOrigins = BTreeMap<(String, String), Arc<Origin>>;

impl HandOverRecord {
    /// The record of a shard's hand-over.
    pub fn of(h: &crate::run::shared::HandOver) -> HandOverRecord {
        HandOverRecord {
            batches: h
                .batches
                .iter()
                .map(|b| BatchRecord {
                    rule: b.rule.clone(),
                    key: b.key.clone(),
                    currency: b.currency.to_string(),
                    net_minor: b.net_minor,
                    payout_minor: b.payout_minor,
                    items: b.items,
                    matched: b.matched,
                    touched: b.touched,
                    last_booked: b.last_booked,
                    payout_lines: b.payout_lines.clone(),
                    first_item: b.first_item,
                })
                .collect(),
            lines: h
                .lines
                .iter()
                .map(|l| HandedLineRecord::of(&l.line, l.reported))
                .collect(),
        }
    }

    /// The hand-over as the gather decides it: its lines are the shared settlement's (their
    /// origin has the partition [`crate::partition::SHARED`]), one origin per file of
    /// `origins`.
    pub fn handover(self, origins: &mut HandedOrigins) -> Result<crate::run::shared::HandOver> {
        Ok(crate::run::shared::HandOver {
            batches: self
                .batches
                .into_iter()
                .map(|b| -> Result<crate::run::shared::HandedBatch> {
                    Ok(crate::run::shared::HandedBatch {
                        rule: b.rule,
                        key: b.key,
                        currency: currency(&b.currency)?,
                        net_minor: b.net_minor,
                        payout_minor: b.payout_minor,
                        items: b.items,
                        matched: b.matched,
                        touched: b.touched,
                        last_booked: b.last_booked,
                        payout_lines: b.payout_lines,
                        first_item: b.first_item,
                    })
                })
                .collect::<Result<_>>()?,
            lines: self
                .lines
                .into_iter()
                .map(|l| -> Result<crate::run::shared::HandedLine> {
                    let reported = l.reported;
                    Ok(crate::run::shared::HandedLine {
                        line: l.line(origins)?,
                        reported,
                    })
                })
                .collect::<Result<_>>()?,
        })
    }
}

impl HandedLineRecord {
    fn of(l: &StatementLine, reported: bool) -> HandedLineRecord {
        HandedLineRecord {
            source: l.origin.source.to_string(),
            file: l.origin.file.to_string(),
            account: l.origin.account.as_deref().map(str::to_string),
            line_no: l.line_no,
            provider_txn_id: l.provider_txn_id.as_deref().map(str::to_string),
            reference: l.reference.as_ref().map(Id::to_string),
            recipient: l.recipient.to_string(),
            amount_minor: l.amount_minor,
            currency: l.currency.to_string(),
            booked_at: l.booked_at,
            booked_to: l.booked_to,
            booked_day: l.booked_day,
            kind: l.kind.as_str().to_string(),
            entry: l.entry.map(|e| (e.entry, e.detail)),
            batch: l.batch.as_deref().map(str::to_string),
            bank: l.role == Role::Bank,
            content_id: l.content_id,
            original: l
                .original
                .as_ref()
                .map(|o| (o.amount_minor, o.currency.to_string())),
            reported,
        }
    }

    fn line(self, origins: &mut HandedOrigins) -> Result<StatementLine> {
        let origin = origins
            .entry((self.source.clone(), self.file.clone()))
            .or_insert_with(|| {
                Arc::new(Origin {
                    partition: crate::partition::SHARED,
                    ..(*Origin::new(
                        Arc::from(self.source.as_str()),
                        Arc::from(self.file.as_str()),
                        self.account.as_deref().map(Arc::from),
                    ))
                    .clone()
                })
            })
            .clone();
        Ok(StatementLine {
            origin,
            line_no: self.line_no,
            provider_txn_id: self.provider_txn_id.map(Into::into),
            reference: self.reference.as_deref().map(Id::new),
            recipient: self.recipient.into(),
            amount_minor: self.amount_minor,
            currency: currency(&self.currency)?,
            booked_at: self.booked_at,
            booked_to: self.booked_to,
            booked_day: self.booked_day,
            kind: parse_kind(&self.kind)?,
            entry: self.entry.map(|(entry, detail)| EntryRef { entry, detail }),
            batch: self.batch.map(Into::into),
            role: if self.bank {
                Role::Bank
            } else {
                Role::Provider
            },
            content_id: self.content_id,
            original: self
                .original
                .map(|(amount_minor, c)| -> Result<_> {
                    Ok(Box::new(OriginalAmount {
                        amount_minor,
                        currency: currency(&c)?,
                    }))
                })
                .transpose()?,
        })
    }
}

impl CasePaymentRecord {
    /// The payment as much as storing its case reads it (its id, status and current attempt).
    pub fn payment(&self) -> crate::ledger::Payment {
        let status = Status::parse(&self.status).unwrap_or(Status::Pending);
        crate::ledger::Payment {
            payment_id: self.payment_id.as_str().into(),
            recipient: Default::default(),
            amount_minor: 0,
            currency: "",
            current_status: status,
            status,
            attempt_id: self.attempt_id.as_deref().map(Into::into),
            provider_payment_id: None,
            started_at: None,
            first_started_at: None,
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: crate::partition::NONE,
        }
    }
}

/// The key of a result row as the report lists it: its payment, or its first line (a line
/// row). The same text as [`item_key`] of the row's report item.
pub fn row_key(
    row: &crate::outcome::ResultRow,
    payments: &[crate::ledger::Payment],
    lines: &[crate::sources::StatementLine],
) -> String {
    match (row.payment, row.lines.first()) {
        (Some(p), _) => format!("p:{}", payments[p as usize].payment_id),
        (None, Some(&l)) => {
            let l = &lines[l as usize];
            format!("l:{}:{}", l.origin.source, l.uid())
        }
        (None, None) => String::new(),
    }
}

/// The key of a report row (see [`row_key`]).
pub fn item_key(item: &Item) -> String {
    match (&item.payment_id, item.lines.first()) {
        (Some(p), _) => format!("p:{p}"),
        (None, Some(l)) => format!("l:{}:{}", l.origin.source, l.id),
        (None, None) => String::new(),
    }
}

/// Whether case `c` of `view` has a member whose key is in `crossing` (it spans shards: the
/// gather stores it).
pub fn is_crossing(
    view: &ReportView,
    c: &crate::report::cases::Case,
    crossing: &std::collections::HashSet<String>,
) -> bool {
    c.members
        .iter()
        .any(|&i| crossing.contains(&item_key(&view.items[i])))
}

/// Takes out of `view` the cases with a member whose key is in `crossing` (they span shards:
/// the gather stores them), and returns them.
pub fn take_crossing_cases(
    view: &mut ReportView,
    crossing: &std::collections::HashSet<String>,
) -> Vec<crate::report::cases::Case> {
    if crossing.is_empty() {
        return Vec::new();
    }
    let all = std::mem::take(&mut view.cases);
    let (out, keep): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|c| is_crossing(view, c, crossing));
    view.cases = keep;
    out
}

/// One outcome's count and sums.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TotalRecord {
    /// Outcome name.
    pub outcome: String,
    /// Rows.
    pub count: usize,
    /// (currency, sum of minor units as text: sums may exceed what JSON numbers hold).
    pub amounts: Vec<(String, String)>,
}

/// What report rows read back share: the origins of their lines (by source, file and
/// account) and their rules' names.
#[derive(Default)]
pub struct Interned {
    origins: BTreeMap<(String, String, Option<String>), Arc<Origin>>,
    rules: BTreeMap<String, Arc<str>>,
}

/// A report row in plain values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ItemRecord {
    outcome: String,
    status: Option<String>,
    action: String,
    payment_id: Option<String>,
    lines: Vec<LineRecord>,
    amount: Option<(i64, String)>,
    recipient: String,
    started_at: Option<i64>,
    age_days: i64,
    rule: String,
    detail: String,
}

/// A report row's statement line in plain values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LineRecord {
    id: String,
    amount: (i64, String),
    reference: Option<String>,
    booked_at: i64,
    booked_day: Option<chrono::NaiveDate>,
    source: String,
    file: String,
    account: Option<String>,
    line_no: u64,
    kind: String,
}

fn currency(code: &str) -> Result<&'static str> {
    crate::money::currency(code)
        .map(|(c, _)| c)
        .map_err(|e| anyhow!("currency {code:?}: {e}"))
}

fn parse_action(label: &str) -> Result<Action> {
    let status = |s: &str| Status::parse(s).ok_or_else(|| anyhow!("action {label:?}"));
    Ok(match label.split_once(':') {
        None if label == "none" => Action::None,
        None if label == "ticket" => Action::Ticket,
        Some(("transition", s)) => Action::Transition(status(s)?),
        Some(("conflict", s)) => Action::Conflict(status(s)?),
        _ => return Err(anyhow!("unknown action {label:?}")),
    })
}

fn parse_kind(text: &str) -> Result<LineKind> {
    LineKind::parse(text).ok_or_else(|| anyhow!("unknown line kind {text:?}"))
}

impl ItemRecord {
    fn of(i: &Item) -> ItemRecord {
        ItemRecord {
            outcome: i.outcome.as_str().to_string(),
            status: i.status.map(|s| s.as_str().to_string()),
            action: i.action.label(),
            payment_id: i.payment_id.as_ref().map(Id::to_string),
            lines: i
                .lines
                .iter()
                .map(|l| LineRecord {
                    id: l.id.to_string(),
                    amount: (l.amount.minor, l.amount.currency.to_string()),
                    reference: l.reference.as_ref().map(Id::to_string),
                    booked_at: l.booked_at,
                    booked_day: l.booked_day,
                    source: l.origin.source.to_string(),
                    file: l.origin.file.to_string(),
                    account: l.origin.account.as_deref().map(str::to_string),
                    line_no: l.line_no,
                    kind: l.kind.as_str().to_string(),
                })
                .collect(),
            amount: i.amount.map(|m| (m.minor, m.currency.to_string())),
            recipient: i.recipient.to_string(),
            started_at: i.started_at,
            age_days: i.age_days,
            rule: i.rule.to_string(),
            detail: i.detail.to_string(),
        }
    }

    /// The row as the report renders it. Lines of one file share one origin, and rows of one
    /// rule one name, as in a run.
    pub fn item(self, shared: &mut Interned) -> Result<Item> {
        let Interned { origins, rules } = shared;
        let outcome =
            Outcome::parse(&self.outcome).ok_or_else(|| anyhow!("outcome {:?}", self.outcome))?;
        let mut lines = Vec::with_capacity(self.lines.len());
        for l in self.lines {
            let key = (l.source, l.file, l.account);
            let origin = match origins.get(&key) {
                Some(o) => Arc::clone(o),
                None => {
                    let o = Origin::new(
                        Arc::from(key.0.as_str()),
                        Arc::from(key.1.as_str()),
                        key.2.as_deref().map(Arc::from),
                    );
                    origins.insert(key, Arc::clone(&o));
                    o
                }
            };
            lines.push(ItemLine {
                id: l.id.into(),
                amount: Money {
                    minor: l.amount.0,
                    currency: currency(&l.amount.1)?,
                },
                reference: l.reference.as_deref().map(Id::new),
                booked_at: l.booked_at,
                booked_day: l.booked_day,
                origin,
                line_no: l.line_no,
                kind: parse_kind(&l.kind)?,
            });
        }
        Ok(Item {
            outcome,
            severity: outcome.ticket_severity(),
            status: self
                .status
                .as_deref()
                .map(|s| Status::parse(s).ok_or_else(|| anyhow!("status {s:?}")))
                .transpose()?,
            action: parse_action(&self.action)?,
            payment_id: self.payment_id.as_deref().map(Id::new),
            lines,
            amount: self
                .amount
                .map(|(minor, c)| -> Result<Money> {
                    Ok(Money {
                        minor,
                        currency: currency(&c)?,
                    })
                })
                .transpose()?,
            recipient: CompactString::new(&self.recipient),
            started_at: self.started_at,
            age_days: self.age_days,
            rule: match rules.get(self.rule.as_str()) {
                Some(r) => Arc::clone(r),
                None => {
                    let r: Arc<str> = Arc::from(self.rule.as_str());
                    rules.insert(self.rule, Arc::clone(&r));
                    r
                }
            },
            detail: self.detail.into(),
        })
    }
}

impl ShardRecord {
    /// The record of a shard's view.
    pub fn of(
        group: &str,
        shard: Shard,
        partitions: Vec<String>,
        view: &ReportView,
        handed: &crate::run::shared::HandOver,
    ) -> Self {
        ShardRecord {
            group: group.to_string(),
            shard,
            run_id: view.summary.run_id.clone(),
            partitions,
            summary: view.summary.clone(),
            totals: view
                .totals
                .iter()
                .map(|(o, t)| TotalRecord {
                    outcome: o.as_str().to_string(),
                    count: t.count,
                    amounts: t
                        .amounts
                        .iter()
                        .map(|(c, v)| (c.to_string(), v.to_string()))
                        .collect(),
                })
                .collect(),
            transitions_planned: view.transitions_planned,
            ticket_rows: view.ticket_rows,
            items: view.items.iter().map(ItemRecord::of).collect(),
            family_rows: view
                .family_rows
                .iter()
                .map(|(f, n)| (f.as_str().to_string(), *n))
                .collect(),
            handed: HandOverRecord::of(handed),
            crossing: Vec::new(),
            case_payments: Vec::new(),
        }
    }

    /// With the rows whose cases the gather stores (`crossing`, keys), and the payments of the
    /// cases the shard left to it (`held`) as `payments` (the shard's) hold them.
    pub fn with_crossing(
        mut self,
        crossing: &std::collections::HashSet<String>,
        held: &[crate::report::cases::Case],
        payments: &[crate::ledger::Payment],
    ) -> Self {
        self.crossing = crossing.iter().cloned().collect();
        self.crossing.sort_unstable();
        let wanted: std::collections::BTreeSet<&Id> =
            held.iter().flat_map(|c| c.payments.iter()).collect();
        self.case_payments = payments
            .iter()
            .filter(|p| wanted.contains(&p.payment_id))
            .map(|p| CasePaymentRecord {
                payment_id: p.payment_id.to_string(),
                status: p.current_status.as_str().to_string(),
                attempt_id: p.attempt_id.as_ref().map(Id::to_string),
            })
            .collect();
        self
    }

    /// Writes it into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(FILE);
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        serde_json::to_writer(std::io::BufWriter::with_capacity(1 << 20, file), self)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Reads the record in a shard's folder but its report rows (see
    /// [`ShardRecord::read_items_each`]), with the sha256 and size of the bytes it read (the whole
    /// file), to be checked against the seal.
    pub fn read(dir: &Path) -> Result<(ShardRecord, (String, u64))> {
        read_hashed(dir)
    }

    /// Reads the report rows of the record in a shard's folder one at a time, handing each to
    /// `each` as soon as it is parsed (a shard's rows are never all held as read), with the
    /// sha256 and size of the bytes it read (the whole file, again), to be checked against the
    /// seal. The first error of `each` stops the reading and is returned as it is.
    pub fn read_items_each(
        dir: &Path,
        each: &mut dyn FnMut(ItemRecord) -> Result<()>,
    ) -> Result<(String, u64)> {
        let mut failed = None;
        let read = read_hashed_with(dir, |r| {
            let mut de = serde_json::Deserializer::from_reader(r);
            serde::de::DeserializeSeed::deserialize(
                EachItem {
                    each,
                    failed: &mut failed,
                },
                &mut de,
            )?;
            de.end()
        });
        match (failed, read) {
            (Some(e), _) => Err(e),
            (None, read) => Ok(read?.1),
        }
    }

    /// Its totals as the report counts them.
    pub fn totals(&self) -> Result<BTreeMap<Outcome, OutcomeTotal>> {
        let mut out = BTreeMap::new();
        for t in &self.totals {
            let o = Outcome::parse(&t.outcome).ok_or_else(|| anyhow!("outcome {:?}", t.outcome))?;
            let mut amounts = BTreeMap::new();
            for (c, v) in &t.amounts {
                let v: i128 = v.parse().map_err(|e| anyhow!("sum {v:?}: {e}"))?;
                amounts.insert(currency(c)?, v);
            }
            out.insert(
                o,
                OutcomeTotal {
                    count: t.count,
                    amounts,
                },
            );
        }
        Ok(out)
    }

    /// How many rows each family listed.
    pub fn family_rows(&self) -> Result<BTreeMap<crate::model::Family, usize>> {
        self.family_rows
            .iter()
            .map(|(f, n)| {
                crate::model::Family::parse(f)
                    .map(|f| (f, *n))
                    .ok_or_else(|| anyhow!("family {f:?}"))
            })
            .collect()
    }
}

/// `T` read from the shard.json in `dir` as a stream, with the sha256 and size of every byte
/// of the file (whatever the parser left unread).
fn read_hashed<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<(T, (String, u64))> {
    read_hashed_with(dir, |r| serde_json::from_reader(r))
}

/// What `read` reads from the shard.json in `dir`, with the sha256 and size of every byte of
/// the file (whatever `read` left unread).
fn read_hashed_with<T>(
    dir: &Path,
    read: impl FnOnce(&mut dyn std::io::Read) -> serde_json::Result<T>,
) -> Result<(T, (String, u64))> {
    let path = dir.join(FILE);
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, Hashing::new(file));
    let value = read(&mut reader).with_context(|| format!("reading {}", path.display()))?;
    std::io::copy(&mut reader, &mut std::io::sink())
        .with_context(|| format!("reading {}", path.display()))?;
    Ok((value, reader.into_inner().finish()))
}

/// A shard.json read for its report rows alone (every other key skipped as it is read), each
/// row handed to `each` as it is parsed; `each`'s first error is kept in `failed` and stops
/// the reading.
struct EachItem<'a> {
    each: &'a mut dyn FnMut(ItemRecord) -> Result<()>,
    failed: &'a mut Option<anyhow::Error>,
}

impl<'de> serde::de::DeserializeSeed<'de> for EachItem<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EachItem<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a shard record")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let EachItem { each, failed } = self;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                map.next_value_seed(EachRow {
                    each: &mut *each,
                    failed: &mut *failed,
                })?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `items` array of a shard.json, each row handed on as it is parsed.
struct EachRow<'a> {
    each: &'a mut dyn FnMut(ItemRecord) -> Result<()>,
    failed: &'a mut Option<anyhow::Error>,
}

impl<'de> serde::de::DeserializeSeed<'de> for EachRow<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EachRow<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of report rows")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(row) = seq.next_element::<ItemRecord>()? {
            if let Err(e) = (self.each)(row) {
                *self.failed = Some(e);
                return Err(serde::de::Error::custom("a report row was refused"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seal is every regular file of the folder, by name, with the sha256 (FIPS 180-2's
    /// test vector for "abc") and size of its bytes; a subfolder is not part of it.
    #[test]
    fn a_seal_lists_every_regular_file_with_its_sha256_and_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("results.csv"), b"abc").expect("write");
        std::fs::write(dir.path().join("empty.csv"), b"").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let sealed = seal(dir.path()).expect("seal");
        assert_eq!(
            sealed,
            vec![
                HandoverFile {
                    file: "empty.csv".into(),
                    sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                        .into(),
                    bytes: 0,
                },
                HandoverFile {
                    file: "results.csv".into(),
                    sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
                        .into(),
                    bytes: 3,
                },
            ]
        );
    }

    /// A handed line comes back as the line it was (its id, place, money and booking are what
    /// the gather's rows show), read as the shared settlement's.
    #[test]
    fn a_handed_line_reads_back_as_itself() {
        let origin = Origin::new(
            Arc::from("provider-M01"),
            Arc::from("statement-M01.csv"),
            Some(Arc::from("DE89370400440532013000")),
        );
        let line = StatementLine {
            origin,
            line_no: 7,
            provider_txn_id: None,
            reference: Some(Id::new("P-1")),
            recipient: "DE89370400440532013000".into(),
            amount_minor: -12_345,
            currency: "EUR",
            booked_at: 1_000,
            booked_to: 86_400_000_000,
            booked_day: chrono::NaiveDate::from_ymd_opt(2026, 11, 28),
            kind: LineKind::Payout,
            entry: Some(EntryRef {
                entry: 3,
                detail: Some(2),
            }),
            batch: Some("B-7".into()),
            role: Role::Provider,
            content_id: (2 << 48) | 0xABC,
            original: Some(Box::new(OriginalAmount {
                amount_minor: -13_000,
                currency: "USD",
            })),
        };
        let json = serde_json::to_string(&HandedLineRecord::of(&line, true)).unwrap();
        let back: HandedLineRecord = serde_json::from_str(&json).unwrap();
        assert!(back.reported);
        let got = back.line(&mut BTreeMap::new()).unwrap();
        assert_eq!(got.uid(), line.uid());
        assert_eq!(got.origin.partition, crate::partition::SHARED);
        let mut want = line.clone();
        want.origin = Arc::clone(&got.origin);
        assert_eq!(got, want);
    }

    /// The shared settlement's part of shard.json, byte for byte as recon wrote it before the
    /// format moved into this module (issue 43): a gather reads the folders of shards of
    /// either version. The text is the one `serde_json` writes for the structs as they were
    /// in `shared.rs` (fields in declaration order).
    #[test]
    fn the_handed_batches_keep_their_format() {
        let origin = Origin::new(
            Arc::from("psp-M1"),
            Arc::from("psp-M1-2026-11-28.csv"),
            None,
        );
        let line = StatementLine {
            origin,
            line_no: 2,
            provider_txn_id: Some("T1".into()),
            reference: None,
            recipient: "NL91ABNA0417164300".into(),
            amount_minor: -500,
            currency: "EUR",
            booked_at: 10,
            booked_to: 20,
            booked_day: None,
            kind: LineKind::Payout,
            entry: None,
            batch: Some("B1".into()),
            role: Role::Provider,
            content_id: 9,
            original: None,
        };
        let handed = crate::run::shared::HandOver {
            batches: vec![crate::run::shared::HandedBatch {
                rule: "payout-M1".into(),
                key: "B1".into(),
                currency: "EUR",
                net_minor: 500,
                payout_minor: Some(-500),
                items: 3,
                matched: 2,
                touched: true,
                last_booked: 10,
                payout_lines: vec![0],
                first_item: None,
            }],
            lines: vec![crate::run::shared::HandedLine {
                line,
                reported: false,
            }],
        };
        let json = serde_json::to_string(&HandOverRecord::of(&handed)).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"batches":[{"rule":"payout-M1","key":"B1","currency":"EUR","net_minor":500,"#,
                r#""payout_minor":-500,"items":3,"matched":2,"touched":true,"last_booked":10,"#,
                r#""payout_lines":[0],"first_item":null}],"lines":[{"source":"psp-M1","#,
                r#""file":"psp-M1-2026-11-28.csv","account":null,"line_no":2,"#,
                r#""provider_txn_id":"T1","reference":null,"recipient":"NL91ABNA0417164300","#,
                r#""amount_minor":-500,"currency":"EUR","booked_at":10,"booked_to":20,"#,
                r#""booked_day":null,"kind":"PAYOUT","entry":null,"batch":"B1","bank":false,"#,
                r#""content_id":9,"original":null,"reported":false}]}"#
            )
        );
        // And it reads back into the same hand-over, the line as the shared settlement's.
        let back: HandOverRecord = serde_json::from_str(&json).unwrap();
        let got = back.handover(&mut BTreeMap::new()).unwrap();
        assert_eq!(got.batches, handed.batches);
        assert_eq!(got.lines[0].line.origin.partition, crate::partition::SHARED);
        assert_eq!(got.lines[0].line.uid(), handed.lines[0].line.uid());
        // A shard.json without the key (a shard of a job with no shared bank) reads as none.
        assert_eq!(
            serde_json::from_str::<HandOverRecord>(r#"{"batches":[],"lines":[]}"#).unwrap(),
            HandOverRecord::default()
        );
    }

    #[test]
    fn every_action_label_reads_back() {
        for a in [
            Action::None,
            Action::Ticket,
            Action::Transition(Status::Succeeded),
            Action::Conflict(Status::Failed),
        ] {
            assert_eq!(parse_action(&a.label()).unwrap(), a);
        }
        assert!(parse_action("transition:NOPE").is_err());
    }

    fn row(payment: &str) -> ItemRecord {
        ItemRecord {
            outcome: "MISSING_AT_PROVIDER".into(),
            status: Some("UNKNOWN".into()),
            action: "ticket".into(),
            payment_id: Some(payment.into()),
            lines: Vec::new(),
            amount: Some((12_345, "EUR".into())),
            recipient: "NL** **** 4300".into(),
            started_at: Some(1_764_000_000_000_000),
            age_days: 3,
            rule: "window".into(),
            detail: "no line".into(),
        }
    }

    /// The report rows of a shard.json are handed on one at a time in file order, the keys
    /// around them skipped, and the sha256 and size are the whole file's; a row refused stops
    /// the reading with the refusal itself, not a parser's message.
    #[test]
    fn report_rows_are_read_one_at_a_time_and_a_refusal_stops_the_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rows: Vec<serde_json::Value> = ["P-1", "P-2", "P-3"]
            .iter()
            .map(|p| serde_json::to_value(row(p)).expect("row"))
            .collect();
        rows[2]["outcome"] = "NO_SUCH_OUTCOME".into();
        let record = serde_json::json!({
            "group": "g",
            "summary": {"run_id": "r", "warnings": ["x"]},
            "items": rows,
            "crossing": ["k"],
        });
        let bytes = serde_json::to_vec(&record).expect("json");
        std::fs::write(dir.path().join(FILE), &bytes).expect("write");
        let whole = (hex::encode(Sha256::digest(&bytes)), bytes.len() as u64);

        let mut seen = Vec::new();
        let mut keep_two = |r: ItemRecord| -> Result<()> {
            seen.push(r.payment_id.clone().unwrap_or_default());
            if seen.len() > 2 {
                return Err(anyhow!("enough"));
            }
            Ok(())
        };
        let err = ShardRecord::read_items_each(dir.path(), &mut keep_two).unwrap_err();
        assert_eq!(format!("{err:#}"), "enough");
        assert_eq!(seen, ["P-1", "P-2", "P-3"]);

        let mut interned = Interned::default();
        let mut items = Vec::new();
        let mut list = |r: ItemRecord| -> Result<()> {
            items.push(r.item(&mut interned)?);
            Ok(())
        };
        let err = ShardRecord::read_items_each(dir.path(), &mut list).unwrap_err();
        assert!(format!("{err:#}").contains("NO_SUCH_OUTCOME"), "{err:#}");
        assert_eq!(items.len(), 2);
        assert!(
            Arc::ptr_eq(&items[0].rule, &items[1].rule),
            "one rule, one name"
        );

        rows.truncate(2);
        let record = serde_json::json!({"items": rows, "group": "g"});
        let bytes = serde_json::to_vec(&record).expect("json");
        std::fs::write(dir.path().join(FILE), &bytes).expect("write");
        let mut n = 0;
        let got = ShardRecord::read_items_each(dir.path(), &mut |_| {
            n += 1;
            Ok(())
        })
        .expect("read");
        assert_eq!(n, 2);
        assert_eq!(
            got,
            (hex::encode(Sha256::digest(&bytes)), bytes.len() as u64)
        );
        assert_ne!(got, whole);
    }
}
