//! Masking of account numbers and secrets before anything is logged, reported or mailed.

/// Masks an account number, keeping only its last 4 characters: `DE89…3000` → `****3000`.
/// Values of 4 characters or fewer are fully masked.
pub fn account(value: &str) -> String {
    let mut s = String::with_capacity(8);
    write_account(&mut s, value);
    s
}

/// Appends the masked form of `value` (see [`account`]) to `buf`.
pub fn write_account(buf: &mut String, value: &str) {
    let mut tail = ['\0'; 4];
    let mut more = false;
    for (n, c) in value
        .chars()
        .rev()
        .filter(|c| !c.is_whitespace())
        .enumerate()
    {
        if n == 4 {
            more = true;
            break;
        }
        tail[3 - n] = c;
    }
    buf.push_str("****");
    if more {
        buf.extend(tail.iter());
    }
}

/// Masks what looks like an account number inside free text (a bank's `AddtlInf`, an addenda's
/// information): every run of letters and digits of at least 8 characters with at least 6
/// digits (an IBAN, a domestic account number) becomes `****` and its last 4 characters, as
/// [`account`] masks a whole value; everything else is kept, so `0999;CH7280005000088877766
/// Lastkonto unbekannt` reads `0999;****7766 Lastkonto unbekannt`.
pub fn accounts_in_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let digits = run.chars().filter(char::is_ascii_digit).count();
        if run.chars().count() >= 8 && digits >= 6 {
            write_account(out, run);
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Hides the password of a database URL, read from the URL's structure
/// (`scheme://userinfo@host…`): everything between the first `:` of the userinfo and the
/// **last** `@` of the value is the password, whatever it holds (`# / ? @ :`, spaces,
/// percent-escapes), so `postgres://u:SeCr#Et8@host/db` becomes `postgres://u:***@host/db`.
/// Secret query keys (`?password=…`, `sslpassword`, …) are hidden too. A value that does not
/// parse as a URL — no `scheme:`, or an authority without `@` whose port is not a number
/// (`postgres://u:SeCr`: a password, or a broken port) — is masked whole: `***`, or
/// `scheme://***` when only the scheme is readable. An `@` after the host (in a query) makes
/// the masked part longer, never shorter: when in doubt, more is hidden.
pub fn url(value: &str) -> String {
    let Some(colon) = scheme_end(value) else {
        return MASK.to_string();
    };
    let (scheme, rest) = value.split_at(colon + 1);
    let Some(after) = rest.strip_prefix("//") else {
        // No authority (`sqlite:recon.db`, `sqlite::memory:`): no userinfo, only query keys;
        // an `@` without one is no form recon knows.
        if rest.contains('@') {
            return format!("{scheme}{MASK}");
        }
        return secret_keys(value);
    };
    match after.rfind('@') {
        Some(at) => {
            let (userinfo, host) = (&after[..at], &after[at + 1..]);
            let user = match userinfo.find(':') {
                Some(c) => format!("{}:{MASK}", &userinfo[..c]),
                None => userinfo.to_string(),
            };
            format!("{scheme}//{user}@{}", secret_keys(host))
        }
        None if port_is_valid(after) => secret_keys(value),
        None => format!("{scheme}//{MASK}"),
    }
}

/// What a hidden value reads as.
const MASK: &str = "***";

/// The byte index of the `:` that ends a URL scheme (`[A-Za-z][A-Za-z0-9+.-]*:`), if `value`
/// starts with one.
fn scheme_end(value: &str) -> Option<usize> {
    let colon = value.find(':')?;
    let scheme = &value[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(colon)
}

/// Whether every host of an authority without userinfo (`after` starts right after `//`;
/// several hosts are separated by `,`) has no port or a numeric one: otherwise the part after
/// a `:` may be a password (`postgres://u:SeCr`, or `postgres://u:` cut at a space).
fn port_is_valid(after: &str) -> bool {
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    after[..end].split(',').all(|host| {
        // An IPv6 literal `[::1]:5432`: the port follows the bracket.
        let tail = match host.strip_prefix('[') {
            Some(v6) => v6.split_once(']').map_or("", |(_, t)| t),
            None => host,
        };
        match tail.rsplit_once(':') {
            Some((_, port)) => !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()),
            None => true,
        }
    })
}

/// Whether a key names a secret (`password`, `sslpassword`, `passwd`, `pwd`, `secret`,
/// `token`, `api_key` …), in any case.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "private_key",
    ]
    .iter()
    .any(|w| k.contains(w))
}

/// Hides every secret-looking value in free text, such as a config line quoted by a TOML
/// parse error: the password of any `scheme://user:password@` URL, and the value of every
/// `key=value` / `key = "value"` pair whose key names a secret (URL queries, libpq strings,
/// TOML lines). Each hidden value reads `***`.
///
/// A quoted URL (`"postgres://…"`, as TOML and `{:?}` quote it) runs to its closing quote, and
/// its password to the last `@` in it, spaces and all. An unquoted one ends at white space:
/// its password runs to its last `@`; when it has none and its port is not a number
/// (`postgres://u:pa ss@h/db`, cut by a space), to the last `@` before the end of the line or
/// a quote, or else to the end of the URL. An unquoted password with both a space and an `@`
/// before it can leak its tail: values are masked with [`url`] before they are put into a
/// message, and this is only the net behind it.
pub fn secrets(text: &str) -> String {
    let mut hide = url_password_spans(text);
    hide.extend(secret_key_spans(text));
    hide_spans(text, hide)
}

/// [`secrets`] without the URL passwords: only the values of secret `key=value` pairs.
fn secret_keys(text: &str) -> String {
    hide_spans(text, secret_key_spans(text))
}

/// The byte ranges of URL passwords in free text (see [`secrets`]).
fn url_password_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let quote = |b: u8| matches!(b, b'"' | b'\'' | b'`');
    let end_from = |start: usize, stop: &dyn Fn(u8) -> bool| {
        (start..bytes.len())
            .find(|&i| stop(bytes[i]))
            .unwrap_or(bytes.len())
    };
    let mut hide = Vec::new();
    let mut from = 0;
    while let Some(p) = text[from..].find("://") {
        let start = from + p + 3;
        let scheme_start = text[..from + p]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        // A quoted URL (a TOML line, a `{:?}`) ends at its closing quote, spaces and all.
        if let Some(&q) = scheme_start.checked_sub(1).and_then(|i| bytes.get(i))
            && quote(q)
        {
            let end = end_from(start, &|b| b == q || b == b'\n');
            if let Some(at) = text[start..end].rfind('@')
                && let Some(colon) = text[start..start + at].find(':')
            {
                hide.push((start + colon + 1, start + at));
            } else if !port_is_valid(&text[start..end])
                && let Some(colon) = text[start..end].find(':')
            {
                hide.push((start + colon + 1, end));
            }
            from = end.max(start);
            continue;
        }
        let token_end = end_from(start, &|b| b.is_ascii_whitespace() || quote(b));
        let token = &text[start..token_end];
        let authority_end = token.find(['/', '?', '#']).unwrap_or(token.len());
        if let Some(at) = token.rfind('@') {
            if let Some(colon) = token[..at].find(':') {
                hide.push((start + colon + 1, start + at));
            }
        } else if !port_is_valid(token)
            && let Some(colon) = token[..authority_end].find(':')
        {
            let line_end = end_from(start, &|b| b == b'\n' || quote(b));
            let end = text[start..line_end]
                .rfind('@')
                .map_or(token_end, |at| start + at);
            hide.push((start + colon + 1, end));
        }
        from = token_end.max(start);
    }
    hide
}

/// The byte ranges of the values of `key=value` pairs whose key names a secret: a quoted
/// value, or the value up to a separator.
fn secret_key_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let stops = |b: u8| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`');
    let mut hide = Vec::new();
    for (eq, _) in text.match_indices('=') {
        let key_end = text[..eq].trim_end().len();
        let key_start = text[..key_end]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .map_or(0, |i| i + 1);
        if key_start == key_end || !is_secret_key(&text[key_start..key_end]) {
            continue;
        }
        let value_start = eq + 1 + (text[eq + 1..].len() - text[eq + 1..].trim_start().len());
        let (start, end) = match bytes.get(value_start) {
            Some(&q @ (b'"' | b'\'')) => {
                let start = value_start + 1;
                let end = text[start..]
                    .find([q as char, '\n'])
                    .map_or(text.len(), |i| start + i);
                (start, end)
            }
            _ => {
                let end = (value_start..bytes.len())
                    .find(|&i| stops(bytes[i]) || matches!(bytes[i], b'&' | b';' | b','))
                    .unwrap_or(bytes.len());
                (value_start, end)
            }
        };
        if end > start {
            hide.push((start, end));
        }
    }
    hide
}

/// `text` with every byte range of `hide` written as `***` (overlapping ranges once).
fn hide_spans(text: &str, mut hide: Vec<(usize, usize)>) -> String {
    if hide.is_empty() {
        return text.to_string();
    }
    hide.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in hide {
        if end <= at {
            continue;
        }
        out.push_str(&text[at..start.max(at)]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_numbers_in_free_text_are_masked_and_other_words_kept() {
        assert_eq!(
            accounts_in_text("0999;CH7280005000088877766 Lastkonto unbekannt"),
            "0999;****7766 Lastkonto unbekannt"
        );
        assert_eq!(
            accounts_in_text("904114;ControlSum fehlerhaft, ref 2026-11-26"),
            "904114;ControlSum fehlerhaft, ref 2026-11-26"
        );
        assert_eq!(accounts_in_text("acct 12345678901."), "acct ****8901.");
        assert_eq!(accounts_in_text(""), "");
    }

    #[test]
    fn accounts_keep_only_the_last_four() {
        assert_eq!(account("DE89 3704 0044 0532 0130 00"), "****3000");
        assert_eq!(account("123"), "****");
        assert!(!account("DE89370400440532013000").contains("8937"));
    }

    #[test]
    fn url_passwords_are_hidden() {
        assert_eq!(url("postgres://bob:s3cret@db/x"), "postgres://bob:***@db/x");
        assert_eq!(url("sqlite://a.db"), "sqlite://a.db");
        assert_eq!(url("sqlite:a.db"), "sqlite:a.db");
        assert_eq!(url("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(
            url("postgres://bob@db:5432/x"),
            "postgres://bob@db:5432/x",
            "no password, nothing hidden"
        );
        assert_eq!(
            url("postgres://bob@db/x?sslmode=require&password=s3cret&x=1"),
            "postgres://bob@db/x?sslmode=require&password=***&x=1"
        );
        assert_eq!(
            url("postgres://[::1]:5432,h2:5433/x"),
            "postgres://[::1]:5432,h2:5433/x"
        );
    }

    /// The password is whatever lies between the userinfo's first `:` and the last `@`, so
    /// none of the characters that end a URL's parts elsewhere can cut the mask short.
    #[test]
    fn url_passwords_with_any_character_are_hidden_whole() {
        for password in [
            "SeCr#Et8",
            "a/b",
            "a?b=c",
            "p@ss@word",
            "pa:ss",
            "with a space",
            " lead",
            "p%40ss%2Fw%23",
            "#/?@: %20",
        ] {
            let u =
                format!("postgres://app_user:{password}@db.internal:5432/recon?sslmode=require");
            let masked = url(&u);
            assert_eq!(
                masked, "postgres://app_user:***@db.internal:5432/recon?sslmode=require",
                "{password:?}"
            );
            // In free text (an error message that quotes the URL) too.
            let msg = secrets(&format!("database \"{u}\": connection refused"));
            assert!(!msg.contains(password.trim()), "{password:?}: {msg}");
            assert!(msg.contains("app_user:***@"), "{password:?}: {msg}");
            // Unquoted: white space ends a URL; a password with a space is still found by
            // the port that is no number (the one form that can leak: a space and an `@`).
            if !(password.contains(' ') && password.contains('@')) {
                let bare = secrets(&format!("error: database {u}: connection refused"));
                assert!(!bare.contains(password.trim()), "{password:?}: {bare}");
                assert!(
                    bare.contains("app_user:***@db.internal"),
                    "{password:?}: {bare}"
                );
            }
        }
        assert_eq!(
            url("postgres://u:SeCr#Et8@host/db"),
            "postgres://u:***@host/db"
        );
    }

    #[test]
    fn a_url_that_does_not_parse_is_masked_whole() {
        // No `@`, and what follows `:` is no port: it may be a password.
        assert_eq!(url("postgres://u:SeCr#Et8"), "postgres://***");
        assert_eq!(url("postgres://u:pa ss"), "postgres://***");
        // No scheme at all (a libpq string, a typo).
        assert_eq!(url("host=db user=bob password='s3 cret' dbname=x"), "***");
        assert_eq!(url("://u:p@h"), "***");
        assert_eq!(url("u:p@h/db"), "u:***");
        assert_eq!(url("postgres://host:/db"), "postgres://***");
        assert_eq!(secrets("postgres://u:SeCr/x y"), "postgres://u:*** y");
    }

    #[test]
    fn secrets_in_config_text_are_hidden() {
        let line = "2 | database_url = \"postgres://bob:s3:cret@db:5432/x\n  |   ^";
        assert_eq!(
            secrets(line),
            "2 | database_url = \"postgres://bob:***@db:5432/x\n  |   ^"
        );
        assert_eq!(
            secrets("smtp_password = \"hunter2\" # x"),
            "smtp_password = \"***\" # x"
        );
        assert_eq!(secrets("timezone = \"UTC\""), "timezone = \"UTC\"");
    }
}
