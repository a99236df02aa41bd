//! [`Signals::Keep`](super::Signals::Keep) for a signal the program has no handler of: tprof's
//! own handler, installed with `sigaction` (not through `signal-hook`'s registry, which would
//! hide whether anyone else handles the signal), wakes a thread that writes every node's
//! profile and then looks at the signal's disposition. Still tprof's handler: nobody else
//! handles the signal, and the program dies of it, as it would have without tprof. Another
//! one (a handler the program installed since, with `sigaction` or through `signal-hook`,
//! `tokio::signal` or `ctrlc`, which replace tprof's and may call it in turn): the program
//! handles it, and runs on.

use std::sync::atomic::{AtomicI32, Ordering};

/// The write end of the pipe the handler wakes the thread through (-1 before it is open).
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// The handler: writes the signal's number (one byte) to [`WAKE`], and nothing else. It takes
/// no lock, allocates nothing, and leaves `errno` as it found it.
extern "C" fn handler(signal: libc::c_int) {
    let fd = WAKE.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let saved = errno();
    let byte = signal as u8;
    // SAFETY: `write` of one byte from a live local to a file descriptor is async-signal-safe;
    // `fd` is the pipe's write end, opened before the handler was installed and never closed
    // (a full pipe fails with EAGAIN, the descriptor being non-blocking, and the thread is
    // awake then anyway).
    #[allow(unsafe_code)]
    unsafe {
        libc::write(fd, (&raw const byte).cast(), 1);
    }
    set_errno(saved);
}

/// `errno`'s location on this platform.
#[allow(unsafe_code)]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: both functions only return the calling thread's `errno` address, and are
    // async-signal-safe.
    unsafe {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            libc::__errno_location()
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            libc::__error()
        }
    }
}

fn errno() -> libc::c_int {
    // SAFETY: the address of this thread's `errno`, which lives as long as the thread.
    #[allow(unsafe_code)]
    unsafe {
        *errno_location()
    }
}

fn set_errno(value: libc::c_int) {
    // SAFETY: as in `errno`.
    #[allow(unsafe_code)]
    unsafe {
        *errno_location() = value;
    }
}

/// The address of [`handler`], as `sigaction` holds it.
fn ours() -> libc::sighandler_t {
    handler as extern "C" fn(libc::c_int) as libc::sighandler_t
}

/// Whether `signal` has its default action now (no handler: the program has none of its own).
pub(super) fn is_default(signal: libc::c_int) -> bool {
    disposition(signal) == Some(libc::SIG_DFL)
}

/// The handler `signal` has now, if `sigaction` says.
fn disposition(signal: libc::c_int) -> Option<libc::sighandler_t> {
    // SAFETY: `sigaction` with a null new action only reads the current one into `old`, a
    // zeroed (valid) struct.
    #[allow(unsafe_code)]
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
    }
}

/// Installs tprof's handler for `signals` (which have no handler of the program's) and starts
/// the thread it wakes: for each signal, `write` writes every node's profile, and then the
/// program dies of the signal unless it handles it by then.
pub(super) fn install(
    signals: &[libc::c_int],
    write: impl Fn(&'static str) + Send + 'static,
) -> std::io::Result<()> {
    let mut fds = [0; 2];
    // SAFETY: `pipe2` writes two descriptors into the array it is given, of two `c_int`s.
    #[allow(unsafe_code)]
    let opened = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if opened != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read_end, write_end] = fds;
    // SAFETY: `fcntl` on a descriptor just opened; F_SETFL with O_NONBLOCK changes only its
    // flags (the handler must never block).
    #[allow(unsafe_code)]
    unsafe {
        libc::fcntl(write_end, libc::F_SETFL, libc::O_NONBLOCK);
    }
    WAKE.store(write_end, Ordering::Relaxed);
    for &signal in signals {
        // SAFETY: installs `handler`, an `extern "C" fn(c_int)` as a plain (not SA_SIGINFO)
        // handler needs, with an empty mask, in a zeroed (valid) struct.
        #[allow(unsafe_code)]
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ours();
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    std::thread::Builder::new()
        .name("tprof-signals-keep".into())
        .spawn(move || {
            let mut byte = 0u8;
            loop {
                // SAFETY: reads at most one byte into a live local from the pipe's read end,
                // which this thread alone owns.
                #[allow(unsafe_code)]
                let n = unsafe { libc::read(read_end, (&raw mut byte).cast(), 1) };
                if n != 1 {
                    if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return;
                }
                let signal = libc::c_int::from(byte);
                write(super::signal_name(signal).unwrap_or("a signal"));
                if disposition(signal) == Some(ours()) {
                    // Nobody else handles it: dies of it, as without tprof.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                    std::process::exit(128 + signal);
                }
            }
        })?;
    Ok(())
}
