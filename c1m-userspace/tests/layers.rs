//! The dependency rule of ARCHITECTURE.md, enforced: a module never imports one of a
//! higher layer (OS facts and parsers, then the observer and the workload with the
//! multi-host models, then the lab, then the multi-host client and merge, then the
//! commands). Test modules may reach up (fixtures); the product code may not.
//!
//! The edges listed in `KNOWN` are the ones the renovation of issue 22 has not removed
//! yet: the test fails on any new one, and on a known one that is gone (so the list only
//! shrinks).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// Module path prefixes and their layer; the longest prefix wins.
const LAYERS: &[(&str, u8)] = &[
    ("aligned_alloc", 0),
    ("args", 0),
    ("duration", 0),
    ("fmt", 0),
    ("host", 0),
    ("infile", 0),
    ("ktls", 0),
    ("util", 0),
    ("priority", 0),
    ("netns", 0),
    ("netpath", 0),
    ("proc_net_tcp", 0),
    ("procstat", 0),
    ("state_dir", 0),
    ("sysctl", 0),
    ("observer", 1),
    ("workload", 1),
    // What the lab needs to know of other hosts: their records and peers.
    ("multihost::model", 1),
    ("multihost::peers", 1),
    // A run's record and the figures computed once from it, below everything that
    // shows or writes them.
    ("model", 2),
    ("figures", 2),
    // What c1m makes of the figures: the live views, a run folder's report, the
    // comparison of runs.
    ("view", 3),
    ("report", 3),
    ("compare", 3),
    ("lab", 4),
    ("multihost", 5),
    ("cli", 6),
];

/// Upward edges still to remove: (importing module, imported module prefix).
const KNOWN: &[(&str, &str)] = &[];

fn layer(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .filter(|(p, _)| module == *p || module.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, l)| *l)
}

/// The module a source file is: `src/lab/run/mod.rs` is `lab::run`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a source, without `//` comments: a doc link names a module without
/// importing it. Strings keep their `//` (a URL in a string is not a comment).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut in_str = false;
            let b = l.as_bytes();
            let mut cut = l.len();
            let mut i = 0;
            while i + 1 < b.len() {
                match b[i] {
                    b'\\' if in_str => i += 1,
                    b'"' => in_str = !in_str,
                    b'/' if !in_str && b[i + 1] == b'/' => {
                        cut = i;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            &l[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a `use` tree names, e.g. `{a::{b, c}, d}` gives `a::b`, `a::c`, `d`.
fn tree_paths(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    tree_paths(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        tree_paths(&inner[start..], prefix, out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    match tree.find("::") {
        Some(i) if !tree[..i].contains('{') => {
            let head = &tree[..i];
            let next = if prefix.is_empty() {
                head.to_owned()
            } else {
                format!("{prefix}::{head}")
            };
            tree_paths(&tree[i + 2..], &next, out);
        }
        _ => {
            let name = tree.split_whitespace().next().unwrap_or(tree);
            out.push(if prefix.is_empty() {
                name.to_owned()
            } else if name == "self" || name == "*" {
                prefix.to_owned()
            } else {
                format!("{prefix}::{name}")
            });
        }
    }
}

/// Where the path at the start of `after` ends: past its closing brace for a `{…}` tree,
/// else at the first character no path has.
fn path_end(after: &str) -> usize {
    if after.starts_with('{') {
        let mut depth = 0;
        after
            .char_indices()
            .find(|(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(after.len(), |(j, _)| j + 1)
    } else {
        after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len())
    }
}

/// The crate modules a source names, from `use crate::…;` trees and inline
/// `crate::a::b` paths (outside its test module).
fn imports(text: &str) -> BTreeSet<String> {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let end = path_end(after);
        tree_paths(after[..end].trim_end_matches(':'), "", &mut paths);
        rest = &after[end..];
    }
    // Keep the module part: lower-case segments (a type or a function ends it, but a
    // function is lower-case too, which only makes the path longer, never another
    // module's).
    paths
        .into_iter()
        .map(|p| {
            p.split("::")
                .take_while(|s| s.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
                .collect::<Vec<_>>()
                .join("::")
        })
        .filter(|p| !p.is_empty())
        .collect()
}

#[test]
fn no_module_imports_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    let mut unplaced = Vec::new();
    for f in &files {
        let module = module_of(&src, f);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(mine) = layer(&module) else {
            unplaced.push(module);
            continue;
        };
        let text = code_of(&std::fs::read_to_string(f).expect("a source file"));
        for used in imports(&text) {
            if let Some(theirs) = layer(&used)
                && theirs > mine
            {
                found.insert((module.clone(), used));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer (add them to LAYERS): {unplaced:?}"
    );
    let known = |(m, u): &(String, String)| {
        KNOWN
            .iter()
            .any(|(km, ku)| m == km && (u == ku || u.starts_with(&format!("{ku}::"))))
    };
    let new: Vec<_> = found.iter().filter(|e| !known(e)).collect();
    assert!(
        new.is_empty(),
        "upward imports (a lower layer must not use a higher one; see ARCHITECTURE.md): {new:?}"
    );
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(km, ku)| {
            !found
                .iter()
                .any(|(m, u)| m == km && (u == ku || u.starts_with(&format!("{ku}::"))))
        })
        .collect();
    assert!(
        gone.is_empty(),
        "edges in KNOWN that no longer exist (remove them from the list): {gone:?}"
    );
}

#[test]
fn use_trees_are_read_whole() {
    let text = "use crate::{\n    lab::{doctor}, model::{Netns, StartState},\n    observer::view::state_key,\n};\nfn f() { crate::workload::procstat::all_pids(); }\n";
    let got: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(
        got,
        [
            "lab::doctor",
            "model",
            "observer::view::state_key",
            "workload::procstat::all_pids"
        ]
    );
}

/// The crate modules a file names through `super::` and `self::`, made absolute.
fn relative_imports(text: &str, module: &str) -> BTreeSet<String> {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = BTreeSet::new();
    for (word, up) in [("super::", 1usize), ("self::", 0)] {
        let mut rest = text;
        while let Some(i) = rest.find(word) {
            // `super::super::` counts twice; a longer word ending in `self::` is no path.
            let before = rest[..i].chars().last();
            rest = &rest[i + word.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut ups = up;
            let mut after = rest;
            while let Some(r) = after.strip_prefix("super::") {
                ups += 1;
                after = r;
            }
            let mut base: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
            // A file `a/b.rs` and a folder `a/b/mod.rs` are both module `a::b`.
            for _ in 0..ups {
                base.pop();
            }
            let prefix = base.join("::");
            let mut paths = Vec::new();
            let end = path_end(after);
            tree_paths(after[..end].trim_end_matches(':'), &prefix, &mut paths);
            out.extend(paths);
        }
    }
    out
}

/// File-level circles still to break, each as its sorted modules: none left (issue 31).
/// The test fails on any circle not listed, and on a listed one that is gone.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Every module's imports, by file module: `crate::`, `super::` and `self::` paths,
/// each resolved to the longest module that is a file.
fn file_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let resolve = |p: &str| -> Option<String> {
        let parts: Vec<&str> = p.split("::").collect();
        (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = module_of(src, f);
        let text = code_of(&std::fs::read_to_string(f).expect("a source file"));
        let mut all = imports(&text);
        all.extend(relative_imports(&text, &module));
        for u in all {
            if let Some(t) = resolve(&u)
                && t != module
            {
                edges.entry(module.clone()).or_default().insert(t);
            }
        }
    }
    edges
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    comp.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.found.push(comp);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found.sort();
    walk.found
}

#[test]
fn no_file_imports_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = circles(&file_edges(&src));
    let known = |c: &Vec<String>| KNOWN_CIRCLES.iter().any(|k| k.iter().eq(c.iter()));
    let new: Vec<_> = found.iter().filter(|c| !known(c)).collect();
    assert!(
        new.is_empty(),
        "import circles between files (a module and the ones it reaches import each other; \
         move what both need below both): {new:?}"
    );
    let gone: Vec<_> = KNOWN_CIRCLES
        .iter()
        .filter(|k| !found.iter().any(|c| k.iter().eq(c.iter())))
        .collect();
    assert!(
        gone.is_empty(),
        "circles in KNOWN_CIRCLES that no longer exist (remove them from the list): {gone:?}"
    );
}

#[test]
fn circles_are_found_through_super_and_self() {
    let text = code_of("use super::view::SideView; // super::nothing\nfn f() { self::x::g(); }\n");
    let got: Vec<String> = relative_imports(&text, "observer::resets")
        .into_iter()
        .collect();
    assert_eq!(got, ["observer::resets::x::g", "observer::view::SideView"]);
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &["a"][..]),
    ]
    .into_iter()
    .map(|(m, ts)| (m.to_owned(), ts.iter().map(|t| (*t).to_owned()).collect()))
    .collect();
    assert_eq!(circles(&edges), [["a", "b", "c"]]);
}
