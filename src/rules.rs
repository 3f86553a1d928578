//! Declarative matching rules (`rules/*.toml`): the file model, strict validation and the
//! compiled plan the matcher runs.

use crate::exit::{Failure, fail};
use crate::normalize::Step;
use crate::sources::keys::{KeyAt, split_off};
pub mod kinds;

pub use crate::timeparse::parse_duration;
use crate::timeparse::{DAY, HOUR, MINUTE, Micros};
use anyhow::Result;
pub use kinds::{Criteria, Identifiers, PassKind};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The rules shipped with recon, used when the config names no `rules_dir`.
pub const DEFAULT_RULES: &str = include_str!("../rules/default.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    /// The `[[pass]]` tables, only checked to be tables here: each is read again with its
    /// positions by [`compile_pass`] (its kind decides which keys it may have).
    #[serde(rename = "pass", default)]
    passes: Vec<toml::Table>,
    #[serde(rename = "settlement", default)]
    settlements: Vec<RawSettlement>,
}

/// A three-way settlement rule as written (`[[settlement]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettlement {
    /// Unique id, written into results as `rule`.
    id: String,
    /// The provider source whose lines form the batches (its csv/xlsx mapping has a `batch`
    /// column).
    provider: String,
    /// The bank source (`role = "bank"`) whose credits are the batches' payouts.
    bank: String,
    /// The grouping key of the provider's lines: `batch` (the canonical batch column).
    group_by: String,
    /// Allowed |bank credit − batch net| in minor units (0 = exact).
    amount_tolerance_minor: Option<i64>,
    /// How long before the batch's last provider line the bank credit may be booked.
    window_before: String,
    /// How long after the batch's last provider line the bank credit may be booked.
    window_after: String,
}

/// A compiled settlement rule: provider batches ↔ bank credits (three-way matching).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// Rule id.
    pub id: std::sync::Arc<str>,
    /// Provider source name.
    pub provider: String,
    /// Bank source name.
    pub bank: String,
    /// Allowed |bank credit − batch net| in minor units.
    pub tolerance_minor: i64,
    /// Window start before the batch's last provider line.
    pub before: Micros,
    /// Window end after the batch's last provider line.
    pub after: Micros,
    /// The rule file, for errors.
    pub file: String,
    /// Its bank source is shared by all partitions of a partitioned job (bound to none): the
    /// rule's batches are paired where that source is read, by the gather of a sharded night
    /// (the `shared` module).
    pub shared: bool,
}

/// The keys every pass has, whatever its kind ([`kinds::COMMON_KEYS`]); a kind's own keys
/// are read by the kind ([`kinds::Kind::compile`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPass {
    /// Unique id, written into results as `rule`.
    id: Spanned<String>,
    /// A registered kind ([`PassKind::KINDS`]).
    kind: Spanned<String>,
    /// Free text for humans.
    #[allow(dead_code)]
    description: Option<String>,
    /// Normalisation steps applied to the keys on both sides.
    #[serde(default)]
    normalize: Vec<Step>,
    /// Apply matches of SUCCEEDED payments automatically (MATCHED) or only propose them.
    auto_apply_succeeded: bool,
    /// Apply matches of UNKNOWN payments automatically (RESOLVED_SUCCEEDED) or only propose.
    auto_apply_unknown: bool,
}

/// One compiled pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Rule id (shared into every result row it decides).
    pub id: std::sync::Arc<str>,
    /// Kind and parameters.
    pub kind: PassKind,
    /// The kind's predicate ([`PassKind::criteria`]), compiled once.
    pub criteria: Criteria,
    /// Key normalisation.
    pub normalize: Vec<Step>,
    /// Auto-apply for SUCCEEDED payments.
    pub auto_succeeded: bool,
    /// Auto-apply for UNKNOWN payments.
    pub auto_unknown: bool,
}

/// The compiled plan: passes in order plus a hash of the rule text for the run record.
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// Passes in order.
    pub passes: Vec<Pass>,
    /// Three-way settlement rules (`[[settlement]]`), in file order.
    pub settlements: Vec<Settlement>,
    /// sha256 over every rule file's name and bytes.
    pub hash: String,
    /// The evidence horizon (before, after `started_at`): what RESOLVED_FAILED needs covered
    /// completely and where the near-miss gate looks. Never narrower than any pass's window;
    /// see [`RuleSet::for_job`].
    pub evidence: (Micros, Micros),
    /// How far after a payment's start a return or reversal is still compared with it by
    /// recipient and amount: the carry-over plus the evidence horizon (a return found by
    /// identifier has no limit but the loaded ledger).
    pub return_reach: Micros,
}

/// Checks the job's shared bank sources against the rules and marks the rules that pair with
/// one ([`crate::rules::Settlement::shared`]). A shared source must be the bank of a settlement
/// rule; a rule's provider and bank are of one partition unless the bank is shared.
fn bind_shared(cfg: &crate::config::Config, rules: &mut RuleSet) -> Result<()> {
    if cfg.partition.is_none() {
        return Ok(());
    }
    for (i, s) in cfg.sources.iter().enumerate() {
        if s.partition.is_none() && !rules.settlements.iter().any(|r| r.bank == s.name) {
            return Err(fail(
                Failure::Config,
                format!(
                    "{}: key `source[{i}].partition` is missing (source {:?}): a bank source \
                     shared by all partitions is read only to pair provider payouts with its \
                     credits, and no [[settlement]] rule names it as its bank (hint: bind it \
                     to its partition with partition = \"…\", or add the settlement rule)",
                    cfg.path.display(),
                    s.name
                ),
            ));
        }
    }
    let part = |name: &str| {
        cfg.sources
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.partition.as_deref())
    };
    for r in &mut rules.settlements {
        r.shared = part(&r.bank).is_none();
        if !r.shared && part(&r.provider) != part(&r.bank) {
            return Err(fail(
                Failure::Config,
                format!(
                    "settlement rule {}: provider source {:?} (partition {:?}) and bank source \
                     {:?} (partition {:?}) are in different partitions: three-way matching \
                     would cross partitions (hint: bind the bank source to the provider's \
                     partition, or leave its partition out if every partition's payouts reach it)",
                    r.id,
                    r.provider,
                    part(&r.provider).unwrap_or("-"),
                    r.bank,
                    part(&r.bank).unwrap_or("-")
                ),
            ));
        }
    }
    Ok(())
}

/// The evidence horizon when the job config does not set one: 10 minutes before a payment's
/// start (clocks of ledger and provider differ) to 72 hours after (bookings lag).
pub const DEFAULT_EVIDENCE_WINDOW: (Micros, Micros) = (10 * MINUTE, 72 * HOUR);

impl RuleSet {
    /// The job's rules: the rule files, checked against the sources, with the job's evidence
    /// horizon (`evidence_window_before` / `_after`). A horizon the config sets must be at
    /// least every fuzzy pass's window (a configuration error otherwise); a horizon it leaves
    /// out is the default widened to the widest pass. It never depends on which passes exist:
    /// an identifier-only rule set keeps the whole default horizon.
    pub fn for_job(cfg: &crate::config::Config) -> Result<RuleSet> {
        let mut rules = RuleSet::load(cfg.rules_dir.as_deref())?;
        rules.check_sources(&cfg.sources)?;
        bind_shared(cfg, &mut rules)?;
        let widest = rules.widest_window();
        let pick = |key: &str, set: Option<Micros>, default: Micros, widest: Micros| match set {
            Some(v) if v < widest => {
                let pass = rules
                    .passes
                    .iter()
                    .find(|p| {
                        p.criteria.window().is_some_and(|(before, after)| {
                            (if key.ends_with("before") {
                                before
                            } else {
                                after
                            }) > v
                        })
                    })
                    .map(|p| p.id.to_string())
                    .unwrap_or_default();
                Err(fail(
                    Failure::Config,
                    format!(
                        "{}: key `{key}` ({}) is narrower than pass {pass:?}'s window ({}): the \
                         evidence horizon must hold every window a line can match in",
                        cfg.path.display(),
                        crate::timeparse::format_duration(v),
                        crate::timeparse::format_duration(widest),
                    ),
                ))
            }
            Some(v) => Ok(v),
            None => Ok(default.max(widest)),
        };
        rules.evidence = (
            pick(
                "evidence_window_before",
                cfg.evidence_window.0,
                DEFAULT_EVIDENCE_WINDOW.0,
                widest.0,
            )?,
            pick(
                "evidence_window_after",
                cfg.evidence_window.1,
                DEFAULT_EVIDENCE_WINDOW.1,
                widest.1,
            )?,
        );
        rules.return_reach = cfg.carry_over_days * DAY + rules.evidence.1;
        Ok(rules)
    }

    /// The evidence horizon (see [`RuleSet::evidence`]).
    pub fn evidence_window(&self) -> (Micros, Micros) {
        self.evidence
    }

    /// The widest window of any pass (before, after): the floor of the evidence horizon.
    pub fn widest_window(&self) -> (Micros, Micros) {
        self.passes
            .iter()
            .filter_map(|p| p.criteria.window())
            .fold((0, 0), |(b, a), (pb, pa)| (b.max(pb), a.max(pa)))
    }

    /// Loads every `*.toml` in `dir` (sorted by file name), or the bundled default.
    pub fn load(dir: Option<&Path>) -> Result<RuleSet> {
        let files: Vec<(String, String)> = match dir {
            None => vec![("default.toml".to_string(), DEFAULT_RULES.to_string())],
            Some(d) => {
                let entries = std::fs::read_dir(d).map_err(|e| {
                    fail(
                        Failure::Config,
                        format!("{}: cannot read rules folder: {e}", d.display()),
                    )
                })?;
                let mut paths: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                    .collect();
                paths.sort();
                if paths.is_empty() {
                    return Err(fail(
                        Failure::Config,
                        format!("{}: no *.toml rule files", d.display()),
                    ));
                }
                let mut out = Vec::new();
                for p in paths {
                    let text = std::fs::read_to_string(&p).map_err(|e| {
                        fail(
                            Failure::Config,
                            format!("{}: cannot read: {e}", p.display()),
                        )
                    })?;
                    out.push((p.display().to_string(), text));
                }
                out
            }
        };
        Self::compile(&files)
    }

    /// Validates and compiles rule files given as (name, text).
    pub fn compile(files: &[(String, String)]) -> Result<RuleSet> {
        let mut hasher = Sha256::new();
        let mut passes: Vec<Pass> = Vec::new();
        let mut settlements: Vec<Settlement> = Vec::new();
        for (name, text) in files {
            let file_name = Path::new(name)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| name.clone());
            hasher.update(file_name.as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
            // One parse, with positions: the whole-file checks read a copy of it (a TOML
            // error as `toml::from_str` words it), the passes and settlements read it again so
            // that an error about a key quotes its line.
            let path = Path::new(name);
            let config = |e: toml::de::Error| fail(Failure::Config, format!("{name}: {e}"));
            let doc = DeTable::parse(text).map_err(config)?;
            let raw = RawFile::deserialize(toml::de::Deserializer::from(doc.clone())).map_err(
                |mut e| {
                    e.set_input(Some(text));
                    config(e)
                },
            )?;
            let (mut tables, mut settlement_tables) = (Vec::new(), Vec::new());
            for (k, v) in doc.into_inner() {
                let slot = match k.get_ref().as_ref() {
                    "pass" => &mut tables,
                    "settlement" => &mut settlement_tables,
                    _ => continue,
                };
                if let DeValue::Array(items) = v.into_inner() {
                    slot.extend(items);
                }
            }
            let tables: Vec<Spanned<DeValue<'_>>> = tables;
            debug_assert_eq!(tables.len(), raw.passes.len());
            for (i, p) in tables.into_iter().enumerate() {
                let at = KeyAt::new(path, format!("pass[{i}]."), text);
                let (pass, id_span) = compile_pass(&at, i, p)?;
                if passes.iter().any(|q| q.id == pass.id) {
                    return Err(at.at(id_span, format!("pass[{i}].id {:?} is used twice", pass.id)));
                }
                passes.push(pass);
            }
            for (i, s) in raw.settlements.into_iter().enumerate() {
                let at = KeyAt::new(path, format!("settlement[{i}]."), text);
                let spans = value_spans(settlement_tables.get(i));
                let s = compile_settlement((name, &at, &spans), i, s)?;
                if settlements.iter().any(|q| q.id == s.id) || passes.iter().any(|p| p.id == s.id) {
                    return Err(fail(
                        Failure::Config,
                        format!("{name}: settlement[{i}].id {:?} is used twice", s.id),
                    ));
                }
                settlements.push(s);
            }
        }
        if passes.is_empty() {
            return Err(fail(Failure::Config, "rules: no [[pass]] defined"));
        }
        let mut rules = RuleSet {
            passes,
            settlements,
            hash: hex::encode(hasher.finalize()),
            evidence: DEFAULT_EVIDENCE_WINDOW,
            return_reach: 0,
        };
        let widest = rules.widest_window();
        rules.evidence = (
            DEFAULT_EVIDENCE_WINDOW.0.max(widest.0),
            DEFAULT_EVIDENCE_WINDOW.1.max(widest.1),
        );
        rules.return_reach = 14 * DAY + rules.evidence.1;
        Ok(rules)
    }
}

/// Where the value of each key of a `[[settlement]]` table is in the file.
fn value_spans(table: Option<&Spanned<DeValue<'_>>>) -> Vec<(String, std::ops::Range<usize>)> {
    match table.map(|t| t.get_ref()) {
        Some(DeValue::Table(t)) => t
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), v.span()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Validates one `[[settlement]]`; an error names the file, the line of the value (`spans`)
/// and `settlement[i].key`.
fn compile_settlement(
    (file, at, spans): (&str, &KeyAt<'_>, &[(String, std::ops::Range<usize>)]),
    i: usize,
    s: RawSettlement,
) -> Result<Settlement> {
    let err = |key: &str, msg: String| {
        let msg = format!("settlement[{i}].{key}: {msg}");
        match spans.iter().find(|(k, _)| k == key) {
            Some((_, span)) => at.at(span.clone(), msg),
            None => fail(Failure::Config, format!("{file}: {msg}")),
        }
    };
    if s.id.trim().is_empty() || s.id.contains(['|', ';', ',']) {
        return Err(err("id", "must be non-empty, without | ; ,".into()));
    }
    if s.group_by != "batch" {
        return Err(err(
            "group_by",
            format!(
                "unknown grouping key {:?} (hint: `batch`, the source's batch column)",
                s.group_by
            ),
        ));
    }
    if s.provider == s.bank {
        return Err(err(
            "bank",
            "must name another source than `provider`".into(),
        ));
    }
    let tolerance_minor = s.amount_tolerance_minor.unwrap_or(0);
    if tolerance_minor < 0 {
        return Err(err("amount_tolerance_minor", "must not be negative".into()));
    }
    Ok(Settlement {
        id: std::sync::Arc::from(s.id.as_str()),
        provider: s.provider,
        bank: s.bank,
        tolerance_minor,
        before: parse_duration(&s.window_before).map_err(|m| err("window_before", m))?,
        after: parse_duration(&s.window_after).map_err(|m| err("window_after", m))?,
        file: file.to_string(),
        shared: false,
    })
}

impl RuleSet {
    /// Checks the settlement rules against the job's sources, before any data is read: the
    /// provider source exists, is a provider and maps a `batch` column; the bank source exists
    /// and has `role = "bank"`.
    pub fn check_sources(&self, sources: &[crate::config::SourceConfig]) -> Result<()> {
        use crate::config::Role;
        for (i, s) in self.settlements.iter().enumerate() {
            let err = |key: &str, msg: String| {
                fail(
                    Failure::Config,
                    format!("{}: settlement {:?} ({i}).{key}: {msg}", s.file, s.id),
                )
            };
            let find = |name: &str| sources.iter().find(|c| c.name == name);
            let p = find(&s.provider)
                .ok_or_else(|| err("provider", format!("no source named {:?}", s.provider)))?;
            if p.role != Role::Provider {
                return Err(err(
                    "provider",
                    format!("source {:?} has role {}", p.name, p.role.as_str()),
                ));
            }
            if p.tabular().is_none_or(|t| t.columns.batch.is_none()) {
                return Err(err(
                    "group_by",
                    format!(
                        "source {:?} has no batch column (hint: map it in [source.columns] batch = \"…\")",
                        p.name
                    ),
                ));
            }
            let b = find(&s.bank)
                .ok_or_else(|| err("bank", format!("no source named {:?}", s.bank)))?;
            if b.role != Role::Bank {
                return Err(err(
                    "bank",
                    format!(
                        "source {:?} has role {} (hint: role = \"bank\" in its [[source]])",
                        b.name,
                        b.role.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Compiles pass `i` (`value`, as written in the file `at` names); also returns where its
/// id is written. Every error about one of its keys quotes that key's line.
fn compile_pass(
    at: &KeyAt<'_>,
    i: usize,
    value: Spanned<DeValue<'_>>,
) -> Result<(Pass, std::ops::Range<usize>)> {
    let span = value.span();
    let DeValue::Table(table) = value.into_inner() else {
        return Err(at.at(
            span,
            format!("pass[{i}]: not a table (each [[pass]] is one)"),
        ));
    };
    let mut rest = Spanned::new(span, table);
    let named = rest
        .get_ref()
        .get("kind")
        .and_then(|v| v.get_ref().as_str());
    let kind = PassKind::KINDS
        .iter()
        .find(|(name, _)| Some(*name) == named)
        .copied();
    let common = split_off(&mut rest, kinds::COMMON_KEYS);
    kinds::check_keys(at, i, kind, &rest)?;
    let table_span = common.span();
    let p = RawPass::deserialize(toml::de::ValueDeserializer::from(Spanned::new(
        table_span.clone(),
        DeValue::Table(common.into_inner()),
    )))
    .map_err(|e| {
        at.at(
            e.span().unwrap_or(table_span),
            format!("pass[{i}]: {}", e.message()),
        )
    })?;
    let id = p.id.get_ref();
    if id.trim().is_empty() || id.contains(['|', ';', ',']) {
        return Err(at.at(
            p.id.span(),
            format!("pass[{i}].id: must be non-empty, without | ; ,"),
        ));
    }
    let Some((name, keys)) = kind else {
        let names: Vec<&str> = PassKind::KINDS.iter().map(|(n, _)| *n).collect();
        return Err(at.at(
            p.kind.span(),
            format!(
                "pass[{i}].kind: unknown kind {:?} ({})",
                p.kind.get_ref(),
                names.join(", ")
            ),
        ));
    };
    let kind = PassKind::compile(name, &kinds::Keys::new(at, i, name, keys, rest)?)
        .expect("a registered kind")?;
    Ok((
        Pass {
            id: id.as_str().into(),
            criteria: kind.criteria(),
            kind,
            normalize: p.normalize,
            auto_succeeded: p.auto_apply_succeeded,
            auto_unknown: p.auto_apply_unknown,
        },
        p.id.span(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_rules_compile_to_identifier_then_fuzzy() {
        let r = RuleSet::load(None).unwrap();
        assert_eq!(r.passes.len(), 2);
        assert!(matches!(r.passes[0].kind, PassKind::Identifier(_)));
        assert_eq!(r.widest_window(), (10 * MINUTE, 72 * HOUR));
        assert_eq!(r.hash.len(), 64);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let text = DEFAULT_RULES.replace("window_after", "window_afterr");
        let err = RuleSet::compile(&[("rules/x.toml".into(), text)]).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("rules/x.toml") && msg.contains("window_afterr"),
            "{msg}"
        );
        // And its line, as the TOML error of a job file's key gives it.
        assert!(
            msg.starts_with("rules/x.toml: TOML parse error at line 30, column 1\n"),
            "{msg}"
        );
        assert!(msg.contains("\n30 | window_afterr = \"72h\"\n"), "{msg}");
        assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
    }

    #[test]
    fn bad_duration_names_the_pass_and_key() {
        let text = DEFAULT_RULES.replace("\"72h\"", "\"72 hours\"");
        let msg = format!(
            "{:#}",
            RuleSet::compile(&[("r.toml".into(), text)]).unwrap_err()
        );
        assert!(msg.contains("pass[1].window_after"), "{msg}");
        assert!(
            msg.starts_with("r.toml: TOML parse error at line 30, column 16\n"),
            "{msg}"
        );
    }

    #[test]
    fn duplicate_pass_ids_are_rejected() {
        let text = DEFAULT_RULES.replace("recipient_amount_window", "identifier");
        assert!(RuleSet::compile(&[("r.toml".into(), text)]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m").unwrap(), 10 * MINUTE);
        assert_eq!(parse_duration("3d").unwrap(), 3 * DAY);
        assert!(parse_duration("-3d").is_err());
        assert!(parse_duration("3w").is_err());
    }
}
