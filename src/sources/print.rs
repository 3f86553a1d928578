//! `recon parse`: a source's files printed as canonical lines (CSV on stdout), with the
//! statement facts, dropped re-deliveries and rejected lines on stderr.

use super::config::SourceConfig;
use super::{SourceLoad, read_file};
use anyhow::Result;

/// Header of `recon parse` output.
pub const CANONICAL_HEADER: [&str; 9] = [
    "source",
    "position",
    "provider_txn_id",
    "reference",
    "recipient",
    "amount",
    "currency",
    "booked_at",
    "kind",
];

/// How `recon parse` shows recipients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// Masked as in every report and email (`****3000`).
    Masked,
    /// In full, for checking a recipient mapping locally (`recon parse --unmasked`).
    Unmasked,
}

/// `recon parse`: reads `files` as source `src` (one load, so a line delivered twice counts
/// once) and writes canonical lines as CSV to `out`; statement facts, dropped re-deliveries
/// and rejected lines go to `notes` (stderr). Recipients are masked. Fails (input exit code)
/// if any line was rejected or a file could not be read.
pub fn print_canonical<W: std::io::Write, N: std::io::Write>(
    src: &SourceConfig,
    files: &[std::path::PathBuf],
    recipients: Recipients,
    out: W,
    mut notes: N,
) -> Result<()> {
    use crate::exit::{Failure, fail};
    let mut load = SourceLoad::default();
    for f in files {
        read_file(src, f, &mut load)?;
    }
    for f in &load.facts {
        writeln!(notes, "{}", f.describe())?;
    }
    for f in &load.files {
        if f.duplicates > 0 {
            writeln!(
                notes,
                "{}: {} line(s) already delivered by an earlier file (or repeated with the same provider id) counted once",
                f.path, f.duplicates
            )?;
        }
    }
    for w in load.warnings.iter().chain(&load.notes) {
        writeln!(notes, "{w}")?;
    }
    if !load.rejected.is_empty() {
        let lines: Vec<String> = load
            .rejected
            .iter()
            .map(|r| format!("{}:{}: {}", r.file, r.line, r.reason))
            .collect();
        return Err(fail(
            Failure::Input,
            format!(
                "{} line(s) rejected:\n{}",
                load.rejected.len(),
                lines.join("\n")
            ),
        ));
    }
    // Only a file that reads whole prints lines: a rejected line above returned first.
    let mut w = ::csv::Writer::from_writer(out);
    // The original-currency columns only for a mapping that has them, so the output of every
    // other source keeps its shape.
    let original = src
        .tabular()
        .is_some_and(|t| t.columns.original_amount.is_some());
    let mut header = CANONICAL_HEADER.to_vec();
    if original {
        header.extend(["original_amount", "original_currency"]);
    }
    w.write_record(&header)?;
    for l in &load.lines {
        let (oa, oc) = match &l.original {
            Some(o) => (
                crate::money::format_minor(o.amount_minor, o.currency),
                o.currency,
            ),
            None => (String::new(), ""),
        };
        let mut row: Vec<String> = vec![
            crate::textsafe::csv_safe(l.source()).into_owned(),
            crate::textsafe::csv_safe(&l.position()).into_owned(),
            crate::textsafe::csv_safe(l.provider_txn_id.as_deref().unwrap_or("")).into_owned(),
            crate::textsafe::csv_safe(l.reference().as_deref().unwrap_or("")).into_owned(),
            match recipients {
                _ if l.recipient.is_empty() => String::new(),
                Recipients::Masked => crate::mask::account(&l.recipient),
                Recipients::Unmasked => crate::textsafe::csv_safe(&l.recipient).into_owned(),
            },
            crate::money::format_minor(l.amount_minor, l.currency),
            l.currency.to_string(),
            l.booked_text(),
            l.kind.as_str().to_string(),
        ];
        if original {
            row.extend([oa, oc.to_string()]);
        }
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

/// Header of `recon parse` output for payout status files (pain.002, NACHA).
pub const PAYOUT_HEADER: [&str; 21] = [
    "position",
    "element",
    "level",
    "status",
    "code",
    "reason",
    "original_message_id",
    "original_payment_information_id",
    "original_end_to_end_id",
    "original_instruction_id",
    "trace_number",
    "individual_id",
    "account",
    "amount",
    "currency",
    "date",
    "date_of_death",
    "corrected_data",
    "additional_info",
    "inherited_from",
    "applies_to",
];

/// NACHA change codes whose corrected data holds an account number (C01 account, C03
/// routing and account, C06 account and transaction code, C07 all three).
const ACCOUNT_CHANGE_CODES: [&str; 4] = ["C01", "C03", "C06", "C07"];

/// `recon parse --format pain002|nacha`: reads every file whole (any error stops before a row
/// is printed) and writes its status records as CSV to `out`, one row each, in file order;
/// what the files hold that is no record goes to `notes`. Accounts (the DFI account, corrected
/// data that holds one, account numbers quoted in the additional information) are masked
/// unless `recipients` says otherwise.
pub fn print_payouts<W: std::io::Write, N: std::io::Write>(
    format: crate::model::PayoutFormat,
    files: &[std::path::PathBuf],
    limits: &super::InputLimits,
    recipients: Recipients,
    out: W,
    mut notes: N,
) -> Result<()> {
    use crate::textsafe::csv_safe;
    let mut read = Vec::new();
    for f in files {
        read.push(super::read_payout_file(format, f, limits)?);
    }
    for r in &read {
        for n in &r.notes {
            writeln!(notes, "{n}")?;
        }
        if r.records.is_empty() {
            continue;
        }
        let count = |s: super::payout::State| r.records.iter().filter(|x| x.state == s).count();
        let file = &r.records[0].file;
        writeln!(
            notes,
            "{file}: {} status record(s): {} accepted, {} pending, {} partial, {} rejected, {} returned, {} notification(s) of change",
            r.records.len(),
            count(super::payout::State::Accepted),
            count(super::payout::State::Pending),
            count(super::payout::State::Partial),
            count(super::payout::State::Rejected),
            count(super::payout::State::Returned),
            count(super::payout::State::NotificationOfChange),
        )?;
    }
    let mask = |v: &str| match recipients {
        Recipients::Masked => crate::mask::account(v),
        Recipients::Unmasked => csv_safe(v).into_owned(),
    };
    let text = |v: &Option<String>| csv_safe(v.as_deref().unwrap_or("")).into_owned();
    // Free text may quote an account (`0999;CH72… Lastkonto unbekannt`).
    let free = |v: &Option<String>| match (recipients, v) {
        (Recipients::Masked, Some(t)) => csv_safe(&crate::mask::accounts_in_text(t)).into_owned(),
        _ => text(v),
    };
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(PAYOUT_HEADER)?;
    for r in read.iter().flat_map(|f| &f.records) {
        let (amount, currency) = match r.amount {
            Some((m, c)) => (crate::money::format_minor(m, c), c),
            None => (String::new(), ""),
        };
        let corrected = match &r.corrected_data {
            Some(c)
                if r.reason
                    .as_deref()
                    .is_some_and(|x| ACCOUNT_CHANGE_CODES.contains(&x)) =>
            {
                mask(c)
            }
            c => text(c),
        };
        w.write_record([
            csv_safe(&format!("{}:{}", r.file, r.line)).into_owned(),
            csv_safe(&r.position).into_owned(),
            r.level.as_str().to_string(),
            r.state.as_str().to_string(),
            csv_safe(&r.code).into_owned(),
            text(&r.reason),
            text(&r.original_message_id),
            text(&r.original_payment_information_id),
            text(&r.original_end_to_end_id),
            text(&r.original_instruction_id),
            text(&r.trace_number),
            text(&r.individual_id),
            r.account.as_deref().map(mask).unwrap_or_default(),
            amount,
            currency.to_string(),
            r.date.map(|d| d.to_string()).unwrap_or_default(),
            r.date_of_death.map(|d| d.to_string()).unwrap_or_default(),
            corrected,
            free(&r.additional_info),
            r.inherited_from
                .map(|l| l.as_str())
                .unwrap_or("")
                .to_string(),
            csv_safe(&r.applies_to()).into_owned(),
        ])?;
    }
    w.flush()?;
    Ok(())
}
