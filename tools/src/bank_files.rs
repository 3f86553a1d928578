//! The bank's payout status files of a simulated world (issue 46): each
//! [`crate::sim::BankNotice`] as a file of its own in the job's `payouts/` folder, as a bank
//! writes it: a pain.002.001.10 status report (`payouts/pain002/`) rejecting the payout by its
//! end-to-end id (the payment id), or a NACHA return file (`payouts/nacha/`) naming the
//! original entry's trace number (the provider id the ledger recorded).

use crate::sim::{BankNotice, JOB_TZ, NoticeKind, World};
use recon::timeparse::{self, Micros};
use std::fmt::Write as _;

impl World {
    /// The bank files in the job's folder by night `n` (relative path, bytes), in creation
    /// order.
    pub fn notice_files(&self, n: u32) -> Vec<(String, Vec<u8>)> {
        self.notices
            .iter()
            .filter(|x| x.arrival <= n)
            .map(|x| match x.kind {
                NoticeKind::Rejection => (
                    format!("payouts/pain002/{}.xml", file_stem("rjct", x)),
                    self.pain002(x).into_bytes(),
                ),
                NoticeKind::Return => (
                    format!("payouts/nacha/{}.ach", file_stem("ret", x)),
                    self.nacha(x).into_bytes(),
                ),
            })
            .collect()
    }

    /// A pain.002 that rejects the notice's payment (RJCT, AC01).
    fn pain002(&self, x: &BankNotice) -> String {
        let p = &self.payments[x.payment];
        let amount = recon::money::format_minor(p.amount_minor, p.currency);
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.10\">\n\
             <CstmrPmtStsRpt>\n\
             <GrpHdr><MsgId>STS-{idx}</MsgId><CreDtTm>{created}</CreDtTm></GrpHdr>\n\
             <OrgnlGrpInfAndSts><OrgnlMsgId>PAYOUTS-{idx}</OrgnlMsgId></OrgnlGrpInfAndSts>\n\
             <OrgnlPmtInfAndSts>\n<OrgnlPmtInfId>PMTINF-{idx}</OrgnlPmtInfId>\n\
             <TxInfAndSts>\n<OrgnlEndToEndId>{id}</OrgnlEndToEndId>\n<TxSts>RJCT</TxSts>\n\
             <StsRsnInf><Rsn><Cd>AC01</Cd></Rsn><AddtlInf>Incorrect account number</AddtlInf></StsRsnInf>\n\
             <OrgnlTxRef><Amt><InstdAmt Ccy=\"{cur}\">{amount}</InstdAmt></Amt></OrgnlTxRef>\n\
             </TxInfAndSts>\n</OrgnlPmtInfAndSts>\n</CstmrPmtStsRpt>\n</Document>\n",
            idx = x.payment,
            created = timeparse::format_utc(x.created),
            id = p.id,
            cur = p.currency,
        )
    }

    /// A NACHA file of one return (R01) of the notice's payment's ACH entry.
    fn nacha(&self, x: &BankNotice) -> String {
        let p = &self.payments[x.payment];
        let local = chrono::DateTime::from_timestamp_micros(x.created)
            .unwrap_or_default()
            .with_timezone(&JOB_TZ);
        let (date, time) = (
            local.format("%y%m%d").to_string(),
            local.format("%H%M").to_string(),
        );
        let trace = p.provider_id.as_deref().unwrap_or("");
        let own_trace = format!("09100002{:07}", x.payment);
        let mut out = String::new();
        for r in [
            record(&[
                (1, "101 091000019 123456789"),
                (24, &date),
                (30, &time),
                (34, "A094101RECON SIM BANK         RECON SIM PAYOUTS"),
            ]),
            record(&[
                (1, "5200RECON SIM PAYOUTS"),
                (41, "1234567890PPDPAYOUT"),
                (70, &date),
                (79, "1091000010000001"),
            ]),
            record(&[
                (1, "626231380104"),
                (13, "9876543210"),
                (30, &format!("{:010}", p.amount_minor)),
                (40, "RECON SIM"),
                (55, "PAYEE"),
                (79, "1"),
                (80, &own_trace),
            ]),
            record(&[
                (1, "799R01"),
                (7, trace),
                (28, "23138010"),
                (36, "INSUFFICIENT FUNDS"),
                (80, &own_trace),
            ]),
            record(&[(1, "8200000002"), (80, "091000010000001")]),
            record(&[(1, "900000100000100000002")]),
        ] {
            let _ = writeln!(out, "{r}");
        }
        out
    }
}

/// `<prefix>-<created, UTC>-<payment index>`: names sort by creation.
fn file_stem(prefix: &str, x: &BankNotice) -> String {
    let t: Micros = x.created;
    let at = chrono::DateTime::from_timestamp_micros(t)
        .unwrap_or_default()
        .format("%Y%m%dT%H%M%S");
    format!("{prefix}-{at}-{}", x.payment)
}

/// A 94-character NACHA record from its fields (1-based position, text), blank elsewhere.
fn record(fields: &[(usize, &str)]) -> String {
    let mut r = vec![b' '; 94];
    for (at, text) in fields {
        let end = (at - 1 + text.len()).min(94);
        r[at - 1..end].copy_from_slice(&text.as_bytes()[..end - (at - 1)]);
    }
    String::from_utf8(r).unwrap_or_default()
}
