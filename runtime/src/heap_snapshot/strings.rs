//! The strings of a snapshot: interned, but for registered names and pids (one each per
//! process, rarely shared: a name is kept as the registry's own `Arc`, and a pid is formatted
//! as it is written, after the others).

use rustc_hash::FxHashMap;

use crate::name::Name;

/// A string of the snapshot.
enum Text {
    Static(&'static str),
    Shared(Name),
    Owned(Box<str>),
}

impl Text {
    fn as_str(&self) -> &str {
        match self {
            Text::Static(s) => s,
            Text::Shared(s) => s,
            Text::Owned(s) => s,
        }
    }
}

/// The strings every snapshot has, by id.
pub(super) const EMPTY: u32 = 0;
pub(super) const MAILBOX: u32 = 1;
pub(super) const MAILBOX_TYPE: u32 = 2;
pub(super) const LEN: u32 = 3;
pub(super) const REGISTERED_NAME: u32 = 4;
pub(super) const LINK: u32 = 5;
pub(super) const MONITOR: u32 = 6;
pub(super) const OBJECTS: u32 = 7;
const FIXED: [&str; 8] = [
    "",
    "mailbox",
    "runtime::Mailbox",
    "len",
    "registered_name",
    "link",
    "monitor",
    "objects",
];

/// The strings of a snapshot, by id.
pub(super) struct Strings {
    list: Vec<Text>,
    index: FxHashMap<Box<str>, u32>,
}

impl Strings {
    pub(super) fn new() -> Strings {
        let mut s = Strings {
            list: Vec::new(),
            index: FxHashMap::default(),
        };
        for f in FIXED {
            s.list.push(Text::Static(f));
            s.index.insert(f.into(), s.list.len() as u32 - 1);
        }
        s
    }

    /// The id of `text`, added if new.
    pub(super) fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(Text::Owned(text.into()));
        self.index.insert(text.into(), id);
        id
    }

    /// The id of `n` in decimal.
    pub(super) fn number(&mut self, n: u64) -> u32 {
        let mut buf = [0u8; 20];
        let text = decimal(n, &mut buf);
        self.intern(text)
    }

    /// A registered name's id (not interned: each is its process's own).
    pub(super) fn name(&mut self, name: &Name) -> u32 {
        self.list.push(Text::Shared(name.clone()));
        self.list.len() as u32 - 1
    }

    pub(super) fn len(&self) -> u32 {
        self.list.len() as u32
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(Text::as_str)
    }
}

/// `n` in decimal, in `buf`.
pub(super) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::{Strings, decimal};

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut buf = [0; 20];
        assert_eq!(decimal(0, &mut buf), "0");
        assert_eq!(decimal(1207, &mut buf), "1207");
        assert_eq!(decimal(u64::MAX, &mut buf), u64::MAX.to_string());
    }

    #[test]
    fn strings_are_interned_but_names() {
        let mut s = Strings::new();
        let n = s.len();
        assert_eq!(s.intern("a"), n);
        assert_eq!(s.number(12), n + 1);
        assert_eq!(s.intern("12"), n + 1);
        assert_eq!(s.intern("mailbox"), super::MAILBOX);
        let name: crate::name::Name = "a".into();
        assert_eq!(s.name(&name), n + 2);
        assert_eq!(
            s.iter().skip(n as usize).collect::<Vec<_>>(),
            ["a", "12", "a"]
        );
    }
}
