//! A statement file read as `recon parse` reads it, checked against its reviewed golden:
//! shared by the default suite (`tests/it/formats.rs`, the own `recon_*` fixtures of
//! `tests/formats/input/`) and the real-file target (`tests/real/formats.rs`, the public
//! samples of `RECON_REAL_DATA`). A file `<folder>/<name>` has its goldens in
//! `tests/formats/golden/<folder>/<name>.csv.snap` (the canonical lines) and `….facts.snap`
//! (what each statement declared: balances, totals, period), and csv/xlsx files their mapping in
//! `tests/formats/mappings/<name>.toml`.

use recon::config::{Format, FormatSettings, SourceConfig};
use recon::sources::{self, ParseContext};
use std::path::{Path, PathBuf};

/// What a file must give.
pub enum Expect {
    /// Parses; output equals the golden files.
    Golden,
    /// Rejected; the error contains this text (file and position included).
    Rejected(&'static str),
}

/// The repository.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The mapping of file `rel` (`tests/formats/mappings/<file name>.toml`), if it has one.
pub fn mapping_for(rel: &str) -> Option<PathBuf> {
    let name = Path::new(rel).file_name()?.to_string_lossy().into_owned();
    let p = repo()
        .join("tests/formats/mappings")
        .join(format!("{name}.toml"));
    p.exists().then_some(p)
}

/// Runs `recon parse` through the library on `root/rel`: (stdout, stderr notes) with the
/// path shown as `rel`, or the error text.
pub fn parse(root: &Path, rel: &str, format: Format) -> Result<(String, String), String> {
    let path = root.join(rel);
    assert!(path.exists(), "{} does not exist", path.display());
    let mapping = mapping_for(rel);
    let src = recon::config::parse_settings(Some(format.as_str()), mapping.as_deref(), None, None)
        .map_err(|e| format!("{e:#}"))?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    sources::print_canonical(
        &src,
        std::slice::from_ref(&path),
        sources::Recipients::Masked,
        &mut out,
        &mut notes,
    )
    .map_err(|e| format!("{e:#}"))?;
    let shown = path.display().to_string();
    let fix = |b: Vec<u8>| {
        String::from_utf8(b)
            .expect("utf-8 output")
            .replace(&shown, rel)
    };
    Ok((fix(out), fix(notes)))
}

/// Checks every file of `files` (relative to `root`) against its golden or expected error;
/// panics with every failure at once.
pub fn check_goldens(root: &Path, files: &[(&str, Format, Expect)]) {
    let mut failures = Vec::new();
    for (rel, format, expect) in files {
        match (expect, parse(root, rel, *format)) {
            (Expect::Golden, Ok((out, notes))) => {
                // insta snapshots beside the sample's place: golden/<folder>/<file>.csv.snap
                // (the canonical lines) and <file>.facts.snap (what the statement declared).
                let golden = repo().join("tests/formats/golden").join(rel);
                let name = golden.file_name().expect("file name").to_string_lossy();
                let mut settings = insta::Settings::clone_current();
                settings.set_snapshot_path(golden.parent().expect("folder"));
                settings.set_prepend_module_to_snapshot(false);
                settings.set_omit_expression(true);
                settings.bind(|| {
                    insta::assert_snapshot!(format!("{name}.csv"), out);
                    insta::assert_snapshot!(format!("{name}.facts"), notes);
                });
            }
            (Expect::Golden, Err(e)) => failures.push(format!("{rel}: rejected: {e}")),
            (Expect::Rejected(msg), Err(e)) => {
                if !e.contains(msg) {
                    failures.push(format!("{rel}: error {e:?} does not contain {msg:?}"));
                }
            }
            (Expect::Rejected(_), Ok(_)) => {
                failures.push(format!("{rel}: accepted, must be rejected"))
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A parse context for bank formats: source and file `name`, UTC.
pub fn ctx(name: &str) -> ParseContext {
    ParseContext {
        source: name.into(),
        file: name.into(),
        timezone: chrono_tz::UTC,
        encoding: None,
    }
}

fn fuzz_cfg(format: Format) -> SourceConfig {
    if format.needs_mapping() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("m.toml");
        let (amount, booked_at, reference) = match format {
            Format::Jsonl => ("/a/v", "/d", "/r"),
            Format::Parquet => ("amount", "booked_at", "reference"),
            _ => ("#2", "#1", "#3"),
        };
        std::fs::write(&p, format!("timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n[columns]\namount = \"{amount}\"\nbooked_at = \"{booked_at}\"\nreference = \"{reference}\"\n")).expect("w");
        SourceConfig::load_mapping(&p, format).expect("mapping")
    } else {
        SourceConfig::bank_default(format)
    }
}

/// The csv settings of a csv source.
pub fn csv_of(cfg: &SourceConfig) -> &sources::csv::CsvSettings {
    match &cfg.settings {
        FormatSettings::Csv(c) => c,
        _ => panic!("{} is no csv source", cfg.name),
    }
}

/// Parses `bytes` as `format`; an error or lines are fine, a panic fails the test.
pub fn no_panic(format: Format, bytes: &[u8]) {
    match format {
        Format::Csv => {
            let cfg = fuzz_cfg(format);
            let _ = sources::csv::parse_bytes(cfg.table_source(), csv_of(&cfg), "f", bytes);
        }
        Format::Xlsx => {
            let mut out = sources::csv::Collector::new("x", "f", 0);
            let cfg = fuzz_cfg(format);
            let FormatSettings::Xlsx(x) = &cfg.settings else {
                panic!("{} is no xlsx source", cfg.name)
            };
            let _ = sources::xlsx::parse_bytes(cfg.table_source(), x, "f", bytes, &mut out);
        }
        Format::Jsonl => {
            let cfg = fuzz_cfg(format);
            let FormatSettings::Jsonl(j) = &cfg.settings else {
                panic!("{} is no jsonl source", cfg.name)
            };
            let _ = sources::jsonl::parse_bytes(cfg.table_source(), j, "f", bytes);
        }
        Format::Parquet => {
            let cfg = fuzz_cfg(format);
            let FormatSettings::Parquet(p) = &cfg.settings else {
                panic!("{} is no parquet source", cfg.name)
            };
            let _ = sources::parquet::parse_bytes(cfg.table_source(), p, "f", bytes);
        }
        f => {
            let _ = sources::parse_bank_bytes(f, &ctx("f"), bytes);
        }
    }
}

/// Parses `bytes` as payout status `format`; an error or records are fine, a panic fails.
pub fn no_panic_payout(format: recon::model::PayoutFormat, bytes: &[u8]) {
    let _ = sources::parse_payout_bytes(
        format,
        &std::sync::Arc::from("f"),
        bytes,
        &sources::InputLimits::default(),
    );
}

/// `bytes` (at most the first 20,000) with `edits` (position, byte) applied, then cut at
/// `cut`: nearly valid input that reaches deep into each parser.
pub fn mutated(
    mut bytes: Vec<u8>,
    edits: Vec<(proptest::sample::Index, u8)>,
    cut: Option<proptest::sample::Index>,
) -> Vec<u8> {
    if bytes.len() > 20_000 {
        bytes.truncate(20_000);
    }
    for (at, b) in edits {
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
    }
    if let Some(cut) = cut
        && !bytes.is_empty()
    {
        let n = cut.index(bytes.len());
        bytes.truncate(n);
    }
    bytes
}

/// Every file below `root` but `SOURCES.md`, as paths relative to it (`/`-separated as the
/// OS writes them), sorted.
pub fn files_below(root: &Path) -> Vec<String> {
    let mut stack = vec![root.to_path_buf()];
    let mut out = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != "SOURCES.md") {
                let rel = p.strip_prefix(root).expect("prefix");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}
