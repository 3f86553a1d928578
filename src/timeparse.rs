//! Timestamps: parsing with a declared format and zone, and the one internal form,
//! `i64` microseconds since the Unix epoch in UTC.

pub use crate::model::Micros;
use crate::model::TimestampFormat;
use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Microseconds in one minute.
pub const MINUTE: Micros = 60_000_000;
/// Microseconds in one hour.
pub const HOUR: Micros = 60 * MINUTE;
/// Microseconds in one day.
pub const DAY: Micros = 24 * HOUR;

/// Interprets a local wall-clock time in `tz`. A time that does not exist (spring-forward gap)
/// or exists twice (autumn fold) is an error: guessing would move a payment between windows.
pub fn local_to_utc(naive: NaiveDateTime, tz: Tz) -> Result<Micros, String> {
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(dt) => Ok(dt.with_timezone(&Utc).timestamp_micros()),
        LocalResult::Ambiguous(..) => Err(format!(
            "local time {naive} is ambiguous in {tz} (daylight-saving fold); write it with an offset"
        )),
        LocalResult::None => Err(format!(
            "local time {naive} does not exist in {tz} (daylight-saving gap)"
        )),
    }
}

/// Parses a statement timestamp written in `format`; values without an offset are in `tz`.
pub fn parse(value: &str, format: &TimestampFormat, tz: Tz) -> Result<Micros, String> {
    parse_booking(value, format, tz).map(|(t, _)| t)
}

/// [`parse`], also saying whether the value named only a day: a pattern such as `%d.%m.%Y`
/// (or a value that matches the pattern only as a date) gives `Some(day)`, and the instant is
/// that day's start in `tz`. A date-only booking covers the whole day (DESIGN.md rule 9).
pub fn parse_booking(
    value: &str,
    format: &TimestampFormat,
    tz: Tz,
) -> Result<(Micros, Option<NaiveDate>), String> {
    let v = value.trim();
    match format {
        TimestampFormat::Rfc3339 => parse_rfc3339_fast(v.as_bytes())
            .map(Ok)
            .unwrap_or_else(|| {
                DateTime::parse_from_rfc3339(v)
                    .map(|d| d.with_timezone(&Utc).timestamp_micros())
                    .map_err(|e| format!("timestamp {v:?} is not RFC 3339 ({e})"))
            })
            .map(|t| (t, None)),
        TimestampFormat::Pattern(p) => {
            if p.contains("%z") || p.contains("%:z") || p.contains("%#z") {
                return DateTime::parse_from_str(v, p)
                    .map(|d| (d.with_timezone(&Utc).timestamp_micros(), None))
                    .map_err(|e| format!("timestamp {v:?} does not match {p:?} ({e})"));
            }
            match NaiveDateTime::parse_from_str(v, p) {
                Ok(naive) => local_to_utc(naive, tz).map(|t| (t, None)),
                Err(e) => match NaiveDate::parse_from_str(v, p) {
                    Ok(d) => Ok((day_start(d, tz), Some(d))),
                    Err(_) => Err(format!("timestamp {v:?} does not match {p:?} ({e})")),
                },
            }
        }
    }
}

/// Parses a ledger timestamp: RFC 3339 with an offset, or `YYYY-MM-DD HH:MM:SS[.ffffff]`
/// (also with `T`) taken as UTC.
pub fn parse_ledger(value: &str) -> Result<Micros, String> {
    let v = value.trim();
    if let Some(t) = parse_rfc3339_fast(v.as_bytes()) {
        return Ok(t);
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(v) {
        return Ok(d.with_timezone(&Utc).timestamp_micros());
    }
    for p in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(n) = NaiveDateTime::parse_from_str(v, p) {
            return Ok(n.and_utc().timestamp_micros());
        }
    }
    Err(format!(
        "timestamp {v:?} is neither RFC 3339 nor YYYY-MM-DD HH:MM:SS (UTC)"
    ))
}

/// Civil fields of an instant: (year, month, day, hour, minute, second, microsecond).
fn fields(t: Micros) -> Option<(i32, u32, u32, u32, u32, u32, u32)> {
    let d = DateTime::<Utc>::from_timestamp_micros(t)?;
    let (date, time) = (d.date_naive(), d.time());
    use chrono::Timelike;
    Some((
        date.year(),
        date.month(),
        date.day(),
        time.hour(),
        time.minute(),
        time.second(),
        time.nanosecond() / 1000,
    ))
}

/// Length of the database form [`to_db`] writes.
pub const DB_LEN: usize = 26;

/// Writes the database form of `t` (see [`to_db`]) into `out` without allocating; false
/// (and `out` untouched) when `t` is outside the years 0..=9999 the fixed width can hold.
pub fn write_db(t: Micros, out: &mut [u8; DB_LEN]) -> bool {
    let Some((y, mo, d, h, mi, s, us)) = fields(t) else {
        return false;
    };
    if !(0..=9999).contains(&y) {
        return false;
    }
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y as u32);
    put(5, 2, mo);
    put(8, 2, d);
    put(11, 2, h);
    put(14, 2, mi);
    put(17, 2, s);
    put(20, 6, us);
    for (i, c) in [
        (4, b'-'),
        (7, b'-'),
        (10, b' '),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        out[i] = c;
    }
    true
}

/// The database form: `YYYY-MM-DD HH:MM:SS.ffffff` in UTC, fixed width so it sorts as text.
pub fn to_db(t: Micros) -> String {
    let mut b = [0u8; DB_LEN];
    if write_db(t, &mut b) {
        // Only ASCII digits and separators were written.
        return String::from_utf8_lossy(&b).into_owned();
    }
    // Years the fixed width cannot hold.
    fields(t)
        .map(|(y, mo, d, h, mi, s, us)| {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}")
        })
        .unwrap_or_default()
}

/// Reads the database form back. The fixed-width form written by [`to_db`] takes a fast path
/// (ledger loads parse millions of these); anything else goes through chrono.
pub fn from_db(s: &str) -> Result<Micros, String> {
    if let Some(t) = parse_fixed(s.as_bytes()) {
        return Ok(t);
    }
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
        .map(|n| n.and_utc().timestamp_micros())
        .map_err(|e| format!("stored timestamp {s:?} is malformed ({e})"))
}

/// Parses PostgreSQL's text output of a `timestamptz` in a session whose time zone is UTC
/// (`2026-11-27 10:00:00+00`, `2026-11-27 10:00:00.5+00`, up to six fraction digits).
pub fn from_pg_utc(s: &str) -> Result<Micros, String> {
    let bad = || format!("timestamp {s:?} is not PostgreSQL UTC text output");
    let b = s.strip_suffix("+00").ok_or_else(bad)?.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let us = match &b[19..] {
        [] => 0,
        [b'.', frac @ ..] if (1..=6).contains(&frac.len()) => {
            digits(frac).ok_or_else(bad)? * 10i64.pow(6 - frac.len() as u32)
        }
        _ => return Err(bad()),
    };
    civil_prefix(b, us).ok_or_else(bad)
}

/// Microseconds of a validated civil date and time (UTC).
fn civil_micros(y: i64, mo: i64, d: i64, h: i64, mi: i64, sec: i64, us: i64) -> Option<Micros> {
    let date = NaiveDate::from_ymd_opt(i32::try_from(y).ok()?, mo as u32, d as u32)?;
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let days = i64::from(date.num_days_from_ce()) - 719_163; // days since 1970-01-01
    Some(((days * 24 + h) * 60 + mi) * 60_000_000 + sec * 1_000_000 + us)
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// Date and time from the `YYYY-MM-DD?HH:MM:SS` prefix both fixed-width forms share
/// (separators already checked by the caller), plus `us` microseconds.
fn civil_prefix(b: &[u8], us: i64) -> Option<Micros> {
    civil_micros(
        digits(&b[0..4])?,
        digits(&b[5..7])?,
        digits(&b[8..10])?,
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
        us,
    )
}

/// The common RFC 3339 shape `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` without chrono's
/// general parser; anything else (or anything invalid) returns None and takes the slow path.
fn parse_rfc3339_fast(b: &[u8]) -> Option<Micros> {
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let mut i = 19;
    let mut us = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        let frac = &b[start..end];
        if frac.is_empty() || frac.len() > 9 {
            return None;
        }
        let micros = &frac[..frac.len().min(6)];
        us = digits(micros)? * 10i64.pow(6 - micros.len() as u32);
        i = end;
    }
    let offset_minutes = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (oh, om) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
            if oh > 23 || om > 59 {
                return None; // chrono's parser decides (and rejects)
            }
            let m = oh * 60 + om;
            if *sign == b'-' { -m } else { m }
        }
        _ => return None,
    };
    let local = civil_prefix(b, us)?;
    Some(local - offset_minutes * MINUTE)
}

/// `YYYY-MM-DD HH:MM:SS.ffffff` exactly (26 bytes), validated field by field.
fn parse_fixed(b: &[u8]) -> Option<Micros> {
    if b.len() != 26
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
    {
        return None;
    }
    civil_prefix(b, digits(&b[20..26])?)
}

/// Appends the report form of `t` (see [`format_utc`]) to `buf`.
pub fn write_utc(buf: &mut String, t: Micros) {
    let Some((y, mo, d, h, mi, s, us)) = fields(t) else {
        return;
    };
    let two = |buf: &mut String, v: u32| {
        buf.push((b'0' + (v / 10) as u8) as char);
        buf.push((b'0' + (v % 10) as u8) as char);
    };
    if (0..=9999).contains(&y) {
        two(buf, y as u32 / 100);
        two(buf, y as u32 % 100);
    } else {
        use std::fmt::Write as _;
        let _ = write!(buf, "{y:04}");
    }
    buf.push('-');
    two(buf, mo);
    buf.push('-');
    two(buf, d);
    buf.push('T');
    two(buf, h);
    buf.push(':');
    two(buf, mi);
    buf.push(':');
    two(buf, s);
    if us != 0 {
        use std::fmt::Write as _;
        let _ = write!(buf, ".{us:06}");
    }
    buf.push('Z');
}

/// Report form: `2026-11-28T10:15:00Z` (fraction only when non-zero).
pub fn format_utc(t: Micros) -> String {
    let mut s = String::with_capacity(27);
    write_utc(&mut s, t);
    s
}

/// The days `from..=to` in `tz` as a half-open UTC interval `[first start, after last)`.
pub fn days_span(from: NaiveDate, to: NaiveDate, tz: Tz) -> (Micros, Micros) {
    (
        day_start(from, tz),
        day_start(to.succ_opt().unwrap_or(to), tz),
    )
}

/// The booking interval `[start, end]` (inclusive, UTC) of a date-only booking on `day` in
/// `tz`: the whole local day.
pub fn day_booking(day: NaiveDate, tz: Tz) -> (Micros, Micros) {
    let (start, next) = days_span(day, day, tz);
    (start, next - 1)
}

/// The first instant of `date` in `tz` (midnight, or the first valid time after a gap).
pub fn day_start(date: NaiveDate, tz: Tz) -> Micros {
    let mut naive = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    for _ in 0..4 {
        match tz.from_local_datetime(&naive) {
            LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => {
                return dt.with_timezone(&Utc).timestamp_micros();
            }
            LocalResult::None => naive += chrono::Duration::minutes(30),
        }
    }
    naive.and_utc().timestamp_micros()
}

/// A duration as the config writes it: `72h`, `10m`, `3d`, `90s` (the largest exact unit).
pub fn format_duration(d: Micros) -> String {
    for (unit, name) in [(DAY, "d"), (HOUR, "h"), (MINUTE, "m"), (1_000_000, "s")] {
        if d % unit == 0 {
            return format!("{}{name}", d / unit);
        }
    }
    format!("{d}us")
}

/// The local date of instant `t` in `tz`.
pub fn local_date(t: Micros, tz: Tz) -> NaiveDate {
    DateTime::<Utc>::from_timestamp_micros(t)
        .map(|d| d.with_timezone(&tz).date_naive())
        .unwrap_or_default()
}

/// Parses `30s`, `10m`, `72h`, `3d` into microseconds.
pub fn parse_duration(text: &str) -> std::result::Result<Micros, String> {
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10m, 72h, 3d"))?;
    let unit_us = match unit {
        "s" => 1_000_000,
        "m" => MINUTE,
        "h" => HOUR,
        "d" => DAY,
        _ => return Err(format!("{text:?}: unit must be s, m, h or d")),
    };
    n.checked_mul(unit_us)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_utc_text_output() {
        let base = from_db("2026-11-27 10:00:00.000000").unwrap();
        assert_eq!(from_pg_utc("2026-11-27 10:00:00+00"), Ok(base));
        assert_eq!(from_pg_utc("2026-11-27 10:00:00.5+00"), Ok(base + 500_000));
        assert_eq!(from_pg_utc("2026-11-27 10:00:00.000001+00"), Ok(base + 1));
        assert!(from_pg_utc("2026-11-27 10:00:00+01").is_err());
        assert!(from_pg_utc("2026-11-27 10:00:00.1234567+00").is_err());
        assert!(from_pg_utc("2026-11-27T10:00:00+00").is_err());
    }

    #[test]
    fn offsets_crossing_midnight_land_on_the_right_utc_instant() {
        let a = parse(
            "2026-11-29T00:30:00+01:00",
            &TimestampFormat::Rfc3339,
            chrono_tz::UTC,
        )
        .unwrap();
        assert_eq!(format_utc(a), "2026-11-28T23:30:00Z");
        let berlin = parse(
            "29.11.2026 00:30",
            &TimestampFormat::Pattern("%d.%m.%Y %H:%M".into()),
            chrono_tz::Europe::Berlin,
        )
        .unwrap();
        assert_eq!(berlin, a);
        assert_eq!(
            local_date(a, chrono_tz::Europe::Berlin).to_string(),
            "2026-11-29"
        );
        assert_eq!(local_date(a, chrono_tz::UTC).to_string(), "2026-11-28");
    }

    #[test]
    fn the_rfc3339_fast_path_agrees_with_chrono() {
        for text in [
            "2026-11-29T00:30:00+01:00",
            "2026-11-29T00:30:00Z",
            "2026-11-29t00:30:00z",
            "2026-11-29T00:30:00.5-05:30",
            "2026-11-29T00:30:00.123456789+00:00",
            "1969-12-31T23:59:59Z",
            "2024-02-29T12:00:00+14:00",
        ] {
            let slow = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc)
                .timestamp_micros();
            assert_eq!(parse_rfc3339_fast(text.as_bytes()), Some(slow), "{text}");
        }
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T00:30:00",
            "2026-11-29T00:30:00+0100",
            "2026-11-29T00:30:00.Z",
        ] {
            assert_eq!(parse_rfc3339_fast(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn daylight_saving_fold_is_an_error_not_a_guess() {
        let p = TimestampFormat::Pattern("%Y-%m-%d %H:%M".into());
        let err = parse("2026-10-25 02:30", &p, chrono_tz::Europe::Berlin).unwrap_err();
        assert!(err.contains("ambiguous"), "{err}");
        let err = parse("2026-03-29 02:30", &p, chrono_tz::Europe::Berlin).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn report_form() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_500_000), "1970-01-01T00:00:01.500000Z");
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn db_form_written_in_place_is_to_db() {
        for t in [
            0,
            -1,
            1_500_000,
            1_795_000_000_123_456,
            253_402_300_799_999_999,
        ] {
            let mut b = [0u8; DB_LEN];
            assert!(write_db(t, &mut b));
            assert_eq!(std::str::from_utf8(&b).unwrap(), to_db(t), "{t}");
        }
        let mut b = [0u8; DB_LEN];
        assert!(!write_db(253_402_300_800_000_000, &mut b), "year 10000");
        assert!(!write_db(-62_167_219_200_000_001, &mut b), "year -1");
    }

    #[test]
    fn ledger_fast_path_agrees_with_chrono() {
        for text in [
            "2026-11-28T10:15:00Z",
            "2026-11-28t10:15:00.5z",
            "2026-11-28 10:15:00.123456789+01:00",
            "2026-11-28T10:15:00-23:59",
            "1969-12-31T23:59:59.9999999Z",
        ] {
            let slow = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc)
                .timestamp_micros();
            assert_eq!(parse_ledger(text), Ok(slow), "{text}");
        }
        assert!(parse_ledger("2026-11-28T10:15:00+24:00").is_err());
        assert!(parse_ledger("2026-11-28T10:15:00+01:60").is_err());
        assert!(parse_ledger("2026-02-30T10:15:00Z").is_err());
    }

    #[test]
    fn db_form_round_trips_and_sorts() {
        for text in [
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "2024-02-29T23:59:59.000001Z",
            "2026-11-28T10:15:00.5Z",
        ] {
            let t = parse_ledger(text).unwrap();
            assert_eq!(parse_fixed(to_db(t).as_bytes()), Some(t), "{text}");
        }
        assert_eq!(parse_fixed(b"2026-02-30 00:00:00.000000"), None);
        assert_eq!(parse_fixed(b"2026-01-01 24:00:00.000000"), None);
        let t = parse_ledger("2026-11-28T10:15:00.5Z").unwrap();
        assert_eq!(to_db(t), "2026-11-28 10:15:00.500000");
        assert_eq!(from_db(&to_db(t)).unwrap(), t);
        assert!(to_db(t) < to_db(t + 1));
    }

    #[test]
    fn naive_ledger_times_are_utc() {
        assert_eq!(
            parse_ledger("2026-11-28 10:15:00").unwrap(),
            parse_ledger("2026-11-28T11:15:00+01:00").unwrap()
        );
        assert!(parse_ledger("28/11/2026").is_err());
    }

    #[test]
    fn day_start_in_zone() {
        let d = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        assert_eq!(
            format_utc(day_start(d, chrono_tz::Europe::Berlin)),
            "2026-11-28T23:00:00Z"
        );
    }
}
