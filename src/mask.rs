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

/// Hides the password of a URL like `postgres://user:secret@host/db`.
pub fn url(value: &str) -> String {
    match (value.find("://"), value.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &value[scheme_end + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &value[..scheme_end + 3],
                    &userinfo[..colon],
                    &value[at..]
                ),
                None => value.to_string(),
            }
        }
        _ => value.to_string(),
    }
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
    }
}
