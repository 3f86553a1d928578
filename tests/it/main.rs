//! The one integration-test binary (each extra binary would link Polars again).

// First, so its macros are visible in the test modules.
#[macro_use]
mod support;

mod architecture;
mod backends;
mod bank_codes;
mod cases;
mod config_lines;
mod docs;
mod email_browser;
mod explain;
mod faults;
mod formats;
mod generate;
mod golden;
mod import;
mod mappings;
mod nights;
mod pg_uuid;
mod properties;
mod pull;
mod report;
mod runs;
mod safety;
mod status_api;
mod threeway;
mod tickets;
