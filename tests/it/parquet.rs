//! `format = "parquet"`: provider exports read by Polars through the csv column mapping. Each
//! fixture is written here with Polars' own ParquetWriter (typed columns: strings, decimals,
//! integers, floats, dates, timestamps with and without a zone, nulls); the own fixture of
//! `tests/formats/input/parquet/` (golden, mutated-bytes property) is the one
//! [`provider_export`] writes, which [`the_committed_fixture_is_the_generated_statement`]
//! checks.

use crate::format_files::repo;
use polars::prelude::*;
use recon::config::{Format, SourceConfig};
use recon::sources::{self, SourceLoad};
use std::path::{Path, PathBuf};

/// Writes `df` as a Parquet file at `path`.
fn write(path: &Path, mut df: DataFrame) {
    let mut f = std::fs::File::create(path).expect("create");
    ParquetWriter::new(&mut f)
        .finish(&mut df)
        .expect("write parquet");
}

/// A column of `name` holding `values` cast to `dtype` (strings cast to decimals exactly).
fn typed(name: &str, values: Series, dtype: &DataType) -> Column {
    values
        .cast(dtype)
        .expect("cast")
        .with_name(name.into())
        .into_column()
}

/// Microseconds since the epoch of an RFC 3339 instant.
fn micros(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .expect("rfc3339")
        .timestamp_micros()
}

/// A zoned timestamp column (instants, stored in UTC, zone Europe/Berlin) of `name`.
fn zoned(name: &str, at: &[Option<&str>]) -> Column {
    let v: Vec<Option<i64>> = at.iter().map(|a| a.map(micros)).collect();
    let zone = TimeZone::opt_try_new(Some("Europe/Berlin")).expect("zone");
    Int64Chunked::new(name.into(), v)
        .into_datetime(TimeUnit::Microseconds, zone)
        .into_series()
        .into_column()
}

/// The statement of the own fixture: the JSON lines fixture's provider export, as a typed
/// Parquet file (decimal amounts, a zoned timestamp, a null recipient, a pending row).
fn provider_export() -> DataFrame {
    let s = |name: &str, v: &[Option<&str>]| Column::new(name.into(), v.to_vec());
    DataFrame::new_infer_height(vec![
        s(
            "id",
            &[Some("tx-1"), Some("TX-1"), Some("tx-10"), Some("tx-11")],
        ),
        s(
            "reference",
            &[Some("PAY-1"), Some("pay-1"), Some("PAY-10"), None],
        ),
        s(
            "recipient",
            &[
                Some("DE89 3704 0044 0532 0130 00"),
                Some("FR1420041010050500013M02606"),
                None,
                Some("DE89370400440532013000"),
            ],
        ),
        typed(
            "amount",
            Series::new("amount".into(), ["1250.00", "12.10", "-5000", "3.00"]),
            &DataType::Decimal(12, 2),
        ),
        s(
            "currency",
            &[Some("EUR"), Some("eur"), Some("JPY"), Some("EUR")],
        ),
        zoned(
            "booked_at",
            &[
                Some("2026-11-26T09:30:00Z"),
                Some("2026-11-26T09:31:00Z"),
                Some("2026-11-26T10:00:00+01:00"),
                Some("2026-11-26T11:00:00Z"),
            ],
        ),
        s(
            "type",
            &[
                Some("payout"),
                Some("payout"),
                Some("refund"),
                Some("payout"),
            ],
        ),
        s(
            "status",
            &[Some("paid"), Some("paid"), Some("paid"), Some("pending")],
        ),
    ])
    .expect("frame")
}

/// The own fixture's path.
fn fixture() -> PathBuf {
    repo().join("tests/formats/input/parquet/recon_provider_export.parquet")
}

/// The committed fixture holds what [`provider_export`] writes (its goldens were reviewed
/// against this statement). To write it again: `write(&fixture(), provider_export())`.
#[test]
fn the_committed_fixture_is_the_generated_statement() {
    let bytes = std::fs::read(fixture()).expect("read fixture");
    let read = ParquetReader::new(std::io::Cursor::new(bytes))
        .finish()
        .expect("parquet");
    // (Schemas only in the message: Polars cannot print a zoned timestamp without its
    // `timezones` feature.)
    assert!(
        read.equals_missing(&provider_export()),
        "{:?}\n{:?}",
        read.schema(),
        provider_export().schema()
    );
}

/// A source of `format` with the mapping keys `keys` and `[columns]` `columns`.
fn source(dir: &Path, format: Format, keys: &str, columns: &str) -> SourceConfig {
    let p = dir.join(format!("{}.toml", format.as_str()));
    std::fs::write(&p, format!("{keys}\n[columns]\n{columns}")).expect("write mapping");
    SourceConfig::load_mapping(&p, format).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Reads `path` as `cfg` does: the load, or the file's error.
fn load(cfg: &SourceConfig, path: &Path) -> Result<SourceLoad, String> {
    let mut load = SourceLoad::default();
    sources::read_file(cfg, path, &mut load).map_err(|e| format!("{e:#}"))?;
    Ok(load)
}

/// The typed statement of the cell tests: five rows, every amount column holding the same
/// amounts as a string, a decimal, an integer (whole amounts only) and a float.
fn typed_statement() -> DataFrame {
    let s = |name: &str, v: &[Option<&str>]| Column::new(name.into(), v.to_vec());
    DataFrame::new_infer_height(vec![
        s("ref", &[Some("A"), None, Some("C"), Some("D"), Some("E")]),
        s(
            "amount_text",
            &[Some("12.30"), Some("0.10"), Some("0.30"), None, Some("7")],
        ),
        typed(
            "amount_decimal",
            Series::new(
                "d".into(),
                [
                    Some("12.30"),
                    Some("0.10"),
                    Some("0.30"),
                    None,
                    Some("7.00"),
                ],
            ),
            &DataType::Decimal(10, 2),
        ),
        Column::new(
            "amount_int".into(),
            [Some(12i64), Some(0), Some(-3), None, Some(7)],
        ),
        Column::new(
            "amount_float".into(),
            // 0.1 + 0.2 as a float is 0.30000000000000004: too precise for EUR, rejected.
            [
                Some(12.3f64),
                Some(0.1),
                Some(0.300_000_000_000_000_04),
                None,
                Some(-1234.56),
            ],
        ),
        zoned(
            "zoned",
            &[
                Some("2026-11-26T09:30:00Z"),
                Some("2026-11-26T23:30:00+01:00"),
                Some("2026-11-27T00:00:00Z"),
                Some("2026-11-27T00:00:00Z"),
                None,
            ],
        ),
        typed(
            "naive",
            Series::new(
                "n".into(),
                // Nanoseconds of the wall-clock times (as if they were UTC); the first one's
                // 789 nanoseconds are cut to its microsecond.
                [
                    Some(micros("2026-11-26T10:30:00.000001Z") * 1000 + 789),
                    Some(micros("2026-11-27T00:00:00Z") * 1000),
                    // 02:30 on 2026-03-29 does not exist in Berlin (daylight-saving gap).
                    Some(micros("2026-03-29T02:30:00Z") * 1000),
                    Some(micros("2026-11-27T00:00:00Z") * 1000),
                    Some(micros("2026-11-27T00:00:00Z") * 1000),
                ],
            ),
            &DataType::Datetime(TimeUnit::Nanoseconds, None),
        ),
        typed(
            "day",
            Series::new("day".into(), [20_783i32, 20_783, 20_783, 20_783, 20_783]),
            &DataType::Date,
        ),
        s(
            "ccy",
            &[
                Some("EUR"),
                Some("EUR"),
                Some("EUR"),
                Some("EUR"),
                Some("EUR"),
            ],
        ),
    ])
    .expect("frame")
}

/// Reads the typed statement with `amount` and `booked_at` mapped to the named columns:
/// (amounts in minor units of the accepted rows, rejected (row, reason)).
fn amounts(amount: &str, booked_at: &str) -> (Vec<i64>, Vec<(u64, String)>, SourceLoad) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.parquet");
    write(&path, typed_statement());
    let cfg = source(
        dir.path(),
        Format::Parquet,
        "timestamp_format = \"rfc3339\"\ntimezone = \"Europe/Berlin\"",
        &format!(
            "amount = \"{amount}\"\nbooked_at = \"{booked_at}\"\ncurrency = \"ccy\"\nreference = \"ref\"\n"
        ),
    );
    let load = load(&cfg, &path).expect("reads");
    let got = load.lines.iter().map(|l| l.amount_minor).collect();
    let rejected = load
        .rejected
        .iter()
        .map(|r| (r.line, r.reason.clone()))
        .collect();
    (got, rejected, load)
}

#[test]
fn amounts_are_exact_whatever_the_column_type() {
    // Strings, decimals and integers: exact, as written.
    for column in ["amount_text", "amount_decimal"] {
        let (got, rejected, _) = amounts(column, "day");
        assert_eq!(got, [1230, 10, 30, 700], "{column}");
        assert_eq!(rejected.len(), 1, "{column}: {rejected:?}");
        assert_eq!(rejected[0].0, 4, "{column}: row 4 has a null amount");
        assert!(
            rejected[0]
                .1
                .contains(&format!("column \"{column}\": empty amount")),
            "{rejected:?}"
        );
    }
    let (got, _, _) = amounts("amount_int", "day");
    assert_eq!(
        got,
        [1200, 0, -300, 700],
        "an integer is the amount written"
    );
    // A float by its shortest round-trip text: 12.3 and 0.1 are exact; 0.1 + 0.2 is
    // 0.30000000000000004, too precise for EUR, a rejected row (never rounded to 0.30).
    let (got, rejected, _) = amounts("amount_float", "day");
    assert_eq!(got, [1230, 10, -123456]);
    let rows: Vec<u64> = rejected.iter().map(|r| r.0).collect();
    assert_eq!(rows, [3, 4], "{rejected:?}");
    assert!(
        rejected[0].1.contains("column \"amount_float\"")
            && rejected[0].1.contains("0.30000000000000004")
            && rejected[0].1.contains("more decimals"),
        "{rejected:?}"
    );
}

#[test]
fn dates_and_timestamps_with_and_without_a_zone() {
    // A zoned timestamp is its instant, whatever the source's zone; a null one rejects its
    // row naming the column (row 4 has no amount).
    let (_, rejected, load) = amounts("amount_decimal", "zoned");
    let at: Vec<String> = load.lines.iter().map(|l| l.booked_text()).collect();
    assert_eq!(
        at,
        [
            "2026-11-26T09:30:00Z",
            "2026-11-26T22:30:00Z",
            "2026-11-27T00:00:00Z"
        ]
    );
    assert!(load.lines.iter().all(|l| l.booked_day.is_none()));
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert_eq!(rejected[1].0, 5);
    assert!(rejected[1].1.contains("column \"zoned\""), "{rejected:?}");
    // A naive timestamp is a wall-clock time in the source's zone (Europe/Berlin), to the
    // microsecond, midnight included (a timestamp, not a day); one in the spring gap rejects
    // its row.
    let (_, rejected, load) = amounts("amount_decimal", "naive");
    let at: Vec<String> = load.lines.iter().map(|l| l.booked_text()).collect();
    assert_eq!(
        at,
        [
            "2026-11-26T09:30:00.000001Z",
            "2026-11-26T23:00:00Z",
            "2026-11-26T23:00:00Z"
        ]
    );
    assert!(load.lines.iter().all(|l| l.booked_day.is_none()));
    assert_eq!(rejected[0].0, 3);
    assert!(
        rejected[0].1.contains("column \"naive\"") && rejected[0].1.contains("does not exist"),
        "{rejected:?}"
    );
    // A date is the whole day in the source's zone.
    let (_, _, load) = amounts("amount_decimal", "day");
    assert_eq!(load.lines[0].booked_text(), "2026-11-26");
    assert_eq!(
        load.lines[0].booked_day,
        chrono::NaiveDate::from_ymd_opt(2026, 11, 26)
    );
}

#[test]
fn nulls_are_empty_cells() {
    // A null reference is no reference; a null required amount rejected its row (above).
    let (_, _, load) = amounts("amount_text", "day");
    let refs: Vec<Option<String>> = load
        .lines
        .iter()
        .map(|l| l.reference().map(|r| r.to_string()))
        .collect();
    assert_eq!(
        refs,
        [
            Some("A".to_string()),
            None,
            Some("C".to_string()),
            Some("E".to_string())
        ]
    );
}

#[test]
fn a_file_that_does_not_fit_fails_naming_file_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.parquet");
    write(&path, typed_statement());
    let keys = "timestamp_format = \"rfc3339\"";
    let cfg = |columns: &str| source(dir.path(), Format::Parquet, keys, columns);
    // A mapped column the file lacks.
    let e = load(
        &cfg("amount = \"betrag\"\nbooked_at = \"day\"\ncurrency = \"ccy\"\n"),
        &path,
    )
    .unwrap_err();
    assert!(
        e.contains("s.parquet: column \"betrag\" (config key columns.amount) is not in the header; found [\"ref\", \"amount_text\""),
        "{e}"
    );
    // By position the columns are the schema's.
    let ok = load(
        &cfg("amount = \"#3\"\nbooked_at = \"#8\"\ncurrency = \"#9\"\n"),
        &path,
    )
    .expect("positions");
    assert_eq!(ok.lines.len(), 4);
    // A typed timestamp leaves nothing for booked_time to add.
    let e = load(
        &cfg("amount = \"#3\"\nbooked_at = \"zoned\"\nbooked_time = \"ref\"\ncurrency = \"ccy\"\n"),
        &path,
    )
    .unwrap_err();
    assert!(e.contains("columns.booked_time"), "{e}");
    let good = cfg("amount = \"amount_text\"\nbooked_at = \"day\"\ncurrency = \"ccy\"\n");
    // Not Parquet at all: a CSV file.
    let csv = dir.path().join("s.csv");
    std::fs::write(&csv, "ref,amount\nA,1.00\n").expect("w");
    let e = load(&good, &csv).unwrap_err();
    assert!(e.contains("s.csv: not a readable Parquet file"), "{e}");
    // Cut short.
    let bytes = std::fs::read(&path).expect("r");
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("w");
    let e = load(&good, &cut).unwrap_err();
    assert!(
        e.contains("cut.parquet: not a readable Parquet file"),
        "{e}"
    );
    // Over the bounds: more rows × mapped columns than max_sheet_cells.
    let mut tight = good.clone();
    tight.limits.workbook.max_sheet_cells = 10;
    let e = load(&tight, &path).unwrap_err();
    assert!(
        e.contains(
            "s.parquet: 5 rows × 3 mapped columns = 15 cells, more than max_sheet_cells = 10"
        ),
        "{e}"
    );
}

#[test]
fn keys_that_make_no_sense_for_parquet_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("m.toml");
    let columns = "[columns]\namount = \"a\"\nbooked_at = \"b\"\ncurrency = \"c\"\n";
    for (key, says) in [
        (
            "delimiter = \";\"",
            "`delimiter`: not used by format parquet",
        ),
        (
            "encoding = \"latin1\"",
            "parquet files declare their own encoding",
        ),
        ("sheet = \"x\"", "`sheet`: not used by format parquet"),
        (
            "has_header = false",
            "`has_header`: not used by format parquet",
        ),
        ("skip_lines = 2", "`skip_lines`: not used by format parquet"),
        (
            "skip_footer = 1",
            "`skip_footer`: not used by format parquet",
        ),
        ("quote = \"'\"", "`quote`: not used by format parquet"),
    ] {
        std::fs::write(
            &p,
            format!("format = \"parquet\"\ntimestamp_format = \"rfc3339\"\n{key}\n{columns}"),
        )
        .expect("w");
        let e = format!(
            "{:#}",
            SourceConfig::load_mapping(&p, Format::Parquet).unwrap_err()
        );
        assert!(e.contains("m.toml") && e.contains(says), "{key}: {e}");
    }
    std::fs::write(
        &p,
        "timestamp_format = \"rfc3339\"\n[columns]\namount = \"a\"\nbooked_at = \"b\"\ncurrency = \"c\"\nreference = [\"r\", \"#4..\"]\n",
    )
    .expect("w");
    let e = format!(
        "{:#}",
        SourceConfig::load_mapping(&p, Format::Parquet).unwrap_err()
    );
    assert!(
        e.contains("columns.reference") && e.contains("a Parquet file's columns are fixed"),
        "{e}"
    );
}

/// The same statement as CSV and as typed Parquet reads to the same canonical lines (`recon
/// parse` output, the source's name and the position apart: a CSV line number counts the
/// header, a Parquet row number does not).
#[test]
fn the_same_statement_as_csv_and_as_parquet_gives_the_same_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("s.csv");
    std::fs::write(
        &csv,
        "id,reference,recipient,amount,currency,booked_at,type,status\n\
         tx-1,PAY-1,DE89 3704 0044 0532 0130 00,1250.00,EUR,2026-11-26T09:30:00Z,payout,paid\n\
         TX-1,pay-1,FR1420041010050500013M02606,12.10,eur,2026-11-26T09:31:00Z,payout,paid\n\
         tx-10,PAY-10,,-5000,JPY,2026-11-26T10:00:00+01:00,refund,paid\n\
         tx-11,,DE89370400440532013000,3.00,EUR,2026-11-26T11:00:00Z,payout,pending\n",
    )
    .expect("w");
    let keys = "timestamp_format = \"rfc3339\"\nbooked_statuses = [\"paid\"]";
    let columns = "provider_txn_id = \"id\"\nreference = \"reference\"\nrecipient = \"recipient\"\n\
                   amount = \"amount\"\ncurrency = \"currency\"\nbooked_at = \"booked_at\"\n\
                   kind = \"type\"\nstatus = \"status\"\n\
                   [kinds]\npayout = \"PAYMENT\"\nrefund = \"REFUND\"\n";
    let print = |format: Format, file: &Path| {
        let cfg = source(dir.path(), format, keys, columns);
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        sources::print_canonical(
            &cfg,
            &[file.to_path_buf()],
            sources::Recipients::Unmasked,
            &mut out,
            &mut notes,
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
        String::from_utf8(out).expect("utf-8")
    };
    let without_position = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split(',').skip(2).collect::<Vec<_>>().join(","))
            .collect()
    };
    let from_csv = print(Format::Csv, &csv);
    let from_parquet = print(Format::Parquet, &fixture());
    assert_eq!(from_csv.lines().count(), 4, "{from_csv}");
    assert_eq!(
        without_position(&from_csv),
        without_position(&from_parquet),
        "csv:\n{from_csv}\nparquet:\n{from_parquet}"
    );
    let rows: Vec<&str> = from_parquet
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).expect("position"))
        .collect();
    let name = fixture().display().to_string();
    assert_eq!(
        rows,
        [
            format!("{name}:1"),
            format!("{name}:2"),
            format!("{name}:3")
        ]
    );
}

proptest::proptest! {
    // Failing cases are kept under the target folder: a run leaves the clone as it found it.
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            concat!(env!("CARGO_TARGET_TMPDIR"), "/proptest-regressions/parquet.txt"),
        ))),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// The own fixture with a few bytes changed or cut short: an error or lines, never a
    /// panic out of the reader (the footer, the page headers and the data all reach Polars).
    #[test]
    fn the_reader_never_panics_on_a_mutated_file(
        edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 1..6),
        cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
    ) {
        let bytes = std::fs::read(fixture()).expect("read");
        let bytes = crate::format_files::mutated(bytes, edits, cut);
        crate::format_files::no_panic(Format::Parquet, &bytes);
    }
}
