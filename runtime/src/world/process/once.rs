//! [`SetOnce`]: a cell written at most once, read from any thread; what `OnceLock` does for a
//! process's task waker and exit reason, without its out-of-line `Once` state machine (which
//! cost about 90 instructions per first write on a spawn+exit of some 5,000).
//!
//! As with `OnceLock`, once `set` returns, the cell holds a value: a writer
//! that loses the race waits for the winner to finish writing (a move of the value), yielding
//! its thread meanwhile.

#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU8, Ordering};

/// Nothing written.
const EMPTY: u8 = 0;
/// A writer won and is writing the value.
const WRITING: u8 = 1;
/// The value is written and may be read.
const READY: u8 = 2;

/// A value written at most once; see the module documentation.
pub(crate) struct SetOnce<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once, by the one thread that moved `state` from EMPTY to
// WRITING, before it stores READY with Release; readers only form `&T` after seeing READY with
// Acquire, and nothing writes it after. So sharing a `SetOnce<T>` shares `&T` between threads
// (needs `T: Sync`) and may move a `T` in from another thread (`set` on a shared reference,
// needs `T: Send`), exactly as for `OnceLock<T>`.
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}
// SAFETY: sending the cell sends the `T` it may hold.
unsafe impl<T: Send> Send for SetOnce<T> {}

impl<T> SetOnce<T> {
    /// An empty cell.
    pub(crate) const fn new() -> SetOnce<T> {
        SetOnce {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, once written.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == READY {
            // SAFETY: READY is stored (with Release) only after the value is written, and it is
            // never written again nor dropped while `self` is borrowed.
            Some(unsafe { (*self.value.get()).assume_init_ref() })
        } else {
            None
        }
    }

    /// Writes `value` if nothing was written yet; otherwise gives it back, once the value
    /// written is readable.
    #[inline]
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        // A cell already written is refused without a read-modify-write (as a process's exit
        // reason, recorded before its future is dropped and offered again by its exit).
        let seen = self.state.load(Ordering::Acquire);
        if seen != EMPTY {
            if seen == WRITING {
                self.wait_written();
            }
            return Err(value);
        }
        if let Err(seen) =
            self.state
                .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Acquire)
        {
            if seen == WRITING {
                self.wait_written();
            }
            return Err(value);
        }
        // SAFETY: this thread alone moved `state` from EMPTY to WRITING, so no one else writes
        // the value, and no one reads it before READY is stored below.
        unsafe { (*self.value.get()).write(value) };
        self.state.store(READY, Ordering::Release);
        Ok(())
    }

    /// Waits until the writer that won has stored READY.
    #[cold]
    #[inline(never)]
    fn wait_written(&self) {
        while self.state.load(Ordering::Acquire) != READY {
            std::thread::yield_now();
        }
    }
}

impl<T> Default for SetOnce<T> {
    fn default() -> SetOnce<T> {
        SetOnce::new()
    }
}

impl<T> Drop for SetOnce<T> {
    fn drop(&mut self) {
        if *self.state.get_mut() == READY {
            // SAFETY: READY means the value was written; `&mut self` means no one borrows it,
            // and it is dropped only here, once.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SetOnce;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_first_write_stands() {
        let cell = SetOnce::new();
        assert_eq!(cell.get(), None);
        assert_eq!(cell.set(String::from("a")), Ok(()));
        assert_eq!(cell.set(String::from("b")), Err(String::from("b")));
        assert_eq!(cell.get().map(String::as_str), Some("a"));
    }

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_value_is_dropped_once_and_an_empty_cell_drops_nothing() {
        let drops = Arc::new(AtomicUsize::new(0));
        drop(SetOnce::<Counted>::new());
        let cell = SetOnce::new();
        assert!(cell.set(Counted(Arc::clone(&drops))).is_ok());
        // The loser's value is given back, and dropped here.
        assert!(cell.set(Counted(Arc::clone(&drops))).is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(cell);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn racing_writers_agree_on_one_value() {
        // Miri explores interleavings within each round: fewer rounds, within its time.
        for _ in 0..if cfg!(miri) { 10 } else { 100 } {
            let cell = Arc::new(SetOnce::new());
            let threads: Vec<_> = (0..4)
                .map(|i| {
                    let cell = Arc::clone(&cell);
                    std::thread::Builder::new()
                        .name("writer".into())
                        .spawn(move || {
                            let won = cell.set(vec![i; 8]).is_ok();
                            // Winner or loser, the whole winning value is readable after `set`.
                            let v = cell.get().expect("written once set returned");
                            assert!(v.iter().all(|&x| x == v[0]));
                            won
                        })
                        .expect("spawn")
                })
                .collect();
            let wins = threads
                .into_iter()
                .map(|t| t.join().expect("thread"))
                .filter(|&w| w)
                .count();
            assert_eq!(wins, 1);
            let v = cell.get().expect("written");
            assert!(v.iter().all(|&x| x == v[0]));
        }
    }
}
