//! What a run writes: `results.csv`, `rejected.csv` and `summary.json` in the run's folder.
//! Files are written into a temporary folder and renamed into place, so a run folder is either
//! complete or absent.

pub mod results;
pub mod settlement;
pub mod summary;

/// Neutralises a text cell for spreadsheet tools: a leading `= + - @`, tab or CR is prefixed
/// with `'` so it is never evaluated as a formula (DESIGN.md rule 6).
pub fn csv_safe(value: &str) -> std::borrow::Cow<'_, str> {
    match value.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{value}").into(),
        _ => value.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::csv_safe;

    #[test]
    fn formula_prefixes_are_neutralised() {
        for hostile in ["=HYPERLINK(\"x\")", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"] {
            assert!(csv_safe(hostile).starts_with('\''), "{hostile:?}");
        }
        assert_eq!(csv_safe("PAY-1"), "PAY-1");
    }
}
