//! Reading a night's statement files: every configured source over the night's days on a
//! blocking thread, each line marked with its source's partition. Used by the plan, by a
//! shard for the other partitions' sources (`run::foreign`), and by the gather (the bank
//! sources every partition shares).

use crate::sources::{self, StatementLine};
use crate::timeparse::{self, DAY, Micros};
use anyhow::Result;
use std::sync::Arc;
use std::time::Instant;

/// The loads of some sources and the time they took (ms), on a blocking thread.
pub(crate) type Loading = tokio::task::JoinHandle<Result<(Vec<sources::SourceLoad>, u64)>>;

/// Loads every configured source over `days` on a blocking thread: the loads and the time it
/// took (ms).
pub(crate) fn load_statements(
    cfg: &crate::config::Config,
    days: (chrono::NaiveDate, chrono::NaiveDate),
    as_of: Micros,
) -> Loading {
    load_sources(cfg.sources.clone(), cfg.partition.is_some(), days, as_of)
}

/// Loads `sources_cfg` over `days` on a blocking thread (see [`load_statements`]); in a
/// `partitioned` job each line is marked with its source's partition.
pub(crate) fn load_sources(
    sources_cfg: Vec<crate::sources::config::SourceConfig>,
    partitioned: bool,
    days: (chrono::NaiveDate, chrono::NaiveDate),
    as_of: Micros,
) -> Loading {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let loads = sources_cfg
            .iter()
            .map(|src| {
                let mut load = sources::load(src, days, as_of)?;
                match &src.partition {
                    Some(value) => bind_partition(&mut load.lines, crate::partition::id(value)),
                    None if partitioned => {
                        bind_partition(&mut load.lines, crate::partition::SHARED)
                    }
                    None => {}
                }
                Ok(load)
            })
            .collect::<Result<Vec<_>>>()?;
        // The job's bounds against the pod's memory, once a night (the same on every source).
        let mut loads = loads;
        if let (Some(warning), Some(first)) = (
            sources_cfg.first().and_then(|s| s.limits.memory_warning()),
            loads.first_mut(),
        ) {
            tracing::warn!(warning = %warning, "Memory limit.");
            first.warnings.push(warning);
        }
        Ok((loads, started.elapsed().as_millis() as u64))
    })
}

/// The days a night's statements are read over: its scope and every window that reaches
/// into it.
pub(crate) fn statement_days(
    cfg: &crate::config::Config,
    rules: &crate::rules::RuleSet,
    (t0, t1): (Micros, Micros),
) -> (chrono::NaiveDate, chrono::NaiveDate) {
    let (before, after) = rules.evidence_window();
    let carry = cfg.carry_over_days * DAY;
    (
        timeparse::local_date(t0 - carry - before - after, cfg.timezone),
        timeparse::local_date(t1 + after + before, cfg.timezone),
    )
}

/// Marks every line of a source bound to a partition as that partition's (its origins are
/// shared per file: one new origin per file).
fn bind_partition(lines: &mut [StatementLine], partition: u32) {
    let mut last: Option<(Arc<sources::Origin>, Arc<sources::Origin>)> = None;
    for l in lines {
        if l.origin.partition == partition {
            continue;
        }
        match &last {
            Some((old, new)) if Arc::ptr_eq(old, &l.origin) => l.origin = Arc::clone(new),
            _ => {
                let new = Arc::new(sources::Origin {
                    partition,
                    ..(*l.origin).clone()
                });
                let old = std::mem::replace(&mut l.origin, Arc::clone(&new));
                last = Some((old, new));
            }
        }
    }
}
