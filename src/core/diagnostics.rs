//! Problems found in a session file: the corruption that refuses an open, and the
//! diagnostics a lenient open or a projection reports alongside its result.

use std::fmt;

use serde::Serialize;

use crate::core::ids::EntryId;

/// Stable names for every way a session file can be corrupt (SPEC §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CorruptionKind {
    /// The file has no session header yet: it is empty, or its only line is unfinished.
    EmptyFile,
    /// Not a pi session: the first line is no `type: "session"` header (an entry, text, binary
    /// data).
    MissingHeader,
    /// The header lacks a string `id` or has an unusable `version`.
    InvalidHeader,
    /// A line that is not valid JSON (and is not a torn tail).
    InvalidJson,
    /// A line that is JSON but not an object.
    NotAnObject,
    /// An object without a string `id`/`type`, or with a `parentId` that is not a string or null.
    InvalidEntry,
    /// A second entry with an id already used.
    DuplicateId,
    /// A `parentId` that names no entry in the file.
    MissingParent,
    /// A chain of parents that loops back on itself (pi would walk it forever).
    ParentCycle,
    /// The file is of no format sessiond reads (a Codex rollout, another program's JSONL): the
    /// message says what its first line is.
    UnknownFormat,
}

impl CorruptionKind {
    /// Whether `salvage` can make a session of such a file: only when it has a readable
    /// header (a file without one is no pi session, and salvage has nothing to start from).
    pub fn salvageable(self) -> bool {
        !matches!(
            self,
            CorruptionKind::EmptyFile
                | CorruptionKind::MissingHeader
                | CorruptionKind::InvalidHeader
                | CorruptionKind::UnknownFormat
        )
    }

    /// The stable wire name, e.g. `"invalidJson"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CorruptionKind::EmptyFile => "emptyFile",
            CorruptionKind::MissingHeader => "missingHeader",
            CorruptionKind::InvalidHeader => "invalidHeader",
            CorruptionKind::InvalidJson => "invalidJson",
            CorruptionKind::NotAnObject => "notAnObject",
            CorruptionKind::InvalidEntry => "invalidEntry",
            CorruptionKind::DuplicateId => "duplicateId",
            CorruptionKind::MissingParent => "missingParent",
            CorruptionKind::ParentCycle => "parentCycle",
            CorruptionKind::UnknownFormat => "unknownFormat",
        }
    }
}

impl From<ProblemKind> for CorruptionKind {
    fn from(k: ProblemKind) -> Self {
        match k {
            ProblemKind::InvalidJson => CorruptionKind::InvalidJson,
            ProblemKind::NotAnObject => CorruptionKind::NotAnObject,
            ProblemKind::InvalidEntry => CorruptionKind::InvalidEntry,
            ProblemKind::InvalidHeader => CorruptionKind::InvalidHeader,
            ProblemKind::MissingHeader => CorruptionKind::MissingHeader,
        }
    }
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One corrupt spot: what, where (1-based line, byte offset of the line start), which id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Corruption {
    /// What is wrong.
    pub kind: CorruptionKind,
    /// 1-based line number.
    pub line: u32,
    /// Byte offset of the line start.
    pub offset: u64,
    /// The entry's id, when the line has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<EntryId>,
    /// Human-readable detail (the JSON error, the missing parent id).
    pub message: String,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {} (byte {}): {}",
            self.line, self.offset, self.kind
        )?;
        if let Some(id) = &self.id {
            write!(f, ", entry {id}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl serde::Serialize for EntryId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a corrupt spot refers to besides its own line, as fields a client can use without
/// reading the message. Which fields are set depends on the kind; none for most kinds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Related {
    /// `missingParent`: the `parentId` that names no entry in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<EntryId>,
    /// `duplicateId`: 1-based line of the earlier entry with the same id, which the later one
    /// (the corruption's own line) shadows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed_line: Option<u32>,
    /// `duplicateId`: byte offset of that earlier line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed_offset: Option<u64>,
}

/// A non-fatal finding reported with a result. On the wire a `corrupt` diagnostic is
/// `{kind: "corrupt", corruption: {kind, line, offset, id?, message, parentId?, shadowedLine?,
/// shadowedOffset?}, action}`: the [`Related`] fields sit in the corruption object they describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// A corrupt spot that a lenient (`allowCorrupt`) open skipped or repaired.
    Corrupt {
        /// The corrupt spot.
        corruption: Corruption,
        /// What it refers to besides its own line (the missing parent, the shadowed line).
        related: Related,
        /// What the lenient read did about it (line skipped, entry made a root, ...), in the
        /// words of the dialect, which says what its agent does there
        /// ([`crate::core::tree::TreeEntry::lenient_action`]).
        action: &'static str,
    },
    /// A tool result in the context whose `toolCallId` matches no earlier tool call in the context.
    OrphanToolResult {
        /// The tool result entry.
        entry_id: EntryId,
        /// Its `toolCallId`.
        tool_call_id: String,
    },
    /// A tool call in the context with no tool result after it in the context.
    MissingToolResult {
        /// The assistant entry holding the call.
        entry_id: EntryId,
        /// The call's `id`.
        tool_call_id: String,
    },
}

/// One sentence for a human (the CLI's human output); the JSON form is the [`Serialize`] one.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The message already names what `related` holds (the parent, the shadowed line).
            Diagnostic::Corrupt {
                corruption, action, ..
            } => write!(f, "corrupt {corruption}; {action}"),
            Diagnostic::OrphanToolResult {
                entry_id,
                tool_call_id,
            } => write!(
                f,
                "tool result {entry_id} answers tool call {tool_call_id}, which is not before it in the context"
            ),
            Diagnostic::MissingToolResult {
                entry_id,
                tool_call_id,
            } => write!(
                f,
                "tool call {tool_call_id} (entry {entry_id}) has no result after it in the context"
            ),
        }
    }
}

impl Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The corruption with its related fields flattened in.
        #[derive(Serialize)]
        struct CorruptionView<'a> {
            #[serde(flatten)]
            corruption: &'a Corruption,
            #[serde(flatten)]
            related: &'a Related,
        }
        #[derive(Serialize)]
        #[serde(tag = "kind", rename_all = "camelCase")]
        enum View<'a> {
            Corrupt {
                corruption: CorruptionView<'a>,
                action: &'a str,
            },
            #[serde(rename_all = "camelCase")]
            OrphanToolResult {
                entry_id: &'a EntryId,
                tool_call_id: &'a str,
            },
            #[serde(rename_all = "camelCase")]
            MissingToolResult {
                entry_id: &'a EntryId,
                tool_call_id: &'a str,
            },
        }
        let view = match self {
            Diagnostic::Corrupt {
                corruption,
                related,
                action,
            } => View::Corrupt {
                corruption: CorruptionView {
                    corruption,
                    related,
                },
                action,
            },
            Diagnostic::OrphanToolResult {
                entry_id,
                tool_call_id,
            } => View::OrphanToolResult {
                entry_id,
                tool_call_id,
            },
            Diagnostic::MissingToolResult {
                entry_id,
                tool_call_id,
            } => View::MissingToolResult {
                entry_id,
                tool_call_id,
            },
        };
        view.serialize(s)
    }
}

/// Why a line could not be read as an entry. `kind` is a stable machine name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    /// Stable machine name of the problem.
    pub kind: ProblemKind,
    /// Human-readable detail (the JSON error, the missing field); no file or line.
    pub detail: String,
}

/// Stable names of the line-level problems (the file-level ones are [`CorruptionKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// Not valid JSON.
    InvalidJson,
    /// Valid JSON but not an object.
    NotAnObject,
    /// An object that is not a well-formed entry (no string `id` or `type`, a `parentId` that
    /// is neither a string nor null, a message entry without a `message` object).
    InvalidEntry,
    /// Line 1 is `type: "session"` but lacks a string `id` or has a bad `version`.
    InvalidHeader,
    /// Line 1 is not a `type: "session"` header.
    MissingHeader,
}
