//! The documentation cannot rot: every TOML example in `README.md` and `docs/*.md` goes through
//! the parser recon itself uses for that kind of file; a misspelt key in any table of an
//! example is rejected as an unknown key (so an example proves its keys exist); and every
//! relative link (to a file, or to a heading's anchor) resolves.
//!
//! The manifests under `deploy/` run only what the docs describe: every `recon` subcommand and
//! flag of their `args` appears, together, in a line of `README.md` or `docs/operations.md`;
//! their job files parse as recon reads them; their shard counts agree. (Their Kubernetes
//! schema check is `deploy/validate-manifests.sh`, run by `.ci/run`.)
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
    "rates.fixed",
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

pub(crate) fn repo() -> PathBuf {
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

// ---- deploy/: the commands the manifests run are the documented ones ----

/// One `args:` list of a manifest under `deploy/`: `recon` with these arguments (the image's
/// entrypoint is recon, deploy/Dockerfile).
#[derive(Debug)]
struct Invocation {
    /// `deploy/k8s/recon-shards.yaml:72` (the line of `args:`).
    at: String,
    args: Vec<String>,
}

impl Invocation {
    /// The subcommand: the leading arguments before the first flag (`run`, `tickets list`).
    fn subcommand(&self) -> String {
        let words: Vec<&str> = self
            .args
            .iter()
            .take_while(|a| !a.starts_with('-'))
            .map(String::as_str)
            .collect();
        words.join(" ")
    }

    /// The flags, without an `=value` part.
    fn flags(&self) -> Vec<String> {
        self.args
            .iter()
            .filter(|a| a.starts_with("--"))
            .map(|a| a.split('=').next().unwrap().to_string())
            .collect()
    }

    /// The value after `flag`, if the list has one.
    fn value_of(&self, flag: &str) -> Option<&str> {
        let i = self.args.iter().position(|a| a == flag)?;
        self.args.get(i + 1).map(String::as_str)
    }
}

/// Every YAML file under `deploy/`, recursively, as (name relative to the repository, text).
pub(crate) fn deploy_manifests() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&repo().join("deploy"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p
                .strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Every `args:` of a manifest, written as a flow list (`args: ["run", "--config", …]`, which
/// may span lines); any other form is an error, so no list goes unchecked.
fn invocations(name: &str, yaml: &str) -> Result<Vec<Invocation>, String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start().trim_start_matches("- ");
        let Some(rest) = t.strip_prefix("args:") else {
            i += 1;
            continue;
        };
        let at = format!("{name}:{}", i + 1);
        let mut list = rest.trim().to_string();
        if !list.starts_with('[') {
            return Err(format!(
                "{at}: write `args` as a flow list on the same line (`args: [\"run\", …]`)"
            ));
        }
        while !list.trim_end().ends_with(']') {
            i += 1;
            let next = lines
                .get(i)
                .ok_or_else(|| format!("{at}: the args list is never closed"))?;
            list.push(' ');
            list.push_str(next.trim());
        }
        let args: Vec<String> = serde_json::from_str(&list)
            .map_err(|e| format!("{at}: args are not a list of quoted strings: {e}"))?;
        out.push(Invocation { at, args });
        i += 1;
    }
    Ok(out)
}

/// Whether `line` holds `flag` as a whole word (`--shard` is not in `--shards`).
fn has_flag(line: &str, flag: &str) -> bool {
    line.match_indices(flag).any(|(p, _)| {
        !line[p + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// What the docs do not say about the invocations: each subcommand must appear as
/// `recon SUB` in a line of the docs, and each of its flags in such a line too.
fn undocumented(invocations: &[Invocation], docs: &[(String, String)]) -> Vec<String> {
    let mut missing = Vec::new();
    for inv in invocations {
        let sub = inv.subcommand();
        if sub.is_empty() {
            missing.push(format!("{}: no subcommand in {:?}", inv.at, inv.args));
            continue;
        }
        let command = format!("recon {sub}");
        let lines: Vec<&str> = docs
            .iter()
            .flat_map(|(_, text)| text.lines())
            .filter(|l| has_flag(l, &command))
            .collect();
        if lines.is_empty() {
            missing.push(format!("{}: `{command}` is in no doc", inv.at));
            continue;
        }
        for flag in inv.flags() {
            if !lines.iter().any(|l| has_flag(l, &flag)) {
                missing.push(format!(
                    "{}: `{command} … {flag}`: no line of the docs names `{command}` with `{flag}`",
                    inv.at
                ));
            }
        }
    }
    missing
}

/// The docs a user of deploy/ reads: the README's command table and operations.md.
fn deploy_docs() -> Vec<(String, String)> {
    ["README.md", "docs/operations.md"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                std::fs::read_to_string(repo().join(n)).unwrap(),
            )
        })
        .collect()
}

#[test]
fn deploy_manifests_run_only_documented_commands_and_flags() {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    for (name, yaml) in deploy_manifests() {
        match invocations(&name, &yaml) {
            Ok(found) => all.extend(found),
            Err(e) => errors.push(e),
        }
    }
    errors.extend(undocumented(&all, &deploy_docs()));
    assert!(
        errors.is_empty(),
        "deploy/ runs what the docs do not describe:\n{}",
        errors.join("\n")
    );
    // The finder must have found the night's commands: a finder that found nothing passes.
    let subs: BTreeSet<String> = all.iter().map(Invocation::subcommand).collect();
    for sub in ["migrate", "run", "gather"] {
        assert!(subs.contains(sub), "no `{sub}` in deploy/: {subs:?}");
    }
}

#[test]
fn deploy_shard_counts_agree() {
    // `--shards N` of the Indexed Job, its completions and parallelism, `shards = N` in the job
    // file of the ConfigMap and the N of a by-hand `--shard I/N` are one number.
    let manifests = deploy_manifests();
    let mut counts: Vec<(String, u32)> = Vec::new();
    let number = |at: &str, v: &str| -> u32 {
        v.trim()
            .trim_matches('"')
            .parse()
            .unwrap_or_else(|e| panic!("{at}: {v:?} is not a count: {e}"))
    };
    for (name, yaml) in &manifests {
        for inv in invocations(name, yaml).unwrap() {
            if let Some(n) = inv.value_of("--shards") {
                counts.push((format!("{}: --shards", inv.at), number(&inv.at, n)));
                for key in ["completions", "parallelism"] {
                    let line = yaml
                        .lines()
                        .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
                        .unwrap_or_else(|| panic!("{name}: runs --shards without `{key}`"));
                    let v = line.split('#').next().unwrap();
                    counts.push((format!("{name}: {key}"), number(name, v)));
                }
            }
            if let Some(shard) = inv.value_of("--shard") {
                let (_, n) = shard
                    .split_once('/')
                    .unwrap_or_else(|| panic!("{}: --shard {shard:?} is not I/N", inv.at));
                counts.push((format!("{}: --shard {shard}", inv.at), number(&inv.at, n)));
            }
        }
        for line in yaml.lines() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("shards =") {
                let v = v.split('#').next().unwrap();
                counts.push((format!("{name}: recon.toml shards"), number(name, v)));
            }
        }
    }
    let kinds = |what: &str| counts.iter().filter(|(at, _)| at.contains(what)).count();
    for what in [
        "--shards",
        "completions",
        "parallelism",
        "recon.toml shards",
    ] {
        assert!(kinds(what) > 0, "no {what} found in deploy/: {counts:?}");
    }
    let distinct: BTreeSet<u32> = counts.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        distinct.len(),
        1,
        "shard counts differ in deploy/: {counts:#?}"
    );
}

#[test]
fn deploy_checker_finds_undocumented_flags_and_unlisted_args() {
    let yaml = "containers:\n  - name: recon\n    args: [\"run\", \"--config\", \"f\",\n           \"--shard\", \"1/4\", \"--turbo=yes\"]\n  - name: other\n    args: [\"frobnicate\"]\n";
    let found = invocations("t.yaml", yaml).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].at, "t.yaml:3");
    assert_eq!(found[0].value_of("--shard"), Some("1/4"));
    let docs = vec![(
        "d.md".to_string(),
        "`recon run --config F --shards N`\n`recon gather --shard`\n".to_string(),
    )];
    let missing = undocumented(&found, &docs);
    assert_eq!(missing.len(), 3, "{missing:#?}");
    // `--shards` in the doc is not `--shard`; `--shard` beside another command does not count.
    assert!(
        missing[0].starts_with("t.yaml:3: `recon run … --shard`"),
        "{}",
        missing[0]
    );
    assert!(
        missing[1].contains("`recon run … --turbo`"),
        "{}",
        missing[1]
    );
    assert!(
        missing[2].starts_with("t.yaml:6: `recon frobnicate` is in no doc"),
        "{}",
        missing[2]
    );
    // A list in block style would go unread: refused.
    let block = "containers:\n  - args:\n      - run\n";
    let err = invocations("b.yaml", block).unwrap_err();
    assert!(
        err.starts_with("b.yaml:2: write `args` as a flow list"),
        "{err}"
    );
}

/// The `recon.toml: |` block of every ConfigMap under `deploy/`, as (where, the job file).
fn deploy_job_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, yaml) in deploy_manifests() {
        let lines: Vec<&str> = yaml.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "recon.toml: |" {
                continue;
            }
            let body = &lines[i + 1..];
            let indent = body
                .iter()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.len() - l.trim_start().len())
                .unwrap_or(0);
            let text: Vec<&str> = body
                .iter()
                .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() >= indent)
                .map(|l| l.get(indent..).unwrap_or(""))
                .collect();
            out.push((format!("{name}:{}", i + 1), text.join("\n") + "\n"));
        }
    }
    out
}

#[test]
fn deploy_job_files_parse_with_recons_own_parser() {
    // The ConfigMaps' recon.toml are what the pods run: recon must accept them (a `{date}`
    // source without `completeness` is refused, for one) and they must not hold the database
    // URL, which comes from the Secret. Paths are the image's: its rules are the repository's
    // (deploy/Dockerfile copies rules/ to /etc/recon/rules).
    let jobs = deploy_job_files();
    assert!(
        jobs.len() >= 2,
        "expected deploy/cronjob.yaml's and deploy/k8s/'s: {jobs:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let rules = repo().join("rules");
    let mut failures = Vec::new();
    for (at, text) in &jobs {
        if text.lines().any(|l| key_of(l) == Some("database_url")) {
            failures.push(format!(
                "{at}: database_url in a ConfigMap (use the Secret)"
            ));
            continue;
        }
        let text = text.replace(
            "\"/etc/recon/rules\"",
            &format!("{:?}", rules.display().to_string()),
        );
        // DATABASE_URL comes from the Secret in the pod; here a URL nothing connects to.
        let text = format!("database_url = \"postgres://recon@db.invalid/payments\"\n{text}");
        let path = tmp.path().join("recon.toml");
        match Config::parse(&text, &path) {
            Ok(cfg) => {
                if let Err(e) = RuleSet::for_job(&cfg) {
                    failures.push(format!("{at}: rules: {e:#}"));
                }
            }
            Err(e) => failures.push(format!("{at} (one line added before it): {e:#}")),
        }
    }
    assert!(
        failures.is_empty(),
        "job files under deploy/ that recon refuses:\n{}",
        failures.join("\n")
    );
}

/// Issue 42: docs/outcomes.md's "What to do" table is the one the email and the reports use
/// (`report::actions::TABLE`), row for row.
#[test]
fn the_docs_next_steps_are_the_ones_the_email_shows() {
    let md = std::fs::read_to_string(repo().join("docs/outcomes.md")).expect("outcomes.md");
    let table = recon::report::actions::docs_table();
    assert!(
        md.contains(&table),
        "docs/outcomes.md lacks the actions table as the code has it; put this under \"What to \
         do\":\n{table}"
    );
}

/// The README is what a new user reads first: what recon is, the quick start, the commands
/// and where the rest is. Reference material (exit codes, sharding, every key) lives in
/// docs/, a line in the README linking there.
const README_MAX_BYTES: u64 = 15 * 1024;

#[test]
fn the_readme_stays_short() {
    let size = std::fs::metadata(repo().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, more than {README_MAX_BYTES}: move reference material into \
         docs/ and leave a line that links there"
    );
    // What a new user runs, in this order: the demo, the install, the tests.
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let at = |s: &str| {
        readme
            .find(s)
            .unwrap_or_else(|| panic!("README.md no longer says `{s}`"))
    };
    assert!(
        at("cargo run -- demo") < at("cargo install --locked --debug --path .")
            && at("cargo install --locked --debug --path .") < at("\ncargo test\n"),
        "the quick start's commands are out of order"
    );
}
