//! Property tests of the matcher and classifier (DESIGN.md rule 1 and 6): generated small
//! ledgers and statements with many collisions (3 recipients, 3 amounts, 2 currencies).

use proptest::prelude::*;
use recon::config::LineKind;
use recon::ledger::{Payment, Status};
use recon::matching;
use recon::outcome::{self, Context, Outcome, ResultRow};
use recon::rules::RuleSet;
use recon::sources::StatementLine;
use recon::timeparse::{DAY, HOUR, MINUTE};
use std::collections::BTreeSet;

const BASE: i64 = 1_794_268_800_000_000; // 2026-11-10T00:00:00Z
const RECIPIENTS: [&str; 3] = ["DE01AAA", "DE02BBB", "FR03CCC"];
const AMOUNTS: [i64; 3] = [10_000, 20_000, 25_000];
const CURRENCIES: [&str; 2] = ["EUR", "JPY"];

/// (recipient, amount, currency, status, start minute, provider id) indices.
type PaymentSpec = (usize, usize, usize, Status, i64, Option<u32>);
/// (recipient, amount, currency, booked minute, reference, is refund) indices.
type LineSpec = (usize, usize, usize, i64, Option<u32>, bool);

fn status() -> impl Strategy<Value = Status> {
    prop::sample::select(Status::ALL.to_vec())
}

prop_compose! {
    fn payment()(rcpt in 0..3usize, amt in 0..3usize, cur in 0..2usize, st in status(),
                 start_min in 0..(3 * 24 * 60i64), ppid in prop::option::weighted(0.3, 0..20u32))
                 -> (usize, usize, usize, Status, i64, Option<u32>) {
        (rcpt, amt, cur, st, start_min, ppid)
    }
}

prop_compose! {
    fn line()(rcpt in 0..3usize, amt in 0..3usize, cur in 0..2usize,
              booked_min in 0..(5 * 24 * 60i64), reference in prop::option::weighted(0.4, 0..14u32),
              refund in prop::bool::weighted(0.1))
              -> (usize, usize, usize, i64, Option<u32>, bool) {
        (rcpt, amt, cur, booked_min, reference, refund)
    }
}

fn build(
    ps: &[PaymentSpec],
    ls: &[LineSpec],
) -> (Vec<Payment>, Vec<(u32, String)>, Vec<StatementLine>) {
    let payments: Vec<Payment> = ps
        .iter()
        .enumerate()
        .map(|(i, &(r, a, c, st, m, ppid))| Payment {
            payment_id: format!("P{i:02}").into(),
            recipient: RECIPIENTS[r].into(),
            amount_minor: AMOUNTS[a],
            currency: CURRENCIES[c],
            current_status: st,
            status: st,
            attempt_id: (st != Status::Pending).then(|| format!("A{i}").into()),
            provider_payment_id: ppid.map(|p| format!("T{p:02}").into()),
            started_at: (st != Status::Pending).then_some(BASE + m * MINUTE),
            first_started_at: (st != Status::Pending).then_some(BASE + m * MINUTE),
            created_at: BASE + m * MINUTE,
            followup: None,
            recon: None,
            human: None,
            partition: recon::partition::NONE,
        })
        .collect();
    let provider_ids = payments
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            p.provider_payment_id
                .as_ref()
                .map(|id| (i as u32, id.to_string()))
        })
        .collect();
    let lines = ls
        .iter()
        .enumerate()
        .map(|(j, &(r, a, c, m, reference, refund))| StatementLine {
            origin: recon::sources::Origin::new("psp".into(), "st.csv".into(), None),
            line_no: j as u64 + 2,
            provider_txn_id: Some(format!("T{j:02}").into()),
            reference: reference.map(|p| format!("p{p:02}").into()),
            recipient: RECIPIENTS[r].into(),
            amount_minor: AMOUNTS[a],
            currency: CURRENCIES[c],
            booked_at: BASE + m * MINUTE,
            booked_to: BASE + m * MINUTE,
            booked_day: None,
            kind: if refund {
                LineKind::Refund
            } else {
                LineKind::Payment
            },
            entry: None,
            batch: None,
            role: recon::config::Role::Provider,
            content_id: 0,
            original: None,
        })
        .collect();
    (payments, provider_ids, lines)
}

fn classify(
    payments: &[Payment],
    provider_ids: &[(u32, String)],
    lines: &[StatementLine],
    complete: bool,
) -> Vec<ResultRow> {
    let rules = RuleSet::load(None).expect("rules");
    let coverage = if complete {
        vec![vec![(BASE - DAY, BASE + 10 * DAY)]]
    } else {
        vec![vec![(BASE - DAY, BASE + DAY)]]
    };
    let in_scope = vec![true; payments.len()];
    let report_line = vec![true; lines.len()];
    let ctx = Context {
        as_of: BASE + 10 * DAY,
        stale_after: 30 * MINUTE,
        settlement_lag: 24 * HOUR,
        coverage: &coverage,
        source_partitions: &[],
        in_scope: &in_scope,
        watch: &[],
        report_range: (BASE - 10 * DAY, BASE + 20 * DAY),
        report_line: &report_line,
        named_only: &[],
        accepted: &Default::default(),
        run_day: "2026-11-10",
    };
    let elig = ctx.eligibility(payments);
    let m = matching::run(payments, provider_ids, lines, &rules, &elig).expect("matching");
    outcome::classify(payments, lines, &m, &rules, &ctx)
}

/// Rows as comparable text, independent of input order.
fn canonical(
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> BTreeSet<String> {
    rows.iter()
        .map(|r| {
            let mut ids: Vec<String> = r
                .lines
                .iter()
                .map(|&l| lines[l as usize].uid().into_owned())
                .collect();
            ids.sort();
            format!(
                "{}|{}|{}|{}",
                r.outcome.as_str(),
                r.payment
                    .map(|p| payments[p as usize].payment_id.to_string())
                    .unwrap_or_default(),
                ids.join(";"),
                r.rule
            )
        })
        .collect()
}

/// Brute force (a test may loop): lines a fuzzy pass could pair with payment `p`.
fn window_candidates(p: &Payment, lines: &[StatementLine]) -> usize {
    let Some(s) = p.started_at else { return 0 };
    lines
        .iter()
        .filter(|l| {
            l.kind == LineKind::Payment
                && l.recipient == p.recipient
                && l.currency == p.currency
                && l.amount_minor == p.amount_minor
                && l.booked_at >= s - 10 * MINUTE
                && l.booked_at <= s + 72 * HOUR
        })
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Every payment lands in exactly one row; every line has at most one row of its own, and a
    /// line without one belongs to exactly one payment's row.
    #[test]
    fn every_input_lands_in_exactly_one_outcome(
        ps in prop::collection::vec(payment(), 0..12),
        ls in prop::collection::vec(line(), 0..12),
        complete in any::<bool>(),
    ) {
        let (payments, ids, lines) = build(&ps, &ls);
        let rows = classify(&payments, &ids, &lines, complete);
        for i in 0..payments.len() {
            let n = rows.iter().filter(|r| r.payment == Some(i as u32)).count();
            prop_assert_eq!(n, 1, "payment {} has {} rows", i, n);
        }
        for j in 0..lines.len() {
            let own = rows.iter().filter(|r| r.payment.is_none() && r.lines.contains(&(j as u32))).count();
            let in_payment_rows = rows.iter().filter(|r| r.payment.is_some() && r.lines.contains(&(j as u32))).count();
            prop_assert!(own <= 1, "line {} has {} own rows", j, own);
            if own == 0 {
                prop_assert_eq!(in_payment_rows, 1, "line {} without own row must belong to exactly one payment row", j);
            }
        }
    }

    /// Shuffling the input rows never changes the outcomes.
    #[test]
    fn input_order_never_changes_the_result(
        ps in prop::collection::vec(payment(), 0..10),
        ls in prop::collection::vec(line(), 0..10),
        seed in any::<u64>(),
    ) {
        let (payments, ids, lines) = build(&ps, &ls);
        let expected = canonical(&classify(&payments, &ids, &lines, true), &payments, &lines);
        // A deterministic permutation from the seed (rotate + reverse).
        let mut p2 = payments.clone();
        let mut l2 = lines.clone();
        let (np, nl) = (p2.len(), l2.len());
        if np > 0 { p2.rotate_left(seed as usize % np); }
        if nl > 0 { l2.rotate_left((seed >> 8) as usize % nl); }
        if seed & 1 == 1 { p2.reverse(); l2.reverse(); }
        let ids2: Vec<(u32, String)> = p2.iter().enumerate()
            .filter_map(|(i, p)| p.provider_payment_id.as_ref().map(|id| (i as u32, id.to_string()))).collect();
        let got = canonical(&classify(&p2, &ids2, &l2, true), &p2, &l2);
        prop_assert_eq!(got, expected);
    }

    /// Safety: an automatic decision is only ever taken on unique evidence.
    #[test]
    fn automatic_decisions_only_on_unique_evidence(
        ps in prop::collection::vec(payment(), 0..12),
        ls in prop::collection::vec(line(), 0..12),
    ) {
        let (payments, ids, lines) = build(&ps, &ls);
        let rows = classify(&payments, &ids, &lines, true);
        for r in &rows {
            let Some(pi) = r.payment else { continue };
            let p = &payments[pi as usize];
            match r.outcome {
                Outcome::Matched | Outcome::ResolvedSucceeded => {
                    prop_assert_eq!(r.lines.len(), 1);
                    let l = &lines[r.lines[0] as usize];
                    prop_assert_eq!(l.amount_minor, p.amount_minor);
                    prop_assert_eq!(l.currency, p.currency);
                    if &*r.rule == "recipient_amount_window" {
                        // Lines an identifier cleanly gave to another payment are not candidates.
                        let clean_elsewhere = |j: usize| rows.iter().any(|q| {
                            q.payment.is_some_and(|qi| qi != pi) && &*q.rule == "identifier"
                                && q.lines.contains(&(j as u32))
                                && { let qp = &payments[q.payment.unwrap_or(0) as usize];
                                     lines[j].amount_minor == qp.amount_minor && lines[j].currency == qp.currency
                                     && lines[j].recipient == qp.recipient }
                        });
                        let open_lines: Vec<StatementLine> = lines.iter().enumerate()
                            .filter(|(j, _)| !clean_elsewhere(*j)).map(|(_, l)| l.clone()).collect();
                        prop_assert_eq!(window_candidates(p, &open_lines), 1);
                        // ... and the line fits no other payment that an identifier left open.
                        let clean_payment = |qi: usize| rows.iter().any(|q| q.payment == Some(qi as u32)
                            && &*q.rule == "identifier"
                            && q.lines.iter().all(|&j| lines[j as usize].amount_minor == payments[qi].amount_minor
                                && lines[j as usize].currency == payments[qi].currency
                                && lines[j as usize].recipient == payments[qi].recipient));
                        let others = payments.iter().enumerate().filter(|(qi, q)| *qi != pi as usize
                            && q.status != Status::Pending && !clean_payment(*qi)
                            && window_candidates(q, std::slice::from_ref(l)) == 1).count();
                        prop_assert_eq!(others, 0, "line also fits another payment");
                    }
                }
                Outcome::ResolvedFailed => {
                    // No line at all for this recipient+currency in the window, any amount.
                    let s = p.started_at.expect("started");
                    // Lines claimed by exactly one payment are that payment's evidence.
                    let claimed = |j: usize| {
                        !rows.iter().any(|r| r.payment.is_none() && r.lines.contains(&(j as u32)))
                            && rows.iter().filter(|r| r.payment.is_some() && r.lines.contains(&(j as u32))).count() == 1
                    };
                    // A line whose identifier names another payment is a look-alike only with
                    // exactly this payment's money (issue 30).
                    let names_another = |l: &StatementLine| payments.iter().enumerate().any(|(qi, q)| {
                        qi != pi as usize
                            && (l.reference().is_some_and(|r| r.eq_ignore_ascii_case(&q.payment_id.text()))
                                || (l.provider_txn_id.is_some() && l.provider_txn_id == q.provider_payment_id))
                    });
                    let near = lines.iter().enumerate().filter(|(j, _)| !claimed(*j)).map(|(_, l)| l)
                        .filter(|l| !names_another(l) || (l.amount_minor == p.amount_minor && l.currency == p.currency))
                        .any(|l| l.kind == LineKind::Payment
                        && l.recipient == p.recipient && l.currency == p.currency
                        && l.booked_at >= s - 10 * MINUTE && l.booked_at <= s + 72 * HOUR);
                    prop_assert!(!near, "RESOLVED_FAILED with a line in the window");
                }
                _ => {}
            }
        }
    }

    /// Two identical twins without reference are never auto-matched, whatever the lines.
    #[test]
    fn identical_twins_are_never_auto_matched(
        rcpt in 0..3usize, amt in 0..3usize, st in prop::sample::select(vec![Status::Succeeded, Status::Unknown]),
        start_min in 0..600i64, ls in prop::collection::vec(line(), 0..6),
    ) {
        let ps = vec![(rcpt, amt, 0, st, start_min, None), (rcpt, amt, 0, st, start_min, None)];
        // Lines never carry the twins' references.
        let ls: Vec<_> = ls.into_iter().map(|(r, a, c, m, _, refund)| (r, a, c, m, None, refund)).collect();
        let (payments, ids, lines) = build(&ps, &ls);
        let rows = classify(&payments, &ids, &lines, true);
        for r in rows.iter().filter(|r| r.payment.is_some()) {
            prop_assert!(!matches!(r.outcome, Outcome::Matched | Outcome::ResolvedSucceeded),
                "twin auto-matched: {:?}", r);
        }
    }
}

/// Recipients as a ledger or a statement may write the same account: spaces, case, width.
const SPELLINGS: [[&str; 3]; 3] = [
    ["DE01AAA", "de01 aaa", "ＤＥ０１ＡＡＡ"],
    ["DE02BBB", "DE02 BBB", "de02bbb"],
    ["FR03CCC", "fr03ccc", "FR03 CCC"],
];

prop_compose! {
    /// A line of any kind and role, booked at an instant or on a whole day (date only).
    fn any_line()(rcpt in 0..3usize, spelling in 0..3usize, amt in 0..3usize, cur in 0..2usize,
                  booked_min in 0..(5 * 24 * 60i64), date_only in any::<bool>(),
                  kind in prop::sample::select(vec![LineKind::Payment, LineKind::Refund, LineKind::Fee]),
                  bank in any::<bool>(), negative in any::<bool>())
                  -> StatementLine {
        let at = BASE + booked_min * MINUTE;
        let (at, to, day) = if date_only {
            let start = at - at.rem_euclid(DAY);
            (start, start + DAY - 1, Some(chrono::NaiveDate::from_ymd_opt(2026, 11, 10).expect("date")))
        } else {
            (at, at, None)
        };
        StatementLine {
            origin: recon::sources::Origin::new("s".into(), "f".into(), None),
            line_no: 1,
            provider_txn_id: None,
            reference: None,
            recipient: SPELLINGS[rcpt][spelling].into(),
            amount_minor: if negative { -AMOUNTS[amt] } else { AMOUNTS[amt] },
            currency: CURRENCIES[cur],
            booked_at: at,
            booked_to: to,
            booked_day: day,
            kind,
            entry: None,
            batch: None,
            role: if bank { recon::config::Role::Bank } else { recon::config::Role::Provider },
            content_id: 0,
            original: None,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Issue 12 point 6: the Polars join of every fuzzy criterion (each fuzzy pass, the
    /// near-miss gate, return matching) finds exactly the pairs the scalar check of one pair
    /// accepts — the criterion that explain and ticket evidence print — over recipients
    /// spelt differently, date-only bookings, bank debits and credits, refunds and fees, and
    /// payments retried after an earlier attempt (the near-miss gate's window opens at the
    /// earliest attempt's start).
    #[test]
    fn the_join_and_the_pair_checks_agree(
        ps in prop::collection::vec(payment(), 0..10),
        spellings in prop::collection::vec(0..3usize, 10),
        earlier in prop::collection::vec(prop::option::weighted(0.4, 1..(3 * 24 * 60i64)), 10),
        ls in prop::collection::vec(any_line(), 0..12),
    ) {
        let (mut payments, _, _) = build(&ps, &[]);
        for (p, (&(r, ..), s)) in payments.iter_mut().zip(ps.iter().zip(&spellings)) {
            p.recipient = SPELLINGS[r][*s].into();
        }
        for (p, e) in payments.iter_mut().zip(&earlier) {
            if let (Some(s), Some(e)) = (p.started_at, e) {
                p.first_started_at = Some(s - e * MINUTE);
            }
        }
        let rules = RuleSet::load(None).expect("rules");
        let mut criteria: Vec<matching::criteria::Fuzzy<'_>> = rules
            .passes
            .iter()
            .filter_map(matching::criteria::Fuzzy::of_pass)
            .collect();
        criteria.push(matching::criteria::Fuzzy::near_miss(&rules));
        criteria.push(matching::criteria::Fuzzy::returns(&rules, rules.return_reach));
        for fz in &criteria {
            let joined: BTreeSet<(u32, u32)> =
                matching::fuzzy_join(&payments, &ls, fz).expect("join").into_iter().collect();
            let mut brute = BTreeSet::new();
            for (j, l) in ls.iter().enumerate() {
                for (i, p) in payments.iter().enumerate() {
                    if fz.holds(p, l) {
                        brute.insert((j as u32, i as u32));
                    }
                    // The printed checks say the same as the verdict.
                    prop_assert_eq!(fz.checks(p, l).iter().all(|c| c.ok), fz.holds(p, l));
                }
            }
            prop_assert_eq!(&joined, &brute, "criterion {:?}", fz);
        }
    }
}
