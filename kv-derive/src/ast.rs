//! The derive's input as a small AST: the struct, its options, its children
//! and its declarations, read from `#[kv(...)]` attributes.

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields, Generics, LitStr, Member, Path};

use crate::attr::{self, Counted, Entry, Value};
use crate::suggest::nearest;
use crate::Errors;

/// Keys a declaration takes.
pub const DECLARATION_KEYS: &[&str] = &[
    "name",
    "cache",
    "layers",
    "kv_heads",
    "head_dim",
    "v_head_dim",
    "dtype",
    "geometry",
    "positions",
    "scope",
    "rows",
    "only_when",
    "assumes",
    "note",
];
/// Keys that configure the derive, on the struct.
const OPTION_KEYS: &[&str] = &["crate", "transparent"];
/// The key that marks a child field.
const CHILD_KEY: &str = "child";

pub const DTYPES: &[(&str, &str)] = &[
    ("f64", "F64"),
    ("f32", "F32"),
    ("f16", "F16"),
    ("bf16", "BF16"),
    ("f8e4m3", "F8E4M3"),
    ("f8e5m2", "F8E5M2"),
    ("i8", "I8"),
    ("u8", "U8"),
];
pub const SCOPES: &[(&str, &str)] = &[
    ("invocation", "Invocation"),
    ("request", "Request"),
    ("session", "Session"),
    ("model", "Model"),
];

pub struct Input<'a> {
    pub ident: &'a Ident,
    pub generics: &'a Generics,
    pub krate: Path,
    pub transparent: Option<Span>,
    /// Names of the struct's named fields, to tell a gate field from a gate method.
    pub field_names: Vec<String>,
    pub children: Vec<Child>,
    pub decls: Vec<Decl>,
    /// The struct is not a struct: only fallback impls are emitted.
    pub not_a_struct: bool,
}

pub struct Child {
    pub member: Member,
    /// The path segment: the field's name or index.
    pub segment: String,
    pub span: Span,
    /// The field's type, for the `KvChild` bound a generic type needs.
    pub ty: TokenStream,
}

/// An element type: a known name, or an expression of type `DType`.
pub enum DTypeValue {
    Named(Ident),
    Expr(Value),
}

pub enum RowsValue {
    MaxNumSeqs,
    Fixed(Counted),
}

/// One declaration, as written. Keys given with an invalid value are recorded
/// in `given` so that they are not also reported missing.
pub struct Decl {
    /// The `kv` of `#[kv(...)]`, where missing-key errors point.
    pub span: Span,
    /// The field a field-level declaration sits on.
    pub field: Option<(Member, Span)>,
    pub given: Vec<Ident>,
    pub name: Option<LitStr>,
    pub cache: Option<LitStr>,
    pub layers: Option<Value>,
    pub kv_heads: Option<Value>,
    pub head_dim: Option<Value>,
    pub v_head_dim: Option<Value>,
    pub dtype: Option<DTypeValue>,
    pub geometry: Option<Value>,
    pub positions: Option<Counted>,
    pub scope: Option<Ident>,
    pub rows: Option<RowsValue>,
    pub only_when: Option<LitStr>,
    pub assumes: Option<LitStr>,
    pub note: Option<LitStr>,
}

impl Decl {
    fn new(span: Span, field: Option<(Member, Span)>) -> Decl {
        Decl {
            span,
            field,
            given: Vec::new(),
            name: None,
            cache: None,
            layers: None,
            kv_heads: None,
            head_dim: None,
            v_head_dim: None,
            dtype: None,
            geometry: None,
            positions: None,
            scope: None,
            rows: None,
            only_when: None,
            assumes: None,
            note: None,
        }
    }

    pub fn has(&self, key: &str) -> bool {
        self.given.iter().any(|k| k == key)
    }

    /// The declaration's name: explicit, else the field's.
    pub fn name_text(&self) -> Option<String> {
        match (&self.name, &self.field) {
            (Some(name), _) => Some(name.value()),
            (None, Some((Member::Named(ident), _))) => Some(ident.to_string()),
            _ => None,
        }
    }

    /// Whether any value is read after load.
    pub fn is_after_load(&self) -> bool {
        let counts = [
            &self.layers,
            &self.kv_heads,
            &self.head_dim,
            &self.v_head_dim,
            &self.geometry,
        ];
        counts
            .iter()
            .any(|v| v.as_ref().is_some_and(Value::is_after_load))
            || matches!(&self.dtype, Some(DTypeValue::Expr(v)) if v.is_after_load())
            || self
                .positions
                .as_ref()
                .is_some_and(|p| p.count.is_after_load())
            || matches!(&self.rows, Some(RowsValue::Fixed(f)) if f.count.is_after_load())
    }
}

pub fn parse<'a>(input: &'a DeriveInput, errors: &mut Errors) -> Input<'a> {
    let mut parsed = Input {
        ident: &input.ident,
        generics: &input.generics,
        krate: syn::parse_quote!(::kv_core),
        transparent: None,
        field_names: Vec::new(),
        children: Vec::new(),
        decls: Vec::new(),
        not_a_struct: false,
    };
    let fields = match &input.data {
        Data::Struct(data) => Some(&data.fields),
        Data::Enum(data) => {
            errors.push(
                data.enum_token.span,
                "#[derive(ModelLocalKv)] supports structs only; declare on the struct that holds the cache",
            );
            None
        }
        Data::Union(data) => {
            errors.push(
                data.union_token.span,
                "#[derive(ModelLocalKv)] supports structs only; declare on the struct that holds the cache",
            );
            None
        }
    };
    parsed.not_a_struct = fields.is_none();

    for attribute in kv_attributes(&input.attrs) {
        let Some(entries) = entries_of(attribute, errors) else {
            continue;
        };
        let is_option = |e: &Entry| OPTION_KEYS.iter().any(|k| e.key == k);
        // An attribute of options only configures the derive; any other key
        // makes it a declaration, where an option key is reported as misplaced.
        if entries.iter().all(is_option) {
            read_options(&mut parsed, entries, errors);
        } else {
            let mut decl = Decl::new(attribute.path().span(), None);
            read_declaration(&mut decl, entries, errors);
            parsed.decls.push(decl);
        }
    }

    let Some(fields) = fields else { return parsed };
    if let Fields::Named(named) = fields {
        parsed.field_names = named
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref().map(ToString::to_string))
            .collect();
    }
    for (index, field) in fields.iter().enumerate() {
        // syn's Clone impls sit behind a feature; build the member afresh instead.
        let member = || match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(syn::Index::from(index)),
        };
        let segment = match &field.ident {
            Some(ident) => ident.to_string(),
            None => index.to_string(),
        };
        for attribute in kv_attributes(&field.attrs) {
            let Some(entries) = entries_of(attribute, errors) else {
                continue;
            };
            if let Some(child) = entries.iter().find(|e| e.key == CHILD_KEY) {
                if let Some(value) = &child.value {
                    errors.push(value.span(), "`child` takes no value: write `#[kv(child)]`");
                }
                for other in entries.iter().filter(|e| e.key != CHILD_KEY) {
                    errors.push(
                        other.key.span(),
                        "`child` stands alone: put declarations in their own #[kv(...)]",
                    );
                }
                parsed.children.push(Child {
                    member: member(),
                    segment: segment.clone(),
                    span: child.key.span(),
                    ty: field.ty.to_token_stream(),
                });
                continue;
            }
            let mut decl = Decl::new(attribute.path().span(), Some((member(), field.span())));
            read_declaration(&mut decl, entries, errors);
            parsed.decls.push(decl);
        }
    }
    parsed
}

fn kv_attributes(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("kv"))
}

fn entries_of(attribute: &Attribute, errors: &mut Errors) -> Option<Vec<Entry>> {
    let tokens = match attribute.meta.require_list() {
        Ok(list) => list.tokens.clone(),
        Err(_) => {
            errors.push_tokens(attribute, "expected `#[kv(...)]`");
            return None;
        }
    };
    if tokens.is_empty() {
        errors.push(
            attribute.span(),
            "empty `#[kv()]`: declare something or remove it",
        );
        return None;
    }
    Some(attr::parse_entries(tokens, errors))
}

fn read_options(input: &mut Input<'_>, entries: Vec<Entry>, errors: &mut Errors) {
    for entry in entries {
        let key = entry.key.to_string();
        match key.as_str() {
            "crate" => match entry.value.map(|v| attr::text(v, "crate", errors)) {
                Some(Some(lit)) => match lit.parse::<Path>() {
                    Ok(path) => input.krate = path,
                    Err(_) => errors.push(
                        lit.span(),
                        "`crate` must name a path, like `crate = \"my_kv\"`",
                    ),
                },
                Some(None) => {}
                None => errors.push(entry.key.span(), "expected `crate = \"path::to::kv_core\"`"),
            },
            "transparent" => {
                if let Some(value) = entry.value {
                    errors.push(
                        value.span(),
                        "`transparent` takes no value: write `#[kv(transparent)]`",
                    );
                } else if input.transparent.is_some() {
                    errors.push(entry.key.span(), "duplicate key `transparent`");
                } else {
                    input.transparent = Some(entry.key.span());
                }
            }
            _ => unreachable!("only option keys reach read_options"),
        }
    }
}

fn read_declaration(decl: &mut Decl, entries: Vec<Entry>, errors: &mut Errors) {
    for entry in entries {
        let key = entry.key.to_string();
        if !DECLARATION_KEYS.contains(&key.as_str()) {
            let message = match key.as_str() {
                "child" => {
                    "`child` marks a field: put `#[kv(child)]` on the field that holds the child"
                        .to_string()
                }
                "crate" | "transparent" => {
                    format!("`{key}` goes in its own #[kv(...)] on the struct")
                }
                _ => format!(
                    "unknown key `{key}`{}",
                    or_list(&nearest(&key, &all_keys()), DECLARATION_KEYS)
                ),
            };
            errors.push(entry.key.span(), message);
            continue;
        }
        if decl.has(&key) {
            errors.push(entry.key.span(), format!("duplicate key `{key}`"));
            continue;
        }
        decl.given.push(entry.key.clone());
        let Some(value) = entry.value else {
            errors.push(
                entry.key.span(),
                format!("`{key}` needs a value: {}", example(&key)),
            );
            continue;
        };
        match key.as_str() {
            "name" => decl.name = attr::text(value, "name", errors),
            "cache" => decl.cache = attr::text(value, "cache", errors),
            "assumes" => decl.assumes = attr::text(value, "assumes", errors),
            "note" => decl.note = attr::text(value, "note", errors),
            "only_when" => decl.only_when = gate(value, errors),
            "layers" => decl.layers = attr::count(value, "layers", errors),
            "kv_heads" => decl.kv_heads = attr::count(value, "kv_heads", errors),
            "head_dim" => decl.head_dim = attr::count(value, "head_dim", errors),
            "v_head_dim" => decl.v_head_dim = attr::count(value, "v_head_dim", errors),
            "geometry" => decl.geometry = Some(attr::expression(value)),
            "dtype" => decl.dtype = dtype(value, errors),
            "scope" => decl.scope = scope(value, errors),
            "positions" => decl.positions = positions(value, errors),
            "rows" => decl.rows = rows(value, errors),
            _ => unreachable!("every declaration key is handled above"),
        }
    }
}

/// Every key, for suggestions.
fn all_keys() -> Vec<&'static str> {
    let keys = DECLARATION_KEYS.iter().chain(OPTION_KEYS).copied();
    keys.chain([CHILD_KEY]).collect()
}

fn or_list(hint: &str, keys: &[&str]) -> String {
    if hint.is_empty() {
        format!("; expected one of: {}", keys.join(", "))
    } else {
        hint.to_string()
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "rows" => "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`",
        "positions" => "`positions = bounded(N, because = \"...\")`",
        "scope" => "one of `invocation`, `request`, `session`, `model`",
        "dtype" => "a dtype like `bf16`, or an expression of type `kv_core::DType`",
        "geometry" => "an expression of type `Geometry` or `Result<Geometry, KvError>`",
        "layers" | "kv_heads" | "head_dim" | "v_head_dim" => {
            "a positive integer, a const expression, or an expression on `self`"
        }
        _ => "a string literal",
    }
}

fn gate(value: TokenStream, errors: &mut Errors) -> Option<LitStr> {
    let lit = attr::text(value, "only_when", errors)?;
    if attr::is_identifier(&lit.value()) {
        Some(lit)
    } else {
        errors.push(
            lit.span(),
            "`only_when` names a bool field or a `fn(&self) -> bool` of this type; \
             state a condition the model cannot observe with `assumes = \"...\"`",
        );
        None
    }
}

fn single_ident(value: &TokenStream) -> Option<Ident> {
    let mut trees = value.clone().into_iter();
    match (trees.next(), trees.next()) {
        (Some(TokenTree::Ident(ident)), None) => Some(ident),
        _ => None,
    }
}

fn names(table: &[(&'static str, &'static str)]) -> Vec<&'static str> {
    table.iter().map(|(name, _)| *name).collect()
}

fn dtype(value: TokenStream, errors: &mut Errors) -> Option<DTypeValue> {
    let Some(ident) = single_ident(&value) else {
        return Some(DTypeValue::Expr(attr::expression(value)));
    };
    let text = ident.to_string();
    if DTYPES.iter().any(|(name, _)| *name == text) {
        return Some(DTypeValue::Named(ident));
    }
    // A lower-case word is meant as a dtype name; anything else is a const's path.
    if text
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        let valid = names(DTYPES);
        errors.push(
            ident.span(),
            format!(
                "unknown dtype `{text}`{}",
                or_list(&nearest(&text, &valid), &valid)
            ),
        );
        return None;
    }
    Some(DTypeValue::Expr(attr::expression(value)))
}

fn scope(value: TokenStream, errors: &mut Errors) -> Option<Ident> {
    let valid = names(SCOPES);
    match single_ident(&value) {
        Some(ident) if valid.iter().any(|s| ident == s) => Some(ident),
        Some(ident) => {
            let text = ident.to_string();
            errors.push(
                ident.span(),
                format!(
                    "unknown scope `{text}`{}",
                    or_list(&nearest(&text, &valid), &valid)
                ),
            );
            None
        }
        None => {
            errors.push_tokens(&value, format!("`scope` is one of: {}", valid.join(", ")));
            None
        }
    }
}

fn positions(value: TokenStream, errors: &mut Errors) -> Option<Counted> {
    let trees: Vec<TokenTree> = value.clone().into_iter().collect();
    if let [TokenTree::Ident(function), rest @ ..] = trees.as_slice() {
        if function == "bounded" {
            return attr::counted(function, rest, "positions", errors);
        }
    }
    errors.push_tokens(
        &value,
        "positions need the reason for their bound: write `positions = bounded(N, because = \"...\")`, \
         e.g. `bounded(71, because = \"sliding_window(72) - 1\")`",
    );
    None
}

fn rows(value: TokenStream, errors: &mut Errors) -> Option<RowsValue> {
    let trees: Vec<TokenTree> = value.clone().into_iter().collect();
    match trees.as_slice() {
        [TokenTree::Ident(driver)] if driver == "max_num_seqs" => Some(RowsValue::MaxNumSeqs),
        [TokenTree::Ident(function), rest @ ..] if function == "fixed" => {
            attr::counted(function, rest, "rows", errors).map(RowsValue::Fixed)
        }
        [TokenTree::Ident(other), ..] => {
            let text = other.to_string();
            errors.push(
                other.span(),
                format!(
                    "unknown row driver `{text}`{}",
                    or_list(
                        &nearest(&text, &["max_num_seqs", "fixed"]),
                        &["max_num_seqs", "fixed(N, because = \"...\")"]
                    )
                ),
            );
            None
        }
        _ => {
            errors.push_tokens(
                &value,
                "rows need a driver: `rows = max_num_seqs`, or `rows = fixed(N, because = \"...\")` for a count the model controls",
            );
            None
        }
    }
}
