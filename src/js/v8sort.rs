//! `Array.prototype.sort` exactly as V8 (node 20, and so pi 1.6.0) performs it: TimSort, ported
//! from V8's `third_party/v8/builtins/array-sort.tq` (itself a port of CPython's
//! `listobject.c`).
//!
//! Why a port and not `slice::sort_by`: with a consistent comparator every stable sort gives the
//! same order, but pi's `getTree` compares siblings by `new Date(timestamp).getTime()`, which is
//! `NaN` for a timestamp `Date` cannot parse, and V8 reads a `NaN` comparison as `+0` ("equal",
//! `SortCompareUserFn`). Equal to everything is not a consistent order, so the result depends on
//! which comparisons the algorithm makes: its runs, binary insertion sort below the minimum run
//! length, galloping merges and the adaptive `minGallop`. This module makes the same
//! comparisons in the same order and moves elements the same way, so it gives V8's answer for
//! any comparator.
//!
//! The comparator returns an [`Ordering`]; V8 only ever asks whether the comparison is `< 0`
//! (`Less`), so `Equal` and `Greater` behave alike. Map a JavaScript result of `NaN` to `Equal`,
//! as V8 does. V8 also drops `undefined` and holes before sorting; callers sort values only.
//!
//! Pure, no allocation beyond a scratch copy of the shorter run during a merge.

use std::cmp::Ordering;

/// V8 `kMinGallopWins`: galloping starts after this many wins in a row.
const MIN_GALLOP_WINS: usize = 7;

/// Sorts `v` in place as V8's `Array.prototype.sort(comparefn)` does, `cmp(a, b)` standing for
/// `comparefn(a, b) < 0` when it returns [`Ordering::Less`].
pub fn sort_by<T: Clone>(v: &mut [T], cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut s = SortState {
        work: v,
        cmp,
        min_gallop: MIN_GALLOP_WINS,
        runs: Vec::new(),
    };
    s.tim_sort();
}

struct SortState<'a, T, F> {
    work: &'a mut [T],
    cmp: F,
    /// V8 `sortState.minGallop`, carried across merges.
    min_gallop: usize,
    /// Pending runs as (base, length).
    runs: Vec<(usize, usize)>,
}

impl<T: Clone, F: FnMut(&T, &T) -> Ordering> SortState<'_, T, F> {
    /// `comparefn(a, b) < 0`.
    fn less(&mut self, a: &T, b: &T) -> bool {
        (self.cmp)(a, b) == Ordering::Less
    }

    /// V8 `ArrayTimSortImpl`.
    fn tim_sort(&mut self) {
        let length = self.work.len();
        if length < 2 {
            return;
        }
        let mut remaining = length;
        let mut low = 0;
        let min_run = compute_min_run_length(remaining);
        while remaining != 0 {
            let mut run = self.count_and_make_run(low, low + remaining);
            if run < min_run {
                let forced = min_run.min(remaining);
                self.binary_insertion_sort(low, low + run, low + forced);
                run = forced;
            }
            self.runs.push((low, run));
            self.merge_collapse();
            low += run;
            remaining -= run;
        }
        self.merge_force_collapse();
    }

    /// V8 `BinaryInsertionSort`: sorts `[low, high)` given that `[low, start)` is sorted.
    fn binary_insertion_sort(&mut self, low: usize, start: usize, high: usize) {
        let mut start = if low == start { start + 1 } else { start };
        while start < high {
            let mut left = low;
            let mut right = start;
            let pivot = self.work[right].clone();
            while left < right {
                let mid = left + ((right - left) >> 1);
                let m = self.work[mid].clone();
                if self.less(&pivot, &m) {
                    right = mid;
                } else {
                    left = mid + 1;
                }
            }
            self.work[left..=start].rotate_right(1);
            start += 1;
        }
    }

    /// V8 `CountAndMakeRun`: the length of the run at `low` in `[low, high)`; a strictly
    /// descending run is reversed in place.
    fn count_and_make_run(&mut self, low_arg: usize, high: usize) -> usize {
        let low = low_arg + 1;
        if low == high {
            return 1;
        }
        let mut run = 2;
        let element_low = self.work[low].clone();
        let element_low_pred = self.work[low - 1].clone();
        let descending = self.less(&element_low, &element_low_pred);
        let mut previous = element_low;
        for idx in low + 1..high {
            let current = self.work[idx].clone();
            let order_less = self.less(&current, &previous);
            // V8: descending breaks on `order >= 0`, ascending on `order < 0`.
            if descending != order_less {
                break;
            }
            previous = current;
            run += 1;
        }
        if descending {
            self.work[low_arg..low_arg + run].reverse();
        }
        run
    }

    /// V8 `MergeCollapse`: merges until the run-length invariants hold again.
    fn merge_collapse(&mut self) {
        while self.runs.len() > 1 {
            let mut n = self.runs.len() - 2;
            let len = |s: &Self, i: usize| s.runs[i].1;
            let invariant = |s: &Self, n: usize| n < 2 || len(s, n - 2) > len(s, n - 1) + len(s, n);
            if !invariant(self, n + 1) || !invariant(self, n) {
                if n > 0 && len(self, n - 1) < len(self, n + 1) {
                    n -= 1;
                }
                self.merge_at(n);
            } else if len(self, n) <= len(self, n + 1) {
                self.merge_at(n);
            } else {
                break;
            }
        }
    }

    /// V8 `MergeForceCollapse`: merges all remaining runs.
    fn merge_force_collapse(&mut self) {
        while self.runs.len() > 1 {
            let mut n = self.runs.len() - 2;
            if n > 0 && self.runs[n - 1].1 < self.runs[n + 1].1 {
                n -= 1;
            }
            self.merge_at(n);
        }
    }

    /// V8 `MergeAt`: merges runs `i` and `i + 1`.
    fn merge_at(&mut self, i: usize) {
        let (mut base_a, mut length_a) = self.runs[i];
        let (base_b, mut length_b) = self.runs[i + 1];
        self.runs[i].1 = length_a + length_b;
        self.runs.remove(i + 1);

        let key_right = self.work[base_b].clone();
        let k = self.gallop_right(Slot::Work, &key_right, base_a, length_a, 0, &[]);
        base_a += k;
        length_a -= k;
        if length_a == 0 {
            return;
        }
        let key_left = self.work[base_a + length_a - 1].clone();
        length_b = self.gallop_left(Slot::Work, &key_left, base_b, length_b, length_b - 1, &[]);
        if length_b == 0 {
            return;
        }
        if length_a <= length_b {
            self.merge_low(base_a, length_a, base_b, length_b);
        } else {
            self.merge_high(base_a, length_a, base_b, length_b);
        }
    }

    fn at<'b>(&'b self, slot: Slot, temp: &'b [T], i: usize) -> &'b T {
        match slot {
            Slot::Work => &self.work[i],
            Slot::Temp => &temp[i],
        }
    }

    /// V8 `GallopLeft`: where `key` belongs in the sorted `length` elements at `base` (of the
    /// work array or of `temp`), left of any equal elements.
    fn gallop_left(
        &mut self,
        slot: Slot,
        key: &T,
        base: usize,
        length: usize,
        hint: usize,
        temp: &[T],
    ) -> usize {
        let mut last_ofs: isize = 0;
        let mut offset: isize = 1;
        let hint_i = hint as isize;
        let len_i = length as isize;
        let e = self.at(slot, temp, base + hint).clone();
        if self.less(&e, key) {
            let max_ofs = len_i - hint_i;
            while offset < max_ofs {
                let e = self
                    .at(slot, temp, base + (hint_i + offset) as usize)
                    .clone();
                if !self.less(&e, key) {
                    break;
                }
                last_ofs = offset;
                offset = (offset << 1) + 1;
            }
            if offset > max_ofs {
                offset = max_ofs;
            }
            last_ofs += hint_i;
            offset += hint_i;
        } else {
            let max_ofs = hint_i + 1;
            while offset < max_ofs {
                let e = self
                    .at(slot, temp, base + (hint_i - offset) as usize)
                    .clone();
                if self.less(&e, key) {
                    break;
                }
                last_ofs = offset;
                offset = (offset << 1) + 1;
            }
            if offset > max_ofs {
                offset = max_ofs;
            }
            let tmp = last_ofs;
            last_ofs = hint_i - offset;
            offset = hint_i - tmp;
        }
        last_ofs += 1;
        while last_ofs < offset {
            let m = last_ofs + ((offset - last_ofs) >> 1);
            let e = self.at(slot, temp, base + m as usize).clone();
            if self.less(&e, key) {
                last_ofs = m + 1;
            } else {
                offset = m;
            }
        }
        offset as usize
    }

    /// V8 `GallopRight`: like [`Self::gallop_left`], right of any equal elements.
    fn gallop_right(
        &mut self,
        slot: Slot,
        key: &T,
        base: usize,
        length: usize,
        hint: usize,
        temp: &[T],
    ) -> usize {
        let mut last_ofs: isize = 0;
        let mut offset: isize = 1;
        let hint_i = hint as isize;
        let len_i = length as isize;
        let e = self.at(slot, temp, base + hint).clone();
        if self.less(key, &e) {
            let max_ofs = hint_i + 1;
            while offset < max_ofs {
                let e = self
                    .at(slot, temp, base + (hint_i - offset) as usize)
                    .clone();
                if !self.less(key, &e) {
                    break;
                }
                last_ofs = offset;
                offset = (offset << 1) + 1;
            }
            if offset > max_ofs {
                offset = max_ofs;
            }
            let tmp = last_ofs;
            last_ofs = hint_i - offset;
            offset = hint_i - tmp;
        } else {
            let max_ofs = len_i - hint_i;
            while offset < max_ofs {
                let e = self
                    .at(slot, temp, base + (hint_i + offset) as usize)
                    .clone();
                if self.less(key, &e) {
                    break;
                }
                last_ofs = offset;
                offset = (offset << 1) + 1;
            }
            if offset > max_ofs {
                offset = max_ofs;
            }
            last_ofs += hint_i;
            offset += hint_i;
        }
        last_ofs += 1;
        while last_ofs < offset {
            let m = last_ofs + ((offset - last_ofs) >> 1);
            let e = self.at(slot, temp, base + m as usize).clone();
            if self.less(key, &e) {
                offset = m;
            } else {
                last_ofs = m + 1;
            }
        }
        offset as usize
    }

    /// V8 `MergeLow`: merges `length_a` elements at `base_a` with the `length_b` after them,
    /// front to back, through a copy of run A.
    fn merge_low(&mut self, base_a: usize, length_a: usize, base_b: usize, length_b: usize) {
        let mut length_a = length_a;
        let mut length_b = length_b;
        let temp: Vec<T> = self.work[base_a..base_a + length_a].to_vec();
        let mut dest = base_a;
        let mut cursor_temp = 0usize;
        let mut cursor_b = base_b;

        self.work[dest] = self.work[cursor_b].clone();
        dest += 1;
        cursor_b += 1;

        enum End {
            Succeed,
            CopyB,
        }
        let end = 'merge: {
            length_b -= 1;
            if length_b == 0 {
                break 'merge End::Succeed;
            }
            if length_a == 1 {
                break 'merge End::CopyB;
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let mut wins_a = 0usize;
                let mut wins_b = 0usize;
                loop {
                    let b = self.work[cursor_b].clone();
                    if self.less(&b, &temp[cursor_temp]) {
                        self.work[dest] = b;
                        dest += 1;
                        cursor_b += 1;
                        wins_b += 1;
                        length_b -= 1;
                        wins_a = 0;
                        if length_b == 0 {
                            break 'merge End::Succeed;
                        }
                        if wins_b >= min_gallop {
                            break;
                        }
                    } else {
                        self.work[dest] = temp[cursor_temp].clone();
                        dest += 1;
                        cursor_temp += 1;
                        wins_a += 1;
                        length_a -= 1;
                        wins_b = 0;
                        if length_a == 1 {
                            break 'merge End::CopyB;
                        }
                        if wins_a >= min_gallop {
                            break;
                        }
                    }
                }
                min_gallop += 1;
                let mut first = true;
                while wins_a >= MIN_GALLOP_WINS || wins_b >= MIN_GALLOP_WINS || first {
                    first = false;
                    min_gallop = min_gallop.saturating_sub(1).max(1);
                    self.min_gallop = min_gallop;

                    let key = self.work[cursor_b].clone();
                    wins_a = self.gallop_right(Slot::Temp, &key, cursor_temp, length_a, 0, &temp);
                    if wins_a > 0 {
                        self.work[dest..dest + wins_a]
                            .clone_from_slice(&temp[cursor_temp..cursor_temp + wins_a]);
                        dest += wins_a;
                        cursor_temp += wins_a;
                        length_a -= wins_a;
                        if length_a == 1 {
                            break 'merge End::CopyB;
                        }
                        // Impossible for a consistent comparator, but comparators are not.
                        if length_a == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    self.work[dest] = self.work[cursor_b].clone();
                    dest += 1;
                    cursor_b += 1;
                    length_b -= 1;
                    if length_b == 0 {
                        break 'merge End::Succeed;
                    }

                    let key = temp[cursor_temp].clone();
                    wins_b = self.gallop_left(Slot::Work, &key, cursor_b, length_b, 0, &[]);
                    if wins_b > 0 {
                        self.work.copy_within_clone(cursor_b, dest, wins_b);
                        dest += wins_b;
                        cursor_b += wins_b;
                        length_b -= wins_b;
                        if length_b == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    self.work[dest] = temp[cursor_temp].clone();
                    dest += 1;
                    cursor_temp += 1;
                    length_a -= 1;
                    if length_a == 1 {
                        break 'merge End::CopyB;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        };
        match end {
            End::Succeed => {
                if length_a > 0 {
                    self.work[dest..dest + length_a]
                        .clone_from_slice(&temp[cursor_temp..cursor_temp + length_a]);
                }
            }
            End::CopyB => {
                // The last element of run A belongs at the end of the merge.
                self.work.copy_within_clone(cursor_b, dest, length_b);
                self.work[dest + length_b] = temp[cursor_temp].clone();
            }
        }
    }

    /// V8 `MergeHigh`: like [`Self::merge_low`], back to front through a copy of run B.
    fn merge_high(&mut self, base_a: usize, length_a: usize, base_b: usize, length_b: usize) {
        let mut length_a = length_a;
        let mut length_b = length_b;
        let temp: Vec<T> = self.work[base_b..base_b + length_b].to_vec();
        // Signed cursors: V8 lets them step one below their run.
        let mut dest = (base_b + length_b - 1) as isize;
        let mut cursor_temp = length_b as isize - 1;
        let mut cursor_a = (base_a + length_a - 1) as isize;

        self.work[dest as usize] = self.work[cursor_a as usize].clone();
        dest -= 1;
        cursor_a -= 1;

        enum End {
            Succeed,
            CopyA,
        }
        let end = 'merge: {
            length_a -= 1;
            if length_a == 0 {
                break 'merge End::Succeed;
            }
            if length_b == 1 {
                break 'merge End::CopyA;
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let mut wins_a = 0usize;
                let mut wins_b = 0usize;
                loop {
                    let a = self.work[cursor_a as usize].clone();
                    if self.less(&temp[cursor_temp as usize], &a) {
                        self.work[dest as usize] = a;
                        dest -= 1;
                        cursor_a -= 1;
                        wins_a += 1;
                        length_a -= 1;
                        wins_b = 0;
                        if length_a == 0 {
                            break 'merge End::Succeed;
                        }
                        if wins_a >= min_gallop {
                            break;
                        }
                    } else {
                        self.work[dest as usize] = temp[cursor_temp as usize].clone();
                        dest -= 1;
                        cursor_temp -= 1;
                        wins_b += 1;
                        length_b -= 1;
                        wins_a = 0;
                        if length_b == 1 {
                            break 'merge End::CopyA;
                        }
                        if wins_b >= min_gallop {
                            break;
                        }
                    }
                }
                min_gallop += 1;
                let mut first = true;
                while wins_a >= MIN_GALLOP_WINS || wins_b >= MIN_GALLOP_WINS || first {
                    first = false;
                    min_gallop = min_gallop.saturating_sub(1).max(1);
                    self.min_gallop = min_gallop;

                    let key = temp[cursor_temp as usize].clone();
                    let k =
                        self.gallop_right(Slot::Work, &key, base_a, length_a, length_a - 1, &[]);
                    wins_a = length_a - k;
                    if wins_a > 0 {
                        dest -= wins_a as isize;
                        cursor_a -= wins_a as isize;
                        self.work.copy_within_clone(
                            (cursor_a + 1) as usize,
                            (dest + 1) as usize,
                            wins_a,
                        );
                        length_a -= wins_a;
                        if length_a == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    self.work[dest as usize] = temp[cursor_temp as usize].clone();
                    dest -= 1;
                    cursor_temp -= 1;
                    length_b -= 1;
                    if length_b == 1 {
                        break 'merge End::CopyA;
                    }

                    let key = self.work[cursor_a as usize].clone();
                    let k = self.gallop_left(Slot::Temp, &key, 0, length_b, length_b - 1, &temp);
                    wins_b = length_b - k;
                    if wins_b > 0 {
                        dest -= wins_b as isize;
                        cursor_temp -= wins_b as isize;
                        let from = (cursor_temp + 1) as usize;
                        self.work[(dest + 1) as usize..(dest + 1) as usize + wins_b]
                            .clone_from_slice(&temp[from..from + wins_b]);
                        length_b -= wins_b;
                        if length_b == 1 {
                            break 'merge End::CopyA;
                        }
                        // Impossible for a consistent comparator, but comparators are not.
                        if length_b == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    self.work[dest as usize] = self.work[cursor_a as usize].clone();
                    dest -= 1;
                    cursor_a -= 1;
                    length_a -= 1;
                    if length_a == 0 {
                        break 'merge End::Succeed;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        };
        match end {
            End::Succeed => {
                if length_b > 0 {
                    let to = (dest - (length_b as isize - 1)) as usize;
                    self.work[to..to + length_b].clone_from_slice(&temp[..length_b]);
                }
            }
            End::CopyA => {
                // The first element of run B belongs at the front of the merge.
                dest -= length_a as isize;
                cursor_a -= length_a as isize;
                self.work
                    .copy_within_clone((cursor_a + 1) as usize, (dest + 1) as usize, length_a);
                self.work[dest as usize] = temp[cursor_temp as usize].clone();
            }
        }
    }
}

/// Which array a gallop searches: the work array or the merge's temporary copy.
#[derive(Clone, Copy)]
enum Slot {
    Work,
    Temp,
}

/// V8 `ComputeMinRunLength`: `n` below 64, else a length in 32..=64 such that `n / len` is
/// close to, but no more than, a power of two.
fn compute_min_run_length(n: usize) -> usize {
    let mut n = n;
    let mut r = 0;
    while n >= 64 {
        r |= n & 1;
        n >>= 1;
    }
    n + r
}

/// `Copy` of V8 within one array (overlapping ranges are copied the way V8's `Copy` copies
/// them, which for moves within the work array equals a memmove).
trait CopyWithinClone {
    fn copy_within_clone(&mut self, from: usize, to: usize, len: usize);
}

impl<T: Clone> CopyWithinClone for [T] {
    fn copy_within_clone(&mut self, from: usize, to: usize, len: usize) {
        if len == 0 || from == to {
            return;
        }
        if from < to {
            for i in (0..len).rev() {
                self[to + i] = self[from + i].clone();
            }
        } else {
            for i in 0..len {
                self[to + i] = self[from + i].clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_a_stable_sort_for_consistent_comparators() {
        let mut seed = 0x1234_5678_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in [0, 1, 2, 3, 10, 31, 32, 33, 63, 64, 65, 100, 257, 1000, 5000] {
            let v: Vec<(u64, usize)> = (0..len).map(|i| (next() % 50, i)).collect();
            let mut ours = v.clone();
            sort_by(&mut ours, |a, b| a.0.cmp(&b.0));
            let mut std = v;
            std.sort_by_key(|a| a.0);
            assert_eq!(ours, std, "length {len}");
        }
    }

    #[test]
    fn min_run_lengths_follow_v8() {
        assert_eq!(compute_min_run_length(63), 63);
        assert_eq!(compute_min_run_length(64), 32);
        assert_eq!(compute_min_run_length(65), 33);
        assert_eq!(compute_min_run_length(2112), 33);
    }
}
