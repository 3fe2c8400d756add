//! `kv estimate`'s command line: its arguments, the engine they choose, and
//! their value parsers, shared by each engine's runner.

use std::path::PathBuf;

use kv_core::Storage;
use serde_json::Value;

use crate::Format;

/// `kv estimate` arguments.
#[derive(Clone, clap::Args)]
pub struct Args {
    /// HF config.json files, or directories (every config.json under them,
    /// sorted); GGUF files with --engine llama.cpp.
    #[arg(required = true)]
    pub(crate) configs: Vec<PathBuf>,
    /// Whose rules: vllm (0.33, the default), sglang (0.5.23: its pools and
    /// start-up lines from --kv-cache-memory-bytes), or llama.cpp (0c1e57098:
    /// its cache lines from a GGUF header).
    #[arg(long, value_enum, default_value_t = Engine::Vllm)]
    pub(crate) engine: Engine,
    #[command(flatten)]
    pub(crate) sglang: SglangArgs,
    #[command(flatten)]
    pub(crate) llamacpp: crate::llamacpp::LlamaCppArgs,
    /// Sequences in flight (vLLM max_num_seqs).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_num_seqs: u64,
    /// Positions per sequence (vLLM max_model_len); without it the model's
    /// length is derived as vLLM derives it (max_position_embeddings, ...), and said.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) positions: Option<u64>,
    /// Allows --positions above the model's length (vLLM's
    /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); refused otherwise, as vLLM refuses it.
    #[arg(long)]
    pub(crate) allow_long_max_model_len: bool,
    /// Refuses a config whose family kv has not been checked on (a
    /// `model_type` not in kv's table, or none), instead of sizing it by
    /// the generic rules and saying so. llama.cpp's profile refuses every
    /// architecture it does not list already.
    #[arg(long)]
    pub(crate) strict: bool,
    /// vLLM num_speculative_tokens: each Mamba / Gated DeltaNet layer keeps
    /// one more state page per token, and Mamba2 / Gated DeltaNet conv states
    /// one more input.
    #[arg(long, default_value_t = 0)]
    pub(crate) speculative_tokens: u64,
    /// vLLM --no-enable-prefix-caching: Mamba cache mode none (1 state page)
    /// instead of align (2, or 3 with prefill checkpoints).
    #[arg(long)]
    pub(crate) no_prefix_caching: bool,
    /// vLLM --no-async-scheduling: one batch in flight instead of two, which
    /// sliding and chunked layers keep tokens for.
    #[arg(long)]
    pub(crate) no_async_scheduling: bool,
    /// How attention K/V and MLA latents are stored: a dtype (bf16, f8e4m3,
    /// ...), a block format (q8_0, q4_0, nvfp4, ...), or vLLM's
    /// --kv-cache-dtype name (fp8, fp8_e5m2, int8_per_token_head, ...).
    #[arg(long, visible_alias = "kv-cache-dtype", value_parser = parse_storage)]
    pub(crate) kv_format: Option<Storage>,
    /// Tensor-parallel size (1 to 4096): figures are per rank.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) tp: u64,
    /// Pipeline-parallel size (1 to 4096): figures are per rank.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) pp: u64,
    /// vLLM --decode-context-parallel-size (1 to 4096): the TP ranks that
    /// would hold copies of the same KV heads each hold cdiv(max_model_len,
    /// N) tokens of every full-attention and MLA row instead. vLLM's rules
    /// on TP, KV heads and layer kinds apply (a layout it refuses exits 2).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) dcp: u64,
    /// vLLM --cp-kv-cache-interleave-size: tokens stored on one DCP rank
    /// before the next; must divide the block size. Moves no figure.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) dcp_interleave: u64,
    /// vLLM block_size, in tokens [default: 16, or what the attention
    /// backend runs: 64 for an fp8 MLA latent]. Given, vLLM picks the backend
    /// for it instead (16 given: TRITON_MLA for an fp8 latent).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) block_size: Option<u64>,
    /// vLLM max_num_batched_tokens (bounds a sliding window's blocks).
    #[arg(long, default_value_t = kv_engines::estimate::DEFAULT_MAX_NUM_BATCHED_TOKENS, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_num_batched_tokens: u64,
    /// vLLM --kv-cache-memory-bytes (per rank), as vLLM reads it (1000000,
    /// 25.6k, 8g decimal; 8G binary): prints the start-up line vLLM would log
    /// (`GPU KV cache size: ...`), or the error it would raise.
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_bytes)]
    pub(crate) kv_cache_memory_bytes: Option<u64>,
    /// KEY=VALUE given over every config (VALUE read as JSON, else as a
    /// string), e.g. sliding_window_pattern=6 or torch_dtype=bfloat16;
    /// SECTION.KEY=VALUE sets it in that section (text_config.layer_types=...).
    /// A key nothing reads is an error.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
    pub(crate) values: Vec<(String, Value)>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    #[command(flatten)]
    pub(crate) read: crate::input::ReadLimit,
}

fn parse_storage(name: &str) -> Result<Storage, String> {
    Storage::from_name(name).ok_or_else(|| {
        format!(
            "`{name}` is not a storage format kv knows; one of {}",
            Storage::names_list()
        )
    })
}

/// vLLM's `human_readable_int`: an integer, or a number with a decimal
/// suffix (k, m, g, t: 10^3..10^12, `int(float(number) * multiplier)`) or a
/// binary one (K, M, G, T: 2^10..2^40, whole numbers only). 0 is refused:
/// vLLM reads it as unset.
fn parse_memory_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let bytes = match text.char_indices().last() {
        Some((at, suffix)) if "kmgtKMGT".contains(suffix) => {
            let number = &text[..at];
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let well_formed = match number.split_once('.') {
                Some((whole, fraction)) => digits(whole) && digits(fraction),
                None => digits(number),
            };
            if !well_formed {
                return Err(format!(
                    "`{text}` is not a byte count (e.g. 8589934592, 8G, 8.5g)"
                ));
            }
            let (decimal, binary_shift) = match suffix.to_ascii_lowercase() {
                'k' => (1e3, 10),
                'm' => (1e6, 20),
                'g' => (1e9, 30),
                _ => (1e12, 40),
            };
            if suffix.is_ascii_lowercase() {
                let scaled = number.parse::<f64>().map_err(|e| e.to_string())? * decimal;
                if scaled >= 18_446_744_073_709_551_616.0 {
                    return Err(format!("`{text}` is more bytes than kv counts (u64)"));
                }
                scaled as u64
            } else {
                if number.contains('.') {
                    return Err(format!(
                        "`{text}`: decimals are not allowed with binary suffixes like {suffix} \
                         (vLLM refuses them too); did you mean {number}{}?",
                        suffix.to_ascii_lowercase()
                    ));
                }
                number
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| n.checked_mul(1u64 << binary_shift))
                    .ok_or_else(|| format!("`{text}` is more bytes than kv counts (u64)"))?
            }
        }
        _ => text
            .parse::<u64>()
            .map_err(|e| format!("`{text}` is not a byte count: {e}"))?,
    };
    if bytes == 0 {
        return Err("0 bytes: vLLM reads 0 as unset and profiles the GPU instead".to_owned());
    }
    Ok(bytes)
}

fn parse_set(text: &str) -> Result<(String, Value), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not KEY=VALUE"));
    };
    if key.trim().is_empty() {
        return Err(format!("`{text}` has an empty key"));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((key.trim().to_owned(), value))
}

/// The engine whose rules `kv estimate` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// vLLM 0.33.
    Vllm,
    /// SGLang 0.5.23.
    Sglang,
    /// llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), from a GGUF header.
    #[value(name = "llama.cpp")]
    LlamaCpp,
}

/// The flags only SGLang reads.
#[derive(Clone, clap::Args)]
pub struct SglangArgs {
    /// SGLang --dp-size with --enable-dp-attention (1 to 4096): attention
    /// runs on tp / dp ranks per worker, and each worker owns a full pool.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) dp: u64,
    /// SGLang --swa-full-tokens-ratio: the sliding-window pool's tokens per
    /// full-pool token (allow-listed architectures only).
    #[arg(long, default_value_t = 0.8)]
    pub(crate) swa_full_tokens_ratio: f64,
    /// SGLang --mamba-full-memory-ratio: the state pool takes r / (1 + r) of
    /// the memory of a Mamba / Gated DeltaNet hybrid.
    #[arg(long, default_value_t = 0.9)]
    pub(crate) mamba_full_memory_ratio: f64,
    /// SGLang --max-running-requests (across DP workers).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_running_requests: Option<u64>,
    /// SGLang --max-total-tokens: caps the pool's tokens.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_total_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::parse_memory_bytes;

    #[test]
    fn memory_bytes_read_as_vllms_human_readable_int() {
        for (text, bytes) in [
            ("1000000", 1_000_000),
            (" 7 ", 7),
            ("1k", 1_000),
            ("25.6k", 25_600),
            ("2m", 2_000_000),
            ("8g", 8_000_000_000),
            ("1.5t", 1_500_000_000_000),
            ("1K", 1 << 10),
            ("2M", 2 << 20),
            ("8G", 8 << 30),
            ("3T", 3 << 40),
            // int(float("0.0015") * 1000) = int(1.5) = 1.
            ("0.0015k", 1),
        ] {
            assert_eq!(parse_memory_bytes(text), Ok(bytes), "{text}");
        }
        for (text, why) in [
            ("0", "vLLM reads 0 as unset"),
            ("0k", "vLLM reads 0 as unset"),
            ("1.5G", "did you mean 1.5g?"),
            ("G", "is not a byte count"),
            ("1.k", "is not a byte count"),
            ("-1k", "is not a byte count"),
            ("8x", "is not a byte count"),
            ("16777216T", "more bytes than kv counts"),
            ("18446744073709551.616k", "more bytes than kv counts"),
        ] {
            let error = parse_memory_bytes(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
        // The largest binary count that fits: 2^24 - 1 tebibytes.
        assert_eq!(parse_memory_bytes("16777215T"), Ok(16_777_215 << 40));
    }
}
