//! The layering of core's module tree: no two modules under one parent import each other,
//! directly or through others (issue 27). Reads `core/src` as text: every `use` of `crate::`,
//! `super::` or a child module, and every inline `crate::` path outside comments, resolved
//! through `pub use` re-exports to the module that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// Every `.rs` file under `src`, by module path (`a/b.rs` and `a/b/mod.rs` are `a::b`; the
/// crate root is the empty path).
fn read_tree(src: &Path) -> BTreeMap<Module, String> {
    fn walk(dir: &Path, prefix: &Path, out: &mut BTreeMap<Module, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, prefix, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(prefix).unwrap().with_extension("");
                let mut module: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    module.pop();
                }
                out.insert(module, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The text without comment lines.
fn code(text: &str) -> String {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The leaf paths of a use tree (`a::{b, c::d as e}` gives `a::b` and `a::c::d`).
fn leaves(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, ch) in s.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
    }
    fn rec(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        for part in split_top(s) {
            let part = part.trim();
            if let Some(open) = part.find('{') {
                let head: Vec<String> = part[..open]
                    .split("::")
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect();
                let inner = &part[open + 1..part.rfind('}').unwrap()];
                rec(&[prefix, &head].concat(), inner, out);
            } else {
                let path = part.split(" as ").next().unwrap();
                let segs = path.split("::").map(str::trim).filter(|x| !x.is_empty()).map(String::from);
                out.push(prefix.iter().cloned().chain(segs).collect());
            }
        }
    }
    let mut out = Vec::new();
    rec(&[], &tree.split_whitespace().collect::<Vec<_>>().join(" "), &mut out);
    out
}

/// `(indented, public, leaf path)` for every use statement of a file.
fn uses(text: &str) -> Vec<(bool, bool, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let line_start = rest[..at].rfind('\n').map_or(0, |i| i + 1);
        let before = &rest[line_start..at];
        let public = before.trim().starts_with("pub");
        let end = rest[at..].find(';').map_or(rest.len(), |i| at + i);
        let body = &rest[at + 4..end];
        let is_path = body.chars().all(|c| c.is_alphanumeric() || "_:{},* \n\t".contains(c));
        if (before.trim().is_empty() || public) && is_path {
            let indented = before.starts_with([' ', '\t']);
            out.extend(leaves(body).into_iter().map(|p| (indented, public, p)));
        }
        rest = &rest[(at + 4).min(end)..];
    }
    out
}

/// A path as seen from `module`, made absolute; `None` for another crate's path.
fn absolute(
    module: &Module,
    indented: bool,
    segs: &[String],
    tree: &BTreeMap<Module, String>,
) -> Option<Module> {
    let first = segs.first()?;
    match first.as_str() {
        "crate" => Some(segs[1..].to_vec()),
        "super" | "self" => {
            let mut base = module.clone();
            let mut k = 0;
            // `use super::*` in an inline module (a test module) is the file's own module.
            if indented && first == "super" {
                k = 1;
            }
            while segs.get(k).is_some_and(|s| s == "super") {
                base.pop();
                k += 1;
            }
            if segs.get(k).is_some_and(|s| s == "self") {
                k += 1;
            }
            Some(base.into_iter().chain(segs[k..].iter().cloned()).collect())
        }
        _ => {
            let child: Module = module.iter().chain([first]).cloned().collect();
            tree.contains_key(&child).then(|| module.iter().chain(segs).cloned().collect())
        }
    }
}

/// The deepest module an absolute path names, following re-exports of its next segment.
fn resolve(
    path: &[String],
    tree: &BTreeMap<Module, String>,
    reexports: &BTreeMap<(Module, String), Module>,
) -> Module {
    let mut module = Module::new();
    let mut i = 0;
    for _ in 0..16 {
        while i < path.len() && tree.contains_key(&[module.clone(), vec![path[i].clone()]].concat()) {
            module.push(path[i].clone());
            i += 1;
        }
        match path.get(i).and_then(|name| reexports.get(&(module.clone(), name.clone()))) {
            Some(from) => {
                module = from.clone();
                i += 1;
            }
            None => break,
        }
    }
    module
}

/// Module -> modules it imports from.
fn imports(tree: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let code: BTreeMap<&Module, String> = tree.iter().map(|(m, t)| (m, code(t))).collect();
    let mut reexports = BTreeMap::new();
    for (module, text) in &code {
        for (_, _, leaf) in uses(text).into_iter().filter(|(_, public, _)| *public) {
            {
                let Some(abs) = absolute(module, false, &leaf, tree) else { continue };
                let (Some(name), Some(from)) = (abs.last(), abs.get(..abs.len().saturating_sub(1))) else {
                    continue;
                };
                let from = resolve(from, tree, &BTreeMap::new());
                if &&from != module && name != "self" {
                    reexports.insert(((*module).clone(), name.clone()), from);
                }
            }
        }
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in &code {
        let mut refs: Vec<(bool, Vec<String>)> = uses(text).into_iter().map(|(i, _, p)| (i, p)).collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("crate::") {
            let boundary = rest[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '$'));
            let tail = &rest[at..];
            let len =
                tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
            if boundary {
                refs.push((
                    false,
                    tail[..len].split("::").filter(|s| !s.is_empty()).map(String::from).collect(),
                ));
            }
            rest = &rest[at + 7..];
        }
        for (indented, path) in refs {
            let Some(abs) = absolute(module, indented, &path, tree) else { continue };
            let target = resolve(&abs, tree, &reexports);
            if &&target != module {
                edges.entry((*module).clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// Groups of sibling modules (children of one parent) that import each other, each as
/// `a <-> b <-> ...`.
fn sibling_cycles(tree: &BTreeMap<Module, String>) -> Vec<String> {
    let edges = imports(tree);
    let parents: BTreeSet<Module> =
        tree.keys().filter(|m| !m.is_empty()).map(|m| m[..m.len() - 1].to_vec()).collect();
    let mut found = Vec::new();
    for parent in parents {
        let n = parent.len();
        let under = |m: &Module| m.len() > n && m[..n] == parent[..];
        // Edges between the children of `parent` that hold each end.
        let mut kids: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, tos) in &edges {
            for to in tos.iter().filter(|to| under(from) && under(to)) {
                let (a, b) = (from[..=n].to_vec(), to[..=n].to_vec());
                if a != b {
                    kids.entry(a).or_default().insert(b);
                }
            }
        }
        // Two children are in one cycle when each reaches the other.
        let reach = |start: &Module| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.clone()];
            while let Some(m) = stack.pop() {
                for next in kids.get(&m).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&Module, BTreeSet<Module>> = kids.keys().map(|k| (k, reach(k))).collect();
        let mut done = BTreeSet::new();
        for (k, r) in &reaches {
            if done.contains(*k) || !r.contains(*k) {
                continue;
            }
            let group: Vec<&Module> = reaches
                .iter()
                .filter(|(o, ro)| r.contains(**o) && ro.contains(*k))
                .map(|(o, _)| *o)
                .collect();
            done.extend(group.iter().map(|m| (*m).clone()));
            found.push(group.iter().map(|m| m.join("::")).collect::<Vec<_>>().join(" <-> "));
        }
    }
    found
}

#[test]
fn core_src_has_no_import_cycle_between_sibling_modules() {
    let tree = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(tree.len() > 20, "read only {} files of core/src", tree.len());
    assert_eq!(sibling_cycles(&tree), Vec::<String>::new(), "module cycles in core/src");
}

#[test]
fn the_cycle_check_finds_cycles_through_uses_reexports_and_inline_paths() {
    let tree = |files: &[(&str, &str)]| -> BTreeMap<Module, String> {
        files
            .iter()
            .map(|(m, t)| {
                (m.split("::").filter(|s| !s.is_empty()).map(String::from).collect(), t.to_string())
            })
            .collect()
    };
    // Through a root re-export and an inline path.
    let cyclic = tree(&[
        ("", "mod a;\nmod b;\npub use b::Thing;\n"),
        ("a", "use crate::Thing;\npub struct A;\n"),
        ("b", "pub struct Thing(crate::a::A);\n"),
    ]);
    assert_eq!(sibling_cycles(&cyclic), ["a <-> b"]);
    // Through `super::` between two children of a nested module, with a comment ignored.
    let nested = tree(&[
        ("", "pub mod p;\n"),
        ("p", "mod x;\nmod y;\n"),
        ("p::x", "use super::y::{Y, self as why};\npub struct X;\n"),
        ("p::y", "// use super::x::X;\npub struct Y;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
    ]);
    assert!(sibling_cycles(&nested).is_empty(), "{:?}", sibling_cycles(&nested));
    let nested_cycle = tree(&[
        ("", "pub mod p;\n"),
        ("p", "mod x;\nmod y;\n"),
        ("p::x", "use super::y::{Y, self as why};\npub struct X;\n"),
        ("p::y", "use super::x::X;\npub struct Y;\n"),
    ]);
    assert_eq!(sibling_cycles(&nested_cycle), ["p::x <-> p::y"]);
}
