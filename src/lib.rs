//! recon: reconciles an internal payment ledger against provider statements.
//!
//! Data flows one way: [`sources`] + [`ledger`] → canonical frames → [`matching`] →
//! [`outcome`]s → [`outputs`]. [`run`] ties one reconciliation together; `main.rs` only parses
//! the command line and maps errors to exit codes.
//!
//! The test and benchmark tools (data generator, scorer, simulator of nights, `bench-load`,
//! `bench-status`) are the separate workspace crate `recon-tools` (`tools/`), which uses this
//! library as any other program would; nothing here depends on it.

pub mod backtest;
pub mod config;
pub mod db;
pub mod decisions;
pub mod demo;
pub mod evidence;
pub mod exit;
pub mod explain;
pub mod fault;
pub mod flips;
pub mod keyindex;
pub mod keysort;
pub mod ledger;
pub mod mask;
pub mod matching;
pub mod model;
pub mod money;
pub mod normalize;
pub mod outcome;
pub mod outputs;
pub mod partition;
pub mod payout_status;
pub mod process;
pub mod pull;
pub mod rates;
pub mod report;
pub mod rules;
pub mod run;
pub mod sources;
pub mod status_api;
pub mod store;
pub mod textsafe;
pub mod tickets;
pub mod timeparse;
pub mod workbook;
