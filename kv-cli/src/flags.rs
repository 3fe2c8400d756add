//! Which `kv estimate` flags each engine's profile reads: one table, checked
//! in one place before any file is read. A flag given on the command line
//! that the chosen engine's profile does not read is bad usage (exit 2),
//! refused by name with what to use instead; none is ignored silently.

use clap::parser::ValueSource;
use clap::ArgMatches;

use crate::estimate_args::Engine;
use crate::message::usage_error;
use crate::Format;

/// One flag: for each engine, `None` where its profile reads the flag, else
/// why it does not and what to give instead.
struct Rule {
    /// The clap id (the field name in `estimate_args::Args`).
    id: &'static str,
    /// How the command line spells it.
    flag: &'static str,
    vllm: Option<&'static str>,
    sglang: Option<&'static str>,
    llamacpp: Option<&'static str>,
}

impl Rule {
    fn refusal(&self, engine: Engine) -> Option<&'static str> {
        match engine {
            Engine::Vllm => self.vllm,
            Engine::Sglang => self.sglang,
            Engine::LlamaCpp => self.llamacpp,
        }
    }
}

/// Read by every profile.
const ALL: Option<&str> = None;

/// Every argument of `kv estimate` (a unit test keeps it so).
const RULES: &[Rule] = &[
    Rule {
        id: "configs",
        flag: "CONFIGS",
        vllm: ALL,
        sglang: ALL,
        llamacpp: ALL,
    },
    Rule {
        id: "engine",
        flag: "--engine",
        vllm: ALL,
        sglang: ALL,
        llamacpp: ALL,
    },
    Rule {
        id: "format",
        flag: "--format",
        vllm: ALL,
        sglang: ALL,
        llamacpp: ALL,
    },
    Rule {
        id: "max_num_seqs",
        flag: "--max-num-seqs",
        vllm: ALL,
        sglang: Some("SGLang's requests in flight are --max-running-requests"),
        llamacpp: Some("llama.cpp's sequences are --parallel (its -np)"),
    },
    Rule {
        id: "positions",
        flag: "--positions",
        vllm: ALL,
        sglang: ALL,
        llamacpp: Some(
            "llama.cpp's length is --ctx-size (its -c: cells over all sequences, padded to 256)",
        ),
    },
    Rule {
        id: "strict",
        flag: "--strict",
        vllm: ALL,
        sglang: ALL,
        llamacpp: ALL,
    },
    Rule {
        id: "allow_long_max_model_len",
        flag: "--allow-long-max-model-len",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN; SGLang's \
             SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is not in kv's SGLang profile",
        ),
        llamacpp: Some(
            "llama.cpp takes a --ctx-size above the model's context_length (it warns); \
             give --ctx-size alone",
        ),
    },
    Rule {
        id: "speculative_tokens",
        flag: "--speculative-tokens",
        vllm: ALL,
        sglang: Some(
            "SGLang's speculative decoding keeps pools of its own for the draft model, which \
             kv's SGLang profile does not size; omit it",
        ),
        llamacpp: Some(
            "llama.cpp's draft model (-md) keeps a cache of its own, which kv's llama.cpp \
             profile does not size; omit it",
        ),
    },
    Rule {
        id: "no_prefix_caching",
        flag: "--no-prefix-caching",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's --no-enable-prefix-caching; SGLang's --disable-radix-cache is not in \
             kv's SGLang profile; omit it",
        ),
        llamacpp: Some(
            "it is vLLM's --no-enable-prefix-caching; llama.cpp has no such setting; omit it",
        ),
    },
    Rule {
        id: "no_async_scheduling",
        flag: "--no-async-scheduling",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's; SGLang's --disable-overlap-schedule is not in kv's SGLang profile; \
             omit it",
        ),
        llamacpp: Some("it is vLLM's; llama.cpp has no such setting; omit it"),
    },
    Rule {
        id: "kv_format",
        flag: "--kv-format",
        vllm: ALL,
        sglang: ALL,
        // As -ctk T -ctv T; a type llama.cpp does not take is refused there.
        llamacpp: ALL,
    },
    Rule {
        id: "tp",
        flag: "--tp",
        vllm: ALL,
        sglang: ALL,
        llamacpp: Some(
            "kv's llama.cpp profile sizes the cache of one llama.cpp process (its --split-mode \
             over GPUs is not in it); omit it",
        ),
    },
    Rule {
        id: "pp",
        flag: "--pp",
        vllm: ALL,
        sglang: Some(
            "SGLang's pipeline parallelism (--pp-size) is not in kv's SGLang profile; omit it",
        ),
        llamacpp: Some(
            "kv's llama.cpp profile sizes the cache of one llama.cpp process (its --split-mode \
             over GPUs is not in it); omit it",
        ),
    },
    Rule {
        id: "dcp",
        flag: "--dcp",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's decode context parallelism, not in kv's SGLang profile; omit it",
        ),
        llamacpp: Some("it is vLLM's decode context parallelism; llama.cpp has none; omit it"),
    },
    Rule {
        id: "dcp_interleave",
        flag: "--dcp-interleave",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's decode context parallelism, not in kv's SGLang profile; omit it",
        ),
        llamacpp: Some("it is vLLM's decode context parallelism; llama.cpp has none; omit it"),
    },
    Rule {
        id: "block_size",
        flag: "--block-size",
        vllm: ALL,
        sglang: Some(
            "SGLang's is --page-size, and kv's SGLang profile sizes its default, page size 1; \
             omit it",
        ),
        llamacpp: Some("llama.cpp's cache is in cells: give --ctx-size (padded to 256)"),
    },
    Rule {
        id: "max_num_batched_tokens",
        flag: "--max-num-batched-tokens",
        vllm: ALL,
        sglang: Some(
            "it is vLLM's; SGLang's --chunked-prefill-size is not in kv's SGLang profile; omit it",
        ),
        llamacpp: Some("llama.cpp's batches are --batch-size and --ubatch-size"),
    },
    Rule {
        id: "kv_cache_memory_bytes",
        flag: "--kv-cache-memory-bytes",
        vllm: ALL,
        sglang: ALL,
        llamacpp: Some(
            "llama.cpp sizes its cache from --ctx-size and --parallel, not from a memory budget",
        ),
    },
    Rule {
        id: "values",
        flag: "--set",
        vllm: ALL,
        sglang: ALL,
        llamacpp: Some(
            "a GGUF header is read as written (llama.cpp's --override-kv is not in kv's \
             llama.cpp profile); omit it",
        ),
    },
    Rule {
        id: "max_file_bytes",
        flag: "--max-file-bytes",
        vllm: ALL,
        sglang: ALL,
        llamacpp: Some(
            "it bounds JSON configs; a GGUF file is read to the end of its header only, \
             whatever its size: omit it",
        ),
    },
    // SGLang's own.
    Rule {
        id: "dp",
        flag: "--dp",
        vllm: Some(
            "it is SGLang's --dp-size with --enable-dp-attention; vLLM's data-parallel replicas \
             each hold a cache of their own, which kv sizes one at a time: omit it",
        ),
        sglang: ALL,
        llamacpp: Some(
            "it is SGLang's --dp-size; kv's llama.cpp profile sizes one llama.cpp process: omit it",
        ),
    },
    Rule {
        id: "swa_full_tokens_ratio",
        flag: "--swa-full-tokens-ratio",
        vllm: Some(
            "it is SGLang's; vLLM sizes sliding-window layers from --block-size and \
             --max-num-batched-tokens",
        ),
        sglang: ALL,
        llamacpp: Some("it is SGLang's; llama.cpp's is --swa-full"),
    },
    Rule {
        id: "mamba_full_memory_ratio",
        flag: "--mamba-full-memory-ratio",
        vllm: Some("it is SGLang's; vLLM pages Mamba state in its one pool: omit it"),
        sglang: ALL,
        llamacpp: Some("it is SGLang's; llama.cpp keeps one recurrent state per sequence: omit it"),
    },
    Rule {
        id: "max_running_requests",
        flag: "--max-running-requests",
        vllm: Some("it is SGLang's; vLLM's is --max-num-seqs"),
        sglang: ALL,
        llamacpp: Some("it is SGLang's; llama.cpp's is --parallel"),
    },
    Rule {
        id: "max_total_tokens",
        flag: "--max-total-tokens",
        vllm: Some("it is SGLang's; give vLLM's memory with --kv-cache-memory-bytes"),
        sglang: ALL,
        llamacpp: Some("it is SGLang's; llama.cpp's cells are --ctx-size"),
    },
    // llama.cpp's own.
    Rule {
        id: "ctx_size",
        flag: "--ctx-size",
        vllm: Some("it is llama.cpp's -c; vLLM's length is --positions"),
        sglang: Some("it is llama.cpp's -c; SGLang's length is --positions"),
        llamacpp: ALL,
    },
    Rule {
        id: "parallel",
        flag: "--parallel",
        vllm: Some("it is llama.cpp's -np; vLLM's is --max-num-seqs"),
        sglang: Some("it is llama.cpp's -np; SGLang's is --max-running-requests"),
        llamacpp: ALL,
    },
    Rule {
        id: "ubatch_size",
        flag: "--ubatch-size",
        vllm: Some("it is llama.cpp's -ub; vLLM's batch is --max-num-batched-tokens"),
        sglang: Some("it is llama.cpp's -ub; not in kv's SGLang profile: omit it"),
        llamacpp: ALL,
    },
    Rule {
        id: "batch_size",
        flag: "--batch-size",
        vllm: Some("it is llama.cpp's -b; vLLM's batch is --max-num-batched-tokens"),
        sglang: Some("it is llama.cpp's -b; not in kv's SGLang profile: omit it"),
        llamacpp: ALL,
    },
    Rule {
        id: "kv_unified",
        flag: "--kv-unified",
        vllm: Some("it is llama.cpp's -kvu; vLLM keeps one pool for every sequence: omit it"),
        sglang: Some("it is llama.cpp's -kvu; SGLang keeps one pool per worker: omit it"),
        llamacpp: ALL,
    },
    Rule {
        id: "swa_full",
        flag: "--swa-full",
        vllm: Some("it is llama.cpp's; not in kv's vLLM profile: omit it"),
        sglang: Some("it is llama.cpp's; SGLang's sliding pool is --swa-full-tokens-ratio"),
        llamacpp: ALL,
    },
    Rule {
        id: "flash_attn",
        flag: "--flash-attn",
        vllm: Some("it is llama.cpp's -fa; vLLM's attention backend does not move its KV: omit it"),
        sglang: Some("it is llama.cpp's -fa; not in kv's SGLang profile: omit it"),
        llamacpp: ALL,
    },
    Rule {
        id: "cache_type_k",
        flag: "--cache-type-k",
        vllm: Some("it is llama.cpp's -ctk; vLLM's is --kv-format (K and V alike)"),
        sglang: Some("it is llama.cpp's -ctk; SGLang's is --kv-format fp8_e4m3 or fp8_e5m2"),
        llamacpp: ALL,
    },
    Rule {
        id: "cache_type_v",
        flag: "--cache-type-v",
        vllm: Some("it is llama.cpp's -ctv; vLLM's is --kv-format (K and V alike)"),
        sglang: Some("it is llama.cpp's -ctv; SGLang's is --kv-format fp8_e4m3 or fp8_e5m2"),
        llamacpp: ALL,
    },
];

/// `--engine`'s value as the command line writes it.
fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "vllm",
        Engine::Sglang => "sglang",
        Engine::LlamaCpp => "llama.cpp",
    }
}

/// The first flag given on the command line (not a default) that `engine`'s
/// profile does not read, as one line: `--dp does not apply to --engine
/// vllm: ...`. `format` is checked by value: SGLang's profile prints text or
/// JSON only.
pub fn foreign_flag(matches: &ArgMatches, engine: Engine, format: Format) -> Option<String> {
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    for rule in RULES {
        if let (Some(why), true) = (rule.refusal(engine), given(rule.id)) {
            return Some(format!(
                "{} does not apply to --engine {}: {why}",
                rule.flag,
                engine_name(engine)
            ));
        }
    }
    if engine == Engine::Sglang && format == Format::Markdown {
        return Some(
            "--format markdown does not apply to --engine sglang: kv's SGLang profile prints \
             SGLang's own log lines; give --format text or json"
                .to_owned(),
        );
    }
    None
}

/// Exits 2 (clap's usage exit) with the refusal, if any flag does not apply.
pub fn refuse_foreign_flags(matches: &ArgMatches, engine: Engine, format: Format) {
    if let Some(refusal) = foreign_flag(matches, engine, format) {
        usage_error(clap::error::ErrorKind::ArgumentConflict, &refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::RULES;

    /// A flag added to `kv estimate` must be decided for each engine here.
    #[test]
    fn every_estimate_argument_has_one_rule_with_its_spelling() {
        let command = <crate::estimate_args::Args as clap::Args>::augment_args(clap::Command::new(
            "estimate",
        ));
        let mut ids: Vec<String> = Vec::new();
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" {
                continue;
            }
            ids.push(id.to_owned());
            let rule = RULES
                .iter()
                .find(|r| r.id == id)
                .unwrap_or_else(|| panic!("no rule for `{id}` in flags.rs"));
            if let Some(long) = arg.get_long() {
                assert!(
                    rule.flag.starts_with(&format!("--{long}")),
                    "{id}: {} is not --{long}",
                    rule.flag
                );
            }
        }
        for rule in RULES {
            assert!(
                ids.iter().any(|id| id == rule.id),
                "{} is no argument",
                rule.id
            );
        }
        assert_eq!(ids.len(), RULES.len());
    }
}
