//! Per-rank figures under tensor and pipeline parallelism, against figures
//! worked out by hand from the engines' rules.

use kv_core::pattern::LayerKind;
use kv_core::{
    collect, Collection, DType, Geometry, KvError, KvSpec, Latent, LayerPattern, ModelLocalKv,
    Parallel, Positions, RecurrentState, Rows, Scope, StatePart,
};

/// A model declaring `specs` at its root.
struct Model(Vec<KvSpec>);

impl ModelLocalKv for Model {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.extend(self.0.iter().cloned());
        Ok(())
    }
}

fn rank(tp: u64, pp: u64, tp_rank: u64, pp_rank: u64) -> Parallel {
    Parallel::new(tp, pp).unwrap().at(tp_rank, pp_rank).unwrap()
}

fn per_row(collection: &Collection) -> Vec<u64> {
    collection
        .entries()
        .iter()
        .map(|e| e.spec.bytes_per_row().unwrap())
        .collect()
}

/// Qwen3-Next-80B-A3B's 12 full-attention layers: 2 KV heads of 256, bf16.
fn qwen3_next_attention() -> KvSpec {
    KvSpec::attention(
        "full_attention",
        "paged full attention",
        Geometry::new(12, 2, 256, DType::BF16),
        Positions::bounded(1, "one position, to read bytes per token"),
        Scope::Request,
        Rows::MaxNumSeqs,
    )
}

#[test]
fn gqa_heads_below_tp_are_one_per_rank_replicated() {
    let whole = collect(&Model(vec![qwen3_next_attention()]));
    // Whole: 12 layers x 2 heads x (256 + 256) x 2 B = 24,576 B per token.
    assert_eq!(per_row(&whole), [12 * 2 * 512 * 2]);
    // tp 4 > 2 heads: each rank holds one head (vLLM replicates it 2x).
    for tp_rank in 0..4 {
        let held = whole.for_rank(rank(4, 1, tp_rank, 0)).unwrap();
        assert_eq!(per_row(&held), [12 * 512 * 2], "tp rank {tp_rank}");
        let share = held.entries()[0].share.as_deref().unwrap();
        assert!(
            share.contains("one head per rank, each replicated 2 times"),
            "{share}"
        );
    }
    // tp 2 = 2 heads: one head each, no replication.
    let held = whole.for_rank(rank(2, 1, 1, 0)).unwrap();
    assert_eq!(per_row(&held), [12 * 512 * 2]);
    assert!(held.entries()[0]
        .share
        .as_deref()
        .unwrap()
        .contains("tp splits 2 kv_heads into 1 per rank"));
}

#[test]
fn llama_heads_split_and_layers_split_evenly() {
    let llama = KvSpec::attention(
        "kv",
        "paged",
        Geometry::new(32, 8, 128, DType::BF16),
        Positions::bounded(1, "one position"),
        Scope::Request,
        Rows::MaxNumSeqs,
    );
    let whole = collect(&Model(vec![llama]));
    assert_eq!(per_row(&whole), [131_072]);
    // tp 2 x pp 2: 16 layers x 4 heads x 256 x 2 B = 32,768 B per token on every rank.
    let layout = Parallel::new(2, 2).unwrap();
    for r in layout.ranks() {
        let held = whole.for_rank(r).unwrap();
        assert_eq!(per_row(&held), [16 * 4 * 256 * 2], "{r}");
        assert_eq!(
            held.entries()[0].share.as_deref(),
            Some(
                format!(
                    "pp stage {} holds 16 of 32 layers (even split 16/16); \
                     tp splits 8 kv_heads into 4 per rank",
                    r.pp_rank
                )
                .as_str()
            )
        );
    }
    // As many stages as layers: one layer each.
    assert_eq!(
        Parallel::new(1, 32).unwrap().stage_layers(32).unwrap(),
        [1; 32]
    );
    let last = whole.for_rank(rank(1, 32, 0, 31)).unwrap();
    assert_eq!(per_row(&last), [8 * 256 * 2]);
}

#[test]
fn mla_latents_are_replicated_on_tp_and_split_on_pp_unevenly_and_said_so() {
    // DeepSeek-V2-Lite: 27 layers x 576 x 2 B = 31,104 B per token whole.
    let latent = KvSpec::latent(
        "latent",
        "MLA",
        Latent::new(27, 512, 64, DType::BF16),
        Positions::bounded(1, "one position"),
        Scope::Request,
        Rows::MaxNumSeqs,
    );
    let whole = collect(&Model(vec![latent]));
    assert_eq!(per_row(&whole), [31_104]);
    // pp 2 over 27 layers: 13 each, the remainder to the stage before the
    // last: [14, 13]. tp 2 replicates the latent.
    assert_eq!(
        Parallel::new(1, 2).unwrap().stage_layers(27).unwrap(),
        [14, 13]
    );
    let stage0 = whole.for_rank(rank(2, 2, 1, 0)).unwrap();
    assert_eq!(per_row(&stage0), [14 * 576 * 2]);
    let stage1 = whole.for_rank(rank(2, 2, 0, 1)).unwrap();
    assert_eq!(per_row(&stage1), [13 * 576 * 2]);
    let share = stage0.entries()[0].share.clone().unwrap();
    assert_eq!(
        share,
        "pp stage 0 holds 14 of 27 layers (uneven split 14/13); MLA latent replicated on all 2 tp ranks"
    );
    let report = stage0.report(1).to_string();
    assert!(report.contains("uneven split 14/13"), "{report}");
    assert!(
        report.contains("max_num_seqs=1, tp=2 pp=2, rank tp=1 pp=0"),
        "{report}"
    );
}

/// Jamba-v0.1: 32 layers, attention where i % 8 == 4 (4 layers), Mamba on
/// the other 28; 8 KV heads of 128; Mamba d_inner 8192, d_conv 4, d_state 16.
fn jamba() -> Model {
    let pattern = LayerPattern::period_offset(
        32,
        8,
        4,
        LayerKind::FullAttention,
        LayerKind::Mamba,
        ("attn_layer_period", "attn_layer_offset"),
    )
    .unwrap();
    let attention = KvSpec::attention(
        "attention",
        "paged",
        Geometry::new(4, 8, 128, DType::BF16),
        Positions::bounded(1, "one position"),
        Scope::Request,
        Rows::MaxNumSeqs,
    )
    .in_layers(pattern.clone(), LayerKind::FullAttention);
    let mamba = KvSpec::recurrent(
        "mamba",
        "MambaCache",
        RecurrentState::from_parts(
            28,
            vec![
                StatePart::mamba_conv_transformers(8192, 4, DType::BF16),
                StatePart::mamba_ssm(8192, 16, DType::BF16),
            ],
        ),
        Scope::Request,
        Rows::MaxNumSeqs,
    )
    .in_layers(pattern, LayerKind::Mamba);
    Model(vec![attention, mamba])
}

#[test]
fn a_hybrid_recurrent_model_splits_by_its_layer_pattern() {
    let whole = collect(&jamba());
    // Whole: attention 4 x 8 x 256 x 2 = 16,384 B per token; Mamba
    // 28 x (8192 x 4 + 8192 x 16) x 2 = 9,175,040 B per sequence.
    assert_eq!(per_row(&whole), [16_384, 9_175_040]);
    // tp 2 x pp 2: stages hold layers 0..16 and 16..32. Attention layers
    // 4, 12 | 20, 28: two per stage, 4 of 8 heads per rank:
    // 2 x 4 x 256 x 2 = 4,096 B per token. Mamba: 14 layers per stage,
    // d_inner 8192 / 2 = 4096 per rank: 14 x (4096 x 4 + 4096 x 16) x 2 = 2,293,760 B.
    for r in Parallel::new(2, 2).unwrap().ranks() {
        let held = whole.for_rank(r).unwrap();
        assert_eq!(per_row(&held), [4_096, 2_293_760], "{r}");
    }
    // pp 4: stages of 8 layers, each holding exactly one attention layer
    // (4, 12, 20, 28) and 7 Mamba layers, whatever an even split of the
    // group's own 4 layers would say.
    for stage in 0..4 {
        let held = whole.for_rank(rank(1, 4, 0, stage)).unwrap();
        assert_eq!(
            per_row(&held),
            [8 * 256 * 2, 7 * (8192 * 4 + 8192 * 16) * 2],
            "stage {stage}"
        );
    }
    // pp 8: stages of 4 layers; only odd stages hold an attention layer.
    let even = whole.for_rank(rank(1, 8, 0, 0)).unwrap();
    assert_eq!(even.entries().len(), 1, "stage 0 holds only Mamba layers");
    assert_eq!(even.entries()[0].spec.name, "mamba");
    let odd = whole.for_rank(rank(1, 8, 0, 1)).unwrap();
    assert_eq!(per_row(&odd)[0], 8 * 256 * 2);
}

#[test]
fn the_default_layout_changes_nothing() {
    let whole = collect(&jamba());
    let single = whole.for_rank(Parallel::SINGLE).unwrap();
    assert_eq!(single, whole);
    assert_eq!(
        single.report(256).to_string(),
        whole.report(256).to_string()
    );
    assert!(!whole.report(256).to_string().contains("tp="));
}

#[test]
fn a_declaration_can_be_held_whole_with_its_reason() {
    // Whisper-large-v3 cross-attention: 32 layers x 20 heads x 64, f16, 1500
    // encoder positions; not sharded in this deployment.
    let encoder = KvSpec::attention(
        "cross",
        "EncoderDecoderCache",
        Geometry::new(32, 20, 64, DType::F16),
        Positions::bounded(1500, "encoder positions"),
        Scope::Request,
        Rows::MaxNumSeqs,
    )
    .whole_on_every_rank("the encoder runs on every rank");
    let whole = collect(&Model(vec![encoder]));
    let held = whole.for_rank(rank(4, 2, 3, 1)).unwrap();
    assert_eq!(per_row(&held), [32 * 20 * 128 * 2 * 1500]);
    assert_eq!(
        held.entries()[0].share.as_deref(),
        Some("whole on every rank (the encoder runs on every rank)")
    );
    let exported = held.export(1);
    assert_eq!(
        exported.declarations[0].whole_on_every_rank.as_deref(),
        Some("the encoder runs on every rank")
    );
    assert_eq!(
        exported.declarations[0].share.as_deref(),
        Some("whole on every rank (the encoder runs on every rank)")
    );
    let mut blank = held.entries()[0].spec.clone();
    blank.sharding = kv_core::Sharding::Whole(" ".into());
    assert_eq!(
        blank.validate("Whisper").unwrap_err().to_string(),
        "kv: `Whisper.cross`: `sharding` has a blank reason; say why"
    );
}

#[test]
fn bad_layouts_are_clear_errors() {
    let message = |e: KvError| e.to_string();
    assert_eq!(
        message(Parallel::new(0, 1).unwrap_err()),
        "kv: parallel layout: tp is 0; a parallel size is at least 1"
    );
    assert_eq!(
        message(Parallel::new(1, 0).unwrap_err()),
        "kv: parallel layout: pp is 0; a parallel size is at least 1"
    );
    assert_eq!(
        message(Parallel::new(2, 2).unwrap().at(2, 0).unwrap_err()),
        "kv: parallel layout: tp rank 2 is outside the layout: tp ranks are 0..2"
    );
    assert!(message(Parallel::new(2, 2).unwrap().at(0, 5).unwrap_err()).contains("pp rank 5"));
    // pp larger than the layers.
    let whole = collect(&Model(vec![qwen3_next_attention()]));
    assert_eq!(
        message(whole.for_rank(rank(1, 13, 0, 0)).unwrap_err()),
        "kv: `Model.full_attention`: pp 13 is larger than the 12 layers to split"
    );
    // Heads tp does not split: both numbers named.
    let six = KvSpec::attention(
        "kv",
        "paged",
        Geometry::new(4, 6, 64, DType::BF16),
        Positions::bounded(1, "x"),
        Scope::Request,
        Rows::MaxNumSeqs,
    );
    let err = message(
        collect(&Model(vec![six.clone()]))
            .for_rank(rank(4, 1, 0, 0))
            .unwrap_err(),
    );
    assert!(
        err.contains("6 kv_heads do not split evenly over tp 4"),
        "{err}"
    );
    let err = message(
        collect(&Model(vec![six]))
            .for_rank(rank(8, 1, 0, 0))
            .unwrap_err(),
    );
    assert!(err.contains("engines require"), "{err}");
    let three = KvSpec::attention(
        "kv",
        "paged",
        Geometry::new(4, 3, 64, DType::BF16),
        Positions::bounded(1, "x"),
        Scope::Request,
        Rows::MaxNumSeqs,
    );
    let err = message(
        collect(&Model(vec![three]))
            .for_rank(rank(4, 1, 0, 0))
            .unwrap_err(),
    );
    assert!(
        err.contains("3 kv_heads cannot be replicated over tp 4"),
        "{err}"
    );
    // A state whose heads tp does not split.
    let odd_state = KvSpec::recurrent(
        "ssm",
        "MambaCache",
        RecurrentState::from_parts(2, vec![StatePart::mamba2_ssm(3, 64, 16, DType::F32)]),
        Scope::Request,
        Rows::MaxNumSeqs,
    );
    let err = message(
        collect(&Model(vec![odd_state]))
            .for_rank(rank(2, 1, 0, 0))
            .unwrap_err(),
    );
    assert!(
        err.contains("has 3 heads/channels, which tp 2 does not split"),
        "{err}"
    );
}

#[test]
fn host_placement_is_split_from_device_and_not_budgeted() {
    let device = qwen3_next_attention();
    let host = qwen3_next_attention().on_host("offloaded to CPU");
    let mut host = host;
    host.name = "offloaded".into();
    let collection = collect(&Model(vec![device, host]));
    let totals = collection.totals(2).unwrap();
    assert_eq!(totals.device, 2 * 24_576);
    assert_eq!(totals.host, 2 * 24_576);
    assert_eq!(totals.total, 4 * 24_576);
    let report = collection.report(2).to_string();
    assert!(
        // 2 x 24,576 B = 48 KiB each.
        report.contains("device: 48.00 KiB (counted by budgets and the planner); host: 48.00 KiB"),
        "{report}"
    );
    assert!(report.contains("on host: offloaded to CPU"), "{report}");
    let budget = kv_core::budget::Budget {
        ceiling_bytes: 2 * 24_576,
        max_num_seqs: 2,
    };
    assert_eq!(budget.check(collection.entries()), Ok(2 * 24_576));
}
