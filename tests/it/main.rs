//! The integration-test binary of `cargo test` (each extra binary would link Polars again;
//! `tests/real`, the real-file target, is built only when asked for: docs/testing.md).

// First, so its macros are visible in the test modules.
#[macro_use]
mod support;

mod adyen;
mod architecture;
mod attachments;
mod backends;
mod backtest;
mod bank_codes;
mod bombs;
mod bounds;
mod camt_stream;
mod cases;
mod claims;
mod config_lines;
mod critical_cases;
mod decide_sheet;
mod decision_kinds;
mod decisions;
mod demo;
mod docs;
mod email_browser;
mod explain;
mod faults;
mod format_files;
mod formats;
mod gather_trust;
mod generate;
mod golden;
mod id_shape;
mod import;
mod inbox;
mod manifests;
mod mappings;
mod markers;
mod nights;
mod parquet;
mod partitions;
mod payout_claims;
mod payout_formats;
mod pg_uuid;
mod properties;
mod pull;
mod report;
mod reporting_currency;
mod retries;
mod runs;
mod safety;
mod shard_ops;
mod shards;
mod signals;
mod status_api;
mod threeway;
mod tickets;
