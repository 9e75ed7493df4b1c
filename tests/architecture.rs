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
