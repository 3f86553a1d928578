//! What a run writes: `results.csv`, `rejected.csv` and `summary.json` in the run's folder.
//! Files are written into a temporary folder and renamed into place, so a run folder is either
//! complete or absent.

pub mod results;
pub mod settlement;
pub mod summary;

pub use crate::textsafe::{csv_safe, is_invisible, terminal, visible};

use crate::outcome::Outcome;

/// Whether rows of an outcome are listed one by one in the reports. MATCHED and FAILED_OK are
/// the bulk of every run and need nothing: they are counted, and listed in results.csv.
pub fn is_listed(o: Outcome) -> bool {
    !matches!(o, Outcome::Matched | Outcome::FailedOk)
}
