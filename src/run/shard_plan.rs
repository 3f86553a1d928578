//! `recon plan-shards`: how a night's partitions split over its shards, before a cluster runs
//! them. Counts the payments each shard would load (the night's ledger window, as a run loads
//! it), estimates each pod's memory from them, and warns where a shard would not fit the pods'
//! limit, naming the fix (`[partition.assign]`, more shards).

use super::Part;
use super::data::RunOptions;
use super::session::{Secrets, Session};
use crate::config::Config;
use crate::exit::{Failure, fail};
use crate::partition::Shard;
use anyhow::Result;
use chrono::Utc;
use std::collections::BTreeMap;

/// A shard's peak memory per payment it loads, per payment of the whole night (a shard also
/// reads the other partitions' statement files: its peak, while it loads, grows with the
/// night), and what a process needs besides. Fitted to the shards measured on PostgreSQL, 4 at
/// once (docs/benchmark.md, 2026-12-05): 389 MB for 174k and 613 MB for 485k payments of a 1M
/// night, 3.40 GB for 1.72M and 4.66 GB for 4.86M of a 10M night; no measured shard is above
/// its estimate by more than a few percent.
pub const BYTES_PER_PAYMENT: u64 = 650;
/// See [`BYTES_PER_PAYMENT`].
pub const BYTES_PER_NIGHT_PAYMENT: u64 = 230;
/// See [`BYTES_PER_PAYMENT`].
pub const FIXED_BYTES: u64 = 64 << 20;

/// One shard of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLoad {
    /// The shard.
    pub shard: Shard,
    /// Its partitions with their payments, most payments first.
    pub partitions: Vec<(String, usize)>,
    /// The payments it loads.
    pub payments: usize,
    /// Its estimated peak memory.
    pub bytes: u64,
}

/// How a night splits.
#[derive(Debug, Clone)]
pub struct ShardPlan {
    /// The night.
    pub night: chrono::NaiveDate,
    /// Every payment the shards load together.
    pub total: usize,
    /// Per shard, in index order.
    pub shards: Vec<ShardLoad>,
    /// The pods' memory limit the plan is checked against.
    pub limit: u64,
}

/// The estimated peak memory of a shard that loads `payments` of a night of `night` payments.
pub fn memory_for(payments: usize, night: usize) -> u64 {
    FIXED_BYTES + BYTES_PER_PAYMENT * payments as u64 + BYTES_PER_NIGHT_PAYMENT * night as u64
}

/// Counts night `opts.from`'s payments per partition and splits them over `count` shards
/// (default: `[partition] shards`), checked against `limit` bytes a pod.
pub async fn plan_shards(
    cfg: &Config,
    opts: &RunOptions,
    count: Option<u32>,
    limit: u64,
) -> Result<ShardPlan> {
    let partition = cfg.partition_for("recon plan-shards")?;
    let Some(count) = count.or(partition.shards) else {
        return Err(fail(
            Failure::Config,
            format!(
                "{}: how many shards? Set `shards` in [partition] or pass --shards N",
                cfg.path.display()
            ),
        ));
    };
    let Some(first) = Shard::new(0, count) else {
        return Err(fail(
            Failure::Config,
            format!("--shards {count}: a night has at least one shard"),
        ));
    };
    partition.check_shard(first)?;
    let secrets = Secrets {
        status_api: false,
        smtp: false,
    };
    let session = Session::check(cfg, secrets)?
        .open(Utc::now().timestamp_micros())
        .await?;
    let ledger = super::plan::night_ledger(session.job(Part::Whole), opts).await;
    session.close().await;
    let ledger = ledger?;
    let mut by_value: BTreeMap<String, usize> = BTreeMap::new();
    for p in &ledger.payments {
        *by_value
            .entry(crate::partition::value(p.partition))
            .or_default() += 1;
    }
    let mut shards: Vec<ShardLoad> = (0..count)
        .map(|index| ShardLoad {
            shard: Shard { index, count },
            partitions: Vec::new(),
            payments: 0,
            bytes: 0,
        })
        .collect();
    for (value, n) in by_value {
        let s = &mut shards[partition.shard_of(&value, count) as usize];
        s.payments += n;
        s.partitions.push((value, n));
    }
    let night = ledger.payments.len();
    for s in &mut shards {
        s.partitions
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        s.bytes = memory_for(s.payments, night);
    }
    Ok(ShardPlan {
        night: opts.from,
        total: ledger.payments.len(),
        shards,
        limit,
    })
}

/// `1.23 GB` (rounded to the nearest 10 MB; integers only).
fn gb(bytes: u64) -> String {
    let hundredths = bytes.saturating_add(5_000_000) / 10_000_000;
    format!("{}.{:02} GB", hundredths / 100, hundredths % 100)
}

/// `part` of `whole` as `12.3 %` (rounded to a tenth).
fn share(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "0.0 %".to_string();
    }
    let tenths = (part as u128 * 1000 + whole as u128 / 2) / whole as u128;
    format!("{}.{} %", tenths / 10, tenths % 10)
}

impl ShardPlan {
    /// The shards whose estimate exceeds the limit.
    pub fn over_limit(&self) -> Vec<&ShardLoad> {
        self.shards
            .iter()
            .filter(|s| s.bytes > self.limit)
            .collect()
    }

    /// The plan as the terminal shows it: one line per shard, then the warnings.
    pub fn text(&self) -> String {
        let mut out = format!(
            "night {}: {} payments loaded by {} shard(s); memory estimated as {} + {} bytes a \
             payment of the shard + {} bytes a payment of the night (docs/benchmark.md), pod \
             limit {}\n",
            self.night,
            self.total,
            self.shards.len(),
            gb(FIXED_BYTES),
            BYTES_PER_PAYMENT,
            BYTES_PER_NIGHT_PAYMENT,
            gb(self.limit)
        );
        out.push_str(&format!(
            "{:<7} {:>9}  {:>7}  {:>9}  partitions (payments)\n",
            "shard", "payments", "share", "memory"
        ));
        for s in &self.shards {
            let parts: Vec<String> = s
                .partitions
                .iter()
                .map(|(v, n)| format!("{} ({n})", if v.is_empty() { "(none)" } else { v }))
                .collect();
            out.push_str(&format!(
                "{:<7} {:>9}  {:>7}  {:>9}  {}\n",
                s.shard.to_string(),
                s.payments,
                share(s.payments, self.total),
                gb(s.bytes),
                if parts.is_empty() {
                    "-".to_string()
                } else {
                    parts.join(", ")
                }
            ));
        }
        for s in self.over_limit() {
            let biggest = s.partitions.first().map(|(v, _)| v.as_str()).unwrap_or("");
            let idle = self
                .shards
                .iter()
                .min_by_key(|o| o.payments)
                .map_or(0, |o| o.shard.index);
            out.push_str(&format!(
                "warning: shard {} needs ~{} (estimated), above the pod limit {}: give its \
                 partitions their own shards with [partition.assign] (e.g. `{biggest} = {idle}`, \
                 the least loaded shard), or run more shards\n",
                s.shard,
                gb(s.bytes),
                gb(self.limit)
            ));
        }
        out
    }
}

/// Parses a Kubernetes memory quantity (`6Gi`, `6144Mi`, `6G`, `500M`, bytes).
pub fn parse_memory(text: &str) -> Result<u64> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => u64::MAX,
    };
    match digits.parse::<u64>() {
        Ok(n) if factor != u64::MAX => Ok(n.saturating_mul(factor)),
        _ => Err(fail(
            Failure::Config,
            format!("--memory-limit {text:?}: a memory quantity such as 6Gi, 6144Mi or 6G"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_quantities_read_as_kubernetes_writes_them() {
        assert_eq!(parse_memory("6Gi").unwrap(), 6 << 30);
        assert_eq!(parse_memory("6144Mi").unwrap(), 6 << 30);
        assert_eq!(parse_memory("6G").unwrap(), 6_000_000_000);
        assert_eq!(parse_memory("1048576").unwrap(), 1 << 20);
        for bad in ["6 GB", "Gi", "-1Gi", "6gi", ""] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_and_shares_are_rounded_in_integers() {
        assert_eq!(gb(0), "0.00 GB");
        assert_eq!(gb(6 << 30), "6.44 GB");
        assert_eq!(gb(394_999_999), "0.39 GB");
        assert_eq!(gb(395_000_000), "0.40 GB");
        assert_eq!(share(3942, 20040), "19.7 %");
        assert_eq!(share(12102, 20040), "60.4 %");
        assert_eq!(share(1, 3), "33.3 %");
        assert_eq!(share(2, 3), "66.7 %");
        assert_eq!(share(5, 0), "0.0 %");
    }

    #[test]
    fn the_estimate_follows_the_measured_shards() {
        // docs/benchmark.md, 2026-12-05: (payments loaded, the night's payments, peak RSS in
        // KiB) of shards measured 4 at once.
        for (payments, night, peak_kib) in [
            (173_517, 1_002_002, 379_944_u64),
            (485_182, 1_002_002, 598_324),
            (1_720_416, 10_020_010, 3_316_088),
            (4_860_053, 10_020_010, 4_555_028),
        ] {
            let (est, peak) = (memory_for(payments, night), peak_kib * 1024);
            assert!(est >= peak * 97 / 100, "{payments}: {est} < {peak}");
            assert!(
                est <= peak * 125 / 100,
                "{payments}: {est} far above {peak}"
            );
        }
    }
}
