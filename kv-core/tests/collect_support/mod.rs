//! Owners shared by the `collect_*` tests, written by hand (no derive), shaped
//! like the declarers of the original design (FACTS.md).
#![allow(dead_code)]

use kv_core::declare::ChildVisitor;
use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};

pub const QWEN3_TTS_ROW: u64 = 4_653_056;

pub fn spec(
    name: &'static str,
    geometry: Geometry,
    positions: u64,
    bound: &'static str,
    scope: Scope,
    rows: Rows,
) -> KvSpec {
    KvSpec::attention(
        name,
        "test cache",
        geometry,
        Positions::bounded(positions, bound),
        scope,
        rows,
    )
}

fn codec_spec(name: &'static str, scope: Scope, rows: Rows) -> KvSpec {
    spec(
        name,
        Geometry::new(8, 16, 64, DType::F32),
        71,
        "sliding_window(72) - 1",
        scope,
        rows,
    )
}

/// Qwen3-TTS codec decoder: holds KV only on the async-chunk path.
pub struct Decoder {
    pub async_chunk: bool,
}

impl ModelLocalKv for Decoder {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        if self.async_chunk {
            for (name, scope) in [("retained", Scope::Request), ("working", Scope::Invocation)] {
                let mut spec = codec_spec(name, scope, Rows::MaxNumSeqs);
                spec.only_when = Some("async_chunk".into());
                out.push(spec);
            }
        }
        Ok(())
    }
}

/// Qwen3-TTS graph pool: five captured rows, resident.
pub struct GraphPool {
    pub captured_rows: u64,
}

impl ModelLocalKv for GraphPool {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.push(codec_spec(
            "captured",
            Scope::Model,
            Rows::Fixed {
                count: self.captured_rows,
                because: "rows summed over captured caches".into(),
            },
        ));
        Ok(())
    }
}

/// The Qwen3-TTS model: decoder and graph pool as children.
pub struct Tts {
    pub decoder: Decoder,
    pub graph: GraphPool,
}

impl ModelLocalKv for Tts {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("decoder", &self.decoder);
        visitor.field("graph", &self.graph);
    }
}

pub fn qwen3_tts(async_chunk: bool) -> Tts {
    Tts {
        decoder: Decoder { async_chunk },
        graph: GraphPool { captured_rows: 5 },
    }
}
