//! `session/tree` paging on any tree shape: following every page's `next` delivers every node
//! exactly once, each page makes progress, and no page holds more than `limit` nodes. Wide
//! nodes (1, 300 and 20,000 children under one node), a 100,000-deep chain and seeded random
//! trees, generated here; the real binary over pipes, every page checked against the schema.
// Helpers fail the test by panicking, like assertions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Daemon, error_of};

/// The largest `limit` the daemon accepts.
const MAX_LIMIT: usize = sessiond::server::handlers::TREE_LIMIT_MAX;

/// A generated session: its file and every entry's parent (`None`: a root), in file order.
struct Generated {
    path: PathBuf,
    parents: Vec<(String, Option<String>)>,
}

impl Generated {
    /// Writes a session whose entry `i` has parent `parent(i)` (an earlier index, or `None`).
    /// Small `custom` entries, so 100,000 of them are a few megabytes.
    fn write(dir: &Path, name: &str, n: usize, parent: impl Fn(usize) -> Option<usize>) -> Self {
        let id = |i: usize| format!("{i:08x}");
        let mut text = String::with_capacity(n * 110);
        text.push_str(r#"{"type":"session","version":3,"id":"4f9c7d0e-0000-4000-8000-0000000000aa","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#);
        text.push('\n');
        let mut parents = Vec::with_capacity(n);
        for i in 0..n {
            let p = parent(i).map(id);
            let parent_json = p.as_ref().map_or("null".to_owned(), |p| format!("\"{p}\""));
            writeln!(
                text,
                r#"{{"type":"custom","id":"{}","parentId":{parent_json},"timestamp":"2025-01-01T00:00:00.000Z","customType":"n{i}"}}"#,
                id(i)
            )
            .unwrap();
            parents.push((id(i), p));
        }
        let path = dir.join(format!("{name}.jsonl"));
        std::fs::write(&path, text).unwrap();
        Generated { path, parents }
    }

    fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 path")
    }

    /// Child ids of each entry, in file order.
    fn children(&self) -> HashMap<&str, Vec<&str>> {
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for (id, parent) in &self.parents {
            children.entry(id).or_default();
            if let Some(p) = parent {
                children.entry(p).or_default().push(id);
            }
        }
        children
    }
}

/// What a whole walk saw.
#[derive(Debug)]
struct Walk {
    pages: usize,
    nodes: usize,
    elapsed: Duration,
}

/// Pages the whole tree from the roots, following every `next`, and checks: each node arrives
/// once, every node arrives, a page holds at most `limit` nodes and at least one when its
/// start has any, `children` lists exactly a node's children, `complete` is `next` empty.
fn walk(d: &mut Daemon, g: &Generated, limit: usize, depth: usize) -> Walk {
    let started = Instant::now();
    let children = g.children();
    let mut seen: HashSet<String> = HashSet::new();
    let mut todo: Vec<Value> = vec![json!({})];
    let mut pages = 0;
    while let Some(start) = todo.pop() {
        let mut params = json!({"path": g.path(), "limit": limit, "depth": depth});
        for (k, v) in start.as_object().expect("cursor") {
            params[k] = v.clone();
        }
        let page = d.call("session/tree", params.clone());
        pages += 1;
        let nodes = page["nodes"].as_array().expect("nodes");
        assert!(nodes.len() <= limit, "{params}: {} nodes", nodes.len());
        let start_is_empty = match start.as_object().expect("cursor").iter().next() {
            Some((k, v)) if k == "childrenOf" => children[v.as_str().unwrap()].is_empty(),
            _ => false,
        };
        assert!(
            !nodes.is_empty() || start_is_empty,
            "{params}: a page without progress"
        );
        for n in nodes {
            let id = n["id"].as_str().expect("id").to_owned();
            let want = &children[id.as_str()];
            assert_eq!(n["childCount"], json!(want.len()), "{id}");
            if let Some(listed) = n.get("children") {
                assert_eq!(listed, &json!(want), "children of {id}");
            }
            assert!(seen.insert(id.clone()), "{id} arrived twice ({params})");
        }
        let next = page["next"].as_array().expect("next");
        assert_eq!(page["complete"], json!(next.is_empty()));
        // Depth-first over the cursors keeps the queue short; any order gives the same set.
        todo.extend(next.iter().rev().cloned());
    }
    assert_eq!(seen.len(), g.parents.len(), "every node arrives");
    Walk {
        pages,
        nodes: seen.len(),
        elapsed: started.elapsed(),
    }
}

fn report(name: &str, w: &Walk) {
    eprintln!(
        "{name}: {} nodes in {} pages, {:.0} ms",
        w.nodes,
        w.pages,
        w.elapsed.as_secs_f64() * 1000.0
    );
}

fn open(d: &mut Daemon, g: &Generated) {
    let open = d.call("session/open", json!({"path": g.path()}));
    assert_eq!(open["entryCount"], json!(g.parents.len()));
}

#[test]
fn wide_nodes_page_through_all_their_children() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    for (children, pages) in [(1, 1), (300, 1), (20_000, 3)] {
        let g = Generated::write(tmp.path(), &format!("star-{children}"), children + 1, |i| {
            (i > 0).then_some(0)
        });
        open(&mut d, &g);
        let w = walk(&mut d, &g, MAX_LIMIT, 64);
        report(&format!("one node with {children} children"), &w);
        assert_eq!(w.pages, pages);
    }
    // The client author's case: a root with 300 children at limit 100 takes four pages (the
    // root and 99 children, 100, 100, 1), where it used to repeat one node forever.
    let g = Generated::write(tmp.path(), "star-300-by-100", 301, |i| (i > 0).then_some(0));
    open(&mut d, &g);
    let w = walk(&mut d, &g, 100, 64);
    assert_eq!(w.pages, 4);
    // 300 roots, as a lenient read of orphans can give: the roots page too.
    let g = Generated::write(tmp.path(), "roots-300", 300, |_| None);
    open(&mut d, &g);
    assert_eq!(walk(&mut d, &g, 100, 64).pages, 3);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn a_100000_deep_chain_pages_at_the_max_limit() {
    const N: usize = 100_000;
    let tmp = tempfile::tempdir().unwrap();
    let g = Generated::write(tmp.path(), "chain", N, |i| i.checked_sub(1));
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    let opened = Instant::now();
    open(&mut d, &g);
    eprintln!(
        "open of a {N}-deep chain: {:.0} ms",
        opened.elapsed().as_secs_f64() * 1000.0
    );
    // A depth as large as the limit: every page is full, ten pages in all.
    let w = walk(&mut d, &g, MAX_LIMIT, MAX_LIMIT);
    report(&format!("a {N}-deep chain"), &w);
    assert_eq!(w.pages, N / MAX_LIMIT);
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn random_trees_page_exactly_once_at_any_limit_and_depth() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    for seed in 1..=2u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        // Runs of one child with forks, some wide nodes, a few extra roots.
        let parents: Vec<Option<usize>> = (0..600usize)
            .map(|i| match (i, rng.u8(..100)) {
                (0, _) => None,
                (_, 0) => None,
                (_, 1..=59) => Some(i - 1),
                (_, 60..=79) => Some(rng.usize(i.saturating_sub(8)..i)),
                _ => Some(rng.usize(..i.min(5))),
            })
            .collect();
        let g = Generated::write(tmp.path(), &format!("random-{seed}"), parents.len(), |i| {
            parents[i]
        });
        open(&mut d, &g);
        for (limit, depth) in [(1, 64), (3, 1), (7, 2), (50, 0), (100, 5), (1000, 64)] {
            let w = walk(&mut d, &g, limit, depth);
            assert!(w.pages >= g.parents.len().div_ceil(limit), "seed {seed}");
        }
    }
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn tree_params_out_of_range_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let g = Generated::write(tmp.path(), "small", 3, |i| i.checked_sub(1));
    let (mut d, _) = Daemon::start(&[tmp.path()]);
    open(&mut d, &g);
    let path = g.path();
    for params in [
        json!({"path": path, "limit": 0}),
        json!({"path": path, "limit": MAX_LIMIT + 1}),
        json!({"path": path, "limit": -1}),
        json!({"path": path, "depth": -1}),
        json!({"path": path, "fromId": "00000000", "after": "00000000"}),
        json!({"path": path, "childrenOf": "00000000", "after": "00000000"}),
    ] {
        let (code, message, _) = error_of(&d.request("session/tree", params.clone()));
        assert_eq!(code, -32602, "{params}: {message}");
    }
    for key in ["fromId", "childrenOf", "after"] {
        let (code, _, data) =
            error_of(&d.request("session/tree", json!({"path": path, key: "deadbeef"})));
        assert_eq!((code, &data["id"]), (-33004, &json!("deadbeef")), "{key}");
    }
    // The limit itself is accepted, and the last child's later siblings are none.
    let page = d.call("session/tree", json!({"path": path, "limit": MAX_LIMIT}));
    assert_eq!(page["nodes"].as_array().map(Vec::len), Some(3));
    let page = d.call("session/tree", json!({"path": path, "after": "00000002"}));
    assert_eq!(
        (&page["nodes"], &page["complete"], &page["next"]),
        (&json!([]), &json!(true), &json!([]))
    );
    let page = d.call(
        "session/tree",
        json!({"path": path, "childrenOf": "00000000", "depth": 0}),
    );
    assert_eq!(page["nodes"][0]["id"], json!("00000001"));
    assert_eq!(page["next"], json!([{"childrenOf": "00000001"}]));
    assert!(page.get("roots").is_none());
    assert_eq!(d.stop(), Some(0));
}
