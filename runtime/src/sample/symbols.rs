//! Naming sampled native addresses: function, file and line, inlined frames included.
//!
//! Done after sampling, on an ordinary thread, once per distinct address (a profile's samples
//! share most of their addresses), with allocation charging suppressed. `backtrace` reads the
//! binary's symbol table and DWARF line tables (gimli and addr2line under it), caching what it
//! parsed. Where DWARF names a function without its module (`debug = "line-tables-only"`),
//! the executable's symbol table gives the function an address lies in its qualified name
//! ([`super::symtab`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One frame an address stands for: a function, and where in the source, when known.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NativeFrame {
    /// The demangled function name, without its hash (`<unknown>` when the address has no
    /// symbol).
    pub function: String,
    /// The source file, when the binary has line tables.
    pub file: Option<String>,
    /// The line, when the binary has line tables.
    pub line: Option<u32>,
}

/// What `addr` stands for: its frames, outermost first (a function, then what was inlined into
/// it at that address). A return address (every native frame but a sample's first) should be
/// looked up one byte back, inside the call instruction: pass `return_address = true`.
pub fn symbolize(addr: u64, return_address: bool) -> Vec<NativeFrame> {
    // `backtrace::resolve` looks up the byte before the address it is given (it takes every
    // address for a return address): hand it the byte after the one to look up. A return
    // address is looked up one byte back, inside its call; any other address (an interrupted
    // instruction, a function's own address) exactly, or its function's first byte would name
    // the function laid out before it.
    let lookup = if return_address {
        addr
    } else {
        addr.saturating_add(1)
    };
    let mut frames = resolve(lookup);
    if frames.is_empty() {
        frames.push(NativeFrame {
            function: format!("{addr:#x}"),
            file: None,
            line: None,
        });
    }
    // `backtrace` gives the innermost (inlined) frame first.
    frames.reverse();
    // The outermost is the function the address lies in: where the debug info names it
    // without its module (`debug = "line-tables-only"`), the symbol table's name has it.
    if let Some(outer) = frames.first_mut()
        && !qualified(&outer.function)
        && let Some(name) = super::symtab::function_at(lookup.wrapping_sub(1))
    {
        outer.function = name.to_owned();
    }
    frames
}

/// Whether a function name has its module path (`app::crunch`, `<app::Cache>::get`), not
/// only its own name (`crunch`, `{closure#0}`, `poll<app::Task>`).
fn qualified(name: &str) -> bool {
    name.starts_with('<') || name.split('<').next().is_some_and(|n| n.contains("::"))
}

/// Names what `backtrace` finds at `after - 1`.
fn resolve(after: u64) -> Vec<NativeFrame> {
    let mut frames = Vec::new();
    crate::heap::suppressed(|| {
        backtrace::resolve(after as usize as *mut std::ffi::c_void, |symbol| {
            let function = symbol
                .name()
                .map_or_else(|| "<unknown>".to_owned(), |n| format!("{n:#}"));
            frames.push(NativeFrame {
                function,
                file: symbol.filename().map(|f| f.display().to_string()),
                line: symbol.lineno(),
            });
        });
    });
    frames
}

/// [`symbolize`] for many addresses, each looked up once: `(address, is a return address)`.
pub fn symbolize_all(
    addrs: impl IntoIterator<Item = (u64, bool)>,
) -> HashMap<(u64, bool), Vec<NativeFrame>> {
    let mut out = HashMap::new();
    for key in addrs {
        out.entry(key).or_insert_with(|| symbolize(key.0, key.1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_function_with_a_name() -> u64 {
        std::hint::black_box(a_function_with_a_name as *const () as usize as u64)
    }

    /// A function's own address names it, with this file, whatever is laid out just before it
    /// (CI's build put another function's last byte there).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "backtrace under Miri resolves only the frames of Miri's own backtraces"
    )]
    fn an_address_names_its_function_and_file() {
        let addr = a_function_with_a_name();
        let frames = symbolize(addr, false);
        let last = frames.last().expect("a frame");
        assert!(
            last.function.contains("a_function_with_a_name"),
            "{frames:?}"
        );
        if let Some(file) = &last.file {
            assert!(file.ends_with("symbols.rs"), "{file}");
        }
    }

    /// A return address is looked up one byte back, and only one: the byte after a function's
    /// first byte, as a return address, names that function (two bytes back would be what lies
    /// before it).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "backtrace under Miri resolves only the frames of Miri's own backtraces"
    )]
    fn a_return_address_is_looked_up_one_byte_back() {
        let addr = a_function_with_a_name();
        let frames = symbolize(addr + 1, true);
        assert!(
            frames
                .last()
                .is_some_and(|f| f.function.contains("a_function_with_a_name")),
            "{frames:?}"
        );
    }

    /// An address nothing maps to is printed as itself.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "backtrace under Miri resolves only the frames of Miri's own backtraces"
    )]
    fn an_unknown_address_is_printed_in_hex() {
        let frames = symbolize(0x10, false);
        assert_eq!(frames.len(), 1);
        assert!(frames[0].function == "0x10" || frames[0].function == "<unknown>");
    }
}
