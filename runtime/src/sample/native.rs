//! Walking a thread's native stack by frame pointers, from a signal handler.
//!
//! Each frame built with frame pointers starts with the caller's frame pointer and, above it,
//! the return address. The walk starts at the interrupted context's frame pointer and follows
//! the chain while every address it reads lies inside the part of the thread's own stack that
//! is in use: at or above the interrupted stack pointer, below the stack's top, aligned, and
//! strictly rising. That memory is mapped and readable whatever the code did with its frame
//! pointer register, so a chain broken by code built without frame pointers ends the walk;
//! it never faults. (libgcc's unwinder, which pprof-rs uses, takes locks and allocates, and has
//! crashed programs from signal handlers; this takes neither.)
//!
//! The loads go through inline assembly, outside Rust's abstract machine: the words read are
//! whatever the stack holds, initialized or not, and no Rust value is made from memory the
//! abstract machine would call uninitialized until it is a plain `u64`.
//!
//! Rust's default on x86_64 Linux omits frame pointers: build with
//! `RUSTFLAGS="-C force-frame-pointers=yes"` (this workspace's `.cargo/config.toml` does) for
//! whole native stacks. [`walkable`] tells, once per process, whether this build's frames can
//! be walked; when they cannot, samples keep the interrupted instruction only (and their traced
//! stacks, which need no walking).

/// A thread's stack, as `[lo, hi)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StackBounds {
    pub(crate) lo: usize,
    pub(crate) hi: usize,
}

/// The calling thread's stack bounds, from `pthread_getattr_np` (which reads `/proc/self/maps`
/// for the main thread: never call it from a signal handler).
#[cfg(target_os = "linux")]
pub(crate) fn current_stack_bounds() -> Option<StackBounds> {
    // SAFETY: `attr` is initialized by `pthread_getattr_np` before it is read, and destroyed
    // once; `addr` and `size` are written by `pthread_attr_getstack` on success only, which is
    // checked. No pointer outlives the block.
    #[allow(unsafe_code)]
    unsafe {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        ok.then(|| StackBounds {
            lo: addr as usize,
            hi: addr as usize + size,
        })
    }
}

/// Reads the word at `addr`.
///
/// # Safety
/// `addr` must be 8-aligned and `addr..addr + 8` mapped and readable for the whole call.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn load(addr: usize) -> u64 {
    #[cfg(miri)]
    {
        // Miri runs no assembly: the same read as a Rust one, through the provenance the
        // memory's owner exposed (the tests' buffers standing for stacks: `as usize` exposes),
        // so that Miri checks that the walk reads inside them and nowhere else.
        // SAFETY: as below, by the caller.
        unsafe { std::ptr::with_exposed_provenance::<u64>(addr).read() }
    }
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let v: u64;
        // SAFETY: the caller guarantees the address is mapped and readable; the asm reads 8
        // bytes there and nothing else, touches no stack and keeps the flags.
        unsafe {
            std::arch::asm!("mov {v}, qword ptr [{a}]", a = in(reg) addr, v = out(reg) v,
                options(nostack, readonly, preserves_flags));
        }
        v
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        let v: u64;
        // SAFETY: as above.
        unsafe {
            std::arch::asm!("ldr {v}, [{a}]", a = in(reg) addr, v = out(reg) v,
                options(nostack, readonly, preserves_flags));
        }
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", miri)))]
    {
        let _ = addr;
        0
    }
}

/// Walks frame pointers from `fp`, after the interrupted instruction `pc`, into `out`
/// (innermost first); returns how many addresses it wrote and whether the chain went on past
/// `out`'s end. Reads only words inside `[sp, bounds.hi)`. Async-signal-safe: no call, no
/// lock, no allocation.
pub(crate) fn walk(
    pc: u64,
    fp: usize,
    sp: usize,
    bounds: StackBounds,
    out: &mut [u64],
) -> (usize, bool) {
    if out.is_empty() {
        return (0, pc != 0);
    }
    out[0] = pc;
    let mut n = 1;
    // `[sp, hi)` is the part of the stack in use only when `sp` is inside the stack: the
    // interrupted code may run on another one (a signal's alternate stack, a coroutine's),
    // and then no part of this one is known to be mapped (the main thread's bounds reach
    // below its stack's mapping, to the size it may grow to).
    if sp < bounds.lo || sp >= bounds.hi {
        return (n, false);
    }
    let lo = sp;
    let hi = bounds.hi;
    let mut fp = fp;
    while fp >= lo && fp.is_multiple_of(8) && fp.checked_add(16).is_some_and(|end| end <= hi) {
        if n == out.len() {
            return (n, true);
        }
        // SAFETY: `fp` and `fp + 8` are 8-aligned words inside `[sp, hi)`, `sp` being inside
        // the thread's stack (checked above): the part of this thread's stack in use when it
        // was interrupted (from its stack pointer up to the stack's top), which stays mapped
        // and readable while the handler runs on the same thread below `sp`.
        #[allow(unsafe_code)]
        let (next, ret) = unsafe { (load(fp) as usize, load(fp + 8)) };
        if ret == 0 {
            break;
        }
        out[n] = ret;
        n += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
    (n, false)
}

/// The interrupted context's (pc, frame pointer, stack pointer), from a signal handler's
/// `ucontext_t`.
///
/// # Safety
/// `ctx` must be the third argument of an `SA_SIGINFO` signal handler, valid for its length.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) unsafe fn registers(ctx: *const libc::c_void) -> (u64, usize, usize) {
    // SAFETY: the caller passes the kernel's `ucontext_t`.
    let uc = unsafe { &*ctx.cast::<libc::ucontext_t>() };
    #[cfg(target_arch = "x86_64")]
    {
        let g = &uc.uc_mcontext.gregs;
        (
            g[libc::REG_RIP as usize] as u64,
            g[libc::REG_RBP as usize] as usize,
            g[libc::REG_RSP as usize] as usize,
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        let m = &uc.uc_mcontext;
        (m.pc, m.regs[29] as usize, m.sp as usize)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = uc;
        (0, 0, 0)
    }
}

/// The calling function's frame pointer.
#[inline(always)]
fn frame_pointer() -> usize {
    let fp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: copies a register, nothing else.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: copies a register, nothing else.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = 0;
    }
    fp
}

/// The calling function's stack pointer: where the part of the stack in use starts.
///
/// Not the address of a local, lowered to the frame pointer when that is lower: in code built
/// without frame pointers the frame pointer register holds anything, and taken for the stack
/// pointer it would let the walk read below the stack in use (on the main thread, below its
/// stack's mapping: a fault).
#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: copies a register, nothing else.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: copies a register, nothing else.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // No walk here (`load` reads nothing): the address of a local is near enough.
        let marker = 0u8;
        sp = std::ptr::addr_of!(marker) as usize;
    }
    sp
}

/// Walks the calling thread's stack from its caller's frame (no signal: the allocation
/// sampler) into `out`, innermost first: `out[0]` is 0 (there is no interrupted instruction),
/// then return addresses. As [`walk`]: reads only words of the stack in use, calls, locks and
/// allocates nothing.
#[inline(always)]
pub(crate) fn walk_here(bounds: StackBounds, out: &mut [u64]) -> (usize, bool) {
    walk(0, frame_pointer(), stack_pointer(), bounds, out)
}

#[inline(never)]
fn probe_a(bounds: StackBounds, out: &mut [u64]) -> usize {
    let n = probe_b(bounds, out);
    std::hint::black_box(n)
}

#[inline(never)]
fn probe_b(bounds: StackBounds, out: &mut [u64]) -> usize {
    let n = probe_c(bounds, out);
    std::hint::black_box(n)
}

#[inline(never)]
fn probe_c(bounds: StackBounds, out: &mut [u64]) -> usize {
    walk_here(bounds, out).0
}

/// Whether this build's native stacks can be walked by frame pointers: a walk from three
/// nested functions of this crate finds at least their frames. Measured once.
pub fn walkable() -> bool {
    static WALKABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WALKABLE.get_or_init(|| {
        if !cfg!(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )) {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            let Some(bounds) = current_stack_bounds() else {
                return false;
            };
            let mut out = [0u64; 16];
            // The leaf slot (no pc here) plus the three probes' callers.
            probe_a(bounds, &mut out) >= 4
        }
        #[cfg(not(target_os = "linux"))]
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain laid out by hand in a buffer standing for a stack: the walk follows it, stops
    /// where it leaves the bounds, goes down, or is misaligned, and never reads outside.
    #[test]
    fn the_walk_follows_a_chain_and_stops_at_its_breaks() {
        let mut stack = vec![0u64; 64];
        let base = stack.as_ptr() as usize;
        let at = |i: usize| base + i * 8;
        // Frames at words 4, 10 and 20: [fp] = next fp, [fp + 8] = return address.
        stack[4] = at(10) as u64;
        stack[5] = 0x1111;
        stack[10] = at(20) as u64;
        stack[11] = 0x2222;
        stack[20] = at(200) as u64; // outside: the walk ends after this frame
        stack[21] = 0x3333;
        let bounds = StackBounds {
            lo: base,
            hi: base + 64 * 8,
        };
        let mut out = [0u64; 8];
        let (n, more) = walk(0xaaaa, at(4), at(2), bounds, &mut out);
        assert_eq!(&out[..n], &[0xaaaa, 0x1111, 0x2222, 0x3333]);
        assert!(!more);

        // A chain that goes down is cut there.
        stack[10] = at(6) as u64;
        let (n, _) = walk(0xaaaa, at(4), at(2), bounds, &mut out);
        assert_eq!(&out[..n], &[0xaaaa, 0x1111, 0x2222]);

        // A frame pointer below the stack pointer, or misaligned, is not followed at all.
        let (n, _) = walk(0xaaaa, at(4), at(5), bounds, &mut out);
        assert_eq!(&out[..n], &[0xaaaa]);
        let (n, _) = walk(0xaaaa, at(4) + 3, at(2), bounds, &mut out);
        assert_eq!(&out[..n], &[0xaaaa]);

        // A full buffer says the chain went on.
        stack[10] = at(20) as u64;
        let mut short = [0u64; 2];
        let (n, more) = walk(0xaaaa, at(4), at(2), bounds, &mut short);
        assert_eq!((n, more), (2, true));
        assert_eq!(short, [0xaaaa, 0x1111]);

        // A stack pointer outside the stack (the interrupted code ran on another one) says
        // nothing of what is mapped: no frame pointer is followed, even one inside the stack.
        let inner = StackBounds {
            lo: at(8),
            hi: base + 64 * 8,
        };
        let (n, _) = walk(0xaaaa, at(10), at(2), inner, &mut out);
        assert_eq!(&out[..n], &[0xaaaa]);
        let (n, _) = walk(0xaaaa, at(10), base + 64 * 8, inner, &mut out);
        assert_eq!(&out[..n], &[0xaaaa]);
        let (n, _) = walk(0xaaaa, at(10), at(9), inner, &mut out);
        assert_eq!(&out[..n], &[0xaaaa, 0x2222, 0x3333]);
        drop(stack);
    }

    /// This workspace builds with frame pointers (`.cargo/config.toml`), so its own stacks walk.
    #[test]
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[cfg_attr(miri, ignore = "reads the frame pointer register with inline assembly")]
    fn this_build_walks() {
        assert!(
            walkable(),
            "built without frame pointers? see .cargo/config.toml"
        );
    }
}
