//! The module graph of `src/` stays layered: no import cycle between top-level modules, and no
//! import from a lower layer to a higher one (`docs/architecture.md` explains the layers).
//!
//! The graph is read from the source text, as a reviewer would: every `crate::NAME` path
//! (in `use` items, expressions, types, macros and intra-doc links) and every name in a
//! `use crate::{…}` group is an edge from the file's top-level module to `NAME`. Items under
//! `#[cfg(test)]` are left out (unit tests may use anything). String literals and comments other
//! than doc comments are masked first, so a `{` in a string does not end an item early.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of its own layer (the graph must still be
/// acyclic) and of every layer below; never one above. Every top-level module of `src/` must be
/// listed (`lib.rs` and `main.rs` are the crate roots, not layers).
const LAYERS: &[(&str, &[&str])] = &[
    ("model", &["model"]),
    (
        "utilities",
        &[
            "exit",
            "fault",
            "keyindex",
            "keysort",
            "mask",
            "money",
            "textsafe",
            "timeparse",
            "normalize",
            "rates",
            "workbook",
        ],
    ),
    ("sources", &["sources"]),
    ("config", &["config", "rules", "partition"]),
    ("pull", &["pull"]),
    ("storage", &["db", "ledger", "tickets", "store"]),
    ("matching", &["matching"]),
    ("classification", &["outcome"]),
    ("evidence", &["evidence", "status_api"]),
    ("outputs", &["outputs", "run_data", "shared"]),
    ("effects and reports", &["effects", "report"]),
    ("decisions", &["decisions"]),
    ("run", &["run"]),
    ("cli", &["explain", "demo", "process", "gather"]),
];

/// One use of another top-level module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    /// The module used.
    target: String,
    /// 1-based line in the file.
    line: usize,
}

/// `text` with comments (but doc comments) and the contents of string and char literals
/// replaced by spaces; newlines are kept, so offsets and lines stay the same.
fn mask(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            // Doc comments stay: their intra-doc links are uses too.
            let doc = rest.starts_with(b"///") || rest.starts_with(b"//!");
            if !doc {
                blank(&mut out, i, end);
            } else {
                // But their braces and quotes are text, not code.
                for c in &mut out[i..end] {
                    if matches!(*c, b'{' | b'}' | b'"' | b'\'') {
                        *c = b' ';
                    }
                }
            }
            i = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if b[i] == b'r'
            && (i == 0 || !is_ident(b[i - 1]))
            && rest.len() > 1
            && (rest[1] == b'"' || rest[1] == b'#')
        {
            // Raw string r"…" / r#"…"#.
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            blank(&mut out, start, end.saturating_sub(close.len()));
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j.min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}', 'é'), or else a lifetime.
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p)
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + len) == Some(&b'\'')).then_some(i + 1 + len)
            };
            match end {
                Some(e) => {
                    blank(&mut out, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The byte ranges of items under `#[cfg(test)]` (a `mod tests { … }`, a `use`, a `fn`).
fn test_items(masked: &[u8]) -> Vec<(usize, usize)> {
    let needle = b"#[cfg(test)]";
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = masked[i..].windows(needle.len()).position(|w| w == needle) {
        let start = i + p;
        let mut j = start + needle.len();
        // The item ends at its first `;` outside brackets (`[u8; 4]`) and braces, or at the
        // brace closing its body.
        let (mut depth, mut brackets) = (0usize, 0usize);
        while j < masked.len() {
            match masked[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'[' | b'(' => brackets += 1,
                b']' | b')' => brackets = brackets.saturating_sub(1),
                b';' if depth == 0 && brackets == 0 => break,
                _ => {}
            }
            j += 1;
        }
        out.push((start, j + 1));
        i = j + 1;
    }
    out
}

/// Every top-level module `text` names through `crate::`, outside `#[cfg(test)]` items.
fn uses_in(text: &str) -> Vec<Use> {
    let masked = mask(text);
    let skipped = test_items(&masked);
    let line_of = |at: usize| masked[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let ident_at = |mut at: usize| {
        while at < masked.len() && masked[at].is_ascii_whitespace() {
            at += 1;
        }
        let end = at + masked[at..].iter().take_while(|&&c| is_ident(c)).count();
        (at, String::from_utf8_lossy(&masked[at..end]).into_owned())
    };
    let needle = b"crate::";
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = masked[i..].windows(needle.len()).position(|w| w == needle) {
        let at = i + p;
        i = at + needle.len();
        if (at > 0 && is_ident(masked[at - 1]))
            || skipped.iter().any(|&(s, e)| (s..e).contains(&at))
        {
            continue;
        }
        let (next, name) = ident_at(i);
        if !name.is_empty() {
            out.push(Use {
                target: name,
                line: line_of(at),
            });
            continue;
        }
        if masked.get(next) != Some(&b'{') {
            continue;
        }
        // `crate::{a, b::c, d::{e, f}}`: the first name of every top-level entry.
        let mut depth = 0usize;
        let mut j = next;
        let mut entry_start = true;
        while j < masked.len() {
            match masked[j] {
                b'{' => {
                    depth += 1;
                    entry_start = depth == 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b',' if depth == 1 => entry_start = true,
                c if entry_start && depth == 1 && is_ident(c) => {
                    let (_, name) = ident_at(j);
                    out.push(Use {
                        target: name.clone(),
                        line: line_of(j),
                    });
                    j += name.len();
                    entry_start = false;
                    continue;
                }
                _ => {}
            }
            j += 1;
        }
    }
    out
}

/// The top-level modules of `src`: each `NAME.rs` (but the crate roots) and `NAME/` folder.
fn top_modules(src: &Path) -> BTreeSet<String> {
    let mut mods = BTreeSet::new();
    for e in std::fs::read_dir(src).expect("read src") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            mods.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "lib"
            && stem != "main"
        {
            mods.insert(stem.to_string());
        }
    }
    mods
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// from → to → the places (`src/file.rs:line`) that make the edge.
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn graph(src: &Path) -> (BTreeSet<String>, Graph) {
    let mods = top_modules(src);
    let mut g = Graph::new();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    for f in files {
        let rel = f.strip_prefix(src).expect("under src");
        let first = rel
            .components()
            .next()
            .expect("component")
            .as_os_str()
            .to_string_lossy();
        let top = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        if !mods.contains(&top) {
            continue; // lib.rs, main.rs
        }
        let text = std::fs::read_to_string(&f).expect("read");
        for u in uses_in(&text) {
            if u.target != top && mods.contains(&u.target) {
                g.entry(top.clone())
                    .or_default()
                    .entry(u.target)
                    .or_default()
                    .push(format!("src/{}:{}", rel.display(), u.line));
            }
        }
    }
    (mods, g)
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(mods: &BTreeSet<String>, g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().expect("stack");
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in mods {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn the_parser_finds_use_groups_and_expression_paths_but_not_test_modules() {
    let snippet = r#"
//! Links count: [`crate::linked`].
use crate::{a, b::c, d::{e, f}};
use crate::plain::Item;
// crate::commented is not a use.
fn f() {
    let s = "crate::in_a_string { not a brace";
    let c = '{';
    crate::x::y(1, crate::z::W);
}
#[cfg(test)]
mod tests {
    use crate::only_in_tests;
    fn g() { let _ = "}"; crate::also_in_tests::h(); }
}
fn after() -> crate::after_tests::T { todo!() }
"#;
    let found: Vec<(String, usize)> = uses_in(snippet)
        .into_iter()
        .map(|u| (u.target, u.line))
        .collect();
    let want: Vec<(String, usize)> = [
        ("linked", 2),
        ("a", 3),
        ("b", 3),
        ("d", 3),
        ("plain", 4),
        ("x", 9),
        ("z", 9),
        ("after_tests", 16),
    ]
    .into_iter()
    .map(|(n, l)| (n.to_string(), l))
    .collect();
    assert_eq!(found, want);
}

#[test]
fn the_module_graph_has_no_cycle_and_no_upward_edge() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mods, g) = graph(&src);

    // It reads the real tree: a parser finding nothing would pass everything.
    let edges: usize = g.values().map(BTreeMap::len).sum();
    assert!(edges > 50, "only {edges} edges found in {}", src.display());
    assert!(
        g["run"].contains_key("config") && g["store"].contains_key("db"),
        "{g:#?}"
    );

    let mut layer_of = BTreeMap::new();
    for (i, (_, ms)) in LAYERS.iter().enumerate() {
        for m in *ms {
            assert!(
                layer_of.insert(*m, i).is_none(),
                "{m} is listed twice in LAYERS"
            );
        }
    }
    let mut problems = Vec::new();
    for m in &mods {
        if !layer_of.contains_key(m.as_str()) {
            problems.push(format!(
                "src/{m}: a top-level module not in LAYERS (give it a layer)"
            ));
        }
    }
    for m in layer_of.keys() {
        if !mods.contains(*m) {
            problems.push(format!("LAYERS names `{m}`, which is no module of src/"));
        }
    }
    for c in cycles(&mods, &g) {
        let mut why = Vec::new();
        for a in &c {
            for (b, at) in &g[a] {
                if c.contains(b) {
                    why.push(format!("  {a} -> {b} at {}", at.join(", ")));
                }
            }
        }
        problems.push(format!(
            "import cycle between {}:\n{}",
            c.join(", "),
            why.join("\n")
        ));
    }
    for (a, targets) in &g {
        let Some(&la) = layer_of.get(a.as_str()) else {
            continue;
        };
        for (b, at) in targets {
            if let Some(&lb) = layer_of.get(b.as_str())
                && lb > la
            {
                problems.push(format!(
                    "upward edge {a} ({}) -> {b} ({}) at {}",
                    LAYERS[la].0,
                    LAYERS[lb].0,
                    at.join(", ")
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the module layering is broken:\n{}",
        problems.join("\n")
    );
}

/// Issue 43: the night's two long functions stay stages, not piles. `run::plan::plan` and
/// `run::day::plan_and_apply` each stay under 150 lines (from their `fn` line to their closing
/// brace); what they do belongs in the typed stages they hand over between.
#[test]
fn the_plan_and_the_day_stay_under_150_lines_each() {
    /// The lines of top-level function `name` in `text`: from the line that declares it to the
    /// first `}` at the start of a line after it (rustfmt closes a top-level item there).
    fn span(text: &str, name: &str) -> Option<usize> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.iter().position(|l| {
            let l = l
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .trim_start_matches("async ");
            l.starts_with(&format!("fn {name}(")) || l.starts_with(&format!("fn {name}<"))
        })?;
        let end = lines[start..].iter().position(|l| *l == "}")?;
        Some(end + 1)
    }
    // The finder itself: a function of three lines, and one it must not mistake for it.
    let sample =
        "fn plan_x() {\n}\npub(crate) async fn plan(\n    a: u8,\n) {\n    let _ = a;\n}\n";
    assert_eq!(span(sample, "plan"), Some(5));
    assert_eq!(span(sample, "absent"), None);

    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/run");
    let mut too_long = Vec::new();
    for (file, name) in [("plan.rs", "plan"), ("day.rs", "plan_and_apply")] {
        let text = std::fs::read_to_string(src.join(file)).expect("read src/run");
        let n = span(&text, name).unwrap_or_else(|| panic!("no top-level fn {name} in {file}"));
        if n >= 150 {
            too_long.push(format!("src/run/{file}: {name} is {n} lines"));
        }
    }
    assert!(
        too_long.is_empty(),
        "split these into stages with typed hand-offs (issue 43):\n{}",
        too_long.join("\n")
    );
}
