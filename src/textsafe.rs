//! Text safety: what makes a value unsafe to show or to read as input (control characters,
//! invisible characters, spreadsheet formulas) and how it is neutralised. A leaf: input
//! parsing (`sources`, `ledger`), `normalize` and every writer use it.
//!
//! [`is_invisible`] is the one definition of a character a reader cannot see; [`visible`]
//! (data files and reports), [`csv_safe`] (CSV and XLSX cells) and [`terminal`] (the email's
//! plain text, `recon tickets`, `recon explain`) all show such a character as `<U+XXXX>`.

use std::borrow::Cow;

/// A control character that is not part of text (NUL, ESC, backspace, C1 …): everything
/// `char::is_control` says but tab and line breaks, which real bank exports carry inside
/// quoted cells. Input with one is rejected ([`control_character`]);
/// output shows it escaped ([`visible`]).
pub fn is_stray_control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// Why `value` is not accepted as input text: it holds a control character (NUL, ESC,
/// backspace, C1 …), which PostgreSQL refuses (NUL) or which garbles every report. Tab and
/// line breaks are text: real bank exports carry multi-line references in quoted cells.
/// `None` when it is clean. The reason names the character and its position, not the value.
pub fn control_character(value: &str) -> Option<String> {
    // Fast path: every control character is a byte below 0x20, 0x7F, or 0xC2 0x80–0x9F.
    // A fold without an early exit: the compiler vectorises it, and almost every value is clean.
    if !value.bytes().fold(false, |seen, b| {
        seen | (b < 0x20) | (b == 0x7f) | (b == 0xc2)
    }) {
        return None;
    }
    let (at, c) = value
        .chars()
        .enumerate()
        .find(|(_, c)| is_stray_control(*c))?;
    Some(format!(
        "the control character U+{:04X} at character {} (hint: control characters other than tab and line breaks are not accepted in input text)",
        c as u32,
        at + 1
    ))
}

/// Whether `c` changes the direction text is shown in (U+202A–U+202E, U+2066–U+2069, the
/// marks U+200E, U+200F and U+061C): such a character makes a value read as something else
/// ("Trojan Source"). Every one of them is also [`is_invisible`].
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` is a character a reader cannot see, which recon shows as `<U+XXXX>` wherever it
/// writes a value: every Unicode *format* character (general category Cf, from the
/// `unicode-properties` tables: the zero-width space, non-joiner and joiner U+200B–U+200D, the
/// word joiner U+2060, U+FEFF inside a value, the soft hyphen U+00AD, the invisible operators
/// U+2061–U+2064, tag characters …), which includes every direction control
/// ([`is_bidi_control`]: U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C). Control
/// characters are [`is_stray_control`]'s; other blank-looking letters (Hangul fillers,
/// variation selectors) are not format characters and are shown as they are.
pub fn is_invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory as _};
    // Every format character is outside ASCII: ASCII text never reaches the table.
    !c.is_ascii() && (is_bidi_control(c) || c.general_category() == GeneralCategory::Format)
}

/// `value` with every character `hide` picks written as `<U+XXXX>`.
pub fn escape_chars(value: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    // Fast path: every such character is a control byte or outside ASCII. A fold without an
    // early exit: the compiler vectorises it, and almost every value is plain ASCII.
    let suspect = value
        .bytes()
        .fold(false, |seen, b| seen | !(0x20..0x7f).contains(&b));
    if !suspect || !value.chars().any(&hide) {
        return value.into();
    }
    let mut out = String::with_capacity(value.len() + 16);
    for c in value.chars() {
        if hide(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Text for a report or data file, with what a reader cannot see made visible: control
/// characters (NUL, ESC, …; tab and line breaks are text) and invisible characters
/// ([`is_invisible`]: format characters, direction controls) are written as `<U+XXXX>`.
pub fn visible(value: &str) -> Cow<'_, str> {
    escape_chars(value, |c| is_stray_control(c) || is_invisible(c))
}

/// Text for one line of plain text (a terminal, the email's text part): [`visible`], and line
/// breaks and tabs written as `<U+XXXX>` too, so a value can neither move the cursor nor start
/// a line of its own.
pub fn terminal(value: &str) -> Cow<'_, str> {
    escape_chars(value, |c| c.is_control() || is_invisible(c))
}

/// Neutralises a text cell for spreadsheet tools: invisible characters are made
/// [`visible`], and a cell starting (after spaces) with `= + - @`, or with tab or CR, is
/// prefixed with `'` so it is never evaluated as a formula (DESIGN.md rule 6).
pub fn csv_safe(value: &str) -> Cow<'_, str> {
    let value = visible(value);
    let formula = matches!(value.chars().next(), Some('\t' | '\r'))
        || value
            .trim_start_matches(' ')
            .starts_with(['=', '+', '-', '@']);
    if formula {
        format!("'{value}").into()
    } else {
        value
    }
}

/// Why `name` cannot be a person's name as recon records and compares it (a reviewer, an
/// actor), or `None`: empty, blanks at either end, a control or invisible character
/// ([`is_invisible`]), a line break, or over 100 characters. A zero-width character makes
/// `alice` and `alice\u{200B}` look like one person and compare as two: refused, never
/// stripped.
pub fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("must not be empty")
    } else if name.trim() != name {
        Some("must not begin or end with a blank")
    } else if name.chars().any(|c| c.is_control() || is_invisible(c)) {
        Some("holds a control or invisible character")
    } else if name.chars().any(|c| c.is_whitespace() && c != ' ') {
        Some("holds a blank other than the space")
    } else if name.chars().count() > 100 {
        Some("is longer than 100 characters")
    } else {
        None
    }
}

/// The form in which two names are the same person: Unicode NFKC (`ａｌｉｃｅ` and the
/// ligature `ﬁ` read as `alice` and `fi`), then lower case (`Alice` is `alice`).
pub fn name_key(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    name.nfkc().collect::<String>().to_lowercase()
}

/// Whether `a` and `b` name the same person ([`name_key`]).
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || name_key(a) == name_key(b)
}

#[cfg(test)]
mod tests {
    use super::csv_safe;

    #[test]
    fn names_are_compared_folded_and_refused_with_invisible_characters() {
        use super::{bad_name, same_name};
        assert!(same_name("alice", "Alice"));
        assert!(
            same_name("alice", "ＡＬＩＣＥ"),
            "full-width letters fold to ASCII"
        );
        assert!(!same_name("alice", "alicia"));
        assert_eq!(bad_name("alice"), None);
        assert_eq!(bad_name("Anna Müller"), None);
        for bad in [
            "",
            "bob ",
            " bob",
            "ali\u{200B}ce",
            "bo\u{202E}b",
            "a\tb",
            "a\u{00A0}b",
        ] {
            assert!(bad_name(bad).is_some(), "{bad:?}");
        }
        assert!(bad_name(&"x".repeat(101)).is_some());
    }

    #[test]
    fn formula_prefixes_are_neutralised() {
        for hostile in ["=HYPERLINK(\"x\")", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"] {
            assert!(csv_safe(hostile).starts_with('\''), "{hostile:?}");
        }
        assert_eq!(csv_safe("PAY-1"), "PAY-1");
        assert_eq!(csv_safe("\0=1+1"), "<U+0000>=1+1");
        assert_eq!(csv_safe("  =1+1"), "'  =1+1");
        assert_eq!(csv_safe("L-\u{202e}1"), "L-<U+202E>1");
        assert_eq!(csv_safe("multi\nline"), "multi\nline");
    }

    /// The characters issue 33 found passing raw, and the rest of category Cf by example.
    #[test]
    fn invisible_characters_are_format_characters_and_direction_controls() {
        use super::{is_invisible, terminal, visible};
        let invisible = [
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200E}',
            '\u{200F}',
            '\u{061C}',
            '\u{00AD}',
            '\u{2061}',
            '\u{2064}',
            '\u{180E}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{0600}',
            '\u{FFF9}',
        ];
        for c in invisible {
            assert!(is_invisible(c), "U+{:04X}", c as u32);
            let shown = format!("<U+{:04X}>", c as u32);
            assert_eq!(visible(&format!("a{c}b")), format!("a{shown}b"));
            assert_eq!(csv_safe(&format!("{c}=1")), format!("{shown}=1"));
        }
        for c in [
            'a', 'Ä', 'ß', '€', ' ', '\u{00A0}', '中', '\u{0301}', '\u{3164}',
        ] {
            assert!(!is_invisible(c), "U+{:04X}", c as u32);
        }
        assert_eq!(visible("Müller € 10"), "Müller € 10");
        assert_eq!(terminal("a\nb\u{1b}[2J"), "a<U+000A>b<U+001B>[2J");
        assert_eq!(visible("a\nb"), "a\nb");
    }
}
