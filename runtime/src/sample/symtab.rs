//! The executable's symbol table, for qualified function names where the debug info has none.
//!
//! DWARF of `debug = "line-tables-only"` names each function without its module (`crunch`,
//! `{closure#0}`, `poll<F>`), and reports, listings and the join of traced and native frames
//! need the module path. The symbol table has it: a function's linkage name, demangled
//! (`kvpool::crunch`, `kvpool::worker::{{closure}}`). It names the function an address lies in
//! (not the functions inlined there), so it qualifies a sample's outermost frame at each
//! address. Read once, on first use, off the hot path.

use std::sync::OnceLock;

use object::{Object, ObjectSymbol, SymbolKind};

/// The executable's function symbols, and where it is loaded.
struct Symtab {
    /// (address in the file, size, demangled name without hash), by address.
    functions: Vec<(u64, u64, String)>,
    /// What to subtract from a runtime address to get an address in the file.
    bias: u64,
}

/// Marks where the executable is loaded: its runtime address against its symbol's.
#[inline(never)]
fn symtab_anchor() -> u64 {
    std::hint::black_box(0x5eed)
}

fn load() -> Option<Symtab> {
    let data = std::fs::read("/proc/self/exe").ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut functions: Vec<(u64, u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let name = s.name_bytes().ok()?;
            let demangled = format!("{:#}", backtrace::SymbolName::new(name));
            Some((s.address(), s.size(), demangled))
        })
        .collect();
    functions.sort_by_key(|f| f.0);
    let anchor = symtab_anchor as fn() -> u64 as usize as u64;
    let at = functions
        .iter()
        .find(|f| f.2.ends_with("sample::symtab::symtab_anchor"))?
        .0;
    Some(Symtab {
        functions,
        bias: anchor.wrapping_sub(at),
    })
}

/// The demangled name (without hash) of the executable's function that holds `addr`, a
/// runtime address; `None` for an address outside the executable's functions (a shared
/// library's, say), or when the symbol table cannot be read.
pub(super) fn function_at(addr: u64) -> Option<&'static str> {
    static SYMTAB: OnceLock<Option<Symtab>> = OnceLock::new();
    let symtab = SYMTAB
        .get_or_init(|| crate::heap::suppressed(load))
        .as_ref()?;
    let addr = addr.wrapping_sub(symtab.bias);
    let i = symtab
        .functions
        .partition_point(|f| f.0 <= addr)
        .checked_sub(1)?;
    let (start, size, name) = &symtab.functions[i];
    (addr < start + (*size).max(1)).then_some(name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_function_of_this_module() -> u64 {
        std::hint::black_box(a_function_of_this_module as fn() -> u64 as usize as u64)
    }

    /// An address of a function of the executable gets its qualified name; one outside it none.
    #[test]
    fn an_address_gets_its_qualified_function_name() {
        let addr = a_function_of_this_module();
        let name = function_at(addr + 1).expect("the executable's symbol table");
        assert!(
            name.ends_with("sample::symtab::tests::a_function_of_this_module"),
            "{name}"
        );
        assert_eq!(function_at(0x10), None);
    }
}
