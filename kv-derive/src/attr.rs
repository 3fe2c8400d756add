//! Parsing one `#[kv(...)]` attribute: split it into `key` / `key = value`
//! entries, then read each value by the grammar its key takes. Values stay
//! token streams (no `syn::Expr`), so syn needs no `full` feature.

use proc_macro2::{Delimiter, Ident, Literal, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::{Lit, LitStr};

use crate::Errors;

/// One `key` or `key = value` inside `#[kv(...)]`.
pub struct Entry {
    pub key: Ident,
    pub value: Option<TokenStream>,
}

/// Splits a token stream at commas that are not inside a group.
pub fn split_top_level(tokens: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut parts = vec![Vec::new()];
    for tree in tokens {
        match &tree {
            TokenTree::Punct(p) if p.as_char() == ',' => parts.push(Vec::new()),
            _ => parts.last_mut().expect("never empty").push(tree),
        }
    }
    if parts.last().is_some_and(Vec::is_empty) {
        parts.pop(); // a trailing comma
    }
    parts
}

/// Reads the entries of an attribute's argument list.
pub fn parse_entries(tokens: TokenStream, errors: &mut Errors) -> Vec<Entry> {
    let mut entries = Vec::new();
    for part in split_top_level(tokens) {
        let mut trees = part.into_iter();
        let key = match trees.next() {
            Some(TokenTree::Ident(key)) => key,
            Some(other) => {
                errors.push(other.span(), "expected a key, like `rows = max_num_seqs`");
                continue;
            }
            None => {
                errors.push(Span::call_site(), "empty entry: remove the extra comma");
                continue;
            }
        };
        let value = match trees.next() {
            None => None,
            Some(TokenTree::Punct(eq)) if eq.as_char() == '=' => {
                let value: TokenStream = trees.collect();
                if value.is_empty() {
                    errors.push(eq.span(), format!("expected a value after `{key} =`"));
                    continue;
                }
                Some(value)
            }
            Some(other) => {
                errors.push(other.span(), format!("expected `=` after `{key}`"));
                continue;
            }
        };
        entries.push(Entry { key, value });
    }
    entries
}

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

fn mentions_self(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "self",
        TokenTree::Group(group) => mentions_self(&group.stream()),
        _ => false,
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

/// A non-blank string literal.
pub fn text(tokens: TokenStream, key: &str, errors: &mut Errors) -> Option<LitStr> {
    match syn::parse2::<LitStr>(tokens.clone()) {
        Ok(lit) if lit.value().trim().is_empty() => {
            errors.push(
                lit.span(),
                format!("`{key}` is blank; {}", blank_advice(key)),
            );
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

fn blank_advice(key: &str) -> &'static str {
    match key {
        "because" => "say why, or the value cannot be reviewed",
        "name" => "name the declaration",
        "cache" => "say what kind of cache holds this, e.g. \"StaticCache\"",
        "crate" => "name the path kv-core is reachable at",
        "only_when" => "name a bool field or `fn(&self) -> bool`, or leave it out",
        _ => "say something or leave it out",
    }
}

/// `name(COUNT, because = "reason")`, as used by `bounded(..)` and `fixed(..)`.
pub struct Counted {
    pub count: Value,
    pub because: LitStr,
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
                Some(value) => because = text(value, "because", errors),
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

/// Whether `text` is exactly one identifier: Rust keywords cannot name a field
/// or method, so they cannot be a gate. Exactly: the lexer drops whitespace and
/// comments, so `" gate "` parses as an identifier but cannot make one.
pub fn is_identifier(text: &str) -> bool {
    syn::parse_str::<Ident>(text).is_ok_and(|ident| ident == text)
}
