//! Mutations: by entry (drop, duplicate, swap values, bare keys, unknown
//! keys, junk values), then by token (delete, duplicate, swap, replace,
//! insert, wrap in or unwrap groups, truncate).

use super::*;

// ---------------------------------------------------------------------------
// Mutations by entry.

/// Every key the derive knows, plus near misses and names that cannot be keys.
pub(crate) fn keys() -> Vec<&'static str> {
    let known = crate::attr::keys::KEYS.iter().map(|key| key.name);
    let others = [
        "because", "rwos", "kv_head", "Layers", "r#name", "self", "_", "é",
    ];
    known.chain(others).collect()
}

/// Values that are wrong for some or every key.
pub(crate) const JUNK_VALUES: &[&str] = &[
    "",
    "0",
    "-1",
    "- 1",
    "-0",
    "99999999999999999999999",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1.5",
    "1e10",
    "1f32",
    "0.0",
    "1u8",
    "0x0",
    "0b0",
    "\"\"",
    "\"  \\t\\n \"",
    "\" async_chunk \"",
    "\"/* c */ async_chunk\"",
    "\"async_chunk // c\"",
    "\"r#type\"",
    "\"self\"",
    "\"Self\"",
    "\"crate\"",
    "\"_\"",
    "\"1abc\"",
    "\"a b\"",
    "\"a::b\"",
    "\"::\"",
    "\"kv_core::\"",
    "\"x\"suffix",
    "b\"x\"",
    "'c'",
    "c\"x\"",
    "true",
    "()",
    "[]",
    "{}",
    "((()))",
    "(1)",
    "= =",
    ":",
    ";",
    "::",
    "-",
    "bounded",
    "bounded()",
    "bounded(,)",
    "bounded(0)",
    "bounded(1)",
    "bounded(1,)",
    "bounded(, because = \"x\")",
    "bounded(1, because)",
    "bounded(1, because = )",
    "bounded(1, because = \"\")",
    "bounded(1, because = 3)",
    "bounded(1, because = \"x\", because = \"y\")",
    "bounded(1, becuase = \"x\")",
    "bounded(1 because = \"x\")",
    "bounded(1,, because = \"x\")",
    "bounded[1, because = \"x\"]",
    "bounded{1, because = \"x\"}",
    "bounded(1, because = \"x\") extra",
    "bounded(-5, because = \"x\")",
    "bounded(99999999999999999999999, because = \"x\")",
    "bounded(1.0, because = \"x\")",
    "bounded(\"1\", because = \"x\")",
    "bounded(self, because = \"x\")",
    "bounded(1, 2, because = \"x\")",
    "bounded(1, because = \"x\" \"y\")",
    "fixed(0, because = \"x\")",
    "fixed(-1, because = \"x\")",
    "fixed(1)",
    "fixed",
    "max_num_seqs()",
    "max_num_seqs + 1",
    "max_nm_seqs",
    "Max_Num_Seqs",
    "request session",
    "requets",
    "Request",
    "bf61",
    "BF16",
    "f32 f16",
    "r#f32",
    "self",
    "Self",
    "super",
    "crate",
    "self.",
    "self..x",
    "child",
    "'a",
    "#",
    "#[kv]",
    "=",
];

#[derive(Clone, Debug)]
pub(crate) enum EntryOp {
    Drop(Index),
    Duplicate(Index),
    SwapValues(Index, Index),
    Junk(Index, &'static str),
    Bare(Index),
    RenameKey(Index, &'static str),
    Add(&'static str, &'static str),
    Move(Index, Index),
}

pub(crate) fn entry_op() -> impl Strategy<Value = (Index, EntryOp)> {
    let op = prop_oneof![
        any::<Index>().prop_map(EntryOp::Drop),
        any::<Index>().prop_map(EntryOp::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| EntryOp::SwapValues(a, b)),
        (any::<Index>(), select(JUNK_VALUES)).prop_map(|(a, v)| EntryOp::Junk(a, v)),
        any::<Index>().prop_map(EntryOp::Bare),
        (any::<Index>(), select(keys())).prop_map(|(a, k)| EntryOp::RenameKey(a, k)),
        (select(keys()), select(JUNK_VALUES)).prop_map(|(k, v)| EntryOp::Add(k, v)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| EntryOp::Move(a, b)),
    ];
    (any::<Index>(), op)
}

pub(crate) fn apply_entry_op(model: &mut Model, (target, op): &(Index, EntryOp)) {
    let mut decls: Vec<&mut DeclModel> = model.decls.iter_mut().collect();
    for f in &mut model.fields {
        decls.extend(f.decls.iter_mut());
    }
    if decls.is_empty() {
        return;
    }
    let at = target.index(decls.len());
    let entries = &mut decls[at].entries;
    let len = entries.len();
    let pick = |i: &Index| i.index(len.max(1));
    match op {
        EntryOp::Add(key, value) => entries.push((key.to_string(), Some(value.to_string()))),
        _ if len == 0 => {}
        EntryOp::Drop(i) => {
            entries.remove(pick(i));
        }
        EntryOp::Duplicate(i) => {
            let e = entries[pick(i)].clone();
            entries.insert(pick(i), e);
        }
        EntryOp::SwapValues(a, b) => {
            let (a, b) = (pick(a), pick(b));
            let value = entries[a].1.clone();
            entries[a].1 = entries[b].1.clone();
            entries[b].1 = value;
        }
        EntryOp::Junk(i, value) => entries[pick(i)].1 = Some(value.to_string()),
        EntryOp::Bare(i) => entries[pick(i)].1 = None,
        EntryOp::RenameKey(i, key) => entries[pick(i)].0 = key.to_string(),
        EntryOp::Move(a, b) => {
            let e = entries.remove(pick(a));
            let to = b.index(entries.len() + 1);
            entries.insert(to, e);
        }
    }
}

// ---------------------------------------------------------------------------
// Mutations by token.

/// A token to insert or replace with: strange literals (some that lexing
/// alone cannot make, like a negative literal), stray punctuation, keywords,
/// empty, nested and invisible groups.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tok {
    Ident(&'static str),
    RawIdent(&'static str),
    Lit(&'static str),
    Negative(i64),
    NegativeFloat,
    Punct(char, bool),
    Group(Delimiter, &'static str),
}

pub(crate) const TOKS: &[Tok] = &[
    Tok::Ident("name"),
    Tok::Ident("rows"),
    Tok::Ident("positions"),
    Tok::Ident("bounded"),
    Tok::Ident("fixed"),
    Tok::Ident("because"),
    Tok::Ident("max_num_seqs"),
    Tok::Ident("child"),
    Tok::Ident("transparent"),
    Tok::Ident("crate"),
    Tok::Ident("kv"),
    Tok::Ident("bf16"),
    Tok::Ident("request"),
    Tok::Ident("self"),
    Tok::Ident("Self"),
    Tok::Ident("super"),
    Tok::Ident("_"),
    Tok::Ident("struct"),
    Tok::Ident("enum"),
    Tok::Ident("union"),
    Tok::Ident("where"),
    Tok::Ident("zzz"),
    Tok::Ident("é"),
    Tok::RawIdent("type"),
    Tok::RawIdent("name"),
    Tok::Lit("0"),
    Tok::Lit("1"),
    Tok::Lit("71"),
    Tok::Lit("18446744073709551615"),
    Tok::Lit("18446744073709551616"),
    Tok::Lit("99999999999999999999999"),
    Tok::Lit("340282366920938463463374607431768211456"),
    Tok::Lit("0u8"),
    Tok::Lit("1i128"),
    Tok::Lit("1foo"),
    Tok::Lit("0x_1"),
    Tok::Lit("1.5"),
    Tok::Lit("1e10"),
    Tok::Lit("1e400"),
    Tok::Lit("1f32"),
    Tok::Lit("\"\""),
    Tok::Lit("\" \\t \""),
    Tok::Lit("\"async_chunk\""),
    Tok::Lit("\" async_chunk \""),
    Tok::Lit("\"r#type\""),
    Tok::Lit("\"x\"suffix"),
    Tok::Lit("r#\"raw\"#"),
    Tok::Lit("b\"x\""),
    Tok::Lit("b'x'"),
    Tok::Lit("'c'"),
    Tok::Lit("c\"x\""),
    Tok::Negative(-1),
    Tok::Negative(-5),
    Tok::Negative(i64::MIN),
    Tok::NegativeFloat,
    Tok::Punct('=', false),
    Tok::Punct(',', false),
    Tok::Punct(':', false),
    Tok::Punct(':', true),
    Tok::Punct(';', false),
    Tok::Punct('-', false),
    Tok::Punct('#', false),
    Tok::Punct('!', false),
    Tok::Punct('.', false),
    Tok::Punct('&', false),
    Tok::Punct('<', false),
    Tok::Punct('>', false),
    Tok::Punct('\'', true),
    Tok::Punct('$', false),
    Tok::Group(Delimiter::Parenthesis, ""),
    Tok::Group(Delimiter::Bracket, ""),
    Tok::Group(Delimiter::Brace, ""),
    Tok::Group(Delimiter::None, ""),
    Tok::Group(Delimiter::Parenthesis, "(())"),
    Tok::Group(Delimiter::Parenthesis, "1, because = \"x\""),
    Tok::Group(Delimiter::Bracket, "kv(child)"),
    Tok::Group(Delimiter::None, "5"),
    Tok::Group(Delimiter::None, "0"),
    Tok::Group(Delimiter::None, "- 5"),
    Tok::Group(Delimiter::None, "self"),
    Tok::Group(Delimiter::None, "bf16"),
    Tok::Group(Delimiter::None, "\"x\""),
];

impl Tok {
    pub(crate) fn tree(self) -> TokenTree {
        match self {
            Tok::Ident(name) => Ident::new(name, Span::call_site()).into(),
            Tok::RawIdent(name) => Ident::new_raw(name, Span::call_site()).into(),
            Tok::Lit(text) => Literal::from_str(text)
                .expect("palette literals lex")
                .into(),
            Tok::Negative(n) => Literal::i64_unsuffixed(n).into(),
            Tok::NegativeFloat => Literal::f64_unsuffixed(-0.5).into(),
            Tok::Punct(c, joint) => {
                let spacing = if joint {
                    Spacing::Joint
                } else {
                    Spacing::Alone
                };
                Punct::new(c, spacing).into()
            }
            Tok::Group(delimiter, text) => {
                let inner = TokenStream::from_str(text).expect("palette groups lex");
                Group::new(delimiter, inner).into()
            }
        }
    }
}

pub(crate) const DELIMITERS: &[Delimiter] = &[
    Delimiter::Parenthesis,
    Delimiter::Bracket,
    Delimiter::Brace,
    Delimiter::None,
];

#[derive(Clone, Debug)]
pub(crate) enum TokenOp {
    Delete,
    Duplicate,
    Swap,
    Replace(Tok),
    Insert(Tok),
    Wrap(Delimiter, usize),
    Unwrap,
    Move(Index),
    Truncate,
    Empty,
}

/// An operation at a position: `group` picks one token sequence (the top
/// level or a group's contents), `at` a position in it.
#[derive(Clone, Debug)]
pub(crate) struct TokenMutation {
    pub(crate) group: Index,
    pub(crate) at: Index,
    pub(crate) op: TokenOp,
}

pub(crate) fn token_mutation() -> impl Strategy<Value = TokenMutation> {
    let op = prop_oneof![
        3 => Just(TokenOp::Delete),
        2 => Just(TokenOp::Duplicate),
        2 => Just(TokenOp::Swap),
        4 => select(TOKS).prop_map(TokenOp::Replace),
        4 => select(TOKS).prop_map(TokenOp::Insert),
        1 => (select(DELIMITERS), 0..4usize).prop_map(|(d, n)| TokenOp::Wrap(d, n)),
        1 => Just(TokenOp::Unwrap),
        1 => any::<Index>().prop_map(TokenOp::Move),
        1 => Just(TokenOp::Truncate),
        1 => Just(TokenOp::Empty),
    ];
    (any::<Index>(), any::<Index>(), op).prop_map(|(group, at, op)| TokenMutation { group, at, op })
}

/// A token tree whose groups can be edited in place.
pub(crate) enum Node {
    Leaf(TokenTree),
    Group(Delimiter, Vec<Node>),
}

pub(crate) fn nodes(tokens: TokenStream) -> Vec<Node> {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(g) => Node::Group(g.delimiter(), nodes(g.stream())),
            leaf => Node::Leaf(leaf),
        })
        .collect()
}

pub(crate) fn tokens(nodes: &[Node]) -> TokenStream {
    nodes
        .iter()
        .map(|node| match node {
            Node::Leaf(tree) => tree.clone(),
            Node::Group(d, inner) => Group::new(*d, tokens(inner)).into(),
        })
        .collect()
}

/// Paths (child indices) to every sequence: the top level and each group.
pub(crate) fn sequences(nodes: &[Node], path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(path.clone());
    for (i, node) in nodes.iter().enumerate() {
        if let Node::Group(_, inner) = node {
            path.push(i);
            sequences(inner, path, out);
            path.pop();
        }
    }
}

pub(crate) fn sequence_at<'a>(mut nodes: &'a mut Vec<Node>, path: &[usize]) -> &'a mut Vec<Node> {
    for &i in path {
        nodes = match &mut nodes[i] {
            Node::Group(_, inner) => inner,
            Node::Leaf(_) => unreachable!("paths lead to groups"),
        };
    }
    nodes
}

pub(crate) fn clone_node(node: &Node) -> Node {
    match node {
        Node::Leaf(tree) => Node::Leaf(tree.clone()),
        Node::Group(d, inner) => Node::Group(*d, inner.iter().map(clone_node).collect()),
    }
}

pub(crate) fn apply_token_mutation(root: &mut Vec<Node>, mutation: &TokenMutation) {
    let mut paths = Vec::new();
    sequences(root, &mut Vec::new(), &mut paths);
    let path = &paths[mutation.group.index(paths.len())];
    let seq = sequence_at(root, path);
    let len = seq.len();
    if let TokenOp::Insert(tok) = mutation.op {
        let at = mutation.at.index(len + 1);
        seq.insert(at, nodes(tok.tree().into()).remove(0));
        return;
    }
    if len == 0 {
        return;
    }
    let at = mutation.at.index(len);
    match &mutation.op {
        TokenOp::Delete => {
            seq.remove(at);
        }
        TokenOp::Duplicate => {
            let copy = clone_node(&seq[at]);
            seq.insert(at, copy);
        }
        TokenOp::Swap => {
            if at + 1 < len {
                seq.swap(at, at + 1);
            }
        }
        TokenOp::Replace(tok) => seq[at] = nodes(tok.tree().into()).remove(0),
        TokenOp::Insert(_) => unreachable!("handled above"),
        TokenOp::Wrap(delimiter, n) => {
            let end = (at + n).min(len);
            let inner: Vec<Node> = seq.drain(at..end).collect();
            seq.insert(at, Node::Group(*delimiter, inner));
        }
        TokenOp::Unwrap => {
            if let Node::Group(_, _) = &seq[at] {
                let Node::Group(_, inner) = seq.remove(at) else {
                    unreachable!()
                };
                for (i, node) in inner.into_iter().enumerate() {
                    seq.insert(at + i, node);
                }
            }
        }
        TokenOp::Move(to) => {
            let node = seq.remove(at);
            let to = to.index(seq.len() + 1);
            seq.insert(to, node);
        }
        TokenOp::Truncate => seq.truncate(at),
        TokenOp::Empty => {
            if let Node::Group(_, inner) = &mut seq[at] {
                inner.clear();
            }
        }
    }
}
