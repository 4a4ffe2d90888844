//! Imports in one direction (issue 56, step 0; `ARCHITECTURE.md`, "The layers inside
//! `sandbox/src`"): every module of `sandbox/src` has a layer, and a module may use only
//! modules of its own layer or below. This test reads the sources (`crate::` and `super::`
//! paths outside comments and the `#[cfg(test)]` modules), and fails on
//!
//! - an upward use that `tests/layers.allowed` does not list (a new one),
//! - an import cycle between files that it does not list,
//! - an entry of that list that no longer occurs: the list may only shrink, until it is empty.
//!
//! `LAYERS_PRINT=1 cargo test -p localgpt-sandbox --test layers -- --nocapture` prints today's
//! list in the file's format.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Today's modules by layer, from the target layout's sketch: what each file *is* (a file moved
/// into its target room later keeps its layer). The longest matching prefix decides.
const LAYERS: &[(&str, u8)] = &[
    // L0: utilities, std only.
    ("platform", 0),
    ("error", 0),
    ("text", 0),
    ("files", 0),
    ("host", 0),
    ("audit", 1),
    ("model::guard", 1),
    ("rand", 0),
    ("timing", 0),
    // The guard's file seam (a private directory, links, modes, identity): std and libc only.
    ("guard::fsmeta", 0),
    // L1: the vocabulary, git knowledge, the path resolver, the helper<->runner wire.
    ("model", 1),
    ("ablation", 1),
    ("guard::gitconfig", 1),
    ("guard::gitindex", 1),
    ("plan::resolve", 1),
    ("guard::records", 1),
    ("run::report", 1),
    ("run::fds", 1),
    // L2: what the user asked.
    ("policy", 2),
    ("plan::decision", 2),
    ("config", 2),
    ("defaults", 2),
    ("srt", 2),
    ("network", 2),
    // L3: read-only looks at this machine; the workspace guard.
    ("detect", 3),
    ("linux::probe", 3),
    ("plan::system_secrets", 3),
    ("plan::configs", 3),
    // The workspace guard's room (survey, review, pending store, denied records); its git
    // parsers and record store sit in layer 1 above.
    ("guard", 3),
    // The file tools of spec 7.2: the policy and the guard applied in the host process.
    ("paths", 3),
    // L4: pure per-OS compilers.
    ("linux::compile", 4),
    ("linux::landlock", 4),
    ("linux::mounts", 4),
    ("linux::syscalls", 4),
    ("linux::seccomp", 4),
    ("macos", 4),
    ("macos::profile", 4),
    ("macos::sbpl", 4),
    ("macos::eval", 4),
    ("macos::protections", 4),
    ("windows", 4),
    ("windows::acl", 4),
    ("windows::eval", 4),
    ("windows::record", 4),
    ("windows::sid", 4),
    ("windows::cmdline", 4),
    ("windows::protections", 4),
    // L5: the orchestrator, and what explains its decisions.
    ("plan", 5),
    ("plan::env", 5),
    ("plan::ablate", 5),
    ("why", 5),
    // L6: per-OS glue.
    ("linux", 6),
    ("macos::helper", 6),
    ("macos::denials", 6),
    ("windows::glue", 6),
    ("windows::run", 6),
    // Starting the helper (fork, posix_spawn, the zygote's child): glue shared by Linux and macOS.
    ("run::spawn", 6),
    // L7: the parent side.
    ("run", 7),
    ("handle", 7),
    // Test-only: the fuzz targets reach every parser.
    ("fuzz", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .filter(|(m, _)| module == *m || module.starts_with(&format!("{m}::")))
        .max_by_key(|(m, _)| m.len())
        .map(|(_, l)| *l)
}

/// Every `.rs` file under `dir`, with its module path (`plan/mod.rs` → `plan`).
fn sources(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(dir).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
                    parts.pop();
                }
                out.push((parts.join("::"), p));
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without comments and without its test modules.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if (t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test,")) && lines.peek().is_some_and(|n| n.trim_start().trim_start_matches("pub(crate) ").starts_with("mod tests")) {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line.split(" // ").next().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The modules a file's code names: `crate::a::b…` and `super::a…` paths (the identifiers that
/// follow, as far as they are lower-case: a module path, then an item), and the items of
/// `use crate::x::{a, b}` groups that are modules.
fn uses(module: &str, code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let parent: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent[..parent.len().saturating_sub(1)].to_vec())] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            let mut r = rest;
            loop {
                let end = r.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(r.len());
                if end == 0 {
                    break;
                }
                path.push(r[..end].to_string());
                r = &r[end..];
                match r.strip_prefix("::") {
                    Some(n) => r = n,
                    None => break,
                }
            }
            if let Some(group) = r.strip_prefix('{') {
                // `crate::x::{a::B, c}`: each entry's module path under `x`; `x` itself only
                // where an entry is one of its items (or `self`).
                let mut item_of_x = false;
                for entry in group[..group.find('}').unwrap_or(group.len())].split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    let segs: Vec<&str> = entry.split("::").take_while(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') && *s != "self").collect();
                    if segs.is_empty() {
                        item_of_x = true;
                    } else {
                        out.insert(path.iter().map(String::as_str).chain(segs).collect::<Vec<_>>().join("::"));
                    }
                }
                if item_of_x && !path.is_empty() {
                    out.insert(path.join("::"));
                }
                continue;
            }
            if !path.is_empty() {
                out.insert(path.join("::"));
            }
        }
    }
    out
}

/// The file module that `path` lies in: its longest prefix that is a file.
fn file_of<'a>(path: &str, files: &'a BTreeSet<String>) -> Option<&'a String> {
    files.iter().filter(|f| !f.is_empty() && (path == f.as_str() || path.starts_with(&format!("{f}::")))).max_by_key(|f| f.len())
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = T { g: graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// Today's upward uses (`up: FILE -> MODULE (Lx > Ly)`) and cycles (`cycle: A B …`).
fn findings() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&src);
    let names: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut found = BTreeSet::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        if module.is_empty() || module.ends_with("::tests") {
            continue; // lib.rs: the API surface re-exports every layer; a tests.rs is test code
        }
        let Some(from) = layer(module) else { panic!("{}: no layer for module {module} (add it to LAYERS)", path.display()) };
        let text = std::fs::read_to_string(path).unwrap();
        for used in uses(module, &code(&text)) {
            let Some(target) = file_of(&used, &names) else { continue };
            if target == module {
                continue;
            }
            graph.entry(module.clone()).or_default().insert(target.clone());
            let to = layer(target).unwrap_or_else(|| panic!("no layer for module {target} (add it to LAYERS)"));
            if to > from {
                found.insert(format!("up: {module} -> {target} (L{from} uses L{to})"));
            }
        }
    }
    for c in cycles(&graph) {
        found.insert(format!("cycle: {}", c.join(" ")));
    }
    found
}

#[test]
fn imports_run_one_way_and_the_list_of_exceptions_only_shrinks() {
    let found = findings();
    let allowed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layers.allowed");
    let allowed_text = std::fs::read_to_string(&allowed_path).unwrap_or_default();
    let allowed: BTreeSet<String> = allowed_text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for f in &found {
            println!("{f}");
        }
    }
    let new: Vec<&String> = found.difference(&allowed).collect();
    let gone: Vec<&String> = allowed.difference(&found).collect();
    let ups = found.iter().filter(|f| f.starts_with("up:")).count();
    let cycles = found.len() - ups;
    assert!(new.is_empty(), "new upward imports or cycles (a module may use only its own layer or below; see ARCHITECTURE.md):\n{}", new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
    assert!(gone.is_empty(), "fixed, so remove them from {}:\n{}", allowed_path.display(), gone.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
    eprintln!("layers: {ups} upward uses and {cycles} cycles left (tests/layers.allowed)");
}

#[test]
fn the_reader_sees_paths_as_the_compiler_does() {
    let c = code("use crate::plan::{Access, protected::X};\n// crate::run::x in a comment\nfn f() { crate::linux::seccomp::build(); super::env::y(); my_crate::z(); }\n#[cfg(test)]\nmod tests {\n use crate::run::x;\n}\n");
    let u = uses("plan::nested", &c);
    assert_eq!(u, ["linux::seccomp::build", "plan", "plan::env::y", "plan::protected"].into_iter().map(String::from).collect());
    assert_eq!(uses("linux::compile", &code("use super::{mounts, seccomp};\n")), ["linux::mounts", "linux::seccomp"].into_iter().map(String::from).collect());
    assert!(uses("plan::resolve", &code("fn a() {}\n#[cfg(all(test, unix))]\npub(crate) mod tests {\n use crate::run::x;\n}\n")).is_empty());
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (x, y) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(x.to_string()).or_default().insert(y.to_string());
    }
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    assert_eq!(layer("plan::resolve"), Some(1));
    assert_eq!(layer("plan::env"), Some(5));
    assert_eq!(layer("linux::unixgrant"), Some(6));
}

/// The longest a function of `sandbox/src` may be (issue 56: none over 150 lines outside
/// tests).
const MAX_FN_LINES: usize = 150;

/// Functions longer than [`MAX_FN_LINES`]: `long: MODULE::NAME`, from each `fn` line to the
/// closing brace at its indentation (test modules and `tests.rs` files skipped).
fn long_functions() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeSet::new();
    for (module, path) in sources(&src) {
        if module.ends_with("::tests") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let end_of_code = lines.iter().position(|l| l.trim_start().starts_with("#[cfg(test)]")).filter(|&i| lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with("mod tests"))).unwrap_or(lines.len());
        for (i, line) in lines[..end_of_code].iter().enumerate() {
            let t = line.trim_start();
            let indent = line.len() - t.len();
            let decl = t.trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ").trim_start_matches("pub ").trim_start_matches("const ").trim_start_matches("unsafe ").trim_start_matches("extern \"C\" ");
            let Some(rest) = decl.strip_prefix("fn ") else { continue };
            if line.trim_end().ends_with(';') {
                continue; // a declaration without a body
            }
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let close = format!("{}}}", " ".repeat(indent));
            let len = lines[i + 1..end_of_code].iter().position(|l| l.starts_with(&close) && l[indent..].trim() == "}").map_or(0, |n| n + 2);
            if len > MAX_FN_LINES {
                out.insert(format!("long: {}::{name}", if module.is_empty() { "crate" } else { &module }));
            }
        }
    }
    out
}

#[test]
fn no_function_grows_past_the_bound_and_the_list_of_long_ones_only_shrinks() {
    let found = long_functions();
    let allowed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/long-functions.allowed");
    let allowed: BTreeSet<String> = std::fs::read_to_string(&allowed_path).unwrap_or_default().lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for f in &found {
            println!("{f}");
        }
    }
    let new: Vec<&String> = found.difference(&allowed).collect();
    let gone: Vec<&String> = allowed.difference(&found).collect();
    assert!(new.is_empty(), "functions over {MAX_FN_LINES} lines (cut them into named steps):\n{}", new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
    assert!(gone.is_empty(), "now within {MAX_FN_LINES} lines, so remove them from {}:\n{}", allowed_path.display(), gone.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
    eprintln!("long functions: {} left (tests/long-functions.allowed)", found.len());
}
