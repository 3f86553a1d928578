//! `[shadow]`: the night planned a second time with the shadow rules, on the same evidence
//! (the same files, the ledger before tonight's commit, the same as-of), applying nothing and
//! asking no provider. What it would change goes into the summary (`shadow`), and from there
//! into the report and the email: counts by risk, the first flips, and its new automatic
//! decisions against what reviewers decided so far ([`crate::flips`], as `recon backtest`
//! compares). A shadow that fails (rules that do not validate, a plan that fails) is said in
//! the summary; the night is unaffected.

use super::plan::Plan;
use super::{Job, RunOptions};
use crate::flips;
use crate::outputs::summary::{ShadowFlip, ShadowSummary};
use crate::rules::RuleSet;
use anyhow::Result;
use rust_decimal::Decimal;
use std::time::Instant;

/// How many flips the summary lists.
const FIRST: usize = 10;
/// The longest error text the summary keeps.
const MAX_ERROR: usize = 400;

/// The shadow rules' plan of the night, projected ([`flips::Projection`]), or why it could
/// not be made; None without `[shadow]`. Made before the night's own plan, so the two never
/// hold their evidence at once.
pub(super) async fn plan_first(
    job: Job<'_>,
    opts: &RunOptions,
) -> Option<(Result<flips::Projection>, u64)> {
    let shadow = job.cfg.shadow.as_ref()?;
    let started = Instant::now();
    let projected = Box::pin(plan_projected(job, opts, &shadow.rules_dir)).await;
    Some((projected, started.elapsed().as_millis() as u64))
}

async fn plan_projected(
    job: Job<'_>,
    opts: &RunOptions,
    dir: &std::path::Path,
) -> Result<flips::Projection> {
    let mut cfg = job.cfg.clone();
    cfg.rules_dir = Some(dir.to_path_buf());
    let rules = RuleSet::for_job(&cfg)?;
    let shadow_job = Job {
        rules: &rules,
        ask_providers: false,
        ..job
    };
    let shadow_opts = RunOptions {
        dry_run: true,
        ..opts.clone()
    };
    let planned = Box::pin(super::plan::plan(
        shadow_job,
        &shadow_opts,
        "shadow",
        &mut Default::default(),
    ))
    .await?;
    Ok(flips::Projection::of(planned.data.flip_rows()))
}

/// What the shadow rules (`projected`, from [`plan_first`]) would change on the night `live`
/// planned.
pub(super) async fn compare(
    job: Job<'_>,
    opts: &RunOptions,
    projected: Result<flips::Projection>,
    live: &Plan,
) -> Option<ShadowSummary> {
    let shadow = job.cfg.shadow.as_ref()?;
    let rules_dir = shadow.rules_dir.display().to_string();
    let compared = match projected {
        Ok(mut p) => Box::pin(compare_with(job, opts, &mut p, live)).await,
        Err(e) => Err(e),
    };
    let summary = match compared {
        Ok(s) => s,
        Err(e) => {
            let mut why = format!("{e:#}");
            if why.len() > MAX_ERROR {
                let cut = (0..=MAX_ERROR)
                    .rev()
                    .find(|&i| why.is_char_boundary(i))
                    .unwrap_or(0);
                why.truncate(cut);
                why.push('…');
            }
            tracing::warn!(error = %why, "The shadow rules were not planned.");
            ShadowSummary {
                rules_dir: rules_dir.clone(),
                error: Some(why),
                ..Default::default()
            }
        }
    };
    tracing::info!(
        rules = %rules_dir,
        flips = summary.flips(),
        new_transitions = summary.to_transition,
        "Shadow rules compared."
    );
    Some(summary)
}

async fn compare_with(
    job: Job<'_>,
    opts: &RunOptions,
    projected: &mut flips::Projection,
    live: &Plan,
) -> Result<ShadowSummary> {
    let dir = job
        .cfg
        .shadow
        .as_ref()
        .map(|s| s.rules_dir.clone())
        .unwrap_or_default();
    let valuation = job.cfg.reporting.as_ref().map(|r| r.valuation(opts.from).0);
    let mut found = flips::flips(
        ("tonight", opts.from),
        live.data.flip_rows(),
        projected,
        valuation.as_ref(),
    );
    // A row a provider's answer decided tonight: the shadow asked no provider.
    let all = found.len();
    found.retain(|f| !f.before.rule.starts_with("status_api:"));
    let not_compared = all - found.len();
    let reviewers = flips::Reviewers::read(job.db).await?;
    let mut agreement = flips::Agreement::default();
    for f in &mut found {
        let verdict = reviewers.verdict(f);
        agreement.add(f, verdict);
    }
    // Most dangerous first, then by id (the order they were found in).
    found.sort_by_key(|f| f.risk);
    let count = |r: flips::Risk| found.iter().filter(|f| f.risk == r).count();
    let to_value: Option<Decimal> = valuation.as_ref().map(|_| {
        found
            .iter()
            .filter(|f| f.risk == flips::Risk::ToTransition)
            .filter_map(|f| f.value)
            .sum()
    });
    Ok(ShadowSummary {
        rules_dir: dir.display().to_string(),
        error: None,
        to_transition: count(flips::Risk::ToTransition),
        to_transition_value: match (to_value, job.cfg.reporting.as_ref()) {
            (Some(v), Some(r)) => Some(format!(
                "{} {}",
                crate::report::cases::display_value(v, r.currency),
                r.currency
            )),
            _ => None,
        },
        from_transition: count(flips::Risk::FromTransition),
        outcome_only: count(flips::Risk::OutcomeOnly),
        not_compared,
        first: found
            .iter()
            .take(FIRST)
            .map(|f| ShadowFlip {
                id: f.id.clone(),
                amount: f.amount.clone(),
                before: f.before.label(),
                after: f.after.label(),
                rule: f.after.rule.clone(),
                reviewers: f
                    .reviewers
                    .as_ref()
                    .map(|v| v.text().to_string())
                    .unwrap_or_default(),
            })
            .collect(),
        reviewers_same: agreement.same,
        reviewers_different: agreement.different.len(),
        reviewers_dismissed: agreement.dismissed,
        reviewers_escalated: agreement.escalated,
        reviewers_undecided: agreement.undecided,
    })
}
