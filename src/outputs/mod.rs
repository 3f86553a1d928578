//! What a run writes: `results.csv`, `rejected.csv` and `summary.json` in the run's folder.
//! Files are written into a temporary folder and renamed into place, so a run folder is either
//! complete or absent.

pub mod results;
pub mod settlement;
pub mod summary;

pub use crate::textsafe::{csv_safe, escape_chars, is_bidi_control, visible};
