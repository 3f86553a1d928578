//! Issue 17: an error about the value of a `[[source]]` key (or of a mapping file's) names the
//! file and quotes the value's line, as the TOML errors of unknown keys and wrong types do; a
//! key that is missing is on the header of the table that lacks it.

use recon::config::{Config, Format, SourceConfig};
use std::path::Path;

/// The job's own keys (lines 1–3), then one `[[source]]` on line 4 with its name (5) and path
/// (6); `body` follows from line 7.
fn job(body: &str) -> String {
    format!(
        "timezone = \"UTC\"\ndatabase_url = \"sqlite://x.db\"\noutput_dir = \"out\"\n\
         [[source]]\nname = \"psp\"\npath = \"psp.csv\"\n{body}"
    )
}

/// A csv source's keys that are valid, for `job`: `{keys}` go before its `[source.columns]`.
fn csv(keys: &str, columns: &str) -> String {
    job(&format!(
        "timestamp_format = \"rfc3339\"\n{keys}[source.columns]\nbooked_at = \"d\"\n{columns}"
    ))
}

/// The error of job file `text`, read as `job.toml`.
fn job_error(text: &str) -> String {
    match Config::parse(text, Path::new("job.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            assert_eq!(recon::exit::code_for(&e), recon::exit::CONFIG, "{e:#}");
            format!("{e:#}")
        }
    }
}

/// The 1-based number of the first line of `text` that is `line`.
#[track_caller]
fn line_no(text: &str, line: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("no line {line:?} in\n{text}"))
}

/// `msg` is an error of `file` in the form of a TOML error on the line of `text` that is
/// `line` (quoted), and it says `says`.
#[track_caller]
fn on_line(msg: &str, file: &str, text: &str, line: &str, says: &str) {
    let n = line_no(text, line);
    assert!(
        msg.starts_with(&format!("{file}: TOML parse error at line {n}, column ")),
        "expected line {n}: {msg}"
    );
    assert!(msg.contains(&format!("\n{n} | {line}\n")), "{msg}");
    assert!(msg.contains(says), "{msg}");
}

#[test]
fn a_tabular_value_error_quotes_the_values_line() {
    let text = csv("", "amount = \"a\"\n").replace(
        "timestamp_format = \"rfc3339\"",
        "timestamp_format = \"dd.mm.yyyy\"",
    );
    let text = text.replace("[source.columns]", "currency = \"EUR\"\n[source.columns]");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "timestamp_format = \"dd.mm.yyyy\"",
        "key `source[0].timestamp_format`: \"dd.mm.yyyy\" is neither `rfc3339` nor a strftime \
         pattern",
    );
    let text = csv("currency = \"EURO\"\n", "amount = \"a\"\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "currency = \"EURO\"",
        "key `source[0].currency`: ",
    );
    let text = csv(
        "currency = \"EUR\"\nencoding = \"klingon\"\n",
        "amount = \"a\"\n",
    );
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "encoding = \"klingon\"",
        "key `source[0].encoding`: unknown encoding \"klingon\"",
    );
    let text = csv(
        "currency = \"EUR\"\ndecimal_separator = \";\"\n",
        "amount = \"a\"\n",
    );
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "decimal_separator = \";\"",
        "key `source[0].decimal_separator`: \";\" is not one of",
    );
    let text = csv(
        "currency = \"EUR\"\n[source.kinds]\nSALE = \"PAYMENT\"\nCHARGEBACK = \"RETURN\"\n",
        "amount = \"a\"\n",
    );
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "CHARGEBACK = \"RETURN\"",
        "key `source[0].kinds.CHARGEBACK`: \"RETURN\" is not PAYMENT, REFUND, FEE, PAYOUT or \
         BALANCE",
    );
}

#[test]
fn a_column_mapping_value_error_quotes_the_columns_line() {
    let text = csv("currency = \"EUR\"\n", "amount = \"#3..\"\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "amount = \"#3..\"",
        "key `source[0].columns.amount`: \"#3..\": `#N..` (column N and all after it) is for \
         text fields only",
    );
    let text = csv("currency = \"EUR\"\n", "amount = \"a\"\nreference = []\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "reference = []",
        "key `source[0].columns.reference`: give a column name or a non-empty list of them",
    );
    // Two keys that exclude each other: on the first one's line.
    let text = csv("currency = \"EUR\"\n", "amount = \"a\"\ncurrency = \"c\"\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "currency = \"EUR\"",
        "keys `source[0].currency`/`source[0].columns.currency`: give one of them",
    );
}

#[test]
fn a_missing_key_is_on_the_header_of_the_table_that_lacks_it() {
    // Without `timestamp_format`: on `[[source]]` (line 4).
    let text = job("currency = \"EUR\"\n[source.columns]\nbooked_at = \"d\"\namount = \"a\"\n");
    let msg = job_error(&text);
    on_line(
        &msg,
        "job.toml",
        &text,
        "[[source]]",
        "key `source[0].timestamp_format` is missing (format csv needs it)",
    );
    assert!(msg.starts_with("job.toml: TOML parse error at line 4, column "));
    let text = job("").replace("name = \"psp\"\n", "");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "[[source]]",
        "key `source[0].name` is missing",
    );
    // A column the mapping lacks: on `[source.columns]`.
    let text = csv("", "amount = \"a\"\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "[source.columns]",
        "key `source[0].columns.currency`: missing (or give the source's fixed `currency`)",
    );
}

#[test]
fn the_common_keys_and_the_name_quote_their_lines() {
    let text = csv("currency = \"EUR\"\n", "amount = \"a\"\n").replace(
        "path = \"psp.csv\"",
        "path = \"psp.csv\"\ntimezone = \"Mars/Olympus\"",
    );
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "timezone = \"Mars/Olympus\"",
        "key `source[0].timezone`: unknown time zone \"Mars/Olympus\"",
    );
    let text = job("format = \"avro\"\n");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "format = \"avro\"",
        "key `source[0].format`: unsupported format \"avro\"",
    );
    let one = csv("currency = \"EUR\"\n", "amount = \"a\"\n");
    let text =
        format!("{one}[[source]]\nname = \"psp\"\npath = \"other.csv\"\nformat = \"camt053\"\n");
    let msg = job_error(&text);
    // The second source's name, on the line after its `[[source]]`.
    let n = one.lines().count() + 2;
    assert!(
        msg.starts_with(&format!("job.toml: TOML parse error at line {n}, column ")),
        "{msg}"
    );
    assert!(msg.contains(&format!("\n{n} | name = \"psp\"\n")), "{msg}");
    assert!(
        msg.contains("source[1]: duplicate source name \"psp\""),
        "{msg}"
    );
    // A remote source's keys too.
    let text = job("format = \"camt053\"\n")
        .replace("path = \"psp.csv\"", "path = \"http://h/x-{date}.xml\"");
    on_line(
        &job_error(&text),
        "job.toml",
        &text,
        "path = \"http://h/x-{date}.xml\"",
        "key `source[0].path`: \"http://h/x-{date}.xml\": plain http is not allowed",
    );
}

#[test]
fn a_mapping_file_value_error_quotes_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    let file = m.display().to_string();
    let error = |text: &str| {
        std::fs::write(&m, text).expect("write");
        match SourceConfig::load_mapping(&m, Format::Csv) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => format!("{e:#}"),
        }
    };
    let text = "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\nencoding = \"latin-9000\"\n\
                [columns]\nbooked_at = \"D\"\namount = \"A\"\n";
    on_line(
        &error(text),
        &file,
        text,
        "encoding = \"latin-9000\"",
        "key `encoding`: unknown encoding \"latin-9000\"",
    );
    let text = "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n\
                [columns]\nbooked_at = \"D\"\namount = \"A\"\nsign = \"S\"\n\
                [signs]\nCR = \"credit\"\nDR = \"minus\"\n";
    on_line(
        &error(text),
        &file,
        text,
        "DR = \"minus\"",
        "key `signs.DR`: \"minus\" is not credit or debit",
    );
    let text = "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n\
                [[skip_rows]]\ncolumn = \"#2..\"\nvalues = [\"x\"]\n\
                [columns]\nbooked_at = \"D\"\namount = \"A\"\n";
    on_line(
        &error(text),
        &file,
        text,
        "column = \"#2..\"",
        "key `skip_rows[0].column`: \"#2..\" is not one column",
    );
    // A missing column is on `[columns]`; a missing top-level key has no header to be on.
    let text = "timestamp_format = \"%Y-%m-%d\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\n";
    on_line(
        &error(text),
        &file,
        text,
        "[columns]",
        "key `columns.currency`: missing (or give the source's fixed `currency`)",
    );
    let msg = error("currency = \"EUR\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\n");
    assert_eq!(
        msg,
        format!("{file}: key `timestamp_format` is missing (format csv needs it)")
    );
}
