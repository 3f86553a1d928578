//! One payment row of the ledger, as both backends return it: the canonical columns of a
//! payments query, the decoding of a row (SQLite's raw row, a PostgreSQL COPY line) into a
//! [`Payment`], and payment_id → position. The range load (`load.rs`), the clock (`clock.rs`)
//! and the whole-ledger lookup (`lookup.rs`) read payments with them, so none of the three
//! reaches into another for its rows.

use super::sqlite_raw::Row;
use super::{Payment, Status};
use crate::exit::{Failure, fail};
use crate::keyindex::KeyIndex;
use crate::timeparse::{self, Micros};
use anyhow::Result;
use compact_str::CompactString;
use std::borrow::Cow;

pub(super) const COLUMNS: &str = "payment_id, recipient_account, amount_minor, currency, status, created_at, \
                       started_at, attempt_id, provider_payment_id";

/// A ledger recipient in the canonical form statement recipients have (width folded, no white
/// space, upper case): a ledger row written `de89 3704 …` — by a custom `payments_query`, or
/// by the payment service itself — compares equal to the statement's `DE893704…` everywhere
/// (DESIGN.md: normalisation happens once, when values are loaded).
fn canonical_account(raw: CompactString) -> CompactString {
    match crate::normalize::account_if_changed(&raw) {
        Some(c) => c,
        None => raw,
    }
}

fn bad_row(id: &str, what: String) -> anyhow::Error {
    fail(
        Failure::Database,
        format!("loading the ledger: payment {id:?}: {what}"),
    )
}

fn required(row: &Row, i: i32, id: &crate::model::Id, col: &str) -> Result<CompactString> {
    row.compact(i)
        .ok_or_else(|| bad_row(&id.text(), format!("{col} is NULL")))
}

pub(super) fn payment(row: &Row) -> Result<Payment> {
    let id = row
        .with_text(0, crate::model::Id::new)
        .ok_or_else(|| bad_row("", "payment_id is NULL".into()))?;
    let status = row
        .with_text(4, |t| {
            Status::parse(t).ok_or_else(|| format!("unknown status {t:?}"))
        })
        .ok_or_else(|| bad_row(&id.text(), "status is NULL".into()))?
        .map_err(|e| bad_row(&id.text(), e))?;
    let created_at = row
        .with_text(5, timeparse::from_db)
        .ok_or_else(|| bad_row(&id.text(), "created_at is NULL".into()))?
        .map_err(|e| bad_row(&id.text(), e))?;
    let started_at = row
        .with_text(6, timeparse::from_db)
        .transpose()
        .map_err(|e| bad_row(&id.text(), e))?;
    Ok(Payment {
        recipient: canonical_account(required(row, 1, &id, "recipient_account")?),
        amount_minor: row.int(2),
        currency: row
            .with_text(3, |c| crate::money::currency(c).map(|(code, _)| code))
            .ok_or_else(|| bad_row(&id.text(), "currency is NULL".into()))?
            .map_err(|e| bad_row(&id.text(), e.to_string()))?,
        current_status: status,
        status,
        attempt_id: row.with_text(7, crate::model::Id::new),
        provider_payment_id: row.compact(8),
        started_at,
        first_started_at: started_at,
        created_at,
        followup: None,
        recon: None,
        human: None,
        partition: if row.columns() > 9 {
            row.with_text(9, crate::partition::id)
                .unwrap_or_else(|| crate::partition::id(""))
        } else {
            crate::partition::NONE
        },
        payment_id: id,
    })
}

/// payment_id → position, for attaching history, follow-ups and attempts' provider ids. It
/// borrows the payments: changes are collected and applied after it is dropped.
pub(super) struct Positions<'a> {
    payments: &'a [Payment],
    index: KeyIndex,
}

impl<'a> Positions<'a> {
    /// The index [`Positions::into_index`] gave back, over the same payments (changed in
    /// between, their ids and order kept).
    pub(super) fn again(payments: &'a [Payment], index: KeyIndex) -> Positions<'a> {
        Positions { payments, index }
    }

    /// The index alone, to look ids up while the payments change (`get` with their ids).
    pub(super) fn into_index(self) -> KeyIndex {
        self.index
    }

    pub(super) fn get(&self, id: &str) -> Option<u32> {
        self.index
            .get(id, |i| self.payments[i as usize].payment_id.text())
    }
}

pub(super) fn index(payments: &[Payment]) -> Positions<'_> {
    let mut index = KeyIndex::with_capacity(payments.len());
    for (i, p) in payments.iter().enumerate() {
        // payment_id is the primary key: never taken twice.
        index.insert_new(&p.payment_id.text(), i as u32, |j| {
            payments[j as usize].payment_id.text()
        });
    }
    Positions { payments, index }
}

/// The canonical columns of a payments query. Timestamps go out as PostgreSQL's own text
/// (the session is in UTC): `extract(epoch …)` is numeric arithmetic on the server, which
/// cost more than the whole text transfer.
pub(super) fn pg_payment_columns() -> String {
    "payment_id::text, recipient_account::text, amount_minor::bigint, currency::text, status::text, \
     created_at::timestamptz, started_at::timestamptz, attempt_id::text, provider_payment_id::text"
        .to_string()
}

/// A timestamptz literal for COPY (which takes no parameters); `t` is recon's own value.
pub(super) fn pg_ts(t: Micros) -> String {
    format!("'{}'::timestamptz", timeparse::format_utc(t))
}

pub(super) fn pg_payment(f: &[Option<Cow<'_, str>>]) -> Result<Payment> {
    let text = |i: usize| f.get(i).and_then(|v| v.as_deref());
    let id = text(0).ok_or_else(|| bad_row("", "payment_id is NULL".into()))?;
    let int = |i: usize, col: &str| -> Result<Option<i64>> {
        text(i)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|e| bad_row(id, format!("{col} {v:?}: {e}")))
            })
            .transpose()
    };
    let ts = |i: usize| -> Result<Option<Micros>> {
        text(i)
            .map(|v| timeparse::from_pg_utc(v).map_err(|e| bad_row(id, e)))
            .transpose()
    };
    let status = text(4).ok_or_else(|| bad_row(id, "status is NULL".into()))?;
    let status =
        Status::parse(status).ok_or_else(|| bad_row(id, format!("unknown status {status:?}")))?;
    let currency = text(3).ok_or_else(|| bad_row(id, "currency is NULL".into()))?;
    Ok(Payment {
        recipient: canonical_account(
            text(1)
                .ok_or_else(|| bad_row(id, "recipient_account is NULL".into()))?
                .into(),
        ),
        amount_minor: int(2, "amount_minor")?
            .ok_or_else(|| bad_row(id, "amount_minor is NULL".into()))?,
        currency: crate::money::currency(currency)
            .map(|(code, _)| code)
            .map_err(|e| bad_row(id, e.to_string()))?,
        current_status: status,
        status,
        attempt_id: text(7).map(crate::model::Id::new),
        provider_payment_id: text(8).map(CompactString::from),
        started_at: ts(6)?,
        first_started_at: ts(6)?,
        created_at: ts(5)?.ok_or_else(|| bad_row(id, "created_at is NULL".into()))?,
        followup: None,
        recon: None,
        human: None,
        partition: if f.len() > 9 {
            crate::partition::id(text(9).unwrap_or(""))
        } else {
            crate::partition::NONE
        },
        payment_id: id.into(),
    })
}
