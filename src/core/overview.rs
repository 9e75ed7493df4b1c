//! What a session picker shows of one session, as its dialect reads it from the tree and the
//! lines: its name, working directory, creation time, first prompt, message count, the leaf a
//! read without one uses and the context size there. Each dialect fills it by its agent's rules
//! (`dialect::pi::overview`, `dialect::claude::overview`); the listing (`crate::listing`) adds
//! the file's facts. Pure: a plain value.

use serde_json::Value;

use crate::core::tree::NodeIdx;

/// One session's overview (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overview {
    /// The session's id as the agent names it.
    pub id: String,
    /// The working directory the agent ran in, when the file says.
    pub cwd: Option<String>,
    /// When the session was created, as the file writes it (`null` when it does not).
    pub created: Value,
    /// The name the session was given (by the user, or by the agent), when it has one.
    pub name: Option<String>,
    /// The first prompt, as the agent's own session picker finds it, on one line of at most
    /// [`crate::core::preview::PREVIEW_CHARS`] code points.
    pub first_message: Option<String>,
    /// Message entries on every branch, as the agent stores them.
    pub message_count: usize,
    /// The leaf a read without one uses (the one the agent continues from).
    pub default_leaf: Option<NodeIdx>,
    /// The context size at the default leaf, in tokens, as the agent counts it; `None` when it
    /// cannot say.
    pub tokens: Option<u64>,
}
