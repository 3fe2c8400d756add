//! The six allocations of the original design (vLLM-Omni's model-local KV),
//! declared on Rust structs the way a model author would.
//!
//! Each model is a tree: the engine holds the root and calls
//! [`kv_core::log_model_local_kv`] once after load. Figures per row match
//! the seed exactly; the tests in `examples/tests/` assert each.

use std::path::Path;
use std::sync::Arc;

use kv_core::declare::KvTypeDecls;
use kv_core::HfConfig;
use kv_core::{KvError, ModelLocalKv};

pub mod modern;

/// Qwen3-TTS: the codec decoder and its CUDA-graph wrapper.
pub mod qwen3_tts {
    use super::*;

    /// Qwen3-TTS's codec decoder attends over a sliding window of 72 tokens and
    /// keeps `sliding_window - 1` of them.
    pub const QWEN3_TTS_SLIDING_WINDOW: u64 = 72;

    /// The codec decoder. Its cache exists only on the async-chunk path: stateless
    /// decoding calls the transformer without `use_cache` and declares nothing.
    #[derive(ModelLocalKv)]
    #[kv(
        name = "retained",
        cache = "sliding DynamicCache",
        layers = 8, kv_heads = 16, head_dim = 1024 / 16, dtype = f32,
        positions = bounded(QWEN3_TTS_SLIDING_WINDOW - 1, because = "sliding_window(72) - 1"),
        scope = request,
        rows = max_num_seqs,
        only_when = "async_chunk",
    )]
    #[kv(
        name = "working_copy",
        cache = "deep copy of the retained DynamicCache",
        layers = 8, kv_heads = 16, head_dim = 1024 / 16, dtype = f32,
        positions = bounded(QWEN3_TTS_SLIDING_WINDOW - 1, because = "sliding_window(72) - 1"),
        scope = invocation,
        rows = max_num_seqs,
        only_when = "async_chunk",
        note = "the eager path deep-copies the retained cache; both are live during a step",
    )]
    pub struct Qwen3TtsCodecDecoder {
        /// Whether the engine runs the async-chunk path.
        pub async_chunk: bool,
    }

    /// The CUDA-graph wrapper around the codec decoder. It forwards to the
    /// decoder (transparent: the decoder is reported at the wrapper's path) and
    /// declares only the caches captured with its graphs.
    #[derive(ModelLocalKv)]
    #[kv(transparent)]
    #[kv(
        name = "graph_pool",
        cache = "DynamicCache captured per graph",
        layers = 8, kv_heads = 16, head_dim = 1024 / 16, dtype = f32,
        positions = bounded(QWEN3_TTS_SLIDING_WINDOW - 1, because = "sliding_window(72) - 1"),
        scope = model,
        rows = fixed(self.captured_rows(), because = "rows summed over the captured caches"),
        note = "one cache per captured graph; resident since load",
    )]
    pub struct Qwen3TtsGraphWrapper {
        /// The decoder the graphs run.
        #[kv(child)]
        pub runnable: Arc<Qwen3TtsCodecDecoder>,
        /// The batch size of each captured cache, read off the captured shapes.
        pub captured_batch_sizes: Vec<u64>,
    }

    impl Qwen3TtsGraphWrapper {
        fn captured_rows(&self) -> u64 {
            self.captured_batch_sizes.iter().sum()
        }
    }

    /// Qwen3-TTS: the talker holds the decoder, and so does the graph wrapper;
    /// the shared decoder is counted once.
    #[derive(ModelLocalKv)]
    pub struct Qwen3Tts {
        /// The decoder, as the model holds it.
        #[kv(child)]
        pub decoder: Arc<Qwen3TtsCodecDecoder>,
        /// The wrapper that replays captured graphs over the same decoder.
        #[kv(child)]
        pub code2wav: Qwen3TtsGraphWrapper,
    }
}

/// MiMo-Audio: the local transformer and its captured graphs.
pub mod mimo_audio {
    use super::*;

    /// MiMo-Audio's local transformer decodes `group_size` tokens per step.
    pub const MIMO_GROUP_SIZE: u64 = 4;
    /// MiMo-Audio's delay pattern; its maximum extends the local window.
    pub const MIMO_DELAY_PATTERN: [u64; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
    /// The batch sizes MiMo-Audio captures CUDA graphs for.
    pub const MIMO_CAPTURED_BUCKETS: [u64; 9] = [1, 2, 4, 6, 8, 16, 32, 64, 128];

    /// The largest entry of a delay pattern, at compile time.
    pub const fn max_of(values: &[u64]) -> u64 {
        let mut max = 0;
        let mut i = 0;
        while i < values.len() {
            if values[i] > max {
                max = values[i];
            }
            i += 1;
        }
        max
    }

    /// The sum of captured buckets, at compile time.
    pub const fn sum_of(values: &[u64]) -> u64 {
        let mut sum = 0;
        let mut i = 0;
        while i < values.len() {
            sum += values[i];
            i += 1;
        }
        sum
    }

    /// MiMo-Audio's local transformer: a `DynamicCache` per invocation, trip count
    /// bounded by the decode loop.
    #[derive(ModelLocalKv)]
    #[kv(
        name = "local_kv",
        cache = "DynamicCache",
        layers = 16, kv_heads = 64, head_dim = 1024 / 64, dtype = bf16,
        positions = bounded(
            MIMO_GROUP_SIZE + max_of(&MIMO_DELAY_PATTERN),
            because = "group_size 4 + max(delay_pattern) 7",
        ),
        scope = invocation,
        rows = max_num_seqs,
        note = "one DynamicCache whose batch dimension is the group's sequences",
    )]
    pub struct MimoLocalTransformer;

    /// MiMo-Audio's captured graphs, each with its own cache. Captured whenever
    /// CUDA is available, so resident even under `enforce_eager`.
    #[derive(ModelLocalKv)]
    #[kv(
        name = "graph_pool",
        cache = "DynamicCache captured per bucket",
        layers = 16, kv_heads = 64, head_dim = 1024 / 64, dtype = bf16,
        positions = bounded(
            MIMO_GROUP_SIZE + max_of(&MIMO_DELAY_PATTERN),
            because = "group_size 4 + max(delay_pattern) 7",
        ),
        scope = model,
        rows = fixed(sum_of(&MIMO_CAPTURED_BUCKETS), because = "sum of captured buckets (1,2,4,6,8,16,32,64,128)"),
        note = "one distinct cache per captured bucket",
    )]
    pub struct MimoGraphPool;

    /// MiMo-Audio.
    #[derive(ModelLocalKv)]
    pub struct MimoAudio {
        /// The local transformer.
        #[kv(child)]
        pub local_transformer: MimoLocalTransformer,
        /// Its captured graphs.
        #[kv(child)]
        pub graph_pool: MimoGraphPool,
    }
}

/// MiniCPM-o: the streaming Whisper encoder.
pub mod minicpm_o {
    use super::*;

    /// MiniCPM-o's Whisper encoder keeps an `EncoderDecoderCache` per duplex
    /// session when streaming.
    #[derive(ModelLocalKv)]
    #[kv(
        name = "streaming_encoder",
        cache = "EncoderDecoderCache",
        layers = 24, kv_heads = 16, head_dim = 1024 / 16, dtype = bf16,
        positions = bounded(1500, because = "embed_positions rows"),
        scope = session,
        rows = fixed(self.duplex_max_sessions, because = "one cache per duplex session, capped by duplex_max_sessions"),
        only_when = "streaming",
        assumes = "duplex is on: omni_config reports duplex_max_sessions = 1 both for duplex off and for one session",
        note = "one cache object per session, each asserting batch size 1",
    )]
    pub struct MiniCpmOWhisperEncoder {
        /// Streaming (duplex) mode.
        pub streaming: bool,
        /// `OmniModelConfig.duplex_max_sessions`.
        pub duplex_max_sessions: u32,
    }

    /// MiniCPM-o.
    #[derive(ModelLocalKv)]
    pub struct MiniCpmO {
        /// The audio encoder.
        #[kv(child)]
        pub apm: MiniCpmOWhisperEncoder,
    }
}

/// ming_flash_omni: the talker, whose geometry is read from its config after load.
pub mod ming_flash_omni {
    use super::*;

    /// The talker's `max_cache_len`, hard-coded in its generate loop.
    pub const MING_TALKER_MAX_CACHE_LEN: u64 = 2048;

    /// ming_flash_omni's talker. Its geometry exists only in the checkpoint's
    /// `talker/llm/config.json`: it is read after load.
    #[derive(ModelLocalKv)]
    pub struct MingTalker {
        /// The talker LLM's config, as loaded from the checkpoint.
        pub llm_config: HfConfig,
        /// The `StaticCache` the generate loop allocates on its first write.
        #[kv(
            cache = "StaticCache",
            geometry = self.llm_config.geometry(),
            positions = bounded(MING_TALKER_MAX_CACHE_LEN, because = "hardcoded max_cache_len"),
            scope = invocation,
            rows = fixed(1, because = "calls are serialized: forward runs the whole AR loop inline"),
        )]
        pub static_cache: (),
    }

    /// ming_flash_omni.
    #[derive(ModelLocalKv)]
    pub struct MingFlashOmni {
        /// The talker.
        #[kv(child)]
        pub talker: MingTalker,
    }

    /// Where the example's checkpoint config for ming's talker lives.
    pub fn ming_talker_config_path() -> &'static Path {
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/configs/ming-talker/config.json"
        ))
    }
}

pub use mimo_audio::*;
pub use ming_flash_omni::*;
pub use minicpm_o::*;
pub use qwen3_tts::*;

/// A model's display name and its root, as an engine holds it after load.
pub type LoadedModel = (&'static str, Box<dyn ModelLocalKv>);

/// The four models as loaded for serving: async-chunk on, duplex streaming
/// with one session, graphs captured, ming's talker config read from disk.
pub fn loaded_models() -> Result<Vec<LoadedModel>, KvError> {
    let decoder = Arc::new(Qwen3TtsCodecDecoder { async_chunk: true });
    let qwen3_tts = Qwen3Tts {
        decoder: Arc::clone(&decoder),
        code2wav: Qwen3TtsGraphWrapper {
            runnable: decoder,
            captured_batch_sizes: vec![1, 1, 1, 1, 1],
        },
    };
    let mimo = MimoAudio {
        local_transformer: MimoLocalTransformer,
        graph_pool: MimoGraphPool,
    };
    let minicpm = MiniCpmO {
        apm: MiniCpmOWhisperEncoder {
            streaming: true,
            duplex_max_sessions: 1,
        },
    };
    let ming = MingFlashOmni {
        talker: MingTalker {
            llm_config: HfConfig::from_path(ming_talker_config_path())?,
            static_cache: (),
        },
    };
    Ok(vec![
        ("Qwen3-TTS", Box::new(qwen3_tts)),
        ("MiMo-Audio", Box::new(mimo)),
        ("MiniCPM-o", Box::new(minicpm)),
        ("ming_flash_omni", Box::new(ming)),
    ])
}

/// What every declaring type of the seed's models in this crate declares,
/// known without an instance, from the registry the derive fills: a new model
/// type cannot be left out of the documentation. The [`modern`] models have
/// their own page (`docs/modern-models.md`), so they are left out of this one.
pub fn declaring_types() -> Vec<KvTypeDecls> {
    kv_core::registry::declaring_types()
        .filter(|r| {
            let mut path = r.module_path.split("::");
            path.next() == Some(module_path!()) && path.next() != Some("modern")
        })
        .map(|r| r.decls)
        .collect()
}

/// The `max_num_seqs` the main job and the generated documentation use.
pub const DOCS_MAX_NUM_SEQS: u64 = 256;

/// Where the generated documentation lives, relative to the workspace root.
pub const DOCS_PATH: &str = "docs/model-local-kv.md";

/// Where its chart lives, beside it.
pub const DOCS_CHART_PATH: &str = "docs/model-local-kv.svg";

/// The command that regenerates [`DOCS_PATH`] and [`DOCS_CHART_PATH`]: the
/// freshness test, with kv-core's update variable set.
pub const DOCS_COMMAND: &str = "KV_UPDATE_DOCS=1 cargo test -p kv-examples --test docs_fresh";

/// The documentation page, generated from the declarations: what each type
/// declares (no instance needed), what the loaded models hold, and a chart of
/// it against `max_num_seqs`. `to_markdown()` is [`DOCS_PATH`], `to_svg()`
/// is [`DOCS_CHART_PATH`].
pub fn docs_page() -> Result<kv_core::page::Page, KvError> {
    let models = loaded_models()?;
    Ok(
        kv_core::page::Page::new("Model-local KV", DOCS_MAX_NUM_SEQS)
            .intro(DOCS_INTRO)
            .types(&declaring_types())
            .loaded(models.iter().map(|(name, root)| (*name, root.as_ref())))?
            .chart("model-local-kv.svg"),
    )
}

/// What the page is about, and how [`loaded_models`] configures the models.
const DOCS_INTRO: &str = "KV caches the seed's models (declared in `examples/src/lib.rs`) \
    hold outside the engine's paged KV manager, computed from their `#[kv(...)]` declarations. \
    Loaded as `loaded_models()` builds them: async-chunk on, one duplex session, five captured \
    Qwen3-TTS graphs, ming's talker config from `examples/configs/`.";

// The seed's graph pools are resident; they must stay under a ceiling. A
// ceiling, never an equality: removing or shrinking a cache never fails it.
kv_core::assert_kv_budget!(
    MimoGraphPool,
    max_num_seqs = 256,
    ceiling = 256 * kv_core::units::MIB
);
kv_core::assert_kv_budget!(
    Qwen3TtsCodecDecoder,
    max_num_seqs = 256,
    ceiling = 3 * kv_core::units::GIB
);

/// Prints log records to stdout, the way an engine's logger would.
struct StdoutLogger;

impl log::Log for StdoutLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            println!("{:<5} {}", record.level(), record.args());
        }
    }
    fn flush(&self) {}
}

static LOGGER: StdoutLogger = StdoutLogger;

/// Sends `log` records at `info` and above to stdout, for the examples'
/// binaries; a logger installed before is left in place.
pub fn log_to_stdout() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}
