//! The `[[payout_status]]` blocks: the files a bank sends back about our payouts (pain.002
//! status reports, NACHA returns), where they are and which of their fields names our
//! payment. Validated before any data is read; an unknown key or a bad value names the file,
//! the line and the key. What a night does with the records is the evidence layer's
//! (`src/payout_status/`).

use crate::model::PayoutFormat;
use crate::sources::keys::{array_table, array_tables, join_clean, unknown_tz};
use anyhow::Result;
use chrono_tz::Tz;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::DeValue;

/// One block as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPayoutStatus {
    /// Unique name among the sources and payout status blocks (results.csv's rule column and
    /// the tickets say `payout_status:<name>`).
    name: Option<String>,
    /// `pain002` or `nacha`.
    format: Option<String>,
    /// A file, or a folder whose files (not starting with `.`) are read in name order
    /// (relative to the config).
    path: Option<PathBuf>,
    /// Which field of a record names our payment (its payment id, exactly): pain.002
    /// `OrgnlEndToEndId` (default) or `OrgnlInstrId`; NACHA `individual_id` (default, entry
    /// positions 40–54) or `trace_number` (the original entry's trace number, addenda
    /// positions 7–21).
    payment_id_field: Option<String>,
    /// Which key of the ledger that field is compared with: `payment_id` (default) or
    /// `provider_payment_id` (the provider id the ledger recorded on the payment or one of its
    /// attempts, e.g. the ACH trace number of the payout).
    ledger_key: Option<String>,
    /// Time zone of a file's creation time when it writes no offset (default: the job's).
    timezone: Option<String>,
}

/// The key of the ledger a record's id is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerKey {
    /// The payment id.
    PaymentId,
    /// The provider id recorded on the payment or one of its attempts.
    ProviderPaymentId,
}

/// The field of a payout status record that names our payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdField {
    /// pain.002 `OrgnlEndToEndId`.
    EndToEndId,
    /// pain.002 `OrgnlInstrId`.
    InstructionId,
    /// NACHA individual identification number (entry detail positions 40–54).
    IndividualId,
    /// NACHA original entry trace number (addenda positions 7–21).
    TraceNumber,
}

impl IdField {
    /// The name written in the job file.
    pub fn as_str(self) -> &'static str {
        match self {
            IdField::EndToEndId => "OrgnlEndToEndId",
            IdField::InstructionId => "OrgnlInstrId",
            IdField::IndividualId => "individual_id",
            IdField::TraceNumber => "trace_number",
        }
    }

    /// The fields a format's records can name a payment by, the default first.
    pub fn of(format: PayoutFormat) -> [IdField; 2] {
        match format {
            PayoutFormat::Pain002 => [IdField::EndToEndId, IdField::InstructionId],
            PayoutFormat::Nacha => [IdField::IndividualId, IdField::TraceNumber],
        }
    }

    /// The value of this field in `r`, exactly as the reader gives it (the format's own
    /// padding removed: XML layout around an element's text, NACHA's blank fill).
    pub fn value(self, r: &crate::sources::payout::PayoutStatus) -> Option<&str> {
        match self {
            IdField::EndToEndId => r.original_end_to_end_id.as_deref(),
            IdField::InstructionId | IdField::TraceNumber => r.original_instruction_id.as_deref(),
            IdField::IndividualId => r.individual_id.as_deref(),
        }
    }
}

/// A validated `[[payout_status]]` block.
#[derive(Debug, Clone, PartialEq)]
pub struct PayoutStatusConfig {
    /// Its name.
    pub name: String,
    /// The files' format.
    pub format: PayoutFormat,
    /// A file, or a folder read in name order.
    pub path: PathBuf,
    /// Which field of a record names our payment.
    pub id_field: IdField,
    /// Which key of the ledger that field is compared with.
    pub ledger_key: LedgerKey,
    /// The zone of a creation time written without an offset.
    pub timezone: Tz,
    /// The job's bounds on one input file.
    pub limits: crate::sources::InputLimits,
}

/// Where the blocks are read from: the job file, its text, its folder, its time zone and the
/// names its sources take.
pub(crate) struct Job<'a> {
    /// The job file.
    pub file: &'a Path,
    /// Its text.
    pub text: &'a str,
    /// Its folder.
    pub base: &'a Path,
    /// The job's time zone.
    pub timezone: Tz,
    /// The names the `[[source]]` blocks took.
    pub source_names: Vec<&'a str>,
}

/// Reads and validates every `[[payout_status]]` table of the job file.
pub(crate) fn read_all(job: &Job<'_>) -> Result<Vec<PayoutStatusConfig>> {
    let tables = array_tables(job.file, job.text, "payout_status")?;
    let mut out: Vec<PayoutStatusConfig> = Vec::with_capacity(tables.len());
    for (i, value) in tables.into_iter().enumerate() {
        let block = read_one(job, i, value, &out)?;
        out.push(block);
    }
    Ok(out)
}

/// Block number `i`; its name must be none of `taken`'s (the blocks before it).
fn read_one(
    job: &Job<'_>,
    i: usize,
    value: Spanned<DeValue<'_>>,
    taken: &[PayoutStatusConfig],
) -> Result<PayoutStatusConfig> {
    let (at, table) = array_table((job.file, job.text), "payout_status", i, value)?;
    let raw: RawPayoutStatus = at.read(table)?;
    let missing = |k: &str| at.on(k, format!("key `{}` is missing", at.key(k)));
    let name = raw.name.clone().ok_or_else(|| missing("name"))?;
    if name.trim().is_empty() || name.contains(['|', ';', '#', ':']) {
        return Err(at.bad("name", "must be non-empty without | ; # :"));
    }
    if job.source_names.contains(&name.as_str()) {
        return Err(at.bad(
            "name",
            format!("{name:?} is the name of a [[source]] too (hint: one name per input)"),
        ));
    }
    if taken.iter().any(|o| o.name == name) {
        return Err(at.bad("name", format!("duplicate payout status name {name:?}")));
    }
    let written = raw.format.as_deref().ok_or_else(|| missing("format"))?;
    let format = match written {
        "pain002" => PayoutFormat::Pain002,
        "nacha" => PayoutFormat::Nacha,
        other => {
            return Err(at.bad(
                "format",
                format!("unsupported format {other:?} (hint: `pain002` or `nacha`)"),
            ));
        }
    };
    let path = raw.path.as_ref().ok_or_else(|| missing("path"))?;
    let fields = IdField::of(format);
    let id_field = match raw.payment_id_field.as_deref() {
        None => fields[0],
        Some(f) => *fields.iter().find(|x| x.as_str() == f).ok_or_else(|| {
            at.bad(
                "payment_id_field",
                format!(
                    "{f:?} is no field of a {format} record that names a payment (hint: `{}` or `{}`)",
                    fields[0].as_str(),
                    fields[1].as_str()
                ),
            )
        })?,
    };
    let ledger_key = match raw.ledger_key.as_deref() {
        None | Some("payment_id") => LedgerKey::PaymentId,
        Some("provider_payment_id") => LedgerKey::ProviderPaymentId,
        Some(other) => {
            return Err(at.bad(
                "ledger_key",
                format!("unknown value {other:?} (hint: `payment_id` or `provider_payment_id`)"),
            ));
        }
    };
    let timezone = match &raw.timezone {
        Some(t) => t
            .parse::<Tz>()
            .map_err(|_| at.bad("timezone", unknown_tz(t)))?,
        None => job.timezone,
    };
    Ok(PayoutStatusConfig {
        name,
        format,
        path: join_clean(job.base, path),
        id_field,
        ledger_key,
        timezone,
        limits: crate::sources::InputLimits::default(),
    })
}
