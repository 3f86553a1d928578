//! The one integration-test binary (each extra binary would link Polars again).

mod backends;
mod explain;
mod formats;
mod generate;
mod golden;
mod properties;
mod report;
mod runs;
mod support;
mod threeway;
mod tickets;
