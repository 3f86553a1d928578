//! recon: reconciles an internal payment ledger against provider statements.
//!
//! Data flows one way: [`sources`] + [`ledger`] → canonical frames → [`matching`] →
//! [`outcome`]s → [`outputs`]. [`run`] ties one reconciliation together; `main.rs` only parses
//! the command line and maps errors to exit codes.

pub mod bench;
pub mod config;
pub mod db;
pub mod demo;
pub mod effects;
pub mod evidence;
pub mod exit;
pub mod explain;
pub mod fault;
pub mod generate;
pub mod keyindex;
pub mod keysort;
pub mod ledger;
pub mod mask;
pub mod matching;
pub mod money;
pub mod normalize;
pub mod outcome;
pub mod outputs;
pub mod pull;
pub mod report;
pub mod rules;
pub mod run;
pub mod sim;
pub mod sources;
pub mod status_api;
pub mod store;
pub mod tickets;
pub mod timeparse;
