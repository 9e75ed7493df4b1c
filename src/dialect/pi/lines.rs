//! pi's line format as the storage layer reads it ([`LineFormat`]): line 1 is the `session`
//! header, every later line an entry of the header's version, a second header is ignored (it
//! only takes a version-1 position), and version-1 files are linear with compactions that name
//! their kept entry by position (`firstKeptEntryIndex`), resolved once the lines are read, as
//! pi 1.6.0's `migrateV1ToV2` does on load.

use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::ids::LineSpan;
use crate::core::lines::{Item, LineFormat, corruption, is_blank};
use crate::core::tree::{Effect, NodeIdx, Repair, TreeEntry, tree_entry_fields};
use crate::dialect::pi::Tree;
use crate::dialect::pi::format::{self, Entry, EntryKind, Expect, Header, Line, ProblemKind};

/// pi's format, for the storage layer (a marker type: see [`LineFormat`]).
#[derive(Clone, Copy, Debug)]
pub struct Pi;

/// What pi keeps beside the tree while it is built: for a version-1 file, the lines of the
/// extra `session` lines (each takes a position) and the compactions whose kept entry is still
/// named by position.
#[derive(Debug, Default)]
pub struct PiExt {
    extra_headers: Vec<u32>,
    pending_kept: Vec<NodeIdx>,
}

impl TreeEntry for Entry {
    type Header = Header;
    type Ext = PiExt;

    tree_entry_fields!(id, parent_id, time_ms, span);
    fn effect(&self) -> Effect<'_> {
        match &self.kind {
            EntryKind::Label {
                target_id: Some(target),
                label,
            } => Effect::Label {
                target,
                text: label.as_deref(),
            },
            EntryKind::SessionInfo { name } => Effect::Name(name.as_deref()),
            _ => Effect::None,
        }
    }
    /// Version 1 is linear (pi 1.6.0 `migrateV1ToV2` chains each entry to the one before).
    fn linear(header: &Header) -> bool {
        header.version < 2
    }
    /// pi skips a line that is not JSON and keeps any JSON object as an entry; it finds a
    /// parent by id (the later of two entries owns it) and makes an orphan a root.
    fn lenient_action(repair: Repair) -> &'static str {
        match repair {
            Repair::DuplicateId => "the later entry now owns the id, as in pi",
            Repair::OwnParent => "treated as a root, as pi's getTree does",
            Repair::Cycle => "treated as a root",
            Repair::MissingParent => "treated as a root, as pi does",
            Repair::SkippedNotJson => "line skipped, as pi does",
            Repair::SkippedUnreadable => {
                "line skipped; pi keeps this JSON as an entry, so its answers may differ here"
            }
            Repair::KeptIrregular => "entry kept, as pi keeps it",
        }
    }
}

impl LineFormat for Pi {
    type Entry = Entry;
    type Aside = ExtraHeader;
    type Context = u32;

    const NAME: &'static str = "pi session";

    fn implicit_header() -> Option<Header> {
        None
    }

    fn context(header: &Header) -> u32 {
        header.version
    }

    fn classify(bytes: &[u8], span: LineSpan, version: Option<u32>) -> Item<Pi> {
        if is_blank(bytes) {
            return Item::Blank;
        }
        let expect = match version {
            None => Expect::Header,
            Some(version) => Expect::Entry { version },
        };
        match format::parse_line(bytes, span, expect) {
            Ok(Line::Header(h)) => Item::Header(h),
            Ok(Line::ExtraHeader) => Item::Aside(ExtraHeader { line: span.line }),
            Ok(Line::Entry(mut entry)) => {
                if version.is_some_and(|v| v < 2)
                    && let EntryKind::Compaction {
                        v1_first_kept_index,
                        ..
                    } = &mut entry.kind
                {
                    *v1_first_kept_index =
                        format::v1_first_kept_index(bytes).and_then(|i| u32::try_from(i).ok());
                }
                Item::Entry(entry)
            }
            Ok(Line::Irregular(entry, p)) => {
                let mut c = corruption(p.kind.into(), span, &p.detail);
                c.id = Some(entry.id.clone());
                Item::Irregular(entry, Box::new(c))
            }
            // The first line decides whether this is a pi session at all (pi reads a file whose
            // first line is no session header as no session): text, binary data or a bare JSON
            // value there is not a corrupt session but something else.
            Err(p) if version.is_none() && p.kind != ProblemKind::InvalidHeader => {
                let detail = match p.kind {
                    ProblemKind::MissingHeader => seen_type(bytes),
                    _ => p.detail,
                };
                Item::Problem(corruption(
                    CorruptionKind::MissingHeader,
                    span,
                    &not_a_session(span.line, &detail),
                ))
            }
            Err(p) => Item::Problem(corruption(p.kind.into(), span, &p.detail)),
        }
    }

    fn is_torn(bytes: &[u8], span: LineSpan, version: Option<u32>) -> bool {
        if is_blank(bytes) {
            return false;
        }
        let expect = match version {
            None => Expect::Header,
            Some(version) => Expect::Entry { version },
        };
        matches!(format::parse_line(bytes, span, expect), Err(p) if p.kind == ProblemKind::InvalidJson)
    }

    fn push(tree: &mut Tree, entry: Entry) -> Result<NodeIdx, Corruption> {
        let pending = matches!(
            entry.kind,
            EntryKind::Compaction {
                v1_first_kept_index: Some(_),
                ..
            }
        );
        let node = tree.push(entry)?;
        if pending {
            tree.ext_mut().pending_kept.push(node);
        }
        Ok(node)
    }

    fn aside(tree: &mut Tree, aside: ExtraHeader) {
        if Entry::linear(tree.header()) {
            tree.ext_mut().extra_headers.push(aside.line);
        }
    }

    fn settle(tree: &mut Tree) -> Result<(), Corruption> {
        tree.settle()?;
        resolve_v1_kept(tree);
        Ok(())
    }
}

/// A `type: "session"` line after the header: pi ignores it, but in a version-1 file it takes
/// a position that `firstKeptEntryIndex` counts.
#[derive(Clone, Copy, Debug)]
pub struct ExtraHeader {
    /// Its 1-based line number.
    pub line: u32,
}

/// Resolves the kept entry of each version-1 compaction read so far: its
/// `firstKeptEntryIndex` counts the parsed lines (the header is 0, a second header takes a
/// position too), which pi turns into `firstKeptEntryId` on load.
fn resolve_v1_kept(tree: &mut Tree) {
    if tree.ext().pending_kept.is_empty() {
        return;
    }
    // Position of each parsed line: the header, then entries and extra headers in file order.
    let mut positions: Vec<Option<NodeIdx>> = vec![None];
    let extra = &tree.ext().extra_headers;
    let mut next_extra = extra.iter().peekable();
    for (i, node) in tree.nodes().iter().enumerate() {
        while next_extra
            .next_if(|&&line| line < node.entry.span.line)
            .is_some()
        {
            positions.push(None);
        }
        positions.push(Some(i as NodeIdx));
    }
    let pending = std::mem::take(&mut tree.ext_mut().pending_kept);
    for comp in pending {
        let Some(EntryKind::Compaction {
            v1_first_kept_index: Some(pos),
            ..
        }) = tree.nodes().get(comp as usize).map(|n| &n.entry.kind)
        else {
            continue;
        };
        let kept = positions
            .get(*pos as usize)
            .copied()
            .flatten()
            .map(|n| tree.node(n).entry.id.clone());
        if let (Some(kept), Some(entry)) = (kept, tree.entry_mut(comp))
            && let EntryKind::Compaction {
                first_kept_entry_id,
                ..
            } = &mut entry.kind
        {
            *first_kept_entry_id = Some(kept);
        }
    }
}

/// The message of a first line that is no session header (nor a line of another format
/// sessiond reads: a file's format is told from its first line before pi reads it).
pub fn not_a_session(line: u32, detail: &str) -> String {
    format!(
        "not a session: line {line} is no pi session header, Claude Code transcript line or \
         Codex rollout line ({detail})"
    )
}

/// What a first line that is a JSON object, but no line of a format sessiond reads, has as its
/// `type`: `it is a JSON object with "type": "banana"` (the value as written, cut to 40
/// characters), or `without "type"`.
fn seen_type(bytes: &[u8]) -> String {
    let ty = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v.get("type").map(serde_json::Value::to_string));
    match ty {
        Some(t) if t.chars().count() > 40 => {
            let cut: String = t.chars().take(39).collect();
            format!("it is a JSON object with \"type\": {cut}…")
        }
        Some(t) => format!("it is a JSON object with \"type\": {t}"),
        None => "it is a JSON object without \"type\"".to_owned(),
    }
}
