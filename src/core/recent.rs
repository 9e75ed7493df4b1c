//! A small bounded cache of values seen recently on one thread, so that values a session
//! repeats thousands of times (a provider and model name, a parent's id, a tool call's id)
//! share one allocation instead of each entry holding its own copy.
//!
//! A cache only: nothing's meaning depends on whether a value was found in it. Lookups are a
//! linear scan newest first, which beats hashing at the sizes used (at most a few dozen).
//! Pure: no I/O.

use std::cell::RefCell;
use std::thread::LocalKey;

/// At most `cap` values, oldest dropped first.
#[derive(Debug)]
pub struct Recent<T> {
    items: Vec<T>,
    cap: usize,
}

impl<T: Clone> Recent<T> {
    /// An empty cache of at most `cap` values (for a `thread_local!` `const` initializer).
    pub const fn new(cap: usize) -> Self {
        Recent {
            items: Vec::new(),
            cap,
        }
    }

    /// The newest value for which `is` holds, cloned.
    pub fn find(&self, is: impl FnMut(&&T) -> bool) -> Option<T> {
        self.items.iter().rev().find(is).cloned()
    }

    /// Adds `value` as the newest, dropping the oldest when full.
    pub fn push(&mut self, value: T) {
        if self.cap == 0 {
            return;
        }
        if self.items.len() >= self.cap {
            self.items.remove(0);
        }
        self.items.push(value);
    }

    /// The newest value for which `is` holds, else `make()`, which is kept as the newest.
    pub fn find_or_insert(&mut self, is: impl FnMut(&&T) -> bool, make: impl FnOnce() -> T) -> T {
        if let Some(found) = self.find(is) {
            return found;
        }
        let value = make();
        self.push(value.clone());
        value
    }
}

/// Runs `f` on this thread's cache `key`; `None` when the cache is already in use further up
/// the stack (the caller then goes without it) or the thread is being torn down.
pub fn with<T: 'static, R>(
    key: &'static LocalKey<RefCell<Recent<T>>>,
    f: impl FnOnce(&mut Recent<T>) -> R,
) -> Option<R> {
    key.try_with(|cell| cell.try_borrow_mut().ok().map(|mut cache| f(&mut cache)))
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_values_and_finds_the_newest_match() {
        let mut recent = Recent::new(3);
        for v in [1, 2, 3, 4] {
            recent.push(v);
        }
        assert_eq!(recent.find(|v| **v == 1), None, "the oldest was dropped");
        assert_eq!(recent.find(|v| **v % 2 == 0), Some(4), "newest first");
        assert_eq!(recent.find_or_insert(|v| **v == 2, || 9), 2);
        assert_eq!(recent.find_or_insert(|v| **v == 7, || 7), 7);
        assert_eq!(recent.find(|v| **v == 2), None, "7 pushed 2 out");
        let mut none = Recent::new(0);
        none.push(1);
        assert_eq!(none.find(|_| true), None);
    }

    #[test]
    fn a_cache_in_use_is_not_entered_again() {
        thread_local! {
            static CACHE: RefCell<Recent<u8>> = const { RefCell::new(Recent::new(2)) };
        }
        let inner = with(&CACHE, |outer| {
            outer.push(1);
            with(&CACHE, |_| ())
        });
        assert_eq!(inner, Some(None));
        assert_eq!(with(&CACHE, |c| c.find(|_| true)), Some(Some(1)));
    }
}
