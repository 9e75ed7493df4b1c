//! What both front doors print: the documents the CLI writes and the daemon returns — the
//! context document, the result shapes (camelCase JSON) and their conversion from the dialects'
//! values, the branch graph (text and SVG) and the export (Markdown, HTML). Built once, below
//! both the CLI and the server; neither front door builds these on its own.

pub mod compare;
pub mod context_json;
pub mod convert;
pub mod export;
pub mod graph;
pub mod transcript;
pub mod tree;
pub mod wire;
