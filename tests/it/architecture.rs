//! The module graph of `src/` stays layered: no import cycle between top-level modules, no
//! import from a lower layer to a higher one (`docs/architecture.md` explains the layers), and
//! no import cycle between the submodules (files) of one module (`ledger::clock` ↔
//! `ledger::load`).
//!
//! The graph is read from the source text, as a reviewer would: every path from `crate::`,
//! `super::`, `self::` or a module the file declares (in `use` items, expressions, types,
//! macros and intra-doc links), every name of a `use …::{…}` group with it, resolved to the
//! module it names, is an edge from the file's module. Items under `#[cfg(test)]` are left out
//! (unit tests may use anything). String literals and comments other than doc comments are
//! masked first, so a `{` in a string does not end an item early.

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
    ("classification", &["outcome", "flips"]),
    ("evidence", &["evidence", "status_api", "payout_status"]),
    ("outputs", &["outputs"]),
    ("reports", &["report"]),
    ("decisions", &["decisions"]),
    ("run", &["run"]),
    ("cli", &["explain", "backtest", "demo", "process"]),
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

/// One path a file names (`crate::a::b`, `super::c`, `self::d`, or `e::f` where the file
/// declares `mod e;`), as written: every `use` group expanded (`use super::{a, b::{c, d}}` is
/// `super::a`, `super::b::c`, `super::b::d`; `x::{self, y}` names `x` and `x::y`; a glob names
/// its prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    segs: Vec<String>,
    /// 1-based line of its last segment.
    line: usize,
    /// In a `use` item: the name it binds in the file (`x` for `a::x`, `y` for `a::x as y`,
    /// `*` for a glob).
    binding: Option<String>,
}

/// The modules `masked` declares with `mod NAME;` (its children, in a module file).
fn declared_mods(masked: &[u8]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let needle = b"mod ";
    let mut i = 0;
    while let Some(p) = masked[i..].windows(needle.len()).position(|w| w == needle) {
        let at = i + p;
        i = at + needle.len();
        if at > 0 && is_ident(masked[at - 1]) {
            continue;
        }
        let mut j = i;
        while j < masked.len() && masked[j] == b' ' {
            j += 1;
        }
        let end = j + masked[j..].iter().take_while(|&&c| is_ident(c)).count();
        if end > j && masked.get(end) == Some(&b';') {
            out.insert(String::from_utf8_lossy(&masked[j..end]).into_owned());
        }
    }
    out
}

/// Every path `text` names from `crate`, `self`, `super` or a module it declares, outside
/// `#[cfg(test)]` items.
fn paths_in(text: &str) -> Vec<Named> {
    let masked = mask(text);
    let skipped = test_items(&masked);
    let children = declared_mods(&masked);
    let line_of = |at: usize| masked[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < masked.len() {
        if !is_ident(masked[i]) {
            i += 1;
            continue;
        }
        let end = i + masked[i..].iter().take_while(|&&c| is_ident(c)).count();
        let word = String::from_utf8_lossy(&masked[i..end]).into_owned();
        let before = masked[..i].trim_ascii_end();
        let starts =
            matches!(word.as_str(), "crate" | "self" | "super") || children.contains(&word);
        if starts
            && !before.ends_with(b"::")
            && !before.ends_with(b".")
            && !skipped.iter().any(|&(s, e)| (s..e).contains(&i))
            && let Some(next) = after_colons(&masked, end)
        {
            let before_len = out.len();
            let in_use = before.ends_with(b"use")
                && !before[..before.len() - 3]
                    .last()
                    .is_some_and(|&c| is_ident(c));
            let end = path_rest(&masked, next, vec![word], in_use, &line_of, &mut out);
            if out.len() == before_len {
                // `word::<T>` or `word::` followed by nothing a path continues with.
                i = next;
            } else {
                i = end;
            }
            continue;
        }
        i = end;
    }
    out
}

/// The position after `::` (and the blanks around it) following `at`, if there is one.
fn after_colons(masked: &[u8], at: usize) -> Option<usize> {
    let mut j = at;
    while j < masked.len() && masked[j].is_ascii_whitespace() {
        j += 1;
    }
    if !masked[j..].starts_with(b"::") {
        return None;
    }
    j += 2;
    while j < masked.len() && masked[j].is_ascii_whitespace() {
        j += 1;
    }
    Some(j)
}

/// Reads the rest of a path after `prefix::` at `at` (an identifier, a `{…}` group or `*`),
/// pushing every path it names; returns where it ends.
fn path_rest(
    masked: &[u8],
    at: usize,
    prefix: Vec<String>,
    in_use: bool,
    line_of: &dyn Fn(usize) -> usize,
    out: &mut Vec<Named>,
) -> usize {
    match masked.get(at) {
        Some(b'*') => {
            out.push(Named {
                segs: prefix,
                line: line_of(at),
                binding: in_use.then(|| "*".to_string()),
            });
            at + 1
        }
        Some(b'{') => {
            let mut j = at + 1;
            loop {
                while j < masked.len() && (masked[j].is_ascii_whitespace() || masked[j] == b',') {
                    j += 1;
                }
                match masked.get(j) {
                    None => return j,
                    Some(b'}') => return j + 1,
                    Some(&c) if is_ident(c) || c == b'{' || c == b'*' => {
                        j = path_rest(masked, j, prefix.clone(), in_use, line_of, out);
                    }
                    Some(_) => j += 1,
                }
                // Past `as name` up to the next entry.
                let mut depth = 0usize;
                while let Some(&c) = masked.get(j) {
                    match c {
                        b'{' => depth += 1,
                        b'}' if depth == 0 => break,
                        b'}' => depth -= 1,
                        b',' if depth == 0 => break,
                        _ => {}
                    }
                    j += 1;
                }
            }
        }
        Some(&c) if is_ident(c) => {
            let end = at + masked[at..].iter().take_while(|&&c| is_ident(c)).count();
            let word = String::from_utf8_lossy(&masked[at..end]).into_owned();
            let mut segs = prefix;
            if word != "self" {
                segs.push(word);
            }
            match after_colons(masked, end) {
                Some(next)
                    if masked
                        .get(next)
                        .is_some_and(|&c| is_ident(c) || c == b'{' || c == b'*') =>
                {
                    path_rest(masked, next, segs, in_use, line_of, out)
                }
                _ => {
                    let binding = in_use.then(|| {
                        renamed(masked, end)
                            .unwrap_or_else(|| segs.last().cloned().unwrap_or_default())
                    });
                    out.push(Named {
                        segs,
                        line: line_of(at),
                        binding,
                    });
                    end
                }
            }
        }
        _ => at,
    }
}

/// The name after ` as ` at `at`, if there is one.
fn renamed(masked: &[u8], at: usize) -> Option<String> {
    let rest = &masked[at..];
    let rest = rest.trim_ascii_start().strip_prefix(b"as")?;
    if !rest.first()?.is_ascii_whitespace() {
        return None;
    }
    let rest = rest.trim_ascii_start();
    let len = rest.iter().take_while(|&&c| is_ident(c)).count();
    Some(String::from_utf8_lossy(&rest[..len]).into_owned())
}

/// Every top-level module `text` names through `crate::`, outside `#[cfg(test)]` items.
fn uses_in(text: &str) -> Vec<Use> {
    let mut out: Vec<Use> = Vec::new();
    for n in paths_in(text) {
        if n.segs[0] != "crate" || n.segs.len() < 2 {
            continue;
        }
        let u = Use {
            target: n.segs[1].clone(),
            line: n.line,
        };
        if out.last() != Some(&u) {
            out.push(u);
        }
    }
    out
}

/// The module path of a file of `src` (`ledger/load.rs` is `[ledger, load]`, `ledger/mod.rs`
/// and `ledger.rs` are `[ledger]`); `None` for the crate roots.
fn module_of(rel: &Path) -> Option<Vec<String>> {
    let mut segs: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = segs.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if stem != "mod" {
        segs.push(stem.to_string());
    }
    if segs.len() == 1 && (segs[0] == "lib" || segs[0] == "main") {
        return None;
    }
    Some(segs)
}

/// `segs` as an absolute module path, named from the file of module `from`; `None` for a path
/// that leaves the crate (`super` above its root).
fn resolve(from: &[String], segs: &[String]) -> Option<Vec<String>> {
    match segs[0].as_str() {
        "crate" => Some(segs[1..].to_vec()),
        "self" => Some([from, &segs[1..]].concat()),
        "super" => {
            let up = segs.iter().take_while(|s| *s == "super").count();
            let base = from.get(..from.len().checked_sub(up)?)?;
            Some([base, &segs[up..]].concat())
        }
        _ => Some([from, segs].concat()),
    }
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

/// What the files of `src` name inside the crate.
#[derive(Default)]
struct Names {
    /// Every module there is (`[ledger]`, `[ledger, load]`, …).
    modules: BTreeSet<Vec<String>>,
    /// Every path a file names, resolved: (the file's module, the module or item named,
    /// `src/file.rs:line`).
    paths: Vec<(Vec<String>, Vec<String>, String)>,
    /// Per module, the names its `use` items bind, and the absolute path of each.
    imports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl Names {
    /// `path` with every name a module only imports replaced by where it comes from
    /// (`sources::SourceConfig`, re-exported by `sources/mod.rs`, is
    /// `sources::config::SourceConfig`).
    fn canonical(&self, mut path: Vec<String>) -> Vec<String> {
        for _ in 0..16 {
            let Some(m) = (1..path.len())
                .rev()
                .find(|&n| self.modules.contains(&path[..n]))
            else {
                break;
            };
            match self.imports.get(&path[..m]).and_then(|i| i.get(&path[m])) {
                Some(from) if !from.starts_with(&path[..=m]) => {
                    path = [from.as_slice(), &path[m + 1..]].concat();
                }
                _ => break,
            }
        }
        path
    }
}

fn named_paths(src: &Path) -> Names {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut names = Names::default();
    for f in files {
        let rel = f.strip_prefix(src).expect("under src");
        let Some(from) = module_of(rel) else {
            continue; // lib.rs, main.rs
        };
        for n in 1..=from.len() {
            names.modules.insert(from[..n].to_vec());
        }
        let text = std::fs::read_to_string(&f).expect("read");
        for n in paths_in(&text) {
            if let Some(to) = resolve(&from, &n.segs)
                && !to.is_empty()
            {
                if let Some(b) = &n.binding
                    && b != "*"
                    && b != "_"
                {
                    names
                        .imports
                        .entry(from.clone())
                        .or_default()
                        .insert(b.clone(), to.clone());
                }
                names.paths.push((
                    from.clone(),
                    to,
                    format!("src/{}:{}", rel.display(), n.line),
                ));
            }
        }
    }
    names
}

fn add_edge(g: &mut Graph, from: String, to: String, at: String) {
    let places = g.entry(from).or_default().entry(to).or_default();
    if !places.contains(&at) {
        places.push(at);
    }
}

/// The graph of the top-level modules.
fn graph(src: &Path) -> (BTreeSet<String>, Graph) {
    let mods = top_modules(src);
    let mut g = Graph::new();
    for (from, to, at) in named_paths(src).paths {
        if from[0] != to[0] && mods.contains(&to[0]) {
            add_edge(&mut g, from[0].clone(), to[0].clone(), at);
        }
    }
    (mods, g)
}

/// The graphs inside modules: for every module with submodules (`ledger`, `ledger::import`),
/// the edges between its submodules, each with everything below it. A file of
/// `ledger::load` naming `super::clock::settle` is an edge `ledger::load -> ledger::clock`.
///
/// The parent's own file (`ledger/mod.rs`) is no node: it declares its submodules, re-exports
/// them and holds the vocabulary they share, so it uses them and they use it by design. A name
/// it only re-exports counts where it comes from: `super::SourceConfig` in `sources/csv.rs`,
/// re-exported by `sources/mod.rs` from `sources/config.rs`, is an edge
/// `sources::csv -> sources::config`.
fn inner_graphs(src: &Path) -> BTreeMap<String, (BTreeSet<String>, Graph)> {
    let names = named_paths(src);
    let name = |m: &[String]| m.join("::");
    let mut out: BTreeMap<String, (BTreeSet<String>, Graph)> = BTreeMap::new();
    for m in &names.modules {
        if m.len() > 1 {
            let (nodes, _) = out.entry(name(&m[..m.len() - 1])).or_default();
            nodes.insert(name(m));
        }
    }
    for (from, to, at) in &names.paths {
        let to = names.canonical(to.clone());
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common == 0 || from.len() == common || to.len() == common {
            continue; // between top-level modules (`graph`), or from or to the parent's file
        }
        if !names.modules.contains(&to[..=common]) {
            continue; // an item of the parent's own file
        }
        let (a, b) = (name(&from[..=common]), name(&to[..=common]));
        let (_, g) = out
            .get_mut(&name(&from[..common]))
            .expect("a parent with submodules");
        add_edge(g, a, b, at.clone());
    }
    out
}

/// A cycle's modules and, one line each, the imports that close it with where they are:
/// `a, b:\n  a -> b at src/a.rs:3\n  b -> a at src/b.rs:9`.
fn cycle_text(c: &[String], g: &Graph) -> String {
    let mut why = Vec::new();
    for a in c {
        for (b, at) in &g[a] {
            if c.contains(b) {
                why.push(format!("  {a} -> {b} at {}", at.join(", ")));
            }
        }
    }
    format!("{}:\n{}", c.join(", "), why.join("\n"))
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
        problems.push(format!("import cycle between {}", cycle_text(&c, &g)));
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

#[test]
fn the_parser_resolves_paths_to_submodules_from_where_they_are_written() {
    let snippet = r#"
//! See [`super::sibling::Thing`].
mod child;
use super::{near::{self, Far as Renamed}, other::*};
use self::child::Inner;
fn f(x: &X) {
    child::run(x.load::<u8>());
    crate::top::sub::g();
    super::super::outer::h();
}
#[cfg(test)]
mod tests {
    use super::super::hidden::Thing;
}
"#;
    let found: Vec<(String, usize, Option<String>)> = paths_in(snippet)
        .into_iter()
        .map(|n| (n.segs.join("::"), n.line, n.binding))
        .collect();
    let want: Vec<(String, usize, Option<String>)> = [
        ("super::sibling::Thing", 2, None),
        ("super::near", 4, Some("near")),
        ("super::near::Far", 4, Some("Renamed")),
        ("super::other", 4, Some("*")),
        ("self::child::Inner", 5, Some("Inner")),
        ("child::run", 7, None),
        ("crate::top::sub::g", 8, None),
        ("super::super::outer::h", 9, None),
    ]
    .into_iter()
    .map(|(p, l, b)| (p.to_string(), l, b.map(str::to_string)))
    .collect();
    assert_eq!(found, want);

    // As written in `src/m/a.rs` (module `m::a`).
    let from = ["m".to_string(), "a".to_string()];
    let abs = |segs: &str| {
        let segs: Vec<String> = segs.split("::").map(str::to_string).collect();
        resolve(&from, &segs).map(|p| p.join("::"))
    };
    assert_eq!(abs("super::b::f").as_deref(), Some("m::b::f"));
    assert_eq!(abs("self::c::f").as_deref(), Some("m::a::c::f"));
    assert_eq!(abs("c::f").as_deref(), Some("m::a::c::f"));
    assert_eq!(abs("super::super::x::f").as_deref(), Some("x::f"));
    assert_eq!(abs("crate::m::b").as_deref(), Some("m::b"));
    assert_eq!(abs("super::super::super::x"), None);
}

/// Writes `files` (path under `src/`, text) into a temporary `src/` and returns the cycles
/// of each module's inner graph.
fn inner_cycles_of(files: &[(&str, &str)]) -> BTreeMap<String, Vec<Vec<String>>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    for (path, text) in files {
        let p = src.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    inner_graphs(&src)
        .into_iter()
        .map(|(m, (nodes, g))| (m, cycles(&nodes, &g)))
        .collect()
}

#[test]
fn a_circle_between_two_files_of_one_module_is_found_through_a_re_export() {
    let root = "pub mod a;\npub mod b;\npub mod deep;\npub use b::Shared;\npub struct Common;\n";
    // a -> b through the parent's re-export; b -> a by a path.
    let circle = inner_cycles_of(&[
        ("lib.rs", "pub mod m;\n"),
        ("m/mod.rs", root),
        ("m/a.rs", "use super::Shared;\npub fn g() {}\n"),
        (
            "m/b.rs",
            "pub struct Shared;\npub fn f() { super::a::g() }\n",
        ),
        ("m/deep/mod.rs", "pub mod x;\n"),
        ("m/deep/x.rs", "use crate::m::{Common, b::f};\n"),
    ]);
    assert_eq!(
        circle["m"],
        vec![vec!["m::a".to_string(), "m::b".to_string()]],
        "{circle:?}"
    );
    // A circle one level further down (m::deep::x <-> m::deep::y) is its module's.
    let deeper = inner_cycles_of(&[
        ("lib.rs", "pub mod m;\n"),
        ("m/mod.rs", root),
        ("m/a.rs", "use super::Common;\n"),
        ("m/b.rs", "pub struct Shared;\n"),
        ("m/deep/mod.rs", "pub mod x;\npub mod y;\n"),
        ("m/deep/x.rs", "pub fn f() { super::y::g() }\n"),
        ("m/deep/y.rs", "use crate::m::deep::x::f;\npub fn g() {}\n"),
    ]);
    assert_eq!(deeper["m"], Vec::<Vec<String>>::new(), "{deeper:?}");
    assert_eq!(
        deeper["m::deep"],
        vec![vec!["m::deep::x".to_string(), "m::deep::y".to_string()]]
    );
    // Files that only use their parent's own items, and a parent that uses them: no circle.
    let none = inner_cycles_of(&[
        ("lib.rs", "pub mod m;\n"),
        (
            "m/mod.rs",
            "pub mod a;\npub mod b;\npub struct Common;\npub fn run() { a::g(); b::f() }\n",
        ),
        ("m/a.rs", "use super::Common;\npub fn g() {}\n"),
        (
            "m/b.rs",
            "pub fn f() { let _ = super::Common; super::a::g() }\n",
        ),
    ]);
    assert_eq!(none["m"], Vec::<Vec<String>>::new(), "{none:?}");
}

#[test]
fn no_module_has_an_import_cycle_between_its_submodules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let inner = inner_graphs(&src);

    // It reads the real tree: edges between files, through paths and re-exports.
    let edges: usize = inner
        .values()
        .flat_map(|(_, g)| g.values())
        .map(BTreeMap::len)
        .sum();
    assert!(edges > 50, "only {edges} edges between submodules");
    assert!(
        inner["sources"].1["sources::csv"].contains_key("sources::tabular")
            && inner["ledger"].1["ledger::load"].contains_key("ledger::clock"),
        "{inner:#?}"
    );

    let mut problems = Vec::new();
    for (parent, (nodes, g)) in &inner {
        for c in cycles(nodes, g) {
            problems.push(format!(
                "import cycle inside {parent} between {}",
                cycle_text(&c, g)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "move what the files share into one of them (the lower) or a small module of its \
         own:\n{}",
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
