//! No two modules of `simfa-core` or `simfa-std` import each other, directly
//! or through others: each crate's modules form layers (docs/architecture.md).
//!
//! A module's imports are the `crate::` and `super::` paths in its code
//! (comments, doc links and test-only modules left out), resolved to the
//! longest module they name; a folder's are its modules'. The test fails
//! with the circle it finds, between modules or between folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`mem::txn`, `""` for the crate root) of each source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut m = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
            parts.pop();
        }
        // Test files included with `#[path]` belong to their parent's tests.
        if parts
            .last()
            .is_some_and(|p| p.ends_with("tests") || p.contains("tests_"))
        {
            continue;
        }
        m.insert(parts.join("::"), f);
    }
    m
}

/// The code of a file without comments and without its `tests` module.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// Each module's imports within its crate.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut out = BTreeMap::new();
    for (m, file) in &mods {
        let text = code(&std::fs::read_to_string(file).unwrap());
        let here: Vec<&str> = if m.is_empty() {
            vec![]
        } else {
            m.split("::").collect()
        };
        let mut deps = BTreeSet::new();
        let resolve = |path: Vec<&str>, deps: &mut BTreeSet<String>| {
            for n in (1..=path.len()).rev() {
                let cand = path[..n].join("::");
                if mods.contains_key(&cand) {
                    if cand != *m {
                        deps.insert(cand);
                    }
                    return;
                }
            }
        };
        // `crate::a::b` and `super::a` paths, and the items of `use
        // crate::{a, b::c}` groups.
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            let (root, skip) = if rest.starts_with("crate::") {
                (Some(vec![]), 7)
            } else if rest.starts_with("super::") {
                // `super` is the parent module, whatever the file layout.
                let mut base: Vec<&str> = here.clone();
                base.pop();
                (Some(base), 7)
            } else {
                (None, 1)
            };
            let word_start =
                i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            if let (Some(mut base), true) = (root, word_start) {
                let tail = &text[i + skip..];
                if let Some(group) = tail.strip_prefix('{') {
                    let inner = &group[..group.find('}').unwrap_or(group.len())];
                    for item in inner.split(',') {
                        let item = item.trim().split(" as ").next().unwrap_or("");
                        let mut p = base.clone();
                        p.extend(item.split("::").filter(|s| !s.is_empty()));
                        resolve(p, &mut deps);
                    }
                } else {
                    let end = tail
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(tail.len());
                    let mut segs = tail[..end].split("::").filter(|s| !s.is_empty()).peekable();
                    while segs.peek() == Some(&"super") {
                        segs.next();
                        base.pop();
                    }
                    base.extend(segs);
                    resolve(base, &mut deps);
                }
                i += skip;
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
        out.insert(m.clone(), deps);
    }
    out
}

/// A circle of imports, if there is one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        v: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        stack.push(v.to_string());
        for w in &g[v] {
            match state.get(w.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == w).unwrap();
                    let mut c = stack[from..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(w, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in g.keys() {
        if state.get(v.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(v, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The graph of the crate's top-level modules and folders: `mem::txn`
/// counts as `mem`.
fn folders(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, deps) in g {
        let t = top(m);
        let e = out.entry(t.clone()).or_default();
        e.extend(deps.iter().map(|d| top(d)).filter(|d| *d != t));
    }
    for d in out.values().flatten().cloned().collect::<Vec<_>>() {
        out.entry(d).or_default();
    }
    out
}

fn crate_src(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("src")
}

#[test]
fn the_core_has_no_import_circle() {
    let g = edges(&crate_src("core"));
    assert!(g.len() > 30, "only {} modules found", g.len());
    assert_eq!(circle(&g), None);
    assert_eq!(circle(&folders(&g)), None, "between folders");
}

#[test]
fn the_std_shim_has_no_import_circle() {
    let g = edges(&crate_src("std-shim"));
    assert!(g.len() > 30, "only {} modules found", g.len());
    assert_eq!(circle(&g), None);
    assert_eq!(circle(&folders(&g)), None, "between folders");
}

/// The checker finds a circle where there is one.
#[test]
fn a_circle_is_found() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["c".to_string()].into());
    g.insert("c".into(), ["a".to_string()].into());
    g.insert("d".into(), BTreeSet::new());
    assert_eq!(
        circle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let g = edges(&crate_src("core"));
    assert!(g["sim"].contains("analytic"), "{:?}", g["sim"]);
    assert!(
        g["mem::system"].contains("mem::config"),
        "{:?}",
        g["mem::system"]
    );
}
