//! Code generation from a [`Derive`]: the values of each declaration, its
//! gate, the children; the fixed text (the `const _` block, the impls, the
//! runtime crate's path) is kv-core's `__kv_impl_v0_1!`, so the macro emits
//! (and rustc re-parses) only what differs per type. Runtime items are named
//! `__kv::...`: the macro_rules imports `$crate::__private_v0_1 as __kv`.

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};

use crate::ast::{Shell, Unmarked};
use crate::checks;
use crate::exprs::{self, count};
use crate::read::{Named, PositionsValue, RowsValue, Value};
use crate::valid::{Derive, Kind, ValidDecl, ValidGate};

pub fn expand(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;
    let type_name = &shell.type_name;

    let mut static_specs = Vec::new();
    let mut after_load = Vec::new();
    let mut checks = Vec::new();
    let mut declarations = Vec::new();
    for decl in &derive.decls {
        let name = &decl.name;
        let mut static_index = None;
        let push = if decl.is_after_load() {
            after_load.push(after_load_decl(decl));
            let spec = spec(decl);
            quote! { __kv::declare(__kv_out, #type_name, #name, || __kv::Ok(#spec))?; }
        } else {
            let index = static_specs.len();
            static_index = Some(index);
            static_specs.push(spec(decl));
            quote! { __kv_out.push(Self::__KV_STATIC[#index].clone()); }
        };
        checks.extend(checks::const_checks(
            decl,
            &format!("{type_name}.{name}"),
            static_index,
        ));
        declarations.push(match &decl.gate {
            Some(gate) => {
                let condition = gate_expression(gate);
                quote! { if #condition { #push } }
            }
            None => push,
        });
    }

    // A generic type's checks are evaluated where `kv_declare` is instantiated.
    let evaluate_checks = if checks.is_empty() {
        TokenStream::new()
    } else {
        quote! { let () = <Self as __kv::DeclaredKv>::__KV_CHECKS; }
    };

    let children = derive.children.iter().map(|child| {
        let member = &child.member;
        let segment = &child.segment;
        if derive.transparent {
            quote_spanned! {child.span=> __kv::visit_transparent(&self.#member, __kv_visitor); }
        } else {
            quote_spanned! {child.span=> __kv::visit_field(&self.#member, #segment, __kv_visitor); }
        }
    });
    let children = if derive.children.is_empty() {
        TokenStream::new()
    } else {
        quote! { children (__kv_visitor) { #(#children)* } }
    };
    let concrete = concrete_type(shell);
    let mut check = TokenStream::new();
    // Evaluated by `cargo check` for a concrete type.
    if let (Some(ty), false) = (&concrete, checks.is_empty()) {
        check.extend(quote! { const _: () = <#ty as __kv::DeclaredKv>::__KV_CHECKS; });
    }
    for field in derive.unmarked {
        check.extend(unmarked_check(shell, field));
    }
    let force_checks = if check.is_empty() {
        TokenStream::new()
    } else {
        quote! { check { #check } }
    };
    // A generic type has no single set of declarations to register.
    let register = concrete.map(|ty| quote! { register #ty; });
    let header = header(shell, child_bounds(derive));

    quote! {
        #krate::__kv_impl_v0_1! {
            #header
            static [#(#static_specs),*];
            after_load [#(#after_load),*];
            checks [#(#checks)*];
            fn (self, __kv_out) { #evaluate_checks #(#declarations)* }
            #children
            #force_checks
            #register
        }
    }
}

/// `impl [<generics>] Type<args> where [bounds]; name "Type";`
fn header(shell: &Shell<'_>, where_clause: TokenStream) -> TokenStream {
    let ident = shell.ident;
    let type_name = &shell.type_name;
    let (impl_generics, ty_generics, _) = shell.generics.split_for_impl();
    quote! {
        impl [#impl_generics] #ident #ty_generics where [#where_clause];
        name #type_name;
    }
}

/// The type with `'static` for each lifetime, when it has no type or const
/// parameters: such a type has one set of declarations, checked and
/// registered once.
fn concrete_type(shell: &Shell<'_>) -> Option<TokenStream> {
    let generics = shell.generics;
    if generics.type_params().next().is_some() || generics.const_params().next().is_some() {
        return None;
    }
    let ident = shell.ident;
    let lifetimes = generics.lifetimes().count();
    if lifetimes == 0 {
        return Some(quote!(#ident));
    }
    let statics = (0..lifetimes).map(|_| quote!('static));
    Some(quote!(#ident<#(#statics),*>))
}

/// Names that cannot make a type hold an owner: primitives, and the standard
/// containers and their paths. A type written with these alone (`u32`,
/// `Option<()>`, `Vec<Vec<f32>>`, `&'a [u8]`) is not checked, to keep the
/// expansion small: no model can implement `KvChild` for it.
const INERT: &[&str] = &[
    "bool",
    "char",
    "str",
    "String",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "f32",
    "f64",
    "Option",
    "Vec",
    "Box",
    "Rc",
    "Arc",
    "HashMap",
    "BTreeMap",
    "PhantomData",
    "std",
    "core",
    "alloc",
    "collections",
    "marker",
    "rc",
    "sync",
    "boxed",
    "vec",
    "option",
    "mut",
];

/// Whether every name in `tokens` is inert or a lifetime's.
fn is_inert(tokens: TokenStream) -> bool {
    let mut after_tick = false;
    tokens.into_iter().all(|tree| {
        let inert = match &tree {
            // One `to_string` per name: in a real expansion each is a call
            // into the compiler, and comparing an `Ident` with a `&str` makes one.
            TokenTree::Ident(ident) => after_tick || INERT.contains(&ident.to_string().as_str()),
            TokenTree::Group(group) => is_inert(group.stream()),
            _ => true,
        };
        after_tick = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
        inert
    })
}

/// `__kv::unmarked!(Type, "Owner.field", "Type as written");`, spanned from
/// the field's name to the end of its type, for a field marked neither
/// `child` nor `skip` whose type can be checked where the struct is defined:
/// one that names no type or const parameter and not `Self` (its lifetimes
/// become `'static`). A field of an inert type is not checked.
fn unmarked_check(shell: &Shell<'_>, field: &Unmarked<'_>) -> Option<TokenStream> {
    let tokens = field.ty.to_token_stream();
    if is_inert(tokens.clone()) {
        return None;
    }
    let generics = shell.generics;
    let mut params: Vec<String> = generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    params.extend(generics.const_params().map(|param| param.ident.to_string()));
    params.push("Self".to_string());
    let lifetimes: Vec<String> = generics
        .lifetimes()
        .map(|param| param.lifetime.ident.to_string())
        .collect();
    let ty = with_static_lifetimes(tokens.clone(), &params, &lifetimes)?;
    let end = tokens.clone().into_iter().last()?.span();
    let label = format!("{}.{}", shell.type_name, field.segment);
    let written = type_text(tokens);
    let path = quote_spanned! {field.span=> __kv::unmarked! };
    let args = quote_spanned! {end=> (#ty, #label, #written) };
    Some(quote! { #path #args; })
}

/// A type as a person writes it (`Box<dyn Trait>`, `&'a T`, `[T; 2]`), for
/// messages: `TokenStream`'s own text spaces every token.
pub(crate) fn type_text(tokens: TokenStream) -> String {
    let mut text = String::new();
    let mut word_before = false;
    let mut keyword_before = false;
    for tree in tokens {
        let word = matches!(tree, TokenTree::Ident(_) | TokenTree::Literal(_));
        match &tree {
            TokenTree::Group(group) => {
                // `&mut [T]`, `dyn (A)`; but `Fn(u8)`.
                if keyword_before {
                    text.push(' ');
                }
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                text.push_str(open);
                text.push_str(&type_text(group.stream()));
                text.push_str(close);
            }
            TokenTree::Punct(punct) => match punct.as_char() {
                ',' | ';' => {
                    text.push(punct.as_char());
                    text.push(' ');
                }
                '+' | '=' => {
                    text.push(' ');
                    text.push(punct.as_char());
                    text.push(' ');
                }
                other => text.push(other),
            },
            _ => {
                if word && word_before {
                    text.push(' ');
                }
                text.push_str(&tree.to_string());
            }
        }
        word_before = word;
        keyword_before = matches!(&tree, TokenTree::Ident(i) if ["mut", "dyn", "impl", "const"].iter().any(|k| i == k));
    }
    text
}

/// `tokens` with each of `lifetimes` replaced by `'static`, or `None` when
/// they name one of `params`.
fn with_static_lifetimes(
    tokens: TokenStream,
    params: &[String],
    lifetimes: &[String],
) -> Option<TokenStream> {
    let mut out = Vec::new();
    let mut after_tick = false;
    for tree in tokens {
        let tree = match tree {
            TokenTree::Ident(ident) if after_tick => {
                if lifetimes.contains(&ident.to_string()) {
                    TokenTree::Ident(Ident::new("static", ident.span()))
                } else {
                    TokenTree::Ident(ident)
                }
            }
            TokenTree::Ident(ident) if params.contains(&ident.to_string()) => return None,
            TokenTree::Group(group) => {
                let inner = with_static_lifetimes(group.stream(), params, lifetimes)?;
                let mut new = Group::new(group.delimiter(), inner);
                new.set_span(group.span());
                TokenTree::Group(new)
            }
            other => other,
        };
        after_tick = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
        out.push(tree);
    }
    Some(out.into_iter().collect())
}

/// The type's where clause, plus `FieldType: KvChild` for each child field
/// whose type names a type parameter (as serde infers its bounds), so that
/// `struct Wrapper<M> { #[kv(child)] inner: Arc<M> }` needs no bound written.
fn child_bounds(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;
    let params: Vec<String> = shell
        .generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    let mut predicates: Vec<TokenStream> = shell
        .generics
        .where_clause
        .iter()
        .flat_map(|clause| clause.predicates.iter().map(|p| quote!(#p)))
        .collect();
    if !params.is_empty() {
        for child in derive.children {
            let ty = child.ty.to_token_stream();
            if mentions_any(&ty, &params) {
                predicates.push(quote!(#ty: #krate::declare::KvChild));
            }
        }
    }
    if predicates.is_empty() {
        TokenStream::new()
    } else {
        quote!(where #(#predicates),*)
    }
}

fn mentions_any(tokens: &TokenStream, idents: &[String]) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => idents.contains(&ident.to_string()),
        proc_macro2::TokenTree::Group(group) => mentions_any(&group.stream(), idents),
        _ => false,
    })
}

/// Impls that declare nothing, emitted beside the errors so that one mistake
/// does not also report every use of the type as missing the traits.
pub fn fallback(shell: &Shell<'_>) -> TokenStream {
    let krate = &shell.krate;
    let where_clause = &shell.generics.where_clause;
    let header = header(shell, quote!(#where_clause));
    quote! {
        #krate::__kv_impl_v0_1! {
            #header
            static [];
            after_load [];
            checks [];
            fn (self, __kv_out) {}
        }
    }
}

/// What is known before load of a declaration with after-load values;
/// `0` and `""` stand for what is not.
fn after_load_decl(decl: &ValidDecl<'_>) -> TokenStream {
    let name = &decl.name;
    let cache = decl.cache.value();
    let scope = scope(decl.scope);
    let (position_count, bound) = match decl.positions() {
        // A recurrent state's bound is kv-core's own text, which its tables know.
        None => (quote!(0), quote! { __kv::NO_POSITIONS }),
        Some(positions) => {
            let text = bound_text(positions);
            let count = match positions {
                _ if positions.is_after_load() => quote!(0),
                PositionsValue::Bounded(counted) => count(&counted.count, "positions"),
                PositionsValue::Policy(policy) => {
                    let policy = exprs::policy(policy);
                    quote! { __kv::policy_count(#policy) }
                }
            };
            (count, quote!(#text))
        }
    };
    let bytes_per_row = match &decl.kind {
        Kind::Attention(geometry, PositionsValue::Bounded(counted))
            if geometry.is_const() && !counted.count.is_after_load() =>
        {
            let geometry = exprs::geometry(geometry);
            quote! { __kv::const_bytes_per_row(#geometry, #position_count) }
        }
        _ => quote!(0),
    };
    let rows = match decl.rows {
        RowsValue::MaxNumSeqs => quote! { __kv::MAX_NUM_SEQS },
        RowsValue::Fixed(fixed) => {
            let count = if fixed.count.is_after_load() {
                quote!(0)
            } else {
                count(&fixed.count, "rows")
            };
            let because = fixed.because.value();
            quote! { __kv::after_load_fixed(#count, #because) }
        }
    };
    let only_when = gate_text(&decl.gate);
    let assumes = text(decl.texts.assumes);
    quote! {
        __kv::after_load_decl(
            #name, #cache, #scope, #position_count, #bound, #bytes_per_row, #rows,
            #only_when, #assumes,
        )
    }
}

/// The gate's text, `""` for none.
fn gate_text(gate: &Option<ValidGate>) -> String {
    gate.as_ref()
        .map_or_else(String::new, |gate| gate.text.clone())
}

/// An optional text's value, `""` for none (blank texts are rejected).
fn text(lit: Option<&syn::LitStr>) -> String {
    lit.map_or_else(String::new, syn::LitStr::value)
}

fn scope(named: Named) -> TokenStream {
    let variant = Ident::new(named.variant, named.span);
    quote! { __kv::#variant }
}

fn rows(decl: &ValidDecl<'_>) -> TokenStream {
    match decl.rows {
        RowsValue::MaxNumSeqs => quote! { __kv::MaxNumSeqs },
        RowsValue::Fixed(fixed) => {
            let count = count(&fixed.count, "rows");
            let because = fixed.because.value();
            quote! { __kv::fixed(#count, #because) }
        }
    }
}

/// A `KvSpec` through `__private_v0_1::spec`, a `const fn`: far fewer tokens
/// than a struct literal, which every build pays for (see BENCHMARKS.md).
/// Declarations with a latent, a state, a format, a position policy or a
/// placement go through `spec_with` and a layout built for their kind.
fn spec(decl: &ValidDecl<'_>) -> TokenStream {
    let name = &decl.name;
    let cache = decl.cache.value();
    let scope = scope(decl.scope);
    let rows = rows(decl);
    // Blank texts are rejected while parsing, so "" can stand for "not given".
    let only_when = gate_text(&decl.gate);
    let assumes = text(decl.texts.assumes);
    let note = text(decl.texts.note);
    let placed = decl.texts.on_host.is_some() || decl.texts.whole_on_every_rank.is_some();
    let layout = match &decl.kind {
        Kind::Attention(geometry, PositionsValue::Bounded(counted))
            if !placed && !geometry.has_formats() =>
        {
            let geometry = exprs::geometry(geometry);
            let position_count = count(&counted.count, "positions");
            let bound = counted.because.value();
            return quote! {
                __kv::spec(
                    #name, #cache, #geometry, #position_count, #bound, #scope, #rows,
                    #only_when, #assumes, #note,
                )
            };
        }
        Kind::Attention(geometry, positions) => {
            let geometry = exprs::geometry(geometry);
            let positions = positions_expression(positions);
            quote! { __kv::attention(#geometry, #positions) }
        }
        Kind::Latent(value @ Value::AfterLoad(tokens), positions) => {
            let positions = positions_expression(positions);
            quote_spanned! {value.span()=>
                __kv::latent(
                    __kv::read_whole(__kv::IntoLatent::into_latent(#tokens), ::core::stringify!(#tokens))?,
                    #positions,
                )
            }
        }
        Kind::Latent(value, positions) => {
            let tokens = value.tokens();
            let positions = positions_expression(positions);
            quote_spanned! {value.span()=> __kv::latent(#tokens, #positions) }
        }
        Kind::State(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=>
                __kv::state(
                    __kv::read_whole(__kv::IntoState::into_state(#tokens), ::core::stringify!(#tokens))?
                )
            }
        }
        Kind::State(value) => {
            let tokens = value.tokens();
            quote_spanned! {value.span()=> __kv::state(#tokens) }
        }
    };
    let on_host = text(decl.texts.on_host);
    let whole = text(decl.texts.whole_on_every_rank);
    quote! {
        __kv::spec_with(
            #name, #cache, #layout, #scope, #rows, #only_when, #assumes, #note, #on_host, #whole,
        )
    }
}

/// Positions as a `Positions` expression.
fn positions_expression(positions: &PositionsValue) -> TokenStream {
    match positions {
        PositionsValue::Bounded(counted) => {
            let position_count = count(&counted.count, "positions");
            let bound = counted.because.value();
            quote! { __kv::bounded(#position_count, #bound) }
        }
        PositionsValue::Policy(policy) => {
            let policy = exprs::policy(policy);
            quote! { __kv::policy(#policy) }
        }
    }
}

/// What the positions' bound reads before load.
fn bound_text(positions: &PositionsValue) -> String {
    match positions {
        PositionsValue::Bounded(counted) => counted.because.value(),
        PositionsValue::Policy(policy) => policy.text.clone(),
    }
}

/// `self.field` or `Self::method(self)`; both must be `bool`. Spanned at the
/// string, so a method that does not exist is reported there.
fn gate_expression(gate: &ValidGate) -> TokenStream {
    let ident = &gate.ident;
    let span = ident.span();
    if gate.is_field {
        quote_spanned! {span=> __kv::gate(self.#ident) }
    } else {
        quote_spanned! {span=> __kv::gate(Self::#ident(self)) }
    }
}
