//! `#[traced]` and `traced_block!`, which the `runtime` crate re-exports as `runtime::traced`
//! and `runtime::trace::traced!`. Their manual is there (`cargo doc -p runtime`), where its
//! examples run against the runtime.
//!
//! With the feature `off` (turned on by the `runtime` crate's feature `no-trace`), both leave
//! the code exactly as written: no callsite, no frame.

#![forbid(unsafe_code)]

mod args;
mod expand;

use proc_macro::TokenStream;

// No doc comment here: `runtime::traced` re-exports this with its manual, and rustdoc would
// append this item's docs to it.
#[allow(missing_docs)]
#[proc_macro_attribute]
pub fn traced(attr: TokenStream, item: TokenStream) -> TokenStream {
    if cfg!(feature = "off") {
        return item;
    }
    match expand::traced(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// Traces a block as a call of its own: `traced_block!("name", { .. })`, or
/// `traced_block!("name", async { .. })` for an async block (re-exported as
/// `runtime::trace::traced!`).
#[proc_macro]
pub fn traced_block(input: TokenStream) -> TokenStream {
    match expand::traced_block(input.into()) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}
