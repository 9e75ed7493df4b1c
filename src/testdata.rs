//! The session files shipped with the project, for unit tests that run over all of them.

use std::path::{Path, PathBuf};

/// Every `.jsonl` file under `examples/` and `tests/data/`, sorted. Panics (a test failure)
/// when a directory cannot be read or there are suspiciously few files.
#[allow(clippy::unwrap_used)]
pub(crate) fn session_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("examples"), root.join("tests/data")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 20, "too few session files: {files:?}");
    files
}

/// rayon's global pool with three threads (unless a test made it first), so that the parallel
/// paths run on any machine; fails when the pool has one thread, rather than letting a test
/// of a parallel path pass on the sequential one.
pub(crate) fn pool_of_several() {
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build_global();
    assert!(
        crate::core::ahead::available(),
        "the parallel paths need a pool of two or more threads, used from outside it"
    );
}
