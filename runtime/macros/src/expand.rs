//! Code generation for `#[traced]`.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Block, GenericArgument, ImplItem, ImplItemFn, Item, ItemImpl, PathArguments, ReturnType,
    Signature, Type, TypeParamBound,
};

use crate::args::Args;

pub(crate) fn traced(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args: Args = syn::parse2(attr)?;
    match syn::parse2::<Item>(item)? {
        Item::Fn(mut f) => {
            if args.skip {
                return Ok(f.into_token_stream());
            }
            let name = args
                .name
                .map(|n| n.value())
                .unwrap_or_else(|| f.sig.ident.to_string());
            if let Some(block) = wrap_flat(&mut f.sig, &f.block, &name, args.module.as_ref())? {
                f.block = Box::new(block);
            } else {
                f.block = Box::new(wrap(&f.sig, &f.block, &name, args.module.as_ref())?);
            }
            Ok(f.into_token_stream())
        }
        Item::Impl(mut imp) => {
            let prefix = impl_prefix(&imp);
            for item in &mut imp.items {
                if let ImplItem::Fn(method) = item {
                    trace_method(method, &prefix)?;
                }
            }
            Ok(imp.into_token_stream())
        }
        other => Err(syn::Error::new(
            other.span(),
            "#[traced] goes on a fn, an async fn, or an impl block",
        )),
    }
}

/// `Type::` or `<Type as Trait>::`, the way the trace map names methods.
fn impl_prefix(imp: &ItemImpl) -> String {
    let ty = tidy(&imp.self_ty.to_token_stream().to_string());
    match &imp.trait_ {
        Some((_, path, _)) => {
            let tr = tidy(&path.to_token_stream().to_string());
            format!("<{ty} as {tr}>::")
        }
        None => format!("{ty}::"),
    }
}

/// Removes the spaces `to_string` puts between tokens where Rust source would have none.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let glue = |ch: Option<char>| {
                matches!(
                    ch,
                    Some('<' | '>' | ':' | '&' | '(' | ')' | '[' | ']' | ',')
                )
            };
            if glue(prev) && prev != Some(',') || glue(next) && next != Some('&') {
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn trace_method(method: &mut ImplItemFn, prefix: &str) -> syn::Result<()> {
    let mut args = Args::default();
    let mut keep = Vec::new();
    for attr in method.attrs.drain(..) {
        if attr.path().is_ident("traced") {
            if let syn::Meta::List(list) = &attr.meta {
                args = syn::parse2(list.tokens.clone())?;
            }
        } else {
            keep.push(attr);
        }
    }
    method.attrs = keep;
    if args.skip {
        return Ok(());
    }
    let name = args
        .name
        .map(|n| n.value())
        .unwrap_or_else(|| format!("{prefix}{}", method.sig.ident));
    method.block = wrap(&method.sig, &method.block, &name, args.module.as_ref())?;
    Ok(())
}

/// What kind of function this is, for how its body is wrapped.
enum Shape {
    Sync,
    AsyncFn,
    /// `-> impl Future<...>`
    ImplFuture,
    /// `-> Pin<Box<dyn Future<...> ...>>`, the shape `#[async_trait]` gives an `async fn`.
    BoxedFuture,
}

fn shape(sig: &Signature) -> Shape {
    if sig.asyncness.is_some() {
        return Shape::AsyncFn;
    }
    let ReturnType::Type(_, ty) = &sig.output else {
        return Shape::Sync;
    };
    match &**ty {
        Type::ImplTrait(it) if it.bounds.iter().any(is_future_bound) => Shape::ImplFuture,
        Type::Path(p) if is_pin_box_dyn_future(p) => Shape::BoxedFuture,
        _ => Shape::Sync,
    }
}

fn is_future_bound(bound: &TypeParamBound) -> bool {
    matches!(bound, TypeParamBound::Trait(t) if t.path.segments.last().is_some_and(|s| s.ident == "Future"))
}

fn is_pin_box_dyn_future(p: &syn::TypePath) -> bool {
    let Some(pin) = p.path.segments.last() else {
        return false;
    };
    if pin.ident != "Pin" {
        return false;
    }
    let PathArguments::AngleBracketed(args) = &pin.arguments else {
        return false;
    };
    args.args.iter().any(|a| match a {
        GenericArgument::Type(Type::Path(b)) => b.path.segments.last().is_some_and(|s| {
            s.ident == "Box"
                && match &s.arguments {
                    PathArguments::AngleBracketed(inner) => inner.args.iter().any(|a| {
                        matches!(a, GenericArgument::Type(Type::TraitObject(o)) if o.bounds.iter().any(is_future_bound))
                    }),
                    _ => false,
                }
        }),
        _ => false,
    })
}

/// `traced_block!("name", { .. })` / `traced_block!("name", async { .. })`.
pub(crate) fn traced_block(input: TokenStream) -> syn::Result<TokenStream> {
    struct BlockArgs {
        name: syn::LitStr,
        body: syn::Expr,
    }
    impl syn::parse::Parse for BlockArgs {
        fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<BlockArgs> {
            let name = input.parse()?;
            input.parse::<syn::Token![,]>()?;
            let body = input.parse()?;
            let _ = input.parse::<Option<syn::Token![,]>>()?;
            Ok(BlockArgs { name, body })
        }
    }
    let BlockArgs { name, body } = syn::parse2(input)?;
    if cfg!(feature = "off") {
        return Ok(body.into_token_stream());
    }
    let end = match &body {
        syn::Expr::Async(e) => e.block.brace_token.span.close(),
        syn::Expr::Block(e) => e.block.brace_token.span.close(),
        _ => name.span(),
    };
    let callsite = callsite_static(
        &quote!(::core::module_path!()),
        &name.value(),
        0,
        (name.span(), end),
    );
    Ok(match &body {
        syn::Expr::Async(_) => quote! {{
            #callsite
            ::runtime::trace::Traced::new(&__RUNTIME_TRACED_CALLSITE, #body)
        }},
        _ => quote! {{
            #callsite
            let __runtime_traced_frame = ::runtime::trace::enter(&__RUNTIME_TRACED_CALLSITE);
            #[allow(unused_braces)]
            let __runtime_traced_value = #body;
            __runtime_traced_value
        }},
    })
}

/// The callsite static of a traced function whose name is at `span.0` and whose body ends at
/// `span.1` (its closing brace): `line!()` spanned at each gives their lines.
fn callsite_static(
    module: &TokenStream,
    name: &str,
    arity: u8,
    (span, end): (proc_macro2::Span, proc_macro2::Span),
) -> TokenStream {
    let end_line = quote_spanned!(end=> ::core::line!());
    quote_spanned! {span=>
        #[::runtime::__private::linkme::distributed_slice(::runtime::trace::CALLSITES)]
        #[linkme(crate = ::runtime::__private::linkme)]
        static __RUNTIME_TRACED_CALLSITE: ::runtime::trace::Callsite =
            ::runtime::trace::Callsite::new(#module, #name, #arity, ::core::file!(), ::core::line!())
                .ending_at(#end_line)
                .in_crate(::core::option_env!("CARGO_MANIFEST_DIR"));
    }
}

/// Whether a free `async fn` can become a `fn` returning its traced future: nothing in its
/// signature names a lifetime (so the returned `impl Future` captures exactly what the
/// `async fn`'s future would, in any edition) and it is a plain safe Rust function.
fn flat_ok(sig: &Signature) -> bool {
    fn no_lifetimes(tokens: TokenStream) -> bool {
        tokens.into_iter().all(|t| match t {
            proc_macro2::TokenTree::Group(g) => no_lifetimes(g.stream()),
            proc_macro2::TokenTree::Punct(p) => p.as_char() != '\'' && p.as_char() != '&',
            _ => true,
        })
    }
    sig.asyncness.is_some()
        && sig.constness.is_none()
        && sig.unsafety.is_none()
        && sig.abi.is_none()
        && sig.variadic.is_none()
        && sig
            .inputs
            .iter()
            .all(|arg| matches!(arg, syn::FnArg::Typed(_)))
        && no_lifetimes(sig.generics.to_token_stream())
        && no_lifetimes(sig.inputs.to_token_stream())
        && no_lifetimes(sig.output.to_token_stream())
}

/// A free `async fn` whose signature names no lifetime becomes a `fn` returning its body as a
/// traced `async move` block (the parameters are bound inside it, as an `async fn` binds them,
/// so they live as long as the future): one future instead of an `async fn` awaiting a
/// wrapper around an inner one, which costs a state machine and a copy of the wrapper per call.
/// `None` for any other function.
fn wrap_flat(
    sig: &mut Signature,
    block: &Block,
    name: &str,
    module: Option<&syn::LitStr>,
) -> syn::Result<Option<Block>> {
    if !flat_ok(sig) {
        return Ok(None);
    }
    let arity = u8::try_from(sig.inputs.len()).map_err(|_| {
        syn::Error::new(
            sig.inputs.span(),
            "#[traced] supports at most 255 parameters",
        )
    })?;
    let module = match module {
        Some(m) => quote!(#m),
        None => quote!(::core::module_path!()),
    };
    let callsite = callsite_static(
        &module,
        name,
        arity,
        (sig.ident.span(), block.brace_token.span.close()),
    );
    let mut binds = Vec::new();
    for (i, arg) in sig.inputs.iter_mut().enumerate() {
        let syn::FnArg::Typed(typed) = arg else {
            return Ok(None);
        };
        let ident = syn::Ident::new(&format!("__runtime_traced_arg{i}"), typed.pat.span());
        let pat = std::mem::replace(
            &mut *typed.pat,
            syn::Pat::Ident(syn::PatIdent {
                attrs: Vec::new(),
                by_ref: None,
                mutability: None,
                ident: ident.clone(),
                subpat: None,
            }),
        );
        // Moved into the future first (as an `async fn` does), so that even a `_` parameter
        // lives as long as it.
        binds.push(quote! { let #ident = #ident; let #pat = #ident; });
    }
    let output = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => ty.to_token_stream(),
    };
    sig.asyncness = None;
    sig.output = syn::parse2(quote! { -> impl ::core::future::Future<Output = #output> })?;
    let stmts = &block.stmts;
    syn::parse2(quote! {{
        #callsite
        ::runtime::trace::Traced::new(&__RUNTIME_TRACED_CALLSITE, async move {
            #(#binds)*
            #(#stmts)*
        })
    }})
    .map(Some)
}

/// The new body: the callsite static, then the original body inside a traced frame.
fn wrap(
    sig: &Signature,
    block: &Block,
    name: &str,
    module: Option<&syn::LitStr>,
) -> syn::Result<Block> {
    if sig.constness.is_some() {
        return Err(syn::Error::new(
            sig.constness.span(),
            "#[traced] cannot trace a const fn: it may run at compile time",
        ));
    }
    let arity = u8::try_from(sig.inputs.len()).map_err(|_| {
        syn::Error::new(
            sig.inputs.span(),
            "#[traced] supports at most 255 parameters",
        )
    })?;
    let span = sig.ident.span();
    let module = match module {
        Some(m) => quote!(#m),
        None => quote!(::core::module_path!()),
    };
    let callsite = callsite_static(&module, name, arity, (span, block.brace_token.span.close()));
    let stmts = &block.stmts;
    let body: TokenStream = match shape(sig) {
        Shape::Sync => quote! {
            #callsite
            let __runtime_traced_frame = ::runtime::trace::enter(&__RUNTIME_TRACED_CALLSITE);
            #(#stmts)*
        },
        Shape::AsyncFn => quote! {
            #callsite
            ::runtime::trace::Traced::new(&__RUNTIME_TRACED_CALLSITE, async move { #(#stmts)* }).await
        },
        Shape::ImplFuture => quote! {
            #callsite
            ::runtime::trace::Traced::new(&__RUNTIME_TRACED_CALLSITE, { #(#stmts)* })
        },
        Shape::BoxedFuture => quote! {
            #callsite
            ::std::boxed::Box::pin(::runtime::trace::Traced::new(&__RUNTIME_TRACED_CALLSITE, { #(#stmts)* }))
        },
    };
    syn::parse2(quote! { { #body } })
}
