//! Workbooks that inflate (issue 41 point 2): what an XLSX costs to read is bounded by what it
//! declares and by what it inflates to, not by its size on disk. The workbooks here are written
//! part by part (the `zip` crate), as a hostile or careless file would be, never by a
//! spreadsheet program:
//! - a 1.6 KB statement with one cell at `XFD1048576` (before: calamine's dense range of 17
//!   billion cells, the run OOM-killed, the run record left RUNNING) is an unreadable file,
//!   whether the sheet declares its dimension or not;
//! - a shared string of 64 MiB of one letter (a zip bomb: it compresses about 1000 times) is
//!   refused by its ratio after 1 MiB; a part over `max_inflated_mb` by its size; a
//!   shared-string table declaring four billion strings by what its bytes can hold (before:
//!   calamine reserved room for all of them up front);
//! - a Decide sheet with a far cell (the 158 KB decision bomb) is unreadable, never applied;
//! - a statement path that is a device or a FIFO is no regular file and is never read.
//!
//! The night with all of these at once is in `inbox.rs`
//! (`a_night_with_a_far_cell_statement_a_decision_bomb_and_an_unreadable_file_completes`).

use recon::model::Format;
use recon::sources::config::SourceConfig;
use recon::sources::{self, SourceLoad};
use recon::workbook::WorkbookLimits;
use std::io::Write as _;
use std::path::Path;

const MAIN: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
const PKG: &str = "http://schemas.openxmlformats.org/package/2006/relationships";

/// An XLSX workbook of one sheet named `sheet` whose worksheet part is `sheet_xml`, with the
/// shared-string table `shared` (written `chunks` times, to make large parts cheaply) when
/// given; every part deflated.
pub fn workbook(
    sheet: &str,
    sheet_xml: &str,
    shared: Option<(&str, &[u8], usize, &str)>,
) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut part = |name: &str, body: &[&[u8]]| {
        w.start_file(name, opts).expect("start part");
        for b in body {
            w.write_all(b).expect("write part");
        }
    };
    part(
        "[Content_Types].xml",
        &["<?xml version=\"1.0\" encoding=\"UTF-8\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
             <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
             <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
             <Override PartName=\"/xl/workbook.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/>\
             <Override PartName=\"/xl/worksheets/sheet1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml\"/>\
             <Override PartName=\"/xl/sharedStrings.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml\"/></Types>".as_bytes()],
    );
    part(
        "_rels/.rels",
        &[format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Relationships xmlns=\"{PKG}\"><Relationship Id=\"rId1\" \
             Type=\"{REL}/officeDocument\" Target=\"xl/workbook.xml\"/></Relationships>"
        )
        .as_bytes()],
    );
    part(
        "xl/workbook.xml",
        &[format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><workbook xmlns=\"{MAIN}\" xmlns:r=\"{REL}\"><sheets>\
             <sheet name=\"{sheet}\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>"
        )
        .as_bytes()],
    );
    part(
        "xl/_rels/workbook.xml.rels",
        &[format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Relationships xmlns=\"{PKG}\">\
             <Relationship Id=\"rId1\" Type=\"{REL}/worksheet\" Target=\"worksheets/sheet1.xml\"/>\
             <Relationship Id=\"rId2\" Type=\"{REL}/sharedStrings\" Target=\"sharedStrings.xml\"/></Relationships>"
        )
        .as_bytes()],
    );
    part("xl/worksheets/sheet1.xml", &[sheet_xml.as_bytes()]);
    if let Some((head, chunk, chunks, tail)) = shared {
        w.start_file("xl/sharedStrings.xml", opts)
            .expect("start part");
        w.write_all(head.as_bytes()).expect("write");
        for _ in 0..chunks {
            w.write_all(chunk).expect("write");
        }
        w.write_all(tail.as_bytes()).expect("write");
    }
    w.finish().expect("finish zip").into_inner()
}

/// A worksheet part: `dimension` (its `ref`, when declared) and the XML of its rows.
pub fn sheet_xml(dimension: Option<&str>, rows: &str) -> String {
    let dim = dimension.map_or(String::new(), |d| format!("<dimension ref=\"{d}\"/>"));
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><worksheet xmlns=\"{MAIN}\">{dim}<sheetData>{rows}</sheetData></worksheet>"
    )
}

/// One inline-string cell.
pub fn text_cell(at: &str, text: &str) -> String {
    format!("<c r=\"{at}\" t=\"inlineStr\"><is><t>{text}</t></is></c>")
}

/// The rows of a small statement: a header and one line, in columns A–C.
fn statement_rows() -> String {
    format!(
        "<row r=\"1\">{}{}{}</row><row r=\"2\">{}<c r=\"B2\"><v>12.5</v></c>{}</row>",
        text_cell("A1", "Date"),
        text_cell("B1", "Amount"),
        text_cell("C1", "Ref"),
        text_cell("A2", "2026-11-10"),
        text_cell("C2", "P-1")
    )
}

/// One cell at the farthest corner of Excel's grid.
pub fn far_cell_row() -> String {
    format!("<row r=\"1048576\">{}</row>", text_cell("XFD1048576", "x"))
}

/// An xlsx source reading `Date`, `Amount`, `Ref` in EUR, with `limits` on its workbooks.
fn xlsx_source(dir: &Path, limits: WorkbookLimits) -> SourceConfig {
    let map = dir.join("m.toml");
    std::fs::write(
        &map,
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\ntimezone = \"Europe/Berlin\"\n[columns]\nbooked_at = \"Date\"\namount = \"Amount\"\nreference = \"Ref\"\n",
    )
    .expect("write mapping");
    let mut cfg = SourceConfig::load_mapping(&map, Format::Xlsx).expect("mapping");
    cfg.limits.workbook = limits;
    cfg
}

/// Reads `bytes` as statement `s.xlsx` of [`xlsx_source`]: the lines' references, or the
/// error for the whole file.
fn read_statement(bytes: &[u8], limits: WorkbookLimits) -> Result<Vec<String>, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = xlsx_source(dir.path(), limits);
    let path = dir.path().join("s.xlsx");
    std::fs::write(&path, bytes).expect("write workbook");
    let mut load = SourceLoad::default();
    sources::read_file(&cfg, &path, &mut load).map_err(|e| format!("{e:#}"))?;
    Ok(load
        .lines
        .iter()
        .map(|l| l.reference().map(|r| r.to_string()).unwrap_or_default())
        .collect())
}

/// The hand-written workbook reads as a statement: the checks refuse bombs, not workbooks.
#[test]
fn a_small_hand_written_statement_workbook_reads() {
    let book = workbook("Sheet1", &sheet_xml(Some("A1:C2"), &statement_rows()), None);
    assert_eq!(
        read_statement(&book, WorkbookLimits::default()),
        Ok(vec!["P-1".to_string()])
    );
}

/// The 1.6 KB far-cell statement, with and without a declared dimension: unreadable, the far
/// cell and the bound named. Before: a dense range of 17 billion cells (a 1,586-byte file killed
/// the run in 5.4 s).
#[test]
fn a_far_cell_statement_is_unreadable_whatever_its_dimension_says() {
    let rows = format!("{}{}", statement_rows(), far_cell_row());
    for dimension in [Some("A1:XFD1048576"), Some("A1:C2"), None] {
        let book = workbook("Sheet1", &sheet_xml(dimension, &rows), None);
        assert!(book.len() < 2048, "{} bytes", book.len());
        let err = read_statement(&book, WorkbookLimits::default()).expect_err("far cell");
        assert!(
            err.contains("s.xlsx")
                && err.contains("A1:XFD1048576 spans 17179869184 cells")
                && err.contains("max_sheet_cells = 50000000"),
            "{dimension:?}: {err}"
        );
    }
}

/// A shared string of 64 MiB of one letter (about 64 KB compressed): refused by its ratio
/// after the first MiB, naming the part. Before: read whole (the 1 GiB string took
/// `decisions apply` to 3 GiB).
#[test]
fn a_shared_string_bomb_is_refused_by_its_ratio() {
    let head = format!(
        "<?xml version=\"1.0\"?><sst xmlns=\"{MAIN}\" count=\"1\" uniqueCount=\"1\"><si><t>"
    );
    let chunk = vec![b'a'; 1 << 20];
    let sheet = sheet_xml(
        Some("A1:A1"),
        "<row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c></row>",
    );
    let book = workbook(
        "Sheet1",
        &sheet,
        Some((&head, &chunk, 64, "</t></si></sst>")),
    );
    assert!(book.len() < 1 << 20, "{} bytes", book.len());
    let err = read_statement(&book, WorkbookLimits::default()).expect_err("bomb");
    assert!(
        err.contains("xl/sharedStrings.xml inflates to more than 250 times its compressed size"),
        "{err}"
    );
}

/// A part that compresses like text but inflates past `max_inflated_mb`: refused by its size.
#[test]
fn a_part_over_max_inflated_mb_is_refused() {
    let head = format!(
        "<?xml version=\"1.0\"?><sst xmlns=\"{MAIN}\" count=\"1\" uniqueCount=\"1\"><si><t>"
    );
    // Letters that do not repeat soon: about 2:1 compressed, far from a bomb's ratio.
    let mut x = 7u64;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            b'a' + ((x >> 33) % 26) as u8
        })
        .collect();
    let sheet = sheet_xml(None, "<row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c></row>");
    let book = workbook(
        "Sheet1",
        &sheet,
        Some((&head, &chunk, 3, "</t></si></sst>")),
    );
    let limits = WorkbookLimits {
        max_inflated_bytes: 2 << 20,
        ..WorkbookLimits::default()
    };
    let err = read_statement(&book, limits).expect_err("over the bound");
    assert!(
        err.contains("xl/sharedStrings.xml inflates to")
            && err.contains("more than max_inflated_mb = 2 allows"),
        "{err}"
    );
    // Within the default bound the same workbook is read (its one cell is no statement line).
    let read = read_statement(&book, WorkbookLimits::default());
    assert!(
        read.as_ref().is_err_and(|e| !e.contains("inflates")),
        "{read:?}"
    );
}

/// A shared-string table that declares four billion strings in a few bytes: refused before a
/// reader makes room for them.
#[test]
fn a_shared_string_table_that_declares_more_than_it_holds_is_refused() {
    let sheet = sheet_xml(None, &statement_rows());
    let book = workbook(
        "Sheet1",
        &sheet,
        Some((
            &format!(
                "<?xml version=\"1.0\"?><sst xmlns=\"{MAIN}\" count=\"4000000000\" uniqueCount=\"4000000000\">"
            ),
            b"<si><t>a</t></si>",
            1,
            "</sst>",
        )),
    );
    let err = read_statement(&book, WorkbookLimits::default()).expect_err("lying count");
    assert!(err.contains("declares 4000000000 shared strings"), "{err}");
}

/// Rows out of order cannot be read one at a time: the file is refused with how to fix it,
/// never read wrong.
#[test]
fn rows_out_of_order_are_refused_with_a_hint() {
    let rows = format!(
        "<row r=\"2\">{}</row><row r=\"1\">{}</row>",
        text_cell("A2", "2026-11-10"),
        text_cell("A1", "Date")
    );
    let book = workbook("Sheet1", &sheet_xml(None, &rows), None);
    let err = read_statement(&book, WorkbookLimits::default()).expect_err("out of order");
    assert!(
        err.contains("row 1 comes after row 2") && err.contains("save it again"),
        "{err}"
    );
}

/// The decision bomb: a Decide sheet with one far cell is unreadable as a whole, the cell named;
/// before, reading it built the dense range (21 GiB for a 158 KB file).
#[test]
fn a_decide_sheet_with_a_far_cell_is_unreadable() {
    let header: String = recon::report::xlsx::DECIDE_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, h)| text_cell(&recon::workbook::cell_name(0, i as u32), h))
        .collect();
    let rows = format!("<row r=\"1\">{header}</row>{}", far_cell_row());
    let book = workbook(
        recon::report::xlsx::DECIDE_SHEET,
        &sheet_xml(None, &rows),
        None,
    );
    let err =
        recon::decisions::read::read(&book, &WorkbookLimits::default()).expect_err("far cell");
    assert!(err.contains("XFD1048576"), "{err}");
    // Without the far cell the same sheet reads: a header and no decision.
    let rows = format!("<row r=\"1\">{header}</row>");
    let book = workbook(
        recon::report::xlsx::DECIDE_SHEET,
        &sheet_xml(None, &rows),
        None,
    );
    let sheet = recon::decisions::read::read(&book, &WorkbookLimits::default()).expect("reads");
    assert!(sheet.rows.is_empty() && sheet.undecided == 0, "{sheet:?}");
}

/// A statement path that is a device (`/dev/zero`: size 0, endless) or a FIFO (a reader would
/// wait for a writer): no regular file, never read, and reading it does not block.
#[test]
fn a_device_or_a_fifo_is_never_read_as_a_statement() {
    let limits = sources::InputLimits::default();
    let err = limits.read(Path::new("/dev/zero")).expect_err("a device");
    assert!(
        format!("{err:#}").contains("/dev/zero: not a regular file"),
        "{err:#}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("statement.csv");
    let c = std::ffi::CString::new(fifo.display().to_string()).expect("path");
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let err = limits.read(&fifo).expect_err("a FIFO");
    assert!(
        format!("{err:#}").contains("statement.csv: not a regular file"),
        "{err:#}"
    );
}

/// Memory pressure recon can foresee: with a memory limit (the pod's cgroup limit, or
/// `memory_limit_mb`), a file the memory model says would not fit beside what the run holds is
/// unreadable, naming both numbers, instead of an OOM-killed night; the same file fits a larger
/// limit. A job whose `max_file_mb` does not fit its limit says so once a night.
#[test]
fn a_file_the_memory_model_says_would_not_fit_is_unreadable_not_an_oom_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("statement.csv");
    std::fs::write(&path, vec![b'x'; 16 << 20]).expect("16 MiB file");
    let tight = sources::InputLimits {
        memory_limit: Some(64 << 20),
        ..sources::InputLimits::default()
    };
    let err = format!("{:#}", tight.read(&path).expect_err("does not fit"));
    assert!(
        err.contains("statement.csv: reading it would need about")
            && err.contains("22 × its 16777216 bytes")
            && err.contains("more than the memory limit of 64 MiB"),
        "{err}"
    );
    let roomy = sources::InputLimits {
        memory_limit: Some(8 << 30),
        ..sources::InputLimits::default()
    };
    assert_eq!(roomy.read(&path).expect("fits").len(), 16 << 20);
    // The default max_file_mb fits the CronJob's 3 GiB; 400 (the old default) did not: 256 MiB
    // + 22 × 400 MiB.
    let pod = 3u64 << 30;
    let default = sources::InputLimits {
        memory_limit: Some(pod),
        ..sources::InputLimits::default()
    };
    assert_eq!(default.memory_warning(), None);
    let old = sources::InputLimits {
        max_file_bytes: 400 << 20,
        memory_limit: Some(pod),
        ..sources::InputLimits::default()
    };
    let warning = old.memory_warning().expect("400 MB does not fit 3 GiB");
    assert!(
        warning.contains("max_file_mb = 400 needs about 9056 MiB")
            && warning.contains("memory limit of 3072 MiB"),
        "{warning}"
    );
}

/// The CronJob's memory limit fits the default bounds by the memory model (the test reads the
/// shipped manifest, so a change to either is checked against the other).
#[test]
fn the_cronjobs_memory_limit_fits_the_default_max_file_mb() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/cronjob.yaml"))
            .expect("deploy/cronjob.yaml");
    // The recon container's (the migrate init container before it has its own, small one).
    let limit = manifest
        .lines()
        .skip_while(|l| l.trim() != "- name: recon")
        .find_map(|l| {
            let l = l.trim();
            l.starts_with("limits:")
                .then(|| l.split("memory:").nth(1))
                .flatten()
                .map(|m| {
                    m.trim()
                        .trim_end_matches('}')
                        .trim()
                        .trim_matches('"')
                        .to_string()
                })
        })
        .expect("a memory limit of the recon container in deploy/cronjob.yaml");
    let bytes: u64 = match limit.strip_suffix("Gi") {
        Some(g) => g.parse::<u64>().expect("Gi") << 30,
        None => {
            limit
                .strip_suffix("Mi")
                .expect("Mi or Gi")
                .parse::<u64>()
                .expect("Mi")
                << 20
        }
    };
    let needed =
        sources::limits::memory_needed(sources::limits::DEFAULT_MAX_FILE_MB << 20, 1_000_000);
    assert!(
        needed <= bytes,
        "a {} MiB statement and a million payments need {} MiB, the CronJob allows {limit}",
        sources::limits::DEFAULT_MAX_FILE_MB,
        needed >> 20
    );
}
