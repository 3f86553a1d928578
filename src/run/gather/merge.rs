//! The k-way merge of the shards' CSV files into the night's (results.csv, diff.csv,
//! rejected.csv, settlement.csv), streaming: one record of each file is held at a time, never a
//! whole file.
//!
//! Every column is found by its header name: the merged file has the first file's header, each
//! other file's records are written in that header's column order (the same names, perhaps in
//! another order), and the merge key reads its columns by name ([`Order::columns`]). A file
//! whose header lacks a column the merge needs, or has a column the first file does not, is
//! refused with its path and the column's name.
//!
//! Each file must be in key order (the shards write their rows so: payment rows by payment id,
//! then line rows by their source's place in the job file, as one process orders a partitioned
//! night); records of equal keys keep the files' order. A file read out of order is merged all
//! the same (the night's order then differs from one process's) and said in a warning.

use crate::run::handover::Hashing;
use anyhow::{Context as _, Result, anyhow};
use std::path::{Path, PathBuf};

/// Where a record goes in the merged file: (section, payment id, source position).
pub(super) type Key = (u8, Vec<u8>, usize);

/// How a merged file is ordered: the columns its key reads, by header name, and the key of a
/// record from those columns' values (in `columns` order).
pub(super) struct Order<'a> {
    /// The header names the key reads.
    pub columns: &'a [&'a str],
    /// The key of a record, from the values of `columns`.
    pub key: &'a dyn Fn(&[&[u8]]) -> Key,
}

/// One input file being merged.
struct Input {
    path: PathBuf,
    reader: csv::Reader<Hashing<std::fs::File>>,
    /// The position in this file's records of each column of the merged header (None: the
    /// file has them in that order already).
    project: Option<Vec<usize>>,
    /// Its next record and that record's key.
    head: Option<(csv::ByteRecord, Key)>,
    /// The key of the record before `head` (a file out of key order is warned about once).
    last: Option<Key>,
    out_of_order: bool,
}

/// Merges the `name` files of `dirs` into `tmp/name` in `order`, each record byte for byte
/// (as the csv crate writes it); ties keep `dirs` order. Returns the sha256 and size of each
/// file as read (whole), in `dirs` order. When file `i`'s content is refused (a column
/// missing, or it cannot be read), `refused(i)` is called first: it may say why better (a file
/// changed since it was sealed).
pub(super) fn merge_csv(
    dirs: &[PathBuf],
    name: &str,
    tmp: &Path,
    order: &Order<'_>,
    refused: &dyn Fn(usize) -> Result<()>,
) -> Result<Vec<(String, u64)>> {
    let mut inputs = Vec::with_capacity(dirs.len());
    for d in dirs {
        let path = d.join(name);
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(Hashing::new(
                std::fs::File::open(&path)
                    .with_context(|| format!("opening {}", path.display()))?,
            ));
        inputs.push(Input {
            path,
            reader,
            project: None,
            head: None,
            last: None,
            out_of_order: false,
        });
    }
    // The headers: the first file's is the merged file's; every other file is read by name.
    let mut header: Option<csv::ByteRecord> = None;
    for (i, input) in inputs.iter_mut().enumerate() {
        let mut h = csv::ByteRecord::new();
        let read = input
            .reader
            .read_byte_record(&mut h)
            .with_context(|| format!("reading {}", input.path.display()));
        let has_header = match read {
            Ok(has) => has,
            Err(e) => {
                refused(i)?;
                return Err(e);
            }
        };
        if !has_header {
            continue; // An empty file: no rows.
        }
        let checked = match &header {
            None => header_positions(&h, &h, order.columns).map(|_| ()),
            Some(first) => header_positions(first, &h, order.columns).map(|(project, _)| {
                input.project = project;
            }),
        }
        .map_err(|e| anyhow!("{}: {e}", input.path.display()));
        if let Err(e) = checked {
            refused(i)?;
            return Err(e);
        }
        header.get_or_insert(h);
    }
    let Some(header) = header else {
        // No file has a header: the merged file is empty too.
        std::fs::File::create(tmp.join(name))
            .with_context(|| format!("creating {}", tmp.join(name).display()))?;
        return Ok(finish(inputs));
    };
    let at = header_positions(&header, &header, order.columns)?.1;
    let out_path = tmp.join(name);
    let mut out =
        csv::WriterBuilder::new()
            .flexible(true)
            .from_writer(std::io::BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(&out_path)
                    .with_context(|| format!("creating {}", out_path.display()))?,
            ));
    out.write_byte_record(&header)?;
    for (i, input) in inputs.iter_mut().enumerate() {
        if let Err(e) = advance(input, order, &at) {
            refused(i)?;
            return Err(e);
        }
    }
    loop {
        let best = inputs
            .iter()
            .enumerate()
            .filter_map(|(i, x)| x.head.as_ref().map(|(_, k)| (i, k)))
            .min_by(|(ia, ka), (ib, kb)| ka.cmp(kb).then(ia.cmp(ib)))
            .map(|(i, _)| i);
        let Some(i) = best else { break };
        if let Some((rec, _)) = &inputs[i].head {
            out.write_byte_record(rec)?;
        }
        if let Err(e) = advance(&mut inputs[i], order, &at) {
            refused(i)?;
            return Err(e);
        }
    }
    out.flush()
        .with_context(|| format!("writing {}", out_path.display()))?;
    Ok(finish(inputs))
}

/// The sha256 and size of every input as read: all of each file went through its hash.
fn finish(inputs: Vec<Input>) -> Vec<(String, u64)> {
    inputs
        .into_iter()
        .map(|x| x.reader.into_inner().finish())
        .collect()
}

/// Reads `input`'s next record (in the merged header's column order) and its key into its
/// head; `at` are the key's columns in the merged header.
fn advance(input: &mut Input, order: &Order<'_>, at: &[usize]) -> Result<()> {
    let mut rec = match input.head.take() {
        Some((mut rec, key)) => {
            rec.clear();
            input.last = Some(key);
            rec
        }
        None => csv::ByteRecord::new(),
    };
    if !input
        .reader
        .read_byte_record(&mut rec)
        .with_context(|| format!("reading {}", input.path.display()))?
    {
        return Ok(());
    }
    let line = rec.position().map_or(0, csv::Position::line);
    if let Some(project) = &input.project {
        let mut ordered = csv::ByteRecord::with_capacity(rec.as_slice().len(), project.len());
        for &p in project {
            ordered.push_field(rec.get(p).unwrap_or_default());
        }
        rec = ordered;
    }
    let values: Vec<&[u8]> = at.iter().map(|&p| rec.get(p).unwrap_or_default()).collect();
    let key = (order.key)(&values);
    if !input.out_of_order && input.last.as_ref().is_some_and(|last| *last > key) {
        input.out_of_order = true;
        tracing::warn!(
            file = %input.path.display(),
            line,
            "The file's rows are not in the order the gather merges them in: the night's rows \
             are merged all the same, in an order that may differ from one process's."
        );
    }
    input.head = Some((rec, key));
    Ok(())
}

/// Reads `header` (a file's) against `merged` (the merged file's): the position in `header`
/// of each column of `merged` when they differ in order (None: the same header), and the
/// position in `merged` of each of `columns`. An error names the column `header` lacks or has
/// too many, or the one `merged` lacks.
fn header_positions(
    merged: &csv::ByteRecord,
    header: &csv::ByteRecord,
    columns: &[&str],
) -> Result<(Option<Vec<usize>>, Vec<usize>)> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let names = |h: &csv::ByteRecord| h.iter().map(text).collect::<Vec<_>>().join(",");
    for (k, name) in header.iter().enumerate() {
        if header.iter().take(k).any(|n| n == name) {
            return Err(anyhow!(
                "its header has the column {:?} twice: a column is read by its name",
                text(name)
            ));
        }
    }
    let mut at = Vec::with_capacity(columns.len());
    for c in columns {
        match merged.iter().position(|n| n == c.as_bytes()) {
            Some(p) => at.push(p),
            None => {
                return Err(anyhow!(
                    "its header has no column {c:?}, which the gather merges the files by \
                     (header: {})",
                    names(header)
                ));
            }
        }
    }
    if header == merged {
        return Ok((None, at));
    }
    let mut project = Vec::with_capacity(merged.len());
    for name in merged {
        match header.iter().position(|n| n == name) {
            Some(p) => project.push(p),
            None => {
                return Err(anyhow!(
                    "its header has no column {:?}, which the other shards' files have \
                     (header: {})",
                    text(name),
                    names(header)
                ));
            }
        }
    }
    if let Some(extra) = header.iter().find(|n| !merged.iter().any(|m| m == *n)) {
        return Err(anyhow!(
            "its header has a column {:?} that the other shards' files do not have (header: {})",
            text(extra),
            names(header)
        ));
    }
    Ok((Some(project), at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Payment rows (a `pid`) by id, then line rows by their source (`src` as a number).
    fn by_row(v: &[&[u8]]) -> Key {
        if v[0].is_empty() {
            (
                1,
                Vec::new(),
                std::str::from_utf8(v[1]).unwrap().parse().unwrap(),
            )
        } else {
            (0, v[0].to_vec(), 0)
        }
    }

    const ORDER: Order<'static> = Order {
        columns: &["pid", "src"],
        key: &by_row,
    };

    /// Folders `0`, `1`, … of a temporary folder, each with `f.csv` holding its text, and the
    /// output folder `out`.
    fn folders(texts: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let d = root.path().join(i.to_string());
                std::fs::create_dir(&d).unwrap();
                std::fs::write(d.join("f.csv"), t).unwrap();
                d
            })
            .collect();
        let out = root.path().join("out");
        std::fs::create_dir(&out).unwrap();
        (root, dirs, out)
    }

    /// The shards' rows interleave by key, payment rows first; a shard whose header has the
    /// same columns in another order is read by name and written in the first one's order;
    /// ties keep the shards' order. The sizes returned are the files' whole sizes.
    #[test]
    fn rows_merge_by_key_read_by_column_name() {
        let a = "pid,src,detail\nP1,,a1\nP4,,a4\n,2,a-line\n";
        let b = "detail,src,pid\nb2,,P2\nb5,,P5\nb-first,0,\nb-line,2,\n";
        let (_root, dirs, out) = folders(&[a, b]);
        let read = merge_csv(&dirs, "f.csv", &out, &ORDER, &|_| Ok(())).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("f.csv")).unwrap(),
            "pid,src,detail\nP1,,a1\nP2,,b2\nP4,,a4\nP5,,b5\n,0,b-first\n,2,a-line\n,2,b-line\n"
        );
        assert_eq!(
            read.iter().map(|r| r.1).collect::<Vec<_>>(),
            vec![a.len() as u64, b.len() as u64]
        );
        // The sha256 of the whole file, as the seal holds it.
        assert_eq!(
            read[0].0,
            crate::run::handover::seal(&dirs[0]).unwrap()[0].sha256
        );
    }

    /// A shard's header without a column the merge reads, or without one of the first
    /// shard's, or with one more: refused, naming the file and the column, after `refused`
    /// was asked about that shard.
    #[test]
    fn a_header_that_differs_is_refused_naming_the_file_and_the_column() {
        let a = "pid,src,detail\nP1,,a1\n";
        for (b, column) in [
            ("pid,detail\nP2,b\n", "\"src\""),
            ("pid,src\nP2,\n", "\"detail\""),
            ("pid,src,detail,more\nP2,,b,x\n", "\"more\""),
            ("pid,src,detail,src\nP2,,b,\n", "\"src\" twice"),
        ] {
            let (_root, dirs, out) = folders(&[a, b]);
            let asked = RefCell::new(Vec::new());
            let e = merge_csv(&dirs, "f.csv", &out, &ORDER, &|i| {
                asked.borrow_mut().push(i);
                Ok(())
            })
            .unwrap_err()
            .to_string();
            assert!(
                e.contains(&dirs[1].join("f.csv").display().to_string()),
                "{e}"
            );
            assert!(e.contains(column), "{e}");
            assert_eq!(asked.into_inner(), vec![1], "{e}");
        }
        // The first file's header is checked too.
        let (_root, dirs, out) = folders(&["id,src\nP1,\n", "pid,src\nP2,\n"]);
        let e = merge_csv(&dirs, "f.csv", &out, &ORDER, &|_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no column \"pid\""), "{e}");
        assert!(
            e.contains(&dirs[0].join("f.csv").display().to_string()),
            "{e}"
        );
    }

    /// What `refused` says wins (the gather's: the file changed since it was sealed).
    #[test]
    fn the_refusal_of_a_changed_file_comes_first() {
        let (_root, dirs, out) = folders(&["pid,src\nP1,\n", "pid,detail\nP2,b\n"]);
        let e = merge_csv(&dirs, "f.csv", &out, &ORDER, &|i| {
            Err(anyhow!("shard {i} changed"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "shard 1 changed");
    }

    /// A file out of key order is merged all the same, record by record.
    #[test]
    fn a_file_out_of_order_is_merged_as_it_comes() {
        let (_root, dirs, out) = folders(&["pid,src\nP3,\nP1,\n", "pid,src\nP2,\n"]);
        merge_csv(&dirs, "f.csv", &out, &ORDER, &|_| Ok(())).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("f.csv")).unwrap(),
            "pid,src\nP2,\nP3,\nP1,\n"
        );
    }

    /// Empty files (no header) have no rows; when every file is empty so is the merged one.
    #[test]
    fn empty_files_have_no_rows() {
        let (_root, dirs, out) = folders(&["", "pid,src\nP2,\n", ""]);
        merge_csv(&dirs, "f.csv", &out, &ORDER, &|_| Ok(())).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("f.csv")).unwrap(),
            "pid,src\nP2,\n"
        );
        let (_root, dirs, out) = folders(&["", ""]);
        merge_csv(&dirs, "f.csv", &out, &ORDER, &|_| Ok(())).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("f.csv")).unwrap(), "");
    }
}
