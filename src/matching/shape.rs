//! The shape of our payment ids in a statement line's reference (DESIGN.md rule 12): a line
//! whose reference has it claims to be one particular payment of ours. It is evidence only for
//! the payment its identifiers name (looked up in the whole ledger); when it names none, it is
//! a ticket of its own, never fuzzy evidence for another payment. A reference of another shape
//! (an invoice number, free text) may still be matched by recipient, amount and window.
//!
//! The shape is the job's `reference_pattern`; without it, UUIDs when every payment id the run
//! loads is one; otherwise it is learnt from those ids ([`Learnt`]): `PAY-0001`…`PAY-0999`
//! give `PAY-` and 4 to 6 digits. Ids of more than one shape teach nothing (the shape stays
//! unknown: every reference that names no payment is free text, as without this module).

use crate::ledger::Payment;
use crate::rules::RuleSet;
use crate::sources::StatementLine;

/// How our payment ids look in a reference.
#[derive(Debug, Clone, Default)]
pub enum IdShape {
    /// Unknown: any reference may be ours or not (no `reference_pattern`, and the ids the run
    /// loaded are neither all UUIDs nor of one shape that can be learnt).
    #[default]
    Unknown,
    /// UUIDs, in any spelling the `uuid` crate reads (case, hyphens, braces).
    Uuid,
    /// The job's `reference_pattern`.
    Pattern(regex::Regex),
    /// Learnt from the ids of the payments the run loaded ([`Learnt`]).
    Learnt(Learnt),
}

impl IdShape {
    /// The shape a run uses: the configured pattern, else UUIDs when every payment loaded is
    /// a UUID, else the shape learnt from the loaded payments' ids ([`Learnt::from_ids`]),
    /// else unknown.
    pub fn for_run(pattern: Option<&regex::Regex>, payments: &[Payment]) -> IdShape {
        match pattern {
            Some(r) => IdShape::Pattern(r.clone()),
            None if payments.is_empty() => IdShape::Unknown,
            None if payments.iter().all(|p| p.payment_id.is_uuid()) => IdShape::Uuid,
            None => match Learnt::from_ids(payments.iter().map(|p| p.payment_id.text())) {
                Some(learnt) => {
                    tracing::info!(
                        shape = %learnt,
                        payments = payments.len(),
                        "Learnt the shape of our payment ids from the ledger."
                    );
                    IdShape::Learnt(learnt)
                }
                None => {
                    tracing::info!(
                        payments = payments.len(),
                        "The payment ids loaded have no one shape: none learnt (hint: set \
                         reference_pattern)."
                    );
                    IdShape::Unknown
                }
            },
        }
    }

    /// Whether the shape is known (then only references of this shape can name a payment).
    pub fn is_known(&self) -> bool {
        !matches!(self, IdShape::Unknown)
    }

    /// Whether a reference outside the shape surely names no payment of ours, so the
    /// whole-ledger lookup may skip it: true for UUIDs and a configured pattern. A learnt shape
    /// is a guess from the payments one run loaded; every reference is still looked up.
    pub fn limits_lookup(&self) -> bool {
        matches!(self, IdShape::Uuid | IdShape::Pattern(_))
    }

    /// Whether `reference` (one spelling of it) has the shape.
    pub fn matches(&self, reference: &str) -> bool {
        match self {
            IdShape::Unknown => false,
            IdShape::Uuid => crate::model::canonical_uuid(reference).is_some(),
            IdShape::Pattern(r) => r.is_match(reference),
            IdShape::Learnt(l) => l.regex.is_match(reference),
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

/// The shape of our ids each line's reference is judged by ([`IdShape::line_matches`]): one
/// for the whole night, or in a partitioned job without `reference_pattern` one per partition,
/// learnt from that partition's payments (a line is only ever fuzzy evidence for its own
/// partition's payments, and a shard loads only its partitions' payments: so one process and
/// the shards judge a line by the same shape).
#[derive(Debug, Clone)]
pub enum Shapes {
    /// One shape for every line.
    One(IdShape),
    /// A shape per partition id (a line's `origin.partition`).
    ByPartition(std::collections::HashMap<u32, IdShape>),
}

impl Shapes {
    /// The shapes of a run: `shape` (the night's, [`IdShape::for_run`]) unless the job is
    /// `partitioned` and the shape is learnt from the ledger (not configured).
    pub fn for_run(
        pattern: Option<&regex::Regex>,
        payments: &[Payment],
        partitioned: bool,
        shape: &IdShape,
    ) -> Shapes {
        if !partitioned || pattern.is_some() {
            return Shapes::One(shape.clone());
        }
        let mut by: std::collections::BTreeMap<u32, Vec<&Payment>> = Default::default();
        for p in payments {
            by.entry(p.partition).or_default().push(p);
        }
        Shapes::ByPartition(
            by.into_iter()
                .map(|(part, ps)| {
                    let shape = if ps.iter().all(|p| p.payment_id.is_uuid()) {
                        IdShape::Uuid
                    } else {
                        Learnt::from_ids(ps.iter().map(|p| p.payment_id.text()))
                            .map_or(IdShape::Unknown, IdShape::Learnt)
                    };
                    (part, shape)
                })
                .collect(),
        )
    }

    /// Per line: whether its reference has the shape of its partition's ids. Empty when no
    /// shape is known (no line has it).
    pub fn lines(&self, rules: &RuleSet, lines: &[StatementLine]) -> Vec<bool> {
        match self {
            Shapes::One(shape) => shape.lines(rules, lines),
            Shapes::ByPartition(by) => {
                if !by.values().any(IdShape::is_known) {
                    return Vec::new();
                }
                lines
                    .iter()
                    .map(|l| {
                        by.get(&l.origin.partition)
                            .is_some_and(|s| s.line_matches(rules, l))
                    })
                    .collect()
            }
        }
    }
}

/// The shape of our ids learnt from the ledger (no `reference_pattern`, ids not UUIDs).
///
/// Every id is cut into tokens: runs of ASCII digits, runs of ASCII letters, and single other
/// characters (separators). When all ids have the same tokens in the same order (the same
/// separators, digits where digits are, letters where letters are), the shape is, token by
/// token:
/// - a separator as itself;
/// - a run of letters as the few words it holds (at most [`MAX_WORDS`], `PAY`, or `PAY|RFD`):
///   letters are what names our ids, so more words than that is no shape;
/// - a run of digits as digits, from the shortest length seen (1 when no id pads with a
///   leading zero) to the longest plus two (room for the ledger to grow, and for the ids of
///   other nights and shards: they load other payments).
///
/// Ids whose letters and digits mix without a fixed order (hex, base-32) are cut at the
/// separators instead, each run of letters and digits then a class (`[0-9A-F]` or
/// `[0-9A-Z]`, lengths as above). A shape must hold a letter word or a separator, or be digits
/// only, or a hex run of at least 8: a bare `[0-9A-Z]{2,4}` would take invoice numbers and words
/// for ours. Letters compare without case (an identifier pass upper-cases both sides).
///
/// A reference is in the shape when it is spelled like our ids, or when it starts with our
/// ids' literal prefix (a word, with its separators) and the first character of what follows
/// it (`PAY-` and a digit): `PAY-12a` and `PAY-0012/2` are garbled ids of ours, evidence for no
/// payment, not free text. Erring towards "ours" costs a review case; the other way a stray
/// line would be fuzzy evidence for a payment that was not paid.
#[derive(Debug, Clone)]
pub struct Learnt {
    regex: regex::Regex,
    text: String,
}

/// The most words a run of letters may hold across the ids to be a part of the shape.
pub const MAX_WORDS: usize = 8;
/// Ids longer than this (in bytes) teach no shape.
const MAX_ID_LEN: usize = 64;
/// Ids of more tokens than this teach no shape.
const MAX_TOKENS: usize = 16;

/// A token of an id: a separator, or a run of letters and digits (its byte range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Sep(char),
    Run(usize, usize),
}

/// How ids are cut into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grain {
    /// Runs of digits and runs of letters apart.
    Fine,
    /// Runs of letters and digits together (cut at separators only).
    Coarse,
}

/// Cuts `id` into `out`'s tokens.
fn split(id: &str, grain: Grain, out: &mut Vec<Token>) {
    out.clear();
    let class = |c: u8| match grain {
        Grain::Fine if c.is_ascii_digit() => 1,
        Grain::Fine if c.is_ascii_alphabetic() => 2,
        Grain::Coarse if c.is_ascii_alphanumeric() => 1,
        _ => 0,
    };
    let b = id.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let k = class(b[i]);
        if k == 0 {
            // `i` is always at a character boundary: runs are ASCII.
            let Some(c) = id[i..].chars().next() else {
                break;
            };
            out.push(Token::Sep(c));
            i += c.len_utf8();
        } else {
            let start = i;
            while i < b.len() && class(b[i]) == k {
                i += 1;
            }
            out.push(Token::Run(start, i));
        }
    }
}

/// What the ids hold at one token position.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Sep(char),
    Run(Run),
}

/// The runs of letters and digits the ids hold at one position.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Run {
    digits: bool,
    letters: bool,
    /// A letter outside `A`–`F`.
    beyond_hex: bool,
    min: usize,
    max: usize,
    /// A run of digits only, longer than one, that starts with `0`.
    padded: bool,
    /// The distinct runs in upper case while no run held a digit (at most `MAX_WORDS + 1`).
    words: Vec<String>,
}

impl Run {
    fn add(&mut self, s: &str) {
        let (d, l) = (
            s.bytes().any(|c| c.is_ascii_digit()),
            s.bytes().any(|c| c.is_ascii_alphabetic()),
        );
        if self.min == 0 || s.len() < self.min {
            self.min = s.len();
        }
        self.max = self.max.max(s.len());
        self.digits |= d;
        self.letters |= l;
        self.beyond_hex |= s
            .bytes()
            .any(|c| c.is_ascii_alphabetic() && !c.is_ascii_hexdigit());
        self.padded |= !l && s.len() > 1 && s.starts_with('0');
        if !self.digits
            && self.words.len() <= MAX_WORDS
            && !self.words.iter().any(|w| w.eq_ignore_ascii_case(s))
        {
            self.words.push(s.to_ascii_uppercase());
        }
    }

    /// A run of words (letters only, few of them).
    fn is_words(&self) -> bool {
        !self.digits && self.words.len() <= MAX_WORDS
    }

    /// The character class of a run that holds digits.
    fn class(&self) -> &'static str {
        match (self.letters, self.beyond_hex) {
            (false, _) => "[0-9]",
            (true, false) => "[0-9A-F]",
            (true, true) => "[0-9A-Z]",
        }
    }

    /// The regex of the run: its words, or its class with the lengths it may have.
    fn regex(&self) -> String {
        if self.is_words() {
            let mut words: Vec<String> = self.words.iter().map(|w| regex::escape(w)).collect();
            words.sort();
            return if words.len() == 1 {
                words.remove(0)
            } else {
                format!("(?:{})", words.join("|"))
            };
        }
        let lo = if self.letters || self.padded {
            self.min
        } else {
            1
        };
        format!("{}{{{lo},{}}}", self.class(), self.max + 2)
    }
}

/// The slots every id of `ids` fills the same way at `grain`; None when two ids differ.
fn slots<S: std::ops::Deref<Target = str>>(
    ids: impl Iterator<Item = S>,
    grain: Grain,
) -> Option<Vec<Slot>> {
    let mut out: Option<Vec<Slot>> = None;
    let mut tokens = Vec::new();
    for id in ids {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        split(&id, grain, &mut tokens);
        if tokens.is_empty() || tokens.len() > MAX_TOKENS {
            return None;
        }
        let slots = out.get_or_insert_with(|| {
            tokens
                .iter()
                .map(|t| match *t {
                    Token::Sep(c) => Slot::Sep(c),
                    Token::Run(..) => Slot::Run(Run::default()),
                })
                .collect()
        });
        if slots.len() != tokens.len() {
            return None;
        }
        for (slot, token) in slots.iter_mut().zip(&tokens) {
            match (slot, *token) {
                (Slot::Sep(a), Token::Sep(b)) if *a == b => {}
                (Slot::Run(r), Token::Run(a, b)) => {
                    let s = &id[a..b];
                    let digit = s.as_bytes()[0].is_ascii_digit();
                    // Fine runs are all digits or all letters: a position holds one kind.
                    if grain == Grain::Fine && r.min > 0 && digit != r.digits {
                        return None;
                    }
                    r.add(s);
                }
                _ => return None,
            }
        }
    }
    out
}

impl Learnt {
    /// The shape of `ids` (see [`Learnt`]); None when they have none, or more than one.
    pub fn from_ids<S, I>(ids: I) -> Option<Learnt>
    where
        S: std::ops::Deref<Target = str>,
        I: Iterator<Item = S> + Clone,
    {
        let slots = slots(ids.clone(), Grain::Fine).or_else(|| slots(ids, Grain::Coarse))?;
        let runs = || {
            slots.iter().filter_map(|s| match s {
                Slot::Run(r) => Some(r),
                Slot::Sep(_) => None,
            })
        };
        // Letters that vary too much are no shape (names, words, not ids); a shape has
        // something that varies like an id (a run with digits).
        if runs().any(|r| !r.digits && !r.is_words()) || !runs().any(|r| r.digits) {
            return None;
        }
        let literal = slots
            .iter()
            .any(|s| matches!(s, Slot::Sep(_)) || matches!(s, Slot::Run(r) if r.is_words()));
        if !literal && runs().any(|r| r.beyond_hex || (r.letters && r.min < 8)) {
            return None;
        }
        let piece = |s: &Slot| match s {
            Slot::Sep(c) => regex::escape(&c.to_string()),
            Slot::Run(r) => r.regex(),
        };
        let exact: String = slots.iter().map(piece).collect();
        // The literal prefix: the words and separators before the first run with digits.
        let lead = slots
            .iter()
            .position(|s| matches!(s, Slot::Run(r) if r.digits))
            .unwrap_or(0);
        let prefix = slots[..lead]
            .iter()
            .any(|s| matches!(s, Slot::Run(_)))
            .then(|| {
                let first = match &slots[lead] {
                    Slot::Run(r) => r.class(),
                    Slot::Sep(_) => "",
                };
                format!(
                    "{}{first}",
                    slots[..lead].iter().map(piece).collect::<String>()
                )
            });
        let text = match &prefix {
            Some(p) => format!("(?i)^(?:{exact}|{p}.*)$"),
            None => format!("(?i)^(?:{exact})$"),
        };
        let regex = regex::Regex::new(&text).ok()?;
        Some(Learnt { regex, text })
    }
}

impl std::fmt::Display for Learnt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The keys to look up in the whole ledger (DESIGN.md rule 12): the references and provider
/// ids of the lines (payments and returns) that no identifier pass paired with a loaded
/// payment, in the spellings an identifier pass could find them under (as written, as each
/// pass normalises them, and those in lower case, as UUIDs are stored). When the shape of our
/// ids is UUIDs or the configured pattern, only references of that shape can name a payment;
/// a learnt shape is a guess, so every reference is looked up.
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
            && (!shape.limits_lookup() || shape.line_matches(rules, l))
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
        // A learnt shape is tested on the same spellings.
        let learnt = learn(&["PAY-0001", "PAY-0002"]);
        assert!(has(&learnt, " pay-0999 "));
        assert!(has(&learnt, "PAY-0 999"));
        assert!(!has(&learnt, "INV-2231"));
    }

    #[test]
    fn a_partitioned_night_judges_each_line_by_its_own_partitions_ids() {
        let rules = RuleSet::compile(&[("d.toml".into(), crate::rules::DEFAULT_RULES.into())])
            .expect("rules");
        // Partition 1 numbers its payments in 3 digits, partition 2 in 7 (no literal prefix):
        // one process sees both (3 to 9 digits), each shard only its own.
        let pay = |id: &str, part: u32| {
            let mut p = crate::rules::kinds::testkit::payment(id, "R", 1, "EUR");
            p.partition = part;
            p
        };
        let payments = vec![pay("101", 1), pay("102", 1), pay("1000001", 2)];
        let line = |reference: &str, part: u32| {
            let mut l = crate::rules::kinds::testkit::line("R", 1, "EUR", 0);
            l.reference = Some(crate::model::Id::new(reference));
            let mut o = (*l.origin).clone();
            o.partition = part;
            l.origin = std::sync::Arc::new(o);
            l
        };
        let lines = vec![line("1234567", 1), line("1234567", 2)];
        let night = IdShape::for_run(None, &payments);
        let shapes = Shapes::for_run(None, &payments, true, &night);
        // Partition 1's ids have 3 to 5 digits: a 7-digit reference there is not one of its
        // ids; in partition 2 it is. One shape for the night would call both ours.
        assert_eq!(shapes.lines(&rules, &lines), [false, true]);
        let shard1 = Shapes::for_run(None, &payments[..2], true, &night);
        assert_eq!(shard1.lines(&rules, &lines[..1]), [false]);
        assert_eq!(
            Shapes::for_run(None, &payments, false, &night).lines(&rules, &lines),
            [true, true]
        );
    }

    /// The shape learnt from `ids` (Unknown when none).
    fn learn(ids: &[&str]) -> IdShape {
        Learnt::from_ids(ids.iter().copied().map(Box::<str>::from))
            .map_or(IdShape::Unknown, IdShape::Learnt)
    }

    /// The ids `prefix` + `n` for `n` in `range`, written with at least `width` digits.
    fn numbered(prefix: &str, width: usize, range: std::ops::RangeInclusive<u32>) -> Vec<String> {
        range.map(|n| format!("{prefix}{n:0width$}")).collect()
    }

    /// Asserts which of `ours` and `not_ours` `shape` takes for ours.
    fn takes(shape: &IdShape, ours: &[&str], not_ours: &[&str]) {
        for r in ours {
            assert!(shape.matches(r), "{r:?} should be ours under {shape:?}");
        }
        for r in not_ours {
            assert!(
                !shape.matches(r),
                "{r:?} should not be ours under {shape:?}"
            );
        }
    }

    /// References most ledgers must not take for theirs: invoice numbers and free text.
    const FREE_TEXT: [&str; 6] = [
        "INV-2231",
        "Invoice 2231",
        "RE: INV 2231",
        "Gehalt November",
        "",
        "PAYMENT NOVEMBER",
    ];

    #[test]
    fn a_padded_prefixed_ledger_learns_its_prefix_and_digits() {
        let ids = numbered("PAY-", 4, 1..=999);
        let shape = learn(&ids.iter().map(String::as_str).collect::<Vec<_>>());
        let IdShape::Learnt(l) = &shape else {
            panic!("no shape learnt: {shape:?}")
        };
        assert!(l.to_string().contains(r"PAY\-[0-9]{4,6}"), "{l}");
        takes(
            &shape,
            &[
                "PAY-0999",
                "PAY-1000",
                "PAY-123456",
                "pay-0042",
                // Near ours: our prefix and a digit, the rest garbled or cut.
                "PAY-12a",
                "PAY-12",
                "PAY-0012/2",
            ],
            &[
                "PAY-ROLL",
                "PAY-",
                "PAYMENT-0001",
                "XPAY-0001",
                "0001",
                "P-0001",
            ],
        );
        takes(&shape, &[], &FREE_TEXT);
    }

    #[test]
    fn an_unpadded_ledger_takes_shorter_numbers_too() {
        // P-1 … P-1500: no id pads, so P-7 is as much ours as P-1501.
        let ids = numbered("P-", 1, 1..=1500);
        let shape = learn(&ids.iter().map(String::as_str).collect::<Vec<_>>());
        takes(
            &shape,
            &["P-1", "P-7", "P-1501", "p-99", "P-150000", "P-12a"],
            &["PAY-0001", "P-", "P-X1", "1500", "Q-15"],
        );
        takes(&shape, &[], &FREE_TEXT);
    }

    #[test]
    fn a_numeric_ledger_takes_numbers_of_its_lengths_only() {
        // Digits alone: a number of up to two digits more than the longest id is ours (an
        // order number of that length costs a review case), anything with a letter is not.
        let ids = numbered("", 1, 1..=5000);
        let shape = learn(&ids.iter().map(String::as_str).collect::<Vec<_>>());
        takes(
            &shape,
            &["4711", "1", "0", "123456"],
            &["1234567", "12a", "INV-2231", "47-11", "2231 "],
        );
        takes(&shape, &[], &FREE_TEXT);
        // Zero-padded numbers: the short ones are not ours.
        let ids = numbered("", 6, 123..=999);
        let shape = learn(&ids.iter().map(String::as_str).collect::<Vec<_>>());
        takes(
            &shape,
            &["000124", "0001240", "12345678"],
            &["124", "123456789"],
        );
    }

    #[test]
    fn ledgers_of_mixed_or_wordy_ids_learn_nothing() {
        for ids in [
            // Two shapes: the current one and a legacy number.
            &["PAY-0001", "PAY-0002", "770412"][..],
            // A UUID among text ids.
            &["PAY-0001", "7d1c0f3e-9a4b-4c2d-8e6f-000000000001"],
            // Another separator.
            &["PAY-0001", "PAY_0002"],
            // Words, not ids.
            &["alice", "bob"],
            // Many different words before the number.
            &[
                "A-1", "B-2", "C-3", "D-4", "E-5", "F-6", "G-7", "H-8", "I-9",
            ],
            // Letters and digits in no order, with no literal part: any short word would fit.
            &["AB12", "C3D4", "9ZZ1"],
            // Short hex without a literal part.
            &["9f8a", "1b2c", "77e0"],
            // Too long to be an id's shape.
            &["PAY-00000000000000000000000000000000000000000000000000000000000001"],
        ] {
            assert!(
                matches!(learn(ids), IdShape::Unknown),
                "{ids:?} learnt {:?}",
                learn(ids)
            );
        }
        assert!(matches!(learn(&[]), IdShape::Unknown));
    }

    #[test]
    fn several_words_and_hex_runs_make_a_shape() {
        // Two kinds of ids of ours: both words are ours, other words are not.
        let shape = learn(&["PAY-0001", "RFD-0002", "PAY-0003"]);
        takes(&shape, &["RFD-0999", "PAY-0999", "rfd-7x"], &["INV-0999"]);
        // A prefix and hex: ours by prefix, not every hex string.
        let shape = learn(&["ord_00ff00ff00ff", "ord_1a2b3c4d5e6f", "ord_999999999999"]);
        takes(
            &shape,
            &["ord_abcdefabcdef", "ORD_0123", "ord_1zz"],
            &["abcdefabcdef", "inv_00ff00ff00ff", "ord_"],
        );
        // 24-digit hex (object ids) without a prefix: 24 to 26 hex digits.
        let shape = learn(&[
            "65a1f0c2e4b0a1b2c3d4e5f6",
            "65a1f0c2e4b0a1b2c3d4e5f7",
            "0123456789abcdef01234567",
        ]);
        takes(
            &shape,
            &["65A1F0C2E4B0A1B2C3D4E5F8"],
            &["65a1f0c2", "INV-2231", "zz a1f0c2e4b0a1b2c3d4e5f8"],
        );
        // A date inside.
        let shape = learn(&["PAY-20261110-0001", "PAY-20261111-0042"]);
        takes(&shape, &["PAY-20261201-0007"], &["INV-20261201-0007"]);
    }

    #[test]
    fn the_run_learns_only_without_a_pattern_and_when_ids_are_not_uuids() {
        use crate::rules::kinds::testkit::payment;
        let uuids = [
            payment("7d1c0f3e-9a4b-4c2d-8e6f-000000000001", "R", 1, "EUR"),
            payment("7D1C0F3E-9A4B-4C2D-8E6F-000000000002", "R", 1, "EUR"),
        ];
        assert!(matches!(IdShape::for_run(None, &uuids), IdShape::Uuid));
        let pay = [
            payment("PAY-0001", "R", 1, "EUR"),
            payment("PAY-0002", "R", 1, "EUR"),
        ];
        let shape = IdShape::for_run(None, &pay);
        assert!(matches!(shape, IdShape::Learnt(_)), "{shape:?}");
        assert!(shape.is_known() && !shape.limits_lookup());
        let r = regex::Regex::new("^X[0-9]+$").expect("regex");
        let shape = IdShape::for_run(Some(&r), &pay);
        assert!(matches!(shape, IdShape::Pattern(_)) && shape.limits_lookup());
        assert!(shape.matches("X1") && !shape.matches("PAY-0003"));
        assert!(matches!(IdShape::for_run(None, &[]), IdShape::Unknown));
        let mixed = [
            payment("PAY-0001", "R", 1, "EUR"),
            payment("42", "R", 1, "EUR"),
        ];
        assert!(matches!(IdShape::for_run(None, &mixed), IdShape::Unknown));
    }
}
