//! `docs/architecture.md` is a true map: every module under `src/` (a file or a folder) is named
//! in it, in the place where it lives, so a new module cannot arrive without its place in the map;
//! and `docs/testing.md` names every integration test file.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

/// Every module under `dir`, as the path of names from `src/` (`["dialect", "pi", "fork"]`):
/// each `.rs` file's stem (but `mod`, `lib` and `main` are `src/`'s own files, kept) and each
/// folder, recursively.
fn modules(dir: &Path, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap()
            .to_owned();
        let mut at = prefix.to_vec();
        at.push(name.clone());
        if path.is_dir() {
            out.push(at.clone());
            modules(&path, &at, out);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "mod" {
            out.push(at);
        }
    }
}

/// The bullets of the map's "Every module" section, by the folder each one is for: the text
/// between the first backticks (`dialect/pi/`), or `` for the "Top level" bullet.
fn bullets(map: &str) -> Vec<(String, String)> {
    let section = map
        .split("\n## Every module\n")
        .nth(1)
        .expect("an \"Every module\" section")
        .split("\n## ")
        .next()
        .unwrap();
    let mut out: Vec<(String, String)> = Vec::new();
    for line in section.lines() {
        if let Some(rest) = line.strip_prefix("* ") {
            let key = if rest.starts_with("Top level") {
                String::new()
            } else {
                rest.split('`')
                    .nth(1)
                    .expect("a bullet names its folder")
                    .to_owned()
            };
            out.push((key, rest.to_owned()));
        } else if let Some((_, text)) = out.last_mut() {
            text.push('\n');
            text.push_str(line);
        }
    }
    out
}

/// The modules that are not named where they live: in the bullet of the nearest folder above
/// them that has one (`src/`'s own: "Top level"), which also names the folders in between.
fn misplaced(map: &str, modules: &[Vec<String>]) -> Vec<String> {
    let bullets = bullets(map);
    let bullet = |folder: &str| bullets.iter().find(|(k, _)| k == folder).map(|(_, t)| t);
    let mut missing = Vec::new();
    for path in modules {
        let folder = format!("{}/", path.join("/"));
        if bullet(&folder).is_some() {
            continue; // a folder with a bullet of its own
        }
        // The nearest enclosing folder with a bullet.
        let (depth, text) = (0..path.len())
            .rev()
            .find_map(|d| {
                let above: String = path[..d].iter().map(|p| format!("{p}/")).collect();
                bullet(&above).map(|t| (d, t))
            })
            .expect("a Top level bullet");
        // A folder is named `name/`, a file `name`.
        let names_it = |name: &str, folder: bool| {
            text.contains(&format!("`{name}/`")) || (!folder && text.contains(&format!("`{name}`")))
        };
        let last = path.len() - 1;
        let between_ok = (depth..last).all(|i| names_it(&path[i], true));
        let is_folder = modules
            .iter()
            .any(|m| m.len() > path.len() && m[..path.len()] == path[..]);
        if !between_ok || !names_it(&path[last], is_folder) {
            missing.push(path.join("/"));
        }
    }
    missing
}

#[test]
fn every_module_is_on_the_map_where_it_lives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the map exists");
    let mut names = Vec::new();
    modules(&root.join("src"), &[], &mut names);
    let missing = misplaced(&map, &names);
    assert!(
        missing.is_empty(),
        "docs/architecture.md's \"Every module\" list does not name these modules of src/ in \
         the bullet of their folder: {missing:?}"
    );
}

/// The check finds a module named only elsewhere in the map, or in another folder's bullet.
#[test]
fn a_module_named_in_the_wrong_place_is_missing() {
    let map = "# Map\n\n| layer | `pi` | `gamma` |\n\n## Every module\n\n* `a/`: `alpha`, `sub/` \
               (`beta`).\n* `b/`: `gamma`.\n* Top level: `main`.\n";
    let path = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
    let modules = [
        path("a"),
        path("a/alpha"),
        path("a/sub"),
        path("a/sub/beta"),
        path("a/gamma"),
        path("a/pi"),
        path("b"),
        path("main"),
        path("c"),
    ];
    assert_eq!(misplaced(map, &modules), ["a/gamma", "a/pi", "c"]);
}

/// `docs/testing.md` says what each integration test file covers: every `tests/*.rs` is named
/// there as `tests/NAME.rs`.
#[test]
fn every_test_file_is_in_the_testing_notes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let notes = std::fs::read_to_string(root.join("docs/testing.md")).expect("docs/testing.md");
    let mut missing: Vec<String> = std::fs::read_dir(root.join("tests"))
        .expect("tests/ is readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .filter(|name| !notes.contains(&format!("`tests/{name}`")))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/testing.md's \"What each file covers\" does not name: {missing:?}"
    );
}

/// A module's path of names from `src/` (`["cli", "open"]`); the crate root (`lib.rs`) is `[]`.
type Module = Vec<String>;

/// Every `.rs` file under `dir` with its module path: `a/b.rs` and `a/b/mod.rs` are `a::b`,
/// `lib.rs` the root. `main.rs` (the binary, importing the library by its name) is left out.
fn sources(dir: &Path, prefix: &[String], out: &mut Vec<(Module, String)>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap()
            .to_owned();
        let mut at = prefix.to_vec();
        if path.is_dir() {
            at.push(name);
            sources(&path, &at, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            match (prefix.is_empty(), name.as_str()) {
                (true, "main") => continue,
                (true, "lib") | (_, "mod") => {}
                _ => at.push(name),
            }
            let text = std::fs::read_to_string(&path).expect("a source file is readable");
            out.push((at, text));
        }
    }
}

/// `text` as tokens: identifiers (keywords too), `::`, and single characters of punctuation;
/// comments, string and character literals are dropped (a string becomes `""`), lifetimes
/// lose their quote.
fn tokens(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r'))
            && !(i > 0 && ident(c[i - 1]))
            && {
                let mut k = i + if at(i) == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // A raw string: r"…", r#"…"#, br"…".
            i += if at(i) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(i) == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#')) {
                i += 1;
            }
            i += 1 + hashes;
            out.push("\"\"".to_owned());
        } else if at(i) == '"' || (at(i) == 'b' && at(i + 1) == '"' && !(i > 0 && ident(c[i - 1])))
        {
            i += if at(i) == 'b' { 2 } else { 1 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push("\"\"".to_owned());
        } else if at(i) == '\'' {
            if at(i + 1) == '\\' {
                // An escaped character: '\n', '\'', '\u{..}'.
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3; // 'x'
            } else {
                i += 1; // a lifetime's quote
            }
        } else if ident(at(i)) {
            let start = i;
            while i < c.len() && ident(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if at(i) == ':' && at(i + 1) == ':' {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !at(i).is_whitespace() {
                out.push(at(i).to_string());
            }
            i += 1;
        }
    }
    out
}

/// `#[cfg(test)]`, as tokens.
const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];

/// `toks` without the items marked `#[cfg(test)]` (through their `;` or closing `}`), and the
/// names of the module files declared so (`#[cfg(test)] mod tests;`).
fn without_tests(toks: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut kept, mut test_mods) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < toks.len() {
        if toks.len() - i < CFG_TEST.len() || toks[i..i + CFG_TEST.len()] != CFG_TEST {
            kept.push(toks[i].clone());
            i += 1;
            continue;
        }
        i += CFG_TEST.len();
        let item = i;
        let mut depth = 0usize;
        while i < toks.len() {
            let t = toks[i].as_str();
            i += 1;
            match t {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" => depth -= 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ";" if depth == 0 => {
                    let decl = &toks[item..i];
                    if decl.len() >= 3 && decl[decl.len() - 3] == "mod" {
                        test_mods.push(decl[decl.len() - 2].clone());
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    (kept, test_mods)
}

/// The paths a `use` tree starting at `toks[i]` names, each with the name it binds (`None` for
/// a glob), appended to `out` under `prefix`; returns the index after the tree.
fn use_tree(
    toks: &[String],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix.to_vec();
    if toks[i] == "::" {
        i += 1;
    }
    loop {
        match toks[i].as_str() {
            "{" => {
                i += 1;
                while toks[i] != "}" {
                    i = use_tree(toks, i, &path, out);
                    if toks[i] == "," {
                        i += 1;
                    }
                }
                return i + 1;
            }
            "*" => {
                out.push((path, None));
                return i + 1;
            }
            name => {
                path.push(name.to_owned());
                i += 1;
                if toks[i] == "::" {
                    i += 1;
                    continue;
                }
                if path.last().is_some_and(|l| l == "self") {
                    path.pop();
                }
                let mut binds = path.last().cloned();
                if toks[i] == "as" {
                    binds = Some(toks[i + 1].clone());
                    i += 2;
                }
                out.push((path, binds));
                return i;
            }
        }
    }
}

/// The graph of module imports of the files `sources`: for each module, the modules it names,
/// each with the first path that names it. See [`no_import_circles`] for what is counted.
fn import_graph(
    sources: &[(Module, String)],
) -> std::collections::BTreeMap<Module, std::collections::BTreeMap<Module, String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut files = BTreeMap::new();
    let mut test_only = Vec::new();
    for (module, text) in sources {
        let (toks, tests) = without_tests(&tokens(text));
        test_only.extend(tests.into_iter().map(|t| {
            let mut m = module.clone();
            m.push(t);
            m
        }));
        files.insert(module.clone(), toks);
    }
    files.retain(|m, _| !test_only.iter().any(|t| m.starts_with(t)));
    let modules: BTreeSet<Module> = files.keys().cloned().collect();

    // The module a path names: the deepest module file along it, from where it starts.
    let resolve = |scope: &[String],
                   binds: &BTreeMap<String, Option<Module>>,
                   path: &[String]|
     -> Option<Module> {
        let (mut at, rest): (Module, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "super" | "self" => {
                let mut at = scope.to_vec();
                let mut k = 0;
                while k < path.len() && (path[k] == "super" || path[k] == "self") {
                    if path[k] == "super" {
                        at.pop();
                    }
                    k += 1;
                }
                (at, &path[k..])
            }
            first => match binds.get(first) {
                Some(Some(m)) => (m.clone(), &path[1..]),
                Some(None) => return None,
                None => {
                    let mut child = scope.to_vec();
                    child.push(first.to_owned());
                    if !modules.contains(&child) {
                        return None;
                    }
                    (scope.to_vec(), path)
                }
            },
        };
        for name in rest {
            at.push(name.clone());
            if !modules.contains(&at) {
                at.pop();
                break;
            }
        }
        // Inside an inline module: the file's module.
        while !modules.contains(&at) {
            at.pop();
        }
        Some(at)
    };

    let mut graph = BTreeMap::new();
    for (module, toks) in &files {
        // Pass 1: `use` declarations, in their inline module's scope; the rest of the tokens.
        let mut uses = Vec::new();
        let mut rest: Vec<(Module, &str)> = Vec::new();
        let mut scope = module.clone();
        let mut inline: Vec<usize> = Vec::new(); // brace depth each inline module opened at
        let mut depth = 0usize;
        let mut i = 0;
        while i < toks.len() {
            let t = toks[i].as_str();
            if t == "use" && (i == 0 || toks[i - 1] != "::") {
                let mut found = Vec::new();
                i = use_tree(toks, i + 1, &[], &mut found);
                uses.extend(found.into_iter().map(|(p, b)| (scope.clone(), p, b)));
                continue;
            }
            match t {
                "mod" if toks.get(i + 2).is_some_and(|b| b == "{") => {
                    scope.push(toks[i + 1].clone());
                    inline.push(depth);
                    depth += 1;
                    i += 3;
                    continue;
                }
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if inline.last() == Some(&depth) {
                        inline.pop();
                        scope.pop();
                    }
                }
                _ => {}
            }
            rest.push((scope.clone(), t));
            i += 1;
        }
        let mut edges: BTreeMap<Module, String> = BTreeMap::new();
        let mut binds: BTreeMap<String, Option<Module>> = BTreeMap::new();
        for (scope, path, bound) in &uses {
            let to = resolve(scope, &binds, path);
            if let Some(to) = &to {
                edges
                    .entry(to.clone())
                    .or_insert_with(|| format!("use {}", path.join("::")));
            }
            if let Some(name) = bound.as_ref().filter(|n| *n != "_") {
                // A name for a module when the whole path is one.
                let module = to.filter(|m| m.last() == path.last() && !path.is_empty());
                binds.insert(name.clone(), module);
            }
        }
        // Pass 2: every other path `a::b::c` that starts at a module.
        let is_name = |t: &str| t.starts_with(|c: char| c.is_alphabetic() || c == '_');
        let mut i = 0;
        while i < rest.len() {
            let (scope, t) = &rest[i];
            let starts = is_name(t)
                && rest.get(i + 1).is_some_and(|n| n.1 == "::")
                && (i == 0 || (rest[i - 1].1 != "::" && rest[i - 1].1 != "$"));
            if !starts {
                i += 1;
                continue;
            }
            let mut path = vec![(*t).to_owned()];
            let mut j = i + 1;
            while j + 1 < rest.len() && rest[j].1 == "::" && is_name(rest[j + 1].1) {
                path.push(rest[j + 1].1.to_owned());
                j += 2;
            }
            if let Some(to) = resolve(scope, &binds, &path) {
                edges.entry(to).or_insert_with(|| path.join("::"));
            }
            i = j;
        }
        edges.remove(module);
        graph.insert(module.clone(), edges);
    }
    graph
}

/// The circles of `graph` (its strongly connected components of more than one module) after
/// the edges between a folder module and the files directly in it are left out, each named
/// by its modules and the imports that tie them.
fn circles(
    graph: &std::collections::BTreeMap<Module, std::collections::BTreeMap<Module, String>>,
) -> Vec<String> {
    let parent_child = |a: &Module, b: &Module| {
        (a.len() + 1 == b.len() && b.starts_with(a)) || (b.len() + 1 == a.len() && a.starts_with(b))
    };
    let nodes: Vec<&Module> = graph.keys().collect();
    let index = |m: &Module| nodes.iter().position(|n| *n == m);
    let next: Vec<Vec<usize>> = nodes
        .iter()
        .map(|a| {
            graph[*a]
                .keys()
                .filter(|b| !parent_child(a, b))
                .filter_map(index)
                .collect()
        })
        .collect();
    // Tarjan's strongly connected components.
    struct State {
        order: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        count: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], s: &mut State) {
        s.order[v] = Some(s.count);
        s.low[v] = s.count;
        s.count += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &next[v] {
            match s.order[w] {
                None => {
                    visit(w, next, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(o) if s.on_stack[w] => s.low[v] = s.low[v].min(o),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.order[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.found.push(component);
        }
    }
    let n = nodes.len();
    let mut s = State {
        order: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        count: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if s.order[v].is_none() {
            visit(v, &next, &mut s);
        }
    }
    let name = |m: &Module| {
        if m.is_empty() {
            "crate".to_owned()
        } else {
            m.join("::")
        }
    };
    let mut out = Vec::new();
    for mut component in s.found.into_iter().filter(|c| c.len() > 1) {
        component.sort_unstable();
        let names: Vec<String> = component.iter().map(|&v| name(nodes[v])).collect();
        let mut text = vec![names.join(" ↔ ")];
        for &v in &component {
            for &w in &next[v] {
                if component.contains(&w) {
                    let how = &graph[nodes[v]][nodes[w]];
                    text.push(format!("  {} → {} ({how})", name(nodes[v]), name(nodes[w])));
                }
            }
        }
        out.push(text.join("\n"));
    }
    out
}

/// No import circles between modules. Every module file is a node (a folder's `mod.rs` and
/// each file in the folder are separate nodes); an edge is every module a file names, from its
/// `use` declarations and from paths in its code (`crate::…`, `super::…`, `self::…`, a name
/// that a `use` bound to a module, a child module's name), each resolved to the deepest module
/// file it reaches. Comments, strings, `#[cfg(test)]` items and test-only module files are left
/// out: tests may reach across. The edges between a folder's `mod.rs` and the files directly
/// in it are not counted: a folder module declares its files, re-exports and dispatches to
/// them, and they use its shared types (`cli` and its subcommands, `dialect::pi`, `storage::writer`,
/// `archive`…) — idiomatic, and everywhere. Every other edge counts, a grandparent's too.
#[test]
fn no_import_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &[], &mut files);
    let graph = import_graph(&files);
    // The check sees imports at all: the CLI's modules import the views.
    assert!(
        graph[&vec!["cli".to_owned(), "graph".to_owned()]]
            .contains_key(&vec!["view".to_owned(), "graph".to_owned()])
    );
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "modules of src/ import each other in a circle (restructure, e.g. move what both \
         need into a module below them):\n{}",
        found.join("\n")
    );
}

/// The check finds a circle through `super::`, a bound name and a `crate::` path in code, and
/// ignores comments, strings, tests and a folder module's edges to its own files.
#[test]
fn a_circle_is_found_and_named() {
    let file = |m: &str, text: &str| {
        let module = if m.is_empty() {
            Vec::new()
        } else {
            m.split("::").map(str::to_owned).collect()
        };
        (module, text.to_owned())
    };
    let files = [
        file("", "pub mod a;\npub mod z;"),
        file("a", "pub mod b; pub mod c; pub mod d; pub struct S;"),
        file(
            "a::b",
            "use super::c;\nfn f() { c::g(); let _ = super::S; }",
        ),
        file(
            "a::c",
            "// crate::a::d::h()\nfn g() { let s = \"crate::a::d\"; crate::a::d::h(); }",
        ),
        file("a::d", "use crate::a::{self, b};\nfn h() { b::f(); }"),
        file(
            "z",
            "fn y() {}\n#[cfg(test)]\nmod tests { use crate::a::b; }\n#[cfg(test)]\nmod t;",
        ),
        file("z::t", "use crate::z;"),
    ];
    let graph = import_graph(&files);
    assert!(graph[&vec!["z".to_owned()]].is_empty());
    assert!(!graph.contains_key(&vec!["z".to_owned(), "t".to_owned()]));
    assert_eq!(
        circles(&graph),
        [
            "a::b ↔ a::c ↔ a::d\n  a::b → a::c (use super::c)\n  a::c → a::d (crate::a::d::h)\n  \
          a::d → a::b (use crate::a::b)"
        ]
    );
}
