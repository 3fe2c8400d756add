//! Each model built with zero weights and driven to the peak its
//! declarations state, and the bytes each declaration's own tensors hold.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use kv_candle::census::{zero_weights as census_weights, Census, Counted};
use kv_candle::measured_bytes;

use crate::engine::layers::attention::tokens;
use crate::engine::models::{llama, mimi, mistral};
use crate::engine::pipeline::{Engine, NormalPipeline};

/// Zero weights in `dtype`, on the CPU.
pub fn zero_weights(dtype: DType) -> VarBuilder<'static> {
    VarBuilder::zeros(dtype, &Device::Cpu)
}

/// mistral.rs-style: 3 layers (the first slides over 8 positions), 4 query
/// and 2 KV heads of 16 dims, f32, up to 32 positions grown 16 at a time.
pub const MISTRAL: mistral::Config = mistral::Config {
    hidden: 64,
    layers: 3,
    sliding_layers: 1,
    sliding_window: 8,
    heads: 4,
    kv_heads: 2,
    head_dim: 16,
    max_seq_len: 32,
};

/// The engine's batch: 2 sequences, a 10-token prompt then 22 tokens.
pub const MISTRAL_BATCH: usize = 2;

pub fn mistral_engine() -> Result<Engine> {
    mistral_engine_from(zero_weights(DType::F32))
}

/// The engine over the weights `vb` hands out.
pub fn mistral_engine_from(vb: VarBuilder) -> Result<Engine> {
    let model = mistral::Mistral::new(&MISTRAL, vb)?;
    Ok(Engine::new(NormalPipeline::new(Box::new(model))))
}

pub fn drive_mistral(engine: &Engine) -> Result<()> {
    engine.step(&tokens(MISTRAL_BATCH, 10, MISTRAL.hidden, DType::F32)?)?;
    for _ in 10..MISTRAL.max_seq_len {
        engine.step(&tokens(MISTRAL_BATCH, 1, MISTRAL.hidden, DType::F32)?)?;
    }
    Ok(())
}

/// candle-llama-style: 2 layers, 4 query and 2 KV heads of 16 dims, f32,
/// 48 positions; the server takes prompts of 16 to 40 tokens.
pub const LLAMA: llama::Config = llama::Config {
    hidden: 64,
    layers: 2,
    heads: 4,
    kv_heads: 2,
    head_dim: 16,
    max_position_embeddings: 48,
    min_prompt: 16,
    max_prompt: 40,
};

pub fn llama() -> Result<(llama::Llama, llama::Cache)> {
    llama_from(zero_weights(DType::F32))
}

/// The model over the weights `vb` hands out, and its `Cache`.
pub fn llama_from(vb: VarBuilder) -> Result<(llama::Llama, llama::Cache)> {
    let dtype = vb.dtype();
    Ok((
        llama::Llama::new(&LLAMA, vb)?,
        llama::Cache::new(&LLAMA, dtype)?,
    ))
}

/// One request per prompt length the server takes, on one `Cache`
/// (its K/V cleared between requests, its masks kept), the last decoded to
/// `max_position_embeddings` positions.
pub fn drive_llama(model: &llama::Llama, cache: &mut llama::Cache) -> Result<()> {
    for len in LLAMA.min_prompt..=LLAMA.max_prompt {
        cache.clear_kvs();
        model.forward(&tokens(1, len, LLAMA.hidden, DType::F32)?, 0, cache)?;
    }
    for pos in LLAMA.max_prompt..LLAMA.max_position_embeddings {
        model.forward(&tokens(1, 1, LLAMA.hidden, DType::F32)?, pos, cache)?;
    }
    Ok(())
}

/// Mimi-style: 32 channels, a kernel of 4, 8 frames a step, 4 heads of 8
/// dims attending back 16 frames, a batch of 2 streams.
pub const MIMI: mimi::Config = mimi::Config {
    channels: 32,
    kernel: 4,
    frames_per_step: 8,
    heads: 4,
    head_dim: 8,
    context: 16,
    batch: 2,
};

pub fn mimi() -> Result<mimi::Mimi> {
    mimi::Mimi::new(&MIMI, zero_weights(DType::F32))
}

/// The codec over the weights `vb` hands out.
pub fn mimi_from(vb: VarBuilder) -> Result<mimi::Mimi> {
    mimi::Mimi::new(&MIMI, vb)
}

/// Five steps: past the context, and every state at its steady size.
pub fn drive_mimi(model: &mut mimi::Mimi) -> Result<()> {
    for _ in 0..5 {
        let frames = Tensor::zeros(
            (MIMI.batch, MIMI.channels, MIMI.frames_per_step),
            DType::F32,
            &Device::Cpu,
        )?;
        model.step(&frames)?;
    }
    Ok(())
}

/// The bytes the llama `Cache`'s own tensors hold: K/V, tables, masks.
pub fn llama_measured(cache: &llama::Cache) -> Result<[(String, u64); 3]> {
    let masks: Vec<&Tensor> = cache.masks().collect();
    Ok([
        ("kvs".to_owned(), measured_bytes(cache.kvs())?),
        (
            "rope.cos_sin".to_owned(),
            measured_bytes(&[&cache.rope().cos, &cache.rope().sin])?,
        ),
        ("masks".to_owned(), measured_bytes(&masks)?),
    ])
}

/// The bytes the engine's pipeline holds, every storage once (the rotary
/// table every layer shares is one).
pub fn mistral_measured(engine: &Engine) -> Result<u64> {
    measured_bytes(&engine.pipeline)
}

/// The bytes each Mimi stage holds, by declaration path.
pub fn mimi_measured(model: &mimi::Mimi) -> Result<Vec<(String, u64)>> {
    let stages = |part: &str, stages: &[Box<dyn mimi::Stage>]| -> Result<Vec<(String, u64)>> {
        stages
            .iter()
            .enumerate()
            .map(|(i, stage)| {
                let name = if i == 0 && part == "encoder" || i == 1 && part == "decoder" {
                    "prev_frames"
                } else {
                    "kv_cache"
                };
                Ok((format!("{part}.{i}.{name}"), measured_bytes(&**stage)?))
            })
            .collect()
    };
    let mut all = stages("encoder", &model.encoder)?;
    all.extend(stages("decoder", &model.decoder)?);
    Ok(all)
}

/// The census of the mistral.rs-style engine, driven to its peak, with the
/// engine's own structure set apart (its `Vec`s of layers and of caches,
/// reached as mistral.rs's callers reach them, through `as_any`). Needs
/// `kv_candle::census::CountingAlloc` as the binary's global allocator.
pub fn mistral_census() -> Result<Counted<Engine>> {
    let mut counted = Census::new().run(
        || census_weights(DType::F32, &Device::Cpu, mistral_engine_from),
        mistral_engine_from,
        |engine| drive_mistral(engine),
    )?;
    let Ok(pipeline) = counted.model.pipeline.lock() else {
        candle_core::bail!("the pipeline is poisoned")
    };
    let Some(model) = pipeline
        .as_any()
        .downcast_ref::<NormalPipeline>()
        .and_then(|pipeline| pipeline.model().as_any().downcast_ref::<mistral::Mistral>())
    else {
        candle_core::bail!("not the mistral pipeline")
    };
    counted.report.set_apart("layers", model.layers())?;
    let crate::engine::layers::cache::EitherCache::Normal(cache) = &model.cache;
    let Ok(cache) = cache.lock() else {
        candle_core::bail!("the cache is poisoned")
    };
    counted.report.set_apart("caches", &cache.0)?;
    drop(cache);
    drop(pipeline);
    Ok(counted)
}

/// The census of the llama model and its `Cache`, with the model's blocks
/// set apart.
pub fn llama_census() -> Result<Counted<(llama::Llama, llama::Cache)>> {
    let mut counted = Census::new().run(
        || census_weights(DType::F32, &Device::Cpu, llama_from),
        llama_from,
        |(model, cache)| drive_llama(model, cache),
    )?;
    counted
        .report
        .set_apart("blocks", counted.model.0.blocks())?;
    Ok(counted)
}

/// The census of the Mimi-style codec, with its boxed stages set apart.
pub fn mimi_census() -> Result<Counted<mimi::Mimi>> {
    let mut counted = Census::new().run(
        || census_weights(DType::F32, &Device::Cpu, mimi_from),
        mimi_from,
        drive_mimi,
    )?;
    let model = &counted.model;
    for stage in model.encoder.iter().chain(&model.decoder) {
        counted.report.set_apart_boxed("stage", &**stage)?;
    }
    Ok(counted)
}
