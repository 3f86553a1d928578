//! The one integration-test binary (each extra binary would link Polars again).

mod formats;
mod generate;
mod golden;
mod properties;
mod runs;
mod support;
