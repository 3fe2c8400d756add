//! GGUF headers as a list of entries, written byte by byte, and mutated
//! both as entries (a value's type, a count, a key repeated or dropped, an
//! array nested or grown) and as bytes.

use crate::bytes;
use crate::interesting::U64S;
use crate::rng::Rng;

/// A metadata value as GGUF types it (its type code is [`Value::code`]).
#[derive(Clone, Debug)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(u8),
    Str(Vec<u8>),
    /// Element type code and elements; `declared` overrides the count
    /// written (a count the elements do not back).
    Array {
        element: u32,
        items: Vec<Value>,
        declared: Option<u64>,
    },
    U64(u64),
    I64(i64),
    F64(f64),
    /// A type code GGUF does not define.
    Unknown(u32),
    /// An array of `len` u8 ones, written without holding them as values.
    U8Run(u64),
}

impl Value {
    fn code(&self) -> u32 {
        match self {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array { .. } => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
            Value::Unknown(code) => *code,
            Value::U8Run(_) => 9,
        }
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.extend(v.to_le_bytes()),
            Value::U16(v) => out.extend(v.to_le_bytes()),
            Value::I16(v) => out.extend(v.to_le_bytes()),
            Value::U32(v) => out.extend(v.to_le_bytes()),
            Value::I32(v) => out.extend(v.to_le_bytes()),
            Value::F32(v) => out.extend(v.to_le_bytes()),
            Value::Bool(v) => out.push(*v),
            Value::Str(text) => string(out, text),
            Value::Array {
                element,
                items,
                declared,
            } => {
                out.extend(element.to_le_bytes());
                out.extend(declared.unwrap_or(items.len() as u64).to_le_bytes());
                // An element that is itself an array is its element type,
                // count and items, as GGUF writes an array value.
                for item in items {
                    item.write_payload(out);
                }
            }
            Value::U64(v) => out.extend(v.to_le_bytes()),
            Value::I64(v) => out.extend(v.to_le_bytes()),
            Value::F64(v) => out.extend(v.to_le_bytes()),
            Value::Unknown(_) => out.extend(0u64.to_le_bytes()),
            Value::U8Run(len) => {
                out.extend(0u32.to_le_bytes());
                out.extend(len.to_le_bytes());
                out.resize(out.len() + *len as usize, 1);
            }
        }
    }
}

fn string(out: &mut Vec<u8>, text: &[u8]) {
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text);
}

/// A header: the counts as written (which a mutation may make lie) and the
/// entries.
#[derive(Clone, Debug)]
pub struct Header {
    pub version: u32,
    pub tensor_count: u64,
    /// Overrides the metadata count written.
    pub declared_entries: Option<u64>,
    pub entries: Vec<(Vec<u8>, Value)>,
}

impl Header {
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend(self.tensor_count.to_le_bytes());
        let count = self.declared_entries.unwrap_or(self.entries.len() as u64);
        out.extend(count.to_le_bytes());
        for (key, value) in &self.entries {
            string(&mut out, key);
            out.extend(value.code().to_le_bytes());
            value.write_payload(&mut out);
        }
        out
    }
}

/// The headers mutations start from: one per kind of memory kv's llama.cpp
/// profile makes (full attention, sliding window with a pattern, Mamba,
/// Mamba2), with the keys llama.cpp reads for it.
pub fn seeds() -> Vec<Header> {
    let attention = |arch: &str, extra: Vec<(&str, Value)>| {
        let mut keys = vec![
            ("block_count", Value::U32(4)),
            ("context_length", Value::U32(4096)),
            ("embedding_length", Value::U32(256)),
            ("attention.head_count", Value::U32(8)),
            ("attention.head_count_kv", Value::U32(2)),
        ];
        keys.extend(extra);
        header(arch, keys)
    };
    let mamba = |arch: &str, extra: Vec<(&str, Value)>| {
        let mut keys = vec![
            ("block_count", Value::U32(4)),
            ("context_length", Value::U32(4096)),
            ("embedding_length", Value::U32(256)),
            ("ssm.conv_kernel", Value::U32(4)),
            ("ssm.inner_size", Value::U32(512)),
            ("ssm.state_size", Value::U32(16)),
            ("ssm.time_step_rank", Value::U32(16)),
        ];
        keys.extend(extra);
        header(arch, keys)
    };
    vec![
        attention("llama", vec![]),
        attention(
            "qwen3",
            vec![
                ("attention.key_length", Value::U32(64)),
                ("attention.value_length", Value::U32(64)),
            ],
        ),
        attention(
            "gemma3",
            vec![
                ("attention.sliding_window", Value::U32(512)),
                ("attention.key_length", Value::U32(64)),
                ("attention.value_length", Value::U32(64)),
            ],
        ),
        attention(
            "gpt-oss",
            vec![
                ("attention.sliding_window", Value::U32(128)),
                (
                    "attention.head_count_kv",
                    Value::Array {
                        element: 4,
                        items: vec![Value::U32(2); 4],
                        declared: None,
                    },
                ),
            ],
        ),
        attention(
            "cohere2",
            vec![
                ("attention.sliding_window", Value::U32(256)),
                ("attention.sliding_window_pattern", Value::U32(4)),
            ],
        ),
        attention("deepseek", vec![("nextn_predict_layers", Value::U32(1))]),
        mamba("mamba", vec![]),
        mamba("mamba2", vec![("ssm.group_count", Value::U32(2))]),
    ]
}

fn header(arch: &str, keys: Vec<(&str, Value)>) -> Header {
    let mut entries = vec![(
        b"general.architecture".to_vec(),
        Value::Str(arch.as_bytes().to_vec()),
    )];
    entries.extend(
        keys.into_iter()
            .map(|(suffix, value)| (format!("{arch}.{suffix}").into_bytes(), value)),
    );
    Header {
        version: 3,
        tensor_count: 0,
        declared_entries: None,
        entries,
    }
}

/// Case `rng`'s input: a seed, mutated as entries, as bytes, or both.
pub fn case(seeds: &[Header], rng: &mut Rng) -> Vec<u8> {
    let mut header = rng.pick(seeds).clone();
    let structural = !rng.one_in(4);
    if structural {
        for _ in 0..=rng.below(3) {
            mutate_entries(&mut header, rng);
        }
    }
    // Rarely, an array as large as a vocabulary, whose elements are all
    // there: what a reader holds per element shows.
    if rng.one_in(500) {
        header.entries.push((
            b"tokenizer.ggml.token_type".to_vec(),
            Value::U8Run(4_000_000),
        ));
    }
    let mut data = header.bytes();
    if !structural || rng.one_in(3) {
        bytes::mutate(&mut data, rng);
    }
    data
}

fn mutate_entries(header: &mut Header, rng: &mut Rng) {
    let len = header.entries.len();
    match rng.below(10) {
        // A value replaced by one of another type or on a boundary.
        0..=3 if len > 0 => {
            let at = rng.index(len);
            header.entries[at].1 = value(rng, 0);
        }
        // A key repeated.
        4 if len > 0 => {
            let at = rng.index(len);
            let entry = header.entries[at].clone();
            let to = rng.index(len + 1);
            header.entries.insert(to, entry);
        }
        // A key dropped.
        5 if len > 0 => {
            header.entries.remove(rng.index(len));
        }
        // A count that lies.
        6 => header.declared_entries = Some(*rng.pick(U64S)),
        7 => header.tensor_count = *rng.pick(U64S),
        8 => header.version = *rng.pick(&[0, 1, 2, 3, 4, 0x0300_0000, u32::MAX]),
        // A per-layer array in place of a count, of any length.
        _ if len > 0 => {
            let at = rng.index(len);
            let items = (0..rng.below(9)).map(|_| count(rng)).collect();
            header.entries[at].1 = Value::Array {
                element: 4,
                items,
                declared: rng.one_in(4).then(|| *rng.pick(U64S)),
            };
        }
        _ => {}
    }
}

/// A count-like u32 on a boundary.
fn count(rng: &mut Rng) -> Value {
    Value::U32(*rng.pick(U64S) as u32)
}

/// A value of any type, boundary contents, arrays nested up to 2 deep.
fn value(rng: &mut Rng, depth: u32) -> Value {
    let n = *rng.pick(U64S);
    match rng.below(if depth < 2 { 15 } else { 14 }) {
        0 => Value::U8(n as u8),
        1 => Value::I8(n as i8),
        2 => Value::U16(n as u16),
        3 => Value::I16(n as i16),
        4 | 5 => Value::U32(n as u32),
        6 => Value::I32(n as i32),
        7 => Value::F32(f32::from_bits(n as u32)),
        8 => Value::Bool(n as u8),
        9 => Value::Str(
            (0..rng.below(40))
                .map(|_| rng.next_u64() as u8)
                .collect::<Vec<u8>>(),
        ),
        10 => Value::U64(n),
        11 => Value::I64(n as i64),
        12 => Value::F64(f64::from_bits(n)),
        13 => Value::Unknown(*rng.pick(&[13, 255, u32::MAX])),
        _ => {
            let element = value(rng, depth + 1);
            let items = (0..rng.below(6)).map(|_| element.clone()).collect();
            Value::Array {
                element: element.code(),
                items,
                declared: rng.one_in(4).then(|| *rng.pick(U64S)),
            }
        }
    }
}
