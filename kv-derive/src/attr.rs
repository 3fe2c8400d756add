//! Reading `#[kv(...)]`, bottom up: `syntax` splits an attribute into
//! entries, `tables` names what values may be, `values` reads one value by
//! its key's grammar, `keys` is the one table of keys (serde's `symbol.rs`,
//! with `Attr<T>` slots), `read` walks the entries through it.

pub mod keys;
pub mod read;
pub mod syntax;
pub mod tables;
pub mod values;
