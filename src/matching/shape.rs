//! The shape of our payment ids in a statement line's reference (DESIGN.md rule 12): a line
//! whose reference has it claims to be one particular payment of ours. It is evidence only for
//! the payment its identifiers name (looked up in the whole ledger); when it names none, it is
//! a ticket of its own, never fuzzy evidence for another payment. A reference of another shape
//! (an invoice number, free text) may still be matched by recipient, amount and window.

use crate::ledger::Payment;
use crate::rules::RuleSet;
use crate::sources::StatementLine;

/// How our payment ids look in a reference.
#[derive(Debug, Clone, Default)]
pub enum IdShape {
    /// Unknown: any reference may be ours or not (the ledger's ids are not UUIDs and no
    /// `reference_pattern` is configured).
    #[default]
    Unknown,
    /// UUIDs, in any spelling the `uuid` crate reads (case, hyphens, braces).
    Uuid,
    /// The job's `reference_pattern`.
    Pattern(regex::Regex),
}

impl IdShape {
    /// The shape a run uses: the configured pattern, else UUIDs when every payment loaded is
    /// a UUID, else unknown.
    pub fn for_run(pattern: Option<&regex::Regex>, payments: &[Payment]) -> IdShape {
        match pattern {
            Some(r) => IdShape::Pattern(r.clone()),
            None if !payments.is_empty() && payments.iter().all(|p| p.payment_id.is_uuid()) => {
                IdShape::Uuid
            }
            None => IdShape::Unknown,
        }
    }

    /// Whether the shape is known (then only references of this shape can name a payment).
    pub fn is_known(&self) -> bool {
        !matches!(self, IdShape::Unknown)
    }

    /// Whether `reference` (one spelling of it) has the shape.
    pub fn matches(&self, reference: &str) -> bool {
        match self {
            IdShape::Unknown => false,
            IdShape::Uuid => crate::model::canonical_uuid(reference).is_some(),
            IdShape::Pattern(r) => r.is_match(reference),
        }
    }

    /// Whether line `l`'s reference has the shape: as written (trimmed), or as a pass that
    /// compares references normalises it.
    pub fn line_matches(&self, rules: &RuleSet, l: &StatementLine) -> bool {
        let Some(reference) = l.reference() else {
            return false;
        };
        let raw = reference.trim();
        if raw.is_empty() {
            return false;
        }
        self.matches(raw)
            || reference_steps(rules)
                .any(|steps| crate::normalize::with_applied(steps, raw, |k| self.matches(k)))
    }

    /// Per line: whether its reference has the shape ([`IdShape::line_matches`]). Empty when
    /// the shape is unknown (no line has it).
    pub fn lines(&self, rules: &RuleSet, lines: &[StatementLine]) -> Vec<bool> {
        if !self.is_known() {
            return Vec::new();
        }
        lines.iter().map(|l| self.line_matches(rules, l)).collect()
    }
}

/// The keys to look up in the whole ledger (DESIGN.md rule 12): the references and provider
/// ids of the lines (payments and returns) that no identifier pass paired with a loaded
/// payment, in the spellings an identifier pass could find them under (as written, as each
/// pass normalises them, and those in lower case, as UUIDs are stored). When the shape of our
/// ids is known, only references of that shape can name a payment.
pub fn lookup_keys(
    lines: &[StatementLine],
    m: &super::MatchResult,
    rules: &RuleSet,
    shape: &IdShape,
) -> crate::ledger::lookup::Keys {
    let mut keys = crate::ledger::lookup::Keys::default();
    let steps: Vec<&[crate::normalize::Step]> =
        rules.passes.iter().map(|p| &*p.normalize).collect();
    let spellings = |raw: &str, out: &mut std::collections::BTreeSet<String>| {
        let raw = raw.trim();
        if raw.is_empty() {
            return;
        }
        let mut add = |k: &str| {
            if !k.is_empty() {
                out.insert(k.to_string());
                if k.bytes().any(|b| b.is_ascii_uppercase()) {
                    out.insert(k.to_ascii_lowercase());
                }
                if let Some(u) = crate::model::canonical_uuid(k) {
                    out.insert(u);
                }
            }
        };
        add(raw);
        for s in &steps {
            crate::normalize::with_applied(s, raw, &mut add);
        }
    };
    let compares_references = reference_steps(rules).next().is_some();
    let compares_provider_ids = rules.passes.iter().any(|pass| {
        super::criteria::Criterion::of(pass)
            .named()
            .is_some_and(|ids| ids.provider_txn_id)
    });
    for (i, l) in lines.iter().enumerate() {
        if m.named.get(i).copied().unwrap_or(false)
            || !(l.ledger_candidate() || l.kind == crate::config::LineKind::Refund)
        {
            continue;
        }
        if compares_references
            && let Some(r) = l.reference()
            && (!shape.is_known() || shape.line_matches(rules, l))
        {
            spellings(&r, &mut keys.payment_ids);
        }
        if compares_provider_ids && let Some(id) = l.provider_txn_id.as_deref() {
            spellings(id, &mut keys.provider_ids);
        }
    }
    keys
}

/// The normalisation steps of every pass that compares references with payment ids.
pub fn reference_steps(rules: &RuleSet) -> impl Iterator<Item = &[crate::normalize::Step]> {
    rules.passes.iter().filter_map(|pass| {
        let crit = super::criteria::Criterion::of(pass);
        crit.named()
            .is_some_and(|ids| ids.reference)
            .then_some(&*pass.normalize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_matches_the_spellings_an_identifier_pass_compares() {
        let rules = RuleSet::compile(&[("d.toml".into(), crate::rules::DEFAULT_RULES.into())])
            .expect("rules");
        let mut line = crate::rules::kinds::testkit::line("R", 1, "EUR", 0);
        let mut has = |shape: &IdShape, reference: &str| {
            line.reference = Some(crate::model::Id::new(reference));
            shape.line_matches(&rules, &line)
        };
        let uuid = IdShape::Uuid;
        assert!(has(&uuid, "7d1c0f3e-9a4b-4c2d-8e6f-000000000001"));
        assert!(has(&uuid, "7D1C0F3E-9A4B-4C2D-8E6F-000000000001"));
        // A space inside is removed by the identifier pass's normalisation.
        assert!(has(&uuid, "7d1c0f3e-9a4b-4c2d-8e6f-0000 00000001"));
        assert!(!has(&uuid, "INV-2026-0042"));
        assert!(!has(&uuid, "RF-7d1c0f3e-9a4b-4c2d-8e6f-000000000001"));
        let pattern = IdShape::Pattern(regex::Regex::new("^PAY-[0-9]+$").expect("regex"));
        assert!(has(&pattern, "PAY-0999"));
        // Upper-cased by the pass before it is compared, as the payment ids are.
        assert!(has(&pattern, "pay-0999"));
        assert!(!has(&pattern, "INV-2026-0042"));
        assert!(!has(&IdShape::Unknown, "PAY-0999"));
    }
}
