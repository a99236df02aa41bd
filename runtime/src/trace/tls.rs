//! Borrowing a thread-local without `LocalKey::with`'s closure call on the hot paths.

use std::thread::LocalKey;

/// `key.with(f)`, with `f` inlined into its caller: `LocalKey::with` takes its closure as a
/// generic argument, and the compiler declines to inline `with` once the closure is more than
/// a few instructions, which put a call and a closure on the stack on every traced call.
///
/// For thread-locals without a destructor only (checked at compile time), whose storage stays
/// valid for the whole life of their thread once `with` has handed out its address.
#[inline(always)]
pub(super) fn with_local<T: 'static, R>(key: &'static LocalKey<T>, f: impl FnOnce(&T) -> R) -> R {
    const { assert!(!std::mem::needs_drop::<T>()) };
    let p: *const T = key.with(|v| v as *const T);
    // SAFETY: `T` has no destructor (asserted above), so the thread-local's storage, once
    // `with` has handed out its address, stays valid until this thread ends, and `with` hands
    // out the same address every time; `p` is dereferenced on this thread only, for the length
    // of `f`, exactly as `key.with(f)` would lend it, and `f` cannot keep the reference (it is
    // higher-ranked over its lifetime). Every traced and counted call in the tests goes through
    // here.
    #[allow(unsafe_code)]
    let v = unsafe { &*p };
    f(v)
}
