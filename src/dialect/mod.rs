//! Agent dialects: each agent's session format, read exactly as that agent reads it.
//!
//! A dialect owns everything agent-specific — the line format, the projection (what the model
//! sees at a leaf), explanations, and the writes the format supports. Everything above the
//! dialects (storage, session owners, server, CLI, editors) speaks of entries, trees, leaves and
//! contexts.

pub mod pi;
