//! Pass kinds: what `kind = "…"` in a `[[pass]]` means. Each kind is one module here that
//! reads its own keys from the rule file and states its predicate ONCE, as a list of
//! [`Condition`]s ([`Criteria`]). The matcher compiles that list both to the Polars join that
//! finds candidate pairs and to the one-pair `Check`s that acceptance, the near-miss gate,
//! `recon explain` and ticket evidence print (`matching::criteria::Criterion`, a layer above
//! this one); a unit test per kind checks the two agree.
//!
//! Adding a kind: a module with a type implementing [`Kind`], registered by its `pub mod` line
//! and one line in the `registry!` below, and the module's agreement test (see
//! docs/architecture.md, "Adding a rule kind").

pub mod fuzzy;
pub mod identifier;

use crate::sources::keys::KeyAt;
use crate::timeparse::{Micros, parse_duration};
use anyhow::Result;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;
use toml::de::DeTable;

/// Which identifiers name a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identifiers {
    /// Line reference == payment_id.
    pub reference: bool,
    /// Line provider_txn_id == a recorded provider_payment_id.
    pub provider_txn_id: bool,
}

/// Which lines a criterion looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRule {
    /// Lines that can be one of our payments (`StatementLine::ledger_candidate`).
    Payments,
    /// Returns and reversals (kind `REFUND`).
    Returns,
}

/// How a criterion compares currencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrencyRule {
    /// The same currency.
    Same,
    /// Any currency (reported, never a reason to drop a pair: the near-miss gate).
    Any,
}

/// How a criterion compares amounts (in minor units, as the ledger sees the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmountRule {
    /// The amount as paid within this many minor units of the payment's.
    Within(i64),
    /// Any amount (the near-miss gate).
    Any,
    /// The money that came back: the line's absolute amount equals the payment's.
    Returned,
    /// Equal money as the line means it: a return's absolute amount ([`AmountRule::Returned`]),
    /// any other line's amount as paid ([`AmountRule::Within`] 0).
    Exact,
}

/// One condition on a (payment, line) pair. Keys and recipients are compared after the
/// pass's normalisation steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// The line is of the kind looked at.
    Line(LineRule),
    /// An identifier on the line names the payment: its reference equals the payment_id,
    /// and/or its provider id equals a provider id recorded on the payment or an attempt.
    /// Joined on the (hashed) keys; returns and reversals ride along in the same join (a
    /// return that names its payment is that payment's money coming back).
    Named(Identifiers),
    /// The same recipient; a line without one is nobody's by recipient.
    Recipient,
    /// The currencies compared.
    Currency(CurrencyRule),
    /// The amounts compared.
    Amount(AmountRule),
    /// The booking overlaps `[started_at − before, started_at + after]` (a date-only booking
    /// covers its day; a payment never sent has no window).
    Booked {
        /// Window start before `started_at`.
        before: Micros,
        /// Window end after `started_at`.
        after: Micros,
    },
}

/// How the candidate pairs of a pass become links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// A link is kept when its line pairs with exactly one payment: an identifier is proof of
    /// identity (several lines for one payment are duplicates; one line naming several payments
    /// is a conflict).
    UniqueLine,
    /// Each side is the other's ONLY candidate, counting every line not cleanly claimed and
    /// every payment (a claimed one as its second payout) (DESIGN.md rule 1).
    UniqueBothSides,
}

/// A pass's predicate, declared once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criteria {
    /// What a pair must meet to be a candidate: the join finds exactly these pairs. In the
    /// order their checks are printed. Each kind of condition at most once.
    pub pairing: Vec<Condition>,
    /// Compared and printed after `pairing` for every candidate, but not part of pairing: an
    /// identifier link is made on the identifier, its money and recipient decide its outcome.
    pub reported: Vec<Condition>,
    /// How candidates become links.
    pub accept: Accept,
}

impl Criteria {
    /// The booking window of the pairing, if it has one (what the evidence horizon must hold).
    pub fn window(&self) -> Option<(Micros, Micros)> {
        self.pairing.iter().find_map(|c| match *c {
            Condition::Booked { before, after } => Some((before, after)),
            _ => None,
        })
    }
}

/// A pass kind: its keys in the rule file and its predicate.
pub trait Kind: Sized {
    /// The value of `kind` in the rule file.
    const NAME: &'static str;
    /// The keys this kind reads besides the ones every pass has ([`COMMON_KEYS`]).
    const KEYS: &'static [&'static str];
    /// Reads and validates the kind's keys.
    fn compile(keys: &Keys<'_>) -> Result<Self>;
    /// The predicate.
    fn criteria(&self) -> Criteria;
}

/// Declares the kinds: the `PassKind` enum (one variant per kind) and the table from the
/// `kind` string to its implementation.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $ty:ty,)+) => {
        /// What a pass does: its kind and the kind's parameters.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum PassKind {
            $($(#[$doc])* $variant($ty),)+
        }

        impl PassKind {
            /// Every registered kind: (`kind` string, its keys).
            pub const KINDS: &'static [(&'static str, &'static [&'static str])] =
                &[$((<$ty as Kind>::NAME, <$ty as Kind>::KEYS),)+];

            /// Compiles a pass of kind `name`; `None` when no kind has that name.
            pub fn compile(name: &str, keys: &Keys<'_>) -> Option<Result<PassKind>> {
                $(if name == <$ty as Kind>::NAME {
                    return Some(<$ty as Kind>::compile(keys).map(PassKind::$variant));
                })+
                None
            }

            /// The `kind` string.
            pub fn name(&self) -> &'static str {
                match self {
                    $(PassKind::$variant(_) => <$ty as Kind>::NAME,)+
                }
            }

            /// The kind's predicate.
            pub fn criteria(&self) -> Criteria {
                match self {
                    $(PassKind::$variant(k) => k.criteria(),)+
                }
            }
        }
    };
}

registry! {
    /// Identity by identifier, no window.
    Identifier => identifier::Params,
    /// Recipient + currency + amount within a window, unique on both sides.
    Fuzzy => fuzzy::Params,
}

/// The keys every pass has, whatever its kind.
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "kind",
    "description",
    "normalize",
    "auto_apply_succeeded",
    "auto_apply_unknown",
];

/// The keys of one `[[pass]]` table as a kind reads them: typed getters whose errors name
/// the rule file and the line (in the form of a TOML error, as the job file's are), the pass
/// and the key.
pub struct Keys<'a> {
    at: &'a KeyAt<'a>,
    index: usize,
    kind: &'static str,
    allowed: &'static [&'static str],
    /// The pass's table, for a key that is missing.
    span: Range<usize>,
    /// Each key, with where its value is written.
    values: BTreeMap<String, (Range<usize>, toml::Value)>,
}

impl<'a> Keys<'a> {
    /// The keys of pass `index` (`table`, its keys already checked by [`check_keys`]) of the
    /// file `at` names, for a kind that reads `allowed`.
    pub fn new(
        at: &'a KeyAt<'a>,
        index: usize,
        kind: &'static str,
        allowed: &'static [&'static str],
        table: Spanned<DeTable<'_>>,
    ) -> Result<Keys<'a>> {
        let span = table.span();
        let mut values = BTreeMap::new();
        for (k, v) in table.into_inner() {
            let value_span = v.span();
            let value =
                toml::Value::deserialize(toml::de::ValueDeserializer::from(v)).map_err(|e| {
                    at.at(
                        e.span().unwrap_or(value_span.clone()),
                        format!("pass[{index}].{}: {}", k.get_ref(), e.message()),
                    )
                })?;
            values.insert(k.into_inner().into_owned(), (value_span, value));
        }
        Ok(Keys {
            at,
            index,
            kind,
            allowed,
            span,
            values,
        })
    }

    /// A configuration error about `key`, on the line of its value (of the pass, when it is
    /// missing): `file: TOML parse error at line L, column C`, the line, `pass[i].key: msg`.
    pub fn err(&self, key: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        let span = self
            .values
            .get(key)
            .map_or_else(|| self.span.clone(), |(span, _)| span.clone());
        self.at
            .at(span, format!("pass[{}].{key}: {msg}", self.index))
    }

    fn get(&self, key: &str) -> Option<&toml::Value> {
        assert!(
            self.allowed.contains(&key),
            "kind {} reads key {key:?} it does not declare in Kind::KEYS",
            self.kind
        );
        self.values.get(key).map(|(_, v)| v)
    }

    /// A text key.
    pub fn string(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.err(key, format!("expected text, found {}", v.type_str()))),
        }
    }

    /// A list of texts.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<&str>>> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        self.err(key, format!("expected text, found {}", v.type_str()))
                    })
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(v) => Err(self.err(
                key,
                format!("expected a list of texts, found {}", v.type_str()),
            )),
        }
    }

    /// An integer key.
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => Ok(Some(*i)),
            Some(v) => Err(self.err(key, format!("expected an integer, found {}", v.type_str()))),
        }
    }

    /// A required duration (`10m`, `72h`); `example` goes into the message when it is
    /// missing.
    pub fn duration(&self, key: &str, example: &str) -> Result<Micros> {
        let text = self
            .string(key)?
            .ok_or_else(|| self.err(key, format!("missing (e.g. \"{example}\")")))?;
        parse_duration(text).map_err(|m| self.err(key, m))
    }
}

/// Checks the keys of pass `index` before anything is read from them: every key of `table`
/// (the pass without its [`COMMON_KEYS`]) is one the kind `kind` reads. A key another kind
/// reads is "not allowed in" this kind's passes; any other is an unknown field. Either error
/// is on the key's line. `kind` is `None` when the pass names no registered kind (its keys
/// are then checked against every kind's).
pub fn check_keys(
    at: &KeyAt<'_>,
    index: usize,
    kind: Option<(&str, &[&str])>,
    table: &Spanned<DeTable<'_>>,
) -> Result<()> {
    for spanned in table.get_ref().keys() {
        let key = spanned.get_ref().as_ref();
        if COMMON_KEYS.contains(&key) {
            continue;
        }
        match kind {
            Some((_, keys)) if keys.contains(&key) => continue,
            Some((name, _)) if PassKind::KINDS.iter().any(|(_, k)| k.contains(&key)) => {
                let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                return Err(at.at(
                    spanned.span(),
                    format!("pass[{index}].{key}: not allowed in {article} {name} pass"),
                ));
            }
            None if PassKind::KINDS.iter().any(|(_, k)| k.contains(&key)) => continue,
            _ => {}
        }
        let mut expected: Vec<&str> = COMMON_KEYS.to_vec();
        match kind {
            Some((_, keys)) => expected.extend(keys),
            None => expected.extend(PassKind::KINDS.iter().flat_map(|(_, k)| k.iter())),
        }
        let expected: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
        return Err(at.at(
            spanned.span(),
            format!(
                "pass[{index}]: unknown field `{key}`, expected one of {}",
                expected.join(", ")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_distinct_names_and_keys_of_their_own() {
        for (i, (name, keys)) in PassKind::KINDS.iter().enumerate() {
            assert!(
                PassKind::KINDS[..i].iter().all(|(n, _)| n != name),
                "{name} registered twice"
            );
            for key in *keys {
                assert!(!COMMON_KEYS.contains(key), "{name}: {key} is a common key");
            }
        }
    }

    /// The message of the error compiling one pass: `id` on line 2, the kind on line 3, then
    /// `keys` from line 4 on.
    fn compile_err(keys: &str) -> String {
        let text = format!(
            "[[pass]]\nid = \"p\"\n{keys}\nauto_apply_succeeded = true\n\
             auto_apply_unknown = true\n"
        );
        format!(
            "{:#}",
            crate::rules::RuleSet::compile(&[("r.toml".into(), text)]).unwrap_err()
        )
    }

    /// `msg` is an error of r.toml on line `line` (in the form of a TOML error), ending with
    /// `says`.
    #[track_caller]
    fn on_line(msg: &str, line: usize, says: &str) {
        assert!(
            msg.starts_with(&format!("r.toml: TOML parse error at line {line}, column ")),
            "{msg}"
        );
        assert!(msg.ends_with(&format!("\n{says}\n")), "{msg}");
    }

    #[test]
    fn a_key_of_another_kind_is_not_allowed_and_an_unknown_one_is_an_unknown_field() {
        let msg = compile_err(
            "kind = \"identifier\"\nidentifiers = [\"reference\"]\nwindow_before = \"1m\"",
        );
        assert_eq!(
            msg,
            "r.toml: TOML parse error at line 5, column 1\n  |\n5 | window_before = \"1m\"\n  \
             | ^^^^^^^^^^^^^\npass[0].window_before: not allowed in an identifier pass\n"
        );
        let msg = compile_err("kind = \"fuzzy\"\nidentifiers = [\"reference\"]");
        on_line(&msg, 4, "pass[0].identifiers: not allowed in a fuzzy pass");
        let msg = compile_err("kind = \"fuzzy\"\nwindow_before = \"1m\"\nwindow_afterr = \"1h\"");
        on_line(
            &msg,
            5,
            "pass[0]: unknown field `window_afterr`, expected one of `id`, `kind`, \
             `description`, `normalize`, `auto_apply_succeeded`, `auto_apply_unknown`, \
             `window_before`, `window_after`, `amount_tolerance_minor`",
        );
        let msg = compile_err("kind = \"fuzzy\"\nwindow_before = 10\nwindow_after = \"1h\"");
        on_line(
            &msg,
            4,
            "pass[0].window_before: expected text, found integer",
        );
        let msg = compile_err("kind = \"exact\"");
        on_line(
            &msg,
            3,
            "pass[0].kind: unknown kind \"exact\" (identifier, fuzzy)",
        );
    }

    #[test]
    fn an_invalid_value_is_on_its_line_and_a_missing_key_on_its_pass() {
        let msg = compile_err("kind = \"fuzzy\"\nwindow_before = \"1m\"\nwindow_after = \"1 h\"");
        on_line(
            &msg,
            5,
            "pass[0].window_after: \"1 h\": unit must be s, m, h or d",
        );
        let msg = compile_err(
            "kind = \"fuzzy\"\nwindow_before = \"1m\"\nwindow_after = \"1h\"\n\
             amount_tolerance_minor = -1",
        );
        on_line(
            &msg,
            6,
            "pass[0].amount_tolerance_minor: must not be negative",
        );
        let msg = compile_err("kind = \"identifier\"\nidentifiers = [\"reference\", \"iban\"]");
        on_line(
            &msg,
            4,
            "pass[0].identifiers: unknown identifier \"iban\" (reference, provider_txn_id)",
        );
        // A missing key has no line of its own: the error is on its pass's `[[pass]]`.
        let msg = compile_err("kind = \"fuzzy\"\nwindow_before = \"1m\"");
        on_line(&msg, 1, "pass[0].window_after: missing (e.g. \"72h\")");
        // The keys every pass has, too.
        let msg = compile_err(
            "kind = \"identifier\"\nidentifiers = [\"reference\"]\nnormalize = [\"lower\"]",
        );
        on_line(
            &msg,
            5,
            "pass[0]: unknown variant `lower`, expected one of `trim`, `upper`, `no_spaces`, \
             `fold_width`",
        );
        let text = "[[pass]]\nid = \"a,b\"\nkind = \"identifier\"\nidentifiers = [\"reference\"]\n\
                    auto_apply_succeeded = true\nauto_apply_unknown = \"yes\"\n";
        let msg = format!(
            "{:#}",
            crate::rules::RuleSet::compile(&[("r.toml".into(), text.into())]).unwrap_err()
        );
        on_line(
            &msg,
            6,
            "pass[0]: invalid type: string \"yes\", expected a boolean",
        );
        let text = text.replace("\"yes\"", "true");
        let msg = format!(
            "{:#}",
            crate::rules::RuleSet::compile(&[("r.toml".into(), text.clone())]).unwrap_err()
        );
        on_line(&msg, 2, "pass[0].id: must be non-empty, without | ; ,");
        let twice = format!("{}\n{}", text.replace("a,b", "a"), text.replace("a,b", "a"));
        let msg = format!(
            "{:#}",
            crate::rules::RuleSet::compile(&[("r.toml".into(), twice)]).unwrap_err()
        );
        on_line(&msg, 9, "pass[1].id \"a\" is used twice");
    }
}

/// Test support for the kinds' agreement tests: payments, lines, and the check that a
/// criterion's join and its one-pair checks find the same pairs.
#[cfg(test)]
pub(crate) mod testkit {
    use crate::config::{LineKind, Role};
    use crate::ledger::{Payment, Status};
    use crate::matching::criteria::Criterion;
    use crate::rules::{Pass, RuleSet};
    use crate::sources::StatementLine;
    use crate::timeparse::Micros;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    /// The one pass of a rule file holding `pass` (a `[[pass]]` table's keys).
    pub fn pass(keys: &str) -> Pass {
        let text = format!(
            "[[pass]]\nid = \"p\"\n{keys}\nauto_apply_succeeded = true\nauto_apply_unknown = true\n"
        );
        let mut rules = RuleSet::compile(&[("t.toml".into(), text)]).expect("rules");
        rules.passes.remove(0)
    }

    /// An UNKNOWN payment.
    pub fn payment(id: &str, recipient: &str, amount: i64, currency: &'static str) -> Payment {
        Payment {
            payment_id: id.into(),
            recipient: recipient.into(),
            amount_minor: amount,
            currency,
            current_status: Status::Unknown,
            status: Status::Unknown,
            attempt_id: None,
            provider_payment_id: None,
            started_at: Some(0),
            first_started_at: Some(0),
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: crate::partition::NONE,
        }
    }

    /// A provider PAYMENT line booked at `at`.
    pub fn line(recipient: &str, amount: i64, currency: &'static str, at: Micros) -> StatementLine {
        StatementLine {
            origin: crate::sources::Origin::new(Arc::from("psp"), Arc::from("f.csv"), None),
            line_no: 1,
            provider_txn_id: None,
            reference: None,
            recipient: recipient.into(),
            amount_minor: amount,
            currency,
            booked_at: at,
            booked_to: at,
            booked_day: None,
            kind: LineKind::Payment,
            entry: None,
            batch: None,
            role: Role::Provider,
            content_id: 0,
            original: None,
        }
    }

    /// The pairs (line, payment) the join of `crit` finds, checked against its one-pair verdict
    /// ([`Criterion::holds_with`]) on every pair, and against its printed pairing checks: all
    /// of them met exactly when it holds. (A pair's checks cannot see the attempts, so for a
    /// line with a provider id that a join did not pair with an identifier criterion the
    /// naming check is not compared.)
    pub fn agreed(
        crit: &Criterion<'_>,
        payments: &[Payment],
        attempts: &[(u32, String)],
        lines: &[StatementLine],
    ) -> BTreeSet<(u32, u32)> {
        let joined: BTreeSet<(u32, u32)> =
            crate::matching::join_all(payments, attempts, lines, crit)
                .expect("join")
                .into_iter()
                .collect();
        let mut scalar = BTreeSet::new();
        for (j, l) in lines.iter().enumerate() {
            for (i, p) in payments.iter().enumerate() {
                let ids: Vec<&str> = attempts
                    .iter()
                    .filter(|(a, _)| *a as usize == i)
                    .map(|(_, id)| id.as_str())
                    .collect();
                let holds = crit.holds_with(p, &ids, l);
                if holds {
                    scalar.insert((j as u32, i as u32));
                }
                let checks = crit.checks(p, l);
                let met = checks[..crit.pairing.len()].iter().all(|c| c.ok);
                if holds || crit.named().is_none() || l.provider_txn_id.is_none() {
                    assert_eq!(met, holds, "line {j}, payment {i}: {checks:?}");
                }
            }
        }
        assert_eq!(joined, scalar, "the join and the one-pair checks disagree");
        joined
    }
}
