//! Value readers: each reads one key's value by the grammar that key takes.
//! Values stay token streams (no `syn::Expr`), so syn needs no `full` feature.

use proc_macro2::{Delimiter, Ident, Literal, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::{Lit, LitStr, Path};

use super::syntax::{parse_entries, split_top_level};
use super::tables::{
    column, Policy, BLOCK_FORMATS, DTYPES, PER_TOKEN_HEAD_FORMATS, POLICIES, ROW_DRIVERS, SCOPES,
    VLLM_DTYPES,
};
use crate::errors::Errors;
use crate::suggest::{closest, nearest, or_list};

/// A count or expression, classified by what it can be checked against.
#[derive(Clone)]
pub enum Value {
    /// An integer literal, checked positive and in range here; kept as its
    /// value, written back unsuffixed so it takes the field's type.
    Literal(u64, Span),
    /// An expression with no `self`: a const, checked at compile time.
    Const(TokenStream),
    /// An expression on `self`: read after load, checked at run time.
    AfterLoad(TokenStream),
}

impl Value {
    pub fn is_after_load(&self) -> bool {
        matches!(self, Value::AfterLoad(_))
    }

    pub fn tokens(&self) -> TokenStream {
        match self {
            Value::Literal(value, span) => {
                let mut literal = Literal::u64_unsuffixed(*value);
                literal.set_span(*span);
                TokenTree::Literal(literal).into()
            }
            Value::Const(tokens) | Value::AfterLoad(tokens) => tokens.clone(),
        }
    }

    pub fn span(&self) -> Span {
        match self {
            Value::Literal(_, span) => *span,
            Value::Const(tokens) | Value::AfterLoad(tokens) => tokens.span(),
        }
    }
}

/// A name from a table (a dtype, a scope), as its variant and where it is written.
#[derive(Clone, Copy)]
pub struct Named {
    pub variant: &'static str,
    pub span: Span,
}

/// An element type: a known name, or an expression of type `DType`.
pub enum DTypeValue {
    Named(Named),
    Expr(Value),
}

impl DTypeValue {
    pub fn is_after_load(&self) -> bool {
        matches!(self, DTypeValue::Expr(value) if value.is_after_load())
    }
}

/// A storage format: a dtype name (kv's or vLLM's), a block format's name,
/// vLLM's name of a per-token-head format, or an expression of type `Storage`.
pub enum StorageValue {
    Dense(Named),
    Blocks(Named),
    /// A `Storage` constant (`INT8_PER_TOKEN_HEAD`).
    Constant(Named),
    Expr(Value),
}

impl StorageValue {
    pub fn is_after_load(&self) -> bool {
        matches!(self, StorageValue::Expr(value) if value.is_after_load())
    }
}

/// `positions = ...`: a count with its reason, or a policy whose reason is
/// generated from its inputs.
pub enum PositionsValue {
    Bounded(Counted),
    Policy(PolicyValue),
}

/// `NAME(FIRST, input = N, ...)`: a position policy and its inputs, each a count.
pub struct PolicyValue {
    pub policy: &'static Policy,
    /// The policy's name, where it is written.
    pub span: Span,
    /// The inputs in the policy's order: its first, then its named ones.
    pub inputs: Vec<(&'static str, Value)>,
    /// The policy as written, for what is known before load.
    pub text: String,
}

impl PositionsValue {
    /// The counts written in it, with the field each fills.
    pub fn counts(&self) -> Vec<(&'static str, &Value)> {
        match self {
            PositionsValue::Bounded(counted) => vec![("positions", &counted.count)],
            PositionsValue::Policy(policy) => policy
                .inputs
                .iter()
                .map(|(field, value)| (*field, value))
                .collect(),
        }
    }

    pub fn is_after_load(&self) -> bool {
        self.counts().iter().any(|(_, value)| value.is_after_load())
    }

    pub fn span(&self) -> Span {
        match self {
            PositionsValue::Bounded(counted) => counted.count.span(),
            PositionsValue::Policy(policy) => policy.span,
        }
    }
}

pub enum RowsValue {
    MaxNumSeqs,
    Fixed(Counted),
}

/// `only_when = "..."`: a bool field (resolved against the struct's fields
/// in `valid`), or a `fn(&self) -> bool` written `"name()"`.
pub enum Gate {
    Name(Ident, LitStr),
    Method(Ident),
}

/// `NAME(COUNT, because = "reason")`, as used by `bounded(..)` and `fixed(..)`.
pub struct Counted {
    pub count: Value,
    pub because: LitStr,
}

thread_local! {
    /// The named fields of the enum variant whose declarations are being
    /// read: the derive's match binds them, so a value naming one is read
    /// after load, as one on `self` is. Empty outside a variant.
    static BINDINGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `read` with `bindings` (a variant's named fields) read as values
/// known only after load.
pub fn with_bindings<T>(bindings: Vec<String>, read: impl FnOnce() -> T) -> T {
    let before = BINDINGS.with(|cell| cell.replace(bindings));
    let out = read();
    BINDINGS.with(|cell| cell.replace(before));
    out
}

fn mentions_self(tokens: &TokenStream) -> bool {
    BINDINGS.with(|bindings| mentions_self_or(tokens, &bindings.borrow()))
}

/// Whether `tokens` name `self` or one of `bindings` (not as a path's or a
/// field's later segment: `x.window` and `a::window` do not).
pub(crate) fn mentions_self_or(tokens: &TokenStream, bindings: &[String]) -> bool {
    let mut after_dot = false;
    tokens.clone().into_iter().any(|tree| {
        let found = match &tree {
            TokenTree::Ident(ident) => {
                ident == "self"
                    || (!after_dot && !bindings.is_empty() && bindings.contains(&ident.to_string()))
            }
            TokenTree::Group(group) => mentions_self_or(&group.stream(), bindings),
            _ => false,
        };
        after_dot =
            matches!(&tree, TokenTree::Punct(p) if p.as_char() == '.' || p.as_char() == ':');
        found
    })
}

/// An expression: `Const` unless it mentions `self`.
pub fn expression(tokens: TokenStream) -> Value {
    if mentions_self(&tokens) {
        Value::AfterLoad(tokens)
    } else {
        Value::Const(tokens)
    }
}

/// A count: a positive integer literal, a const expression or a `self` expression.
pub fn count(tokens: TokenStream, key: &str, errors: &mut Errors) -> Option<Value> {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    match trees.as_slice() {
        [TokenTree::Literal(literal)] => literal_count(literal, key, errors),
        [TokenTree::Punct(minus), TokenTree::Literal(_)] if minus.as_char() == '-' => {
            errors.push_tokens(
                &tokens,
                format!("`{key}` is negative; a count must be a positive integer"),
            );
            None
        }
        _ => Some(expression(tokens)),
    }
}

fn literal_count(literal: &Literal, key: &str, errors: &mut Errors) -> Option<Value> {
    let span = literal.span();
    match Lit::new(literal.clone()) {
        Lit::Int(int) => match int.base10_parse::<u64>() {
            Ok(0) => errors.push(
                span,
                format!(
                    "`{key}` is 0; a count must be positive (to hold nothing, declare nothing)"
                ),
            ),
            Ok(value) => return Some(Value::Literal(value, span)),
            Err(_) => errors.push(span, format!("`{key}` does not fit in u64")),
        },
        Lit::Float(_) => errors.push(span, format!("`{key}` must be an integer, not a float")),
        _ => errors.push(span, format!("`{key}` must be an integer or an expression")),
    }
    None
}

/// What a blank `because` needs, in `skip` and in `bounded(..)` / `fixed(..)`.
pub const BECAUSE_ADVICE: &str = "say why, or the value cannot be reviewed";

/// A non-blank string literal; `advice` says what to write when it is blank.
pub fn text(tokens: TokenStream, key: &str, advice: &str, errors: &mut Errors) -> Option<LitStr> {
    match string_literal(&tokens) {
        Ok(lit) if lit.value().trim().is_empty() => {
            errors.push(lit.span(), format!("`{key}` is blank; {advice}"));
            None
        }
        Ok(lit) => Some(lit),
        Err(_) => {
            errors.push_tokens(
                &tokens,
                format!("`{key}` must be a string literal, like `{key} = \"...\"`"),
            );
            None
        }
    }
}

/// The one string literal `tokens` hold (inside invisible groups too, as a
/// `macro_rules!` forwarding `$text:literal` passes it), read without syn's
/// parser.
fn string_literal(tokens: &TokenStream) -> Result<LitStr, ()> {
    let mut trees = tokens.clone().into_iter();
    match (trees.next(), trees.next()) {
        (Some(TokenTree::Literal(literal)), None) => match Lit::new(literal) {
            Lit::Str(lit) => Ok(lit),
            _ => Err(()),
        },
        (Some(TokenTree::Group(group)), None) if group.delimiter() == Delimiter::None => {
            string_literal(&group.stream())
        }
        _ => Err(()),
    }
}

/// `crate = "path"`.
pub fn krate(tokens: TokenStream, key: &str, advice: &str, errors: &mut Errors) -> Option<Path> {
    let lit = text(tokens, key, advice, errors)?;
    match lit.parse::<Path>() {
        Ok(path) => Some(path),
        Err(_) => {
            errors.push(
                lit.span(),
                format!("`{key}` must name a path, like `{key} = \"my_kv\"`"),
            );
            None
        }
    }
}

/// Reads `NAME(COUNT, because = "...")` where `tokens` start with `NAME`.
pub fn counted(
    function: &Ident,
    rest: &[TokenTree],
    key: &str,
    errors: &mut Errors,
) -> Option<Counted> {
    let group = match rest {
        [TokenTree::Group(group)] if group.delimiter() == Delimiter::Parenthesis => group,
        _ => {
            errors.push(
                function.span(),
                format!("expected `{function}(COUNT, because = \"...\")`"),
            );
            return None;
        }
    };
    let mut parts = split_top_level(group.stream()).into_iter();
    let Some(count_tokens) = parts.next() else {
        errors.push(
            group.span(),
            format!("`{function}()` needs a count and `because = \"...\"`"),
        );
        return None;
    };
    let count = if count_tokens.is_empty() {
        errors.push(
            group.span(),
            format!("`{function}(..)` needs a count first: `{function}(N, because = \"...\")`"),
        );
        None
    } else {
        count(count_tokens.into_iter().collect(), key, errors)
    };
    let mut because = None;
    let mut because_given = false;
    for part in parts {
        let entries = parse_entries(part.into_iter().collect(), errors);
        for entry in entries {
            if entry.key != "because" {
                errors.push(
                    entry.key.span(),
                    format!(
                        "unknown key `{}` in `{function}(..)`; it takes a count and `because = \"...\"`",
                        entry.key
                    ),
                );
                continue;
            }
            if because_given {
                errors.push(entry.key.span(), "duplicate key `because`");
                continue;
            }
            because_given = true;
            match entry.value {
                Some(value) => because = text(value, "because", BECAUSE_ADVICE, errors),
                None => errors.push(entry.key.span(), "expected `because = \"...\"`"),
            }
        }
    }
    if !because_given {
        let why = if key == "positions" {
            "say what bounds the positions, e.g. `because = \"sliding_window(72) - 1\"`"
        } else {
            "an unexplained count cannot be reviewed"
        };
        errors.push(
            group.span(),
            format!("`{function}(..)` needs `because = \"...\"`: {why}"),
        );
    }
    Some(Counted {
        count: count?,
        because: because?,
    })
}

/// Whether `text` is exactly one identifier (raw ones included): Rust keywords
/// cannot name a field or method, so they cannot be a gate. Exactly: the lexer
/// drops whitespace and comments, so `" gate "` parses as an identifier but
/// cannot make one.
pub fn identifier(text: &str, span: Span) -> Option<Ident> {
    let mut ident = syn::parse_str::<Ident>(text).ok().filter(|i| i == text)?;
    ident.set_span(span);
    Some(ident)
}

/// `only_when = "field"` or `only_when = "method()"`.
pub fn gate(value: TokenStream, key: &str, advice: &str, errors: &mut Errors) -> Option<Gate> {
    let lit = text(value, key, advice, errors)?;
    let written = lit.value();
    let (name, method) = match written.strip_suffix("()") {
        Some(name) => (name, true),
        None => (written.as_str(), false),
    };
    match identifier(name, lit.span()) {
        Some(ident) if method => Some(Gate::Method(ident)),
        Some(ident) => Some(Gate::Name(ident, lit)),
        None => {
            errors.push(
                lit.span(),
                format!(
                    "`{key}` names a bool field (`\"field\"`) or a `fn(&self) -> bool` \
                     (`\"method()\"`) of this type; state a condition the model cannot \
                     observe with `assumes = \"...\"`"
                ),
            );
            None
        }
    }
}

fn single_ident(value: &TokenStream) -> Option<Ident> {
    let mut trees = value.clone().into_iter();
    match (trees.next(), trees.next()) {
        (Some(TokenTree::Ident(ident)), None) => Some(ident),
        _ => None,
    }
}

fn named(table: &[(&str, &'static str)], ident: &Ident) -> Option<Named> {
    table
        .iter()
        .find(|(name, _)| ident == name)
        .map(|(_, variant)| Named {
            variant,
            span: ident.span(),
        })
}

/// A dtype name, or an expression of type `DType`. A word close to a dtype
/// name (`bf61`) is taken for a misspelling; any other word (`my_dtype`,
/// `MY_DTYPE`) is a const.
pub fn dtype(value: TokenStream, errors: &mut Errors) -> Option<DTypeValue> {
    let Some(ident) = single_ident(&value) else {
        return Some(DTypeValue::Expr(expression(value)));
    };
    if let Some(named) = named(DTYPES, &ident) {
        return Some(DTypeValue::Named(named));
    }
    let text = ident.to_string();
    let valid = column(DTYPES);
    let lower = text
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if lower {
        if let Some(suggestion) = closest(&text, &valid) {
            errors.push(
                ident.span(),
                format!("unknown dtype `{text}`; did you mean `{suggestion}`?"),
            );
            return None;
        }
    }
    Some(DTypeValue::Expr(expression(value)))
}

pub fn scope(value: TokenStream, errors: &mut Errors) -> Option<Named> {
    let valid = column(SCOPES);
    match single_ident(&value) {
        Some(ident) => {
            let found = named(SCOPES, &ident);
            if found.is_none() {
                let text = ident.to_string();
                errors.push(
                    ident.span(),
                    format!(
                        "unknown scope `{text}`{}",
                        or_list(&nearest(&text, &valid), &valid)
                    ),
                );
            }
            found
        }
        None => {
            errors.push_tokens(&value, format!("`scope` is one of: {}", valid.join(", ")));
            None
        }
    }
}

/// Every name `positions = NAME(..)` takes.
fn position_functions() -> Vec<&'static str> {
    let mut names = vec!["bounded"];
    names.extend(POLICIES.iter().map(|p| p.name));
    names
}

pub fn positions(value: TokenStream, errors: &mut Errors) -> Option<PositionsValue> {
    let trees: Vec<TokenTree> = value.clone().into_iter().collect();
    if let [TokenTree::Ident(function), rest @ ..] = trees.as_slice() {
        if function == "bounded" {
            return counted(function, rest, "positions", errors).map(PositionsValue::Bounded);
        }
        if let Some(policy) = POLICIES.iter().find(|p| function == p.name) {
            return policy_value(policy, function, rest, &value, errors)
                .map(PositionsValue::Policy);
        }
        let text = function.to_string();
        if let Some(suggestion) = closest(&text, &position_functions()) {
            errors.push(
                function.span(),
                format!("unknown position policy `{text}`; did you mean `{suggestion}`?"),
            );
            return None;
        }
    }
    errors.push_tokens(
        &value,
        format!(
            "positions need the reason for their bound: write `positions = bounded(N, because = \"...\")`, \
             e.g. `bounded(71, because = \"sliding_window(72) - 1\")`, or a policy that gives its own: {}",
            POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
        ),
    );
    None
}

/// `NAME(FIRST, input = N, ...)` for `policy`.
fn policy_value(
    policy: &'static Policy,
    function: &Ident,
    rest: &[TokenTree],
    written: &TokenStream,
    errors: &mut Errors,
) -> Option<PolicyValue> {
    let form = || {
        let mut form = format!("{}({}", policy.name, policy.first.to_uppercase());
        for named in policy.named {
            form.push_str(&format!(", {named} = N"));
        }
        form.push(')');
        form
    };
    let group = match rest {
        [TokenTree::Group(group)] if group.delimiter() == Delimiter::Parenthesis => group,
        _ => {
            errors.push(function.span(), format!("expected `{}`", form()));
            return None;
        }
    };
    let mut parts = split_top_level(group.stream()).into_iter();
    let first = match parts.next() {
        Some(tokens) if !tokens.is_empty() => {
            count(tokens.into_iter().collect(), policy.first, errors)
        }
        _ => {
            errors.push(
                group.span(),
                format!(
                    "`{}(..)` needs its {} first: `{}`",
                    policy.name,
                    policy.first,
                    form()
                ),
            );
            None
        }
    };
    let mut named: Vec<Option<(Ident, Option<Value>)>> =
        policy.named.iter().map(|_| None).collect();
    let mut ok = true;
    for part in parts {
        for entry in parse_entries(part.into_iter().collect(), errors) {
            if entry.key == "because" {
                errors.push(
                    entry.key.span(),
                    format!(
                        "`{}(..)` writes its own reason from its inputs; remove `because`",
                        policy.name
                    ),
                );
                ok = false;
                continue;
            }
            let Some(index) = policy.named.iter().position(|n| entry.key == n) else {
                errors.push(
                    entry.key.span(),
                    format!(
                        "unknown input `{}` in `{}(..)`; it takes: `{}`",
                        entry.key,
                        policy.name,
                        form()
                    ),
                );
                ok = false;
                continue;
            };
            if named[index].is_some() {
                errors.push(entry.key.span(), format!("duplicate key `{}`", entry.key));
                ok = false;
                continue;
            }
            let value = match entry.value {
                Some(value) => count(value, policy.named[index], errors),
                None => {
                    errors.push(
                        entry.key.span(),
                        format!("expected `{} = N`", policy.named[index]),
                    );
                    None
                }
            };
            named[index] = Some((entry.key, value));
        }
    }
    let mut inputs = vec![(policy.first, first?)];
    for (index, slot) in named.into_iter().enumerate() {
        match slot {
            Some((_, Some(value))) => inputs.push((policy.named[index], value)),
            Some((_, None)) => ok = false,
            None => {
                errors.push(
                    group.span(),
                    format!(
                        "`{}(..)` needs `{} = N`: `{}`",
                        policy.name,
                        policy.named[index],
                        form()
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then(|| PolicyValue {
        policy,
        span: function.span(),
        inputs,
        text: written.to_string(),
    })
}

/// A storage format: a dtype or block format name, or an expression of type
/// `Storage`. A word close to a format name (`q8`) is taken for a
/// misspelling and the valid names are listed; any other word is a const.
pub fn storage(value: TokenStream, key: &str, errors: &mut Errors) -> Option<StorageValue> {
    let Some(ident) = single_ident(&value) else {
        return Some(StorageValue::Expr(expression(value)));
    };
    if let Some(named) = named(DTYPES, &ident).or_else(|| named(VLLM_DTYPES, &ident)) {
        return Some(StorageValue::Dense(named));
    }
    if let Some(named) = named(BLOCK_FORMATS, &ident) {
        return Some(StorageValue::Blocks(named));
    }
    if let Some(named) = named(PER_TOKEN_HEAD_FORMATS, &ident) {
        return Some(StorageValue::Constant(named));
    }
    let text = ident.to_string();
    let mut valid = column(DTYPES);
    valid.extend(column(BLOCK_FORMATS));
    valid.extend(column(VLLM_DTYPES));
    valid.extend(column(PER_TOKEN_HEAD_FORMATS));
    let lower = text
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    // A name the word begins (`q8` of `q8_0`) is a better guess than one a
    // letter away (`i8`).
    let prefixed = valid.iter().copied().find(|name| name.starts_with(&text));
    if lower {
        if let Some(suggestion) = prefixed.or_else(|| closest(&text, &valid)) {
            errors.push(
                ident.span(),
                format!(
                    "unknown storage format `{text}` for `{key}`; did you mean `{suggestion}`? \
                     The formats are: {}",
                    valid.join(", ")
                ),
            );
            return None;
        }
    }
    Some(StorageValue::Expr(expression(value)))
}

pub fn rows(value: TokenStream, errors: &mut Errors) -> Option<RowsValue> {
    let trees: Vec<TokenTree> = value.clone().into_iter().collect();
    match trees.as_slice() {
        [TokenTree::Ident(driver)] if driver == "max_num_seqs" => Some(RowsValue::MaxNumSeqs),
        [TokenTree::Ident(function), rest @ ..] if function == "fixed" => {
            counted(function, rest, "rows", errors).map(RowsValue::Fixed)
        }
        [TokenTree::Ident(other), ..] => {
            let text = other.to_string();
            errors.push(
                other.span(),
                format!(
                    "unknown row driver `{text}`{}",
                    or_list(
                        &nearest(&text, ROW_DRIVERS),
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

/// `#[kv(child)]`, or `#[kv(child(with = path))]`: how the field's owners
/// are reached.
pub struct ChildMark {
    /// A function of the user's that returns the owners the field holds,
    /// for a container kv does not walk.
    pub with: Option<Path>,
}

/// Reads `child`'s arguments: none, or `with = path` (a path, or a string
/// literal holding one, as serde's `with` is written).
pub fn child(args: TokenStream, errors: &mut Errors) -> Option<ChildMark> {
    const WITH: &str = "write `child(with = path::to::owners)`, naming a function \
                        `fn owners(field: &FieldType) -> impl IntoIterator<Item = &Owner>`";
    if args.is_empty() {
        return Some(ChildMark { with: None });
    }
    let mut with = None;
    for entry in parse_entries(args, errors) {
        if entry.key != "with" {
            errors.push(
                entry.key.span(),
                format!("unknown argument `{}` of `child`: {WITH}", entry.key),
            );
            continue;
        }
        if with.is_some() {
            errors.push(entry.key.span(), "duplicate key `with`");
            continue;
        }
        let Some(value) = entry.value else {
            errors.push(entry.key.span(), format!("`with` needs a value: {WITH}"));
            continue;
        };
        let path = match syn::parse2::<LitStr>(value.clone()) {
            Ok(lit) => lit.parse::<Path>(),
            Err(_) => syn::parse2::<Path>(value.clone()),
        };
        match path {
            Ok(path) => with = Some(path),
            Err(_) => errors.push_tokens(&value, format!("`with` must name a function: {WITH}")),
        }
    }
    with.map(|path| ChildMark { with: Some(path) })
}
