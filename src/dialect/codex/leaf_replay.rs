//! A replay of a rollout at a leaf ([`Replay`]): the chain of files ([`super::lineage`])
//! replayed ([`super::replay`]), with where each record comes from. What `context`, `audit`
//! and `thread` read; reads the chain's files, no lock is taken.

use std::path::Path;

use super::lineage::{Chain, Index, LineageError};
use super::replay::Replayed;

/// A replay of a rollout at a leaf, with the chain it was read from.
#[derive(Debug)]
pub struct Replay {
    /// The chain of files.
    pub chain: Chain,
    /// The replay.
    pub replayed: Replayed,
    /// Where each record of the replay comes from: (link, 0-based line).
    pub at: Vec<(u32, u32)>,
}

impl Replay {
    /// Replays the rollout at `path` at its 0-based line `leaf` (`None`: its last line), the
    /// other files looked for in `index`. Errors: the chain's ([`Chain::resolve`]).
    pub fn at(index: &Index, path: &Path, leaf: Option<usize>) -> Result<Replay, LineageError> {
        let chain = Chain::resolve(index, path, leaf)?;
        let (replayed, at) = chain.replay()?;
        Ok(Replay {
            chain,
            replayed,
            at,
        })
    }

    /// [`Replay::at`] keeping only the history ([`Chain::replay_messages`]): `replayed.fates`
    /// and `at` are empty. What the context document needs ([`Replay::document`]), without
    /// 24 bytes a line of the chain.
    pub fn messages_at(
        index: &Index,
        path: &Path,
        leaf: Option<usize>,
    ) -> Result<Replay, LineageError> {
        let chain = Chain::resolve(index, path, leaf)?;
        let replayed = chain.replay_messages()?;
        Ok(Replay {
            chain,
            replayed,
            at: Vec::new(),
        })
    }
}
