//! Loading one configured source over a run's days: one file per day for a daily (`{date}`)
//! path, or the one fixed file; the versions `recon pull` kept, the periods a failed pull
//! leaves incomplete, and the source's coverage after its gates.

use super::config::{SourceConfig, SourcePath};
use super::coverage::prove;
use super::gates::{continuity_gates, statement_gates};
use super::{
    Gate, SourceLoad, Unreadable, assign_line_ids, days_span, manifest, merge_intervals, read_file,
    subtract_intervals,
};
use crate::timeparse::Micros;
use anyhow::Result;
use chrono::NaiveDate;
use std::path::Path;

/// Loads one configured source. Daily (`{date}`) sources read one file per day in `days`;
/// a day that has not ended by `as_of` is read when its file is there, and not asked for when
/// it is not (its file cannot be complete yet). A missing daily file, and a file that exists
/// but cannot be read ([`Unreadable`]), only narrow coverage; a configuration error stops.
///
/// Coverage rests on what each file proves ([`Completeness`], DESIGN.md rule 2): a file that
/// proves nothing — no control file, out of booking order, empty without `empty_file =
/// "no_activity"`, a statement without balances or control totals — covers nothing.
///
/// [`Completeness`]: super::config::Completeness
pub fn load(cfg: &SourceConfig, days: (NaiveDate, NaiveDate), as_of: Micros) -> Result<SourceLoad> {
    let mut load = SourceLoad::default();
    let mut coverage = Vec::new();
    let mut holes = Vec::new();
    let span_of = |from: NaiveDate, to: NaiveDate| days_span(from, to, cfg.timezone);
    match &cfg.path {
        SourcePath::Fixed { path, complete } => {
            let span = complete.map(|(from, to)| span_of(from, to));
            holes.extend(pull_holes(cfg, None, span, &mut load));
            // A remote file that was never pulled (missing at the server) proves nothing; a
            // local fixed file that is missing is an input error, as before (the job's one
            // file of this source is not where its config says). One that is there but cannot
            // be read leaves its period incomplete ([`read_or_record`]).
            let unpulled = cfg.remote.is_some() && !path.exists();
            if cfg.remote.is_none() && !path.exists() {
                return Err(crate::exit::fail(
                    crate::exit::Failure::Input,
                    format!(
                        "source {}: {}: cannot read: the file does not exist",
                        cfg.name,
                        path.display()
                    ),
                ));
            }
            if unpulled {
                load.warnings.push(format!(
                    "source {}: no pulled copy of its file ({}), so absence of a line never proves a failure",
                    cfg.name,
                    path.display()
                ));
            }
            for path in pulled_versions(cfg, path)
                .iter()
                .filter(|p| !unpulled && cfg.may_read(p))
            {
                let path = path.as_path();
                let (lines0, facts0) = (load.lines.len(), load.facts.len());
                let period = complete
                    .map(|(from, to)| format!("{from}..{to}"))
                    .unwrap_or_else(|| "?".into());
                let Some(clean) = read_or_record(cfg, path, period, &mut load)? else {
                    holes.extend(span);
                    continue;
                };
                holes.extend(statement_gates(
                    cfg,
                    &load.facts[facts0..],
                    span,
                    &mut load.gates,
                ));
                match span {
                Some(span) if clean => {
                    coverage.extend(prove(cfg, path, span, &mut load, lines0, facts0));
                }
                Some(_) => load.warnings.push(format!(
                    "source {}: {} has rejected or not-booked lines, so it is not treated as complete",
                    cfg.name,
                    path.display()
                )),
                None => load.warnings.push(format!(
                    "source {}: no complete_from/complete_to declared, so absence of a line never proves a failure",
                    cfg.name
                )),
            }
            }
        }
        SourcePath::Daily(template) => {
            let mut day = days.0;
            while day <= days.1 {
                let path_text = template.replace("{date}", &day.format("%Y-%m-%d").to_string());
                let path = Path::new(&path_text);
                let span = span_of(day, day);
                let ended = span.1 <= as_of;
                // A replayed night reads only the files its run read.
                let present =
                    path.exists() && pulled_versions(cfg, path).iter().any(|p| cfg.may_read(p));
                holes.extend(pull_holes(cfg, Some(day), Some(span), &mut load));
                if ended || present {
                    load.gates.push(Gate {
                        source: cfg.name.clone(),
                        file: path_text.clone(),
                        period: format!("{day}..{day}"),
                        check: "daily_file",
                        ok: present,
                        detail: if present {
                            "present".to_string()
                        } else {
                            "expected daily file is missing".to_string()
                        },
                    });
                }
                for path in pulled_versions(cfg, path)
                    .iter()
                    .filter(|p| present && cfg.may_read(p))
                {
                    let path = path.as_path();
                    let path_text = path.display().to_string();
                    let (lines0, facts0) = (load.lines.len(), load.facts.len());
                    let Some(clean) =
                        read_or_record(cfg, path, format!("{day}..{day}"), &mut load)?
                    else {
                        holes.push(span);
                        continue;
                    };
                    holes.extend(statement_gates(
                        cfg,
                        &load.facts[facts0..],
                        Some(span),
                        &mut load.gates,
                    ));
                    if clean {
                        coverage.extend(prove(cfg, path, span, &mut load, lines0, facts0));
                    } else {
                        load.warnings.push(format!(
                            "source {}: {} has rejected or not-booked lines, so {day} is not treated as complete",
                            cfg.name, path_text
                        ));
                    }
                }
                if !present && ended {
                    load.warnings.push(format!(
                        "source {}: no file for {day} ({path_text})",
                        cfg.name
                    ));
                }
                match day.succ_opt() {
                    Some(d) => day = d,
                    None => break,
                }
            }
        }
    }
    let mut continuity = Vec::new();
    holes.extend(continuity_gates(cfg, &load.facts, &mut continuity));
    load.gates.extend(continuity);
    for g in &load.gates {
        // A missing daily file already has its own warning.
        if !g.ok && g.check != "daily_file" {
            load.warnings.push(g.warning());
        }
    }
    load.coverage = subtract_intervals(merge_intervals(coverage), &holes);
    assign_line_ids(&mut load.lines);
    Ok(load)
}

/// Reads one file of `cfg` into `load` ([`read_file`]); Some(whether every line was
/// accepted). A file that is there but cannot be read or parsed is no reason to stop the
/// run: it is recorded as [`Unreadable`] (with a failed `readable` gate, so a warning), none
/// of its lines are used, and None tells the caller that its `period` is not covered. Only a
/// configuration error (the source's own settings) stops the run.
fn read_or_record(
    cfg: &SourceConfig,
    path: &Path,
    period: String,
    load: &mut SourceLoad,
) -> Result<Option<bool>> {
    let (lines0, facts0, files0) = (load.lines.len(), load.facts.len(), load.files.len());
    match read_file(cfg, path, load) {
        Ok(clean) => Ok(Some(clean)),
        Err(e) if crate::exit::code_for(&e) == crate::exit::CONFIG => Err(e),
        Err(e) => {
            // read_file adds nothing before it fails; make sure of it.
            debug_assert_eq!(
                (load.lines.len(), load.facts.len(), load.files.len()),
                (lines0, facts0, files0)
            );
            let error = crate::exit::bounded(&format!("{e:#}")).into_owned();
            let file = path.display().to_string();
            tracing::error!(source = %cfg.name, file = %file, error = %error, "Statement file cannot be read.");
            load.gates.push(Gate {
                source: cfg.name.clone(),
                file: file.clone(),
                period: period.clone(),
                check: "readable",
                ok: false,
                detail: format!("cannot be read, nothing in it is used: {error}"),
            });
            load.unreadable.push(Unreadable {
                source: cfg.name.clone(),
                path: file,
                period,
                error,
            });
            Ok(None)
        }
    }
}

/// The local files of `path`: for a pulled source every version `recon pull` kept (see
/// [`manifest::local_versions`]), else `path` alone.
fn pulled_versions(cfg: &SourceConfig, path: &Path) -> Vec<std::path::PathBuf> {
    match &cfg.remote {
        Some(_) => manifest::local_versions(path),
        None => vec![path.to_path_buf()],
    }
}

/// For a pulled source: the period the last pull could not fetch (day `day`, or a fixed file's
/// period `span`) is not complete, whatever an older copy proves (issue 14: a failed pull
/// leaves its days incomplete and the run says so).
fn pull_holes(
    cfg: &SourceConfig,
    day: Option<NaiveDate>,
    span: Option<(Micros, Micros)>,
    load: &mut SourceLoad,
) -> Option<(Micros, Micros)> {
    let dir = &cfg.remote.as_ref()?.inbox_dir;
    let day_text = day.map(|d| d.format("%Y-%m-%d").to_string());
    let failed = manifest::failures(dir, day_text.as_deref());
    let f = failed.first()?;
    load.warnings.push(format!(
        "source {}: the last pull could not fetch {} ({}){}; {} is not treated as complete",
        cfg.name,
        f.remote,
        f.error,
        if f.at.is_empty() {
            String::new()
        } else {
            format!(" at {}", f.at)
        },
        day_text
            .map(|d| format!("day {d}"))
            .unwrap_or_else(|| "its period".into())
    ));
    span
}
