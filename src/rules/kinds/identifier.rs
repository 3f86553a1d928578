//! `kind = "identifier"`: a line is linked to the payment an identifier on it names — its
//! reference equals the payment_id, or its provider id equals a provider_payment_id recorded on
//! the payment or on any of its attempts. No time window: an identifier is proof of identity.
//! The money and the recipient are still compared; they decide the link's outcome.

use super::{Accept, AmountRule, Condition, Criteria, CurrencyRule, Identifiers, Keys, Kind};
use anyhow::Result;

/// The parameters of an identifier pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Which identifiers are compared (`identifiers = [...]`).
    pub ids: Identifiers,
}

impl Kind for Params {
    const NAME: &'static str = "identifier";
    const KEYS: &'static [&'static str] = &["identifiers"];

    fn compile(keys: &Keys<'_>) -> Result<Params> {
        let ids = keys
            .strings("identifiers")?
            .ok_or_else(|| keys.err("identifiers", "missing (reference and/or provider_txn_id)"))?;
        let mut set = Identifiers {
            reference: false,
            provider_txn_id: false,
        };
        for id in &ids {
            match *id {
                "reference" => set.reference = true,
                "provider_txn_id" => set.provider_txn_id = true,
                other => {
                    return Err(keys.err(
                        "identifiers",
                        format!("unknown identifier {other:?} (reference, provider_txn_id)"),
                    ));
                }
            }
        }
        if ids.is_empty() {
            return Err(keys.err("identifiers", "must not be empty"));
        }
        Ok(Params { ids: set })
    }

    fn criteria(&self) -> Criteria {
        Criteria {
            pairing: vec![Condition::Named(self.ids)],
            reported: vec![
                Condition::Recipient,
                Condition::Currency(CurrencyRule::Same),
                Condition::Amount(AmountRule::Exact),
            ],
            accept: Accept::UniqueLine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{agreed, line, pass, payment};
    use crate::config::LineKind;
    use crate::matching::criteria::Criterion;

    /// The hash join and the one-pair checks of an identifier pass agree: references and
    /// provider ids (on the payment and on an attempt) that name a payment once normalised,
    /// and ones that do not.
    #[test]
    fn its_join_and_its_checks_agree() {
        let pass = pass(
            "kind = \"identifier\"\nidentifiers = [\"reference\", \"provider_txn_id\"]\n\
             normalize = [\"fold_width\", \"no_spaces\", \"upper\"]",
        );
        let mut p1 = payment("P-1", "R", 1_000, "EUR");
        p1.provider_payment_id = Some("psp-1".into());
        let p2 = payment("P-2", "R", 1_000, "EUR");
        let p3 = payment("P-3", "R", 1_000, "EUR");
        let attempts = vec![(1, "psp-2a".to_string())];
        let named = |reference: Option<&str>, id: Option<&str>| {
            let mut l = line("R", 1_000, "EUR", 0);
            l.reference = reference.map(Into::into);
            l.provider_txn_id = id.map(Into::into);
            l
        };
        let mut refund = named(Some("P-3"), None);
        refund.kind = LineKind::Refund;
        let lines = vec![
            named(Some("p-1"), None),          // 0 → P-1 (upper case)
            named(Some("P - 1"), None),        // 1 → P-1 (no spaces)
            named(Some("Ｐ-3"), None),         // 2 → P-3 (full width)
            named(Some("P-9"), None),          // 3 nobody
            named(None, Some("PSP-1")),        // 4 → P-1, its own provider id
            named(None, Some("psp-2a")),       // 5 → P-2, an attempt's provider id
            named(None, Some("psp-2")),        // 6 nobody
            named(Some(""), Some(" ")),        // 7 empty keys name nobody
            named(Some("P-2"), Some("psp-1")), // 8 → P-2 and P-1
            refund,                            // 9 → P-3 (returns ride along)
        ];
        let crit = Criterion::of(&pass);
        let got = agreed(&crit, &[p1, p2, p3], &attempts, &lines);
        let want = vec![
            (0, 0),
            (1, 0),
            (2, 2),
            (4, 0),
            (5, 1),
            (8, 0),
            (8, 1),
            (9, 2),
        ];
        assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
        // The printed checks: how the payment is named, then its money and recipient.
        let p = payment("P-1", "R", 1_000, "EUR");
        let texts =
            |l| -> Vec<String> { crit.checks(&p, &l).into_iter().map(|c| c.text).collect() };
        let mut other = named(Some("P-1"), None);
        other.amount_minor = 900;
        assert_eq!(
            texts(other),
            [
                "named by reference",
                "same recipient",
                "same currency EUR",
                "amount 9.00 ≠ 10.00 (tolerance 0.00)"
            ]
        );
    }
}
