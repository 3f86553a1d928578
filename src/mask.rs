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

/// Hides the password of a database URL in every form it can take: `postgres://user:secret@host/db`,
/// `postgres://user@host/db?password=secret`, or a libpq string `host=h password=secret`.
pub fn url(value: &str) -> String {
    secrets(value)
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
pub fn secrets(text: &str) -> String {
    let mut hide: Vec<(usize, usize)> = Vec::new();
    let bytes = text.as_bytes();
    let stops = |b: u8| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`');
    // URL passwords: `://user:password@`, within the authority.
    let mut from = 0;
    while let Some(p) = text[from..].find("://") {
        let start = from + p + 3;
        let end = (start..bytes.len())
            .find(|&i| stops(bytes[i]) || matches!(bytes[i], b'/' | b'?' | b'#'))
            .unwrap_or(bytes.len());
        if let Some(at) = text[start..end].rfind('@')
            && let Some(colon) = text[start..start + at].find(':')
        {
            hide.push((start + colon + 1, start + at));
        }
        from = end.max(start);
    }
    // `key=value` pairs with a secret key: the value up to a separator, or a quoted value.
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
        out.push_str("***");
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            url("postgres://bob@db/x?sslmode=require&password=s3cret&x=1"),
            "postgres://bob@db/x?sslmode=require&password=***&x=1"
        );
        assert_eq!(
            url("host=db user=bob password='s3 cret' dbname=x"),
            "host=db user=bob password='***' dbname=x"
        );
        assert_eq!(url("host=db PassWord=s3cret"), "host=db PassWord=***");
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
