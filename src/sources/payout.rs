//! What a bank says about payouts we made, in the files it sends back about them: ISO 20022
//! pain.002 status reports (read by pain002.rs) and NACHA ACH returns and notifications of
//! change (read by nacha.rs). These are no statement lines (no money moved on an account
//! because of them); each record is one claim about one payout, or about every payout of a
//! group or payment information the bank answers for at once.
//!
//! What a night does with these claims (a rejection as evidence of FAILED, a return as a
//! RETURNED case, an acceptance as no money) is not decided here but in the evidence layer
//! (`src/payout_status/`). `sources::read_payout_file` reads one file whole or fails with
//! its file, line and element (or field).

use chrono::{FixedOffset, NaiveDate, NaiveTime};
use std::sync::Arc;

/// What the record's status applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The whole original message (pain.002 `OrgnlGrpInfAndSts/GrpSts`): every transaction of
    /// it that has no status of its own.
    Group,
    /// One payment information block of the original message (pain.002
    /// `OrgnlPmtInfAndSts/PmtInfSts`): every transaction of that block without its own status.
    PaymentInformation,
    /// One transaction (pain.002 `TxInfAndSts`, a NACHA entry).
    Transaction,
}

impl Level {
    /// The name printed and documented.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Group => "group",
            Level::PaymentInformation => "payment-information",
            Level::Transaction => "transaction",
        }
    }
}

/// What the bank says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Accepted (pain.002 `ACCP`, `ACSP`, `ACSC`, `ACTC`, `ACWC`, …): the bank took the
    /// instruction. Not money: only a statement line proves a payout was paid.
    Accepted,
    /// Pending (pain.002 `PDNG`, `RCVD`): no decision yet.
    Pending,
    /// Some transactions accepted, some rejected (pain.002 `PART`/`PATC` at group or payment
    /// information level): the transactions' own records say which.
    Partial,
    /// Rejected (pain.002 `RJCT`), final, with a reason code: the payout was not made.
    Rejected,
    /// Returned (NACHA addenda 99): the payout was made and its money came back.
    Returned,
    /// Notification of change (NACHA addenda 98): the payout was made, but the receiving bank
    /// asks for corrected details on the next one.
    NotificationOfChange,
}

impl State {
    /// The name printed and documented.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Accepted => "accepted",
            State::Pending => "pending",
            State::Partial => "partial",
            State::Rejected => "rejected",
            State::Returned => "returned",
            State::NotificationOfChange => "notification-of-change",
        }
    }
}

/// One claim of a bank about a payout (or about every payout of a group it answers for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutStatus {
    /// The file it was read from.
    pub file: Arc<str>,
    /// 1-based line of the element (pain.002) or record (NACHA) that states it.
    pub line: u64,
    /// Where in the file, for people: the XML element path (`OrgnlPmtInfAndSts[2]/TxInfAndSts[1]`)
    /// or the NACHA record (`batch 2, entry 1`).
    pub position: String,
    /// What the status applies to.
    pub level: Level,
    /// The status as the file writes it: the pain.002 code (`ACSC`, `RJCT`), or the NACHA
    /// addenda type (`99` return, `98` notification of change).
    pub code: String,
    /// What it means.
    pub state: State,
    /// For a status the record takes from the level above it (a pain.002 `TxInfAndSts`
    /// without its own `TxSts`): that level.
    pub inherited_from: Option<Level>,
    /// The original message's id (pain.002 `OrgnlMsgId`).
    pub original_message_id: Option<String>,
    /// The original payment information id (pain.002 `OrgnlPmtInfId`).
    pub original_payment_information_id: Option<String>,
    /// The original end-to-end id (pain.002 `OrgnlEndToEndId`): the id we gave the payout.
    pub original_end_to_end_id: Option<String>,
    /// The original instruction id (pain.002 `OrgnlInstrId`), or the original entry's trace
    /// number (NACHA addenda positions 7–21).
    pub original_instruction_id: Option<String>,
    /// The bank's own reference of the transaction (pain.002 `AcctSvcrRef`), or the trace
    /// number of the returning entry (NACHA positions 80–94).
    pub trace_number: Option<String>,
    /// The receiver's id at the originator (NACHA individual identification number,
    /// positions 40–54): often our payout or customer id.
    pub individual_id: Option<String>,
    /// The reason code: pain.002 `StsRsnInf/Rsn/Cd` (or `Prtry`), NACHA return reason
    /// (`R01`…, non-standard codes such as `R97` kept as written) or change code (`C01`…).
    pub reason: Option<String>,
    /// Free text: pain.002 `AddtlInf` (joined with ` / `), NACHA addenda information.
    pub additional_info: Option<String>,
    /// A notification of change's corrected data (NACHA addenda 98, positions 36–64). It may
    /// be an account number (C01, C03, C06, C07): masked when printed.
    pub corrected_data: Option<String>,
    /// The account the transaction was for, as written (NACHA DFI account number): masked
    /// when printed.
    pub account: Option<String>,
    /// The amount, when the file states it: minor units and ISO 4217 code (pain.002
    /// `OrgnlTxRef/Amt/InstdAmt`, NACHA entry amount in USD cents).
    pub amount: Option<(i64, &'static str)>,
    /// The day the status or entry is for: pain.002 the original requested execution date
    /// or, else, the report's creation day; NACHA the batch's effective entry date.
    pub date: Option<NaiveDate>,
    /// The receiver's date of death (NACHA returns R14/R15), if given.
    pub date_of_death: Option<NaiveDate>,
}

impl PayoutStatus {
    /// An empty record of `level` at `line` (every optional field empty).
    pub fn new(
        file: &Arc<str>,
        line: u64,
        position: String,
        level: Level,
        code: &str,
        state: State,
    ) -> PayoutStatus {
        PayoutStatus {
            file: file.clone(),
            line,
            position,
            level,
            code: code.to_string(),
            state,
            inherited_from: None,
            original_message_id: None,
            original_payment_information_id: None,
            original_end_to_end_id: None,
            original_instruction_id: None,
            trace_number: None,
            individual_id: None,
            reason: None,
            additional_info: None,
            corrected_data: None,
            account: None,
            amount: None,
            date: None,
            date_of_death: None,
        }
    }

    /// What the status applies to, in words: the transactions a group or payment information
    /// status covers, or the one transaction.
    pub fn applies_to(&self) -> String {
        let msg = self.original_message_id.as_deref().unwrap_or("?");
        match self.level {
            Level::Group => {
                format!("every transaction of original message {msg} without a status of its own")
            }
            Level::PaymentInformation => format!(
                "every transaction of payment information {} (original message {msg}) without a status of its own",
                self.original_payment_information_id
                    .as_deref()
                    .unwrap_or("?")
            ),
            Level::Transaction => match self.inherited_from {
                Some(l) => format!("this transaction (status of its {} level)", l.as_str()),
                None => "this transaction".to_string(),
            },
        }
    }
}

/// When the bank wrote a file, as the file says it (pain.002 `GrpHdr/CreDtTm`, NACHA file
/// header creation date and time, positions 24–33): what a night reads the file's records as
/// known from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The day.
    pub date: NaiveDate,
    /// The time of day, when the file gives one (a NACHA creation time is optional).
    pub time: Option<NaiveTime>,
    /// The UTC offset, when the file writes one (a pain.002 `CreDtTm` may; NACHA never does).
    pub offset: Option<FixedOffset>,
}

/// What one payout file holds: its records, and what it holds that is no record (NACHA
/// entries without return or change addenda), for people.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayoutFile {
    /// The records, in file order.
    pub records: Vec<PayoutStatus>,
    /// What was read but is no status (ordinary entries), one sentence each.
    pub notes: Vec<String>,
    /// When the bank wrote the file, if it says.
    pub created: Option<Created>,
}

/// An input error naming the file and a position.
pub(crate) fn error(
    file: &str,
    position: impl std::fmt::Display,
    msg: impl std::fmt::Display,
) -> anyhow::Error {
    crate::exit::fail(
        crate::exit::Failure::Input,
        format!("{file}:{position}: {msg}"),
    )
}
