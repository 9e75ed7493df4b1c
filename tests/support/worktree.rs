//! A work tree as the rewind tests see it: every regular file by relative path, compared with
//! a snapshot, and `git` run in it with a fixed identity.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Every regular file under `dir` (but `.git`), by relative path.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let ft = e.file_type().unwrap();
            if e.file_name() == ".git" || ft.is_symlink() {
                continue;
            }
            if ft.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A snapshot for a failure message: each file's first 80 characters.
pub fn show(s: &BTreeMap<String, Vec<u8>>) -> String {
    s.iter()
        .map(|(k, v)| {
            let t = String::from_utf8_lossy(v);
            let t: String = t.chars().take(80).collect();
            format!("{k}: {t:?}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fails the test, showing both, unless the work tree under `dir` is `want`.
pub fn assert_tree(dir: &Path, want: &BTreeMap<String, Vec<u8>>, what: &str) {
    let got = snapshot(dir);
    assert!(
        got == *want,
        "{what}: the work tree differs from its snapshot\n--- want\n{}\n--- got\n{}",
        show(want),
        show(&got)
    );
}

/// Runs `git ARGS` in `dir` with a fixed author and committer; fails the test if git fails.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A rewind plan's (`rewind --json`, `session/rewind`) status of each file, by its path relative
/// to the working directory.
pub fn plan_statuses(plan: &Value) -> BTreeMap<String, String> {
    plan["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["relative"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
