//! The procedural macros of `wasmrpc-guest`: `#[method]` and `export!`.
//!
//! Use them through `wasmrpc_guest::method` and `wasmrpc_guest::export!`, where they are
//! documented; the code they generate names only `::wasmrpc_guest::…` paths, so a guest crate needs
//! no other dependency.
//!
//! `#[method]` leaves the function as written and adds, next to it, a hidden struct
//! `__wasmrpc_method_<fn>` implementing `wasmrpc_guest::__private::Method` (name, signature, call
//! glue). `export!(a, m::b)` implements the component's `Guest` trait over those structs and invokes
//! the export macro that `wit-bindgen` generated in `wasmrpc_guest::bindings` (on wasm32 only: the
//! export names are not valid native symbols). The component is a hidden struct,
//! `__WasmrpcComponent`, so native tests can call its `signatures()` and `call()`.

/// The one rule for method names: the very file the server and the clients compile
/// (`proto/src/names.rs`), included by path so that the macro needs no crate of the workspace and
/// `wasmrpc new` can vendor the SDK as it is (the same relative layout).
#[path = "../../../proto/src/names.rs"]
mod names;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Expr, FnArg, GenericArgument, Ident, ItemFn, Lit, LitInt, LitStr, Meta, Pat, Path,
    PathArguments, ReturnType, Token, Type, bracketed,
};

/// Marks a function as a wasmrpc method. Documented at `wasmrpc_guest::method`.
#[proc_macro_attribute]
pub fn method(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = TokenStream2::from(item);
    let generated = syn::parse2::<ItemFn>(item.clone()).and_then(|func| {
        let options = Punctuated::<AttrOption, Token![,]>::parse_terminated.parse(attr)?;
        expand_method(&func, options)
    });
    match generated {
        Ok(generated) => quote!(#item #generated).into(),
        // Keep the function so that its other uses do not add errors of their own.
        Err(err) => {
            let err = err.to_compile_error();
            quote!(#item #err).into()
        }
    }
}

/// Exports the listed methods as the crate's component. Documented at `wasmrpc_guest::export!`.
#[proc_macro]
pub fn export(input: TokenStream) -> TokenStream {
    match Punctuated::<Path, Token![,]>::parse_terminated
        .parse(input)
        .and_then(|paths| expand_export(paths, Span::call_site()))
    {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// The name of the hidden struct `#[method]` generates for function `ident`.
fn method_struct(ident: &Ident) -> Ident {
    format_ident!("__wasmrpc_method_{}", ident.unraw(), span = ident.span())
}

/// One `key = value` of the attribute.
struct AttrOption {
    key: Ident,
    value: Value,
}

/// The value of an attribute option.
enum Value {
    /// `"text"`: the method name.
    Str(LitStr),
    /// `["a", "b"]`: output names.
    Names(Vec<LitStr>),
    /// `[_, 3]`: a declared shape; `None` is a dynamic dimension.
    Shape(Vec<Option<LitInt>>),
}

impl Parse for AttrOption {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = input.call(Ident::parse_any)?;
        input.parse::<Token![=]>()?;
        if input.peek(LitStr) {
            return Ok(AttrOption {
                key,
                value: Value::Str(input.parse()?),
            });
        }
        let content;
        bracketed!(content in input);
        if content.peek(LitStr) {
            let names = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
            return Ok(AttrOption {
                key,
                value: Value::Names(names.into_iter().collect()),
            });
        }
        let dims = Punctuated::<Dim, Token![,]>::parse_terminated(&content)?;
        Ok(AttrOption {
            key,
            value: Value::Shape(dims.into_iter().map(|d| d.0).collect()),
        })
    }
}

/// One dimension of a declared shape: `_` or an integer.
struct Dim(Option<LitInt>);

impl Parse for Dim {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let lookahead = input.lookahead1();
        if lookahead.peek(Token![_]) {
            input.parse::<Token![_]>()?;
            Ok(Dim(None))
        } else if lookahead.peek(LitInt) {
            let lit = input.parse::<LitInt>()?;
            match lit.base10_parse::<u64>() {
                Ok(_) => Ok(Dim(Some(lit))),
                Err(_) => Err(syn::Error::new_spanned(
                    lit,
                    "a dimension is `_` (any size) or a non-negative integer",
                )),
            }
        } else {
            Err(lookahead.error())
        }
    }
}

/// A parameter or output of the method.
struct Spec<'a> {
    name: String,
    elem: &'a Type,
    shape: Option<Vec<Option<LitInt>>>,
}

impl Spec<'_> {
    /// `("name", <T as Element>::DTYPE, shape)` for `__private::signature`.
    fn signature_entry(&self) -> TokenStream2 {
        let name = &self.name;
        let dtype = element_dtype(self.elem);
        let shape = self.shape_tokens();
        quote!((#name, #dtype, #shape))
    }

    /// The declared shape as a `__private::Shape` expression.
    fn shape_tokens(&self) -> TokenStream2 {
        match &self.shape {
            None => quote!(::core::option::Option::None),
            Some(dims) => {
                let dims = dims.iter().map(|d| match d {
                    None => quote!(::core::option::Option::None),
                    Some(lit) => {
                        let value = lit.base10_digits();
                        let value = LitInt::new(&format!("{value}u64"), lit.span());
                        quote!(::core::option::Option::Some(#value))
                    }
                });
                quote!(::core::option::Option::Some(&[#(#dims),*]))
            }
        }
    }
}

/// `<T as ::wasmrpc_guest::Element>::DTYPE`, spanned at `T` so that a type that is no element is
/// reported there.
fn element_dtype(elem: &Type) -> TokenStream2 {
    quote_spanned!(elem.span()=> <#elem as ::wasmrpc_guest::Element>::DTYPE)
}

/// The element type of `Tensor<T>` (any path ending in `Tensor` with one type argument).
fn tensor_element(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Paren(inner) => tensor_element(&inner.elem),
        Type::Group(inner) => tensor_element(&inner.elem),
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            if last.ident != "Tensor" {
                return None;
            }
            match &last.arguments {
                PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
                    match &args.args[0] {
                        GenericArgument::Type(elem) => Some(elem),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// If `ty` is `Result<T, Error>` (any paths ending so), `T`.
fn result_ok(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if path.qself.is_some() || last.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match (args.args.first(), args.args.get(1), args.args.len()) {
        (Some(GenericArgument::Type(ok)), Some(GenericArgument::Type(Type::Path(err))), 2)
            if err
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "Error" && s.arguments.is_none()) =>
        {
            Some(ok)
        }
        _ => None,
    }
}

const RETURN_HELP: &str = "a wasmrpc method must return `Tensor<T>`, a tuple of `Tensor`s, or \
                           either inside `Result<_, wasmrpc_guest::Error>`";

/// The output element types and whether the function returns a `Result`, a tuple.
fn outputs(func: &ItemFn) -> syn::Result<(Vec<&Type>, bool, bool)> {
    let ty = match &func.sig.output {
        ReturnType::Type(_, ty) => ty.as_ref(),
        ReturnType::Default => {
            return Err(syn::Error::new_spanned(&func.sig, RETURN_HELP));
        }
    };
    let (ok, is_result) = match result_ok(ty) {
        Some(ok) => (ok, true),
        None => (ty, false),
    };
    if let Some(elem) = tensor_element(ok) {
        return Ok((vec![elem], is_result, false));
    }
    match ok {
        Type::Tuple(tuple) if !tuple.elems.is_empty() => {
            let elems = tuple
                .elems
                .iter()
                .map(|t| tensor_element(t).ok_or_else(|| syn::Error::new_spanned(t, RETURN_HELP)))
                .collect::<syn::Result<Vec<_>>>()?;
            Ok((elems, is_result, true))
        }
        other => Err(syn::Error::new_spanned(other, RETURN_HELP)),
    }
}

/// Checks the function's signature and returns its parameters as `(ident, element type)`.
fn params(func: &ItemFn) -> syn::Result<Vec<(&Ident, &Type)>> {
    let sig = &func.sig;
    if let Some(asyncness) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            asyncness,
            "a wasmrpc method cannot be `async`",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        return Err(syn::Error::new_spanned(
            unsafety,
            "a wasmrpc method cannot be `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new_spanned(
            abi,
            "a wasmrpc method cannot have an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a wasmrpc method cannot be generic: pick concrete element types, one method per type",
        ));
    }
    if let Some(where_clause) = &sig.generics.where_clause {
        return Err(syn::Error::new_spanned(
            where_clause,
            "a wasmrpc method cannot have a `where` clause",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            variadic,
            "a wasmrpc method cannot be variadic",
        ));
    }
    sig.inputs
        .iter()
        .map(|arg| match arg {
            FnArg::Receiver(receiver) => Err(syn::Error::new_spanned(
                receiver,
                "a wasmrpc method is a free function: it cannot take `self`",
            )),
            FnArg::Typed(typed) => {
                let ident = match typed.pat.as_ref() {
                    Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => &p.ident,
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "a wasmrpc method parameter must be a plain name (`x` or `mut x`): it \
                             names the argument",
                        ));
                    }
                };
                let elem = tensor_element(&typed.ty).ok_or_else(|| {
                    syn::Error::new_spanned(
                        &typed.ty,
                        "a wasmrpc method parameter must be a `Tensor<T>` taken by value, where `T` \
                         is a wasmrpc_guest::Element",
                    )
                })?;
                Ok((ident, elem))
            }
        })
        .collect()
}

/// The text of a `#[doc = …]` value: a string literal, or `concat!` of literals (as `macro_rules!`
/// expansions write it). `None` for anything else, such as `include_str!`.
fn doc_text(value: &Expr) -> Option<String> {
    match value {
        Expr::Lit(lit) => literal_text(&lit.lit),
        Expr::Group(group) => doc_text(&group.expr),
        Expr::Macro(mac) if mac.mac.path.is_ident("concat") => {
            let parts = mac
                .mac
                .parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)
                .ok()?;
            parts.iter().map(doc_text).collect()
        }
        _ => None,
    }
}

fn literal_text(lit: &Lit) -> Option<String> {
    match lit {
        Lit::Str(s) => Some(s.value()),
        Lit::Int(i) => Some(i.base10_digits().to_owned()),
        Lit::Float(f) => Some(f.base10_digits().to_owned()),
        Lit::Bool(b) => Some(b.value.to_string()),
        Lit::Char(c) => Some(c.value().to_string()),
        _ => None,
    }
}

/// The function's doc comment as a string expression: its `///` lines, one leading space removed,
/// joined and trimmed. A `#[doc = …]` value that is not known at expansion time (`include_str!`)
/// is spliced in as written, through `concat!`.
fn doc(func: &ItemFn) -> TokenStream2 {
    let mut lines: Vec<Result<String, &Expr>> = Vec::new();
    for attr in func.attrs.iter().filter(|a| a.path().is_ident("doc")) {
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        match doc_text(&nv.value) {
            Some(text) => lines.extend(
                text.split('\n')
                    .map(|l| Ok(l.strip_prefix(' ').unwrap_or(l).trim_end().to_owned())),
            ),
            None => lines.push(Err(&nv.value)),
        }
    }
    match lines
        .iter()
        .cloned()
        .collect::<Result<Vec<String>, &Expr>>()
    {
        Ok(lines) => {
            let text = lines.join("\n").trim().to_owned();
            quote!(#text)
        }
        Err(_) => {
            let parts = lines.iter().enumerate().map(|(i, line)| {
                let newline = (i > 0).then(|| quote!("\n",));
                match line {
                    Ok(text) => quote!(#newline #text),
                    Err(expr) => quote!(#newline #expr),
                }
            });
            quote!(::core::concat!(#(#parts),*).trim_ascii())
        }
    }
}

fn expand_method(
    func: &ItemFn,
    options: Punctuated<AttrOption, Token![,]>,
) -> syn::Result<TokenStream2> {
    let params = params(func)?;
    let (output_elems, is_result, is_tuple) = outputs(func)?;

    let mut inputs: Vec<Spec> = params
        .iter()
        .map(|(ident, elem)| Spec {
            name: ident.unraw().to_string(),
            elem,
            shape: None,
        })
        .collect();
    let mut outputs: Vec<Spec> = output_elems
        .iter()
        .enumerate()
        .map(|(i, elem)| Spec {
            name: if is_tuple {
                format!("output_{i}")
            } else {
                "output".to_owned()
            },
            elem,
            shape: None,
        })
        .collect();

    let mut method_name = func.sig.ident.unraw().to_string();
    if names::is_valid_name(&method_name) {
        // Checked again below only if `name = "..."` replaces it.
    } else if !options.iter().any(|o| o.key == "name") {
        let why = names::check_name(&method_name).unwrap_err();
        return Err(syn::Error::new_spanned(
            &func.sig.ident,
            format!("{why}; rename the function or give `name = \"...\"`"),
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    let mut shapes = Vec::new();
    for option in options {
        let key = option.key.unraw().to_string();
        if seen.contains(&key) {
            return Err(syn::Error::new_spanned(
                &option.key,
                format!("`{key}` is given twice"),
            ));
        }
        seen.push(key.clone());
        match (key.as_str(), option.value) {
            ("name", Value::Str(lit)) => {
                method_name = lit.value();
                if let Err(why) = names::check_name(&method_name) {
                    return Err(syn::Error::new_spanned(lit, why));
                }
            }
            ("outputs", Value::Names(names)) => {
                if names.len() != outputs.len() {
                    return Err(syn::Error::new_spanned(
                        &option.key,
                        format!(
                            "`outputs` has {} names, but the method returns {} outputs",
                            names.len(),
                            outputs.len()
                        ),
                    ));
                }
                for (spec, name) in outputs.iter_mut().zip(&names) {
                    spec.name = name.value();
                }
            }
            (_, Value::Shape(dims)) => shapes.push((option.key, dims)),
            (_, _) => {
                return Err(syn::Error::new_spanned(
                    &option.key,
                    "expected `name = \"…\"`, `outputs = [\"…\", …]`, or `<parameter or output> = \
                     [_, 3]` (a shape)",
                ));
            }
        }
    }
    for (i, spec) in outputs.iter().enumerate() {
        if outputs[..i].iter().any(|o| o.name == spec.name) {
            return Err(syn::Error::new_spanned(
                &func.sig.output,
                format!("two outputs are named `{}`", spec.name),
            ));
        }
    }
    // Shapes name parameters and outputs; names are looked up after `outputs = […]` applied.
    for (key, dims) in shapes {
        let name = key.unraw().to_string();
        let input = inputs.iter_mut().find(|s| s.name == name);
        let output = outputs.iter_mut().find(|s| s.name == name);
        match (input, output) {
            (Some(_), Some(_)) => {
                return Err(syn::Error::new_spanned(
                    key,
                    format!(
                        "`{name}` names both a parameter and an output: rename the output with \
                         `outputs = [...]`"
                    ),
                ));
            }
            (Some(spec), None) | (None, Some(spec)) => spec.shape = Some(dims),
            (None, None) => {
                let join = |specs: &[Spec]| {
                    specs
                        .iter()
                        .map(|s| format!("`{}`", s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(syn::Error::new_spanned(
                    key,
                    format!(
                        "no parameter or output named `{name}`; parameters: {}; outputs: {}",
                        if inputs.is_empty() {
                            "none".to_owned()
                        } else {
                            join(&inputs)
                        },
                        join(&outputs)
                    ),
                ));
            }
        }
    }

    let fn_ident = &func.sig.ident;
    let vis = &func.vis;
    let struct_ident = method_struct(fn_ident);
    let doc = doc(func);
    let input_entries = inputs.iter().map(Spec::signature_entry);
    let output_entries = outputs.iter().map(Spec::signature_entry);
    let arity = inputs.len();
    let arg_idents: Vec<Ident> = (0..arity).map(|i| format_ident!("__arg{}", i)).collect();
    let decode = inputs.iter().zip(&arg_idents).map(|(spec, arg)| {
        let (name, elem, shape) = (&spec.name, spec.elem, spec.shape_tokens());
        quote!(let #arg = __args.next::<#elem>(#name, #shape)?;)
    });
    let question = is_result.then(|| quote!(?));
    let out_idents: Vec<Ident> = (0..outputs.len())
        .map(|i| format_ident!("__out{}", i))
        .collect();
    let destructure = if is_tuple {
        quote!(let (#(#out_idents,)*) = __output;)
    } else {
        quote!(let #(#out_idents)* = __output;)
    };
    let encode = outputs.iter().zip(&out_idents).map(|(spec, out)| {
        let (name, elem, shape) = (&spec.name, spec.elem, spec.shape_tokens());
        quote!(::wasmrpc_guest::__private::output::<#elem>(
            <Self as ::wasmrpc_guest::__private::Method>::NAME, #name, #shape, #out,
        )?)
    });

    Ok(quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #struct_ident {}

        impl ::wasmrpc_guest::__private::Method for #struct_ident {
            const NAME: &'static str = #method_name;

            fn signature() -> ::wasmrpc_guest::__private::WitMethodSignature {
                ::wasmrpc_guest::__private::signature(
                    <Self as ::wasmrpc_guest::__private::Method>::NAME,
                    #doc,
                    &[#(#input_entries),*],
                    &[#(#output_entries),*],
                )
            }

            #[allow(unused_mut)]
            fn call(
                args: ::std::vec::Vec<::wasmrpc_guest::__private::WitTensor>,
            ) -> ::core::result::Result<
                ::std::vec::Vec<::wasmrpc_guest::__private::WitTensor>,
                ::wasmrpc_guest::__private::WitError,
            > {
                let mut __args = ::wasmrpc_guest::__private::Args::new(
                    <Self as ::wasmrpc_guest::__private::Method>::NAME, args, #arity,
                )?;
                #(#decode)*
                let __output = #fn_ident(#(#arg_idents),*) #question;
                #destructure
                ::core::result::Result::Ok(::std::vec![#(#encode),*])
            }
        }
    })
}

fn expand_export(paths: Punctuated<Path, Token![,]>, span: Span) -> syn::Result<TokenStream2> {
    if paths.is_empty() {
        return Err(syn::Error::new(
            span,
            "export! needs the methods to export: `export!(add, sub)`",
        ));
    }
    let structs = paths
        .iter()
        .map(|path| {
            let mut path = path.clone();
            let Some(last) = path.segments.last_mut() else {
                return Err(syn::Error::new_spanned(
                    &path,
                    "expected the path of a `#[method]` function",
                ));
            };
            if !last.arguments.is_none() {
                return Err(syn::Error::new_spanned(
                    &last.arguments,
                    "expected the path of a `#[method]` function",
                ));
            }
            last.ident = method_struct(&last.ident);
            Ok(path.into_token_stream())
        })
        .collect::<syn::Result<Vec<_>>>()?;
    let method = quote!(::wasmrpc_guest::__private::Method);
    Ok(quote! {
        /// The component: implements the exported `method` interface over the listed methods.
        #[doc(hidden)]
        pub struct __WasmrpcComponent;

        const _: () = ::wasmrpc_guest::__private::assert_unique_names(
            &[#(<#structs as #method>::NAME),*],
        );

        impl ::wasmrpc_guest::__private::Guest for __WasmrpcComponent {
            fn signatures() -> ::std::vec::Vec<::wasmrpc_guest::__private::WitMethodSignature> {
                ::wasmrpc_guest::__private::report_panics_to_the_host();
                ::std::vec![#(<#structs as #method>::signature()),*]
            }

            fn call(
                name: ::std::string::String,
                args: ::std::vec::Vec<::wasmrpc_guest::__private::WitTensor>,
            ) -> ::core::result::Result<
                ::std::vec::Vec<::wasmrpc_guest::__private::WitTensor>,
                ::wasmrpc_guest::__private::WitError,
            > {
                ::wasmrpc_guest::__private::dispatch(
                    &name,
                    args,
                    &[#((
                        <#structs as #method>::NAME,
                        <#structs as #method>::call as ::wasmrpc_guest::__private::CallFn,
                    )),*],
                )
            }
        }

        // The component's exports, only on wasm: their names (`wasmrpc:tensor/method@0.1.0#call`)
        // are not valid symbols for a native linker, and native builds only run unit tests.
        #[cfg(target_arch = "wasm32")]
        ::wasmrpc_guest::__private::export_component!(
            __WasmrpcComponent with_types_in ::wasmrpc_guest::bindings
        );
    })
}
