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
