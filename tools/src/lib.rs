//! recon's test and benchmark tools, kept out of the product: the `recon` library and binary
//! contain none of this. The crate uses recon's library as any other program would (its public
//! API only), and recon's integration tests (`tests/it`) use it as a dev-dependency.
//!
//! - [`generate`]: a seeded synthetic ledger + statement with the outcome every row must get,
//!   and [`generate::score`], which compares a run's `results.csv` with it;
//! - [`sim`]: a seeded world of payment nights (the simulator `tests/it/nights.rs` plays),
//!   and [`bank_files`], its bank's payout status files (pain.002 rejections, NACHA returns);
//! - [`bench_load`]: how fast the ledger comes out of the database;
//! - [`bench_status`]: status-API query throughput against a stub on loopback;
//! - [`cli`]: the `recon-tools` command line over them (`generate`, `score`, `bench-load`,
//!   `bench-status`).

pub mod bank_files;
pub mod bench_load;
pub mod bench_status;
pub mod cli;
pub mod generate;
pub mod sim;
