//! Per-entry facts of a compaction projection packed into one byte an entry: four flag bits
//! and the entry's number of messages, with a first-message index kept for every
//! [`START_BLOCK`] entries. A 400,000-entry path costs about 400 KB here instead of the
//! 2 MB a `(u32, u8)` per entry would.
//!
//! Pure: no I/O.

use std::ops::Range;

/// The number of messages in an entry's byte meaning "this many or more, see the list of
/// large counts" (the most four bits hold).
const COUNT_LARGE: u8 = 15;
/// The entry's number of messages sits from this bit up; the flags below it.
const COUNT_SHIFT: u8 = 4;
/// The bits a caller may use for flags.
pub const FLAG_BITS: u8 = (1 << COUNT_SHIFT) - 1;
/// Entries per recorded first-message index.
pub const START_BLOCK: usize = 64;

/// Entries in order, each with up to four flag bits and a number of messages; messages are
/// numbered across entries from 0 (`u32`: a projection holds fewer than 2³² messages).
#[derive(Clone, Debug, Default)]
pub struct PackedEntries {
    /// The index of the first message of entries 0, [`START_BLOCK`], 2 × [`START_BLOCK`]…
    starts: Vec<u32>,
    /// Per entry: flags in the low bits, the number of messages from [`COUNT_SHIFT`] up
    /// ([`COUNT_LARGE`]: see `large_counts`).
    bytes: Vec<u8>,
    /// `(entry, messages)` of the entries with [`COUNT_LARGE`] messages or more, in order.
    large_counts: Vec<(usize, usize)>,
    /// Number of messages of all entries.
    messages: u32,
}

impl PackedEntries {
    /// Room for `entries` entries without reallocating.
    pub fn with_capacity(entries: usize) -> Self {
        Self {
            starts: Vec::with_capacity(entries.div_ceil(START_BLOCK)),
            bytes: Vec::with_capacity(entries),
            ..Self::default()
        }
    }

    /// Appends an entry with `flags` (bits outside [`FLAG_BITS`] are dropped) and `count`
    /// messages, numbered from [`Self::message_total`] on. A count that would take the total
    /// past `u32::MAX` is cut there.
    pub fn push(&mut self, flags: u8, count: usize) {
        let index = self.bytes.len();
        if index.is_multiple_of(START_BLOCK) {
            self.starts.push(self.messages);
        }
        let count = count.min((u32::MAX - self.messages) as usize);
        if count >= usize::from(COUNT_LARGE) {
            self.large_counts.push((index, count));
        }
        let packed = count.min(usize::from(COUNT_LARGE)) as u8;
        self.bytes.push((flags & FLAG_BITS) | packed << COUNT_SHIFT);
        // `count` was cut so that this does not overflow.
        self.messages += count as u32;
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Number of messages of all entries.
    pub fn message_total(&self) -> u32 {
        self.messages
    }

    /// True when entry `i` has `flag` (false past the end).
    pub fn has(&self, i: usize, flag: u8) -> bool {
        self.bytes.get(i).is_some_and(|b| b & flag & FLAG_BITS != 0)
    }

    /// Number of messages of entry `i` (0 past the end).
    pub fn count(&self, i: usize) -> usize {
        let Some(&byte) = self.bytes.get(i) else {
            return 0;
        };
        match byte >> COUNT_SHIFT {
            COUNT_LARGE => self
                .large_counts
                .binary_search_by(|(at, _)| at.cmp(&i))
                .ok()
                .and_then(|k| self.large_counts.get(k))
                .map_or(0, |(_, count)| *count),
            count => usize::from(count),
        }
    }

    /// The message indices of entry `i` (empty, at the end, past the last entry): the block's
    /// recorded start plus the counts of the entries before `i` in its block.
    pub fn range(&self, i: usize) -> Range<u32> {
        let block = i / START_BLOCK;
        let Some(&block_start) = self.starts.get(block).filter(|_| i < self.len()) else {
            return self.messages..self.messages;
        };
        // Every message has a u32 index, so the sums below fit.
        let before: usize = (block * START_BLOCK..i).map(|j| self.count(j)).sum();
        let start = block_start.saturating_add(u32::try_from(before).unwrap_or(u32::MAX));
        let count = u32::try_from(self.count(i)).unwrap_or(u32::MAX);
        start..start.saturating_add(count).min(self.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `counts` with flags derived from the index and checks every entry against a
    /// plain list of starts and counts.
    fn check(counts: &[usize]) {
        let mut packed = PackedEntries::with_capacity(counts.len());
        for (i, &c) in counts.iter().enumerate() {
            packed.push((i % 16) as u8, c);
        }
        assert_eq!(packed.len(), counts.len());
        let mut start = 0u32;
        for (i, &c) in counts.iter().enumerate() {
            assert_eq!(packed.count(i), c, "count of entry {i}");
            let end = start + c as u32;
            assert_eq!(packed.range(i), start..end, "range of entry {i}");
            for bit in 0..4 {
                let flag = 1u8 << bit;
                assert_eq!(packed.has(i, flag), (i % 16) as u8 & flag != 0, "entry {i}");
            }
            start = end;
        }
        assert_eq!(packed.message_total(), start);
        assert_eq!(packed.count(counts.len()), 0);
        assert_eq!(packed.range(counts.len()), start..start);
        assert!(!packed.has(counts.len(), 1));
    }

    #[test]
    fn small_counts_across_block_boundaries() {
        // 0, 1 and 2 messages (what pi's entries give), over three blocks and a part.
        let counts: Vec<usize> = (0..3 * START_BLOCK + 5).map(|i| (i * 7) % 3).collect();
        check(&counts);
    }

    #[test]
    fn fifteen_or_more_messages_use_the_side_list() {
        let mut counts = vec![1; 2 * START_BLOCK + 3];
        for (at, c) in [
            (0, 15),
            (1, 16),
            (63, 14),
            (64, 1000),
            (65, 0),
            (127, 15),
            (130, 40),
        ] {
            counts[at] = c;
        }
        check(&counts);
    }

    #[test]
    fn flags_outside_their_bits_do_not_change_the_count() {
        let mut packed = PackedEntries::default();
        packed.push(0xFF, 2);
        packed.push(0xF0, 15);
        assert_eq!((packed.count(0), packed.count(1)), (2, 15));
        assert!(packed.has(0, 8) && !packed.has(1, 1));
        assert_eq!(packed.range(1), 2..17);
        assert!(!packed.is_empty() && PackedEntries::default().is_empty());
    }

    #[test]
    fn the_total_stops_at_u32_max() {
        let mut packed = PackedEntries::default();
        packed.push(0, u32::MAX as usize - 1);
        packed.push(0, 5);
        assert_eq!(packed.count(1), 1);
        assert_eq!(packed.message_total(), u32::MAX);
        assert_eq!(packed.range(1), u32::MAX - 1..u32::MAX);
    }
}
