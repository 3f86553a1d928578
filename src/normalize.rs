//! Text normalisation for matching keys, applied once per value before frames are built.

pub use crate::textsafe::is_stray_control;
use compact_str::CompactString;
use std::borrow::Cow;

/// One normalisation step a rule can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Strip leading/trailing white space.
    Trim,
    /// Upper-case (Unicode).
    Upper,
    /// Remove all white space inside the value (`DE89 3704` → `DE893704`).
    NoSpaces,
    /// Fold full-width forms (`ＡＢＣ１２３`) to ASCII and the ideographic space to a space.
    FoldWidth,
}

/// Folds full-width ASCII variants (U+FF01..U+FF5E) and U+3000 to their ASCII forms.
fn fold_char(c: char) -> char {
    match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        0x3000 => ' ',
        _ => c,
    }
}

/// Whether `step` would leave `s` unchanged (cheap checks, so hot paths can borrow).
fn is_fixed_point(step: Step, s: &str) -> bool {
    match step {
        Step::Trim => s.trim().len() == s.len(),
        Step::Upper => s.is_ascii() && !s.bytes().any(|b| b.is_ascii_lowercase()),
        Step::NoSpaces => !s.chars().any(char::is_whitespace),
        Step::FoldWidth => s.is_ascii(),
    }
}

fn apply_step(step: Step, s: &str) -> String {
    match step {
        Step::Trim => s.trim().to_string(),
        Step::Upper => {
            if s.is_ascii() {
                s.to_ascii_uppercase()
            } else {
                s.to_uppercase()
            }
        }
        Step::NoSpaces => s.chars().filter(|c| !c.is_whitespace()).collect(),
        Step::FoldWidth => s.chars().map(fold_char).collect(),
    }
}

/// Applies `steps` in order; borrows when the value is already in normal form.
pub fn apply<'a>(steps: &[Step], value: &'a str) -> Cow<'a, str> {
    if value.is_ascii() && value.len() <= STACK_KEY {
        // Byte checks instead of char iteration per step; a copy only when something changes.
        return with_applied(steps, value, |s| {
            if s == value {
                Cow::Borrowed(value)
            } else {
                Cow::Owned(s.to_owned())
            }
        });
    }
    apply_slowly(steps, value)
}

/// [`apply`] step by step (any text).
fn apply_slowly<'a>(steps: &[Step], value: &'a str) -> Cow<'a, str> {
    let mut s = Cow::Borrowed(value);
    for &step in steps {
        if !is_fixed_point(step, &s) {
            s = Cow::Owned(apply_step(step, &s));
        }
    }
    s
}

/// Longest ASCII value [`with_applied`] normalises on the stack (ids are far shorter).
const STACK_KEY: usize = 96;

/// Calls `f` with `value` normalised by `steps`, as [`apply`] would give it, without a heap
/// copy for ASCII values of up to `STACK_KEY` (96) bytes: a lower-case UUID or provider id needs
/// upper-casing for every pass, and a million of them were a million small allocations.
/// On ASCII every step commutes (width folding changes nothing, trimming is implied by
/// removing all white space), so the steps are applied as a set.
pub fn with_applied<R>(steps: &[Step], value: &str, f: impl FnOnce(&str) -> R) -> R {
    if !value.is_ascii() || value.len() > STACK_KEY {
        return f(&apply_slowly(steps, value));
    }
    let (mut upper, mut no_spaces, mut trim) = (false, false, false);
    for step in steps {
        match step {
            Step::Upper => upper = true,
            Step::NoSpaces => no_spaces = true,
            Step::Trim => trim = true,
            Step::FoldWidth => {}
        }
    }
    // ASCII white space as `char::is_whitespace` has it: space and U+0009..=U+000D.
    let white = |b: u8| b == b' ' || (b'\t'..=b'\r').contains(&b);
    let bytes = value.as_bytes();
    let spaced = (trim || no_spaces) && bytes.iter().fold(false, |seen, &b| seen | white(b));
    let lower = upper
        && bytes
            .iter()
            .fold(false, |seen, &b| seen | b.is_ascii_lowercase());
    if !spaced && !lower {
        // Already in normal form (most keys of most passes).
        return f(value);
    }
    let mut buf = [0u8; STACK_KEY];
    if !spaced {
        // Only the case changes (a lower-case UUID or provider id).
        let out = &mut buf[..bytes.len()];
        out.copy_from_slice(bytes);
        out.make_ascii_uppercase();
        return f(std::str::from_utf8(out).unwrap_or_default());
    }
    let bytes = if trim || no_spaces {
        let start = bytes.iter().position(|&b| !white(b)).unwrap_or(bytes.len());
        let end = bytes
            .iter()
            .rposition(|&b| !white(b))
            .map_or(start, |e| e + 1);
        &bytes[start..end]
    } else {
        bytes
    };
    let mut n = 0;
    for &b in bytes {
        if no_spaces && white(b) {
            continue;
        }
        buf[n] = if upper { b.to_ascii_uppercase() } else { b };
        n += 1;
    }
    // Only ASCII bytes of an ASCII value were written.
    f(std::str::from_utf8(&buf[..n]).unwrap_or_default())
}

/// The canonical form every source applies to free text: width folded, trimmed.
pub fn text(value: &str) -> CompactString {
    apply(&[Step::FoldWidth, Step::Trim], value).into()
}

/// A status, sign or kind value as looked up in the source's mapping: free text upper-cased.
pub fn label(value: &str) -> String {
    apply(&[Step::FoldWidth, Step::Trim, Step::Upper], value).into_owned()
}

/// The canonical form of an account identifier (IBAN or account number): width folded,
/// no white space, upper case.
pub fn account(value: &str) -> CompactString {
    apply(&[Step::FoldWidth, Step::NoSpaces, Step::Upper], value).into()
}

/// [`account`], or `None` when the value already is in that form (no copy on the hot path).
pub fn account_if_changed(value: &str) -> Option<CompactString> {
    match apply(&[Step::FoldWidth, Step::NoSpaces, Step::Upper], value) {
        Cow::Borrowed(_) => None,
        Cow::Owned(s) => Some(s.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_trimmed_width_folded_and_upper_cased() {
        assert_eq!(label("  booked "), "BOOKED");
        assert_eq!(label("\u{FF43}redit"), "CREDIT");
    }

    #[test]
    fn iban_spaces_and_case_do_not_matter() {
        assert_eq!(
            account(" de89 3704 0044 0532 0130 00 "),
            "DE89370400440532013000"
        );
    }

    #[test]
    fn full_width_forms_fold_to_ascii() {
        assert_eq!(account("ＤＥ８９\u{3000}３７０４"), "DE893704");
        assert_eq!(text("\u{3000}ＰＡＹ－１\u{3000}"), "PAY-1");
    }

    #[test]
    fn normalising_on_the_stack_gives_what_apply_gives() {
        use Step::*;
        let step_sets: [&[Step]; 6] = [
            &[FoldWidth, NoSpaces, Upper],
            &[Upper],
            &[Trim],
            &[Trim, Upper],
            &[NoSpaces],
            &[],
        ];
        let long = "x".repeat(STACK_KEY + 3);
        let values = [
            " pay-000 0012 ",
            "inner space",
            "ea590ca0-9d7a-4a7e-9c90-7447621262c5",
            "\tPT_1d02\x0b4ecb\r\n",
            "ＰＡＹ－１",
            "",
            "   ",
            "ß-straße",
            long.as_str(),
        ];
        for steps in step_sets {
            for v in values {
                let want = apply_slowly(steps, v).into_owned();
                with_applied(steps, v, |got| assert_eq!(got, want, "{steps:?} {v:?}"));
                let fast = apply(steps, v);
                assert_eq!(fast, want, "{steps:?} {v:?}");
                // ASCII is borrowed exactly when nothing changes.
                if v.is_ascii() {
                    let borrowed = matches!(fast, Cow::Borrowed(_));
                    assert_eq!(borrowed, want == *v, "{steps:?} {v:?}");
                }
            }
        }
    }

    #[test]
    fn references_with_spaces_and_lower_case_normalise_equal() {
        let steps = [Step::FoldWidth, Step::NoSpaces, Step::Upper];
        assert_eq!(
            apply(&steps, " pay-000 0012 "),
            apply(&steps, "PAY-0000012")
        );
    }
}
