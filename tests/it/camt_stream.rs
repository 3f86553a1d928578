//! camt statements are read one entry at a time (issue 41 point 2): a 300 MB camt.053 took
//! 4.6 GiB when the whole file's element tree was built first. Peak RSS is read from `/proc`
//! (`VmHWM`) of the `recon` binary run as a child process (`recon parse`, so that what is
//! measured is the reading of the file, not the reconciliation of its lines); the generated
//! file is written into the test's temp folder and deleted with it. The child-process harness
//! is `bounds.rs`'s.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// What `recon parse --format camt053 <file>` did: exit code, stdout (the lines as CSV),
/// stderr (the statement's facts), and the larger of the `VmHWM` seen while it ran and the
/// kernel's own peak (`ru_maxrss` of `wait4`), in KiB.
struct Parse {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_kib: u64,
}

/// Runs `recon parse` on a camt.053 file as a child process, watching its peak RSS.
fn parse_child(file: &Path, dir: &Path) -> Parse {
    let (out_path, err_path) = (dir.join("stdout.csv"), dir.join("stderr.txt"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_recon"));
    cmd.args(["parse", "--format", "camt053"])
        .arg(file)
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .stdin(Stdio::null());
    let (code, vm_hwm, maxrss) = crate::bounds::watch(cmd);
    Parse {
        code,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        peak_kib: vm_hwm.max(maxrss),
    }
}

/// Writes a camt.053 of one statement with entries shaped like a real bank's (an ABN AMRO
/// test file: references, bank transaction code, one transaction detail with its parties,
/// agents and remittance text; every 10th entry a batch of two details) until the file has
/// at least `len` bytes. Returns the number of entries and of the lines they make.
fn write_camt053(path: &Path, len: u64) -> (u64, u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create camt"));
    let amount = |cents: u64| format!("{}.{:02}", cents / 100, cents % 100);
    let mut head = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02">
    <BkToCstmrStmt>
        <GrpHdr>
            <MsgId>TESTBANK/NL/1420561226673</MsgId>
            <CreDtTm>2026-11-11T06:20:26.673Z</CreDtTm>
        </GrpHdr>
        <Stmt>
            <Id>STREAM-1</Id>
            <CreDtTm>2026-11-11T06:20:26.673Z</CreDtTm>
            <FrToDt>
                <FrDtTm>2026-11-10T00:00:00.000Z</FrDtTm>
                <ToDtTm>2026-11-10T23:59:59.999Z</ToDtTm>
            </FrToDt>
            <Acct>
                <Id>
                    <IBAN>NL77ABNA0574908765</IBAN>
                </Id>
            </Acct>
"#,
    );
    head.push_str(
        "            <Bal>\n                <Tp><CdOrPrtry><Cd>OPBD</Cd></CdOrPrtry></Tp>\n                <Amt Ccy=\"EUR\">1000.00</Amt>\n                <CdtDbtInd>CRDT</CdtDbtInd>\n                <Dt><Dt>2026-11-10</Dt></Dt>\n            </Bal>\n",
    );
    f.write_all(head.as_bytes()).expect("write");
    let mut written = head.len() as u64;
    let (mut entries, mut lines) = (0u64, 0u64);
    while written < len {
        entries += 1;
        let i = entries;
        let parts: Vec<u64> = if i % 10 == 0 {
            vec![1000 + i % 50_000, 2000 + i % 7000]
        } else {
            vec![1000 + i % 90_000]
        };
        lines += parts.len() as u64;
        let mut details = String::new();
        if parts.len() > 1 {
            details.push_str("                    <Btch><NbOfTxs>2</NbOfTxs></Btch>\n");
        }
        for (j, cents) in parts.iter().enumerate() {
            let j = j + 1;
            details.push_str(&format!(
                r#"                    <TxDtls>
                        <Refs>
                            <AcctSvcrRef>TX{i:09}-{j}</AcctSvcrRef>
                            <InstrId>TESTBANK/NL/20261110/{i:09}{j}</InstrId>
                            <EndToEndId>E2E-{i:09}-{j}</EndToEndId>
                        </Refs>
                        <AmtDtls>
                            <TxAmt>
                                <Amt Ccy="EUR">{amt}</Amt>
                            </TxAmt>
                        </AmtDtls>
                        <RltdPties>
                            <Dbtr>
                                <Nm>Test Customer {i}</Nm>
                                <PstlAdr><Ctry>NL</Ctry></PstlAdr>
                            </Dbtr>
                            <DbtrAcct><Id><IBAN>NL46ABNA{i:010}</IBAN></Id></DbtrAcct>
                        </RltdPties>
                        <RltdAgts>
                            <DbtrAgt><FinInstnId><BIC>ABNANL2A</BIC></FinInstnId></DbtrAgt>
                        </RltdAgts>
                        <RmtInf>
                            <Ustrd>Invoice {i:09}-{j} period 01.11.2026 - 30.11.2026</Ustrd>
                        </RmtInf>
                    </TxDtls>
"#,
                amt = amount(*cents)
            ));
        }
        let entry = format!(
            r#"            <Ntry>
                <NtryRef>{i:09}</NtryRef>
                <Amt Ccy="EUR">{amt}</Amt>
                <CdtDbtInd>CRDT</CdtDbtInd>
                <Sts>BOOK</Sts>
                <BookgDt>
                    <Dt>2026-11-10</Dt>
                </BookgDt>
                <ValDt>
                    <Dt>2026-11-10</Dt>
                </ValDt>
                <AcctSvcrRef>ASR{i:09}</AcctSvcrRef>
                <BkTxCd>
                    <Domn><Cd>PMNT</Cd><Fmly><Cd>RCDT</Cd><SubFmlyCd>ESCT</SubFmlyCd></Fmly></Domn>
                </BkTxCd>
                <NtryDtls>
{details}                </NtryDtls>
            </Ntry>
"#,
            amt = amount(parts.iter().sum())
        );
        f.write_all(entry.as_bytes()).expect("write");
        written += entry.len() as u64;
    }
    f.write_all(b"        </Stmt>\n    </BkToCstmrStmt>\n</Document>\n")
        .expect("write");
    f.flush().expect("flush");
    (entries, lines)
}

/// A 40 MB camt.053 (18,000 entries) is read with a peak RSS of at most twice the file over
/// what reading a 1 MB one takes (the file's bytes, the lines, one entry's elements). The
/// baseline is a 1 MB file, not a one-entry one: a process that ends within a few milliseconds
/// is sampled too rarely to see its peak when the test process is itself large (its
/// `ru_maxrss` is then not the child's own), which once put the baseline at half its size.
/// Building the whole element tree first took about 8 times the file (a debug build: 529 MiB
/// for 60 MB, 2.4 GiB for 300 MB); reading entry by entry takes about 1.2 times (136 MiB and
/// 450 MiB, of which 66 MiB is the binary's own).
#[test]
fn a_40_mb_camt053_is_read_one_entry_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small.xml");
    write_camt053(&small, 1_000_000);
    let small_kib = std::fs::metadata(&small).expect("size").len() / 1024;
    let base = parse_child(&small, dir.path());
    assert_eq!(base.code, Some(0), "{}", base.stderr);

    let file = dir.path().join("big.xml");
    let (entries, lines) = write_camt053(&file, 40_000_000);
    let size_kib = std::fs::metadata(&file).expect("size").len() / 1024;
    let run = parse_child(&file, dir.path());
    std::fs::remove_file(&file).expect("delete the 40 MB file");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // Every entry was read: one CSV row per line (a batch of two details is two), and the
    // statement's facts count the entries.
    assert_eq!(
        run.stdout.lines().count() as u64,
        lines + 1,
        "rows and header"
    );
    assert!(
        run.stderr.contains(&format!("{entries} entries summing"))
            && run.stderr.contains("balances chain: n/a"),
        "{}",
        run.stderr
    );
    let bound = base.peak_kib + 2 * (size_kib - small_kib);
    eprintln!(
        "peak RSS {} KiB reading a {size_kib} KiB camt.053, {} KiB for a {small_kib} KiB one",
        run.peak_kib, base.peak_kib
    );
    assert!(
        run.peak_kib < bound,
        "peak RSS {} KiB reading a {size_kib} KiB camt.053 ({}.{}x the file); at most {bound} KiB ({} KiB for a {small_kib} KiB file + 2x the difference)",
        run.peak_kib,
        run.peak_kib / size_kib,
        run.peak_kib * 10 / size_kib % 10,
        base.peak_kib
    );
}
