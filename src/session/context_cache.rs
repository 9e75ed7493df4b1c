//! The projections an open session answered for most recently, so that `session/contextAt`
//! neither walks a long path nor re-renders every message to estimate tokens per request.
//!
//! Holds at most [`CAPACITY`] [`LiveProjection`]s, one per leaf. A request at a leaf that is
//! cached is answered from it; at a leaf just below a cached one (the entries appended since)
//! the cached projection is extended in place; otherwise the session is projected afresh and
//! replaces the least recently used entry. Entries stay correct as the tree grows: a path
//! changes only when the tree relinks an entry it holds ([`Tree::relinks`]: a lenient read
//! meeting a parent named before it, or a later duplicate of an id), which empties the cache;
//! a reload builds a new `Session` and so a new, empty cache. Lives with the owner only.

use crate::core::tree::NodeIdx;
use crate::dialect::pi::Tree;
use crate::dialect::pi::incremental::LiveProjection;

/// Projections kept per session. Each holds its path (4 bytes per entry) and context items,
/// so a few leaves of a 100,000-entry session cost a few MB at most.
pub const CAPACITY: usize = 4;

/// Recent projections of one session, least recently used first.
#[derive(Debug, Default)]
pub struct ContextCache {
    recent: Vec<LiveProjection>,
    /// [`Tree::relinks`] when the cached projections were made.
    relinks: u64,
}

impl ContextCache {
    /// The projection at `leaf`, cached, extended from a cached one above it, or new.
    pub fn get(&mut self, tree: &Tree, leaf: Option<NodeIdx>) -> &mut LiveProjection {
        if self.relinks != tree.relinks() {
            // An entry moved: a cached path may no longer be the path.
            self.recent.clear();
            self.relinks = tree.relinks();
        }
        let hit = self
            .recent
            .iter()
            .rposition(|p| p.leaf() == leaf)
            .or_else(|| {
                let leaf = leaf?;
                self.recent.iter_mut().rposition(|p| p.extend(tree, leaf))
            });
        let live = match hit {
            Some(i) => self.recent.remove(i),
            None => {
                if self.recent.len() == CAPACITY {
                    self.recent.remove(0);
                }
                LiveProjection::new(tree, leaf)
            }
        };
        self.recent.push(live);
        let last = self.recent.len() - 1;
        &mut self.recent[last]
    }
}
