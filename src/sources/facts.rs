//! What a statement declares about itself ([`StatementFacts`]: period, balances, control
//! totals) and what its entries add up to; the parsers report them, the gates check them.

use chrono::NaiveDate;

/// A balance a statement declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Balance {
    /// Signed minor units (credit positive).
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
    /// The day the balance is for, if given.
    pub date: Option<NaiveDate>,
}

/// What one statement (camt `Stmt`/`Ntfctn`, MT940 `:20:` block, BAI2 account) declares about
/// itself and what its entries add up to. The run's completeness gates use these facts; the
/// parsers only report them. A balance that does not chain is a fact, not a parse error
/// (excerpts and notifications legitimately do not chain).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatementFacts {
    /// File path.
    pub file: String,
    /// Where the statement starts (`line 12`, `statement 2`).
    pub position: String,
    /// The statement's own id (camt `Id`, MT940 `:20:`, BAI2 group originator), if any.
    pub statement_id: Option<String>,
    /// The statement's account as written (mask when printing).
    pub account: Option<String>,
    /// Account currency, when the statement names one.
    pub currency: Option<&'static str>,
    /// First day covered (statement period, or the booking day).
    pub from: Option<NaiveDate>,
    /// Last day covered (inclusive).
    pub to: Option<NaiveDate>,
    /// Opening booked balance (camt OPBD/PRCD, MT940 :60F:/:60M:, BAI2 010).
    pub opening: Option<Balance>,
    /// Closing booked balance (camt CLBD, MT940 :62F:/:62M:, BAI2 015).
    pub closing: Option<Balance>,
    /// Booked entries seen (a batch entry counts once, whatever its details).
    pub entries: u64,
    /// Signed sum of the booked entries, in minor units of `currency`.
    pub entries_sum: i64,
    /// Number of entries the statement declares (camt TxsSummry, MT942 :90D:+:90C:).
    pub declared_entries: Option<u64>,
    /// Net sum the statement declares (camt TtlNetNtry, MT942 :90C: − :90D:).
    pub declared_net: Option<i64>,
    /// Sum of the entries' absolute amounts, as the statement declares it (camt
    /// TtlNtries/Sum, MT942 :90C: + :90D:).
    pub declared_gross: Option<i64>,
    /// Sum of the booked entries' absolute amounts.
    pub entries_gross: i64,
    /// Whether the format carries control totals that were checked (BAI2 49/98/99).
    pub control_totals_checked: bool,
    /// Control totals or counts that did not agree (a failed completeness fact, not a parse
    /// error: the lines themselves were read whole).
    pub control_problems: Vec<String>,
    /// Entries present but not loaded, with why (e.g. camt entries with status PDNG).
    pub not_loaded: Vec<String>,
}

impl StatementFacts {
    /// A statement with only its file and position known.
    pub fn new(file: &str, position: String) -> StatementFacts {
        StatementFacts {
            file: file.to_string(),
            position,
            statement_id: None,
            account: None,
            currency: None,
            from: None,
            to: None,
            opening: None,
            closing: None,
            entries: 0,
            entries_sum: 0,
            declared_entries: None,
            declared_net: None,
            declared_gross: None,
            entries_gross: 0,
            control_totals_checked: false,
            control_problems: Vec::new(),
            not_loaded: Vec::new(),
        }
    }

    /// Whether opening + entries = closing; `None` when a balance is missing or currencies
    /// differ.
    pub fn balance_chains(&self) -> Option<bool> {
        let (o, c) = (self.opening?, self.closing?);
        if o.currency != c.currency || self.currency.is_some_and(|cur| cur != o.currency) {
            return None;
        }
        Some(o.amount_minor.checked_add(self.entries_sum) == Some(c.amount_minor))
    }

    /// Whether the declared entry count and net sum agree with the entries; `None` when the
    /// statement declares neither.
    pub fn declared_totals_agree(&self) -> Option<bool> {
        if self.declared_entries.is_none()
            && self.declared_net.is_none()
            && self.declared_gross.is_none()
            && !self.control_totals_checked
        {
            return None;
        }
        Some(
            self.control_problems.is_empty()
                && self.declared_entries.is_none_or(|n| n == self.entries)
                && self.declared_net.is_none_or(|n| n == self.entries_sum)
                && self.declared_gross.is_none_or(|n| n == self.entries_gross),
        )
    }

    /// One line for humans (`recon parse` prints it to stderr). The account is masked.
    pub fn describe(&self) -> String {
        let money = |b: &Option<Balance>| match b {
            Some(b) => format!(
                "{} {}{}",
                crate::money::format_minor(b.amount_minor, b.currency),
                b.currency,
                b.date.map(|d| format!(" on {d}")).unwrap_or_default()
            ),
            None => "-".to_string(),
        };
        let yn = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        };
        let cur = self.currency.unwrap_or("");
        let mut s = format!(
            "{}:{}: statement {} account {} period {}..{}: opening {}, closing {}, {} entries summing {} {cur}; balances chain: {}; declared totals agree: {}{}",
            self.file,
            self.position,
            self.statement_id.as_deref().unwrap_or("-"),
            self.account
                .as_deref()
                .map(crate::mask::account)
                .unwrap_or_else(|| "-".into()),
            self.from
                .map(|d| d.to_string())
                .unwrap_or_else(|| "?".into()),
            self.to.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
            money(&self.opening),
            money(&self.closing),
            self.entries,
            crate::money::format_minor(self.entries_sum, if cur.is_empty() { "EUR" } else { cur }),
            yn(self.balance_chains()),
            yn(self.declared_totals_agree()),
            if self.control_totals_checked {
                "; control totals checked"
            } else {
                ""
            },
        );
        for p in &self.control_problems {
            s.push_str("; control total problem: ");
            s.push_str(p);
        }
        for n in &self.not_loaded {
            s.push_str("; not loaded: ");
            s.push_str(n);
        }
        s
    }
}
