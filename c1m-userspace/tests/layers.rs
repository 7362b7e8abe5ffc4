//! The dependency rule of ARCHITECTURE.md, enforced: a module never imports one of a
//! higher layer (OS facts and parsers, then the observer and the workload with the
//! multi-host models, then the lab, then the multi-host client and merge, then the
//! commands). Test modules may reach up (fixtures); the product code may not.
//!
//! The edges listed in `KNOWN` are the ones the renovation of issue 22 has not removed
//! yet: the test fails on any new one, and on a known one that is gone (so the list only
//! shrinks).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

/// Module path prefixes and their layer; the longest prefix wins.
const LAYERS: &[(&str, u8)] = &[
    ("args", 0),
    ("duration", 0),
    ("fmt", 0),
    ("util", 0),
    ("priority", 0),
    ("netns", 0),
    ("proc_net_tcp", 0),
    ("procstat", 0),
    ("state_dir", 0),
    ("observer", 1),
    ("workload", 1),
    // What the lab needs to know of other hosts: their records, peers and shares, and
    // the clock protocol the control endpoint answers.
    ("multihost::model", 1),
    ("multihost::peers", 1),
    ("multihost::share", 1),
    ("multihost::clock", 1),
    ("lab", 2),
    ("multihost", 3),
    ("cli", 4),
    ("bench", 4),
];

/// Upward edges still to remove: (importing module, imported module prefix).
const KNOWN: &[(&str, &str)] = &[
    // The client's orchestration lives beside the parsers: it writes a client host's
    // run folder and metrics (multihost) and its record (lab). To become a hook.
    ("workload::cli", "lab::model"),
    ("workload::cli", "lab::run"),
    ("workload::cli", "lab::view"),
    ("workload::cli", "multihost::client_host"),
    ("workload::cli", "multihost::client_metrics"),
];

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
        let end = if after.starts_with('{') {
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
        };
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
        let text = std::fs::read_to_string(f).expect("a source file");
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
    let text = "use crate::{\n    lab::{doctor, model::{Netns, StartState}},\n    observer::view::state_key,\n};\nfn f() { crate::workload::procstat::all_pids(); }\n";
    let got: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(
        got,
        [
            "lab::doctor",
            "lab::model",
            "observer::view::state_key",
            "workload::procstat::all_pids"
        ]
    );
}
