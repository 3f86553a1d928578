//! The domain vocabulary every layer shares: the time type, a payment's status, the outcome,
//! ticket severity and report family names, and the words a source's configuration is made of
//! (format, role, line kind, timestamp format). It imports nothing from the crate: everything
//! else may use it.

/// Microseconds since 1970-01-01T00:00:00Z.
pub type Micros = i64;

/// A payment's status in the ledger's state machine:
/// `PENDING → SUBMITTING → SUCCEEDED | FAILED | UNKNOWN`, `UNKNOWN → SUCCEEDED | FAILED | REVIEW`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Not sent yet.
    Pending,
    /// A worker is sending it.
    Submitting,
    /// The provider confirmed it.
    Succeeded,
    /// The provider refused it.
    Failed,
    /// Sent, outcome not known (timeout, crash, ambiguous 5xx).
    Unknown,
    /// A human owns it.
    Review,
}

impl Status {
    /// Every status, in declaration order.
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Submitting,
        Status::Succeeded,
        Status::Failed,
        Status::Unknown,
        Status::Review,
    ];

    /// Canonical name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Submitting => "SUBMITTING",
            Status::Succeeded => "SUCCEEDED",
            Status::Failed => "FAILED",
            Status::Unknown => "UNKNOWN",
            Status::Review => "REVIEW",
        }
    }

    /// Parses a stored or imported name (case-insensitive, trimmed).
    pub fn parse(s: &str) -> Option<Status> {
        let s = s.trim();
        Status::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
    }
}

/// The outcome vocabulary (contract: reports, tickets, tests and benchmarks use these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Ledger SUCCEEDED, exactly one provider line.
    Matched,
    /// Ledger UNKNOWN / stale SUBMITTING, exactly one provider line: → SUCCEEDED.
    ResolvedSucceeded,
    /// Ledger UNKNOWN, no line, every source complete for the window and lag passed: → FAILED.
    ResolvedFailed,
    /// No line yet and the window is not closed (or not completely covered).
    AwaitingEvidence,
    /// Ledger SUCCEEDED, no provider line although the window is closed.
    MissingAtProvider,
    /// Provider line, no ledger payment.
    OrphanAtProvider,
    /// Two or more provider lines for one payment.
    DuplicateAtProvider,
    /// Linked by identifier, amount differs.
    AmountMismatch,
    /// Linked by identifier, currency differs.
    CurrencyMismatch,
    /// Ledger FAILED, provider line exists.
    FailedButPaid,
    /// More than one candidate on either side, or an unresolved payment with a near miss.
    Ambiguous,
    /// A unique match from a pass that may only propose (or a payment in REVIEW).
    ProposedMatch,
    /// Ledger PENDING.
    NotSubmitted,
    /// SUBMITTING, younger than the stale age.
    InFlight,
    /// Ledger FAILED, no provider line.
    FailedOk,
    /// A refund line (reported, not matched yet).
    Refund,
    /// A bank credit that is the payout of exactly one provider settlement batch (three-way).
    Settled,
    /// A bank credit paired with a provider batch whose net sum differs from it.
    SettlementMismatch,
    /// A bank credit that no settlement batch (and no rule) explains.
    UnmatchedBankCredit,
    /// A provider fee or payout line: part of a settlement batch, never a ledger payment.
    SettlementItem,
    /// A provider batch whose payout never reached the bank: its window (plus the settlement
    /// lag) has passed on a bank statement that covers the whole window completely.
    PayoutMissingAtBank,
    /// The payment left and its money came back: a return or reversal names it or matches it
    /// (DESIGN.md rule 10). Never MATCHED or RESOLVED_SUCCEEDED, never transitioned.
    Returned,
    /// The ledger says PENDING (never submitted) but a provider line names the payment: the
    /// money left, and the payment service is about to send it again.
    PaidWhilePending,
    /// Two claims about which payout is which payment's disagree (DESIGN.md rule 14): a
    /// reviewer's confirmation and the provider's later reference, a FAILED word after a
    /// SUCCEEDED (recon's or a reviewer's), a payout id another payment holds. Never a
    /// transition; a human decides.
    Contradicted,
}

/// How urgent a ticket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Money may have left twice or against a failure.
    Critical,
    /// Money differs or is unaccounted for.
    High,
    /// Needs a human decision.
    Medium,
    /// A proposal to confirm.
    Low,
}

impl Severity {
    /// Name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "CRITICAL",
            Severity::High => "HIGH",
            Severity::Medium => "MEDIUM",
            Severity::Low => "LOW",
        }
    }
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 24] = [
        Outcome::Matched,
        Outcome::ResolvedSucceeded,
        Outcome::ResolvedFailed,
        Outcome::AwaitingEvidence,
        Outcome::MissingAtProvider,
        Outcome::OrphanAtProvider,
        Outcome::DuplicateAtProvider,
        Outcome::AmountMismatch,
        Outcome::CurrencyMismatch,
        Outcome::FailedButPaid,
        Outcome::Ambiguous,
        Outcome::ProposedMatch,
        Outcome::NotSubmitted,
        Outcome::InFlight,
        Outcome::FailedOk,
        Outcome::Refund,
        Outcome::Settled,
        Outcome::SettlementMismatch,
        Outcome::UnmatchedBankCredit,
        Outcome::SettlementItem,
        Outcome::PayoutMissingAtBank,
        Outcome::Returned,
        Outcome::PaidWhilePending,
        Outcome::Contradicted,
    ];

    /// Contract name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Matched => "MATCHED",
            Outcome::ResolvedSucceeded => "RESOLVED_SUCCEEDED",
            Outcome::ResolvedFailed => "RESOLVED_FAILED",
            Outcome::AwaitingEvidence => "AWAITING_EVIDENCE",
            Outcome::MissingAtProvider => "MISSING_AT_PROVIDER",
            Outcome::OrphanAtProvider => "ORPHAN_AT_PROVIDER",
            Outcome::DuplicateAtProvider => "DUPLICATE_AT_PROVIDER",
            Outcome::AmountMismatch => "AMOUNT_MISMATCH",
            Outcome::CurrencyMismatch => "CURRENCY_MISMATCH",
            Outcome::FailedButPaid => "FAILED_BUT_PAID",
            Outcome::Ambiguous => "AMBIGUOUS",
            Outcome::ProposedMatch => "PROPOSED_MATCH",
            Outcome::NotSubmitted => "NOT_SUBMITTED",
            Outcome::InFlight => "IN_FLIGHT",
            Outcome::FailedOk => "FAILED_OK",
            Outcome::Refund => "REFUND",
            Outcome::Settled => "SETTLED",
            Outcome::SettlementMismatch => "SETTLEMENT_MISMATCH",
            Outcome::UnmatchedBankCredit => "UNMATCHED_BANK_CREDIT",
            Outcome::SettlementItem => "SETTLEMENT_ITEM",
            Outcome::PayoutMissingAtBank => "PAYOUT_MISSING_AT_BANK",
            Outcome::Returned => "RETURNED",
            Outcome::PaidWhilePending => "PAID_WHILE_PENDING",
            Outcome::Contradicted => "CONTRADICTED",
        }
    }

    /// Parses a contract name.
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The severity of the REVIEW ticket this outcome raises, if it raises one.
    pub fn ticket_severity(self) -> Option<Severity> {
        match self {
            Outcome::FailedButPaid
            | Outcome::PaidWhilePending
            | Outcome::DuplicateAtProvider
            | Outcome::Contradicted => Some(Severity::Critical),
            Outcome::AmountMismatch
            | Outcome::CurrencyMismatch
            | Outcome::MissingAtProvider
            | Outcome::SettlementMismatch
            | Outcome::PayoutMissingAtBank
            | Outcome::Returned => Some(Severity::High),
            Outcome::Ambiguous | Outcome::OrphanAtProvider | Outcome::UnmatchedBankCredit => {
                Some(Severity::Medium)
            }
            Outcome::ProposedMatch => Some(Severity::Low),
            _ => None,
        }
    }
}

/// What a result row asks recon to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// A guarded transition of the payment to this status.
    Transition(Status),
    /// A REVIEW ticket.
    Ticket,
    /// The transition was refused: someone else moved the payment since it was loaded.
    Conflict(Status),
}

impl Action {
    /// Name in results.csv.
    pub fn label(self) -> String {
        match self {
            Action::None => "none".into(),
            Action::Transition(s) => format!("transition:{}", s.as_str()),
            Action::Ticket => "ticket".into(),
            Action::Conflict(s) => format!("conflict:{}", s.as_str()),
        }
    }
}

/// A group of outcomes that lands on one sheet / in one section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Money moved against the ledger, or is unaccounted for.
    MoneyAtRisk,
    /// A human must decide a match.
    Review,
    /// Waiting for evidence or for the payment service.
    Pending,
    /// recon changed the ledger.
    Resolved,
    /// No action.
    Informational,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 5] = [
        Family::MoneyAtRisk,
        Family::Review,
        Family::Pending,
        Family::Resolved,
        Family::Informational,
    ];

    /// Name in the config (`[email.extra_recipients]`).
    pub fn as_str(self) -> &'static str {
        match self {
            Family::MoneyAtRisk => "money_at_risk",
            Family::Review => "review",
            Family::Pending => "pending",
            Family::Resolved => "resolved",
            Family::Informational => "informational",
        }
    }

    /// Heading / sheet name.
    pub fn title(self) -> &'static str {
        match self {
            Family::MoneyAtRisk => "Money at risk",
            Family::Review => "Review",
            Family::Pending => "Pending",
            Family::Resolved => "Resolved",
            Family::Informational => "Informational",
        }
    }

    /// Parses a config name.
    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The family of an outcome.
    pub fn of(o: Outcome) -> Family {
        match o {
            Outcome::FailedButPaid
            | Outcome::PaidWhilePending
            | Outcome::Contradicted
            | Outcome::DuplicateAtProvider
            | Outcome::AmountMismatch
            | Outcome::CurrencyMismatch
            | Outcome::MissingAtProvider
            | Outcome::OrphanAtProvider
            | Outcome::SettlementMismatch
            | Outcome::PayoutMissingAtBank
            | Outcome::Returned
            | Outcome::UnmatchedBankCredit => Family::MoneyAtRisk,
            Outcome::Ambiguous | Outcome::ProposedMatch => Family::Review,
            Outcome::AwaitingEvidence | Outcome::InFlight | Outcome::NotSubmitted => {
                Family::Pending
            }
            Outcome::ResolvedSucceeded | Outcome::ResolvedFailed => Family::Resolved,
            Outcome::Refund
            | Outcome::Matched
            | Outcome::FailedOk
            | Outcome::Settled
            | Outcome::SettlementItem => Family::Informational,
        }
    }

    /// Whether rows of this family need a human (the "nothing to review" test).
    pub fn needs_review(self) -> bool {
        matches!(self, Family::MoneyAtRisk | Family::Review)
    }
}

/// What a source's account is to us.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A provider's statement: a payment we sent is a positive line.
    #[default]
    Provider,
    /// Our own bank account: a payment we sent is a debit (negative), a provider payout a
    /// credit.
    Bank,
}

impl Role {
    /// Name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Provider => "provider",
            Role::Bank => "bank",
        }
    }
}

/// How a timestamp column is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimestampFormat {
    /// RFC 3339 / ISO 8601 with an offset (or `Z`).
    Rfc3339,
    /// A chrono strftime pattern; with `%z`/`%:z` it carries its own offset.
    Pattern(String),
}

/// The file formats a source can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Delimited text with a column mapping.
    Csv,
    /// Excel `.xlsx` / legacy `.xls` with a column mapping.
    Xlsx,
    /// ISO 20022 camt.053 bank-to-customer statement.
    Camt053,
    /// ISO 20022 camt.054 debit/credit notification.
    Camt054,
    /// ISO 20022 camt.052 intraday account report (never proves a day complete).
    Camt052,
    /// SWIFT MT940 statement / MT942 interim report.
    Mt940,
    /// BAI2 cash management balance report.
    Bai2,
    /// OFX / QFX bank download (SGML 1.x or XML 2.x).
    Ofx,
    /// JSON lines provider export, one object a line, with a mapping of JSON pointers.
    Jsonl,
    /// Parquet provider export (read by Polars), with the csv mapping by column name.
    Parquet,
}

impl Format {
    /// Every format, in documentation order.
    pub const ALL: [Format; 10] = [
        Format::Csv,
        Format::Xlsx,
        Format::Camt053,
        Format::Camt054,
        Format::Camt052,
        Format::Mt940,
        Format::Bai2,
        Format::Ofx,
        Format::Jsonl,
        Format::Parquet,
    ];

    /// The name used in configs and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Xlsx => "xlsx",
            Format::Camt053 => "camt053",
            Format::Camt054 => "camt054",
            Format::Camt052 => "camt052",
            Format::Mt940 => "mt940",
            Format::Bai2 => "bai2",
            Format::Ofx => "ofx",
            Format::Jsonl => "jsonl",
            Format::Parquet => "parquet",
        }
    }

    /// Parses a format name (case-insensitive; `mt942` is read by the MT940 parser).
    pub fn parse(name: &str) -> Option<Format> {
        match name.trim().to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "xlsx" | "xls" => Some(Format::Xlsx),
            "camt053" | "camt.053" => Some(Format::Camt053),
            "camt054" | "camt.054" => Some(Format::Camt054),
            "camt052" | "camt.052" => Some(Format::Camt052),
            "mt940" | "mt942" => Some(Format::Mt940),
            "bai2" => Some(Format::Bai2),
            "ofx" | "qfx" => Some(Format::Ofx),
            "jsonl" | "ndjson" | "json-lines" => Some(Format::Jsonl),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }

    /// Whether the format needs a column mapping (`columns`, `timestamp_format`).
    pub fn needs_mapping(self) -> bool {
        matches!(
            self,
            Format::Csv | Format::Xlsx | Format::Jsonl | Format::Parquet
        )
    }

    /// Whether the format's files never prove a period complete (camt.052: an intraday report
    /// is a snapshot of a day still going on), so `completeness` can only be `none`.
    pub fn intraday(self) -> bool {
        matches!(self, Format::Camt052)
    }
}

/// A format of the files a bank sends back about payouts we made, which are no statements:
/// their records are statuses of payouts (the `sources::payout` model), not statement lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayoutFormat {
    /// ISO 20022 pain.002 customer payment status report.
    Pain002,
    /// NACHA ACH file: returns (addenda 99) and notifications of change (addenda 98).
    Nacha,
}

impl PayoutFormat {
    /// Every payout format, in documentation order.
    pub const ALL: [PayoutFormat; 2] = [PayoutFormat::Pain002, PayoutFormat::Nacha];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PayoutFormat::Pain002 => "pain002",
            PayoutFormat::Nacha => "nacha",
        }
    }

    /// Parses a payout format name (case-insensitive).
    pub fn parse(name: &str) -> Option<PayoutFormat> {
        match name.trim().to_ascii_lowercase().as_str() {
            "pain002" | "pain.002" => Some(PayoutFormat::Pain002),
            "nacha" | "ach" => Some(PayoutFormat::Nacha),
            _ => None,
        }
    }
}

impl std::fmt::Display for PayoutFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kind of a statement line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineKind {
    /// Money sent to a recipient.
    Payment,
    /// Money returned.
    Refund,
    /// A provider fee (part of a settlement batch's net, never a ledger payment).
    Fee,
    /// The provider's payout of a settlement batch to our bank (not part of the batch's net).
    Payout,
    /// A movement of the provider balance that is none of the above (Adyen `Balancetransfer`,
    /// reserve adjustments): part of its settlement batch's net like a fee, never a ledger
    /// payment, a return or a payout.
    Balance,
}

impl LineKind {
    /// Canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Payment => "PAYMENT",
            LineKind::Refund => "REFUND",
            LineKind::Fee => "FEE",
            LineKind::Payout => "PAYOUT",
            LineKind::Balance => "BALANCE",
        }
    }

    /// The kind whose canonical name is `text`.
    pub fn parse(text: &str) -> Option<LineKind> {
        [
            LineKind::Payment,
            LineKind::Refund,
            LineKind::Fee,
            LineKind::Payout,
            LineKind::Balance,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
    }
}

/// An identifier as the ledger spells it, read back exactly as written. A UUID in its usual
/// text (36 characters: hex with hyphens after 8, 12, 16 and 20 digits, all lower case as
/// PostgreSQL's `uuid` prints, or all upper case as SQL Server's `uniqueidentifier` does) is kept
/// as its 16 bytes, any other spelling as its text: a million UUID ids then take 24 bytes each
/// instead of 24 plus a 48-byte heap block, whichever of the two cases the ledger uses.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Id(IdRepr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum IdRepr {
    /// Written in lower case.
    Uuid([u8; 16]),
    /// Written in upper case.
    UuidUpper([u8; 16]),
    Text(compact_str::CompactString),
}

/// Where the hyphens of a canonical UUID are.
const UUID_HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl Id {
    /// The id spelled `s`.
    pub fn new(s: &str) -> Id {
        Id(match uuid_bytes(s.as_bytes()) {
            Some((b, Case::Lower)) => IdRepr::Uuid(b),
            Some((b, Case::Upper)) => IdRepr::UuidUpper(b),
            None => IdRepr::Text(s.into()),
        })
    }

    /// Whether the id is a UUID (in either case).
    pub fn is_uuid(&self) -> bool {
        !matches!(self.0, IdRepr::Text(_))
    }

    /// The id's text.
    pub fn text(&self) -> IdText<'_> {
        match &self.0 {
            IdRepr::Text(s) => IdText::Str(s),
            IdRepr::Uuid(b) => IdText::Uuid(uuid_text(b, b"0123456789abcdef")),
            IdRepr::UuidUpper(b) => IdText::Uuid(uuid_text(b, b"0123456789ABCDEF")),
        }
    }
}

/// The canonical text of the UUID that `s` spells: lower-case hex with hyphens, as PostgreSQL
/// prints a `uuid` column. Any spelling the `uuid` crate reads is taken (upper case, without
/// hyphens, in braces, `urn:uuid:`); None when `s` spells no UUID.
pub fn canonical_uuid(s: &str) -> Option<String> {
    uuid::Uuid::try_parse(s)
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// Whether `s` is the canonical text of a UUID ([`canonical_uuid`] would return it as it is).
pub fn is_canonical_uuid(s: &str) -> bool {
    matches!(uuid_bytes(s.as_bytes()), Some((_, Case::Lower)))
}

/// The 36 characters of a UUID's bytes, in the digits `hex`.
fn uuid_text(b: &[u8; 16], hex: &[u8; 16]) -> [u8; 36] {
    let mut out = [b'-'; 36];
    let mut at = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        out[at] = hex[usize::from(byte >> 4)];
        out[at + 1] = hex[usize::from(byte & 0xF)];
        at += 2;
    }
    out
}

/// The case of a UUID's hex letters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Lower,
    Upper,
}

/// The 16 bytes of a UUID's text and the case of its letters, or None for any other spelling
/// (letters of both cases, braces, no hyphens: those stay text, so they read back as written).
/// Digits alone are either case.
fn uuid_bytes(s: &[u8]) -> Option<([u8; 16], Case)> {
    if s.len() != 36 || UUID_HYPHENS.iter().any(|&i| s[i] != b'-') {
        return None;
    }
    let (mut lower, mut upper) = (false, false);
    let mut nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => {
            lower = true;
            Some(c - b'a' + 10)
        }
        b'A'..=b'F' => {
            upper = true;
            Some(c - b'A' + 10)
        }
        _ => None,
    };
    let mut out = [0u8; 16];
    let mut digits = s.iter().copied().filter(|&c| c != b'-');
    for byte in &mut out {
        let (hi, lo) = (digits.next()?, digits.next()?);
        *byte = (nibble(hi)? << 4) | nibble(lo)?;
    }
    match (lower, upper) {
        (true, true) => None,
        (false, true) => Some((out, Case::Upper)),
        _ => Some((out, Case::Lower)),
    }
}

/// An [`Id`]'s text, borrowed or (for a UUID) formatted on the stack.
pub enum IdText<'a> {
    /// Kept as text.
    Str(&'a str),
    /// A UUID's 36 characters.
    Uuid([u8; 36]),
}

impl std::ops::Deref for IdText<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            IdText::Str(s) => s,
            // Only ASCII hex digits and hyphens were written.
            IdText::Uuid(b) => std::str::from_utf8(b).unwrap_or_default(),
        }
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Id {
        Id::new(s)
    }
}

/// Text order, whatever the representation (two UUIDs of one case compare by their bytes,
/// which orders them as their text: hex digits of one case sort as the nibbles they stand for).
impl Ord for Id {
    fn cmp(&self, other: &Id) -> std::cmp::Ordering {
        match (&self.0, &other.0) {
            (IdRepr::Uuid(a), IdRepr::Uuid(b)) | (IdRepr::UuidUpper(a), IdRepr::UuidUpper(b)) => {
                a.cmp(b)
            }
            _ => (*self.text()).cmp(&*other.text()),
        }
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Id) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl From<String> for Id {
    fn from(s: String) -> Id {
        Id::new(&s)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl std::fmt::Debug for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.text(), f)
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_back_as_written_and_a_canonical_uuid_takes_no_heap() {
        for s in [
            "0395188c-629b-4fa5-95b9-0a04115c29f2",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "0395188C-629B-4FA5-95B9-0A04115C29F2",
            "00000000-0000-0000-0000-00000000000A",
            // Other spellings: kept as text, exactly.
            "0395188C-629b-4fa5-95b9-0a04115c29f2",
            "{0395188c-629b-4fa5-95b9-0a04115c29f2}",
            "0395188c629b4fa595b90a04115c29f2",
            "0395188c-629b-4fa5-95b9-0a04115c29fg",
            "0395188c-629b-4fa5-95b90-a04115c29f2",
            "ATT-0000001",
            "",
            "ä-ü",
        ] {
            let id = Id::new(s);
            assert_eq!(&*id.text(), s);
            assert_eq!(id.to_string(), s);
            assert_eq!(format!("{id:?}"), format!("{s:?}"));
            assert_eq!(
                serde_json::to_string(&id).ok(),
                serde_json::to_string(s).ok()
            );
        }
        assert!(matches!(
            Id::new("0395188c-629b-4fa5-95b9-0a04115c29f2").0,
            IdRepr::Uuid(_)
        ));
        assert!(matches!(
            Id::new("0395188C-629B-4FA5-95B9-0A04115C29F2").0,
            IdRepr::UuidUpper(_)
        ));
        // Digits alone are either case: one representation for the one text.
        assert!(matches!(
            Id::new("00000000-0000-0000-0000-000000000000").0,
            IdRepr::Uuid(_)
        ));
        assert!(matches!(
            Id::new("0395188C-629b-4fa5-95b9-0a04115c29f2").0,
            IdRepr::Text(_)
        ));
        // Equal ids are equal whatever the representation (one spelling, one representation).
        assert_eq!(
            Id::new("0395188c-629b-4fa5-95b9-0a04115c29f2"),
            Id::new("0395188c-629b-4fa5-95b9-0a04115c29f2")
        );
        assert_ne!(
            Id::new("0395188c-629b-4fa5-95b9-0a04115c29f2"),
            Id::new("0395188C-629B-4FA5-95B9-0A04115C29F2")
        );
    }

    #[test]
    fn ids_order_as_their_text_whatever_the_representation() {
        let texts = [
            "0395188c-629b-4fa5-95b9-0a04115c29f2",
            "0395188c-629b-4fa5-95b9-0a04115c29f1",
            "0395188c-629b-4fa5-95b9-0a04115c29f",
            "0395188c-629b-4fa5-95b9-0a04115c29f2x",
            "0395188C-629B-4FA5-95B9-0A04115C29F2",
            "0395188C-629B-4FA5-95B9-0A04115C29F1",
            "F0000000-0000-0000-0000-00000000000A",
            "A0000000-0000-0000-0000-000000000000",
            "0395188C-629b-4fa5-95b9-0a04115c29f2",
            "f0000000-0000-0000-0000-000000000000",
            "a0000000-0000-0000-0000-000000000000",
            "9fffffff-ffff-ffff-ffff-ffffffffffff",
            "0395188c-629b-4fa5-95b9-0a04115c29f2-",
            "PAY-0000001",
            "",
            "-",
        ];
        let mut by_id: Vec<Id> = texts.iter().map(|t| Id::new(t)).collect();
        by_id.sort();
        let mut by_text = texts.to_vec();
        by_text.sort();
        let sorted: Vec<String> = by_id.iter().map(Id::to_string).collect();
        assert_eq!(sorted, by_text);
    }

    #[test]
    fn a_uuid_in_any_spelling_has_one_canonical_text() {
        let canonical = "0395188c-629b-4fa5-95b9-0a04115c29f2";
        for s in [
            canonical,
            "0395188C-629B-4FA5-95B9-0A04115C29F2",
            "0395188c629b4fa595b90a04115c29f2",
            "{0395188c-629b-4fa5-95b9-0a04115c29f2}",
            "urn:uuid:0395188c-629b-4fa5-95b9-0a04115c29f2",
        ] {
            assert_eq!(canonical_uuid(s).as_deref(), Some(canonical), "{s}");
            assert_eq!(is_canonical_uuid(s), s == canonical, "{s}");
        }
        for s in [
            "",
            "P-1",
            "0395188c-629b-4fa5-95b9-0a04115c29fg",
            "0395188c-629b-4fa5-95b9-0a04115c29f",
            " 0395188c-629b-4fa5-95b9-0a04115c29f2",
        ] {
            assert_eq!(canonical_uuid(s), None, "{s}");
            assert!(!is_canonical_uuid(s), "{s}");
        }
    }

    #[test]
    fn an_id_and_an_optional_id_take_24_bytes() {
        assert_eq!(std::mem::size_of::<Id>(), 24);
        assert_eq!(std::mem::size_of::<Option<Id>>(), 24);
    }
}
