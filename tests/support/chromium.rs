//! Headless Chromium for the tests that render a document (Debian's `chromium`, installed by
//! scripts/test.sh; `$SESSIOND_CHROMIUM` overrides). Without it a browser test skips, except
//! under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser, or `None` (after saying so) when it is missing outside CI.
pub fn find() -> Option<PathBuf> {
    let found = std::env::var_os("SESSIOND_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join("chromium"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium not found: run scripts/test.sh (apt-get install chromium) or set SESSIOND_CHROMIUM"
        );
        eprintln!("skipping: chromium not found (apt-get install chromium)");
    }
    found
}

/// `target/test-artefacts/`, where screenshots are kept.
pub fn artefacts() -> PathBuf {
    let dir = super::repo().join("target/test-artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on `doc` with `args` (no sandbox: tests may run as root).
pub fn run(bin: &Path, args: &[&str], doc: &Path) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(doc)
        .output()
        .expect("run chromium")
}
