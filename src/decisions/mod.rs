//! Reviewers' decisions (issue 32 points 3 and 4): a case per human decision, decided in the
//! report's `Decide` sheet and applied by `recon decisions apply` (or the decisions inbox the
//! next run reads), checked against the case as it is now.
//!
//! - `record.rs`: a committed run stores its cases (in its transaction), and what decisions
//!   left on them for the next report;
//! - `read.rs`: the Decide sheet read back (calamine), whoever saved it;
//! - `check.rs`: one row against the case as it is now: stale evidence, an unknown case, an
//!   edited check cell, a decision not offered → refused with the reason; two reviewers for a
//!   status decision when the job asks for them;
//! - `apply.rs`: a file applied in one transaction (status decisions through the same guarded
//!   transition as recon's own, with the reviewer as actor), idempotent by its sha256;
//! - `result.rs`: the result file next to the input and the summary on stdout;
//! - `confirmed.rs`: `confirm N` as evidence later runs keep (the line names the payment);
//! - `inbox.rs`: the decisions inbox, one sub-folder per reviewer, read and never written;
//! - `lock.rs`: an apply and a run wait for each other (the run lock and the apply marker);
//! - `queue.rs`: `recon cases list|show`.
//!
//! - `reviewers.rs`: who a reviewer is (`[[reviewer]]`: the OS user applying a file or owning
//!   an inbox folder).
//!
//! Who decided is never read from the file: it is the reviewer the OS user running `apply` is
//! (or its `--actor` without `[[reviewer]]`), or the inbox sub-folder's owner. The file's
//! `reviewer` cell is shown, and a mismatch noted.

pub mod apply;
pub mod check;
pub mod confirmed;
pub mod inbox;
pub mod lock;
pub mod markers;
pub mod queue;
pub mod read;
pub mod record;
pub mod result;
pub mod reviewers;

pub use apply::apply_file;
pub use inbox::apply_inbox;
pub use markers::markers;
pub use record::{marks, record};
pub use result::FileResult;
