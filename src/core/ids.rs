//! The identities every dialect shares: entry ids, where a line sits in its file, and an
//! entry's time as JavaScript's `Date` reads it (both Node-written formats order by it).

use std::borrow::Borrow;
use std::fmt;

use ecow::EcoString;

/// An entry id (usually 8 hex characters; pi may fall back to a full UUID).
///
/// A small string ([`EcoString`]): an id of at most 15 bytes, which is every id pi writes
/// except the UUID fallback, is held inline in its 16 bytes with no allocation; a longer one
/// is shared, so cloning any id (the tree's labels, a child's `parentId`, explanations)
/// never allocates.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(EcoString);

impl EntryId {
    /// Wraps an id string.
    pub fn new(s: impl AsRef<str>) -> Self {
        Self(EcoString::from(s.as_ref()))
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The deterministic id sessiond gives a version-1 entry: its 1-based line number as
    /// 8 lowercase hex digits, so ids are stable across runs (pi assigns random ones).
    pub fn for_v1_line(line: u32) -> Self {
        Self(ecow::eco_format!("{line:08x}"))
    }
}

impl Borrow<str> for EntryId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// Where a line sits in its file. `offset` and `len` are in bytes; `len` excludes the `\n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSpan {
    /// 1-based line number.
    pub line: u32,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length of the line in bytes, without its newline.
    pub len: u32,
}

/// `new Date(timestamp).getTime()` in milliseconds, or JavaScript's `NaN`, in 8 bytes where
/// `Option<i64>` takes 16. A `Date` lies within ±8.64e15 ms of the epoch, so `i64::MIN` is
/// free to stand for `NaN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsTime(i64);

impl JsTime {
    /// Wraps a time; `None` is `NaN`.
    pub fn new(ms: Option<i64>) -> Self {
        Self(ms.unwrap_or(i64::MIN))
    }
    /// The time in milliseconds since the epoch; `None` where JavaScript gives `NaN`.
    pub fn ms(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }
}
