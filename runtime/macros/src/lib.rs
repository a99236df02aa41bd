//! `#[traced]`: marks functions whose calls the runtime's trace machinery can count, time and
//! charge memory to (the `runtime` crate re-exports it as `runtime::traced`; see its `trace`
//! module for what tracing measures).
//!
//! The attribute registers one static callsite per function at compile time (module, function
//! name, arity, file, line) and wraps the body so that a call enters and leaves a traced frame.
//! It accepts:
//!
//! - a free `fn` or `async fn`, generic or not (a free `async fn` whose signature names no
//!   lifetime becomes a `fn` returning `impl Future` with the same output: one state machine
//!   instead of two, its parameters still bound inside the future, so they live as long as it);
//! - an `impl` block: every method is traced, named `Type::method` (or `<Type as
//!   Trait>::method` in a trait impl); `#[traced(skip)]` on a method leaves it out. This is how
//!   methods get their type's name, which an attribute on the method alone cannot see;
//! - a `fn` returning `impl Future`: the returned future is what is traced;
//! - a `fn` returning `Pin<Box<dyn Future ...>>`, which is what `#[async_trait]` makes of an
//!   `async fn`: the boxed future is traced, whichever of the two attributes runs first.
//!
//! With the feature `off`, both macros leave the code exactly as written: no callsite, no
//! frame (the `runtime` crate's feature `no-trace` turns it on).
//!
//! `#[traced(name = "...")]` overrides the function's name, `#[traced(module = "...")]` the
//! module path it is filed under.

#![forbid(unsafe_code)]

mod args;
mod expand;

use proc_macro::TokenStream;

/// Traces a function, or every method of an `impl` block. See the crate documentation.
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
