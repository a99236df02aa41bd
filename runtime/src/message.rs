//! Messages: any `Send + 'static` value, boxed once when sent.
//!
//! A process's mailbox holds values of any type, as an Erlang mailbox holds any term. The
//! typed receive functions ([`receive`](crate::receive), [`receive_where`](crate::receive_where))
//! select by type, so most code never sees a [`Message`]; [`receive_any`](crate::receive_any)
//! hands out the untyped message for code that dispatches on several types.

use std::any::{Any, TypeId};
use std::fmt;

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
    value: Box<dyn Any + Send>,
}

impl Message {
    /// Wraps a value as a message.
    pub fn new<M: Any + Send>(value: M) -> Message {
        Message {
            value: Box::new(value),
        }
    }

    /// Whether the message holds a `T`.
    #[inline]
    pub fn is<T: Any>(&self) -> bool {
        (*self.value).type_id() == TypeId::of::<T>()
    }

    /// The value, if it is a `T`.
    #[inline]
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref()
    }

    /// Takes the value out if it is a `T`; gives the message back otherwise.
    ///
    /// # Errors
    /// The message itself, unchanged, when it does not hold a `T`.
    #[inline]
    pub fn downcast<T: Any>(self) -> Result<T, Message> {
        match self.value.downcast::<T>() {
            Ok(value) => Ok(*value),
            Err(value) => Err(Message { value }),
        }
    }
}

impl Message {
    /// Moves the message's envelope into `to`'s heap account (see [`crate::heap`]).
    #[inline]
    pub(crate) fn move_to(&mut self, to: &'static crate::heap::Account) {
        crate::heap::move_box(&mut self.value, to);
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message").finish_non_exhaustive()
    }
}
