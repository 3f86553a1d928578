//! `kind = "fuzzy"`: recipient + currency + amount (in minor units, within the tolerance) and
//! the booking inside `[started_at − window_before, started_at + window_after]`. A pair is
//! accepted only when each side is the other's ONLY candidate; everything else is AMBIGUOUS.

use super::{Accept, AmountRule, Condition, Criteria, CurrencyRule, Keys, Kind, LineRule};
use crate::timeparse::Micros;
use anyhow::Result;

/// The parameters of a fuzzy pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Window start before `started_at` (`window_before`).
    pub before: Micros,
    /// Window end after `started_at` (`window_after`).
    pub after: Micros,
    /// Allowed |amount difference| in minor units (`amount_tolerance_minor`, default 0).
    pub tolerance_minor: i64,
}

impl Kind for Params {
    const NAME: &'static str = "fuzzy";
    const KEYS: &'static [&'static str] =
        &["window_before", "window_after", "amount_tolerance_minor"];

    fn compile(keys: &Keys<'_>) -> Result<Params> {
        let before = keys.duration("window_before", "10m")?;
        let after = keys.duration("window_after", "72h")?;
        let tolerance_minor = keys.int("amount_tolerance_minor")?.unwrap_or(0);
        if tolerance_minor < 0 {
            return Err(keys.err("amount_tolerance_minor", "must not be negative"));
        }
        Ok(Params {
            before,
            after,
            tolerance_minor,
        })
    }

    fn criteria(&self) -> Criteria {
        Criteria {
            pairing: vec![
                Condition::Line(LineRule::Payments),
                Condition::Recipient,
                Condition::Currency(CurrencyRule::Same),
                Condition::Amount(AmountRule::Within(self.tolerance_minor)),
                Condition::Booked {
                    before: self.before,
                    after: self.after,
                },
            ],
            reported: Vec::new(),
            accept: Accept::UniqueBothSides,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{agreed, line, pass, payment};
    use crate::config::{LineKind, Role};
    use crate::matching::criteria::Criterion;
    use crate::timeparse::{HOUR, MINUTE};

    /// The join and the one-pair checks of a fuzzy pass agree on pairs just inside and just
    /// outside its window and tolerance, in another currency and to another recipient.
    #[test]
    fn its_join_and_its_checks_agree() {
        let pass = pass(
            "kind = \"fuzzy\"\nnormalize = [\"no_spaces\", \"upper\"]\nwindow_before = \"10m\"\n\
             window_after = \"72h\"\namount_tolerance_minor = 5",
        );
        let t = 100 * HOUR;
        let mut p = payment("P-1", "DE89 3704", 10_000, "EUR");
        p.started_at = Some(t);
        let mut never_sent = payment("P-2", "DE893704", 10_000, "EUR");
        never_sent.started_at = None;
        let mut nobody = payment("P-3", "", 10_000, "EUR");
        nobody.started_at = Some(t);
        let ok = |at| line("de893704", 10_000, "EUR", at);
        let mut lines = vec![
            ok(t),                              // 0 in
            ok(t - 10 * MINUTE),                // 1 just inside, before
            ok(t - 10 * MINUTE - 1),            // 2 just outside, before
            ok(t + 72 * HOUR),                  // 3 just inside, after
            ok(t + 72 * HOUR + 1),              // 4 just outside, after
            line("DE893704", 10_005, "EUR", t), // 5 tolerance, above
            line("DE893704", 10_006, "EUR", t), // 6 beyond, above
            line("DE893704", 9_995, "EUR", t),  // 7 tolerance, below
            line("DE893704", 9_994, "EUR", t),  // 8 beyond, below
            line("DE893704", 10_000, "USD", t), // 9 other currency
            line("DE893705", 10_000, "EUR", t), // 10 other recipient
            line("", 10_000, "EUR", t),         // 11 no recipient
        ];
        // 12: a date-only booking whose day ends just inside the window's start.
        let mut day = ok(t - 10 * MINUTE - 24 * HOUR);
        day.booked_to = t - 10 * MINUTE;
        lines.push(day);
        // 13: a refund; 14: a bank credit; 15: a bank debit of the payment's money.
        let mut refund = ok(t);
        refund.kind = LineKind::Refund;
        lines.push(refund);
        let mut credit = ok(t);
        credit.role = Role::Bank;
        lines.push(credit);
        let mut debit = line("DE893704", -10_000, "EUR", t);
        debit.role = Role::Bank;
        lines.push(debit);
        let crit = Criterion::of(&pass);
        let got = agreed(&crit, &[p, never_sent, nobody], &[], &lines);
        let want: Vec<(u32, u32)> = [0, 1, 3, 5, 7, 12, 15].iter().map(|&l| (l, 0)).collect();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
    }
}
