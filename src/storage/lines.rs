//! The one way lines of a session file become entries of its tree. The open-time reader
//! ([`super::reader`]), the session owner's live tail and the writer's catch-up under the lock
//! ([`super::writer`]) all apply lines through this module, so a line means the same thing
//! whoever reads it.
//!
//! The policy (SPEC §3 and §5):
//!
//! * A line ends at `\n`. A `\r` before it (a CRLF file) is JSON whitespace: it belongs to the
//!   line's span and changes nothing else, whichever ending each line has.
//! * A line of whitespace only is skipped, as the agents skip it.
//! * What a line is, is its dialect's to say ([`LineFormat::classify`]): pi's first other line
//!   must be the session header and every later one is read as an entry of its version; a
//!   Claude Code transcript has no header line and every line is an entry or bookkeeping.
//! * A complete line that cannot be read (bad JSON, not an object, no usable id, a duplicate
//!   id, a missing parent, a cycle) is corruption. Strict mode refuses it; lenient mode notes it
//!   and skips it the way pi does (see [`Mode`]).
//! * The unterminated last line is applied when it reads as a line (pi's reader splits on `\n`
//!   and takes it). When it is not valid JSON it is a torn tail: a writer is mid-line or was
//!   interrupted, so it is left unapplied, reported, and read again from its start next time.
//! * An applied unterminated line is *open*: bytes that arrive later up to the next `\n` belong
//!   to it. Whitespace there (its newline, or `\r\n`) closes it; anything else means the line
//!   was still being written when it was read, and is corruption at its own line.
//!
//! Where a read stands is one [`Position`]; where it can leave a half-applied batch (the live
//! tail and the catch-up, which must keep the last good state) it applies the longest prefix of
//! the batch that the tree accepts whole ([`apply_batch`]). The open-time reader streams instead
//! (an open that fails leaves nothing behind).

use crate::core::diagnostics::{Corruption, CorruptionKind};
use crate::core::ids::LineSpan;
use crate::core::lines::{Item, LineFormat, corruption, is_blank};
use crate::core::tree::{Mode, NodeIdx, Tree, TreeEntry};

/// How far a session file has been applied to its tree.
///
/// Every line that ends before `offset` (bytes from the start of the file) is in the tree or
/// was judged (skipped blank, ignored header, lenient corruption). Reading resumes at `offset`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Bytes of the file applied.
    pub offset: u64,
    /// The 1-based number of the last line applied (0 before the first line).
    pub line: u32,
    /// The last applied line has no `\n` yet: the bytes up to the next `\n` belong to it.
    pub open: bool,
}

impl Position {
    /// The position just past a complete line (its `\n` included).
    pub(crate) fn after(span: LineSpan) -> Self {
        Position {
            offset: span.offset + u64::from(span.len) + 1,
            line: span.line,
            open: false,
        }
    }

    /// The position at the end of an applied unterminated line.
    pub(crate) fn after_open(span: LineSpan) -> Self {
        Position {
            offset: span.offset + u64::from(span.len),
            line: span.line,
            open: true,
        }
    }

    /// A splitter that reads on from here. After an open line, the bytes up to the next `\n`
    /// are numbered as that line, so its newline reads as a blank line and is skipped.
    pub fn splitter(self) -> LineSplitter {
        LineSplitter::new(self.offset, self.line.saturating_sub(u32::from(self.open)))
    }
}

/// An unparsable final line without a newline, left out of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based line number.
    pub line: u32,
    /// Byte offset where the torn bytes start.
    pub offset: u64,
    /// Number of torn bytes.
    pub len: u64,
}

/// Splits a byte stream into lines, tracking 1-based line numbers and byte offsets.
/// Keeps an unterminated last line pending until its newline arrives or the stream ends.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    /// Offset of the first pending byte (= end of the last complete line).
    offset: u64,
    /// Number of complete lines seen.
    line: u32,
}

impl LineSplitter {
    /// A splitter that resumes after `line` complete lines ending at byte `offset`.
    pub fn new(offset: u64, line: u32) -> Self {
        LineSplitter {
            pending: Vec::new(),
            offset,
            line,
        }
    }

    /// Feeds bytes; calls `on_line(bytes, span)` for each complete line (without its `\n`).
    /// Stops at the first error `on_line` returns.
    pub fn feed<E>(
        &mut self,
        mut chunk: &[u8],
        mut on_line: impl FnMut(&[u8], LineSpan) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..nl], &chunk[nl + 1..]);
            let line = if self.pending.is_empty() {
                head
            } else {
                self.pending.extend_from_slice(head);
                &self.pending[..]
            };
            let span = LineSpan {
                line: self.line + 1,
                offset: self.offset,
                len: u32::try_from(line.len()).unwrap_or(u32::MAX),
            };
            let len = line.len() as u64;
            let result = on_line(line, span);
            self.pending.clear();
            self.line += 1;
            self.offset += len + 1;
            result?;
            chunk = rest;
        }
        self.pending.extend_from_slice(chunk);
        Ok(())
    }

    /// The bytes fed after the last complete line, and the position they start at.
    pub fn into_parts(self) -> (Vec<u8>, Position) {
        let at = Position {
            offset: self.offset,
            line: self.line,
            open: false,
        };
        (self.pending, at)
    }

    /// Ends the stream: the unterminated final line, if there is one.
    pub fn finish(self) -> Option<(Vec<u8>, LineSpan)> {
        if self.pending.is_empty() {
            return None;
        }
        let span = LineSpan {
            line: self.line + 1,
            offset: self.offset,
            len: u32::try_from(self.pending.len()).unwrap_or(u32::MAX),
        };
        Some((self.pending, span))
    }
}

/// The result of applying bytes read after a [`Position`].
#[derive(Debug)]
pub struct Applied {
    /// The nodes added, in file order.
    pub added: std::ops::Range<NodeIdx>,
    /// Where reading stands now: after the last line applied.
    pub position: Position,
    /// The unterminated last line, when it is not valid JSON (left unapplied).
    pub torn_tail: Option<TornTail>,
    /// Strict mode: the first line the tree refused. Nothing from it on was applied; the lines
    /// before it were.
    pub corruption: Option<Corruption>,
}

/// Applies `bytes`, read from the file at `from.offset` up to what is the end of the file for
/// this read, to `tree`. Complete lines and an unterminated last line follow the module's
/// policy. In strict mode the longest prefix of lines the tree accepts whole is applied (so a
/// corrupt line leaves the tree as it was after the line before it); in lenient mode every
/// problem is noted and skipped.
pub fn apply_batch<F: LineFormat>(
    tree: &mut Tree<F::Entry>,
    from: Position,
    bytes: &[u8],
) -> Applied {
    let cx = Some(F::context(tree.header()));
    let mut splitter = from.splitter();
    // Where the open line starts (its entry's span; the position when it was no entry).
    let open_start = tree
        .nodes()
        .last()
        .map(|n| n.entry.span())
        .filter(|s| s.line == from.line)
        .map_or(from.offset, |s| s.offset);
    let mut lines: Vec<(Item<F>, Position)> = Vec::new();
    let _ = splitter.feed(bytes, |line, span| {
        let item = if from.open && span.line == from.line && is_blank(line) {
            // The open line's own ending (`\n`, `\r\n`): its span grows to the whole line.
            Item::Continuation {
                line: span.line,
                extra: span.len,
            }
        } else if from.open && span.line == from.line {
            // The open line went on after it was read whole: it was still being written.
            Item::Problem(corruption(
                CorruptionKind::InvalidJson,
                LineSpan {
                    line: span.line,
                    offset: open_start,
                    len: span.len,
                },
                "the line went on after it was read as a whole line",
            ))
        } else {
            F::classify(line, span, cx)
        };
        lines.push((item, Position::after(span)));
        Ok::<(), ()>(())
    });
    let mut torn_tail = None;
    if let Some((rest, span)) = splitter.finish() {
        if F::is_torn(&rest, span, cx) {
            torn_tail = Some(TornTail {
                line: span.line,
                offset: span.offset,
                len: rest.len() as u64,
            });
        } else if !is_blank(&rest) {
            lines.push((F::classify(&rest, span, cx), Position::after_open(span)));
        }
    }
    let before = tree.len() as NodeIdx;
    let mut position = from;
    let mut refused = None;
    match tree.mode() {
        Mode::Lenient => {
            for (item, at) in lines {
                // Lenient trees note problems instead of failing.
                let _ = F::apply(tree, item);
                position = at;
            }
            let _ = F::settle(tree);
        }
        Mode::Strict => {
            let (good, problem) = accepted_prefix::<F>(tree, &lines);
            let mut taken = 0;
            for (item, at) in lines.into_iter().take(good) {
                if let Err(c) = F::apply(tree, item) {
                    // `accepted_prefix` rules this out; stop where the tree stopped regardless.
                    tracing::error!("line refused after its batch was checked: {c}");
                    refused.get_or_insert(c);
                    break;
                }
                position = at;
                taken += 1;
            }
            if let Err(c) = F::settle(tree) {
                tracing::error!("batch did not settle after it was checked: {c}");
                refused.get_or_insert(c);
            }
            if taken == good {
                refused = refused.or(problem);
            }
            if refused.is_some() {
                // A torn tail after a refused line is not what stops the read.
                torn_tail = None;
            }
        }
    }
    Applied {
        added: before..tree.len() as NodeIdx,
        position,
        torn_tail,
        corruption: refused,
    }
}

/// How many leading lines a strict tree accepts whole, and the corruption after them.
fn accepted_prefix<F: LineFormat>(
    tree: &Tree<F::Entry>,
    lines: &[(Item<F>, Position)],
) -> (usize, Option<Corruption>) {
    let mut good = lines
        .iter()
        .position(|(item, _)| matches!(item, Item::Problem(_) | Item::Irregular(..)))
        .unwrap_or(lines.len());
    let mut problem = lines.get(good).and_then(|(item, _)| match item {
        Item::Problem(c) => Some(c.clone()),
        Item::Irregular(_, c) => Some((**c).clone()),
        _ => None,
    });
    loop {
        let batch: Vec<&F::Entry> = lines[..good]
            .iter()
            .filter_map(|(item, _)| match item {
                Item::Entry(e) => Some(e),
                _ => None,
            })
            .collect();
        match tree.check_append(&batch) {
            Ok(()) => return (good, problem),
            Err((j, c)) => {
                problem = Some(c);
                let mut seen = 0;
                good = lines[..good]
                    .iter()
                    .position(|(item, _)| {
                        if let Item::Entry(..) = item {
                            seen += 1;
                            seen > j
                        } else {
                            false
                        }
                    })
                    .unwrap_or(good);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::dialect::pi::{Pi, Tree};

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    fn entry(id: &str, parent: Option<&str>) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"custom","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","customType":"x"}}"#
        )
    }

    /// A tree holding the header only, and the position after it.
    fn start(mode: Mode) -> (Tree, Position) {
        let span = LineSpan {
            line: 1,
            offset: 0,
            len: HEADER.len() as u32,
        };
        let Item::Header(h) = Pi::classify(HEADER.as_bytes(), span, None) else {
            panic!("header")
        };
        (Tree::new(h, mode), Position::after(span))
    }

    fn ids(tree: &Tree) -> Vec<&str> {
        tree.nodes().iter().map(|n| n.entry.id.as_str()).collect()
    }

    #[test]
    fn crlf_and_lf_lines_read_alike() {
        let (mut tree, at) = start(Mode::Strict);
        let bytes = format!("{}\r\n{}\n", entry("a", None), entry("b", Some("a")));
        let applied = apply_batch::<Pi>(&mut tree, at, bytes.as_bytes());
        assert_eq!(ids(&tree), ["a", "b"]);
        assert_eq!(applied.position.offset, at.offset + bytes.len() as u64);
        assert_eq!(applied.position.line, 3);
        assert!(applied.corruption.is_none() && applied.torn_tail.is_none());
    }

    #[test]
    fn a_torn_tail_is_left_for_later_and_an_open_line_is_closed_by_its_newline() {
        let (mut tree, at) = start(Mode::Strict);
        let a = entry("a", None);
        let half = &a[..a.len() / 2];
        let applied = apply_batch::<Pi>(&mut tree, at, half.as_bytes());
        assert!(tree.is_empty());
        assert_eq!(applied.position, at);
        assert_eq!(
            applied.torn_tail,
            Some(TornTail {
                line: 2,
                offset: at.offset,
                len: half.len() as u64
            })
        );
        // The whole line without its newline is read, and left open.
        let applied = apply_batch::<Pi>(&mut tree, at, a.as_bytes());
        assert_eq!(ids(&tree), ["a"]);
        assert!(applied.position.open);
        // Its `\r\n` closes it; the next line gets the next number.
        let open = applied.position;
        let rest = format!("\r\n{}\n", entry("b", Some("a")));
        let applied = apply_batch::<Pi>(&mut tree, open, rest.as_bytes());
        assert_eq!(ids(&tree), ["a", "b"]);
        assert_eq!(applied.position.line, 3);
        assert!(!applied.position.open);
        assert_eq!(tree.node(1).entry.span.line, 3);
        // The first line's span now holds its `\r` too, as a whole read of the file gives.
        assert_eq!(tree.node(0).entry.span.len as usize, a.len() + 1);
    }

    #[test]
    fn an_open_line_that_goes_on_is_corruption_at_that_line() {
        let (mut tree, at) = start(Mode::Strict);
        let applied = apply_batch::<Pi>(&mut tree, at, entry("a", None).as_bytes());
        let more = apply_batch::<Pi>(&mut tree, applied.position, b"garbage\n");
        let c = more.corruption.expect("corruption");
        assert_eq!(
            (c.kind, c.line, c.offset),
            (CorruptionKind::InvalidJson, 2, at.offset)
        );
        assert_eq!(more.position, applied.position);
    }

    #[test]
    fn strict_keeps_the_good_prefix_and_lenient_skips() {
        let bytes = format!(
            "{}\n{}\n{}\n",
            entry("a", None),
            entry("b", Some("missing")),
            entry("c", Some("a"))
        );
        let (mut tree, at) = start(Mode::Strict);
        let applied = apply_batch::<Pi>(&mut tree, at, bytes.as_bytes());
        assert_eq!(ids(&tree), ["a"]);
        let c = applied.corruption.expect("corruption");
        assert_eq!((c.kind, c.line), (CorruptionKind::MissingParent, 3));
        assert_eq!(applied.position.line, 2);
        let (mut tree, at) = start(Mode::Lenient);
        let applied = apply_batch::<Pi>(&mut tree, at, bytes.as_bytes());
        assert_eq!(ids(&tree), ["a", "b", "c"]);
        assert!(applied.corruption.is_none());
        assert_eq!(tree.diagnostics().len(), 1);
    }
}
