//! The protocol as `protocol/README.md` states it, where a client author found it untrue or
//! unsaid: `initialize` with only `initializationOptions`, roots listed once, the errors of
//! the lifecycle, fork counts that `session/open` of the new file confirms, previews within
//! their length. The real binary over pipes.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::Daemon;

fn roots_of(init: &Value) -> Value {
    init["result"]["capabilities"]["experimental"]["sessiond"]["roots"].clone()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_same_root_given_twice_is_listed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(&root, tmp.path().join("alias")).unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut d = Daemon::spawn(&[&root, &other]);
    let init = d.request(
        "initialize",
        json!({"capabilities": {}, "initializationOptions": {"roots": [
            root, format!("{}/", root.display()), tmp.path().join("alias"),
            tmp.path().join("other/../sessions"),
        ]}}),
    );
    assert_eq!(
        roots_of(&init),
        json!([canonical(&root), canonical(&other)]),
        "initializationOptions.roots first, then --root, each once"
    );
    d.notify("initialized", json!({}));
    assert_eq!(d.stop(), Some(0));
}
