//! Code generation from a [`Derive`]: the values of each declaration, its
//! gate, the children; the fixed text (the `const _` block, the impls, the
//! runtime crate's path) is kv-core's `__kv_impl_v0_1!`, so the macro emits
//! (and rustc re-parses) only what differs per type. Runtime items are named
//! `__kv::...`: the macro_rules imports `$crate::__private_v0_1 as __kv`.

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};

use crate::ast::{Child, Shell, Unmarked};
use crate::checks;
use crate::exprs::{self, count};
use crate::read::{Named, PositionsValue, RowsValue, Value};
use crate::tuples;
use crate::valid::{Derive, Kind, ValidDecl, ValidGate};

pub fn expand(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;

    let mut out = Declarations::default();
    let mut declarations = out.push(shell, &derive.body.decls);
    if let Some(variants) = &derive.variants {
        let arms: Vec<TokenStream> = variants
            .iter()
            .filter(|variant| !variant.fields.decls.is_empty())
            .map(|variant| {
                let ident = variant.ident;
                let decls = out.push(shell, &variant.fields.decls);
                // Named fields are bound by name, for values and gates read after load.
                let bindings = variant.fields.named.iter().map(|field| &field.ident);
                quote! { Self::#ident { #(#bindings,)* .. } => { #decls } }
            })
            .collect();
        if !arms.is_empty() {
            declarations.extend(quote! { match self { #(#arms)* _ => {} } });
        }
    }
    let Declarations {
        static_specs,
        after_load,
        checks,
    } = out;

    // A generic type's checks are evaluated where `kv_declare` is instantiated.
    let evaluate_checks = if checks.is_empty() {
        TokenStream::new()
    } else {
        quote! { let () = <Self as __kv::DeclaredKv>::__KV_CHECKS; }
    };

    let params: Vec<String> = shell
        .generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    let mut items = TokenStream::new();
    let mut markers = 0;
    // What each child field's type may hold, for the registry's start-up check.
    let mut owner_types = TokenStream::new();
    let lifetimes: Vec<String> = shell
        .generics
        .lifetimes()
        .map(|param| param.lifetime.ident.to_string())
        .collect();
    let mut visit = |child: &Child<'_>, access: TokenStream, segment: &str| {
        let tuples = tuples::tuples(child.ty, &params);
        let via = if tuples.is_empty() {
            None
        } else {
            let (marker, impls) = tuples::via(&tuples, markers);
            markers += 1;
            items.extend(impls);
            Some(marker)
        };
        let mut no_self = params.clone();
        no_self.push("Self".to_owned());
        if let Some(ty) = with_static_lifetimes(child.ty.to_token_stream(), &no_self, &lifetimes) {
            let via = via
                .as_ref()
                .map_or_else(|| quote!(__kv::Owners), |via| quote!(#via));
            // Asked, not required: a field that is no `KvChild` is already
            // an error where it is visited.
            owner_types.extend(quote! {
                __kv::element_types(
                    {
                        #[allow(unused_imports)]
                        use __kv::NoElementTypes as _;
                        __kv::Element::<#ty, #via>::TYPES
                    },
                    __kv_types,
                );
            });
        }
        match (derive.transparent, via) {
            (true, None) => {
                quote_spanned! {child.span=> __kv::visit_transparent(#access, __kv_visitor); }
            }
            (true, Some(via)) => {
                quote_spanned! {child.span=> __kv::visit_transparent_via::<#via>(#access, __kv_visitor); }
            }
            (false, None) => {
                quote_spanned! {child.span=> __kv::visit_field(#access, #segment, __kv_visitor); }
            }
            (false, Some(via)) => {
                quote_spanned! {child.span=> __kv::visit_field_via::<#via>(#access, #segment, __kv_visitor); }
            }
        }
    };
    let mut children: Vec<TokenStream> = derive
        .body
        .children
        .iter()
        .map(|child| {
            let member = &child.member;
            visit(
                child,
                quote_spanned!(child.span=> &self.#member),
                &child.segment,
            )
        })
        .collect();
    if let Some(variants) = &derive.variants {
        let arms: Vec<TokenStream> = variants
            .iter()
            .filter(|variant| !variant.fields.children.is_empty())
            .map(|variant| {
                let ident = variant.ident;
                let single = variant.fields.children.len() == 1
                    && variant.fields.named.is_empty()
                    && variant.fields.unmarked.is_empty();
                let (bindings, visits): (Vec<_>, Vec<_>) = variant
                    .fields
                    .children
                    .iter()
                    .enumerate()
                    .map(|(index, child)| {
                        let member = &child.member;
                        let binding = format_ident!("__kv_child{}", index, span = child.span);
                        let segment = if single {
                            variant.name.to_owned()
                        } else {
                            format!("{}.{}", variant.name, child.segment)
                        };
                        (
                            quote!(#member: #binding),
                            visit(child, quote!(#binding), &segment),
                        )
                    })
                    .unzip();
                quote! { Self::#ident { #(#bindings,)* .. } => { #(#visits)* } }
            })
            .collect();
        if !arms.is_empty() {
            children.push(quote! { match self { #(#arms)* _ => {} } });
        }
    }
    let children = if children.is_empty() {
        TokenStream::new()
    } else {
        quote! { children (__kv_visitor) { #(#children)* } }
    };
    let items = if items.is_empty() {
        TokenStream::new()
    } else {
        quote! { items { #items } }
    };
    let concrete = concrete_type(shell);
    let mut check = TokenStream::new();
    // Evaluated by `cargo check` for a concrete type.
    if let (Some(ty), false) = (&concrete, checks.is_empty()) {
        check.extend(quote! { const _: () = <#ty as __kv::DeclaredKv>::__KV_CHECKS; });
    }
    for field in derive.body.unmarked {
        check.extend(unmarked_check(shell, &shell.type_name, field));
    }
    for variant in derive.variants.iter().flatten() {
        let owner = format!("{}::{}", shell.type_name, variant.name);
        for field in variant.fields.unmarked {
            check.extend(unmarked_check(shell, &owner, field));
        }
    }
    let force_checks = if check.is_empty() {
        TokenStream::new()
    } else {
        quote! { check { #check } }
    };
    // A generic type has no single set of declarations to register.
    let register = concrete.map(|ty| {
        if owner_types.is_empty() {
            quote! { register #ty; }
        } else {
            quote! { register #ty, |__kv_types| { #owner_types }; }
        }
    });
    let header = header(shell, child_bounds(derive));

    quote! {
        #krate::__kv_impl_v0_1! {
            #header
            static [#(#static_specs),*];
            after_load [#(#after_load),*];
            checks [#(#checks)*];
            fn (self, __kv_out) { #evaluate_checks #declarations }
            #children
            #items
            #force_checks
            #register
        }
    }
}

/// What the declarations of a type (its own, then each variant's) generate:
/// the const specs, what is known before load of the others, the const
/// checks, each in declaration order.
#[derive(Default)]
struct Declarations {
    static_specs: Vec<TokenStream>,
    after_load: Vec<TokenStream>,
    checks: Vec<TokenStream>,
}

impl Declarations {
    /// Adds `decls` and returns the code that declares them in `kv_declare`.
    fn push(&mut self, shell: &Shell<'_>, decls: &[ValidDecl<'_>]) -> TokenStream {
        let type_name = &shell.type_name;
        let mut declarations = TokenStream::new();
        for decl in decls {
            let name = &decl.name;
            let mut static_index = None;
            let push = if decl.is_after_load() {
                self.after_load.push(after_load_decl(decl));
                let spec = spec(decl);
                quote! { __kv::declare(__kv_out, #type_name, #name, || __kv::Ok(#spec))?; }
            } else {
                let index = self.static_specs.len();
                static_index = Some(index);
                self.static_specs.push(spec(decl));
                quote! { __kv_out.push(Self::__KV_STATIC[#index].clone()); }
            };
            self.checks.extend(checks::const_checks(
                decl,
                &format!("{type_name}.{name}"),
                static_index,
            ));
            declarations.extend(match &decl.gate {
                Some(gate) => {
                    let condition = gate_expression(gate);
                    quote! { if #condition { #push } }
                }
                None => push,
            });
        }
        declarations
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
    "Mutex",
    "RwLock",
    "RefCell",
    "Cell",
    "OnceLock",
    "OnceCell",
    "cell",
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
fn unmarked_check(shell: &Shell<'_>, owner: &str, field: &Unmarked<'_>) -> TokenStream {
    let label = format!("{owner}.{}", field.segment);
    let params: Vec<String> = shell
        .generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    let tuples = tuples::tuples(field.ty, &params);
    if tuples.is_empty() {
        return unmarked_type(shell, &label, field, field.ty).unwrap_or_default();
    }
    // A tuple holding owners and things that declare nothing is no `KvChild`
    // as a whole, so its elements are asked one by one; every owner a child
    // field could reach is in one of them.
    tuples::leaves(&tuples)
        .into_iter()
        .filter_map(|element| unmarked_type(shell, &label, field, element))
        .collect()
}

/// The check that `ty`, in the unmarked `field`, declares no KV.
fn unmarked_type(
    shell: &Shell<'_>,
    label: &str,
    field: &Unmarked<'_>,
    ty: &syn::Type,
) -> Option<TokenStream> {
    let tokens = ty.to_token_stream();
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
    let ty = with_static_lifetimes(tokens, &params, &lifetimes)?;
    let whole = field.ty.to_token_stream();
    let end = whole.clone().into_iter().last()?.span();
    let written = type_text(whole);
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
    let mut tick_before = false;
    for tree in tokens {
        let word = matches!(tree, TokenTree::Ident(_) | TokenTree::Literal(_));
        match &tree {
            TokenTree::Group(group) => {
                // `&mut [T]`, `dyn (A)`, `&'a [T]`; but `Fn(u8)`.
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
        // A lifetime (`'a`) is spaced from what follows as a keyword is.
        keyword_before = matches!(&tree, TokenTree::Ident(i) if tick_before || ["mut", "dyn", "impl", "const"].iter().any(|k| i == k));
        tick_before = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
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
        for child in derive.all_children() {
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
    let only_when = gate_text(decl);
    let assumes = text(decl.texts.assumes);
    quote! {
        __kv::after_load_decl(
            #name, #cache, #scope, #position_count, #bound, #bytes_per_row, #rows,
            #only_when, #assumes,
        )
    }
}

/// When the declaration holds, `""` for always: its gate, and on an enum's
/// variant the variant (`Cache::Rotating and windowed`).
fn gate_text(decl: &ValidDecl<'_>) -> String {
    match (&decl.variant, &decl.gate) {
        (None, None) => String::new(),
        (None, Some(gate)) => gate.text.clone(),
        (Some(variant), None) => variant.clone(),
        (Some(variant), Some(gate)) => format!("{variant} and {}", gate.text),
    }
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
    let only_when = gate_text(decl);
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
    if gate.is_binding {
        quote_spanned! {span=> __kv::gate(*#ident) }
    } else if gate.is_field {
        quote_spanned! {span=> __kv::gate(self.#ident) }
    } else {
        quote_spanned! {span=> __kv::gate(Self::#ident(self)) }
    }
}
