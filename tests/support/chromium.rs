//! Headless Chromium for the tests that render a document (Debian's `chromium`, installed by
//! scripts/test.sh; `$SESSIOND_CHROMIUM` overrides). Without it a browser test skips, except
//! under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser, or `None` (after saying so) when it is missing outside CI.
pub fn find() -> Option<PathBuf> {
    super::find_program(
        "SESSIOND_CHROMIUM",
        "chromium",
        "run scripts/test.sh, or apt-get install chromium",
    )
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

/// The DOM of `doc` as the browser built it (`--dump-dom`).
pub fn dom(bin: &Path, doc: &Path) -> String {
    let r = run(bin, &["--dump-dom"], doc);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// Takes a screenshot of `doc` at `window` size (`1200,1600`) into `shot`, which must come out
/// a PNG of some substance.
pub fn screenshot(bin: &Path, doc: &Path, shot: &Path, window: &str) {
    let _ = std::fs::remove_file(shot);
    let r = run(
        bin,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={window}"),
        ],
        doc,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let png = std::fs::read(shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        shot.display()
    );
}
