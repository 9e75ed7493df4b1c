//! Reading an entry's line back from where it is stored: the seam between the pure core and
//! dialects on one side and `storage` (which implements it) on the other.

use std::borrow::Cow;

use crate::core::ids::LineSpan;

/// Gives the bytes of an entry's line (without the newline). Implemented by `storage`.
pub trait LineSource {
    /// Reads the line at `span`.
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>>;

    /// `len` bytes from byte `offset` in one read, for a source that can read ranges (a file);
    /// `None`, the default, for one that reads line by line only. `dialect::pi::render::for_each_fragment`
    /// reads the lines of a block of context entries this way.
    fn range(&self, _offset: u64, _len: usize) -> std::io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

/// Lines that lie close together in a file, read with one [`LineSource::range`].
#[derive(Clone, Debug)]
pub struct LineBlock {
    /// The indices (into the caller's list of lines) of the lines it holds.
    pub items: std::ops::Range<usize>,
    /// The first byte it covers.
    pub offset: u64,
    /// The bytes it covers, the gaps between its lines included.
    pub len: usize,
}

/// Cuts lines `spans` (in the caller's order) into [`LineBlock`]s in that order: a block ends
/// where the next line would take it past `max_bytes` of the file (counting the gaps between
/// its lines) or `max_items` lines; a longer line is a block of its own.
pub fn line_blocks(
    spans: impl IntoIterator<Item = LineSpan>,
    max_bytes: u64,
    max_items: usize,
) -> Vec<LineBlock> {
    let mut blocks: Vec<LineBlock> = Vec::new();
    for (i, span) in spans.into_iter().enumerate() {
        let (start, end) = (span.offset, span.offset + u64::from(span.len));
        if let Some(b) = blocks.last_mut() {
            let from = b.offset.min(start);
            let to = (b.offset + b.len as u64).max(end);
            if to - from <= max_bytes && b.items.len() < max_items {
                b.items.end = i + 1;
                b.offset = from;
                b.len = (to - from) as usize;
                continue;
            }
        }
        blocks.push(LineBlock {
            items: i..i + 1,
            offset: start,
            len: span.len as usize,
        });
    }
    blocks
}

/// The lines of a [`LineBlock`] served from one range read of `source`, and any other line
/// (or every line, when the source cannot read ranges or the range read failed: the line that
/// cannot be read is then named by its own error) read from `source` itself.
pub struct Buffered<'s> {
    offset: u64,
    bytes: Vec<u8>,
    source: &'s (dyn LineSource + Sync),
}

impl<'s> Buffered<'s> {
    /// Reads `block`'s bytes from `source` in one read.
    pub fn read(source: &'s (dyn LineSource + Sync), block: &LineBlock) -> Buffered<'s> {
        Buffered {
            offset: block.offset,
            bytes: source
                .range(block.offset, block.len)
                .ok()
                .flatten()
                .unwrap_or_default(),
            source,
        }
    }
}

impl LineSource for Buffered<'_> {
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
        let at = span
            .offset
            .checked_sub(self.offset)
            .and_then(|at| usize::try_from(at).ok());
        match at.and_then(|at| self.bytes.get(at..at.saturating_add(span.len as usize))) {
            Some(line) => Ok(Cow::Borrowed(line)),
            None => self.source.line(span),
        }
    }
}

/// Each line read from `.0` with a range read of its own ([`LineSource::range`]; the line read
/// when the source cannot read ranges): for threads reading far-apart lines of a source whose
/// line reads share one read-ahead window, which they would take in turns and refill.
pub struct ByRange<'s>(pub &'s (dyn LineSource + Sync));

impl LineSource for ByRange<'_> {
    fn line(&self, span: LineSpan) -> std::io::Result<Cow<'_, [u8]>> {
        match self.0.range(span.offset, span.len as usize)? {
            Some(bytes) => Ok(Cow::Owned(bytes)),
            None => self.0.line(span),
        }
    }
}
