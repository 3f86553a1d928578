//! The documentation cannot rot: every TOML example in `README.md` and `docs/*.md` goes through
//! the parser recon itself uses for that kind of file; a misspelt key in any table of an
//! example is rejected as an unknown key (so an example proves its keys exist); and every
//! relative link (to a file, or to a heading's anchor) resolves.
//!
//! **Marker convention.** The first line of every fenced ```` ```toml ```` block says what kind
//! of file the block is; a block without one fails:
//!
//! | first line                     | parsed as                                                   |
//! |--------------------------------|-------------------------------------------------------------|
//! | `# recon.toml`                 | a whole job file: `Config::parse`, then `RuleSet::for_job`  |
//! | `# recon.toml, fragment`       | part of a job file (one `[[source]]`, `[email]`, …): put after the `timezone`, `database_url` and `output_dir` in [`JOB_PREFIX`], then as a whole job file |
//! | `# mapping: NAME.toml`         | a `recon parse --mapping` file: `SourceConfig::load_mapping` with the block's own `format` key (csv without one) |
//! | `# rules/NAME.toml`            | a whole rule file, alone in a rules folder: `RuleSet::load` |
//! | `# rules/NAME.toml, fragment`  | a rule file beside the bundled `rules/default.toml` (which brings the passes, as a `[[settlement]]`-only file needs): `RuleSet::load` |
//!
//! Job files are written to `<tmp>/job/recon.toml` beside `<tmp>/rules/default.toml` (a copy of
//! the bundled rules), so an example's relative paths resolve as they would in a checkout
//! (`rules_dir = "../rules"`). A failure names the block as `file:line` (the line of its
//! opening fence) with the parser's error.

use recon::config::{Config, Format, SourceConfig};
use recon::rules::{DEFAULT_RULES, RuleSet};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the test puts before a `# recon.toml, fragment` block: the job file's required keys.
const JOB_PREFIX: &str = "timezone = \"UTC\"\n\
                          database_url = \"sqlite://recon.db\"\n\
                          output_dir = \"out\"\n";

/// Tables whose keys are the user's values, not recon's key names: a new key there is data.
const MAP_TABLES: &[&str] = &[
    "signs",
    "kinds",
    "source.signs",
    "source.kinds",
    "email.extra_recipients",
    "status_api.headers",
    "status_api.secret_headers",
];

/// One fenced TOML block of a Markdown file.
#[derive(Debug, Clone)]
struct Block {
    /// `README.md:57` (the line of the opening fence).
    at: String,
    /// The block's text without the fences.
    text: String,
}

/// What a block's marker says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Job { fragment: bool },
    Mapping(String),
    Rules { file: String, fragment: bool },
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and `docs/*.md`, as (name relative to the repository, text).
fn doc_files() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(repo().join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

/// A fence line: its backtick count and info string.
fn fence(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_start();
    let n = t.chars().take_while(|&c| c == '`').count();
    (n >= 3).then(|| (n, t[n..].trim()))
}

/// Every fenced block whose info string is `toml`, with where it starts.
fn toml_blocks(name: &str, md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize, bool, Vec<&str>)> = None; // (fence line, ticks, toml?, lines)
    for (i, line) in md.lines().enumerate() {
        match (&mut open, fence(line)) {
            (None, Some((ticks, info))) => {
                let lang = info.split([' ', ',', '{']).next().unwrap_or("");
                open = Some((i + 1, ticks, lang.eq_ignore_ascii_case("toml"), Vec::new()));
            }
            (Some((at, ticks, is_toml, lines)), Some((n, ""))) if n >= *ticks => {
                if *is_toml {
                    out.push(Block {
                        at: format!("{name}:{at}"),
                        text: lines.join("\n") + "\n",
                    });
                }
                open = None;
            }
            (Some((_, _, _, lines)), _) => lines.push(line),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{name}: a code fence is never closed");
    out
}

fn marker(text: &str) -> Result<Kind, String> {
    let first = text.lines().next().unwrap_or("").trim();
    let (what, fragment) = match first.strip_suffix(", fragment") {
        Some(w) => (w, true),
        None => (first, false),
    };
    if what == "# recon.toml" {
        return Ok(Kind::Job { fragment });
    }
    if let Some(file) = what.strip_prefix("# mapping: ")
        && file.ends_with(".toml")
        && !fragment
    {
        return Ok(Kind::Mapping(file.to_string()));
    }
    if let Some(file) = what.strip_prefix("# rules/")
        && file.ends_with(".toml")
        && !file.contains('/')
        && !(fragment && file == "default.toml")
    {
        return Ok(Kind::Rules {
            file: file.to_string(),
            fragment,
        });
    }
    Err(format!(
        "no marker: the first line {first:?} must be `# recon.toml`, `# recon.toml, fragment`, \
         `# mapping: NAME.toml`, `# rules/NAME.toml` or `# rules/NAME.toml, fragment` \
         (see tests/it/docs.rs)"
    ))
}

/// Parses one block the way recon reads that kind of file, in a fresh folder under `tmp`.
fn check(kind: &Kind, text: &str, tmp: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir_in(tmp).unwrap();
    let err = |e: anyhow::Error| format!("{e:#}");
    match kind {
        Kind::Job { fragment } => {
            std::fs::create_dir_all(dir.path().join("job")).unwrap();
            std::fs::create_dir_all(dir.path().join("rules")).unwrap();
            std::fs::write(dir.path().join("rules/default.toml"), DEFAULT_RULES).unwrap();
            let text = if *fragment {
                format!("{JOB_PREFIX}{text}")
            } else {
                text.to_string()
            };
            let path = dir.path().join("job/recon.toml");
            let cfg = Config::parse(&text, &path).map_err(|e| {
                let shift = if *fragment {
                    format!(
                        " (the test put {} lines before the fragment)",
                        JOB_PREFIX.lines().count()
                    )
                } else {
                    String::new()
                };
                format!("{}{shift}", err(e))
            })?;
            RuleSet::for_job(&cfg).map_err(err)?;
        }
        Kind::Mapping(file) => {
            let format = match toml::from_str::<toml::Table>(text)
                .map_err(|e| e.to_string())?
                .get("format")
            {
                None => Format::Csv,
                Some(toml::Value::String(f)) => {
                    Format::parse(f).ok_or_else(|| format!("unknown format {f:?}"))?
                }
                Some(other) => return Err(format!("`format` is not a string: {other}")),
            };
            let path = dir.path().join(file);
            std::fs::write(&path, text).unwrap();
            SourceConfig::load_mapping(&path, format).map_err(err)?;
        }
        Kind::Rules { file, fragment } => {
            let rules = dir.path().join("rules");
            std::fs::create_dir_all(&rules).unwrap();
            if *fragment {
                std::fs::write(rules.join("default.toml"), DEFAULT_RULES).unwrap();
            }
            std::fs::write(rules.join(file), text).unwrap();
            RuleSet::load(Some(&rules)).map_err(err)?;
        }
    }
    Ok(())
}

/// Checks every TOML block of one Markdown text; one message per failing block.
fn check_markdown(name: &str, md: &str, tmp: &Path) -> (Vec<(Block, Kind)>, Vec<String>) {
    let mut ok = Vec::new();
    let mut failures = Vec::new();
    for block in toml_blocks(name, md) {
        match marker(&block.text).and_then(|k| check(&k, &block.text, tmp).map(|()| k)) {
            Ok(kind) => ok.push((block, kind)),
            Err(e) => failures.push(format!("{}: {e}", block.at)),
        }
    }
    (ok, failures)
}

/// Whether `line` is a `key = value` line, and the key.
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let end = t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))?;
    (end > 0 && t[end..].trim_start().starts_with('=')).then(|| &t[..end])
}

/// For each table of the block (its top level included, unless it has no keys there), the
/// block with that table's first key misspelt (`key` → `keyx`), named by table and key.
fn misspellings(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table = String::new();
    let mut seen = BTreeSet::new();
    let mut in_multiline = false;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.matches("\"\"\"").count() % 2 == 1 {
            let was = in_multiline;
            in_multiline = !in_multiline;
            if was {
                continue;
            }
        } else if in_multiline {
            continue;
        }
        let t = line.trim();
        if t.starts_with('[') {
            table = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap()
                .trim()
                .to_string();
            continue;
        }
        if let Some(key) = key_of(line)
            && !MAP_TABLES.contains(&table.as_str())
            && seen.insert(table.clone())
        {
            let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            changed[i] = line.replacen(key, &format!("{key}x"), 1);
            let name = if table.is_empty() {
                format!("`{key}`")
            } else {
                format!("`{table}.{key}`")
            };
            out.push((name, changed.join("\n") + "\n"));
        }
    }
    out
}

#[test]
fn docs_toml_examples_parse_with_recons_own_parsers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut checked = Vec::new();
    for (name, md) in doc_files() {
        let (ok, bad) = check_markdown(&name, &md, tmp.path());
        failures.extend(bad);
        checked.extend(ok);
    }
    for (_, kind) in &checked {
        *kinds
            .entry(match kind {
                Kind::Job { fragment: false } => "job file",
                Kind::Job { fragment: true } => "job fragment",
                Kind::Mapping(_) => "mapping",
                Kind::Rules { .. } => "rules",
            })
            .or_default() += 1;
    }
    assert!(
        failures.is_empty(),
        "TOML examples in the docs that recon rejects:\n{}",
        failures.join("\n")
    );
    // The README's one config example, and at least one example of every other kind: a
    // finder that silently found nothing would pass otherwise.
    for kind in ["job file", "job fragment", "mapping", "rules"] {
        assert!(
            kinds.contains_key(kind),
            "no {kind} example found: {kinds:?}"
        );
    }
    let readme = toml_blocks(
        "README.md",
        &std::fs::read_to_string(repo().join("README.md")).unwrap(),
    );
    assert_eq!(readme.len(), 1, "the README holds ONE config example");
}

#[test]
fn docs_examples_reject_a_misspelt_key_in_every_table() {
    // The examples prove something only if recon's parsers refuse keys they do not know: for
    // each table of each example, misspell its first key and expect the parser to say so.
    let tmp = tempfile::tempdir().unwrap();
    let mut accepted = Vec::new();
    let mut tried = 0;
    for (name, md) in doc_files() {
        for block in toml_blocks(&name, &md) {
            let Ok(kind) = marker(&block.text) else {
                continue; // reported by the test above
            };
            let variants = misspellings(&block.text);
            if variants.is_empty() {
                accepted.push(format!("{}: no key to misspell", block.at));
            }
            for (key, text) in variants {
                tried += 1;
                match check(&kind, &text, tmp.path()) {
                    Err(e) if e.contains("unknown field") => {}
                    Err(e) => accepted.push(format!(
                        "{}: {key} misspelt: rejected, but not as an unknown key: {e}",
                        block.at
                    )),
                    Ok(()) => accepted.push(format!("{}: {key} misspelt: accepted", block.at)),
                }
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "misspelt keys recon does not reject as such:\n{}",
        accepted.join("\n")
    );
    assert!(tried > 0, "no misspelling tried");
}

#[test]
fn docs_checker_fails_unmarked_and_wrong_blocks_with_their_position() {
    let tmp = tempfile::tempdir().unwrap();
    let md = "# t\n\n```toml\n[[source]]\nname = \"x\"\n```\n\ntext\n\n```toml\n\
              # recon.toml, fragment\nsettlement_lag_hour = 24\n```\n\n```toml\n\
              # mapping: m.toml\ntimestamp_format = \"rfc3339\"\ndecimal_seperator = \",\"\n\
              [columns]\nbooked_at = \"d\"\namount = \"a\"\n```\n\n```toml\n\
              # rules/r.toml\n[[pass]]\nid = \"p\"\nkind = \"identifier\"\n\
              identifiers = [\"reference\"]\nauto_apply_succeeded = true\n```\n\n\
              ```sh\nnot = \"checked\"\n```\n";
    let (ok, failures) = check_markdown("t.md", md, tmp.path());
    assert!(ok.is_empty(), "{ok:?}");
    assert_eq!(failures.len(), 4, "{failures:#?}");
    assert!(
        failures[0].starts_with("t.md:3: no marker"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].starts_with("t.md:10: ") && failures[1].contains("settlement_lag_hour"),
        "{}",
        failures[1]
    );
    assert!(
        failures[2].starts_with("t.md:15: ") && failures[2].contains("decimal_seperator"),
        "{}",
        failures[2]
    );
    assert!(
        failures[3].starts_with("t.md:24: ") && failures[3].contains("auto_apply_unknown"),
        "{}",
        failures[3]
    );
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks), numbered like GitHub's
/// when a heading repeats.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut in_code = false;
    for line in md.lines() {
        if fence(line).is_some() {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(&line[hashes..]);
            let n = counts.entry(s.clone()).or_default();
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// Every `[text](target)` link outside code, as (line, target).
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in md.lines().enumerate() {
        if fence(line).is_some() {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Inline code holds `[[source]]`-like text, never links; link texts may be code.
        let plain: String = line
            .split('`')
            .enumerate()
            .map(|(j, part)| if j % 2 == 0 { part } else { "code" })
            .collect();
        let mut rest = plain.as_str();
        while let Some(p) = rest.find("](") {
            let after = &rest[p + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn docs_relative_links_resolve() {
    let mut broken = Vec::new();
    let files = doc_files();
    let texts: BTreeMap<PathBuf, &str> = files
        .iter()
        .map(|(n, t)| (repo().join(n), t.as_str()))
        .collect();
    for (name, md) in &files {
        let here = repo().join(name);
        for (line, target) in links(md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                here.clone()
            } else {
                here.parent().unwrap().join(file)
            };
            let Ok(path) = path.canonicalize() else {
                broken.push(format!("{name}:{line}: {target}: no such file"));
                continue;
            };
            if !path.starts_with(repo()) {
                broken.push(format!("{name}:{line}: {target}: outside the repository"));
            }
            if let Some(anchor) = anchor {
                let text = match texts.get(&path) {
                    Some(t) => t.to_string(),
                    None if path.extension().is_some_and(|e| e == "md") => {
                        std::fs::read_to_string(&path).unwrap()
                    }
                    None => {
                        broken.push(format!(
                            "{name}:{line}: {target}: anchor into a non-Markdown file"
                        ));
                        continue;
                    }
                };
                if !anchors(&text).contains(anchor) {
                    broken.push(format!(
                        "{name}:{line}: {target}: no heading with that anchor"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn docs_slugs_are_githubs() {
    assert_eq!(
        slug(" Remote sources (`recon pull`)"),
        "remote-sources-recon-pull"
    );
    assert_eq!(
        slug(" Provider status queries (`[[status_api]]`)"),
        "provider-status-queries-status_api"
    );
    assert_eq!(
        slug(" Matching rules (`rules/*.toml`)"),
        "matching-rules-rulestoml"
    );
    assert_eq!(
        slug(" Safety rules, as implemented"),
        "safety-rules-as-implemented"
    );
}
