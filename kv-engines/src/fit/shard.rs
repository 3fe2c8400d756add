//! One tensor-parallel rank's share of a checkpoint tensor, as vLLM 0.33
//! and SGLang 0.5.23 shard the dense decoders kv has checked (both carry
//! Megatron's layers: `layers/linear.py`, `vocab_parallel_embedding.py`).

use serde_json::Value;

use crate::stored_tensor::StoredTensor;

/// The classes whose shards kv has compared with both engines' own, rank
/// by rank, at TP 2, 4 and 8 (scripts/vllm/compare_fit.py and
/// compare_weights_hf.py, scripts/sglang/compare_weights_tp.py and
/// compare_weights_hf.py). A tensor of a kind [`TpLayout::share`] does not
/// know (Phi-3's fused qkv_proj, Starcoder2's c_fc) is refused by name above
/// TP 1, not guessed.
pub(crate) const SHARDED_ARCHITECTURES: &[&str] = &[
    "CohereForCausalLM",
    "Cohere2ForCausalLM",
    "GemmaForCausalLM",
    "GraniteForCausalLM",
    "GraniteMoeForCausalLM",
    "Llama4ForCausalLM",
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "OlmoForCausalLM",
    "Olmo2ForCausalLM",
    "OlmoeForCausalLM",
    "Phi3ForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Starcoder2ForCausalLM",
];

/// `DEFAULT_VOCAB_PADDING_SIZE` in both engines.
const VOCAB_PADDING: u64 = 64;

/// Whose rules: the engines differ on a vocabulary the ranks do not divide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShardingEngine {
    /// vLLM asserts the padded vocabulary divides (`divide`).
    Vllm,
    /// SGLang pads to 64 x tp instead.
    Sglang,
}

impl ShardingEngine {
    fn name(self) -> &'static str {
        match self {
            ShardingEngine::Vllm => "vLLM",
            ShardingEngine::Sglang => "SGLang",
        }
    }
}

/// What a rank's share depends on.
pub(crate) struct TpLayout {
    engine: ShardingEngine,
    tp: u64,
    /// The ranks attention is split over: `tp`, or `tp / dp` under SGLang's
    /// DP attention (each DP group holds the attention whole among its own).
    attn_tp: u64,
    vocab_rows_per_rank: u64,
    /// None for a config that names no attention heads (Mamba's): a tensor
    /// that needs them is then refused.
    heads: Option<Heads>,
    hidden: u64,
    /// Whether the mixers are Mamba's without groups ([`Self::with_plain_mamba`]).
    plain_mamba: bool,
    /// Whether 2-D weights are stored `[in, out]` (GPT-2's `Conv1D`).
    conv1d: bool,
    /// The Mamba2 mixers' sizes, for the classes whose mixers vLLM builds
    /// as `MambaMixer2` ([`Self::with_mamba2`]).
    mamba2: Option<Mamba2Sizes>,
}

/// A Mamba2 mixer's sizes, from the config (`kv_core::HfConfig::mamba`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mamba2Sizes {
    pub(crate) d_inner: u64,
    pub(crate) n_groups: u64,
    pub(crate) d_state: u64,
    pub(crate) heads: u64,
}

/// The attention's head counts and a rank's share of KV heads.
struct Heads {
    heads: u64,
    kv_heads: u64,
    kv_heads_per_rank: u64,
}

impl TpLayout {
    /// The layout of `tp` ranks for a config's text section.
    pub(crate) fn new(text: &Value, tp: u64, engine: ShardingEngine) -> Result<TpLayout, String> {
        if tp == 0 {
            return Err("tensor parallel size 0".into());
        }
        let count = |key: &str| {
            text.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("the config has no `{key}`"))
        };
        let vocab_rows_per_rank = vocab_rows_per_rank(engine, count("vocab_size")?, tp)?;
        let heads = match text.get("num_attention_heads") {
            None | Some(Value::Null) => None,
            Some(_) => {
                let heads = count("num_attention_heads")?;
                let kv_heads = match text.get("num_key_value_heads") {
                    Some(v) if !v.is_null() => {
                        v.as_u64().ok_or("`num_key_value_heads` is not a count")?
                    }
                    _ => heads,
                };
                if heads == 0 {
                    return Err("`num_attention_heads` is 0".into());
                }
                if kv_heads == 0 {
                    return Err("`num_key_value_heads` is 0".into());
                }
                Some(Heads {
                    heads,
                    kv_heads,
                    kv_heads_per_rank: kv_heads_per_rank(engine, kv_heads, tp)?,
                })
            }
        };
        Ok(TpLayout {
            engine,
            tp,
            attn_tp: tp,
            vocab_rows_per_rank,
            heads,
            hidden: count("hidden_size")?,
            plain_mamba: false,
            conv1d: false,
            mamba2: None,
        })
    }

    /// The layout for a class whose Mamba mixers vLLM builds as
    /// `MambaMixer2` (mamba_mixer2.py), split by heads with their groups
    /// replicated where the ranks do not divide them.
    pub(crate) fn with_mamba2(mut self, sizes: Option<Mamba2Sizes>) -> TpLayout {
        self.mamba2 = sizes;
        self
    }

    /// The layout for a class whose mixers are Mamba's without groups
    /// (vLLM's `MambaMixer`), whose tensors split as plain linear layers.
    pub(crate) fn with_plain_mamba(mut self, plain: bool) -> TpLayout {
        self.plain_mamba = plain;
        self
    }

    /// The layout for GPT-2's checkpoints, whose `Conv1D` weights are
    /// stored transposed (`[in, out]`); vLLM transposes them as it loads.
    pub(crate) fn with_conv1d(mut self, conv1d: bool) -> TpLayout {
        self.conv1d = conv1d;
        self
    }

    /// The attention's heads, or the refusal of a tensor that needs them.
    fn heads(&self, name: &str) -> Result<&Heads, String> {
        self.heads.as_ref().ok_or_else(|| {
            format!("`{name}` is an attention tensor, but the config has no `num_attention_heads`")
        })
    }

    /// The layout with attention split over `attn_tp` ranks instead of all
    /// of them (SGLang's DP attention: `tp / dp`, which the caller checks
    /// divides); the MLP, the experts and the vocabulary stay split over
    /// `tp`.
    pub(crate) fn with_attention_tp(mut self, attn_tp: u64) -> Result<TpLayout, String> {
        self.attn_tp = attn_tp;
        if let Some(heads) = self.heads.as_mut() {
            heads.kv_heads_per_rank = kv_heads_per_rank(self.engine, heads.kv_heads, attn_tp)?;
        }
        Ok(self)
    }

    /// The allocation a checkpoint tensor lands in (q, k and v merge into
    /// `qkv_proj`, gate and up into `gate_up_proj`) and its elements on one
    /// rank: column-parallel layers split their rows, row-parallel ones
    /// their columns (their bias whole), the vocabulary its padded rows; the
    /// rest (norms) is whole on every rank.
    pub(crate) fn share(
        &self,
        tensor: &StoredTensor,
        is_head: bool,
    ) -> Result<(String, u64), String> {
        let (engine, tp) = (self.engine, self.tp);
        let name = tensor.name.as_str();
        let elements = tensor
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(|| format!("`{name}`: its elements overflow u64"))?;
        let (module, param) = name.rsplit_once('.').unwrap_or(("", name));
        let (parent, layer) = module.rsplit_once('.').unwrap_or(("", module));
        let merged = |to: &str| format!("{parent}.{to}.{param}");
        let rows = tensor.shape.first().copied().unwrap_or(1);
        if name == "lm_head.bias" {
            // vLLM's Transformers backend registers it at load, one entry
            // per padded vocabulary row of the rank (`_register_bias`).
            return Ok((name.to_owned(), self.vocab_rows_per_rank));
        }
        // Gemma 4's per-layer inputs: their embedding vocabulary-parallel
        // over its own vocabulary (their projection in and each layer's gate
        // and projection out are in the match below), each layer's scalar
        // whole.
        if name.ends_with("embed_tokens_per_layer.weight") {
            let [vocab, width] = tensor.shape.as_slice() else {
                return Err(format!(
                    "`{name}` has shape {:?}; {} builds it as [vocab, width]",
                    tensor.shape,
                    engine.name()
                ));
            };
            let rows = vocab_rows_per_rank(engine, *vocab, tp)?;
            let elements = rows
                .checked_mul(*width)
                .ok_or_else(|| format!("`{name}`: its elements overflow u64"))?;
            return Ok((name.to_owned(), elements));
        }
        if param == "layer_scalar" {
            return Ok((name.to_owned(), elements));
        }
        // Nemotron-H's and Mamba's embedding is `embeddings`.
        if is_head
            || name.ends_with("embed_tokens.weight")
            || name.ends_with(".embeddings.weight")
            || name.ends_with(".wte.weight")
            || name.ends_with(".word_embeddings.weight")
        {
            let [_, width] = tensor.shape.as_slice() else {
                return Err(format!(
                    "`{name}` has shape {:?}; {} builds it as [vocab, hidden]",
                    tensor.shape,
                    engine.name()
                ));
            };
            let elements = self
                .vocab_rows_per_rank
                .checked_mul(*width)
                .ok_or_else(|| format!("`{name}`: its elements overflow u64"))?;
            return Ok((name.to_owned(), elements));
        }
        // Experts as transformers 5 saves them, fused: gate_up [E, 2I, H]
        // and down [E, H, I] (Llama 4's the other way round); FusedMoE
        // splits I over the ranks either way.
        if layer == "experts" && matches!(param, "gate_up_proj" | "down_proj") {
            let [_, a, b] = tensor.shape.as_slice() else {
                return Err(format!(
                    "`{name}` has shape {:?}; kv reads fused experts as [experts, rows, \
                     columns]",
                    tensor.shape
                ));
            };
            let inner = if *a == self.hidden { *b } else { *a };
            divide(engine, inner, tp)?;
            let to = if param == "gate_up_proj" { "w13" } else { "w2" };
            return Ok((format!("{module}.{to}_weight"), elements / tp));
        }
        // Their biases (GPT-OSS): gate and up's [E, 2I] split with I,
        // down's [E, H] whole on every rank.
        if layer == "experts" && matches!(param, "gate_up_proj_bias" | "down_proj_bias") {
            if param == "down_proj_bias" {
                return Ok((format!("{module}.w2_bias"), elements));
            }
            let columns = tensor.shape.get(1).copied().unwrap_or(1);
            divide(engine, columns, tp.checked_mul(2).ok_or("tp overflows")?)?;
            return Ok((format!("{module}.w13_bias"), elements / tp));
        }
        // DBRX's experts, each projection of every expert stacked in one
        // tensor `[experts x inner, hidden]`: gate (`w1`) and up (`v1`) in
        // one `w13_weight`, down (`w2`) in `w2_weight`, the inner width
        // split.
        if layer == "mlp" && parent.ends_with(".experts") && matches!(param, "w1" | "v1" | "w2") {
            divide(engine, rows, tp)?;
            let to = if param == "w2" { "w2" } else { "w13" };
            return Ok((format!("{parent}.{to}_weight"), elements / tp));
        }
        // FusedMoE: every expert's gate and up in one `w13_weight`, every
        // down in one `w2_weight`, each expert split as its dense kin.
        if let Some((before, expert)) = module.split_once(".experts.") {
            let projection = expert.rsplit_once('.').map_or(expert, |(_, p)| p);
            return Ok(match projection {
                "w1" | "w3" | "gate_proj" | "up_proj" => {
                    divide(engine, rows, tp)?;
                    (format!("{before}.experts.w13_{param}"), elements / tp)
                }
                "w2" | "down_proj" => {
                    let columns = tensor.shape.get(1).copied().unwrap_or(1);
                    divide(engine, columns, tp)?;
                    (format!("{before}.experts.w2_{param}"), elements / tp)
                }
                _ => self.whole(name, elements)?,
            });
        }
        let attn_tp = self.attn_tp;
        // Gated DeltaNet (Qwen3-Next): a value per head, split with the
        // heads; its convolution and projections as below. A Mamba mixer's
        // tensors of the same names are split otherwise (its groups may be
        // replicated), which kv has not checked: refused above TP 1.
        // Attention sinks: a value per head, split with the heads; Beam's
        // output-gate bias alike.
        if param == "sinks" || (param == "gate_bias" && layer == "self_attn") {
            let heads = self.heads(name)?.heads;
            divide(engine, heads, attn_tp)?;
            divide(engine, elements, attn_tp)?;
            return Ok((name.to_owned(), elements / attn_tp));
        }
        let deltanet = parent.ends_with("linear_attn") || layer == "linear_attn";
        // Gated DeltaNet is attention: under SGLang's DP attention it splits
        // over the attention group (qwen3_next.py, `parallel_group="attn_tp"`).
        let in_tp = if deltanet { attn_tp } else { tp };
        if deltanet && matches!(param, "A_log" | "dt_bias") {
            divide(engine, rows, attn_tp)?;
            return Ok((name.to_owned(), elements / attn_tp));
        }
        // A plain Mamba mixer (Mamba, Falcon-Mamba: mamba_mixer.py) has no
        // groups: every tensor split by its intermediate rows, the
        // row-parallel `x_proj` and `out_proj` by their columns.
        if self.plain_mamba && (layer == "mixer" || parent.ends_with(".mixer")) {
            let split_columns = matches!(layer, "x_proj" | "out_proj") && param == "weight";
            if split_columns {
                divide(engine, tensor.shape.get(1).copied().unwrap_or(1), tp)?;
            } else if layer == "out_proj" {
                // Its bias: whole on every rank.
                return Ok((name.to_owned(), elements));
            } else if layer == "in_proj" {
                // Two halves (x and the gate), each split.
                divide(engine, rows, tp.checked_mul(2).ok_or("tp overflows")?)?;
            } else {
                divide(engine, rows, tp)?;
            }
            return Ok((name.to_owned(), elements / tp));
        }
        // GPT-2 (gpt2.py): the fused `c_attn` split with the heads, `c_fc`
        // column- and `c_proj` row-parallel, each weight `[in, out]`; the
        // learned positions (an `nn.Embedding`) and the `ln_*` norms whole.
        if self.conv1d {
            let (inputs, outputs) = match tensor.shape.as_slice() {
                [i, o] => (*i, *o),
                _ => (1, rows),
            };
            match (layer, param) {
                ("c_attn", _) => {
                    divide(engine, self.heads(name)?.heads, attn_tp)?;
                    divide(engine, outputs, attn_tp)?;
                    return Ok((name.to_owned(), elements / attn_tp));
                }
                ("c_fc", _) => {
                    divide(engine, outputs, tp)?;
                    return Ok((name.to_owned(), elements / tp));
                }
                ("c_proj", "weight") => {
                    divide(engine, inputs, tp)?;
                    return Ok((name.to_owned(), elements / tp));
                }
                ("wpe", _) | ("c_proj", _) => return Ok((name.to_owned(), elements)),
                _ => {}
            }
        }
        // Gemma 3n: AltUp's per-layer parts whole on every rank, its
        // projections in and out of the hidden streams column-parallel;
        // LAuReL's low-rank pair column- then row-parallel (gemma3n.py).
        if layer == "altup" || parent.ends_with(".altup") {
            return Ok((name.to_owned(), elements));
        }
        if parent.ends_with(".altup_projections") || parent.ends_with(".altup_unembed_projections")
        {
            divide(engine, rows, tp)?;
            return Ok((name.to_owned(), elements / tp));
        }
        if parent.ends_with(".laurel") && matches!(layer, "linear_left" | "linear_right") {
            let split = if layer == "linear_left" {
                rows
            } else {
                tensor.shape.get(1).copied().unwrap_or(1)
            };
            divide(engine, split, tp)?;
            return Ok((name.to_owned(), elements / tp));
        }
        // OPT's and GPT-J's attention out-projection: row-parallel, a bias
        // whole.
        if layer == "out_proj" && (parent.ends_with(".self_attn") || parent.ends_with(".attn")) {
            if param != "weight" {
                return Ok((name.to_owned(), elements));
            }
            divide(engine, tensor.shape.get(1).copied().unwrap_or(1), attn_tp)?;
            return Ok((name.to_owned(), elements / attn_tp));
        }
        if let Some(sizes) = self.mamba2 {
            let mixer_part = matches!(layer, "in_proj" | "conv1d" | "out_proj" | "norm")
                && (parent.ends_with(".mixer") || parent.ends_with(".mamba"));
            let per_head =
                matches!(layer, "mixer" | "mamba") && matches!(param, "A_log" | "D" | "dt_bias");
            if mixer_part || per_head {
                return mamba2_share(engine, sizes, tp, tensor, layer, param, elements);
            }
        }
        // Granite 4.0-H's shared MLP (granitemoeshared.py): `input_linear`
        // gate and up in one column-parallel layer, `output_linear`
        // row-parallel (its bias whole).
        if parent.ends_with(".shared_mlp") && matches!(layer, "input_linear" | "output_linear") {
            if layer == "input_linear" {
                divide(engine, rows, tp.checked_mul(2).ok_or("tp overflows")?)?;
                return Ok((name.to_owned(), elements / tp));
            }
            if param != "weight" {
                return Ok((name.to_owned(), elements));
            }
            divide(engine, tensor.shape.get(1).copied().unwrap_or(1), tp)?;
            return Ok((name.to_owned(), elements / tp));
        }
        // LFM2's short convolution (lfm2.py, vLLM's and SGLang's): the
        // depthwise `conv` and the three-part `in_proj` column-parallel,
        // `out_proj` row-parallel (its bias whole), over all of tp.
        if parent.ends_with(".conv") && matches!(layer, "conv" | "in_proj" | "out_proj") {
            let (split, parts) = match (layer, param) {
                ("out_proj", "weight") => (tensor.shape.get(1).copied().unwrap_or(1), tp),
                ("out_proj", _) => return Ok((name.to_owned(), elements)),
                ("in_proj", _) => (rows, tp.checked_mul(3).ok_or("tp overflows")?),
                _ => (rows, tp),
            };
            divide(engine, split, parts)?;
            return Ok((name.to_owned(), elements / tp));
        }
        // LFM2-MoE's router bias (`expert_bias`): whole on every rank.
        if param == "expert_bias" && layer == "feed_forward" {
            return Ok((name.to_owned(), elements));
        }
        // LFM2's MLP: `w1` and `w3` one column-parallel `w13`, `w2`
        // row-parallel (its bias whole).
        if parent.ends_with(".feed_forward") && matches!(layer, "w1" | "w3" | "w2") {
            if layer == "w2" {
                if param != "weight" {
                    return Ok((name.to_owned(), elements));
                }
                divide(engine, tensor.shape.get(1).copied().unwrap_or(1), tp)?;
                return Ok((name.to_owned(), elements / tp));
            }
            divide(engine, rows, tp)?;
            return Ok((merged("w13"), elements / tp));
        }
        if !deltanet && matches!(layer, "conv1d" | "out_proj" | "in_proj") {
            return self.whole(name, elements);
        }
        Ok(match layer {
            "q_proj" => {
                divide(engine, rows, attn_tp)?;
                (merged("qkv_proj"), elements / attn_tp)
            }
            "k_proj" | "v_proj" => {
                let heads = self.heads(name)?;
                divide(engine, rows, heads.kv_heads)?;
                let per_head = elements / heads.kv_heads;
                (merged("qkv_proj"), per_head * heads.kv_heads_per_rank)
            }
            // Latent attention (DeepSeek-V2/V3): the down-projections of q
            // and of the latent are replicated on every rank, one
            // allocation (`fused_qkv_a_proj`) where q has a LoRA rank; the
            // up-projections are column-parallel.
            "q_a_proj" | "kv_a_proj_with_mqa" => (merged("fused_qkv_a_proj"), elements),
            // BLOOM's fused attention, q, k and v of each head together:
            // split with the heads; its MLP column- then row-parallel.
            "query_key_value" => {
                divide(engine, self.heads(name)?.heads, attn_tp)?;
                divide(engine, rows, attn_tp)?;
                (name.to_owned(), elements / attn_tp)
            }
            // GPT-J's MLP.
            "dense_h_to_4h" | "fc_in" => {
                divide(engine, rows, tp)?;
                (name.to_owned(), elements / tp)
            }
            "dense_4h_to_h" | "fc_out" if param == "weight" => {
                divide(engine, tensor.shape.get(1).copied().unwrap_or(1), tp)?;
                (name.to_owned(), elements / tp)
            }
            "dense_4h_to_h" | "fc_out" => (name.to_owned(), elements),
            // Laguna's gate, a value per query head: split with the heads.
            "g_proj" if parent.ends_with(".self_attn") => {
                divide(engine, rows, attn_tp)?;
                (name.to_owned(), elements / attn_tp)
            }
            "q_b_proj" | "kv_b_proj" => {
                divide(engine, rows, attn_tp)?;
                (name.to_owned(), elements / attn_tp)
            }
            "gate_proj" | "up_proj" => {
                divide(engine, rows, tp)?;
                (merged("gate_up_proj"), elements / tp)
            }
            // Fused in the checkpoint (Phi-3, DBRX's `Wqkv`): q's heads
            // split, K's and V's as `k_proj` and `v_proj` are, in one
            // allocation.
            "qkv_proj" | "Wqkv" => {
                let heads = self.heads(name)?;
                let head_rows = heads
                    .kv_heads
                    .checked_mul(2)
                    .and_then(|kv| kv.checked_add(heads.heads))
                    .ok_or("the head counts overflow")?;
                let head_dim = divide(engine, rows, head_rows)?;
                divide(engine, heads.heads, attn_tp)?;
                let per_rank_rows = heads
                    .kv_heads_per_rank
                    .checked_mul(2)
                    .and_then(|kv| kv.checked_add(heads.heads / attn_tp))
                    .and_then(|rows| rows.checked_mul(head_dim))
                    .ok_or("the head counts overflow")?;
                let columns = elements / rows.max(1);
                (name.to_owned(), per_rank_rows * columns)
            }
            // Fused in the checkpoint (GLM, Phi-3): each half split, as
            // MergedColumnParallelLinear loads it.
            "gate_up_proj" => {
                divide(engine, rows, tp.checked_mul(2).ok_or("tp overflows")?)?;
                (name.to_owned(), elements / tp)
            }
            // Apertus' xIELU activation: its scalars (alpha_p, alpha_n as
            // parameters, beta and eps as buffers) whole on every rank.
            "act_fn" => (name.to_owned(), elements),
            // A sparse-attention indexer's projections: replicated, its key
            // and weights projections one allocation (deepseek_v32).
            "wq_b" if parent.ends_with(".indexer") => (name.to_owned(), elements),
            "wk" | "weights_proj" if parent.ends_with(".indexer") => {
                (merged("wk_weights_proj"), elements)
            }
            // Qwen3.5's Gated DeltaNet ships its projections apart; vLLM
            // fuses them (qwen3_5.py's mapper), each column-parallel.
            "in_proj_qkv" | "in_proj_z" if deltanet => {
                divide(engine, rows, attn_tp)?;
                (merged("in_proj_qkvz"), elements / attn_tp)
            }
            "in_proj_a" | "in_proj_b" if deltanet => {
                divide(engine, rows, attn_tp)?;
                (merged("in_proj_ba"), elements / attn_tp)
            }
            // Phi's and Starcoder2's MLP, Gated DeltaNet's projections
            // into its heads and its convolution, and vLLM's Gemma 4
            // projection into its per-layer inputs: column-parallel in,
            // row-parallel out.
            "fc1"
            | "c_fc"
            | "in_proj_qkvz"
            | "in_proj_ba"
            | "conv1d"
            | "per_layer_model_projection" => {
                divide(engine, rows, in_tp)?;
                (name.to_owned(), elements / in_tp)
            }
            "fc2" | "c_proj" | "out_proj" if param == "weight" => {
                let columns = tensor.shape.get(1).copied().unwrap_or(1);
                divide(engine, columns, in_tp)?;
                (name.to_owned(), elements / in_tp)
            }
            "o_proj" | "dense" if param == "weight" => {
                let columns = tensor.shape.get(1).copied().unwrap_or(1);
                divide(engine, columns, attn_tp)?;
                (name.to_owned(), elements / attn_tp)
            }
            "down_proj" if param == "weight" => {
                let columns = tensor.shape.get(1).copied().unwrap_or(1);
                divide(engine, columns, tp)?;
                (name.to_owned(), elements / tp)
            }
            // A row-parallel layer's bias, norms and routers: whole on
            // every rank.
            "o_proj" | "dense" | "down_proj" | "fc2" | "c_proj" | "gate" | "router"
            | "shared_expert_gate" | "moe_statics" => (name.to_owned(), elements),
            // Gemma 4's router projection (`router.proj`, a GateLinear) and
            // each layer's per-layer-input gate and projection out:
            // replicated.
            "proj" if parent.ends_with(".router") => (name.to_owned(), elements),
            // DBRX's router (`router.layer`, a ReplicatedLinear).
            "layer" if parent.ends_with(".router") => (name.to_owned(), elements),
            "per_layer_input_gate" | "per_layer_projection" => (name.to_owned(), elements),
            // OPT's learned positions (an `nn.Embedding`) and its
            // projections between the embedding and hidden widths
            // (`ReplicatedLinear`): whole on every rank.
            "embed_positions" | "project_in" | "project_out" => (name.to_owned(), elements),
            // Norms, numbered too (HyperCLOVA X's `post_norm1`, Gemma 4's
            // `post_feedforward_layernorm_1`), and
            // Mamba's final `norm_f`.
            // GPT-2's, BLOOM's and GPT-J's `ln_1`, `ln_2`, `ln_f`.
            norm if norm == "norm_f"
                || norm.starts_with("ln_")
                || norm
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .trim_end_matches('_')
                    .ends_with("norm") =>
            {
                (name.to_owned(), elements)
            }
            _ => self.whole(name, elements)?,
        })
    }

    /// A tensor of a kind kv has not seen sharded: whole at TP 1, refused
    /// above it rather than guessed.
    fn whole(&self, name: &str, elements: u64) -> Result<(String, u64), String> {
        if self.tp > 1 {
            return Err(format!(
                "kv does not know how {} shards `{name}` over {} TP ranks",
                self.engine.name(),
                self.tp
            ));
        }
        Ok((name.to_owned(), elements))
    }
}

/// A Mamba2 config's mixer sizes (`kv_core::HfConfig::mamba`) for `tp`
/// ranks; None for Mamba1's, and at TP 1, where nothing is split.
pub(crate) fn mamba2_sizes(config: &Value, tp: u64) -> Result<Option<Mamba2Sizes>, String> {
    if tp <= 1 {
        return Ok(None);
    }
    let mamba = kv_core::HfConfig::from_value(config.clone())
        .mamba()
        .map_err(|e| e.to_string())?;
    Ok(match (mamba.n_groups, mamba.heads) {
        (Some(n_groups), Some(heads)) => Some(Mamba2Sizes {
            d_inner: mamba.d_inner,
            n_groups,
            d_state: mamba.d_state,
            heads,
        }),
        _ => None,
    })
}

/// One rank's share of a Mamba2 mixer's tensor (vLLM's `MambaMixer2`): its
/// heads split over the ranks (which must divide them), its groups too where
/// the ranks divide them, else a single group replicated to one a rank
/// (`extra_groups_for_head_shards`); `in_proj` (z, x, B, C, dt), the
/// convolution (x, B, C), the gated norm (z's width) and `out_proj`'s
/// columns split with them, `out_proj`'s bias whole.
fn mamba2_share(
    engine: ShardingEngine,
    sizes: Mamba2Sizes,
    tp: u64,
    tensor: &StoredTensor,
    layer: &str,
    param: &str,
    elements: u64,
) -> Result<(String, u64), String> {
    let name = tensor.name.as_str();
    let Mamba2Sizes {
        d_inner,
        n_groups,
        d_state,
        heads,
    } = sizes;
    divide(engine, heads, tp)?;
    if !n_groups.is_multiple_of(tp) && n_groups != 1 {
        return Err(format!(
            "{} refuses: AssertionError: Tensor parallel currently supported only for n_groups \
             {n_groups} divisible by tp {tp}, or a single group",
            engine.name()
        ));
    }
    let groups = if n_groups.is_multiple_of(tp) {
        n_groups
    } else {
        tp
    };
    let overflow = || format!("`{name}`: its sizes overflow u64");
    let conv_rows = |groups: u64| {
        groups
            .checked_mul(d_state)
            .and_then(|g| g.checked_mul(2))
            .and_then(|g| g.checked_add(d_inner))
    };
    let in_proj_rows = |groups: u64| {
        conv_rows(groups)
            .and_then(|c| c.checked_add(d_inner))
            .and_then(|r| r.checked_add(heads))
    };
    let rows = tensor.shape.first().copied().unwrap_or(1);
    let columns = elements.checked_div(rows).unwrap_or(0);
    let (stored, held) = match (layer, param) {
        ("in_proj", _) => (
            in_proj_rows(n_groups).ok_or_else(overflow)?,
            in_proj_rows(groups).ok_or_else(overflow)?,
        ),
        ("conv1d", _) => (
            conv_rows(n_groups).ok_or_else(overflow)?,
            conv_rows(groups).ok_or_else(overflow)?,
        ),
        ("norm", _) => (d_inner, d_inner),
        ("out_proj", "weight") => {
            let inner = tensor.shape.get(1).copied().unwrap_or(1);
            if inner != d_inner {
                return Err(format!(
                    "`{name}` has {inner} columns; the config's Mamba2 mixer is {d_inner} wide"
                ));
            }
            divide(engine, d_inner, tp)?;
            return Ok((name.to_owned(), elements / tp));
        }
        ("out_proj", _) => return Ok((name.to_owned(), elements)),
        _ => (heads, heads),
    };
    if rows != stored {
        return Err(format!(
            "`{name}` has {rows} rows; the config's Mamba2 mixer gives {stored}"
        ));
    }
    let per_rank = divide(engine, held, tp)?;
    let share = per_rank.checked_mul(columns).ok_or_else(overflow)?;
    Ok((name.to_owned(), share))
}

/// VocabParallelEmbedding's rows on one rank of `tp` for a vocabulary of
/// `vocab`: padded to 64 (SGLang to 64 x tp where the ranks do not divide
/// that), then divided.
fn vocab_rows_per_rank(engine: ShardingEngine, vocab: u64, tp: u64) -> Result<u64, String> {
    let pad = |to: u64| {
        vocab
            .checked_next_multiple_of(to)
            .ok_or("`vocab_size` overflows once padded")
    };
    let mut padded = pad(VOCAB_PADDING)?;
    if engine == ShardingEngine::Sglang && !padded.is_multiple_of(tp) {
        // VocabParallelEmbedding: `padding_size *= self.tp_size`.
        padded = pad(VOCAB_PADDING.checked_mul(tp).ok_or("tp overflows")?)?;
    }
    divide(engine, padded, tp)
}

/// QKVParallelLinear: KV heads divided over the ranks, or, with fewer
/// heads than ranks, one head a rank, replicated.
fn kv_heads_per_rank(engine: ShardingEngine, kv_heads: u64, ranks: u64) -> Result<u64, String> {
    if ranks >= kv_heads {
        divide(engine, ranks, kv_heads)?;
        Ok(1)
    } else {
        divide(engine, kv_heads, ranks)
    }
}

/// `ensure_divisibility`'s assertion, in the engine's words.
fn divide(engine: ShardingEngine, numerator: u64, denominator: u64) -> Result<u64, String> {
    if denominator == 0 || !numerator.is_multiple_of(denominator) {
        return Err(format!(
            "{} refuses: {numerator} is not divisible by {denominator}",
            engine.name()
        ));
    }
    Ok(numerator / denominator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layout(tp: u64) -> TpLayout {
        let text = json!({"hidden_size": 64, "num_attention_heads": 4,
                          "num_key_value_heads": 4, "vocab_size": 128});
        TpLayout::new(&text, tp, ShardingEngine::Vllm).unwrap()
    }

    fn tensor(name: &str, shape: &[u64]) -> StoredTensor {
        StoredTensor::new(name.into(), "BF16".into(), shape.to_vec(), 0)
    }

    #[test]
    fn gpt_2s_c_fc_splits_its_outputs_as_stored_in_out() {
        // [in 64, out 66]: vLLM's ColumnParallelLinear splits the 66.
        let c_fc = tensor("transformer.h.0.mlp.c_fc.weight", &[64, 66]);
        let why = layout(4).with_conv1d(true).share(&c_fc, false).unwrap_err();
        assert!(why.contains("66 is not divisible by 4"), "{why}");
        let even = tensor("transformer.h.0.mlp.c_fc.weight", &[66, 64]);
        let (_, elements) = layout(4).with_conv1d(true).share(&even, false).unwrap();
        assert_eq!(elements, 66 * 64 / 4);
    }

    #[test]
    fn laurels_left_splits_its_rows_and_its_right_its_columns() {
        let left = tensor("model.layers.0.laurel.linear_left.weight", &[3, 64]);
        let why = layout(2).share(&left, false).unwrap_err();
        assert!(why.contains("3 is not divisible by 2"), "{why}");
        let right = tensor("model.layers.0.laurel.linear_right.weight", &[64, 3]);
        let why = layout(2).share(&right, false).unwrap_err();
        assert!(why.contains("3 is not divisible by 2"), "{why}");
    }

    #[test]
    fn dbrxs_stacked_experts_merge_into_w13_and_w2_and_nothing_else_does() {
        let at = |name: &str| {
            tensor(
                &format!("transformer.blocks.0.ffn.experts.mlp.{name}"),
                &[128, 64],
            )
        };
        let (w13, elements) = layout(2).share(&at("v1"), false).unwrap();
        assert_eq!(
            (w13.as_str(), elements),
            ("transformer.blocks.0.ffn.experts.w13_weight", 64 * 64)
        );
        let (w2, _) = layout(2).share(&at("w2"), false).unwrap();
        assert_eq!(w2, "transformer.blocks.0.ffn.experts.w2_weight");
        // DBRX's router is whole; a `layer` elsewhere is not known.
        let router = tensor("transformer.blocks.0.ffn.router.layer.weight", &[4, 64]);
        assert_eq!(layout(2).share(&router, false).unwrap().1, 4 * 64);
        let other = tensor("transformer.blocks.0.ffn.layer.weight", &[4, 64]);
        assert!(layout(2).share(&other, false).is_err());
        // Other names of the same shape are not DBRX's experts.
        for name in [
            "model.layers.0.ffn.experts.other.w1",
            "model.layers.0.mlp.w1",
        ] {
            let why = layout(2)
                .share(&tensor(name, &[128, 64]), false)
                .unwrap_err();
            assert!(
                why.contains("kv does not know how vLLM shards"),
                "{name}: {why}"
            );
        }
    }

    #[test]
    fn beams_gate_bias_splits_with_the_heads_only_in_attention() {
        let bias = tensor("model.layers.0.self_attn.gate_bias", &[4]);
        assert_eq!(layout(2).share(&bias, false).unwrap().1, 2);
        let elsewhere = tensor("model.layers.0.mlp.gate_bias", &[4]);
        assert!(layout(2).share(&elsewhere, false).is_err());
    }

    #[test]
    fn a_g_proj_outside_attention_is_not_split_as_a_head_gate() {
        let gate = tensor("model.layers.0.self_attn.g_proj.weight", &[4, 64]);
        assert_eq!(layout(2).share(&gate, false).unwrap().1, 2 * 64);
        let other = tensor("model.layers.0.mlp.g_proj.weight", &[4, 64]);
        let why = layout(2).share(&other, false).unwrap_err();
        assert!(why.contains("kv does not know how vLLM shards"), "{why}");
    }
}
