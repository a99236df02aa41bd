//! The arguments of `#[traced(...)]`.

use syn::parse::{Parse, ParseStream};
use syn::{LitStr, Token};

/// `#[traced]`, `#[traced(name = "...")]`, `#[traced(module = "...")]` or `#[traced(skip)]`.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) name: Option<LitStr>,
    pub(crate) module: Option<LitStr>,
    pub(crate) skip: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Args> {
        let mut args = Args::default();
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            if key == "name" {
                input.parse::<Token![=]>()?;
                args.name = Some(input.parse()?);
            } else if key == "module" {
                input.parse::<Token![=]>()?;
                args.module = Some(input.parse()?);
            } else if key == "skip" {
                args.skip = true;
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown #[traced] argument `{key}`: expected `name = \"...\"`, `module = \"...\"` or `skip`"
                    ),
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
    }
}
