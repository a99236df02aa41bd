//! Messages: any `Send + 'static` value; one of up to two words travels inline, a larger one is
//! boxed once when sent.
//!
//! A process's mailbox holds values of any type, as an Erlang mailbox holds any term. The
//! typed receive functions ([`receive`](crate::receive), [`receive_where`](crate::receive_where))
//! select by type, so most code never sees a [`Message`]; [`receive_any`](crate::receive_any)
//! hands out the untyped message for code that dispatches on several types.
//!
//! A [`Message`] is two words of storage and a pointer to a per-type table (the type's
//! `TypeId`, how to drop it, how to move its box to another heap account). A value that fits
//! the two words (size at most 16 bytes, alignment at most 8: integers, pids, small enums and
//! structs) is stored in them, so sending it allocates nothing; a larger one is boxed and its
//! `Box` stored instead, as before (its envelope is then charged to the receiver, see
//! [`crate::heap`]).
//!
//! # Safety
//!
//! This file holds the type-erased storage, hence its `unsafe`. The contract: a message's
//! `storage` holds exactly what [`Message::new`] wrote for the type its `vtable` was made for
//! (the value itself when [`is_inline`] holds for that type, else its `Box`), live until the
//! message drops it (through the table) or [`Message::downcast`] reads it out and forgets the
//! message; every access first checks the `TypeId` against the type it reads as. The inline
//! storage is word-aligned and two words long, which `is_inline` checks a type against.
//! `Message` is `Send` (only `Send` values go in) and not `Sync`, as `Box<dyn Any + Send>`.
#![allow(unsafe_code)]

use std::any::{Any, TypeId};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};

/// The inline storage: two words.
type Storage = MaybeUninit<[usize; 2]>;

/// Whether a `T` is stored inline (else its `Box<T>`, one word, is).
const fn is_inline<T>() -> bool {
    size_of::<T>() <= size_of::<Storage>() && align_of::<T>() <= align_of::<Storage>()
}

/// What a message knows of its value's type.
struct VTable {
    type_id: TypeId,
    boxed: bool,
    /// The bytes of its box, when boxed (0 inline): what its envelope holds on the heap.
    box_bytes: usize,
    /// Drops the value (or its box) held in the storage.
    drop: unsafe fn(*mut Storage),
    /// Moves the box held in the storage to another heap account (boxed values only).
    move_to: unsafe fn(*mut Storage, &'static crate::heap::Account),
}

/// Drops the `T` stored by [`Message::new`].
///
/// # Safety
/// `storage` holds a `T` (inline) or a `Box<T>` written by `Message::new::<T>`, not yet
/// dropped or read out; it is not used again.
unsafe fn drop_value<T>(storage: *mut Storage) {
    if is_inline::<T>() {
        // SAFETY: per the contract, the storage holds a live `T` (suitably aligned: `is_inline`
        // checked the alignment).
        unsafe { std::ptr::drop_in_place(storage.cast::<T>()) }
    } else {
        // SAFETY: per the contract, the storage holds a live `Box<T>`.
        unsafe { std::ptr::drop_in_place(storage.cast::<Box<T>>()) }
    }
}

/// Moves the box of a boxed `T` to `to`'s account.
///
/// # Safety
/// As [`drop_value`], but the value stays in place, and `T` is not stored inline.
unsafe fn move_value<T>(storage: *mut Storage, to: &'static crate::heap::Account) {
    if !is_inline::<T>() {
        // SAFETY: per the contract, the storage holds a live `Box<T>`, borrowed mutably here
        // through the message's `&mut self`.
        crate::heap::move_box(unsafe { &mut *storage.cast::<Box<T>>() }, to);
    }
}

/// The table of one type.
struct Table<T>(PhantomData<T>);

impl<T: Any + Send> Table<T> {
    const VTABLE: VTable = VTable {
        type_id: TypeId::of::<T>(),
        boxed: !is_inline::<T>(),
        box_bytes: if is_inline::<T>() { 0 } else { size_of::<T>() },
        drop: drop_value::<T>,
        move_to: move_value::<T>,
    };
}

/// A message of any type, as taken from a mailbox by [`receive_any`](crate::receive_any).
///
/// ```
/// use runtime::Message;
///
/// let msg = Message::new(42u32);
/// assert!(msg.is::<u32>());
/// assert_eq!(msg.downcast_ref::<u32>(), Some(&42));
/// let msg = msg.downcast::<String>().unwrap_err(); // not a String: the message comes back
/// assert_eq!(msg.downcast::<u32>().ok(), Some(42));
/// ```
pub struct Message {
    /// The value (when [`is_inline`]) or its `Box`, as written by [`Message::new`] for the type
    /// `vtable` describes.
    storage: Storage,
    vtable: &'static VTable,
    /// Send but not Sync, as a `Box<dyn Any + Send>`: the value need not be `Sync`.
    _value: PhantomData<Box<dyn Any + Send>>,
}

impl Message {
    /// Wraps a value as a message.
    #[inline]
    pub fn new<M: Any + Send>(value: M) -> Message {
        let mut storage = Storage::uninit();
        if is_inline::<M>() {
            // SAFETY: `is_inline` checked that an `M` fits the storage and its alignment.
            unsafe { storage.as_mut_ptr().cast::<M>().write(value) }
        } else {
            // SAFETY: a `Box<M>` (`M` is sized) is one word, word-aligned: it fits.
            unsafe { storage.as_mut_ptr().cast::<Box<M>>().write(Box::new(value)) }
        }
        Message {
            storage,
            vtable: &Table::<M>::VTABLE,
            _value: PhantomData,
        }
    }

    /// Whether the message holds a `T`.
    #[inline]
    pub fn is<T: Any>(&self) -> bool {
        self.vtable.type_id == TypeId::of::<T>()
    }

    /// The value, if it is a `T`.
    #[inline]
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        if !self.is::<T>() {
            return None;
        }
        let storage = self.storage.as_ptr();
        // SAFETY: the type check shows `new::<T>` wrote the storage: it holds a live `T`
        // inline, or a live `Box<T>`; both are borrowed for as long as `self` is.
        Some(unsafe {
            if is_inline::<T>() {
                &*storage.cast::<T>()
            } else {
                &**storage.cast::<Box<T>>()
            }
        })
    }

    /// Takes the value out if it is a `T`; gives the message back otherwise.
    ///
    /// # Errors
    /// The message itself, unchanged, when it does not hold a `T`.
    #[inline]
    pub fn downcast<T: Any>(self) -> Result<T, Message> {
        if !self.is::<T>() {
            return Err(self);
        }
        // Read out once, never dropped as a message.
        let this = ManuallyDrop::new(self);
        let storage = this.storage.as_ptr();
        // SAFETY: as in `downcast_ref`; the value (or box) is read out exactly once, and the
        // message that held it is forgotten, so it is neither dropped nor used again.
        Ok(unsafe {
            if is_inline::<T>() {
                storage.cast::<T>().read()
            } else {
                *storage.cast::<Box<T>>().read()
            }
        })
    }

    /// The bytes its envelope holds on the heap: its value's size when boxed, 0 when stored
    /// inline (what the value itself owns is not counted: it belongs to whoever allocated it).
    #[inline]
    pub(crate) fn envelope_bytes(&self) -> usize {
        self.vtable.box_bytes
    }

    /// Moves the message's envelope, if it has one (a boxed value), into `to`'s heap account
    /// (see [`crate::heap`]).
    #[inline]
    pub(crate) fn move_to(&mut self, to: &'static crate::heap::Account) {
        if self.vtable.boxed {
            // SAFETY: `vtable` describes the type `new` wrote into the storage, which is live
            // (not yet dropped or read out: `downcast` forgets the message it reads).
            unsafe { (self.vtable.move_to)(&raw mut self.storage, to) }
        }
    }
}

impl Drop for Message {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `move_to`; the storage is not used after this.
        unsafe { (self.vtable.drop)(&raw mut self.storage) }
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops; `N` words of padding choose inline (0 or 1) or boxed (2 and more).
    struct Counted<const N: usize>(Arc<AtomicUsize>, [u64; N]);

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn drops_once<const N: usize>(inline: bool) {
        assert_eq!(is_inline::<Counted<N>>(), inline);
        let drops = Arc::new(AtomicUsize::new(0));
        // Dropped as a message.
        drop(Message::new(Counted::<N>(Arc::clone(&drops), [7; N])));
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        // A failed downcast gives it back intact; a good one hands it out, dropped once.
        let msg = Message::new(Counted::<N>(Arc::clone(&drops), [7; N]));
        let msg = msg.downcast::<u64>().expect_err("not a u64");
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(msg.downcast_ref::<Counted<N>>().map(|c| c.1), Some([7; N]));
        let value = msg.downcast::<Counted<N>>().expect("a Counted");
        assert_eq!(value.1, [7; N]);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(value);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn values_of_every_size_drop_exactly_once() {
        drops_once::<0>(true);
        drops_once::<1>(true);
        drops_once::<2>(false);
        drops_once::<64>(false);
    }

    #[test]
    fn an_envelope_holds_the_bytes_of_its_box_only() {
        assert_eq!(Message::new(7u64).envelope_bytes(), 0);
        assert_eq!(Message::new([0u64; 2]).envelope_bytes(), 0);
        assert_eq!(Message::new([0u64; 3]).envelope_bytes(), 24);
        // A `Vec`'s buffer is the sender's: only the `Vec` itself (three words) is in the box.
        assert_eq!(Message::new(vec![0u8; 1000]).envelope_bytes(), 24);
        assert_eq!(Message::new((vec![0u8; 1000], 1u64)).envelope_bytes(), 32);
    }

    #[test]
    fn types_are_told_apart_and_over_aligned_values_are_boxed() {
        assert!(!is_inline::<u128>() || align_of::<u128>() <= 8);
        let msg = Message::new(u128::MAX - 1);
        assert!(msg.is::<u128>() && !msg.is::<u64>());
        assert_eq!(msg.downcast::<u128>().ok(), Some(u128::MAX - 1));
        let msg = Message::new(());
        assert!(msg.is::<()>());
        assert_eq!(msg.downcast_ref::<()>(), Some(&()));
        let msg = Message::new(String::from("boxed"));
        assert_eq!(
            msg.downcast_ref::<String>().map(String::as_str),
            Some("boxed")
        );
        assert!(msg.downcast_ref::<&str>().is_none());
        let msg = Message::new("inline");
        assert_eq!(msg.downcast::<&'static str>().ok(), Some("inline"));
        // A message moves between threads with its value.
        let msg = Message::new((1u32, 2u8));
        let back = std::thread::Builder::new()
            .name("message-test".into())
            .spawn(move || msg.downcast::<(u32, u8)>().ok())
            .expect("spawned")
            .join()
            .expect("joined");
        assert_eq!(back, Some((1, 2)));
    }
}
