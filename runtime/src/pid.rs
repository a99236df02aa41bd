//! Process identifiers.
//!
//! A [`Pid`] names one process of one node for ever: it is made of the node's number, the index
//! of the process's slot in the node's process table, and the slot's serial at the time the
//! process was spawned. Slots are reused after a process exits, but each reuse bumps the serial,
//! so a stale pid never resolves to the newer process that now lives in its slot.
//!
//! Pids print the way Erlang prints them, `<N.I.S>`, and parse back from that text.

use std::fmt;
use std::str::FromStr;

/// The identifier of a process: node, slot index and serial.
///
/// `Pid` is `Copy` and cheap to compare and hash. It prints as `<node.index.serial>`:
///
/// ```
/// use runtime::Pid;
///
/// let pid: Pid = "<1.42.3>".parse().unwrap();
/// assert_eq!(pid.node(), 1);
/// assert_eq!(pid.index(), 42);
/// assert_eq!(pid.serial(), 3);
/// assert_eq!(pid.to_string(), "<1.42.3>");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid {
    node: u32,
    index: u32,
    serial: u32,
}

impl Pid {
    /// Builds a pid from its three parts.
    ///
    /// A pid built by hand names whatever process (if any) holds that slot with that serial;
    /// sending to one that names no live process is a no-op, as in Erlang.
    pub const fn from_parts(node: u32, index: u32, serial: u32) -> Pid {
        Pid {
            node,
            index,
            serial,
        }
    }

    /// The number of the node the process lives on.
    pub const fn node(self) -> u32 {
        self.node
    }

    /// The index of the process's slot in its node's process table.
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The serial of the slot when the process was spawned.
    pub const fn serial(self) -> u32 {
        self.serial
    }

    /// The pid under which profiles show the traced calls made outside any process (in
    /// `main`, a plain tokio task, a thread of its own) on thread `thread` of node `node`, or on
    /// every thread of the node together when `thread` is 0: serial 0, which no process ever
    /// has. It names no process (sending to it does nothing).
    ///
    /// ```
    /// use runtime::Pid;
    ///
    /// let outside = Pid::outside(1, 0);
    /// assert!(outside.is_outside());
    /// assert_eq!(outside.to_string(), "<1.0.0>");
    /// assert!(!Pid::from_parts(1, 0, 1).is_outside());
    /// ```
    pub const fn outside(node: u32, thread: u32) -> Pid {
        Pid {
            node,
            index: thread,
            serial: 0,
        }
    }

    /// Whether this pid names traced calls made outside any process ([`Pid::outside`]), not
    /// a process.
    pub const fn is_outside(self) -> bool {
        self.serial == 0
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}.{}.{}>", self.node, self.index, self.serial)
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The error returned when text does not parse as a [`Pid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePidError {
    input: String,
}

impl ParsePidError {
    /// The text that failed to parse.
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for ParsePidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a pid: expected `<node.index.serial>` with three decimal numbers, such as `<1.42.0>`",
            self.input
        )
    }
}

impl std::error::Error for ParsePidError {}

impl FromStr for Pid {
    type Err = ParsePidError;

    fn from_str(s: &str) -> Result<Pid, ParsePidError> {
        let err = || ParsePidError {
            input: s.to_owned(),
        };
        let inner = s
            .trim()
            .strip_prefix('<')
            .and_then(|rest| rest.strip_suffix('>'))
            .ok_or_else(err)?;
        let mut parts = inner.split('.');
        let mut next = || -> Result<u32, ParsePidError> {
            let part = parts.next().ok_or_else(err)?;
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            part.parse().map_err(|_| err())
        };
        let pid = Pid::from_parts(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let pid = Pid::from_parts(3, 17, 9);
        assert_eq!(pid.to_string(), "<3.17.9>");
        assert_eq!("<3.17.9>".parse::<Pid>(), Ok(pid));
        assert_eq!(format!("{pid:?}"), "<3.17.9>");
        let max = Pid::from_parts(u32::MAX, u32::MAX, u32::MAX);
        assert_eq!(max.to_string().parse::<Pid>(), Ok(max));
    }

    #[test]
    fn bad_text_is_a_typed_error_naming_the_input() {
        for bad in [
            "",
            "<>",
            "<1.2>",
            "<1.2.3.4>",
            "1.2.3",
            "<1.2.3",
            "<a.2.3>",
            "<1..3>",
            "<-1.2.3>",
            "<1.2.99999999999>",
            "<+1.2.3>",
        ] {
            let err = bad.parse::<Pid>().unwrap_err();
            assert_eq!(err.input(), bad);
            assert!(err.to_string().contains("<node.index.serial>"), "{err}");
        }
    }
}
