//! `docs/architecture.md` is a true map: every module under `src/` (a file or a folder) is named
//! in it, so a new module cannot arrive without its place in the map.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

/// Module names under `dir`: each `.rs` file's stem (but `mod`) and each folder, recursively.
fn modules(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap()
            .to_owned();
        if path.is_dir() {
            out.push(name);
            modules(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "mod" {
            out.push(name);
        }
    }
}

#[test]
fn every_module_is_on_the_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the map exists");
    let mut names = Vec::new();
    modules(&root.join("src"), &mut names);
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !map.contains(&format!("`{n}`")) && !map.contains(&format!("`{n}/`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name these modules of src/: {missing:?}"
    );
}
