//! Coverage: the half-open UTC intervals a source covers completely. The interval maths (the
//! day spans of local days are `timeparse::days_span`), what one file proves about its period
//! under the source's [`Completeness`], and the control files that prove it for
//! `completeness = "control_file"`.

use super::config::{Completeness, SourceConfig};
use super::{SourceLoad, cut};
use crate::timeparse::Micros;
use anyhow::Result;
use std::path::Path;

/// Removes `holes` from merged `coverage` (both half-open); the result is merged and sorted.
pub fn subtract_intervals(
    coverage: Vec<(Micros, Micros)>,
    holes: &[(Micros, Micros)],
) -> Vec<(Micros, Micros)> {
    let holes = merge_intervals(holes.to_vec());
    let mut out = Vec::new();
    for (mut a, b) in coverage {
        for &(h0, h1) in &holes {
            if h1 <= a || h0 >= b {
                continue;
            }
            if h0 > a {
                out.push((a, h0));
            }
            a = a.max(h1);
            if a >= b {
                break;
            }
        }
        if a < b {
            out.push((a, b));
        }
    }
    merge_intervals(out)
}

/// Merges overlapping or touching half-open intervals.
pub fn merge_intervals(mut v: Vec<(Micros, Micros)>) -> Vec<(Micros, Micros)> {
    v.sort_unstable();
    let mut out: Vec<(Micros, Micros)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Whether merged `coverage` contains all of `[from, to]`.
pub fn covers(coverage: &[(Micros, Micros)], from: Micros, to: Micros) -> bool {
    coverage.iter().any(|&(a, b)| a <= from && to < b)
}

/// What the file just read (its lines from `lines0`, its statements from `facts0`, its file
/// record last) proves about `span`, the period it claims: the part of `span` it covers
/// completely under the source's [`Completeness`]. Says why in a warning when that is less.
pub(super) fn prove(
    cfg: &SourceConfig,
    path: &Path,
    span: (Micros, Micros),
    load: &mut SourceLoad,
    lines0: usize,
    facts0: usize,
) -> Option<(Micros, Micros)> {
    let file = path.display().to_string();
    let lines = &load.lines[lines0..];
    let warn = |load: &mut SourceLoad, why: String| {
        load.warnings.push(format!(
            "source {}: {file} proves nothing about its period ({why}), so it is not treated as complete",
            cfg.name
        ));
        None
    };
    let record = load.files.last().cloned();
    let held = record
        .as_ref()
        .map(|f| f.lines + f.rejected + f.duplicates + f.not_booked + f.skipped)
        .unwrap_or(0);
    if held == 0 && cfg.empty_means_no_activity && cfg.completeness != Completeness::None {
        // The source declares that an empty file means a period without activity.
        return Some(span);
    }
    match cfg.completeness {
        Completeness::None => None,
        Completeness::ControlFile => {
            let ctl = format!("{file}.ctl");
            let text = match std::fs::read_to_string(&ctl) {
                Ok(t) => t,
                Err(e) => return warn(load, format!("no control file {ctl}: {e}")),
            };
            match check_control(&text, held, record.as_ref().map(|f| f.sha256.as_str())) {
                Ok(()) => Some(span),
                Err(why) => warn(load, format!("control file {ctl}: {why}")),
            }
        }
        Completeness::LastLine => {
            let Some(last) = lines.last() else {
                return warn(
                    load,
                    "no lines, and the source does not say that an empty file means no activity \
                     (empty_file = \"no_activity\")"
                        .into(),
                );
            };
            if let Some(w) = lines.windows(2).find(|w| w[1].booked_at < w[0].booked_at) {
                return warn(
                    load,
                    format!(
                        "completeness = \"last_line\" needs lines in booking order; {} is booked before {}",
                        w[1].position(),
                        w[0].position()
                    ),
                );
            }
            // Covered up to the last booking: a timestamp covers its instant, a date-only
            // booking only the days before its own.
            let end = if last.booked_day.is_some() {
                last.booked_at
            } else {
                last.booked_at.saturating_add(1)
            };
            let end = end.min(span.1);
            if end < span.1 {
                load.warnings.push(format!(
                    "source {}: {file} covers its period only up to its last line ({}, {})",
                    cfg.name,
                    last.position(),
                    last.booked_text()
                ));
            }
            (end > span.0).then_some((span.0, end))
        }
        Completeness::Statement => {
            let facts = &load.facts[facts0..];
            if facts.is_empty() {
                return warn(load, "no statement in it".into());
            }
            if let Some(f) = facts.iter().find(|f| {
                f.balance_chains() != Some(true) && f.declared_totals_agree() != Some(true)
            }) {
                return warn(
                    load,
                    format!(
                        "statement at {} declares no balances that chain and no control totals",
                        f.position
                    ),
                );
            }
            Some(span)
        }
    }
}

/// The text of a control file for a statement of `lines` data records whose bytes have the
/// sha256 `sha256` (hex; either may be left out): what [`check_control`] reads.
pub fn control_text(lines: Option<usize>, sha256: Option<&str>) -> String {
    let mut c = String::new();
    if let Some(n) = lines {
        c.push_str(&format!("lines={n}\n"));
    }
    if let Some(h) = sha256 {
        c.push_str(&format!("sha256={h}\n"));
    }
    c
}

/// Checks a control file (`lines=N`, `sha256=HEX`, one per line, `#` comments) against the
/// statement file it describes: `held` lines, bytes with digest `sha256`.
pub fn check_control(text: &str, held: usize, sha256: Option<&str>) -> Result<(), String> {
    let mut checked = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "line {}: expected key=value, found {:?}",
                i + 1,
                cut(line)
            ));
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        match key.as_str() {
            "lines" => {
                let n: usize = value.parse().map_err(|_| {
                    format!("line {}: lines={:?} is not a count", i + 1, cut(value))
                })?;
                if n != held {
                    return Err(format!("declares {n} lines, the file holds {held}"));
                }
            }
            "sha256" => {
                if sha256.is_none_or(|s| !s.eq_ignore_ascii_case(value)) {
                    return Err(format!(
                        "declares sha256 {}, the file's is {}",
                        cut(value),
                        sha256.unwrap_or("?")
                    ));
                }
            }
            other => return Err(format!("line {}: unknown key {:?}", i + 1, cut(other))),
        }
        checked += 1;
    }
    if checked == 0 {
        return Err("declares neither lines= nor sha256=".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_merge_and_cover() {
        let m = merge_intervals(vec![(10, 20), (0, 10), (30, 40)]);
        assert_eq!(m, vec![(0, 20), (30, 40)]);
        assert!(covers(&m, 0, 19));
        assert!(!covers(&m, 0, 20));
        assert!(!covers(&m, 15, 35));
    }

    #[test]
    fn holes_are_cut_out_of_coverage() {
        let cov = vec![(0, 100), (200, 300)];
        assert_eq!(
            subtract_intervals(cov.clone(), &[(10, 20), (90, 210)]),
            vec![(0, 10), (20, 90), (210, 300)]
        );
        assert_eq!(subtract_intervals(cov.clone(), &[]), cov);
        assert_eq!(subtract_intervals(cov, &[(-5, 400)]), vec![]);
    }
}
